"""The cluster: workers in several processes, over ZeroMQ.

A cluster is ``processes`` processes of ``workers`` threads each; worker
``process * workers + thread``.  This module holds what the worker threads
of one process see of it, and the transport that builds them:

* :class:`ClusterAllocator` -- one worker thread's allocator.  Within a
  process, workers exchange batches by reference, exactly as
  :class:`~timelypy.communication.allocator.ProcessAllocator` does.  A
  batch for a worker of another process is encoded at once (so a record the
  codec cannot carry raises inside the operator that sent it, naming it),
  and buffered per destination process; buffers are sent when they pass
  :data:`~timelypy.communication.wire.FLUSH_BYTES` and at the end of every
  worker step, as one message (one ZeroMQ frame) per destination.  A broadcast is
  encoded once for all its destinations.
* :class:`ClusterTransport` -- the allocators of this process's workers
  and the cluster's lifecycle around them: wait for every peer before the
  workers run, say goodbye when they completed, announce this process's own
  failure to its peers, and close the sockets (bounded).
  :func:`timelypy.execute.initialize_from` drives it, as it drives any
  transport.

The rest of the cluster lives beside this module, one concept each:
:mod:`~timelypy.communication.network` (one process's sockets, handshake,
dispatch and shut-down), :mod:`~timelypy.communication.wire` (the messages
and time bounds), :mod:`~timelypy.communication.secret` (the shared secret
and the keys derived from it) and :mod:`~timelypy.communication.watchdog`
(lost peers and strangers).
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

import zmq

from timelypy.communication.allocator import LocalMailboxes, Push, waking_pusher
from timelypy.communication.config import Config
from timelypy.communication.network import ClusterNetwork
from timelypy.communication.secret import load_secret
from timelypy.communication.transport import Transport
from timelypy.communication.wire import (
    DATA,
    DATA_HEADER,
    ENTRY,
    FLUSH_BYTES,
    KIND_BATCH,
    KIND_OBJECT,
    KIND_PROGRESS,
    ZERO_COPY_BYTES,
    pack_progress,
    progress_packer,
)
from timelypy.errors import ClusterError, WorkerAborted

__all__ = ["ClusterAllocator", "ClusterTransport"]

#: ``os.sched_yield`` where the platform has it.
_yield = getattr(os, "sched_yield", None)


class ClusterAllocator(LocalMailboxes):
    """A worker thread's view of the cluster: local mailboxes plus remote sends."""

    def __init__(self, network: ClusterNetwork, thread: int) -> None:
        """The allocator of ``network``'s worker thread ``thread`` (0-based in this process)."""
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
        # (message, payload kind, payload) of the last message encoded
        self._last_encoded: tuple[Any, int, bytes] | None = None
        self._pack_progress = progress_packer()

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
        departed = self.network.departed  # the same set for the network's lifetime
        source = self.index
        where = context or f"channel {channel} on worker {source}"
        pack = ENTRY.pack
        pack_message = self._pack_progress

        def push(message: Any) -> None:
            if process in departed:
                return
            cached = self._last_encoded
            payload: bytes
            if cached is not None and cached[0] is message:
                _, kind, payload = cached  # a broadcast: encode once for every destination
            else:
                kind = KIND_OBJECT
                encoded: bytes | None = None
                if type(message) is tuple:
                    size = len(message)
                    if size == 2 and type(message[1]) is list:
                        kind = KIND_BATCH
                        encoded = codec.encode_batch(message[0], message[1], context=where)
                    elif size == 3 and type(message[2]) is list:
                        encoded = pack_progress(pack_message, message)
                        if encoded is not None:
                            kind = KIND_PROGRESS
                payload = codec.encode(message, context=where) if encoded is None else encoded
                self._last_encoded = (message, kind, payload)
            entry = pack(channel, source, worker, kind, len(payload))
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
        self.network.pump(0, thread=self.thread)

    def await_events(self, timeout: float | None) -> None:
        """Park until a message arrives, a failure is recorded, or ``timeout`` passes.

        A worker alone in its process first polls for up to ``Config.park_spin``
        seconds, yielding its CPU between polls, and blocks only after that.
        """
        self.release()
        waker = self._waker
        waker.clear()
        if self._events or self.shared.failure is not None:
            return
        network = self.network
        spin = network.config.park_spin
        if spin > 0 and network.workers == 1 and _yield is not None:
            # Waking a thread blocked in poll costs tens of microseconds of CPU and
            # latency on every hop; a reply within the spin costs a few polls instead.
            pump = network.pump
            thread = self.thread
            until = time.monotonic() + (spin if timeout is None else min(spin, timeout))
            while True:
                pump(0, thread=thread, first=True)
                if self._events or self.shared.failure is not None:
                    return
                if time.monotonic() >= until:
                    break
                _yield()  # to this process's ZeroMQ I/O thread, or whoever waits for the CPU
        deadline = None if timeout is None else time.monotonic() + timeout
        # Alone in the process, poll the network for the whole wait; otherwise in
        # short slices so that local wake-ups are noticed promptly.
        slice_ = 0.25 if self.network.workers == 1 else 0.005
        while not self._events and self.shared.failure is None:
            remaining = slice_ if deadline is None else min(slice_, deadline - time.monotonic())
            if remaining <= 0:
                return
            alone = self.network.workers == 1
            if not self.network.pump(remaining, wait=alone, thread=self.thread, first=alone):
                waker.wait(remaining)

    def idle(self) -> None:
        """Alone in the process, give the CPU to this process's ZeroMQ I/O thread, or any taker.

        A program that busy-loops ``step()`` waiting for another process
        otherwise keeps its own I/O thread from the CPU (docs/performance.md).
        """
        if self.shared.peers == 1 and _yield is not None:
            _yield()
        else:
            super().idle()

    def release(self) -> None:
        """Send the buffered batches, one message per destination process."""
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
            message = b"".join([DATA_HEADER.pack(DATA, len(entries)), *entries, *payloads])
            try:
                dealers[process].send(message, 0, len(message) < ZERO_COPY_BYTES)
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
        if self.shared.failure is None and not self.network.closed:
            self.release()


class ClusterTransport(Transport):
    """A process's share of a cluster: its workers' allocators over ``network``.

    ``network`` must be connected to its peers (built from a configuration
    with addresses, or :meth:`ClusterNetwork.connect` called) before
    :meth:`start`.  The transport owns it: :meth:`close` closes it.
    """

    def __init__(self, network: ClusterNetwork) -> None:
        """One :class:`ClusterAllocator` per worker thread of ``network``'s process."""
        super().__init__(
            [ClusterAllocator(network, thread) for thread in range(network.workers)],
            network.shared,
        )
        #: The process's sockets.
        self.network = network

    @classmethod
    def from_config(cls, config: Config) -> ClusterTransport:
        """Bind this process's socket at its address in ``config`` and connect to its peers.

        The shared secret comes from the environment
        (:func:`~timelypy.communication.secret.load_secret`).
        """
        return cls(ClusterNetwork(config, load_secret()))

    def start(self) -> None:
        """Start watching the connections; wait until every peer said ``HELLO``."""
        self.network.handshake()

    def finish(self) -> None:
        """Send what is buffered, then say ``GOODBYE`` to every peer."""
        super().finish()
        self.network.goodbye()

    def fail(self, error: BaseException) -> None:
        """Send ``ABORT`` with ``error``'s description to every peer."""
        self.network.announce_failure(error)

    def close(self) -> None:
        """Flush (unless failed) and close every socket, waiting a bounded time."""
        super().close()
        self.network.close()
