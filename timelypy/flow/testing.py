"""Running and testing stream-graph flows: ``run_main``, ``cluster_main``, a test source and sink.

* :func:`run_main` -- run a flow on one worker in this thread, to the end;
* :func:`cluster_main` -- run this process's part of a cluster;
* :class:`TestingSource` -- items from an iterable, with markers that end
  (``EOF``), abort (``ABORT``) or pause (``PAUSE``) the input, resumable;
* :class:`TestingSink` -- append every item to a list;
* :class:`TimeTestingGetter`, :func:`ffwd_iter`, :func:`poll_next_batch`
  -- helpers for testing your own sources and clocks;
* :func:`run_to_list` -- run the flow of one stream and return its items.

>>> from timelypy.flow.dataflow import Dataflow
>>> import timelypy.flow.operators as op
>>> flow = Dataflow("test")
>>> out = []
>>> op.output("out", op.map("inc", op.input("inp", flow, TestingSource([1, 2])), lambda x: x + 1),
...           TestingSink(out))
>>> run_main(flow)
>>> out
[2, 3]
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from timelypy.communication.config import Config
from timelypy.errors import FlowError
from timelypy.execute import execute
from timelypy.flow._metrics import built_hook, start_metrics
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.driver import EPOCH_INTERVAL, flow_program
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.sources import (
    AbortExecution,
    FixedPartitionedSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from timelypy.recovery import RecoveryConfig

__all__ = [
    "TestingSource",
    "TestingSink",
    "TimeTestingGetter",
    "ffwd_iter",
    "poll_next_batch",
    "run_main",
    "cluster_main",
    "run_to_list",
]

X = TypeVar("X")


def ffwd_iter(it: Iterator[Any], n: int) -> None:
    """Skip the next ``n`` items of ``it``."""
    for _ in itertools.islice(it, n):
        pass


class TestingSource(FixedPartitionedSource[X, int]):
    """A source of the items of an iterable, in batches of ``batch_size``; for tests.

    One partition (``"iterable"``), read by one worker.  Its snapshot is
    how many entries of the iterable it has read, so a resumed execution
    continues after them.  Markers among the items:

    * ``TestingSource.EOF()`` -- end the input here (a resumed execution
      continues after it);
    * ``TestingSource.ABORT()`` -- stop the execution here, once, as a
      crash would (after the epochs before it are complete and committed);
      a resumed execution given the same marker object skips it;
    * ``TestingSource.PAUSE(for_duration)`` -- read nothing for a while.
    """

    __test__ = False  # not a pytest test class

    @dataclasses.dataclass
    class EOF:
        """End the input here."""

    @dataclasses.dataclass
    class ABORT:
        """Abort the execution here, the first time it is reached."""

        _triggered: bool = False

    @dataclasses.dataclass
    class PAUSE:
        """Read nothing for ``for_duration``."""

        for_duration: datetime.timedelta

    def __init__(self, ib: Iterable[Any], batch_size: int = 1) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise FlowError(f"TestingSource needs batch_size >= 1, got {batch_size!r}")
        self._ib = ib
        self._batch_size = batch_size

    def list_parts(self) -> list[str]:
        """One partition, ``iterable``."""
        return ["iterable"]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[X, int]:
        """A reader of the iterable, past the ``resume_state`` entries read before."""
        return _IterPartition(self._ib, self._batch_size, resume_state or 0)


class _IterPartition(StatefulSourcePartition[X, int]):
    """The iterable, ``batch_size`` entries at a time.

    A chunk is sliced off in C (``islice``) and checked for markers with one
    C-level pass (``isdisjoint`` over the entries' types); only a chunk that
    holds a marker is walked in Python, and what follows its marker waits
    for the next call.
    """

    def __init__(self, ib: Iterable[Any], batch_size: int, start: int) -> None:
        self._it = iter(ib)
        ffwd_iter(self._it, start)
        self._index = start
        self._batch_size = batch_size
        self._pending: BaseException | None = None
        self._awake: datetime.datetime | None = None
        self._rest: list[Any] = []

    def next_batch(self) -> list[X]:
        if self._pending is not None:
            raise self._pending
        self._awake = None
        size = self._batch_size
        if self._rest:
            chunk, self._rest = self._rest[:size], self._rest[size:]
        else:
            chunk = list(itertools.islice(self._it, size))
        if not chunk:
            raise StopIteration()
        if _MARKERS.isdisjoint(map(type, chunk)):
            self._index += len(chunk)
            return chunk
        batch: list[X] = []
        for i, item in enumerate(chunk):
            kind = type(item)
            if kind not in _MARKERS:
                batch.append(item)
                continue
            self._index += 1
            if kind is TestingSource.ABORT and item._triggered:
                continue  # aborted an earlier execution: skipped now
            self._rest = chunk[i + 1 :] + self._rest
            if kind is TestingSource.EOF:
                self._pending = StopIteration()
            elif kind is TestingSource.ABORT:
                item._triggered = True
                self._pending = AbortExecution(f"TestingSource.ABORT at entry {self._index - 1}")
            else:
                self._awake = datetime.datetime.now(datetime.UTC) + item.for_duration
            break
        self._index += len(batch)
        return batch

    def next_awake(self) -> datetime.datetime | None:
        return self._awake

    def snapshot(self) -> int:
        return self._index


_MARKERS = frozenset({TestingSource.EOF, TestingSource.ABORT, TestingSource.PAUSE})


class TestingSink(DynamicSink[X]):
    """Append every item to ``ls`` (a list shared by the worker threads of this process)."""

    __test__ = False  # not a pytest test class

    def __init__(self, ls: list[X]) -> None:
        self.ls = ls

    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSinkPartition[X]:
        """The writer: ``ls.extend``."""
        return _ListPartition(self.ls)


class _ListPartition(StatelessSinkPartition[X]):
    def __init__(self, ls: list[X]) -> None:
        self.ls = ls

    def write_batch(self, items: list[X]) -> None:
        self.ls.extend(items)


@dataclasses.dataclass
class TimeTestingGetter:
    """A clock for tests: :meth:`get` returns :attr:`now`, which :meth:`advance` moves.

    >>> clock = TimeTestingGetter(datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc))
    >>> clock.advance(datetime.timedelta(seconds=5)); clock.get().second
    5
    """

    now: datetime.datetime

    def advance(self, td: datetime.timedelta) -> None:
        """Move the clock forward by ``td``."""
        self.now += td

    def get(self) -> datetime.datetime:
        """The current time."""
        return self.now


def poll_next_batch(
    part: StatefulSourcePartition[X, Any] | StatelessSourcePartition[X],
    timeout: datetime.timedelta = datetime.timedelta(seconds=5),
) -> list[X]:
    """Call ``part.next_batch()`` until it returns items; ``TimeoutError`` after ``timeout``."""
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        batch = list(part.next_batch())
        if batch:
            return batch
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no items from {part!r} within {timeout}")
        time.sleep(0.001)


def _interval(epoch_interval: datetime.timedelta | float | None) -> float:
    if epoch_interval is None:
        return EPOCH_INTERVAL
    seconds = (
        epoch_interval.total_seconds()
        if isinstance(epoch_interval, datetime.timedelta)
        else epoch_interval
    )
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise FlowError(f"epoch_interval must be a timedelta >= 0, got {epoch_interval!r}")
    return float(seconds)


def _check(flow: Dataflow, recovery_config: Any) -> None:
    if not isinstance(flow, Dataflow):
        raise FlowError(f"expected a timelypy.flow Dataflow, got {flow!r}")
    if recovery_config is not None and not isinstance(recovery_config, RecoveryConfig):
        raise FlowError(
            f"recovery_config must be a RecoveryConfig (timelypy.flow.recovery), got "
            f"{recovery_config!r}"
        )


def run_main(
    flow: Dataflow,
    *,
    epoch_interval: datetime.timedelta | None = None,
    recovery_config: RecoveryConfig | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    """Run ``flow`` on one worker in this thread until its inputs end.

    ``epoch_interval`` is how long an epoch of the sources lasts (default
    10 s); snapshots are taken as epochs close.  A source raising
    :class:`~timelypy.flow.inputs.AbortExecution` stops the run (it returns).
    ``metrics_port`` serves the operators' metrics to Prometheus while the
    flow runs (:mod:`timelypy.metrics`).
    """
    _check(flow, recovery_config)
    _run(flow, Config.process(1), 0, epoch_interval, recovery_config, metrics_port, metrics_host)


def _run(
    flow: Dataflow,
    config: Config,
    proc_id: int,
    epoch_interval: datetime.timedelta | None,
    recovery_config: RecoveryConfig | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    interval = _interval(epoch_interval)
    server = start_metrics(metrics_port, metrics_host, proc_id)
    try:
        program = flow_program(
            flow,
            None,
            collect_on=None,
            epoch_interval=interval,
            recovery_config=recovery_config,
            on_built=built_hook(server),
        )
        execute(config, program)
    except AbortExecution:
        return
    finally:
        if server is not None:
            server.close()


def cluster_main(
    flow: Dataflow,
    addresses: Sequence[str],
    proc_id: int,
    *,
    epoch_interval: datetime.timedelta | None = None,
    recovery_config: RecoveryConfig | None = None,
    worker_count_per_proc: int = 1,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    """Run process ``proc_id`` of a cluster of ``len(addresses)`` processes (``host:port`` each).

    Start one process per address with the same ``addresses`` and the
    cluster's shared secret in ``TIMELYPY_SECRET`` (or
    ``TIMELYPY_SECRET_FILE``); an empty ``addresses`` runs one process.
    ``metrics_port``: this process serves its metrics on ``metrics_port +
    proc_id`` (:mod:`timelypy.metrics`).
    """
    _check(flow, recovery_config)
    addresses = list(addresses)
    if len(addresses) > 1:
        config = Config.cluster(worker_count_per_proc, len(addresses), proc_id, addresses)
    else:
        if proc_id != 0:
            raise FlowError(f"proc_id {proc_id} is out of range for a single process")
        config = Config.process(worker_count_per_proc)
    _run(flow, config, proc_id, epoch_interval, recovery_config, metrics_port, metrics_host)


_outs = itertools.count()


def run_to_list(stream: Stream[X], *, epoch_interval: datetime.timedelta | None = None) -> list[X]:
    """Add an output of ``stream`` to its flow, run the flow on one worker, return the items.

    For trying operators out (the operators' examples use it).
    """
    out: list[X] = []
    from timelypy.flow.operators import output

    output(f"_run_to_list_{next(_outs)}", stream, TestingSink(out))
    run_main(stream.flow, epoch_interval=epoch_interval)
    return out
