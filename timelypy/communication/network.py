"""One process's network: its sockets, the start-up handshake, dispatch, goodbye.

A cluster is ``processes`` processes of ``workers`` threads each; worker
``process * workers + thread``.  :class:`ClusterNetwork` is what one process
holds of it (the worker threads' side is
:class:`~timelypy.communication.cluster.ClusterAllocator`).

**Sockets.**  Each process binds one ``ROUTER`` socket at *its own*
configured address and nothing else.  It connects one *control* ``DEALER``
to every peer (start-up, goodbye, failures; libzmq heartbeats run on it),
and each worker thread owns one ``DEALER`` per remote process for its data,
so sending needs no lock and the messages from one worker to one process
travel over one connection: FIFO per pair of workers, which the progress
protocol needs.  Every socket is CURVE-authenticated with the keys of
:mod:`timelypy.communication.secret`; the messages are those of
:mod:`timelypy.communication.wire`.

**Receiving.**  There is no network thread: the ``ROUTER`` is drained by
whichever local worker steps or parks (:meth:`ClusterNetwork.pump`, under a
lock), and its messages are dispatched into the local workers' mailboxes,
so no message waits for a thread switch (under the GIL that can take
milliseconds).

**Start-up.**  Processes may start in any order: each says ``HELLO`` on
every connection to every peer (ZeroMQ retries connections) and waits, up
to ``connect_timeout`` seconds, for a ``HELLO`` on every connection from
every peer *and* for its own control connection to every peer to have
finished its CURVE handshake (:meth:`ClusterNetwork.handshake`); then it
names the addresses it never heard from.  Once it has heard from everyone,
every CURVE handshake has succeeded, and every peer is watched by a
heartbeat: hearing a peer's HELLOs does not mean this process's own
connection to it is up (it may still be waiting to retry), and a peer lost
in that moment would otherwise go unnoticed for ever.  A ``HELLO`` also
carries the sender's ``-n`` and ``-w``: a peer started with others is
refused at once, by name.

**Failure and shut-down.**  A process whose worker raises sends ``ABORT``
with the error's text to every peer (:meth:`ClusterNetwork.announce_failure`);
a process that completes says ``GOODBYE`` (:meth:`ClusterNetwork.goodbye`).
Either way it then closes its sockets, waiting a bounded time for queued
messages (:meth:`ClusterNetwork.close`).  The
:class:`~timelypy.communication.watchdog.Watchdog` thread turns peers that
disappear without a goodbye into a :class:`~timelypy.errors.ClusterError`:
a loss seen on any of a peer's connections counts, those it made to this
process's ``ROUTER`` included (each is known by the file descriptor its
``HELLO`` came in on), and before judging, the watchdog reads what waits
in the ``ROUTER`` itself (:meth:`ClusterNetwork.drain`), so a ``GOODBYE``
that nobody read because every worker was busy (a slow last commit) is
seen before the disconnection is held against its sender.
Every failure, wherever it is noticed, is recorded in the process's
:class:`~timelypy.communication.allocator.ProcessShared`, which wakes every
local worker.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import zmq
from zmq import zmq_poll

from timelypy.communication.allocator import ProcessShared
from timelypy.communication.codec import Codec, make_codec
from timelypy.communication.config import Config
from timelypy.communication.secret import RUN_ENV, admit_only, curve_keys, run_tag
from timelypy.communication.watchdog import Watchdog
from timelypy.communication.wire import (
    ABORT,
    AUTH_FAILURE_LINGER,
    CONNECT_TIMEOUT,
    CONNECT_TIMEOUT_ENV,
    CONTROL,
    DATA,
    DATA_HEADER,
    ENTRY,
    GOODBYE,
    GOODBYE_GRACE,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    HELLO,
    HELLO_MESSAGE,
    HELLO_SHAPE,
    KIND_BATCH,
    KIND_PROGRESS,
    LINGER_SECONDS,
    NOBLOCK,
    RECONNECT_INTERVAL,
    RECONNECT_INTERVAL_MAX,
    WIRE_VERSION,
    resolve,
    unpack_progress,
)
from timelypy.errors import ClusterError, ConfigError

__all__ = ["ClusterNetwork"]

log = logging.getLogger("timelypy.cluster")


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

        ``run`` names the run (default ``TIMELYPY_RUN``, or empty); its tag
        salts the keys.  ``connect_timeout`` bounds :meth:`handshake`
        (default ``TIMELYPY_CONNECT_TIMEOUT``, or 30 s).  ``bind`` overrides
        the address to listen on (``host:0`` picks a free port, see
        :attr:`endpoint`); then peers' addresses may be supplied later with
        :meth:`connect` (``config.addresses`` is not used).
        """
        #: The configuration of the whole cluster; this is process ``config.process_index``.
        self.config = config
        #: This process's index.
        self.process = config.process_index
        #: The number of processes.
        self.processes = config.processes
        #: Worker threads per process.
        self.workers = config.workers
        #: The number of workers in the cluster.
        self.peers = config.peers
        if connect_timeout is None:
            connect_timeout = float(os.environ.get(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT))
        #: Seconds :meth:`handshake` waits for every peer.
        self.connect_timeout = connect_timeout
        run = os.environ.get(RUN_ENV, "") if run is None else run
        #: The run's name.
        self.run = run
        #: The run's tag: it prefixes every routing id.
        self.tag = run_tag(secret, run)
        #: How records travel between processes.
        self.codec: Codec = make_codec(config.serializer)
        #: What the local worker threads share: mailboxes, wake-ups, the first failure.
        self.shared = ProcessShared(config.workers)
        #: The global index of this process's first worker.
        self.first_worker = self.process * self.workers
        self._public, self._secret = curve_keys(secret, self.tag)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        # (peer, connection) pairs heard from: connection 0 is the control one,
        # connection t + 1 that of the peer's worker thread t.
        self._hello: set[tuple[int, int]] = set()
        #: Routing ids of the connections that said HELLO in this wire protocol.
        self._greeted: set[bytes] = set()
        self._worker_dealers: dict[int, dict[int, zmq.Socket[bytes]]] = {}
        self._joined: set[int] = set()
        # Peers whose control connection (this process's DEALER) finished its handshake.
        self._control_ready: set[int] = set()
        # The peer behind each connection to the ROUTER that said HELLO, by its descriptor.
        self._connections: dict[int, int] = {}
        self._linger_on_close = False
        # Never replaced, only added to: allocators keep a reference to it.
        self._departed: set[int] = set()
        self._farewell_at: float | None = None
        self._closed = False
        self._control: dict[int, zmq.Socket[bytes]] = {}
        self._monitors: dict[zmq.Socket[bytes], int] = {}
        #: Every process's ``host:port``, in process order (empty until connected).
        self.addresses: tuple[str, ...] = ()
        self._endpoints: list[str] = []
        #: The ZeroMQ context of every socket of this process.
        self.context = zmq.Context()
        # Only peers holding the secret's own key pair are admitted (not merely its public key).
        self._auth = admit_only(self.context, self._public)
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
            # zmq_poll itself: a Poller would add a Python call to every poll.
            self._poll_items = [(self._router, int(zmq.POLLIN))]
            self._watchdog: Watchdog | None = None
        except BaseException:
            self._auth.stop()
            self.context.destroy(linger=0)
            raise

    def connect(self, addresses: Sequence[str]) -> None:
        """Connect control connections to every peer's ``host:port`` (in process order)."""
        if self._endpoints:
            raise ClusterError(f"process {self.process} is already connected to its peers")
        if len(addresses) != self.processes:
            raise ConfigError(
                f"{self.processes} processes need {self.processes} addresses, got {len(addresses)}"
            )
        self.addresses = tuple(addresses)
        for address in addresses:
            ip, port = resolve(address)
            self._endpoints.append(f"tcp://{ip}:{port}")
        for peer in range(self.processes):
            if peer != self.process:
                sock = self._dealer(b"c")
                sock.setsockopt(zmq.HEARTBEAT_IVL, int(HEARTBEAT_INTERVAL * 1000))
                sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(HEARTBEAT_TIMEOUT * 1000))
                sock.setsockopt(zmq.HEARTBEAT_TTL, int(HEARTBEAT_TIMEOUT * 1000))
                monitor = sock.get_monitor_socket(
                    zmq.EVENT_DISCONNECTED
                    | zmq.EVENT_HANDSHAKE_SUCCEEDED
                    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                )
                sock.connect(self._endpoints[peer])
                self._control[peer] = sock
                self._monitors[monitor] = peer

    # -- what the watchdog and the allocators read --------------------------------

    @property
    def departed(self) -> AbstractSet[int]:
        """Peers that said goodbye, failed or were lost: nothing more is sent to them.

        Always the same (growing) set, so a reference to it stays current.
        """
        return self._departed

    @property
    def joined(self) -> AbstractSet[int]:
        """Peers that said ``HELLO`` on every connection (all their handshakes succeeded)."""
        return self._joined

    @property
    def farewell_at(self) -> float | None:
        """When (``time.monotonic()``) this process or a peer first said goodbye, if one did.

        From then on, peers drop half-open connections as they leave.
        """
        return self._farewell_at

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def router_monitor(self) -> zmq.Socket[bytes]:
        """The monitor of this process's ROUTER: accepted, authenticated, rejected connections."""
        return self._router_monitor

    @property
    def control_monitors(self) -> Mapping[zmq.Socket[bytes], int]:
        """The monitor of each control connection, mapped to the peer it connects to."""
        return self._monitors

    def lose_peer(self, peer: int, error: ClusterError, *, refused_keys: bool = False) -> None:
        """Count ``peer`` as gone (send it nothing more); stop every local worker with ``error``.

        ``refused_keys``: the peer answered with other keys (another secret);
        this process then keeps listening for
        :data:`~timelypy.communication.wire.AUTH_FAILURE_LINGER` seconds when
        it closes, so that the peer's attempts fail their handshake too.
        """
        self._departed.add(peer)
        if refused_keys:
            self._linger_on_close = True
        self.shared.abort(error, None)

    def control_ready(self, peer: int) -> None:
        """Record that the control connection to ``peer`` finished its handshake."""
        self._control_ready.add(peer)

    def connection_lost(self, descriptor: int) -> int | None:
        """A connection to the ROUTER closed: the peer that said HELLO on it, if one did."""
        return self._connections.pop(descriptor, None)

    def drain(self) -> bool:
        """Read and dispatch what waits in the ROUTER, from any thread (the watchdog's).

        Returns False, reading nothing, if a worker is reading it right now
        (ask again a moment later: a parked worker holds it for up to a
        quarter of a second).
        """
        return self.pump(0)

    # -- sockets ----------------------------------------------------------------

    def _bind(self, address: str) -> zmq.Socket[bytes]:
        router = self.context.socket(zmq.ROUTER)
        router.curve_server = True
        router.curve_secretkey = self._secret
        router.curve_publickey = self._public
        router.setsockopt(zmq.RCVHWM, 0)
        router.setsockopt(zmq.LINGER, 0)
        ip, port = resolve(address)
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
        sock.setsockopt(zmq.RECONNECT_IVL, int(RECONNECT_INTERVAL * 1000))
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, int(RECONNECT_INTERVAL_MAX * 1000))
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

    def _control_send(self, message: bytes, peers: Sequence[int] | None = None) -> None:
        with self._send_lock:
            for peer in self._control if peers is None else peers:
                if peer in self._departed:
                    continue
                try:
                    self._control[peer].send(message, NOBLOCK)
                except zmq.ZMQError:
                    pass

    def handshake(self) -> None:
        """Start watching connections; wait until every peer said HELLO (or name the silent)."""
        if self._watchdog is None:
            self._watchdog = Watchdog(self)
            self._watchdog.start()
        if self.processes == 1:
            return
        shape = HELLO_SHAPE.pack(self.processes, self.workers)
        self._control_send(HELLO_MESSAGE.pack(HELLO, self.process, 0, WIRE_VERSION) + shape)
        # Every worker connection says HELLO too, so that once everyone heard
        # from everyone, every connection has finished its CURVE handshake.
        with self._send_lock:
            for thread in range(self.workers):
                hello = HELLO_MESSAGE.pack(HELLO, self.process, thread + 1, WIRE_VERSION) + shape
                for sock in self.worker_dealers(thread).values():
                    sock.send(hello, NOBLOCK)
        deadline = time.monotonic() + self.connect_timeout
        expected = {
            (peer, connection)
            for peer in range(self.processes)
            if peer != self.process
            for connection in range(self.workers + 1)
        }
        peers = set(range(self.processes)) - {self.process}
        # Done once every peer said HELLO on every connection and this process's own
        # control connection to each finished its handshake: from then on a heartbeat
        # watches every peer (a peer heard from but not yet connected to, lost in that
        # moment, would otherwise be noticed by nothing).
        while not (expected <= self._hello and peers <= self._control_ready):
            joined = {
                p
                for p in range(self.processes)
                if all((p, c) in self._hello for c in range(self.workers + 1))
            }
            for peer in sorted(joined - self._joined):
                log.debug(
                    "process %d: process %d said HELLO on every connection", self.process, peer
                )
            self._joined = joined
            self.check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(
                    {peer for peer, _ in expected - self._hello} | (peers - self._control_ready)
                )
                raise ClusterError(
                    f"process {self.process} heard nothing from process(es) {missing} at "
                    f"{', '.join(self.addresses[p] for p in missing)} within "
                    f"{self.connect_timeout:g} s: are they running, with the same host file "
                    f"and secret, and reachable from {self.addresses[self.process]}?"
                )
            self.pump(min(remaining, 0.1), wait=True)
        self._joined = peers
        log.debug("process %d: every peer joined", self.process)

    def goodbye(self) -> None:
        """Tell every peer this process is done (a disconnection is then expected)."""
        if self._farewell_at is None:
            self._farewell_at = time.monotonic()
        self._control_send(CONTROL.pack(GOODBYE, self.process))

    def announce_failure(self, error: BaseException) -> None:
        """Tell every peer this process failed, with the error's description."""
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
        notes = getattr(error, "__notes__", None)
        if notes:
            text += " (" + "; ".join(notes) + ")"
        self._control_send(CONTROL.pack(ABORT, self.process) + text.encode("utf-8", "replace"))

    def close(self) -> None:
        """Close every socket; wait (bounded) for queued messages to be delivered."""
        if self._closed:
            return
        self._await_goodbyes()
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
        if self._linger_on_close:
            # A peer refused at start-up (another secret, other -n/-w) may not have
            # tried this process yet: while it still listens, the peer's attempts fail
            # their handshake (or read why) and it says so at once; once nothing
            # listens, it could only time out.
            time.sleep(AUTH_FAILURE_LINGER)
        for dealers in self._worker_dealers.values():
            for peer, sock in dealers.items():
                lost = peer in self._departed or (failed and peer not in self._joined)
                sock.close(0 if lost else int(LINGER_SECONDS * 1000))
        for peer, sock in self._control.items():
            sock.close(0 if peer in self._departed else int(LINGER_SECONDS * 1000))
        self._router.close(0)
        self._auth.stop()
        # term() waits for every socket of the context; a worker thread stuck in
        # user code would make it wait forever, so wait in a helper thread, bounded.
        terminator = threading.Thread(target=self.context.term, daemon=True)
        terminator.start()
        terminator.join(LINGER_SECONDS + 1.0)
        if terminator.is_alive():
            log.warning(
                "process %d: sockets still open after %.0f s (a worker thread did not stop); "
                "leaving them to the process exit",
                self.process,
                LINGER_SECONDS + 1.0,
            )

    def _await_goodbyes(self) -> None:
        """After this process said goodbye, wait (bounded) for every peer's goodbye.

        A peer counts as departed only once its ``GOODBYE`` is read, and the
        sockets to a peer not known to have departed close with
        :data:`~timelypy.communication.wire.LINGER_SECONDS` of linger.  When
        the peer closed first, what this process sent last (its own goodbye)
        can no longer be delivered, and closing waited out that linger: two
        seconds added to about one run in three of a short two-process flow.
        Reading the peers' goodbyes first, for at most
        :data:`~timelypy.communication.wire.GOODBYE_GRACE` seconds, lets
        those sockets close at once.
        """
        if self._farewell_at is None or self.shared.failure is not None:
            return
        deadline = time.monotonic() + GOODBYE_GRACE
        while any(p != self.process and p not in self._departed for p in self._joined):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self.pump(min(remaining, 0.05), wait=True)

    # -- receiving --------------------------------------------------------------

    def check(self) -> None:
        """Raise the recorded failure, if any."""
        failure = self.shared.failure
        if failure is not None:
            raise failure

    def pump(
        self, timeout: float, *, wait: bool = False, thread: int | None = None, first: bool = False
    ) -> bool:
        """Receive and dispatch whatever arrived, waiting up to ``timeout`` s for something.

        With ``wait``, wait for another worker that is pumping; otherwise
        return at once if one is.  ``thread`` is the local worker thread
        that pumps, if one does: it is awake, so its messages need not wake
        it.  With ``first``, return after one message instead of asking
        whether another waits: a parked worker that a message woke starts
        its step a poll sooner, and its next step's receive takes the rest.
        Returns whether it pumped.
        """
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            if self._closed:
                return True
            items = self._poll_items
            # A zero-timeout poll is the cheapest way to ask whether anything waits
            # (about 1 us, against 1.3-1.9 us for the EVENTS option, which pyzmq turns
            # into an enum, and an exception for a receive that finds nothing).
            if zmq_poll(items, int(timeout * 1000) if timeout > 0 else 0):
                recv = self._router.recv
                # Each further message is asked for with a zero-timeout poll too: a
                # receive that finds nothing raises, which costs about three polls.
                greeted = self._greeted
                while True:
                    try:
                        routing = recv(NOBLOCK)
                    except zmq.Again:
                        break
                    if routing in greeted:
                        # A connection that said HELLO in this wire protocol sends
                        # messages of one frame: a copy costs less than a Frame.
                        self._dispatch(routing, memoryview(recv(NOBLOCK)), thread)
                    else:
                        # A multipart message arrives whole: its second frame is here.
                        # As a Frame, it tells whether more follow without an option
                        # query (which pyzmq turns into an enum).
                        frame = recv(NOBLOCK, copy=False)
                        if frame.more:
                            self._foreign(routing, self._drain(frame.bytes))
                        else:
                            self._dispatch(routing, frame.buffer, thread)
                            if routing in greeted:  # its HELLO: remember whose connection
                                self._note_connection(routing, frame)
                    if first or not zmq_poll(items, 0):
                        break
            return True
        finally:
            self._lock.release()

    def _note_connection(self, routing: bytes, frame: zmq.Frame) -> None:
        """Remember which peer the connection that sent ``frame`` (a HELLO) belongs to."""
        try:
            sender = int(routing[len(self.tag) :].split(b":")[1])
            descriptor = int(frame.get(zmq.SRCFD))
        except (IndexError, ValueError, zmq.ZMQError):
            return
        if descriptor >= 0:
            self._connections[descriptor] = sender

    def _drain(self, first: bytes) -> list[bytes]:
        """The frames of a message of more than one (none of this protocol's), from the second."""
        frames = [first]
        while True:
            frame = self._router.recv(NOBLOCK, copy=False)
            frames.append(frame.bytes)
            if not frame.more:
                return frames

    def _foreign(self, routing: bytes, what: object) -> None:
        """A peer of this run sent a message this protocol has not: stop, naming it."""
        fields = routing[len(self.tag) :].split(b":")
        try:
            sender: int | None = int(fields[1])
        except (IndexError, ValueError):
            sender = None
        where = (
            f"process {sender} at {self.addresses[sender]}"
            if sender is not None and 0 <= sender < len(self.addresses)
            else f"a peer ({routing!r})"
        )
        error = ClusterError(
            f"process {self.process} received a message it cannot read from {where}: "
            f"{_short(what)}; every process must run the same timelypy version "
            f"(wire protocol {WIRE_VERSION} here)"
        )
        if sender is not None:
            self.lose_peer(sender, error)
        else:
            self.shared.abort(error, None)

    def _dispatch(self, routing: bytes, message: memoryview, thread: int | None) -> None:
        if not routing.startswith(self.tag):
            log.warning("process %d ignored a message from another run", self.process)
            return
        kind = message[0] if message else 0
        if kind == DATA:
            self._deliver(routing, message, thread)
            return
        if kind == HELLO:
            if len(message) < HELLO_MESSAGE.size:
                self._foreign(routing, message)
                return
            _, sender, connection, version = HELLO_MESSAGE.unpack_from(message)
            if version != WIRE_VERSION:
                self._foreign(routing, f"a HELLO of wire protocol {version}")
                return
            if len(message) != HELLO_MESSAGE.size + HELLO_SHAPE.size or sender >= self.processes:
                self._foreign(routing, message)
                return
            processes, workers = HELLO_SHAPE.unpack_from(message, HELLO_MESSAGE.size)
            if (processes, workers) != (self.processes, self.workers):
                error = ClusterError(
                    f"process {sender} at {self.addresses[sender]} was started with "
                    f"{processes} process(es) of {workers} worker(s) each (-n {processes} "
                    f"-w {workers}), process {self.process} with {self.processes} of "
                    f"{self.workers} (-n {self.processes} -w {self.workers}): every process "
                    "of a cluster must be started with the same -n and -w, and run the same "
                    "program"
                )
                # Tell the peer why (it may not have heard this process's HELLO yet, and
                # would only see it leave); close() then waits for that to be delivered.
                self._control_send(
                    CONTROL.pack(ABORT, self.process) + f"ClusterError: {error}".encode(),
                    [sender],
                )
                self._linger_on_close = True
                self.shared.abort(error, None)
                return
            self._hello.add((sender, connection))
            self._greeted.add(routing)
            return
        if kind not in (GOODBYE, ABORT) or len(message) < CONTROL.size:
            self._foreign(routing, message)
            return
        sender = CONTROL.unpack_from(message)[1]
        if kind == GOODBYE:
            self._departed.add(sender)
            if self._farewell_at is None:
                self._farewell_at = time.monotonic()
        else:
            text = bytes(message[CONTROL.size :]).decode("utf-8", "replace")
            self.lose_peer(
                sender,
                ClusterError(f"process {sender} at {self.addresses[sender]} failed: {text}"),
            )

    def _deliver(self, routing: bytes, message: memoryview, thread: int | None) -> None:
        size = len(message)
        start = DATA_HEADER.size
        offset = start + DATA_HEADER.unpack_from(message)[1] * ENTRY.size if size >= start else -1
        if not start <= offset <= size:
            self._foreign(routing, f"a DATA message of {size} bytes, too short for its header")
            return
        shared = self.shared
        boxes = shared.mailboxes
        first = self.first_worker
        # (Most messages hold one or two entries: what each uses once is not aliased.)
        for channel, _source, target, payload_kind, length in ENTRY.iter_unpack(
            message[start:offset]
        ):
            end = offset + length
            if end > size:
                break
            payload = message[offset:end]
            offset = end
            decoded: Any
            if payload_kind == KIND_BATCH:
                decoded = self.codec.decode_batch(payload)
            elif payload_kind == KIND_PROGRESS:
                decoded = unpack_progress(payload)
            else:
                decoded = self.codec.decode(payload)
            box = boxes.get((channel, target))
            if box is None:
                box = shared.mailbox(channel, target)
            box.append(decoded)
            local = target - first
            shared.events[local].append(channel)
            if local != thread:
                shared.wakers[local].set()
        if offset != size:
            self._foreign(routing, f"a DATA message of {size} bytes, whose entries say otherwise")


def _short(what: object) -> str:
    """A short description of what a peer sent that this protocol does not know."""
    if isinstance(what, str):
        return what
    if isinstance(what, list):
        return f"a message of {len(what) + 1} frames"
    if isinstance(what, memoryview):
        what = bytes(what)
    text = repr(what)
    return f"{text[:40]}..." if len(text) > 43 else text
