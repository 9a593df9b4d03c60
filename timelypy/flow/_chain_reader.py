"""Reading an epoch chain's input on one worker: ``AdvanceTo``/``Emit`` events or pairs.

:class:`ChainReader` reads one reader of an input config (a generator of
``AdvanceTo``, ``Emit`` and ``EmitBatch`` events, or an iterable of
``(epoch, item)`` pairs) for the flow's driver (:mod:`timelypy.flow.driver`):
each :meth:`ChainReader.pull` sends a bounded batch at its epoch, moves its
capability when the input advances and marks the reader done at its end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.handles import OperatorOutput
from timelypy.errors import FlowError
from timelypy.flow.inputs import AdvanceTo, Emit, EmitBatch

__all__ = [
    "ChainReader",
    "PULL_LIMIT",
    "PULL_SECONDS",
    "FAST_CHUNK_SECONDS",
    "CLOCK_STRIDE",
    "bad_epoch",
]

#: How many input values a reader yields per worker step, at most.
PULL_LIMIT = 1024
#: How long a reader reads before the worker steps, at most (a slow source's
#: items flow on without waiting for PULL_LIMIT of them).
PULL_SECONDS = 0.01
#: A chunk of pairs read faster than this doubles the next chunk (slower: halves it).
FAST_CHUNK_SECONDS = 0.001
#: Events read between two reads of the clock, at most (an input builder's events).
CLOCK_STRIDE = 32

log = logging.getLogger("timelypy.flow")

_first, _second = itemgetter(0), itemgetter(1)
#: What ``next(source, _ENDED)`` returns once a reader's source has nothing more.
_ENDED = object()


def bad_epoch(epoch: object) -> bool:
    """Whether ``epoch`` is not an epoch (an int >= 0)."""
    return type(epoch) is not int or epoch < 0


class ChainReader:
    """One partition being read on this worker, with its capability at its current epoch."""

    __slots__ = (
        "cap",
        "chunk",
        "done",
        "epoch",
        "name",
        "out",
        "pairs",
        "reached",
        "record",
        "resume",
        "snap",
        "source",
        "step_id",
        "worker_index",
    )

    def __init__(
        self, name: str, step_id: str, worker_index: int, source: Iterable[Any], pairs: bool
    ) -> None:
        self.name = name
        self.step_id = step_id
        self.worker_index = worker_index
        try:
            self.source: Iterator[Any] = iter(source)
        except TypeError:
            raise FlowError(
                f"input step {step_id!r} on worker {worker_index}: {name} must be iterable "
                f"(a generator yielding AdvanceTo and Emit), got {source!r}"
            ) from None
        self.pairs = pairs
        #: how many pairs a read takes at once, or how many events pass between clock
        #: reads (it adapts to the source's pace)
        self.chunk = 1
        #: the input operator's output this reader sends on
        self.out: OperatorOutput[Any] | None = None
        self.cap: Capability | None = None
        self.epoch: int | None = None
        #: the largest epoch this reader advanced to or sent items at (None: none yet);
        #: events always advance first, pairs may send at the resume epoch without it
        self.reached: int | None = None
        self.resume = 0
        self.done = False
        #: the reader's ``snapshot()`` (a partition's resume state), if recovery keeps it
        self.snap: Callable[[], Any] | None = None
        #: ``record(epoch, state)``: keep the reader's state as of the end of ``epoch``
        self.record: Callable[[int, Any], None] | None = None

    def _where(self) -> str:
        return f"input step {self.step_id!r} ({self.name}) on worker {self.worker_index}"

    def _advance(self, epoch: Any) -> None:
        current = self.epoch
        if bad_epoch(epoch):
            raise FlowError(f"{self._where()}: epochs are ints >= 0, got AdvanceTo({epoch!r})")
        assert current is not None and self.cap is not None
        if epoch < current:
            raise FlowError(
                f"{self._where()}: the epoch went backwards, from {current} to {epoch}; an "
                "input's epoch only moves forward (AdvanceTo promises no more items before it)"
            )
        self.cap.downgrade(epoch)
        if self.record is not None and epoch > current:
            self.record(current, self._snapshot())
        self.epoch = epoch
        self.reached = epoch

    def _snapshot(self) -> Any:
        assert self.snap is not None
        try:
            return self.snap()
        except Exception as exc:
            exc.add_note(f"in {self._where()}: the reader's snapshot() raised")
            raise

    def finish(self) -> None:
        """The reader ended: drop its capability, keep its final state."""
        if self.record is not None and self.epoch is not None:
            self.record(self.epoch, self._snapshot())
        assert self.cap is not None
        self.cap.drop()

    def start(self, cap: Capability) -> None:
        """Take ``cap`` (at the resume epoch)."""
        self.cap = cap
        self.epoch = cap.time
        self.resume = cap.time

    def pull(self, output: OperatorOutput[Any], limit: int, started: bool) -> None:
        """Send up to ``limit`` values' worth of items; mark :attr:`done` at the end.

        An error the source raises (a reader's own ``FlowError``, say) gets a
        note naming the input step, the reader and the worker.
        """
        try:
            if self.pairs:
                self._pull_pairs(output, limit)
            else:
                self._pull_events(output, limit, started)
        except Exception as exc:
            where = self._where()
            if not any(where in note for note in getattr(exc, "__notes__", ())) and (
                where not in str(exc)
            ):
                exc.add_note(f"raised by {where}")
            raise

    def close(self) -> None:
        """Close the source if it can be (a generator's ``finally`` runs: sockets, files)."""
        close = getattr(self.source, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing after a failure: the first error is the one to see
                log.debug("closing %s raised", self._where(), exc_info=True)

    def _pull_pairs(self, output: OperatorOutput[Any], limit: int) -> None:
        """Read pairs in chunks (``islice``, in C) whose size adapts to the source's pace.

        A chunk whose pairs all have the reader's current epoch, the common
        case, is split in two C passes; any other goes pair by pair.  Chunks
        double while they take under :data:`FAST_CHUNK_SECONDS` (up to
        ``limit``) and halve when slower, so a slow source is read a pair at
        a time and its items flow on at once.
        """
        cap = self.cap
        assert cap is not None
        batch: list[Any] = []
        count = 0
        clock = time.monotonic
        deadline = clock() + PULL_SECONDS
        source = self.source
        size = self.chunk
        while True:
            started = clock()
            wanted = min(size, limit - count)
            chunk = list(islice(source, wanted))
            n = len(chunk)
            epoch = self.epoch
            try:
                uniform = (
                    list(map(len, chunk)).count(2) == n
                    and list(map(_first, chunk)).count(epoch) == n
                )
            except TypeError:
                uniform = False
            if uniform:
                batch += map(_second, chunk)
            else:
                batch = self._take_pairs(chunk, output, batch)
            count += n
            now = clock()
            if n < wanted:
                self.done = True
                break
            if now - started < FAST_CHUNK_SECONDS:
                if size < limit:
                    size *= 2
            elif size > 1:
                size //= 2
            if count >= limit or now > deadline:
                break
        self.chunk = size
        if batch:
            output.give_batch(cap, batch)
            self.reached = self.epoch

    def _take_pairs(
        self, chunk: list[Any], output: OperatorOutput[Any], batch: list[Any]
    ) -> list[Any]:
        """Pairs one at a time: epochs change, pairs before the resume epoch are skipped."""
        cap = self.cap
        assert cap is not None
        epoch = self.epoch
        resume = self.resume
        for pair in chunk:
            try:
                at, item = pair
            except (TypeError, ValueError):
                raise FlowError(
                    f"{self._where()}: the input must yield (epoch, item) pairs, got {pair!r}; "
                    "wrap an iterable of items in single_batch, tumbling_epoch or fully_ordered"
                ) from None
            if at != epoch:
                if batch:
                    output.give_batch(cap, batch)
                    self.reached = self.epoch
                    batch = []
                if bad_epoch(at):
                    raise FlowError(f"{self._where()}: epochs are ints >= 0, got {at!r}")
                if at >= resume:
                    self._advance(at)
                    epoch = at
            if at >= resume:
                batch.append(item)
        return batch

    def _batch_items(self, items: Any) -> list[Any]:
        """An ``EmitBatch``'s items as a list: any iterable of items, but not one value."""
        if isinstance(items, (str, bytes, bytearray, memoryview, Mapping)):
            raise FlowError(
                f"{self._where()}: EmitBatch takes a list of items, got a "
                f"{type(items).__name__} ({items!r:.60}); yield Emit(value) for one value"
            )
        try:
            return list(items)
        except TypeError:
            raise FlowError(
                f"{self._where()}: EmitBatch takes a list of items, got {items!r}"
            ) from None

    def _pull_events(self, output: OperatorOutput[Any], limit: int, started: bool) -> None:
        cap = self.cap
        assert cap is not None
        batch: list[Any] = []
        count = 0
        source = self.source
        if not started:
            first = next(source, _ENDED)
            if first is _ENDED:
                self.done = True
                return
            if type(first) is not AdvanceTo:
                raise FlowError(
                    f"{self._where()}: the input builder yielded {first!r} before any "
                    "AdvanceTo; yield AdvanceTo(epoch) first to say which epoch items belong to"
                )
            if not bad_epoch(first.epoch) and first.epoch < self.resume:
                raise FlowError(
                    f"{self._where()}: AdvanceTo({first.epoch}) is before the resume epoch "
                    f"{self.resume}; skip the items of epochs before resume_epoch"
                )
            self._advance(first.epoch)
        epoch = self.epoch
        # The clock is read every ``stride`` events, not after each: the stride doubles
        # (up to CLOCK_STRIDE) while that many events take under FAST_CHUNK_SECONDS and
        # drops to 1 when slower, so a fast source costs a clock read per CLOCK_STRIDE
        # events, and a source that turns slow is noticed within CLOCK_STRIDE events, or
        # at its next epoch boundary if sooner.
        clock = time.monotonic
        last = clock()
        deadline = last + PULL_SECONDS
        stride = self.chunk
        check_at = stride
        for event in source:
            kind = type(event)
            if kind is Emit:
                batch.append(event.item)
            elif kind is EmitBatch:
                items = event.items
                if type(items) is not list:
                    items = self._batch_items(items)
                batch.extend(items)
                count += len(items) - 1  # and one more below, as for every event
            elif kind is AdvanceTo:
                if event.epoch != epoch:
                    if batch:
                        output.give_batch(cap, batch)
                        batch = []
                    self._advance(event.epoch)
                    epoch = event.epoch
                    # An epoch boundary is where a paced source pauses: look at the clock
                    # now, so a closed epoch leaves within PULL_SECONDS of the pause.
                    check_at = count + 1
            else:
                raise FlowError(
                    f"{self._where()}: an input builder yields AdvanceTo(epoch), Emit(item) and "
                    f"EmitBatch(items), got {event!r}"
                )
            count += 1
            if count >= limit:
                break
            if count >= check_at:
                now = clock()
                if now > deadline:
                    break
                if now - last < FAST_CHUNK_SECONDS:
                    if stride < CLOCK_STRIDE:
                        stride *= 2
                else:
                    stride = 1
                last = now
                check_at = count + stride
        else:
            self.done = True
        self.chunk = stride
        if batch:
            output.give_batch(cap, batch)
