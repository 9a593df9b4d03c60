"""Sinks of a stream graph: where ``op.output`` writes, resumed from their snapshots.

* :class:`FixedPartitionedSink` -- named partitions, each written by one
  worker (its *primary*).  Items are ``(key, value)``: ``part_fn(key)``
  picks the partition and the partition's
  :meth:`~StatefulSinkPartition.write_batch` gets the values.  The engine
  writes each partition's items in epoch order, asks it for its
  ``snapshot()`` when an epoch closes, and hands the latest one back to
  :meth:`FixedPartitionedSink.build_part` on resume, so a sink can tell
  what a failed execution had already written.  A partition that cannot
  make an epoch durable yet (its server is away) raises
  :class:`StatefulSinkPartition.Retry` from ``snapshot()``: the engine
  keeps the epoch open, returns to the worker's other steps and asks again
  after the partition's pause;
* :class:`DynamicSink` -- one :class:`StatelessSinkPartition` per worker,
  writing whatever items reach that worker.

>>> class Lines(StatelessSinkPartition[str]):
...     def __init__(self) -> None:
...         self.lines: list[str] = []
...     def write_batch(self, items: list[str]) -> None:
...         self.lines.extend(items)
>>> part = Lines(); part.write_batch(["a", "b"]); part.lines
['a', 'b']
"""

from __future__ import annotations

import abc
import datetime
from typing import Generic, TypeVar
from zlib import adler32

__all__ = [
    "Sink",
    "CaptureSink",
    "FixedPartitionedSink",
    "StatefulSinkPartition",
    "DynamicSink",
    "StatelessSinkPartition",
]

X = TypeVar("X")
X_contra = TypeVar("X_contra", contravariant=True)
V = TypeVar("V")
S = TypeVar("S")


class Sink(Generic[X_contra]):
    """Base class of every sink an ``output`` step can write to."""


class StatefulSinkPartition(abc.ABC, Generic[V, S]):
    """One partition of a :class:`FixedPartitionedSink`, written by its primary worker."""

    class Retry(Exception):
        """Raised by :meth:`snapshot`: the epoch is not durable yet; ask again after ``timeout``.

        The engine then holds the epoch open (no progress, and no snapshot
        in the recovery store, past it), calls nothing else of the partition
        -- no ``write_batch`` of a later epoch -- and returns to the worker's
        other steps; after ``timeout`` it calls ``snapshot()`` again.  The
        partition keeps what it needs to write the epoch again, and bounds
        its own attempts: its last one raises the error instead.
        """

        def __init__(self, timeout: datetime.timedelta, reason: str = "") -> None:
            super().__init__(reason or f"retry after {timeout.total_seconds():g}s")
            self.timeout = timeout

    @abc.abstractmethod
    def write_batch(self, values: list[V]) -> None:
        """Write ``values`` (in epoch order; within an epoch, in arrival order).

        A partition that loses its server here keeps the values and writes
        them when the epoch closes (in :meth:`snapshot`): ``write_batch``
        may not raise :class:`Retry`.
        """

    @abc.abstractmethod
    def snapshot(self) -> S:
        """The epoch closed: make its writes durable; what to resume from (picklable).

        Raise :class:`Retry` to be asked again later without blocking the
        worker (see there).
        """

    def close(self) -> None:
        """Flush and release (called when the run ends or stops)."""


class FixedPartitionedSink(Sink[tuple[str, V]], Generic[V, S]):
    """A sink of named partitions; ``(key, value)`` items go to ``part_fn(key)``'s partition."""

    @abc.abstractmethod
    def list_parts(self) -> list[str]:
        """The partitions this worker can write (every worker is asked)."""

    def part_fn(self, item_key: str) -> int:
        """The index (modulo the number of partitions, in sorted name order) for a key.

        The default is the Adler-32 checksum of the key's UTF-8 bytes: the
        same in every process.
        """
        return adler32(item_key.encode())

    @abc.abstractmethod
    def build_part(
        self, step_id: str, for_part: str, resume_state: S | None
    ) -> StatefulSinkPartition[V, S]:
        """A writer of ``for_part``, resuming from ``resume_state`` (``None``: a fresh start)."""


class StatelessSinkPartition(abc.ABC, Generic[X]):
    """A :class:`DynamicSink`'s writer on one worker."""

    @abc.abstractmethod
    def write_batch(self, items: list[X]) -> None:
        """Write ``items``."""

    def close(self) -> None:
        """Flush and release (called when the run ends or stops)."""


class DynamicSink(Sink[X]):
    """A sink that every worker writes to through its own :class:`StatelessSinkPartition`."""

    @abc.abstractmethod
    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSinkPartition[X]:
        """The writer of worker ``worker_index``."""


class CaptureSink(Sink[X_contra]):
    """Hand the items back to whoever runs the flow, with their epochs, as ``capture()`` does.

    ``run`` yields them as ``(epoch, item)``, ``run_cluster`` returns them
    (gathered on worker 0), ``timelypy_spark.run_flow`` makes them its
    result and ``iter_flow`` streams them; ``run_main``, ``cluster_main``
    and the command line, which return nothing, refuse it.

    >>> from timelypy.flow import run
    >>> from timelypy.flow.dataflow import Dataflow
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource
    >>> flow = Dataflow("doc")
    >>> op.output("out", op.input("inp", flow, TestingSource(["a", "b"])), CaptureSink())
    >>> sorted(item for epoch, item in run(flow))
    ['a', 'b']
    """

    def __repr__(self) -> str:
        return "CaptureSink()"
