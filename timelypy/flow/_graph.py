"""Building a flow's graph on one worker: streams, fused stateless chains, graph steps.

A :class:`GraphBuilder` turns the steps of a
:class:`~timelypy.flow.Dataflow` into runtime operators, in the order
they were added (upstream first).  Each flow stream is a :class:`Lazy`: a
runtime stream plus the stateless steps not yet applied to it.  A
stateless step whose input stream has no other reader joins that chain,
so ``map -> filter -> key_on`` is one operator that applies each step to a
whole batch in turn; anything else (a stateful step, a stream read twice,
a sink) first *materialises* the chain as one operator.

The step kinds of the stream graph are described by the options the
operators of :mod:`timelypy.flow.operators` give their steps:
:class:`StatelessSpec` (a batch function per worker) and
:class:`KeyedSpec` (a :class:`~timelypy.flow._keyed.KeyedLogic` and what
runs before it), :class:`RuntimeSpec` (runtime operators of the step's
own); ``branch``, ``merge``, ``redistribute``, ``input`` and
``output`` are built here directly.

A ``branch`` whose two sides pass through stateless steps only (each
stream read once) into one ``merge`` that reads just those two is built as
one operator: per batch, the predicate splits it, each side's steps run on
their part, and both results leave as one batch (a merge promises no order
between its inputs).  It saves the branch, the sides' chains and the merge
their per-batch costs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from operator import not_
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange, Pipeline
from timelypy.dataflow.handles import Frontier
from timelypy.dataflow.operators.concat import concatenate
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError
from timelypy.flow.dataflow import Step
from timelypy.progress.operate import FrontierInterest

if TYPE_CHECKING:
    from timelypy.flow.driver import FlowWorker

__all__ = ["BatchFn", "StatelessSpec", "KeyedSpec", "RuntimeSpec", "Lazy", "GraphBuilder"]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]


@dataclasses.dataclass(frozen=True)
class StatelessSpec:
    """A stateless step: ``make(worker_index, step_id)`` gives its batch function."""

    make: Callable[[int, str], BatchFn]
    what: str


@dataclasses.dataclass(frozen=True)
class KeyedSpec:
    """A keyed step: ``make(step_id)`` gives its logic on each worker.

    ``prepare(step_id)`` is a batch function applied before the items are
    routed (``count_final``'s key); ``combine`` an associative reducer that
    folds each worker's values per epoch and key before they are routed.
    """

    make: Callable[[str], Any]
    prepare: Callable[[str], BatchFn] | None = None
    combine: Callable[[Any, Any], Any] | None = None


@dataclasses.dataclass(frozen=True)
class RuntimeSpec:
    """A step that is its own runtime operators: ``build(stream, step_id, worker)``.

    ``stream`` is the step's (materialised) input stream, ``worker`` the
    worker it is built on; the result is the step's output stream.  Used by
    :mod:`timelypy.flow.operators.arrow`, whose steps exchange and close
    epochs themselves.
    """

    build: Callable[[Stream[Any], str, Any], Stream[Any]]


@dataclasses.dataclass
class Lazy:
    """A flow stream on this worker: ``base`` with ``chain``'s steps still to apply."""

    base: Stream[Any]
    chain: list[tuple[Step, BatchFn]]


@dataclasses.dataclass(frozen=True)
class _Side:
    """The base of a side of a fused branch: built by its merge (see the module doc)."""

    branch: Step
    side: int


class GraphBuilder:
    """Adds the runtime operators of a flow's steps to a scope, for one :class:`FlowWorker`."""

    def __init__(self, runner: FlowWorker, scope: Scope) -> None:
        self.runner = runner
        self.scope = scope
        self.flow = runner.flow
        self.worker = runner.worker
        self.streams: dict[str, Lazy] = {}
        #: runtime streams whose frontier tells when outputs are written
        self.outputs: list[Stream[Any]] = []
        #: fused branches: merge step ID -> (the branch step, the branch's input stream)
        self._diamonds: dict[str, tuple[Step, Stream[Any]]] = {}

    # -- streams ------------------------------------------------------------------

    def set_stream(self, stream_id: str, stream: Stream[Any]) -> None:
        """Register the runtime stream of flow stream ``stream_id``."""
        self.streams[stream_id] = Lazy(stream, [])

    def lazy(self, stream_id: str, step: Step) -> Lazy:
        """The flow stream ``stream_id`` as read by ``step``."""
        lazy = self.streams.get(stream_id)
        if lazy is None:
            raise FlowError(
                f"step {step.step_id!r} ({step.operator}) reads stream {stream_id!r}, which no "
                "earlier step writes"
            )
        return lazy

    def materialize(self, stream_id: str, step: Step) -> Stream[Any]:
        """The runtime stream of ``stream_id`` with its chain applied (built once)."""
        lazy = self.lazy(stream_id, step)
        base: Any = lazy.base
        if isinstance(base, _Side):  # (never: _diamond made sure only the merge reads it)
            raise FlowError(f"step {step.step_id!r} reads a side of a fused branch")
        if lazy.chain:
            from timelypy.flow.steps import stateless_chain

            name = "+".join(part.step_id for part, _ in lazy.chain)
            lazy.base = stateless_chain(lazy.base, name, lazy.chain)
            lazy.chain = []
        return lazy.base

    def extend(self, stream_id: str, step: Step, fn: BatchFn, out: str) -> None:
        """``out`` is ``stream_id`` with ``fn`` applied: fused if ``step`` is its only reader."""
        if self.flow.consumers(stream_id) == 1:
            lazy = self.lazy(stream_id, step)
            self.streams[out] = Lazy(lazy.base, [*lazy.chain, (step, fn)])
        else:
            self.streams[out] = Lazy(self.materialize(stream_id, step), [(step, fn)])

    def finish(self) -> None:
        """Build the chains that nobody reads (an ``inspect`` at the end must still run)."""
        for stream_id, lazy in list(self.streams.items()):
            if lazy.chain and self.flow.consumers(stream_id) == 0:
                self.outputs.append(self.materialize(stream_id, Step("end", stream_id)))

    # -- graph steps --------------------------------------------------------------

    def build(self, step: Step) -> None:
        """Add the operators of stream-graph step ``step``."""
        options = step.options
        op = step.operator
        if isinstance(options, StatelessSpec):
            fn = options.make(self.worker.index, step.step_id)
            self.extend(step.ups[0], step, fn, step.outs[0])
        elif isinstance(options, KeyedSpec):
            self._keyed(step, options)
        elif isinstance(options, RuntimeSpec):
            stream = self.materialize(step.ups[0], step)
            self.set_stream(step.outs[0], options.build(stream, step.step_id, self.worker))
        elif op == "output":
            self._output(step)
        elif op == "branch":
            self._branch(step)
        elif op == "merge":
            if step.step_id in self._diamonds:
                self._fused_branch(step)
                return
            streams = [self.materialize(up, step) for up in step.ups]
            self.set_stream(step.outs[0], concatenate(self.scope, streams))
        elif op == "redistribute":
            counter = itertools.count(self.worker.index)
            stream = self.materialize(step.ups[0], step)
            moved = stream.unary(Exchange(lambda item: next(counter)), step.step_id, _forward)
            self.set_stream(step.outs[0], moved)
        else:
            raise FlowError(f"step {step.step_id!r}: unknown stream operator {op!r}")

    def _keyed(self, step: Step, spec: KeyedSpec) -> None:
        from timelypy.flow._keyed import aligned_marks, keyed_operator
        from timelypy.flow.steps import combine_epoch, keyed_check, take_chain

        check = keyed_check(step)
        step_id = step.step_id
        if step.operator == "join":
            tagged = []
            for side, up in enumerate(step.ups):
                # each side tagged with its number, fused into the side's own chain
                out = f"{step_id}.side{side}"
                self.extend(up, step, _tagger(check, side), out)
                tagged.append(self.materialize(out, step))
            stream = concatenate(self.scope, tagged)
            check = _no_check
        else:
            up = step.ups[0]
            if spec.prepare is not None:
                out = f"{step_id}.prepared"
                self.extend(up, step, spec.prepare(step_id), out)
                up = out
                check = _no_check  # what prepare makes is (str, value) already
            if spec.combine is None:
                stream = self.materialize(up, step)
            else:
                # Combined per epoch on this worker first (on one worker too), the
                # stateless steps before it run inside the fold (steps.combine_epoch).
                stream, prelude = take_chain(self, up, step)
                local = dataclasses.replace(step, logic=(spec.combine,))
                name = "+".join(
                    [*(part.step_id for part, _ in prelude if part is not step), f"{step_id}.local"]
                )
                stream = combine_epoch(
                    stream,
                    name,
                    local,
                    Pipeline(),
                    None,
                    check=check is not _no_check,
                    prelude=prelude,
                )
                check = _no_check
        logic = spec.make(step_id)
        if len(step.outs) == 3 and hasattr(logic, "emit_late"):
            # a window step: what nobody reads is not made
            logic.emit_late = self.flow.consumers(step.outs[1]) > 0
            logic.emit_meta = self.flow.consumers(step.outs[2]) > 0
        recovery = self.runner.recovery
        snapshots = None
        if recovery is not None:
            worker = self.worker
            logic.restore(
                recovery.store.load(step_id, self.runner.resume_epoch, worker.index, worker.peers)
            )
            snapshot = recovery.writer.snapshot

            def snapshots(epoch: int, states: list[tuple[str, Any]]) -> None:
                snapshot(step_id, epoch, states)

        marks = None
        if getattr(logic, "aligned_wait", None) is not None:
            # an aligned clock: every worker's progress, for one watermark everywhere
            marks = aligned_marks(stream, step_id, logic.ts_getter)
        result = keyed_operator(
            stream, step_id, logic, check, snapshots, ends=self.runner.input_ends(step), marks=marks
        )
        if len(step.outs) == 3:  # a window step: results, late values, metadata
            from timelypy.flow._windows import split_events

            for out, events in zip(
                step.outs, split_events(result, f"{step_id}.split"), strict=True
            ):
                self.set_stream(out, events)
            return
        self.set_stream(step.outs[0], result)

    def _diamond(self, step: Step) -> Step | None:
        """The merge that rejoins both sides of branch ``step`` through stateless steps only.

        Each stream from a side to the merge must have one reader, every step
        on the way be stateless with one input and one output, and the merge
        read exactly the two sides' last streams.
        """
        readers: dict[str, Step] = {}
        for other in self.flow.steps:
            for up in other.ups:
                readers[up] = other
        merges = []
        for stream_id in step.outs:
            while True:
                reader = readers.get(stream_id)
                if reader is None or self.flow.consumers(stream_id) != 1:
                    return None
                if reader.operator == "merge":
                    merges.append((reader, stream_id))
                    break
                if (
                    not isinstance(reader.options, StatelessSpec)
                    or len(reader.ups) != 1
                    or len(reader.outs) != 1
                ):
                    return None
                stream_id = reader.outs[0]
        (merge, first), (other, second) = merges
        if merge is not other or len(merge.ups) != 2 or {first, second} != set(merge.ups):
            return None
        return merge

    def _branch(self, step: Step) -> None:
        predicate = step.options
        stream = self.materialize(step.ups[0], step)
        merge = self._diamond(step)
        if merge is not None:  # built with the merge, as one operator
            self._diamonds[merge.step_id] = (step, stream)
            for side, out in enumerate(step.outs):
                self.streams[out] = Lazy(_Side(step, side), [])  # type: ignore[arg-type]
            return
        builder = OperatorBuilder(step.step_id, self.scope)
        inp = builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER)
        true_out, trues = builder.new_output()
        false_out, falses = builder.new_output()
        step_id = step.step_id

        def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
            worker = self.worker.index

            def logic(frontiers: list[Frontier]) -> None:
                for cap, items in inp:
                    yes, no = _split(predicate, items, step_id, worker, cap.time)
                    if not no:
                        true_out.give_batch(cap, items)
                        continue
                    if yes:
                        true_out.give_batch(cap, yes)
                    false_out.give_batch(cap, no)

            return logic

        builder.build(constructor)
        self.set_stream(step.outs[0], trues)
        self.set_stream(step.outs[1], falses)

    def _fused_branch(self, merge: Step) -> None:
        """Branch, both sides' stateless steps and ``merge``: one operator (see the module doc)."""
        from timelypy.flow.steps import _compiled, apply_chain

        branch, stream = self._diamonds.pop(merge.step_id)
        predicate = branch.options
        chains: list[list[tuple[Any, Any]]] = [[], []]
        for up in merge.ups:
            lazy = self.lazy(up, merge)
            side: Any = lazy.base
            assert isinstance(side, _Side) and side.branch is branch
            name = "+".join([branch.step_id, *(part.step_id for part, _ in lazy.chain)])
            chains[side.side] = _compiled(list(lazy.chain), name)
        yes_chain, no_chain = chains
        branch_id = branch.step_id
        name = f"{branch_id}+{merge.step_id}"

        def constructor(cap: Capability, info: Any) -> Callable[..., None]:
            worker = info.worker_index

            def logic(inp: Any, out: Any) -> None:
                for cap, items in inp:
                    epoch = cap.time
                    yes, no = _split(predicate, items, branch_id, worker, epoch)
                    if yes and yes_chain:
                        yes = apply_chain(yes_chain, worker, epoch, yes)
                    if no and no_chain:
                        no = apply_chain(no_chain, worker, epoch, no)
                    if yes and no:
                        # (a new list: a step's result may be a list its function keeps)
                        out.give_batch(cap, yes + no)
                    elif yes or no:
                        out.give_batch(cap, yes or no)

            return logic

        self.set_stream(merge.outs[0], stream.unary(Pipeline(), name, constructor))

    def _output(self, step: Step) -> None:
        from timelypy.flow._io import dynamic_sink, partitioned_sink
        from timelypy.flow.outputs import OutputConfig
        from timelypy.flow.sinks import CaptureSink, DynamicSink, FixedPartitionedSink
        from timelypy.flow.steps import keyed_check

        sink = step.config
        worker = self.worker
        runner = self.runner
        step_id = step.step_id
        if isinstance(sink, CaptureSink):
            stream = self.materialize(step.ups[0], step)
            done = runner.capture_to(stream, step, None)
        elif isinstance(sink, DynamicSink):
            stream = self.materialize(step.ups[0], step)
            done = dynamic_sink(stream, step_id, sink, worker.index, worker.peers, runner.closers)
        elif isinstance(sink, FixedPartitionedSink):
            from timelypy.flow.primaries import agree_primaries

            check = keyed_check(step)
            out = f"{step_id}.checked"
            self.extend(step.ups[0], step, check, out)
            stream = self.materialize(out, step)
            reachable = list(sink.list_parts())
            for part in reachable:
                if not isinstance(part, str):
                    raise FlowError(
                        f"output step {step_id!r} on worker {worker.index}: list_parts must give "
                        f"partition names (str), got {part!r}"
                    )
            assignment = agree_primaries(worker, reachable, None, f"output step {step_id!r}")
            if not assignment:
                raise FlowError(f"output step {step_id!r}: no worker listed any partition")
            mine = [part for part, primary in assignment.items() if primary == worker.index]
            recovery = runner.recovery
            resumed: dict[str, Any] = {}
            snapshots = None
            if recovery is not None:
                resumed = recovery.store.load_keys(step_id, mine, runner.resume_epoch)
                snapshot = recovery.writer.snapshot

                def snapshots(epoch: int, states: list[tuple[str, Any]]) -> None:
                    snapshot(step_id, epoch, states)

            done = partitioned_sink(
                stream,
                step_id,
                sink,
                assignment,
                worker.index,
                resumed,
                snapshots,
                _no_check,
                runner.closers,
                worker.peers,
            )
        elif isinstance(sink, OutputConfig):
            stream = self.materialize(step.ups[0], step)
            done = runner.capture_to(stream, step, sink)
        else:
            raise FlowError(f"output step {step_id!r}: unknown sink {sink!r}")
        self.outputs.append(done)


