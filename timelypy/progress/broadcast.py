"""The progcaster: broadcasting progress batches between workers.

Every worker runs the same scope.  After scheduling its operators, a
worker's scope has one *batch* of pointstamp changes: messages produced and
consumed, capabilities taken and released.  The progcaster sends that batch,
as ``(worker, sequence_number, updates)``, to every worker **including
itself**, over channels that are FIFO per pair of workers.  Each worker
applies every batch it receives to its own reachability tracker, so all
workers converge on the same view.

Safety rests on two facts: an activation's increments travel in the same
batch as the decrements that justify them (a message is produced under a
capability whose release is in the same or a later batch), and batches from
one worker arrive in order.  Any prefix of the streams then yields a
frontier that is behind the true one, never ahead.

A worker applies its own batch at once rather than through its own
mailbox, as if that channel had no latency: the batch is still a prefix of
its stream, so this changes no frontier's safety, and it saves the worker a
second pass whose only work would be to receive what it just sent.

Updates are ``((node, kind, port, time), diff)`` pairs, where ``kind`` is
0 for an operator input (target) and 1 for an output (source).  Batches are
compacted (zero diffs dropped) before sending.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["Progcaster", "ProgressUpdate"]

#: ``((node, kind, port, time), diff)``
ProgressUpdate = tuple[tuple[int, int, int, Any], int]


class Progcaster:
    """Sends this worker's progress batches to all workers and receives theirs.

    ``pushers`` has one entry per worker, this one's (``source``) included,
    as the allocator gives them; this worker's own entry is not used.
    ``flush``, if given, is called after each broadcast: it sends what the
    pushers buffered, so the batch leaves before this worker applies it.
    """

    __slots__ = ("_counter", "_flush", "_log", "_mailbox", "_others", "channel", "source")

    def __init__(
        self,
        pushers: list[Callable[[Any], None]],
        mailbox: deque[Any],
        source: int,
        channel: int,
        log: Callable[[bool, int, int, list[ProgressUpdate]], None] | None = None,
        flush: Callable[[], None] | None = None,
    ) -> None:
        #: The pushers to every worker but this one (this one applies its own at once).
        self._others = [push for worker, push in enumerate(pushers) if worker != source]
        self._mailbox = mailbox
        self.source = source
        self.channel = channel
        self._counter = 0
        self._log = log
        self._flush = flush

    @property
    def logging(self) -> bool:
        """Whether a ``"timely/progress"`` logger records the batches this progcaster sends."""
        return self._log is not None

    def send(
        self,
        updates: dict[tuple[int, int, int, Any], int],
        into: dict[tuple[int, int, int, Any], int],
    ) -> bool:
        """Broadcast the non-zero ``updates`` and add them to ``into``; return whether any were.

        ``into`` is this worker's own receiving end: the batch is applied to
        it now, as a received batch is by :meth:`recv`.
        """
        batch = self._broadcast(updates)
        if batch is None:
            return False
        get = into.get
        for key, diff in batch:
            into[key] = get(key, 0) + diff
        return True

    def send_by_port(
        self,
        updates: dict[tuple[int, int, int, Any], int],
        targets: dict[tuple[int, int], dict[Any, int]],
        sources: dict[tuple[int, int], dict[Any, int]],
    ) -> bool:
        """:meth:`send`, adding the batch to per-port buffers as :meth:`recv_by_port` does."""
        batch = self._broadcast(updates)
        if batch is None:
            return False
        _add_by_port(batch, (targets, sources))
        return True

    def _broadcast(
        self, updates: dict[tuple[int, int, int, Any], int]
    ) -> list[ProgressUpdate] | None:
        """Send the non-zero ``updates`` to every other worker as one batch; the batch, if any."""
        batch = [(key, diff) for key, diff in updates.items() if diff]
        if not batch:
            return None
        message = (self.source, self._counter, batch)
        log = self._log
        if log is not None:
            log(True, self.source, self._counter, batch)
        for push in self._others:
            push(message)
        if self._flush is not None:
            self._flush()
        if log is not None:
            log(False, self.source, self._counter, batch)
        self._counter += 1
        return batch

    def deliver_to_self(
        self,
        updates: dict[tuple[int, int, int, Any], int],
        into: dict[tuple[int, int, int, Any], int],
    ) -> None:
        """With a single worker, "send to every worker" is adding ``updates`` to ``into``."""
        if self._log is not None:
            batch = [(key, diff) for key, diff in updates.items() if diff]
            if batch:
                self._log(True, self.source, self._counter, batch)
                self._log(False, self.source, self._counter, batch)
                self._counter += 1
        if not into:
            into.update(updates)
            return
        get = into.get
        for key, diff in updates.items():
            into[key] = get(key, 0) + diff

    def recv(self, into: dict[tuple[int, int, int, Any], int]) -> None:
        """Add every received batch's updates to ``into``."""
        mailbox = self._mailbox
        log = self._log
        get = into.get
        while mailbox:
            source, counter, batch = mailbox.popleft()
            if log is not None:
                log(False, source, counter, batch)
            for key, diff in batch:
                into[key] = get(key, 0) + diff

    def recv_by_port(
        self,
        targets: dict[tuple[int, int], dict[Any, int]],
        sources: dict[tuple[int, int], dict[Any, int]],
    ) -> None:
        """Add every received batch's updates to per-port buffers, as a tracker keeps them.

        An update ``((node, kind, port, time), diff)`` adds ``diff`` to
        ``targets[(node, port)][time]`` for an input (kind 0) and to
        ``sources[(node, port)][time]`` for an output: what a root scope,
        which has no boundary to translate, hands its tracker directly.
        """
        mailbox = self._mailbox
        log = self._log
        buffers = (targets, sources)
        while mailbox:
            source, counter, batch = mailbox.popleft()
            if log is not None:
                log(False, source, counter, batch)
            _add_by_port(batch, buffers)


def _add_by_port(
    batch: list[ProgressUpdate], buffers: tuple[dict[tuple[int, int], dict[Any, int]], ...]
) -> None:
    for (node, kind, port, time), diff in batch:
        into = buffers[kind]
        changes = into.get((node, port))
        if changes is None:
            into[(node, port)] = {time: diff}
        else:
            changes[time] = changes.get(time, 0) + diff
