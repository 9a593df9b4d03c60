"""Where a flow's items come from: ``AdvanceTo``/``Emit``, input configs and epoch helpers.

An input builder is a generator that yields two kinds of value:

* :class:`AdvanceTo` ``(epoch)`` -- from now on, items belong to ``epoch``;
  no more items of earlier epochs will come, so those epochs may *close*;
* :class:`Emit` ``(item)`` -- one item, in the current epoch;
* :class:`EmitBatch` ``(items)`` -- every item of a list, in the current
  epoch: the same as an ``Emit`` per item, as one event (for readers that
  get their items in chunks: a file's lines, a consumer's poll).

An epoch never goes backwards, and the first ``AdvanceTo`` comes before the
first ``Emit``.  :class:`ManualInputConfig` wraps an
``input_builder(worker_index, worker_count, resume_epoch)``; every worker
calls it and feeds what it yields.

A *partitioned* input (:class:`PartitionedInputConfig`) lists the
partitions each worker can reach and builds a reader per partition; each
partition is read by exactly one worker, its *primary* (see
:mod:`timelypy.flow.primaries`), so no item is read twice whatever the
number of workers.

Epochs must mean the same on every worker (the Timely model): assign them from the
item or from the clock, never "every N items on this worker".  The helpers
:func:`single_batch`, :func:`tumbling_epoch` and :func:`fully_ordered` turn
an iterable of items into ``(epoch, item)`` pairs, as ``run`` takes them:

>>> list(single_batch("ab"))
[(0, 'a'), (0, 'b')]
>>> list(fully_ordered("ab"))
[(0, 'a'), (1, 'b')]
>>> clock = iter([100.0, 100.4, 101.2, 103.0]).__next__
>>> list(tumbling_epoch("abcd", 1.0, time_getter=lambda item: clock(), anchor=100.0))
[(0, 'a'), (0, 'b'), (1, 'c'), (3, 'd')]
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from timelypy.errors import FlowError
from timelypy.flow.sources import (
    AbortExecution,
    DynamicSource,
    FixedPartitionedSource,
    SimplePollingSource,
    Source,
    StatefulSourcePartition,
    StatelessSourcePartition,
)

__all__ = [
    "AbortExecution",
    "Source",
    "FixedPartitionedSource",
    "StatefulSourcePartition",
    "DynamicSource",
    "StatelessSourcePartition",
    "SimplePollingSource",
    "batch",
    "AdvanceTo",
    "Emit",
    "EmitBatch",
    "InputConfig",
    "ManualInputConfig",
    "PartitionedInputConfig",
    "InputItem",
    "single_batch",
    "tumbling_epoch",
    "fully_ordered",
]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class AdvanceTo:
    """Advance the input to ``epoch``: earlier epochs will see no more items.

    >>> AdvanceTo(3)
    AdvanceTo(epoch=3)
    """

    epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class Emit:
    """Introduce ``item`` into the dataflow at the current epoch.

    >>> Emit("hello")
    Emit(item='hello')
    """

    item: Any


@dataclasses.dataclass(frozen=True, slots=True)
class EmitBatch:
    """Introduce every item of ``items`` at the current epoch, in order.

    The same as ``Emit(item)`` for each item, in one event: the items join
    the reader's batch with one ``list.extend`` rather than one event each,
    which is what makes a reader that gets its items in chunks cheap.

    >>> EmitBatch(["a", "b"])
    EmitBatch(items=['a', 'b'])
    """

    items: list[Any]


#: What an input builder yields.
InputItem = AdvanceTo | Emit | EmitBatch


class InputConfig:
    """Base class of the ways a flow can be fed; see the subclasses."""


class ManualInputConfig(InputConfig):
    """Input from ``input_builder(worker_index, worker_count, resume_epoch)``.

    Every worker calls the builder once; it yields :class:`AdvanceTo` and
    :class:`Emit`.  Items before ``resume_epoch`` were already processed by
    an earlier execution and should be skipped (it is 0 on a first run).

    >>> def input_builder(worker_index, worker_count, resume_epoch):
    ...     if worker_index == 0:
    ...         yield AdvanceTo(0)
    ...         yield Emit("a line")
    >>> config = ManualInputConfig(input_builder)
    >>> list(config.input_builder(0, 1, 0))
    [AdvanceTo(epoch=0), Emit(item='a line')]
    """

    def __init__(self, input_builder: Callable[[int, int, int], Iterable[InputItem]]) -> None:
        if not callable(input_builder):
            raise FlowError(
                f"ManualInputConfig needs a callable input_builder(worker_index, worker_count, "
                f"resume_epoch), got {input_builder!r}"
            )
        self.input_builder = input_builder

    def __repr__(self) -> str:
        return f"ManualInputConfig({getattr(self.input_builder, '__name__', self.input_builder)})"


class PartitionedInputConfig(InputConfig):
    """An input made of partitions, each read by exactly one worker (its primary).

    Subclass it and implement:

    * :meth:`list_parts` -- the partitions *this* worker can reach (a worker
      on another machine may reach others);
    * :meth:`build_part` -- a reader for one partition: an iterable of
      :class:`AdvanceTo` and :class:`Emit`, as an input builder yields.

    Every worker reports what it can reach, the first worker assigns each
    partition to one of the workers that reach it (balancing the count per
    worker) and broadcasts the assignment; each worker then opens only its
    own partitions.  A worker's epoch is the smallest epoch among its open
    partitions, so epochs must be assigned the same way in every partition
    (from the items or the clock).

    If :meth:`all_parts` returns a collection, a partition in it that no
    worker reaches is an error; by default the partitions are whatever the
    workers list.

    With recovery each partition has its own resume state: see
    :meth:`build_part`.
    """

    def list_parts(self, worker_index: int, worker_count: int) -> Iterable[str]:
        """The names of the partitions worker ``worker_index`` can read."""
        raise NotImplementedError(f"{type(self).__name__} must implement list_parts")

    def build_part(
        self, part: str, resume_epoch: int, resume_state: Any = None
    ) -> Iterable[InputItem]:
        """A reader of partition ``part``, skipping epochs before ``resume_epoch``.

        With recovery, a reader that has a ``snapshot()`` method is asked for
        its position each time it leaves an epoch (and when it ends); a
        resumed execution passes the latest such snapshot from before the
        resume epoch as ``resume_state``, so the reader can seek there
        instead of reading from the start.  ``resume_state`` is passed only
        when there is one: a ``build_part(part, resume_epoch)`` of two
        arguments keeps working for readers without ``snapshot``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement build_part")

    def all_parts(self) -> Iterable[str] | None:
        """Every partition that must be read, or ``None`` to take what the workers list."""
        return None


