"""Sources of a stream graph: partitions that read themselves and resume themselves.

An ``op.input(step_id, flow, source)`` step reads a *source*:

* :class:`FixedPartitionedSource` -- a fixed set of named partitions (the
  files of a directory, the partitions of a log).  Each worker lists the
  partitions it can reach; each partition is read by exactly one worker,
  its *primary*, through a :class:`StatefulSourcePartition`.  When an epoch
  closes, the engine asks the partition for its ``snapshot()`` and stores
  it with the flow's recovery data; a resumed execution hands the latest
  one back to :meth:`FixedPartitionedSource.build_part`, so a source
  resumes where it left off without ever reading the resume epoch;
* :class:`DynamicSource` -- one :class:`StatelessSourcePartition` per
  worker, with nothing to resume (a socket, a queue each worker polls);
* :class:`SimplePollingSource` -- call :meth:`SimplePollingSource.next_item`
  every interval, on one worker.

Sources do not choose epochs: the engine gives items the epoch of the
system clock when they are read, ``epoch_interval`` long (the same
boundaries on every worker, counted from a start time that worker 0 tells
the others), so results do not depend on how many items a worker saw.

A partition's :meth:`~StatefulSourcePartition.next_batch` returns the items
read so far (a list, perhaps empty) and raises ``StopIteration`` when the
partition has no more.  :meth:`~StatefulSourcePartition.next_awake` says
when to call it again (``None``: at once, or after a short pause when the
last batch was empty), so a worker never waits inside a source.
Raising :class:`AbortExecution` stops the execution at once, as a crash
would (to test recovery).

>>> class Countdown(StatefulSourcePartition[int, int]):
...     def __init__(self, start: int) -> None:
...         self.n = start
...     def next_batch(self) -> list[int]:
...         if self.n == 0:
...             raise StopIteration()
...         self.n -= 1
...         return [self.n]
...     def snapshot(self) -> int:
...         return self.n
>>> part = Countdown(2)
>>> part.next_batch(), part.next_batch(), part.snapshot()
([1], [0], 0)
"""

from __future__ import annotations

import abc
import datetime
from collections.abc import Iterable
from typing import Generic, TypeVar

from timelypy.errors import FlowError

__all__ = [
    "AbortExecution",
    "Source",
    "FixedPartitionedSource",
    "StatefulSourcePartition",
    "DynamicSource",
    "StatelessSourcePartition",
    "SimplePollingSource",
]

X = TypeVar("X")
X_co = TypeVar("X_co", covariant=True)
S = TypeVar("S")


class AbortExecution(RuntimeError):
    """Raised by a source to stop the execution at once, as a crash would.

    Nothing after the last committed epoch is kept; a run with recovery
    resumes from there.  :class:`~timelypy.flow.testing.TestingSource`'s
    ``ABORT`` marker raises it, to test recovery without killing processes.
    """


class Source(Generic[X_co]):
    """Base class of every source an ``input`` step can read."""


class StatefulSourcePartition(abc.ABC, Generic[X, S]):
    """One partition of a :class:`FixedPartitionedSource`, read by its primary worker."""

    @abc.abstractmethod
    def next_batch(self) -> Iterable[X]:
        """The items available now (perhaps none); raise ``StopIteration`` at the end."""

    def next_awake(self) -> datetime.datetime | None:
        """When to call :meth:`next_batch` next (an aware ``datetime``), or ``None``: soon."""
        return None

    @abc.abstractmethod
    def snapshot(self) -> S:
        """Where this partition is now, for ``build_part`` to resume from (picklable)."""

    def close(self) -> None:
        """Release what the partition holds (called when it ends or the run stops)."""


class FixedPartitionedSource(Source[X], Generic[X, S]):
    """A source of named partitions, each read by one worker and resumed from its snapshot."""

    @abc.abstractmethod
    def list_parts(self) -> list[str]:
        """The partitions this worker can reach (every worker is asked)."""

    @abc.abstractmethod
    def build_part(
        self, step_id: str, for_part: str, resume_state: S | None
    ) -> StatefulSourcePartition[X, S]:
        """A reader of ``for_part``, resuming from ``resume_state`` (``None``: from the start)."""


class StatelessSourcePartition(abc.ABC, Generic[X]):
    """A :class:`DynamicSource`'s reader on one worker; it has nothing to resume."""

    @abc.abstractmethod
    def next_batch(self) -> Iterable[X]:
        """The items available now (perhaps none); raise ``StopIteration`` at the end."""

    def next_awake(self) -> datetime.datetime | None:
        """When to call :meth:`next_batch` next (an aware ``datetime``), or ``None``: soon."""
        return None

    def close(self) -> None:
        """Release what the partition holds (called when it ends or the run stops)."""


class DynamicSource(Source[X]):
    """A source read by every worker through its own :class:`StatelessSourcePartition`."""

    @abc.abstractmethod
    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSourcePartition[X]:
        """The reader of worker ``worker_index``."""


class SimplePollingSource(FixedPartitionedSource[X, None]):
    """Call :meth:`next_item` every ``interval`` (on one worker); subclass and implement it.

    ``align_to`` (an aware ``datetime``) lines the calls up with it: the
    first call is at the next ``align_to + k * interval``.  Return ``None``
    for nothing this time; raise :class:`SimplePollingSource.Retry` to be
    called again sooner (after its ``timeout``); raise ``StopIteration`` to
    end the source.
    """

    class Retry(Exception):
        """Raised by :meth:`SimplePollingSource.next_item` to be called again after ``timeout``."""

        def __init__(self, timeout: datetime.timedelta) -> None:
            super().__init__(timeout)
            self.timeout = timeout

    def __init__(
        self, interval: datetime.timedelta, align_to: datetime.datetime | None = None
    ) -> None:
        if not isinstance(interval, datetime.timedelta) or interval <= datetime.timedelta(0):
            raise FlowError(f"SimplePollingSource needs a positive timedelta, got {interval!r}")
        if align_to is not None and (
            not isinstance(align_to, datetime.datetime) or align_to.tzinfo is None
        ):
            raise FlowError(
                f"SimplePollingSource's align_to must be an aware datetime, got {align_to!r}"
            )
        self._interval = interval
        self._align_to = align_to

    def next_item(self) -> X | None:
        """The next item, ``None`` for none this time; override it."""
        raise NotImplementedError(f"{type(self).__name__} must implement next_item")

    def list_parts(self) -> list[str]:
        """One partition, ``singleton``."""
        return ["singleton"]

    def build_part(
        self, step_id: str, for_part: str, resume_state: None
    ) -> StatefulSourcePartition[X, None]:
        """The polling partition."""
        return _PollingPartition(self)


class _PollingPartition(StatefulSourcePartition[X, None]):
    def __init__(self, source: SimplePollingSource[X]) -> None:
        self._source = source
        now = datetime.datetime.now(datetime.UTC)
        interval = source._interval
        align = source._align_to
        if align is None:
            self._awake = now
        else:
            steps = -((align - now) // interval)  # whole intervals to the next aligned time
            self._awake = align + steps * interval

    def next_batch(self) -> list[X]:
        source = self._source
        try:
            item = source.next_item()
        except SimplePollingSource.Retry as retry:
            self._awake = datetime.datetime.now(datetime.UTC) + retry.timeout
            return []
        self._awake += source._interval
        now = datetime.datetime.now(datetime.UTC)
        if self._awake < now:  # fell behind: the next call is one interval from now
            self._awake = now + source._interval
        return [] if item is None else [item]

    def next_awake(self) -> datetime.datetime | None:
        return self._awake

    def snapshot(self) -> None:
        return None
