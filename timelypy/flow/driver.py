"""Running a flow on one worker: build its steps, feed its input, write its outputs.

:func:`flow_program` turns a :class:`~timelypy.flow.Dataflow` into a
program ``program(worker)`` for :func:`timelypy.execute` (or
:func:`timelypy.initialize_from`): the same program runs on every worker,
whether they are threads, processes or Spark tasks.  On each worker it

1. agrees on the primaries of partitioned inputs and outputs
   (:mod:`timelypy.flow.primaries`);
2. builds the flow's steps as runtime operators (:mod:`timelypy.flow.steps`),
   with an input operator that holds one capability per partition it reads,
   at that partition's current epoch;
3. pulls from its readers a bounded batch at a time (:data:`PULL_LIMIT`
   values or :data:`PULL_SECONDS`, whichever comes first), sends each batch
   at its epoch, downgrades a partition's capability when it advances
   (``AdvanceTo``) and drops it when the reader ends, and steps the worker
   in between (a few times while the outputs lag the input), so input,
   computation and output interleave and a closed epoch's results leave
   without waiting for the next read;
4. holds back (steps without reading) while more than
   :data:`MAX_OPEN_EPOCHS` of the epochs it advanced past (sampled once per
   step) are not yet complete at its outputs, so a fast input cannot run
   ahead of the computation without bound.

When the program returns, :func:`timelypy.execute.run_worker` steps the
worker until every epoch is complete.  With a recovery config
(``timelypy.flow._flow_recovery``) the program first agrees on the execution and reloads
the stateful steps' snapshots, commits snapshots and its frontier as it
runs, and steps to the end itself so that it can record the last frontier.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from timelypy.dataflow.channels import Exchange, Pact, Pipeline
from timelypy.dataflow.handles import OperatorOutput
from timelypy.dataflow.operators.concat import concatenate
from timelypy.dataflow.probe import ProbeHandle
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError
from timelypy.flow._chain_reader import (
    PULL_LIMIT,
    PULL_SECONDS,
    ChainReader,
)
from timelypy.flow._ends import EndsSource
from timelypy.flow._flow_recovery import Recovery, partition_recorder
from timelypy.flow._graph import GraphBuilder
from timelypy.flow._io import EpochTicker, SourceReader, detached_output
from timelypy.flow._same_flow import check_same_flow
from timelypy.flow.dataflow import CHAIN_INPUT, KEYED, WINDOWED, Dataflow, Step
from timelypy.flow.inputs import (
    InputConfig,
    ManualInputConfig,
    PartitionedInputConfig,
)
from timelypy.flow.outputs import (
    ManualOutputConfig,
    PartitionedOutputConfig,
    StdOutputConfig,
    TestingOutputConfig,
    print_batch,
)
from timelypy.flow.primaries import agree_primaries, broadcast_from_first
from timelypy.flow.sources import AbortExecution, DynamicSource, FixedPartitionedSource, Source
from timelypy.flow.state import StepState
from timelypy.flow.steps import (
    batch_function,
    keyed_check,
    keyed_step,
    output_sink,
    reduce_epoch,
)
from timelypy.flow.window_ops import window_step
from timelypy.recovery import AttachedExecution, RecoveryConfig
from timelypy.worker import Worker

__all__ = [
    "flow_program",
    "PairsInput",
    "Collect",
    "FlowCancelled",
    "FlowWorker",
    "PULL_LIMIT",
    "PULL_SECONDS",
    "CATCH_UP_STEPS",
    "MAX_OPEN_EPOCHS",
]


log = logging.getLogger("timelypy.flow")

#: Steps a worker takes after a read while its outputs lag its input, at most.
CATCH_UP_STEPS = 4
#: How many advanced-past epochs may be incomplete before a worker stops reading.
MAX_OPEN_EPOCHS = 64
#: Seconds an aborting worker waits for the epochs before the abort to complete, at most.
ABORT_DRAIN_SECONDS = 10.0
#: Seconds of system time an epoch of a stream-graph source lasts, by default.
EPOCH_INTERVAL = 10.0

#: Receives ``(epoch, items)`` of the captures that have no output config.
Collect = Callable[[int, list[Any]], None]


class FlowCancelled(Exception):
    """Raised inside a worker whose caller stopped listening (``run``'s iterator was closed)."""


@dataclasses.dataclass(frozen=True)
class PairsInput:
    """An iterable of ``(epoch, item)`` pairs read by worker 0 (what ``run(flow, inp)`` takes)."""

    pairs: Iterable[Any]


class FlowWorker:
    """A flow built on one worker, with its readers; :meth:`feed` runs it.

    ``collect`` receives the items of captures without an output config;
    ``collect_on`` is the worker they are gathered on (``None``: each
    worker collects its own).
    """

    def __init__(
        self,
        worker: Worker,
        flow: Dataflow,
        input_config: InputConfig | PairsInput | None,
        collect: Collect | None,
        *,
        collect_on: int | None = 0,
        resume_epoch: int = 0,
        cancelled: threading.Event | None = None,
        recovery: Recovery | None = None,
        epoch_interval: float = EPOCH_INTERVAL,
        sources: dict[str, Any] | None = None,
    ) -> None:
        self.worker = worker
        self.recovery = recovery
        self.flow = flow
        self.input_config = input_config
        self.collect = collect
        self.collect_on = collect_on
        self.resume_epoch = resume_epoch
        self.cancelled = cancelled
        self.epoch_interval = epoch_interval
        self.probe = ProbeHandle()
        #: Every stateful chain step's state on this worker, by step ID.
        self.states: dict[str, StepState] = {}
        self.readers: list[Any] = []
        #: what to close when the run ends (sink partitions)
        self.closers: list[Callable[[], None]] = []
        steps = flow.steps
        chain_input = next((s for s in steps if s.form == "chain" and s.operator == "input"), None)
        self.input_step_id = chain_input.step_id if chain_input is not None else "input"
        self._chain_stream = chain_input.outs[0] if chain_input is not None else CHAIN_INPUT
        if not any(
            step.operator in ("capture", "output", "inspect", "inspect_debug", "raises")
            for step in steps
        ):
            raise FlowError(
                "the flow has no output: add a capture() step (with an output config, or "
                "without one for run and run_cluster to return its items), or an op.output "
                "or op.inspect step"
            )
        #: the inputs: (step ID, config or source, the flow stream it writes, its readers)
        self.inputs: list[tuple[str, Any, str, list[Any]]] = []
        if flow.has_chain:
            if input_config is None:
                raise FlowError(
                    "the flow's chain has no input: pass one to run (an iterable of (epoch, "
                    "item), or an input config) or start the chain with flow.input(step_id, "
                    "input_config)"
                )
            self.inputs.append((self.input_step_id, input_config, self._chain_stream, []))
        sources = dict(sources or {})
        for step in steps:
            if step.form == "graph" and step.operator == "input":
                config = sources.pop(step.step_id, step.config)
                self.inputs.append((step.step_id, config, step.outs[0], []))
        if sources:
            raise FlowError(
                f"no input step of the flow is named {sorted(sources)[0]!r}; its inputs are "
                f"{[step_id for step_id, *_ in self.inputs]}"
            )
        self._ticker: EpochTicker | None = None
        if any(isinstance(config, Source) for _, config, _, _ in self.inputs):
            start = broadcast_from_first(worker, time.time(), "the epoch clock's start")
            self._ticker = EpochTicker(start, epoch_interval, resume_epoch)
        for step_id, config, _, readers in self.inputs:
            readers.extend(self._open(step_id, config))
            self.readers.extend(readers)

    # -- inputs -------------------------------------------------------------

    def _open(self, step_id: str, config: Any) -> list[Any]:
        """The readers of one input on this worker."""
        worker = self.worker
        index, peers = worker.index, worker.peers
        readers: list[Any] = []
        if isinstance(config, Source):
            return self._open_source(step_id, config)
        if isinstance(config, PairsInput):
            if index == 0:
                readers.append(
                    ChainReader("the (epoch, item) input", step_id, index, config.pairs, True)
                )
        elif isinstance(config, ManualInputConfig):
            source = config.input_builder(index, peers, self.resume_epoch)
            if source is not None:
                readers.append(ChainReader("the input builder", step_id, index, source, False))
        elif isinstance(config, PartitionedInputConfig):
            reachable = _list_parts(config.list_parts, index, peers, step_id)
            required = config.all_parts()
            assignment = agree_primaries(
                worker,
                reachable,
                None if required is None else list(required),
                f"input step {step_id!r}",
            )
            mine = sorted(part for part, primary in assignment.items() if primary == index)
            recovery = self.recovery
            resumed = (
                {}
                if recovery is None
                else recovery.store.load_keys(step_id, mine, self.resume_epoch)
            )
            for part in mine:
                if part in resumed:
                    source = config.build_part(part, self.resume_epoch, resumed[part])
                else:
                    source = config.build_part(part, self.resume_epoch)
                reader = ChainReader(f"partition {part!r}", step_id, index, source, False)
                snap = getattr(source, "snapshot", None)
                if recovery is not None and callable(snap):
                    reader.snap = snap
                    reader.record = partition_recorder(recovery, step_id, part)
                readers.append(reader)
        else:
            raise FlowError(
                f"input step {step_id!r}: unknown input {config!r}; use ManualInputConfig, a "
                "PartitionedInputConfig, or an iterable of (epoch, item) pairs"
            )
        return readers

    def _open_source(self, step_id: str, source: Source[Any]) -> list[Any]:
        """The readers of a stream-graph source on this worker."""
        worker = self.worker
        index = worker.index
        ticker = self._ticker
        assert ticker is not None
        if isinstance(source, DynamicSource):
            part = source.build(step_id, index, worker.peers)
            return [SourceReader(f"worker {index}'s partition", step_id, index, part, ticker)]
        if not isinstance(source, FixedPartitionedSource):
            raise FlowError(
                f"input step {step_id!r}: a source must be a FixedPartitionedSource or a "
                f"DynamicSource, got {source!r}"
            )
        reachable = _list_parts(lambda i, n: source.list_parts(), index, worker.peers, step_id)
        assignment = agree_primaries(worker, reachable, None, f"input step {step_id!r}")
        if not assignment and index == 0:
            log.warning(
                "input step %r: no worker listed a partition of %r, so it reads nothing "
                "(a missing file or an empty directory?)",
                step_id,
                source,
            )
        mine = sorted(part for part, primary in assignment.items() if primary == index)
        recovery = self.recovery
        resumed = (
            {} if recovery is None else recovery.store.load_keys(step_id, mine, self.resume_epoch)
        )
        readers: list[Any] = []
        for name in mine:
            built = source.build_part(step_id, name, resumed.get(name))
            reader = SourceReader(f"partition {name!r}", step_id, index, built, ticker)
            if recovery is not None:
                reader.snap = built.snapshot
                reader.record = partition_recorder(recovery, step_id, name)
            readers.append(reader)
        return readers

    def _source(self, scope: Scope, step_id: str, readers: list[Any]) -> Stream[Any]:
        output, stream, root = detached_output(scope, step_id)
        resume = self.resume_epoch
        for reader in readers:
            reader.start(root.delayed(resume))
            reader.out = output
        root.drop()
        self._outputs.append(output)
        return stream

    # -- steps --------------------------------------------------------------

    def _state(self, step: Step) -> StepState:
        state = StepState(step.step_id, self.worker.index)
        self.states[step.step_id] = state
        return state

    def _recovered_state(self, step: Step) -> StepState:
        """A keyed step's state, reloaded from the snapshots; each closed epoch snapshotted."""
        state = self._state(step)
        recovery = self.recovery
        if recovery is None:
            return state
        worker = self.worker
        step_id, states = step.step_id, state.states
        states.update(recovery.store.load(step_id, self.resume_epoch, worker.index, worker.peers))
        snapshot = recovery.writer.snapshot

        def on_close(epoch: int, keys: set[str]) -> None:
            if keys:
                get = states.get
                snapshot(step_id, epoch, [(key, get(key)) for key in keys])

        state.on_close(on_close)
        return state

    def build(self, scope: Scope) -> None:
        """Add the flow's operators to ``scope``."""
        graph = GraphBuilder(self, scope)
        self._outputs: list[OperatorOutput[Any]] = []
        self._scope = scope
        #: per input step: its readers' ends on this worker (made when a step reads them)
        self._ends: dict[str, EndsSource] = {}
        self._producers: dict[str, Step] | None = None
        for step_id, _, stream_id, readers in self.inputs:
            graph.set_stream(stream_id, self._source(scope, step_id, readers))
        for step in self.flow.steps:
            if step.form == "graph":
                if step.operator != "input":
                    graph.build(step)
            elif step.operator != "input":
                self._chain_step(graph, step)
        graph.finish()
        for done in graph.outputs:
            done.probe_with(self.probe)

    def _chain_step(self, graph: GraphBuilder, step: Step) -> None:
        """Add the operators of one step of the epoch chain."""
        op = step.operator
        up, out = step.ups[0], step.outs[0]
        if op in ("reduce_epoch", "reduce_epoch_local"):
            # Folded on the sending worker first, with the steps before it: one item
            # per key and epoch leaves it (timelypy.flow.steps.reduce_epoch).
            stream = reduce_epoch(graph, step, self.worker.peers, self._state(step))
        elif op in KEYED:
            graph.extend(up, step, keyed_check(step), f"{step.step_id}.checked")
            stream = graph.materialize(f"{step.step_id}.checked", step)
            stream = keyed_step(stream, step, self._recovered_state(step))
        elif op in WINDOWED:
            graph.extend(up, step, keyed_check(step), f"{step.step_id}.checked")
            stream = graph.materialize(f"{step.step_id}.checked", step)
            state = self._recovered_state(step)
            late_id = step.outs[1] if len(step.outs) > 1 else None
            stream, late = window_step(
                stream,
                step.step_id,
                step.options,
                state,
                self.input_ends(step),
                late_stream=late_id is not None and self.flow.consumers(late_id) > 0,
            )
            if late is not None:
                assert late_id is not None
                graph.set_stream(late_id, late)
        elif op == "capture":
            stream = graph.materialize(up, step)
            graph.outputs.append(self._capture(stream, step))
        else:
            graph.extend(up, step, batch_function(step), out)
            return
        graph.set_stream(out, stream)

    def capture_to(self, stream: Stream[Any], step: Step, config: Any) -> Stream[Any]:
        """Write ``stream`` to an epoch-chain output config (a graph ``output`` of one)."""
        return self._capture(stream, dataclasses.replace(step, config=config))

    def _capture(self, stream: Stream[Any], step: Step) -> Stream[Any]:
        config = step.config
        worker = self.worker
        name = f"{step.step_id}.write"
        if config is None:
            if self.collect is None and step.form == "graph":
                raise FlowError(
                    f"output step {step.step_id!r} writes to a CaptureSink, which hands items "
                    "to the caller, but run_main, cluster_main and the command line return "
                    "nothing: run the flow with run, run_cluster or timelypy_spark.run_flow, "
                    "or write to another sink"
                )
            if self.collect is None:
                raise FlowError(
                    f"capture step {step.step_id!r} has no output config, and this way of running "
                    "returns nothing to a caller: give it one (StdOutputConfig(), "
                    "ManualOutputConfig(...))"
                )
            collect_on = self.collect_on
            pact: Pact = Pipeline() if collect_on is None else Exchange(lambda item: collect_on)
            collect = self.collect
            if collect_on is not None and worker.index != collect_on:
                return output_sink(stream, name, pact, _unexpected(step.step_id))
            return output_sink(stream, name, pact, collect)
        if isinstance(config, ManualOutputConfig):
            writer = config.output_builder(worker.index, worker.peers)
            if not callable(writer):
                raise FlowError(
                    f"capture step {step.step_id!r} on worker {worker.index}: the output_builder "
                    f"must return a callable of (epoch, item), got {writer!r}"
                )
            return output_sink(stream, name, Pipeline(), _per_item(writer, step.step_id))
        if isinstance(config, StdOutputConfig):
            return output_sink(stream, name, Pipeline(), print_batch)
        if isinstance(config, TestingOutputConfig):
            if worker.config.processes > 1:
                raise FlowError(
                    f"capture step {step.step_id!r}: TestingOutputConfig appends to a list in "
                    f"one process, but this run has {worker.config.processes} processes; "
                    "capture without a config (run_cluster gathers the items) or write with "
                    "ManualOutputConfig"
                )
            sink = config.sink
            return output_sink(
                stream,
                name,
                Pipeline(),
                lambda epoch, items: sink.extend([(epoch, item) for item in items]),
            )
        if isinstance(config, PartitionedOutputConfig):
            return self._partitioned_output(stream, step, config, name)
        raise FlowError(f"capture step {step.step_id!r}: unknown output config {config!r}")

    def _partitioned_output(
        self, stream: Stream[Any], step: Step, config: PartitionedOutputConfig, name: str
    ) -> Stream[Any]:
        worker = self.worker
        step_id = step.step_id
        reachable = _list_parts(config.list_parts, worker.index, worker.peers, step_id)
        required = config.all_parts()
        assignment = agree_primaries(
            worker,
            reachable,
            None if required is None else list(required),
            f"output step {step_id!r}",
        )
        parts = sorted(assignment)
        part_for = config.part_for
        writers = {
            part: config.build_part(part) for part in parts if assignment[part] == worker.index
        }

        def part_of(item: Any) -> str:
            if type(item) is not tuple or len(item) != 2:
                raise FlowError(
                    f"output step {step_id!r} (partitioned) takes (key, value) items, got {item!r}"
                )
            part = part_for(item[0], parts)
            if part not in assignment:
                raise FlowError(
                    f"output step {step_id!r}: part_for({item[0]!r}) chose partition {part!r}, "
                    f"which no worker listed (partitions: {parts})"
                )
            return part

        def route(item: Any) -> int:
            return assignment[part_of(item)]

        def write(epoch: int, items: list[Any]) -> None:
            for item in items:
                writers[part_of(item)](epoch, item)

        return output_sink(stream, name, Exchange(route), write)

    # -- running ------------------------------------------------------------

    def input_ends(self, step: Step) -> Stream[int] | None:
        """The last epochs of the readers of the inputs upstream of ``step``, on every worker.

        Only those: a step whose inputs ended must not wait for other inputs
        (see :mod:`timelypy.flow._ends`).  ``None`` for a step with no input
        upstream: its end is its frontier's.
        """
        streams = []
        for input_id in sorted(self._upstream_inputs(step)):
            ends = self._ends.get(input_id)
            if ends is None:
                ends = self._ends[input_id] = EndsSource(self._scope, self.resume_epoch)
                if not any(r.step_id == input_id for r in self.readers):
                    ends.close()  # no reader of it on this worker
            streams.append(ends.stream)
        if len(streams) <= 1:
            return streams[0] if streams else None
        return concatenate(self._scope, streams)

    def _upstream_inputs(self, step: Step) -> set[str]:
        """The IDs of the input steps whose items reach ``step``."""
        producers = self._producers
        if producers is None:
            producers = self._producers = {}
            for each in self.flow.steps:
                for out in each.outs:
                    producers[out] = each
        found: set[str] = set()
        seen: set[str] = set()
        todo = list(step.ups)
        while todo:
            stream_id = todo.pop()
            if stream_id in seen:
                continue
            seen.add(stream_id)
            producer = producers.get(stream_id)
            if producer is None:
                if stream_id == self._chain_stream or stream_id == CHAIN_INPUT:
                    found.add(self.input_step_id)  # the chain's input given to run()
                continue
            if producer.operator == "input":
                found.add(producer.step_id)
            else:
                todo.extend(producer.ups)
        return found

    def _ended(self, reader: Any) -> None:
        ends = self._ends.get(reader.step_id)
        if ends is not None:
            last = max(
                e for e in (reader.epoch, reader.reached, self.resume_epoch) if e is not None
            )
            ends.ended(last)

    def feed(self) -> None:
        """Read every reader to its end, stepping the worker in between."""
        worker, probe = self.worker, self.probe
        readers = self.readers
        started = [False] * len(readers)
        open_epochs: deque[int] = deque()
        last_low = self.resume_epoch
        cancelled = self.cancelled
        recovery = self.recovery
        while readers:
            if cancelled is not None and cancelled.is_set():
                raise FlowCancelled("the caller stopped reading the flow's output")
            idle = True
            for i, reader in enumerate(readers):
                try:
                    reader.pull(reader.out, PULL_LIMIT, started[i])
                except AbortExecution:
                    self._abort(readers)
                    raise
                started[i] = True
                if not getattr(reader, "idle", False):
                    idle = False
                if recovery is not None and reader.reached is not None:
                    recovery.seen(reader.reached)
            finished = [reader for reader in readers if reader.done]
            if finished:
                for reader in finished:
                    reader.finish()
                    self._ended(reader)
                started = [s for s, r in zip(started, readers, strict=True) if not r.done]
                readers = [reader for reader in readers if not reader.done]
                live = {reader.step_id for reader in readers}
                for input_id, ends in self._ends.items():
                    if input_id not in live:
                        ends.close()  # every reader of that input on this worker ended
                for output in self._outputs:
                    output.flush()
                idle = False
            if idle:
                worker.step_or_park(_park_seconds(readers))
            else:
                worker.step()
            if readers:
                low = min(reader.epoch for reader in readers if reader.epoch is not None)
                # A few more steps while the outputs lag the input: a closed epoch's
                # results leave now, not after the next (perhaps slow) read.
                for _ in range(CATCH_UP_STEPS):
                    if not probe.less_than(low):
                        break
                    worker.step()
                if low > last_low:
                    open_epochs.append(last_low)
                    last_low = low
                while open_epochs and not probe.less_equal(open_epochs[0]):
                    open_epochs.popleft()
                while len(open_epochs) > MAX_OPEN_EPOCHS:
                    if cancelled is not None and cancelled.is_set():
                        raise FlowCancelled("the caller stopped reading the flow's output")
                    worker.step_or_park(0.05)
                    if recovery is not None:
                        recovery.checkpoint(probe)
                    while open_epochs and not probe.less_equal(open_epochs[0]):
                        open_epochs.popleft()
            if recovery is not None:
                recovery.checkpoint(probe)
        self.readers = readers
        for ends in self._ends.values():
            ends.close()
        # Run to the end here, not in execute's drain: to record the last frontier, and
        # to close the sinks once everything is written.
        while not probe.done():
            if cancelled is not None and cancelled.is_set():
                raise FlowCancelled("the caller stopped reading the flow's output")
            worker.step_or_park(0.01)
            if recovery is not None:
                recovery.checkpoint(probe)
        if recovery is not None:
            recovery.finish()
        self.close_sinks()

    def _abort(self, readers: list[Any]) -> None:
        """A source aborts: complete and commit the epochs before the readers' current ones."""
        low = min((r.epoch for r in readers if r.epoch is not None), default=None)
        if low is None:
            return
        probe, worker, recovery = self.probe, self.worker, self.recovery
        deadline = time.monotonic() + ABORT_DRAIN_SECONDS
        while probe.less_than(low) and time.monotonic() < deadline:
            worker.step_or_park(0.01)
        if recovery is not None:
            recovery.checkpoint(probe, force=True)

    def close_sinks(self) -> None:
        """Close the sink partitions (once)."""
        closers, self.closers = self.closers, []
        for close in closers:
            close()


def _park_seconds(readers: list[Any]) -> float:
    """How long a worker whose readers are all idle may park: until the first wakes."""
    now = time.time()
    wakes: list[float] = [
        reader.awake for reader in readers if getattr(reader, "awake", None) is not None
    ]
    if not wakes:
        return 0.01
    return min(0.01, max(0.0, min(wakes) - now))


def _list_parts(
    list_parts: Callable[[int, int], Iterable[str]], index: int, peers: int, step_id: str
) -> list[str]:
    parts = list(list_parts(index, peers))
    for part in parts:
        if not isinstance(part, str):
            raise FlowError(
                f"step {step_id!r} on worker {index}: list_parts must give partition names "
                f"(str), got {part!r}"
            )
    return parts


def _per_item(writer: Callable[[int, Any], Any], step_id: str) -> Callable[[int, list[Any]], None]:
    def write(epoch: int, items: list[Any]) -> None:
        item: Any = None
        try:
            for item in items:
                writer(epoch, item)
        except Exception as exc:
            exc.add_note(
                f"in step {step_id!r} (capture): the output raised writing {item!r} "
                f"at epoch {epoch}"
            )
            raise

    return write


def _unexpected(step_id: str) -> Callable[[int, list[Any]], None]:
    def write(epoch: int, items: list[Any]) -> None:
        raise AssertionError(f"capture {step_id!r}: items reached a worker that does not collect")

    return write


def flow_program(
    flow: Dataflow,
    input_config: InputConfig | PairsInput | None,
    collect: Collect | None = None,
    *,
    epoch_interval: float = EPOCH_INTERVAL,
    collect_on: int | None = 0,
    resume_epoch: int = 0,
    cancelled: threading.Event | None = None,
    on_built: Callable[[FlowWorker], Any] | None = None,
    recovery_config: RecoveryConfig | AttachedExecution | None = None,
    sources: dict[str, Any] | None = None,
) -> Callable[[Worker], None]:
    """The program that runs ``flow`` on each worker (for :func:`timelypy.execute`).

    With ``recovery_config`` the run is an execution against its store:
    worker 0 takes the store's execution lock, begins the execution and
    tells every worker its number and resume epoch (``resume_epoch`` is
    then ignored).  ``sources`` replaces the sources of stream-graph input
    steps, by step ID (Spark feeds its partitions to them this way).
    """

    def program(worker: Worker) -> None:
        with contextlib.ExitStack() as stack:
            if worker.peers > 1:
                check_same_flow(worker, flow)  # before anything runs or is recorded
            recovery = None
            resume = resume_epoch
            if recovery_config is not None:
                recovery = Recovery.begin(worker, recovery_config, stack)
                resume = recovery.execution.resume_epoch
            runner = FlowWorker(
                worker,
                flow,
                input_config,
                collect,
                collect_on=collect_on,
                resume_epoch=resume,
                cancelled=cancelled,
                recovery=recovery,
                epoch_interval=epoch_interval,
                sources=sources,
            )
            worker.dataflow(runner.build)
            if recovery is not None:
                recovery.check_claims()
            if on_built is not None:
                on_built(runner)
            try:
                runner.feed()
            finally:
                # Ended, failed or cancelled: readers still open close now (a socket
                # reader's connection), not whenever the garbage collector finds them.
                for _, _, _, readers in runner.inputs:
                    for reader in readers:
                        reader.close()

    return program
