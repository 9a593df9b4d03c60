"""The cluster allocator: workers in several processes, over ZeroMQ.

A cluster is ``processes`` processes of ``workers`` threads each; worker
``process * workers + thread``.  Within a process, workers exchange batches
by reference, exactly as :class:`~timelypy.communication.allocator.ProcessAllocator`
does.  Between processes:

**Sockets.**  Each process binds one ``ROUTER`` socket at *its own*
configured address and nothing else.  Each worker thread owns one
``DEALER`` per remote process for sending, so sending needs no lock and the
messages from one worker to one process travel over one connection: FIFO per
pair of workers, which the progress protocol needs.  The ``ROUTER`` is
drained by whichever local worker steps (under a lock) and its messages are
dispatched into the local workers' mailboxes.  There is no network thread:
a worker pumps the network when it steps or parks, so no message waits for
a thread switch (under the GIL that can take milliseconds).

**Batches.**  A batch for a remote worker is encoded at once (so a record
the codec cannot carry raises inside the operator that sent it, naming it)
and buffered per destination process; buffers are sent when they pass
:data:`FLUSH_BYTES` and at the end of every worker step, as one multipart
message per destination.

**Authentication.**  Every process must know the cluster's shared secret
(``TIMELYPY_SECRET`` or the file named by ``TIMELYPY_SECRET_FILE``; the
launcher makes one per run).  ZeroMQ CURVE keys are derived from the secret
and the run's tag, and every socket requires them, so a connection without
the secret fails its handshake inside libzmq -- before a single byte of it
reaches Python, let alone a decoder.  Rejected handshakes are logged and the
computation goes on.

**Start-up.**  Processes may start in any order: each sends ``HELLO`` to
every peer over a control connection (ZeroMQ retries connections) and
waits, up to ``connect_timeout`` seconds, for a ``HELLO`` from every peer;
then it names the addresses it never heard from.

**Failure.**  Control connections use libzmq heartbeats, which run in
libzmq's own threads: a peer that dies (even ``kill -9``) or stops
answering is disconnected within :data:`HEARTBEAT_TIMEOUT` seconds, and the
disconnection of a peer that did not say ``GOODBYE`` aborts every local
worker with a :class:`~timelypy.errors.ClusterError` naming it.  A process
whose worker raises sends ``ABORT`` with the error to every peer before
exiting.  A process that completes says ``GOODBYE`` and closes its sockets.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket as _socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from timelypy.communication.allocator import LocalMailboxes, ProcessShared, Push, waking_pusher
from timelypy.communication.codec import Codec, make_codec
from timelypy.communication.config import Config, parse_address
from timelypy.errors import ClusterError, ConfigError, WorkerAborted

__all__ = [
    "ClusterNetwork",
    "ClusterAllocator",
    "execute_cluster",
    "run_cluster",
    "load_secret",
    "run_tag",
    "curve_keys",
    "SECRET_ENV",
    "SECRET_FILE_ENV",
]

log = logging.getLogger("timelypy.cluster")

R = TypeVar("R")

#: Environment variable holding the cluster's shared secret.
SECRET_ENV = "TIMELYPY_SECRET"
#: Environment variable naming a file that holds the shared secret.
SECRET_FILE_ENV = "TIMELYPY_SECRET_FILE"
#: Environment variable overriding the start-up timeout (seconds).
CONNECT_TIMEOUT_ENV = "TIMELYPY_CONNECT_TIMEOUT"
#: Environment variable naming the run; its tag salts the keys and routing ids
#: (the Spark backend passes ``run=`` per execution instead).
RUN_ENV = "TIMELYPY_RUN"

#: Default seconds to wait for every peer at start-up.
CONNECT_TIMEOUT = 30.0
#: Seconds between heartbeats on control connections.
HEARTBEAT_INTERVAL = 0.3
#: Seconds without an answer after which a peer is considered lost.
HEARTBEAT_TIMEOUT = 1.5
#: Seconds a disconnected peer has to show it said goodbye before it counts as lost.
GOODBYE_GRACE = 0.5
#: Buffered bytes (for all destinations of a worker) that trigger a send before the step ends.
FLUSH_BYTES = 1 << 18
#: Seconds a closing socket may spend delivering what is queued.
LINGER_SECONDS = 2.0

_HELLO, _GOODBYE, _ABORT, _DATA = 1, 2, 3, 4
_HANDSHAKE_FAILURES = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "wrong keys",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol or security mechanism mismatch",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake failed",
}
_KIND_BATCH, _KIND_OBJECT = 0, 1
# Plain ints for the receive path: pyzmq's constants are enum members, and
# combining them costs more Python calls than the socket query itself.
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_NOBLOCK = int(zmq.NOBLOCK)

_ENTRY = struct.Struct("<IIIB")  # channel, source worker, destination worker, payload kind


def load_secret(environ: dict[str, str] | None = None) -> bytes:
    """Read the cluster secret from ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE``."""
    env = os.environ if environ is None else environ
    value = env.get(SECRET_ENV)
    if value:
        return value.encode()
    path = env.get(SECRET_FILE_ENV)
    if path:
        try:
            data = Path(path).read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the cluster secret file {path!r} ({SECRET_FILE_ENV}): "
                f"{exc.strerror or exc}"
            ) from None
        if not data:
            raise ConfigError(f"the cluster secret file {path!r} is empty")
        return data
    raise ConfigError(
        "a multi-process run needs a shared secret so that peers can prove they belong to "
        f"the cluster: start it with `python -m timelypy.launch`, or set {SECRET_ENV} (or "
        f"{SECRET_FILE_ENV}) to the same value in every process"
    )


def run_tag(secret: bytes, run: str) -> bytes:
    """The 8-byte tag of a run (and execution): it prefixes routing ids and salts the keys."""
    return hashlib.sha256(b"timelypy-run\0" + run.encode() + b"\0" + secret).digest()[:8]


def curve_keys(secret: bytes, tag: bytes) -> tuple[bytes, bytes]:
    """A CURVE key pair derived from the shared secret and run tag (same in every process)."""
    seed = hashlib.sha256(b"timelypy-curve-v1\0" + tag + b"\0" + secret).digest()
    secret_key = z85.encode(seed)
    return zmq.curve_public(secret_key), secret_key


def _resolve(address: str) -> tuple[str, int]:
    host, port = parse_address(address, allow_any_port=True)
    try:
        infos = _socket.getaddrinfo(host, port, _socket.AF_INET, _socket.SOCK_STREAM)
    except _socket.gaierror:
        infos = []
    if infos:
        return str(infos[0][4][0]), port
    try:
        infos = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)
    except _socket.gaierror as exc:
        raise ConfigError(f"cannot resolve host {host!r} of address {address!r}: {exc}") from None
    ip = str(infos[0][4][0])
    return (f"[{ip}]" if ":" in ip else ip), port


class ClusterNetwork:
    """One process's sockets: its ROUTER, control connections, and dispatch."""

    def __init__(
        self,
        config: Config,
        secret: bytes,
        *,
        run: str | None = None,
        connect_timeout: float | None = None,
        bind: str | None = None,
    ) -> None:
        """Bind this process's socket and connect to its peers.

        ``bind`` overrides the address to listen on (``host:0`` picks a free
        port, see :attr:`endpoint`); then peers' addresses may be supplied
        later with :meth:`connect` (``config.addresses`` is not used).
        """
        self.config = config
        self.process = config.process_index
        self.processes = config.processes
        self.workers = config.workers
        self.peers = config.peers
        if connect_timeout is None:
            connect_timeout = float(os.environ.get(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT))
        self.connect_timeout = connect_timeout
        run = os.environ.get(RUN_ENV, "") if run is None else run
        self.run = run
        self.tag = run_tag(secret, run)
        self.codec: Codec = make_codec(config.serializer)
        self.shared = ProcessShared(config.workers)
        self.first_worker = self.process * self.workers
        self._public, self._secret = curve_keys(secret, self.tag)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        # (peer, connection) pairs heard from: connection 0 is the control one,
        # connection t + 1 that of the peer's worker thread t.
        self._hello: set[tuple[int, int]] = set()
        self._worker_dealers: dict[int, dict[int, zmq.Socket[bytes]]] = {}
        #: Peers every connection of which said HELLO.
        self._hello_done: set[int] = set()
        self._departed: set[int] = set()
        self._leaving = False
        #: When this process or a peer first said goodbye (half-open connections follow).
        self._farewell_at: float | None = None
        self._closed = False
        self._control: dict[int, zmq.Socket[bytes]] = {}
        self._monitors: dict[zmq.Socket[bytes], int] = {}
        self.addresses: tuple[str, ...] = ()
        self._endpoints: list[str] = []
        self.context = zmq.Context()
        try:
            if bind is None:
                addresses = config.resolved_addresses()
                self._router = self._bind(addresses[self.process])
                self.connect(addresses)
            else:
                self._router = self._bind(bind)
            self._router_monitor = self._router.get_monitor_socket(
                zmq.EVENT_ACCEPTED
                | zmq.EVENT_HANDSHAKE_SUCCEEDED
                | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                | zmq.EVENT_DISCONNECTED
            )
            self._poller = zmq.Poller()
            self._poller.register(self._router, zmq.POLLIN)
            self._watchdog: _Watchdog | None = None
        except BaseException:
            self.context.destroy(linger=0)
            raise

    def connect(self, addresses: Sequence[str]) -> None:
        """Connect control connections to every peer's ``host:port``."""
        if self._endpoints:
            raise ClusterError(f"process {self.process} is already connected to its peers")
        if len(addresses) != self.processes:
            raise ConfigError(
                f"{self.processes} processes need {self.processes} addresses, got {len(addresses)}"
            )
        self.addresses = tuple(addresses)
        for address in addresses:
            ip, port = _resolve(address)
            self._endpoints.append(f"tcp://{ip}:{port}")
        for peer in range(self.processes):
            if peer != self.process:
                sock = self._dealer(b"c")
                sock.setsockopt(zmq.HEARTBEAT_IVL, int(HEARTBEAT_INTERVAL * 1000))
                sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(HEARTBEAT_TIMEOUT * 1000))
                sock.setsockopt(zmq.HEARTBEAT_TTL, int(HEARTBEAT_TIMEOUT * 1000))
                monitor = sock.get_monitor_socket(
                    zmq.EVENT_DISCONNECTED
                    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                )
                sock.connect(self._endpoints[peer])
                self._control[peer] = sock
                self._monitors[monitor] = peer

    # -- sockets ----------------------------------------------------------------

    def _bind(self, address: str) -> zmq.Socket[bytes]:
        router = self.context.socket(zmq.ROUTER)
        router.curve_server = True
        router.curve_secretkey = self._secret
        router.curve_publickey = self._public
        router.setsockopt(zmq.RCVHWM, 0)
        router.setsockopt(zmq.LINGER, 0)
        ip, port = _resolve(address)
        try:
            if port == 0:
                port = router.bind_to_random_port(f"tcp://{ip}")
            else:
                router.bind(f"tcp://{ip}:{port}")
        except zmq.ZMQError as exc:
            router.close(0)
            if exc.errno == zmq.EADDRINUSE:
                raise ClusterError(
                    f"process {self.process} cannot listen on {address} (tcp://{ip}:{port}): "
                    "the port is already in use; pick another port in the host file or stop "
                    "the other program"
                ) from None
            raise ClusterError(
                f"process {self.process} cannot listen on {address} (tcp://{ip}:{port}): {exc}"
            ) from None
        #: The ``host:port`` this process listens on.
        self.endpoint = f"{ip}:{port}"
        return router

    def _dealer(self, role: bytes) -> zmq.Socket[bytes]:
        sock = self.context.socket(zmq.DEALER)
        sock.curve_serverkey = self._public
        sock.curve_publickey = self._public
        sock.curve_secretkey = self._secret
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.LINGER, int(LINGER_SECONDS * 1000))
        sock.setsockopt(zmq.ROUTING_ID, self.tag + b":%d:" % self.process + role)
        return sock

    def worker_dealers(self, thread: int) -> dict[int, zmq.Socket[bytes]]:
        """Worker thread ``thread``'s DEALERs, one per remote process.

        They are made and authenticated during :meth:`handshake` (so no worker
        connection is ever left half-open), then handed to the thread.
        """
        dealers = self._worker_dealers.get(thread)
        if dealers is None:
            dealers = self._worker_dealers[thread] = {}
            for peer in range(self.processes):
                if peer != self.process:
                    sock = self._dealer(b"w%d" % thread)
                    sock.connect(self._endpoints[peer])
                    dealers[peer] = sock
        return dealers

    def process_of(self, worker: int) -> int:
        """The process that runs global worker ``worker``."""
        return worker // self.workers

    # -- start-up and shut-down -------------------------------------------------

    def _control_send(
        self, kind: int, body: bytes = b"", peers: Sequence[int] | None = None
    ) -> None:
        header = struct.pack("<BI", kind, self.process)
        with self._send_lock:
            for peer in self._control if peers is None else peers:
                if peer in self._departed:
                    continue
                try:
                    self._control[peer].send_multipart([header, body], flags=zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass

    def handshake(self) -> None:
        """Start watching connections; wait until every peer said HELLO (or name the silent)."""
        if self._watchdog is None:
            self._watchdog = _Watchdog(self)
            self._watchdog.start()
        if self.processes == 1:
            return
        self._control_send(_HELLO)
        # Every worker connection says HELLO too, so that once everyone heard
        # from everyone, every connection has finished its CURVE handshake.
        with self._send_lock:
            for thread in range(self.workers):
                header = struct.pack("<BII", _HELLO, self.process, thread + 1)
                for sock in self.worker_dealers(thread).values():
                    sock.send_multipart([header, b""], flags=zmq.NOBLOCK)
        deadline = time.monotonic() + self.connect_timeout
        expected = {
            (peer, connection)
            for peer in range(self.processes)
            if peer != self.process
            for connection in range(self.workers + 1)
        }
        while not expected <= self._hello:
            self._hello_done = {
                p for p in range(self.processes)
                if all((p, c) in self._hello for c in range(self.workers + 1))
            }
            self.check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted({peer for peer, _ in expected - self._hello})
                raise ClusterError(
                    f"process {self.process} heard nothing from process(es) {missing} at "
                    f"{', '.join(self.addresses[p] for p in missing)} within "
                    f"{self.connect_timeout:g} s: are they running, with the same host file "
                    f"and secret, and reachable from {self.addresses[self.process]}?"
                )
            self.pump(min(remaining, 0.1), wait=True)
        self._hello_done = set(range(self.processes)) - {self.process}

    def goodbye(self) -> None:
        """Tell every peer this process is done (a disconnection is then expected)."""
        self._leaving = True
        if self._farewell_at is None:
            self._farewell_at = time.monotonic()
        self._control_send(_GOODBYE)

    def announce_failure(self, error: BaseException) -> None:
        """Tell every peer this process failed, with the error's description."""
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
        notes = getattr(error, "__notes__", None)
        if notes:
            text += " (" + "; ".join(notes) + ")"
        self._control_send(_ABORT, text.encode("utf-8", "replace"))

    def close(self) -> None:
        """Close every socket; wait (bounded) for queued messages to be delivered."""
        if self._closed:
            return
        self._closed = True
        # Order matters: libzmq's I/O thread may be sending a monitor event while
        # holding the monitor's lock, so monitors are disabled while the watchdog
        # still reads them, and their readers are closed only afterwards.
        for sock in (*self._control.values(), self._router):
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
        if self._watchdog is not None:
            self._watchdog.stop()
        for monitor in list(self._monitors):
            monitor.close(0)
        self._router_monitor.close(0)
        failed = self.shared.failure is not None
        for dealers in self._worker_dealers.values():
            for peer, sock in dealers.items():
                lost = peer in self._departed or (failed and peer not in self._hello_done)
                sock.close(0 if lost else int(LINGER_SECONDS * 1000))
        for peer, sock in self._control.items():
            sock.close(0 if peer in self._departed else int(LINGER_SECONDS * 1000))
        self._router.close(0)
        # term() waits for every socket of the context; a worker thread stuck in
        # user code would make it wait forever, so wait in a helper thread, bounded.
        terminator = threading.Thread(target=self.context.term, daemon=True)
        terminator.start()
        terminator.join(LINGER_SECONDS + 1.0)
        if terminator.is_alive():
            log.warning(
                "process %d: sockets still open after %.0f s (a worker thread did not stop); "
                "leaving them to the process exit", self.process, LINGER_SECONDS + 1.0,
            )

    # -- receiving --------------------------------------------------------------

    def check(self) -> None:
        """Raise the recorded failure, if any."""
        failure = self.shared.failure
        if failure is not None:
            raise failure

    def pump(self, timeout: float, *, wait: bool = False) -> bool:
        """Receive and dispatch whatever arrived, waiting up to ``timeout`` s for something.

        Returns whether it pumped (another worker may be pumping already).
        """
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            if self._closed:
                return True
            router = self._router
            if timeout > 0:
                ready = bool(self._poller.poll(int(timeout * 1000)))
            else:
                # Asking for the socket's state costs less than a receive that fails
                # with an exception, which most non-blocking pumps would be.
                ready = bool(router.getsockopt(_EVENTS) & _POLLIN)
            if ready:
                while True:
                    try:
                        frames = router.recv_multipart(flags=_NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._dispatch(frames)
            return True
        finally:
            self._lock.release()

    def _dispatch(self, frames: list[Any]) -> None:
        routing = frames[0].bytes
        if not routing.startswith(self.tag):
            log.warning("process %d ignored a message from another run", self.process)
            return
        header = frames[1].bytes
        kind = header[0]
        if kind == _DATA:
            self._deliver(header, frames)
            return
        sender = struct.unpack_from("<I", header, 1)[0]
        if kind == _HELLO:
            connection = struct.unpack_from("<I", header, 5)[0] if len(header) >= 9 else 0
            self._hello.add((sender, connection))
        elif kind == _GOODBYE:
            self._departed.add(sender)
            if self._farewell_at is None:
                self._farewell_at = time.monotonic()
        elif kind == _ABORT:
            text = frames[2].bytes.decode("utf-8", "replace")
            self._departed.add(sender)
            self.shared.abort(
                ClusterError(f"process {sender} at {self.addresses[sender]} failed: {text}"),
                None,
            )

    def _deliver(self, header: bytes, frames: list[Any]) -> None:
        shared = self.shared
        codec = self.codec
        first = self.first_worker
        count = (len(header) - 1) // _ENTRY.size
        for i in range(count):
            offset = 1 + i * _ENTRY.size
            channel, _source, target, payload_kind = _ENTRY.unpack_from(header, offset)
            payload = frames[2 + i].buffer
            if payload_kind == _KIND_BATCH:
                message = codec.decode_batch(payload)
            else:
                message = codec.decode(payload)
            local = target - first
            shared.mailbox(channel, target).append(message)
            shared.events[local].append(channel)
            shared.wakers[local].set()


class _Watchdog(threading.Thread):
    """Reads every monitor socket of a process, in its own thread.

    It turns control connections that drop without a goodbye into a
    :class:`~timelypy.errors.ClusterError` (after :data:`GOODBYE_GRACE`),
    and logs connections that never authenticated.  Being a thread that
    blocks in ``poll`` (releasing the GIL), it keeps up even while every
    worker is busy in user code, so a flood of strangers cannot fill the
    monitor pipes and stall libzmq (and with it the heartbeats), and a lost
    peer is noticed within the heartbeat bound whatever the workers do.
    """

    #: Rejected connections are warned about one by one, up to WARN_BURST per
    #: window; the rest are counted and summarised when the window ends.  The
    #: window starts at WARN_WINDOW seconds and doubles (up to WARN_MAX_WINDOW)
    #: while rejections keep coming, so a persistent stranger cannot flood the log.
    WARN_WINDOW = 2.0
    WARN_MAX_WINDOW = 60.0
    WARN_BURST = 3

    def __init__(self, network: ClusterNetwork) -> None:
        super().__init__(name=f"timelypy-watchdog-{network.process}", daemon=True)
        self.network = network
        self._stopping = threading.Event()
        # A pair of inproc sockets wakes the thread at once when it must stop.
        address = f"inproc://timelypy-watchdog-{id(self)}"
        self._wake_receiver = network.context.socket(zmq.PAIR)
        self._wake_receiver.bind(address)
        self._wake_sender = network.context.socket(zmq.PAIR)
        self._wake_sender.connect(address)
        self._suspects: dict[int, float] = {}
        # fd -> (endpoint, handshakes ended before it was accepted)
        self._accepted: dict[int, tuple[str, int]] = {}
        self._handshakes = 0
        self._doubtful: list[tuple[float, str, str]] = []
        self._window_start = 0.0
        self._window = self.WARN_WINDOW
        self._warned = 0
        self._suppressed = 0

    def stop(self) -> None:
        """Stop and wait (bounded) for the thread; report what is still in doubt."""
        self._stopping.set()
        self._wake_sender.send(b"", flags=zmq.NOBLOCK)
        self.join(2.0)
        self._wake_sender.close(0)
        if not self.is_alive():
            self._wake_receiver.close(0)
            if self._doubtful:
                self._judge(final=True)

    def run(self) -> None:
        network = self.network
        poller = zmq.Poller()
        poller.register(network._router_monitor, zmq.POLLIN)
        poller.register(self._wake_receiver, zmq.POLLIN)
        for monitor in network._monitors:
            poller.register(monitor, zmq.POLLIN)
        while not self._stopping.is_set():
            try:
                ready = dict(poller.poll(100))
                for sock in ready:
                    if sock is not self._wake_receiver:
                        self._drain(sock)
            except zmq.ZMQError:
                if self._stopping.is_set():
                    return
                raise
            self._age()
            if self._doubtful:
                self._judge()
            elif self._suppressed:
                self._flush_summary(time.monotonic())

    def _drain(self, sock: zmq.Socket[bytes]) -> None:
        network = self.network
        peer = network._monitors.get(sock)
        while True:
            try:
                info = parse_monitor_message(sock.recv_multipart(flags=zmq.NOBLOCK))
            except zmq.Again:
                return
            if peer is not None:
                event = info["event"]
                if event in _HANDSHAKE_FAILURES and peer not in network._hello_done:
                    network._departed.add(peer)
                    network.shared.abort(
                        ClusterError(
                            f"process {network.process} could not authenticate with process "
                            f"{peer} at {network.addresses[peer]} "
                            f"({_HANDSHAKE_FAILURES[event]}): the processes do not share the "
                            "same cluster secret (TIMELYPY_SECRET or TIMELYPY_SECRET_FILE), or "
                            "something else listens on that address"
                        ),
                        None,
                    )
                elif event == zmq.EVENT_DISCONNECTED and peer not in network._departed:
                    # A peer says GOODBYE on one connection and then closes another, so
                    # the disconnection may overtake the goodbye: give it a moment.
                    self._suspects.setdefault(peer, time.monotonic())
                continue
            event, value = info["event"], info["value"]
            endpoint = info.get("endpoint", b"").decode(errors="replace")
            # Handshake events carry no file descriptor (0, or an errno), so they
            # cannot be matched to connections; what can be told is whether *any*
            # handshake ended between a connection's accept and its disconnect.
            if event == zmq.EVENT_ACCEPTED:
                self._accepted[value] = (endpoint, self._handshakes)
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshakes += 1
            elif event in _HANDSHAKE_FAILURES:
                self._handshakes += 1
                self._reject(endpoint, _HANDSHAKE_FAILURES[event])
            elif event == zmq.EVENT_DISCONNECTED:
                accepted = self._accepted.pop(value, None)
                if accepted is not None and accepted[1] == self._handshakes:
                    # Accepted and closed with no handshake at all: bytes that are
                    # not even a ZMTP greeting end like this.
                    self._reject(accepted[0], "not a ZeroMQ peer")

    def _reject(self, endpoint: str, why: str) -> None:
        # Judge later: a peer that is shutting down may close a half-open
        # connection just before its GOODBYE reaches a worker.
        self._doubtful.append((time.monotonic(), endpoint, why))

    def _judge(self, final: bool = False) -> None:
        network = self.network
        now = time.monotonic()
        while self._doubtful and (final or now - self._doubtful[0][0] >= GOODBYE_GRACE):
            seen, endpoint, why = self._doubtful.pop(0)
            farewell = network._farewell_at
            if network.shared.failure is not None or (
                farewell is not None and farewell <= seen
            ):
                continue  # peers failing or shutting down drop half-open connections too
            self._flush_summary(now)
            if self._warned < self.WARN_BURST:
                self._warned += 1
                log.warning(
                    "process %d rejected a connection on %s: it did not authenticate with "
                    "the cluster secret (%s); the computation goes on",
                    network.process, endpoint, why,
                )
            else:
                self._suppressed += 1

    def _flush_summary(self, now: float) -> None:
        """At the end of a warning window: summarise what was held back, size the next."""
        if now - self._window_start < self._window:
            return
        if self._suppressed:
            log.warning(
                "process %d rejected a connection %d more times in the last %.0f s "
                "(peers without the cluster secret); the computation goes on",
                self.network.process, self._suppressed, self._window,
            )
            # Persistent strangers: widen the window so the log stays readable.
            self._window = min(self._window * 2, self.WARN_MAX_WINDOW)
        else:
            self._window = self.WARN_WINDOW
        self._window_start, self._warned, self._suppressed = now, 0, 0

    def _age(self) -> None:
        if not self._suspects:
            return
        network = self.network
        now = time.monotonic()
        for peer, since in list(self._suspects.items()):
            if peer in network._departed:
                del self._suspects[peer]
            elif now - since >= GOODBYE_GRACE:
                del self._suspects[peer]
                network._departed.add(peer)  # nothing more can reach it: do not linger
                network.shared.abort(
                    ClusterError(
                        f"lost process {peer} at {network.addresses[peer]}: its connection "
                        "dropped without a goodbye (the process died or stopped answering)"
                    ),
                    None,
                )


class ClusterAllocator(LocalMailboxes):
    """A worker thread's view of the cluster: local mailboxes plus remote sends."""

    def __init__(self, network: ClusterNetwork, thread: int) -> None:
        self.network = network
        self.thread = thread
        self.index = network.first_worker + thread
        self.peers = network.peers
        self.shared = network.shared
        self._events = network.shared.events[thread]
        self._waker = network.shared.wakers[thread]
        self._dealers: dict[int, zmq.Socket[bytes]] | None = None
        # destination process -> (header entries, payloads)
        self._out: dict[int, tuple[list[bytes], list[bytes]]] = {}
        self._out_bytes = 0
        self._last_encoded: tuple[Any, bytes] | None = None

    def allocate(self, channel: int, context: str | None = None) -> tuple[list[Push], deque[Any]]:
        """Pushers to every worker of the cluster on ``channel``, and this worker's mailbox."""
        network = self.network
        shared = self.shared
        first = network.first_worker
        pushers: list[Push] = []
        for worker in range(self.peers):
            local = worker - first
            if 0 <= local < network.workers:
                box = shared.mailbox(channel, worker)
                if worker == self.index:
                    pushers.append(box.append)
                else:
                    pushers.append(
                        waking_pusher(box, shared.events[local], shared.wakers[local], channel)
                    )
            else:
                pushers.append(self._remote_pusher(channel, worker, context))
        return pushers, shared.mailbox(channel, self.index)

    def _remote_pusher(self, channel: int, worker: int, context: str | None) -> Push:
        codec = self.network.codec
        process = self.network.process_of(worker)
        source = self.index
        where = context or f"channel {channel} on worker {source}"
        pack = _ENTRY.pack

        def push(message: Any) -> None:
            if process in self.network._departed:
                return
            if type(message) is tuple and len(message) == 2 and type(message[1]) is list:
                kind = _KIND_BATCH
            else:
                kind = _KIND_OBJECT
            cached = self._last_encoded
            if cached is not None and cached[0] is message:
                payload = cached[1]  # a broadcast: encode once for every destination
            else:
                if kind == _KIND_BATCH:
                    payload = codec.encode_batch(message[0], message[1], context=where)
                else:
                    payload = codec.encode(message, context=where)
                self._last_encoded = (message, payload)
            entry = pack(channel, source, worker, kind)
            out = self._out.get(process)
            if out is None:
                out = self._out[process] = ([], [])
            out[0].append(entry)
            out[1].append(payload)
            self._out_bytes += len(payload)
            if self._out_bytes >= FLUSH_BYTES:
                self.release()

        return push

    def receive(self) -> None:
        """Dispatch whatever arrived from other processes (unless another worker is)."""
        self.network.pump(0)

    def await_events(self, timeout: float | None) -> None:
        """Park until a message arrives, a failure is recorded, or ``timeout`` passes."""
        self.release()
        waker = self._waker
        waker.clear()
        if self._events or self.shared.failure is not None:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        # Alone in the process, poll the network for the whole wait; otherwise in
        # short slices so that local wake-ups are noticed promptly.
        slice_ = 0.25 if self.network.workers == 1 else 0.005
        while not self._events and self.shared.failure is None:
            remaining = slice_ if deadline is None else min(slice_, deadline - time.monotonic())
            if remaining <= 0:
                return
            if not self.network.pump(remaining, wait=self.network.workers == 1):
                waker.wait(remaining)

    def release(self) -> None:
        """Send the buffered batches, one multipart message per destination process."""
        if not self._out:
            return
        dealers = self._dealers
        if dealers is None:
            dealers = self._dealers = self.network.worker_dealers(self.thread)
        out = self._out
        self._out = {}
        self._out_bytes = 0
        self._last_encoded = None
        for process, (entries, payloads) in out.items():
            header = bytes([_DATA]) + b"".join(entries)
            try:
                dealers[process].send_multipart([header, *payloads], copy=False)
            except zmq.ZMQError as exc:
                raise ClusterError(
                    f"worker {self.index} could not send to process {process} at "
                    f"{self.network.addresses[process]}: {exc}"
                ) from None

    def check(self) -> None:
        """Raise if this process or a peer failed."""
        shared = self.shared
        failure = shared.failure
        if failure is not None:
            if isinstance(failure, ClusterError):
                raise failure
            if shared.failed_worker != self.index:
                raise WorkerAborted(
                    f"worker {self.index} stopped because worker {shared.failed_worker} failed: "
                    f"{type(failure).__name__}: {failure}"
                )

    def close(self) -> None:
        """Send what is buffered (the network closes the sockets)."""
        if self.shared.failure is None and not self.network._closed:
            self.release()


def execute_cluster(config: Config, func: Callable[[Any], R]) -> list[R]:
    """Run this process's share of a cluster computation; see the module documentation.

    Returns this process's workers' results, in worker order.  Raises the
    first failure: this process's own worker error, or a
    :class:`~timelypy.errors.ClusterError` for a lost or failed peer.
    """
    network = ClusterNetwork(config, load_secret())
    return run_cluster(network, func)


def run_cluster(
    network: ClusterNetwork,
    func: Callable[[Any], R],
    report: Callable[[BaseException], Any] | None = None,
) -> list[R]:
    """Wait for every peer, run ``func`` on this process's workers, then close ``network``.

    ``network`` must already be connected to its peers (:meth:`ClusterNetwork.connect`).
    ``report(error)`` is called with this process's own failure before the
    peers are told about it (the Spark driver learns the root cause first).
    """
    from timelypy.execute import _annotate, run_threads, run_worker
    from timelypy.worker import Worker

    config = network.config
    allocators = [ClusterAllocator(network, thread) for thread in range(config.workers)]
    try:
        network.handshake()
        if config.workers == 1:
            worker = Worker(allocators[0], config)
            try:
                results = [run_worker(worker, func)]
            except BaseException as exc:
                if not isinstance(exc, WorkerAborted | ClusterError):
                    _annotate(exc, worker.index)
                    allocators[0].abort(exc)
                raise
        else:
            results = run_threads(allocators, config, func)
        for allocator in allocators:
            allocator.release()
        network.goodbye()
        return results
    except BaseException as exc:
        failure = network.shared.failure
        if not isinstance(failure, ClusterError) and not isinstance(exc, ClusterError):
            own = failure if failure is not None else exc
            if report is not None:
                try:
                    report(own)
                except Exception:
                    log.debug("could not report the failure", exc_info=True)
            network.announce_failure(own)
        if isinstance(exc, WorkerAborted) and isinstance(failure, ClusterError):
            raise failure from None
        raise
    finally:
        for allocator in allocators:
            try:
                allocator.close()
            except Exception:
                log.debug("error while closing worker sockets", exc_info=True)
        network.close()
