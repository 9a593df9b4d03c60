"""The watchdog: one thread per process that notices lost peers and strangers.

libzmq reports what happens to a socket's connections as *monitor events*
on a pair socket.  The watchdog reads the monitor of every control
connection and of the process's ``ROUTER``, in its own thread, and turns
the events into decisions:

* **A lost peer.**  Control connections use libzmq heartbeats
  (:data:`~timelypy.communication.wire.HEARTBEAT_INTERVAL`), which run in
  libzmq's own I/O threads: a peer that dies (even ``kill -9``) or stops
  answering is disconnected within
  :data:`~timelypy.communication.wire.HEARTBEAT_TIMEOUT` seconds.  The
  connections a peer made to this process's ``ROUTER`` count too, from the
  moment it said ``HELLO`` on them (start-up included): whichever
  connection shows the loss first, the peer is suspected.  A suspect that
  did not say ``GOODBYE`` within
  :data:`~timelypy.communication.wire.GOODBYE_GRACE` seconds (a peer says
  goodbye on one connection and then closes another, so the disconnection
  may overtake the goodbye) aborts every local worker with a
  :class:`~timelypy.errors.ClusterError` naming the peer.  Before judging,
  the watchdog reads the ``ROUTER`` itself: a goodbye that waits there
  unread, because every worker is busy (a long last commit), is not a
  loss.
* **A peer with another secret.**  A control connection whose CURVE
  handshake fails before the peer said ``HELLO`` aborts the computation
  with an error that says the processes do not share the secret (and the
  process keeps listening a moment longer, so that the peer finds out the
  same way rather than by timing out).
* **A stranger.**  A connection to the ``ROUTER`` that never authenticates
  is rejected inside libzmq; the watchdog logs it (a few warnings per
  window, then a summary, so a persistent stranger cannot flood the log)
  and the computation goes on.  Rejections seen while a peer is shutting
  down or failing are not warned about: such peers drop half-open
  connections too.

Being a thread that blocks in ``poll`` (releasing the GIL), it keeps up
even while every worker is busy in user code, so a flood of strangers
cannot fill the monitor pipes and stall libzmq (and with it the
heartbeats), and a lost peer is noticed within the heartbeat bound whatever
the workers do.  It reaches its network only through the network's public
interface (:class:`~timelypy.communication.network.ClusterNetwork`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import zmq
from zmq.utils.monitor import parse_monitor_message

from timelypy.communication.wire import GOODBYE_GRACE, HANDSHAKE_FAILURES
from timelypy.errors import ClusterError

if TYPE_CHECKING:
    from timelypy.communication.network import ClusterNetwork

__all__ = ["Watchdog"]

log = logging.getLogger("timelypy.cluster")

#: Seconds past the goodbye grace a suspect may wait for the ROUTER to be free to read
#: (before it is judged on what the workers read meanwhile).
DRAIN_PATIENCE = 1.0

_DISCONNECTED = int(zmq.EVENT_DISCONNECTED)
_ACCEPTED = int(zmq.EVENT_ACCEPTED)
_HANDSHAKE_SUCCEEDED = int(zmq.EVENT_HANDSHAKE_SUCCEEDED)


class Watchdog(threading.Thread):
    """Reads every monitor socket of ``network``, in its own (daemon) thread.

    Start it with :meth:`start` once the network's monitors exist; stop it
    with :meth:`stop` before the monitors are closed.
    """

    #: Rejected connections are warned about one by one, up to WARN_BURST per
    #: window; the rest are counted and summarised when the window ends.  The
    #: window starts at WARN_WINDOW seconds and doubles (up to WARN_MAX_WINDOW)
    #: while rejections keep coming, so a persistent stranger cannot flood the log.
    WARN_WINDOW = 2.0
    #: The widest warning window, in seconds.
    WARN_MAX_WINDOW = 60.0
    #: Warnings per window before the rest are only counted.
    WARN_BURST = 3

    def __init__(self, network: ClusterNetwork) -> None:
        """Prepare the thread for ``network`` (it reads the monitors once started)."""
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
        """Poll the monitors until stopped."""
        network = self.network
        poller = zmq.Poller()
        poller.register(network.router_monitor, zmq.POLLIN)
        poller.register(self._wake_receiver, zmq.POLLIN)
        for monitor in network.control_monitors:
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
        peer = network.control_monitors.get(sock)
        while True:
            try:
                info = parse_monitor_message(sock.recv_multipart(flags=zmq.NOBLOCK))
            except zmq.Again:
                return
            event = int(info["event"])
            if peer is not None:
                if event == _HANDSHAKE_SUCCEEDED:
                    network.control_ready(peer)
                elif event in HANDSHAKE_FAILURES and peer not in network.joined:
                    network.lose_peer(
                        peer,
                        ClusterError(
                            f"process {network.process} could not authenticate with process "
                            f"{peer} at {network.addresses[peer]} "
                            f"({HANDSHAKE_FAILURES[event]}): the processes do not share the "
                            "same cluster secret (TIMELYPY_SECRET or TIMELYPY_SECRET_FILE), or "
                            "something else listens on that address"
                        ),
                        refused_keys=True,
                    )
                elif event == _DISCONNECTED and peer not in network.departed:
                    # A peer says GOODBYE on one connection and then closes another, so
                    # the disconnection may overtake the goodbye: give it a moment.
                    self._suspects.setdefault(peer, time.monotonic())
                continue
            value = int(info["value"])
            endpoint = info.get("endpoint", b"").decode(errors="replace")
            # Handshake events carry no file descriptor (0, or an errno), so they
            # cannot be matched to connections; what can be told is whether *any*
            # handshake ended between a connection's accept and its disconnect.
            if event == _ACCEPTED:
                self._accepted[value] = (endpoint, self._handshakes)
            elif event == _HANDSHAKE_SUCCEEDED:
                self._handshakes += 1
            elif event in HANDSHAKE_FAILURES:
                self._handshakes += 1
                self._reject(endpoint, HANDSHAKE_FAILURES[event])
            elif event == _DISCONNECTED:
                lost = network.connection_lost(value)
                if lost is not None and lost not in network.departed:
                    self._suspects.setdefault(lost, time.monotonic())
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
            farewell = network.farewell_at
            if network.shared.failure is not None or (farewell is not None and farewell <= seen):
                continue  # peers failing or shutting down drop half-open connections too
            self._flush_summary(now)
            if self._warned < self.WARN_BURST:
                self._warned += 1
                log.warning(
                    "process %d rejected a connection on %s: it did not authenticate with "
                    "the cluster secret (%s); the computation goes on",
                    network.process,
                    endpoint,
                    why,
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
                self.network.process,
                self._suppressed,
                self._window,
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
        due = [p for p, since in self._suspects.items() if now - since >= GOODBYE_GRACE]
        if due and not network.drain():
            # A worker is reading the ROUTER this moment: look again at the next tick
            # (it may be reading the goodbye), unless that went on for a while.
            if all(now - self._suspects[p] < GOODBYE_GRACE + DRAIN_PATIENCE for p in due):
                return
        for peer, since in list(self._suspects.items()):
            if peer in network.departed:
                del self._suspects[peer]
            elif now - since >= GOODBYE_GRACE:
                del self._suspects[peer]
                # Nothing more can reach it: do not linger on its connections.
                network.lose_peer(
                    peer,
                    ClusterError(
                        f"lost process {peer} at {network.addresses[peer]}: its connection "
                        "dropped without a goodbye (the process died or stopped answering)"
                    ),
                )