def epochs_from_pairs(
    pairs: Iterable[tuple[int, Any]], resume_epoch: int = 0
) -> Iterator[InputItem]:
    """``AdvanceTo``/``Emit`` for an iterable of ``(epoch, item)``, as ``run`` feeds it.

    Pairs before ``resume_epoch`` are skipped; an ``AdvanceTo`` is yielded
    only when the epoch changes.

    >>> list(epochs_from_pairs([(0, "a"), (0, "b"), (2, "c")]))
    [AdvanceTo(epoch=0), Emit(item='a'), Emit(item='b'), AdvanceTo(epoch=2), Emit(item='c')]
    """
    current: int | None = None
    for pair in pairs:
        try:
            epoch, item = pair
        except (TypeError, ValueError):
            raise FlowError(
                f"the input must yield (epoch, item) pairs, got {pair!r}; wrap an iterable of "
                "items in single_batch, tumbling_epoch or fully_ordered to give them epochs"
            ) from None
        if epoch < resume_epoch:
            continue
        if epoch != current:
            current = epoch
            yield AdvanceTo(epoch)
        yield Emit(item)


def single_batch(items: Iterable[T]) -> Iterator[tuple[int, T]]:
    """Every item in epoch 0: one batch, closed when the input ends."""
    for item in items:
        yield 0, item


