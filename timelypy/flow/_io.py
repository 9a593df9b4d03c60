"""Reading sources and writing sinks on one worker.

:class:`SourceReader` reads one partition of a
:class:`~timelypy.flow.sources.FixedPartitionedSource` (or a worker's
partition of a :class:`~timelypy.flow.sources.DynamicSource`) for the
flow's driver: each :meth:`SourceReader.pull` asks the partition for one
batch (unless its ``next_awake`` is still ahead) and sends it at the epoch
of the :class:`EpochTicker`, which moves with the system clock, the same on
every worker.  :func:`dynamic_sink` and :func:`partitioned_sink` add the
runtime operators that write to sinks; a partitioned sink writes in epoch
order and snapshots the partitions it wrote to when an epoch closes.

A partition whose ``snapshot()`` raises
:class:`~timelypy.flow.sinks.StatefulSinkPartition.Retry` (its server is
away) does not block the worker: the sink's operator keeps the epoch's
capability, so neither its progress nor the recovery store's frontier
passes the epoch, queues the items of later epochs, and asks the partition
again after its pause (the worker's ``activate_after``); the partition
bounds its attempts and then raises the error that ends the run.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange, Pipeline
from timelypy.dataflow.handles import Frontier, OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError, StepError
from timelypy.flow.sinks import DynamicSink, FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import AbortExecution

__all__ = [
    "EpochTicker",
    "SourceReader",
    "detached_output",
    "dynamic_sink",
    "partitioned_sink",
    "IDLE_SECONDS",
]

log = logging.getLogger("timelypy.flow")

#: How long a partition that returned nothing and named no wake-up time rests.
IDLE_SECONDS = 0.001


class EpochTicker:
    """Epochs of ``interval`` seconds of system time since ``start`` (a POSIX time).

    Every worker gets ``start`` from worker 0, so epoch boundaries are the
    same everywhere.  The first epoch is the resume epoch.  An interval of
    0 gives every batch a reader sends an epoch of its own (for tests).
    """

    __slots__ = ("first", "interval", "start")

    def __init__(self, start: float, interval: float, first: int) -> None:
        self.start = start
        self.interval = interval
        self.first = first

    def epoch(self, now: float) -> int:
        """The epoch at system time ``now``."""
        if self.interval <= 0:
            return self.first
        return self.first + max(0, int((now - self.start) // self.interval))


def detached_output(scope: Scope, name: str) -> tuple[OperatorOutput[Any], Stream[Any], Capability]:
    """An operator with one output and no logic: code outside it sends on ``output``.

    Returns the output, its stream and the operator's capability (owned:
    the caller mints from it, downgrades it and drops it).
    """
    builder = OperatorBuilder(name, scope)
    output: OperatorOutput[Any]
    output, stream = builder.new_output()
    held: list[Capability] = []

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        held.append(caps[0].retain())
        return _no_logic

    builder.build(constructor)
    return output, stream, held[0]


def _no_logic(frontiers: list[Frontier]) -> None:
    return None


def _seconds_of(when: datetime.datetime | None, what: str) -> float | None:
    if when is None:
        return None
    if not isinstance(when, datetime.datetime) or when.tzinfo is None:
        raise FlowError(f"{what}: next_awake must return an aware datetime or None, got {when!r}")
    return when.timestamp()


class SourceReader:
    """One source partition read on this worker, with its capability at the clock's epoch."""

    __slots__ = (
        "awake",
        "cap",
        "closed",
        "done",
        "epoch",
        "idle",
        "name",
        "out",
        "part",
        "reached",
        "record",
        "resume",
        "snap",
        "step_id",
        "ticker",
        "worker_index",
    )

    def __init__(
        self, name: str, step_id: str, worker_index: int, part: Any, ticker: EpochTicker
    ) -> None:
        self.name = name
        self.step_id = step_id
        self.worker_index = worker_index
        self.part = part
        self.ticker = ticker
        self.cap: Capability | None = None
        self.epoch: int | None = None
        self.reached: int | None = None
        self.resume = 0
        self.done = False
        self.idle = False
        self.closed = False
        self.awake: float | None = None
        self.out: OperatorOutput[Any] | None = None
        self.snap: Callable[[], Any] | None = None
        self.record: Callable[[int, Any], None] | None = None

    def _where(self) -> str:
        return f"input step {self.step_id!r} ({self.name}) on worker {self.worker_index}"

    def start(self, cap: Capability) -> None:
        """Take ``cap`` (at the resume epoch)."""
        self.cap = cap
        self.epoch = self.resume = cap.time
        self.reached = cap.time

    def _advance(self, epoch: int) -> None:
        assert self.cap is not None and self.epoch is not None
        self.cap.downgrade(epoch)
        if self.record is not None:
            self.record(self.epoch, self._snapshot())
        self.epoch = self.reached = epoch

    def _snapshot(self) -> Any:
        assert self.snap is not None
        try:
            return self.snap()
        except Exception as exc:
            raise StepError(f"{self._where()}: the partition's snapshot() raised {exc!r}") from exc

    def _call(self, method: Callable[[], Any], what: str) -> Any:
        try:
            return method()
        except (StopIteration, AbortExecution, StepError, FlowError):
            raise
        except Exception as exc:
            raise StepError(
                f"{self._where()}, epoch {self.epoch}: the partition's {what} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def pull(self, output: OperatorOutput[Any], limit: int, started: bool) -> None:
        """Send one batch of the partition, if it is awake; mark :attr:`done` at its end."""
        cap = self.cap
        assert cap is not None and self.epoch is not None
        now = time.time()
        epoch = self.ticker.epoch(now)
        if epoch > self.epoch:
            self._advance(epoch)
        awake = self.awake
        if awake is not None and now < awake:
            self.idle = True
            return
        try:
            batch = self._call(self.part.next_batch, "next_batch()")
        except StopIteration:
            self.done = True
            return
        if type(batch) is not list:
            try:
                batch = list(batch)
            except TypeError:
                raise FlowError(
                    f"{self._where()}: next_batch() must return a list of items, got {batch!r}"
                ) from None
        if batch:
            output.give_batch(cap, batch)
        self.idle = not batch
        self.awake = _seconds_of(self._call(self.part.next_awake, "next_awake()"), self._where())
        if self.awake is None and not batch:
            self.awake = now + IDLE_SECONDS
        if batch and self.ticker.interval <= 0:
            self._advance(self.epoch + 1)

    def finish(self) -> None:
        """The partition ended: keep its final state, drop the capability, close it."""
        if self.record is not None and self.epoch is not None:
            self.record(self.epoch, self._snapshot())
        assert self.cap is not None
        self.cap.drop()
        self.close()

    def close(self) -> None:
        """Close the partition (once)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.part.close()
        except Exception:
            log.warning("closing %s raised", self._where(), exc_info=True)


class _Stalled(Exception):
    """A partition asked to be snapshotted again later: leave the activation, epoch held."""


def _write_error(step_id: str, worker: int, epoch: Any, exc: Exception) -> StepError:
    return StepError(
        f"output step {step_id!r} on worker {worker}, epoch {epoch}: the sink's write_batch "
        f"raised {type(exc).__name__}: {exc}"
    )


def dynamic_sink(
    stream: Stream[Any],
    step_id: str,
    sink: DynamicSink[Any],
    worker_index: int,
    peers: int,
    closers: list[Callable[[], None]],
) -> Stream[Any]:
    """Write each batch to this worker's partition of ``sink``."""
    part = sink.build(step_id, worker_index, peers)
    closers.append(part.close)
    write = part.write_batch

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for item_cap, items in inp:
                try:
                    write(items)
                except Exception as exc:
                    raise _write_error(step_id, worker_index, item_cap.time, exc) from exc

        return logic

    return stream.unary(Pipeline(), f"{step_id}.write", constructor)


def partitioned_sink(
    stream: Stream[Any],
    step_id: str,
    sink: FixedPartitionedSink[Any, Any],
    assignment: dict[str, int],
    worker_index: int,
    resumed: dict[str, Any],
    snapshots: Callable[[int, list[tuple[str, Any]]], None] | None,
    check: Callable[[int, list[Any]], Any],
    closers: list[Callable[[], None]],
    peers: int = 2,
) -> Stream[Any]:
    """Route ``(key, value)`` items to their partition's primary; write them in epoch order."""
    parts = sorted(assignment)
    count = len(parts)
    part_fn = sink.part_fn
    writers = {}
    for part in parts:
        if assignment[part] == worker_index:
            writer = sink.build_part(step_id, part, resumed.get(part))
            writers[part] = writer
            closers.append(writer.close)
    routes = [assignment[part] for part in parts]

    def route(item: Any) -> int:
        return routes[part_fn(item[0]) % count]

    if count == 1:
        only = routes[0]

        def route(item: Any) -> int:
            return only

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        eager = EagerNotificator()
        touched: dict[int, set[str]] = {}
        # an epoch whose close waits for a partition's Retry: [its capability (owned),
        # the partitions still to snapshot, the states so far, when to ask again]
        stalled: list[Any] = []

        def write(epoch_cap: Capability, items: list[Any]) -> None:
            epoch = epoch_cap.time
            check(epoch, items)
            by_part: dict[str, list[Any]] = {}
            if count == 1:
                by_part[parts[0]] = [value for _, value in items]
            else:
                for key, value in items:
                    part = parts[part_fn(key) % count]
                    values = by_part.get(part)
                    if values is None:
                        values = by_part[part] = []
                    values.append(value)
            for part, values in by_part.items():
                try:
                    writers[part].write_batch(values)
                except Exception as exc:
                    raise _write_error(step_id, worker_index, epoch, exc) from exc
            touched.setdefault(epoch, set()).update(by_part)

        def close(epoch_cap: Capability) -> None:
            # The partitions written in the epoch see it close, through their
            # snapshot(), with recovery or without: it is where a sink commits.
            names = touched.pop(epoch_cap.time, None)
            if names:
                finish(epoch_cap, sorted(names), [])

        def finish(epoch_cap: Capability, names: list[str], states: list[tuple[str, Any]]) -> None:
            """Snapshot ``names`` in turn; a Retry keeps the epoch open (raises _Stalled)."""
            epoch = epoch_cap.time
            while names:
                part = names[0]
                try:
                    states.append((part, writers[part].snapshot()))
                except StatefulSinkPartition.Retry as retry:
                    delay = max(0.0, retry.timeout.total_seconds())
                    if not stalled:
                        stalled[:] = [epoch_cap.retain(), names, states, 0.0]
                    stalled[3] = time.monotonic() + delay
                    info.activate_after(delay)
                    raise _Stalled() from None
                except Exception as exc:
                    raise StepError(
                        f"output step {step_id!r} on worker {worker_index}, epoch {epoch}: "
                        f"partition {part!r}'s snapshot() raised {type(exc).__name__}: {exc}"
                    ) from exc
                del names[0]
            if snapshots is not None:
                snapshots(epoch, states)
            if stalled:  # durable at last: the epoch may complete
                held = stalled[0]
                stalled.clear()
                held.drop()

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for item_cap, items in inp:
                eager.notify_at(item_cap.retain(), items)
            try:
                if stalled:
                    # later epochs wait (queued, their capabilities held) until this one is
                    # durable; an activation before the partition's pause is over only queues
                    if time.monotonic() < stalled[3]:
                        return
                    finish(*stalled[:3])
                eager.for_each([inp.frontier], write, close)
            except _Stalled:
                return

        return logic

    # one worker: no routing per item (every worker must build the same channel, so
    # the choice depends on the worker count only)
    pact = Pipeline() if peers == 1 else Exchange(route)
    return stream.unary_frontier(pact, f"{step_id}.write", constructor)
