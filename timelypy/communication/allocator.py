"""Allocators: the channels that connect workers.

An allocator gives a worker, for a channel identifier, one *pusher* per
worker (``pushers[j](message)`` delivers to worker ``j``) and its own
*mailbox*, a ``deque`` that receives the messages other workers (and
itself) push on that channel.  Messages from one worker to another arrive in
the order they were pushed (FIFO per pair), which the progress protocol
relies on.  Every worker builds the same dataflows in the same order, so
channel identifiers agree across workers without negotiation.

Delivering to another worker records an *event* (the channel identifier)
for it and wakes it if it is parked; the worker turns events into operator
activations at the start of its next step.  A worker's pushes to itself
record no event: the scope that produced the message schedules its reader
within the same pass.

This module holds the in-memory allocators: :class:`ProcessAllocator` for
``n`` worker threads in one process (messages move by reference, never
copied or serialised) and, as its one-worker case, the thread allocator.
The cluster allocator (workers in several processes, over ZeroMQ) implements
the same interface.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from timelypy.errors import WorkerAborted

__all__ = [
    "Allocator",
    "LocalMailboxes",
    "ProcessAllocator",
    "ProcessShared",
    "process_allocators",
    "waking_pusher",
]

Push = Callable[[Any], None]


class Allocator:
    """What a worker needs from its communication layer."""

    index: int
    peers: int

    def allocate(self, channel: int, context: str | None = None) -> tuple[list[Push], deque[Any]]:
        """Return ``(pushers, mailbox)`` for ``channel``.

        ``context`` names the reader (operator and worker) for error messages.
        """
        raise NotImplementedError

    def receive(self) -> None:
        """Move messages that arrived from outside this process into mailboxes."""

    def take_events(self) -> list[int]:
        """Return (and forget) the channels that received messages since the last call."""
        raise NotImplementedError

    def poll(self) -> list[int]:
        """:meth:`check`, then :meth:`take_events`: what a worker's step does first, in one call."""
        self.check()
        return self.take_events()

    def await_events(self, timeout: float | None) -> None:
        """Block until a message arrives, the computation aborts, or ``timeout`` passes.

        An allocator that receives from outside the process (:meth:`receive`)
        has received what arrived by the time this returns.
        """
        raise NotImplementedError

    def idle(self) -> None:
        """A step that may not wait found nothing to do: let whoever can use the CPU have it."""

    def release(self) -> None:
        """Send whatever outgoing messages are buffered."""

    def check(self) -> None:
        """Raise :class:`~timelypy.errors.WorkerAborted` if another worker failed."""

    def abort(self, reason: BaseException) -> None:
        """Tell every worker to stop because of ``reason`` (this worker's failure)."""

    def abort_all(self, reason: BaseException) -> None:
        """Tell every worker, this one included, to stop (an interrupt, not a worker's error)."""
        self.abort(reason)

    def close(self) -> None:
        """Release the allocator's resources."""


class ProcessShared:
    """State shared by the worker threads of one process."""

    def __init__(self, peers: int) -> None:
        self.peers = peers
        self.lock = threading.Lock()
        self.mailboxes: dict[tuple[int, int], deque[Any]] = {}
        self.events: list[deque[int]] = [deque() for _ in range(peers)]
        self.wakers = [threading.Event() for _ in range(peers)]
        self.failure: BaseException | None = None
        self.failed_worker: int | None = None

    def mailbox(self, channel: int, worker: int) -> deque[Any]:
        """The mailbox of ``worker`` on ``channel``, created by whoever asks first."""
        key = (channel, worker)
        box = self.mailboxes.get(key)
        if box is None:
            with self.lock:
                box = self.mailboxes.get(key)
                if box is None:
                    box = self.mailboxes[key] = deque()
        return box

    def abort(self, reason: BaseException, worker: int | None) -> None:
        """Record the first failure and wake every worker."""
        with self.lock:
            if self.failure is None:
                self.failure = reason
                self.failed_worker = worker
        for waker in self.wakers:
            waker.set()


class LocalMailboxes(Allocator):
    """What every allocator of worker threads shares: mailboxes, events, abort.

    Subclasses set ``shared`` (a :class:`ProcessShared`), ``index`` (the
    global worker index), ``_events`` and ``_waker`` (this thread's).
    """

    shared: ProcessShared
    _events: deque[int]
    _waker: threading.Event

    def take_events(self) -> list[int]:
        """Drain this worker's event queue."""
        events = self._events
        if not events:
            return []
        # One at a time: other threads may append meanwhile (what they add after
        # the last pop waits for the next call).
        taken = [events.popleft()]
        while events:
            taken.append(events.popleft())
        return taken

    def poll(self) -> list[int]:
        """:meth:`check`, then :meth:`take_events`, without a call when nothing failed."""
        if self.shared.failure is not None:
            self.check()
        return self.take_events() if self._events else []

    def idle(self) -> None:
        """Let this process's other worker threads run, if it has any.

        A program that busy-loops ``step()`` would otherwise hold the GIL for
        whole slices.
        """
        if self.shared.peers > 1:
            time.sleep(0)

    def abort(self, reason: BaseException) -> None:
        """Record this worker's failure and wake the others."""
        self.shared.abort(reason, self.index)

    def abort_all(self, reason: BaseException) -> None:
        """Record a failure that belongs to no worker: every worker stops."""
        self.shared.abort(reason, None)


class ProcessAllocator(LocalMailboxes):
    """One of ``peers`` worker threads in this process, exchanging messages by reference."""

    def __init__(self, shared: ProcessShared, index: int) -> None:
        self.shared = shared
        self.index = index
        self.peers = shared.peers
        self._events = shared.events[index]
        self._waker = shared.wakers[index]

    def allocate(self, channel: int, context: str | None = None) -> tuple[list[Push], deque[Any]]:
        """Pushers to every worker's mailbox on ``channel``, and this worker's mailbox."""
        shared = self.shared
        pushers: list[Push] = []
        for j in range(self.peers):
            box = shared.mailbox(channel, j)
            if j == self.index:
                pushers.append(box.append)
            else:
                pushers.append(waking_pusher(box, shared.events[j], shared.wakers[j], channel))
        return pushers, shared.mailbox(channel, self.index)

    def await_events(self, timeout: float | None) -> None:
        """Park until woken (a message or an abort) or until ``timeout`` seconds pass."""
        waker = self._waker
        waker.clear()
        if self._events or self.shared.failure is not None:
            return
        waker.wait(timeout)

    def check(self) -> None:
        """Raise :class:`WorkerAborted` if another worker failed."""
        failure = self.shared.failure
        if failure is not None and self.shared.failed_worker != self.index:
            raise WorkerAborted(
                f"worker {self.index} stopped because worker {self.shared.failed_worker} "
                f"failed: {type(failure).__name__}: {failure}"
            )


def waking_pusher(
    box: deque[Any], events: deque[int], waker: threading.Event, channel: int
) -> Push:
    """A pusher into another thread's mailbox that records the event and wakes it."""
    append = box.append
    record = events.append
    wake = waker.set

    def push(message: Any) -> None:
        append(message)
        record(channel)
        wake()

    return push


def process_allocators(peers: int) -> list[ProcessAllocator]:
    """Allocators for ``peers`` worker threads sharing one process."""
    shared = ProcessShared(peers)
    return [ProcessAllocator(shared, i) for i in range(peers)]