def fully_ordered(items: Iterable[T]) -> Iterator[tuple[int, T]]:
    """A new epoch for every item: item ``i`` is in epoch ``i``."""
    return enumerate(items)


def clock_settings(
    owner: str, epoch_length: float | datetime.timedelta, poll: float
) -> tuple[float, float]:
    """``(epoch_length, poll)`` in seconds for an input whose epochs go by the clock.

    Both must be positive (``epoch_length`` may be a ``timedelta``); else a
    :class:`FlowError` that names ``owner`` (``"DirectoryInput"``...).
    """
    seconds = (
        epoch_length.total_seconds()
        if isinstance(epoch_length, datetime.timedelta)
        else epoch_length
    )
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise FlowError(f"{owner} needs epoch_length > 0, got {epoch_length!r}")
    if not isinstance(poll, (int, float)) or poll <= 0:
        raise FlowError(f"{owner} needs poll > 0 seconds, got {poll!r}")
    return float(seconds), float(poll)


class EpochClock:
    """The current epoch by the clock: ``first`` plus whole ``epoch_length`` seconds since made.

    Its clock starts when it is made (``time.monotonic``), so epoch ``first``
    lasts ``epoch_length`` seconds from then, the next as long again, and so on.
    """

    __slots__ = ("_first", "_length", "_started", "epoch")

    def __init__(self, epoch_length: float, first: int = 0) -> None:
        self._first = first
        self._length = epoch_length
        self._started = time.monotonic()
        #: The epoch as of the last :meth:`advanced`.
        self.epoch = first

    def advanced(self) -> bool:
        """Move :attr:`epoch` to the clock's current epoch; return whether it moved."""
        now = self._first + int((time.monotonic() - self._started) / self._length)
        if now > self.epoch:
            self.epoch = now
            return True
        return False


def _seconds(value: float | datetime.timedelta | datetime.datetime) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return float(value)


def tumbling_epoch(
    items: Iterable[T],
    epoch_length: float | datetime.timedelta,
    time_getter: Callable[[T], float | datetime.datetime] | None = None,
    anchor: float | datetime.datetime = 0.0,
) -> Iterator[tuple[int, T]]:
    """Epochs of ``epoch_length`` (seconds or a ``timedelta``) of clock time.

    An item's epoch is ``(t - anchor) // epoch_length`` where ``t`` is
    ``time_getter(item)`` (seconds or an aware ``datetime``), or the wall
    clock when the item arrives if no ``time_getter`` is given.  Epochs
    depend on the clock only, never on how many items a worker saw, so
    every worker agrees on their boundaries.  The default
    ``anchor`` is the Unix epoch, which every worker shares without
    coordination; give a recent time for small epoch numbers.  An item
    whose time is before the previous item's stays in the current epoch:
    epochs only move forward.
    """
    length = _seconds(epoch_length)
    if not length > 0:
        raise FlowError(f"tumbling_epoch needs a positive epoch_length, got {epoch_length!r}")
    start = _seconds(anchor)
    clock = time.time
    current = 0
    for item in items:
        now = _seconds(time_getter(item)) if time_getter is not None else clock()
        epoch = int((now - start) // length)
        if epoch > current:
            current = epoch
        yield current, item


def batch(ib: Iterable[T], batch_size: int) -> Iterator[list[T]]:
    """The items of ``ib`` in lists of at most ``batch_size`` (for a partition's ``next_batch``).

    >>> list(batch(range(5), 2))
    [[0, 1], [2, 3], [4]]
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise FlowError(f"batch needs batch_size >= 1, got {batch_size!r}")
    it = iter(ib)
    while True:
        chunk = list(itertools.islice(it, batch_size))
        if not chunk:
            return
        yield chunk