def _split(
    predicate: Callable[[Any], bool], items: list[Any], step_id: str, worker: int, epoch: int
) -> tuple[list[Any], list[Any]]:
    """A branch's batch as (the items ``predicate`` keeps, the others).

    The others are empty when it keeps all.  A predicate that raises or
    returns no bool stops the flow, naming the step.
    """
    try:
        keep = list(map(predicate, items))
        if list(map(type, keep)).count(bool) != len(keep):
            bad = next(k for k in keep if type(k) is not bool)
            raise TypeError(f"the predicate must return a bool, got {type(bad).__name__} {bad!r}")
    except Exception as exc:
        from timelypy.flow.steps import step_error

        raise step_error(step_id, worker, epoch, "the predicate", exc) from exc
    yes = list(itertools.compress(items, keep))
    if len(yes) == len(items):
        return yes, []
    return yes, list(itertools.compress(items, map(not_, keep)))


def _tagger(check: BatchFn, side: int) -> BatchFn:
    def tag(epoch: int, items: list[Any]) -> list[Any]:
        check(epoch, items)
        return [(key, (side, value)) for key, value in items]

    return tag


def _no_check(epoch: int, items: list[Any]) -> list[Any]:
    return items


def _forward(cap: Capability, info: Any) -> Callable[..., None]:
    def logic(inp: Any, out: Any) -> None:
        out.forward(inp)

    return logic
