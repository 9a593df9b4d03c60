"""``Dataflow``: the epoch-level flow, built step by step.

A :class:`Dataflow` is a description: a chain of *steps*, each an operator
(``map``, ``reduce_epoch``, ``capture``, ...) fleshed out with your logic.
Nothing runs until you pass it to :func:`~timelypy.flow.run` (or
``run_cluster``, ``cluster_main``, ``python -m timelypy.flow``,
``timelypy_spark.run_flow``), which builds it on every worker.

Every step has a *step ID*: a dotted path naming it uniquely in the flow
(as in bytewax).  Stateful steps take theirs from you (``reduce``,
``stateful_map``), because recovery labels their state with it; the others
are named after their operator (``map``, ``map_1``, ...) unless you give
``step_id=``.  A step name may not contain ``.``: the runtime names a step's
parts ``step_id.part``.  A duplicate step ID is an error naming both steps.

Stateful steps take ``(key, value)`` 2-tuples whose key, the *state key*, is
a ``str``: items with the same key go to the same worker (by a stable hash,
the same in every process) and modify the same state.

>>> flow = Dataflow()
>>> flow.map(str.lower)
>>> flow.stateful_map("running_count", lambda key: 0, lambda count, _: (count + 1, count + 1))
>>> flow.capture()
>>> [step.step_id for step in flow.steps]
['map', 'running_count', 'capture']
>>> flow.reduce("running_count", lambda a, b: a + b, lambda acc: acc > 3)
Traceback (most recent call last):
...
timelypy.errors.FlowError: step ID 'running_count' is used twice: by step 1 (stateful_map) ...
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from timelypy.errors import FlowError
from timelypy.flow.inputs import InputConfig
from timelypy.flow.outputs import OutputConfig
from timelypy.flow.state import NO_ACC
from timelypy.flow.window import SessionWindowConfig, WindowSpec, check_configs

__all__ = [
    "Dataflow",
    "Stream",
    "KeyedStream",
    "operator",
    "Step",
]

X_co = TypeVar("X_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")

#: The stream the chain starts at when it has no ``input`` step: the input ``run`` is given.
CHAIN_INPUT = ":input"

#: The windowing operators (:mod:`timelypy.flow.window`).
WINDOWED = frozenset({"reduce_window", "fold_window", "collect_window", "count_window"})
#: Operators whose steps keep state between items (their step ID labels recovery data).
STATEFUL = frozenset({"reduce", "reduce_epoch", "reduce_epoch_local", "stateful_map"}) | WINDOWED
#: Operators whose items must be ``(str, value)`` and are routed by state key.
KEYED = frozenset({"reduce", "reduce_epoch", "reduce_epoch_local", "stateful_map"})


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a flow: an operator, its step ID, and the user's logic.

    ``logic`` holds the user's functions in the operator's order (for
    ``reduce``: ``(reducer, is_complete)``); ``config`` is the input or
    output config of ``input`` and ``capture`` steps.
    """

    operator: str
    step_id: str
    logic: tuple[Callable[..., Any], ...] = ()
    #: (a stream-graph ``input``'s source or ``output``'s sink)
    config: Any = None
    #: a windowing step's :class:`~timelypy.flow.window.WindowSpec`; a stream
    #: operator's compiled logic
    options: Any = None
    #: the IDs of the streams the step reads (the chain's steps read the one before)
    ups: tuple[str, ...] = ()
    #: the IDs of the streams the step writes
    outs: tuple[str, ...] = ()
    #: ``"chain"`` for the epoch chain's steps, ``"graph"`` for the stream operators'
    form: str = "chain"

    def __repr__(self) -> str:
        return f"Step({self.operator}, {self.step_id!r})"


def _check_name(step_id: object, operator: str) -> str:
    if not isinstance(step_id, str) or not step_id:
        raise FlowError(
            f"the step ID of a {operator} step must be a non-empty str, got {step_id!r}"
        )
    if "." in step_id:
        raise FlowError(
            f"step name {step_id!r} ({operator}) contains '.': a period separates the parts of "
            "a step ID; use another character, such as '_'"
        )
    return step_id


def _check_callable(func: object, what: str, operator: str, step_id: str) -> None:
    if not callable(func):
        raise FlowError(f"step {step_id!r} ({operator}) needs a callable {what}, got {func!r}")


class Dataflow:
    """A flow: a graph of steps, written as a stream graph, an epoch chain, or both.

    ``Dataflow(flow_id)`` starts a stream graph: the operators of
    :mod:`timelypy.flow.operators` take and return :class:`Stream` s of it
    (``op.input("inp", flow, source)``, ``op.map("m", up, f)``), and every
    step ID is prefixed with ``flow_id``.  The chain methods (``map``,
    ``reduce_epoch``, ``capture``, ...) add one step each at the end of the
    flow's *chain*, which starts at its ``input`` step or, without one, at
    the input that ``run(flow, inp)`` is given; they return ``None``.
    """

    def __init__(self, flow_id: str | None = None) -> None:
        if flow_id is not None:
            _check_name(flow_id, "Dataflow")
        self.flow_id = flow_id
        self._steps: list[Step] = []
        self._ids: dict[str, int] = {}
        # the stream the chain's next step reads, and how many chain steps there are
        self._tail = CHAIN_INPUT
        self._chain_steps = 0
        # the step IDs of the composite operators being built, innermost last
        self._scopes: list[str] = [] if flow_id is None else [flow_id]
        # every stream ID of the flow, and how many steps read it
        self._streams: dict[str, int] = {}

    @property
    def steps(self) -> list[Step]:
        """The steps in the order they were added (a copy): upstream steps come first."""
        return list(self._steps)

    @property
    def input_config(self) -> InputConfig | None:
        """The chain's input, given with :meth:`input`, or ``None``."""
        for step in self._steps:
            if step.form == "chain" and step.operator == "input":
                config = step.config
                assert isinstance(config, InputConfig)
                return config
        return None

    @property
    def has_chain(self) -> bool:
        """Whether any chain method was called (the chain then needs an input)."""
        return self._chain_steps > 0

    def consumers(self, stream_id: str) -> int:
        """How many steps read the stream ``stream_id``."""
        return self._streams.get(stream_id, 0)

    def _full_id(self, step_id: str) -> str:
        return ".".join([*self._scopes, step_id])

    def _register(self, step: Step, index: int) -> None:
        earlier = self._ids.get(step.step_id)
        if earlier is not None:
            raise FlowError(
                f"step ID {step.step_id!r} is used twice: by step {earlier} "
                f"({self._steps[earlier].operator}) and by step {index} ({step.operator}); "
                "give each step its own name"
            )
        self._ids[step.step_id] = index
        for up in step.ups:
            self._streams[up] = self._streams.get(up, 0) + 1
        for out in step.outs:
            self._streams.setdefault(out, 0)
        self._steps.append(step)

    def _add(
        self,
        operator: str,
        step_id: str | None,
        logic: Iterable[Any] = (),
        names: Iterable[str] = (),
        config: InputConfig | OutputConfig | None = None,
        options: Any = None,
        extra_outs: tuple[str, ...] = (),
    ) -> list[Stream[Any]]:
        """Add a chain step reading the chain's last stream.

        ``extra_outs`` names the step's other output streams (a window
        step's late values), returned for graph steps to read.
        """
        if step_id is None:
            step_id = operator
            n = 1
            while step_id in self._ids:
                step_id = f"{operator}_{n}"
                n += 1
        _check_name(step_id, operator)
        logic = tuple(logic)
        for func, what in zip(logic, names, strict=True):
            _check_callable(func, what, operator, step_id)
        ups = () if operator == "input" else (self._tail,)
        out = f"{step_id}.down"
        extra = tuple(f"{step_id}.{name}" for name in extra_outs)
        self._register(
            Step(operator, step_id, logic, config, options, ups, (out, *extra)), len(self._steps)
        )
        self._tail = out
        self._chain_steps += 1
        return [Stream(stream_id, self) for stream_id in extra]

    def add_step(
        self,
        operator: str,
        step_id: str,
        ups: Sequence[Stream[Any]],
        outs: Sequence[str] = ("down",),
        *,
        config: Any = None,
        options: Any = None,
    ) -> list[Stream[Any]]:
        """Add a stream-graph step reading ``ups``; return its output streams.

        ``step_id`` is the step's name in the current scope: its full step
        ID is prefixed with the flow ID and any enclosing composite
        operators' (see :func:`operator`).  Used by
        :mod:`timelypy.flow.operators`; your own operators are written with
        those, and grouped with :func:`operator`.
        """
        _check_name(step_id, operator)
        for up in ups:
            if not isinstance(up, Stream):
                raise FlowError(
                    f"step {self._full_id(step_id)!r} ({operator}) takes streams, got {up!r}"
                )
            if up.flow is not self:
                raise FlowError(
                    f"step {self._full_id(step_id)!r} ({operator}) was given the stream "
                    f"{up.stream_id!r} of another Dataflow; a step reads streams of its own flow"
                )
        full = self._full_id(step_id)
        out_ids = tuple(f"{full}.{name}" for name in outs)
        step = Step(
            operator,
            full,
            (),
            config,
            options,
            tuple(up.stream_id for up in ups),
            out_ids,
            "graph",
        )
        self._register(step, len(self._steps))
        return [Stream(out, self) for out in out_ids]

    @contextlib.contextmanager
    def scope(self, step_id: str) -> Iterator[str]:
        """Name the steps added inside ``with`` as parts of the composite step ``step_id``.

        Yields the composite's full step ID.  :func:`operator` uses it.
        """
        _check_name(step_id, "operator")
        full = self._full_id(step_id)
        if full in self._ids or any(name.startswith(full + ".") for name in self._ids):
            raise FlowError(f"step ID {full!r} is used twice; give each step its own name")
        self._scopes.append(step_id)
        try:
            yield full
        finally:
            self._scopes.pop()

    def input(self, step_id: str, input_config: InputConfig) -> None:
        """Read items from ``input_config``; must be the first step of the chain.

        A flow with an input can be run without one (``run(flow)``, the
        ``python -m timelypy.flow`` CLI); otherwise the runner supplies it.
        """
        if self._chain_steps:
            raise FlowError(
                f"input step {step_id!r} must be the first step of the flow "
                f"(it has {self._chain_steps} already)"
            )
        if not isinstance(input_config, InputConfig):
            raise FlowError(
                f"input step {step_id!r} needs an input config (ManualInputConfig, a "
                f"PartitionedInputConfig), got {input_config!r}"
            )
        self._add("input", step_id, config=input_config)

    def map(self, mapper: Callable[[Any], Any], step_id: str | None = None) -> None:
        """Replace each item with ``mapper(item)``.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.map(lambda x: x * 10); flow.capture()
        >>> sorted(run(flow, [(0, 1), (1, 2)]))
        [(0, 10), (1, 20)]
        """
        self._add("map", step_id, [mapper], ["mapper"])

    def flat_map(self, mapper: Callable[[Any], Iterable[Any]], step_id: str | None = None) -> None:
        """Replace each item with every item of the iterable ``mapper(item)``.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.flat_map(str.split); flow.capture()
        >>> sorted(run(flow, [(0, "a b")]))
        [(0, 'a'), (0, 'b')]
        """
        self._add("flat_map", step_id, [mapper], ["mapper"])

    def map_batch(
        self, mapper: Callable[[list[Any]], list[Any]], step_id: str | None = None
    ) -> None:
        """Replace each batch of items with ``mapper(batch)``: a list, one output per item.

        ``mapper`` is called once per batch (all of one epoch) rather than
        once per item; what a batch holds depends on how the input is read,
        so it must treat each item on its own.  See ``docs/batch_steps.md``.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.map_batch(lambda batch: [x * 10 for x in batch])
        >>> flow.capture()
        >>> sorted(run(flow, [(0, 1), (0, 2), (1, 3)]))
        [(0, 10), (0, 20), (1, 30)]
        """
        self._add("map_batch", step_id, [mapper], ["mapper"])

    def flat_map_batch(
        self, mapper: Callable[[list[Any]], Iterable[Any]], step_id: str | None = None
    ) -> None:
        """Replace each batch of items with every item of ``mapper(batch)`` (a list, any length).

        Called once per batch (all of one epoch); its outputs keep the
        batch's epoch.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.flat_map_batch(lambda lines: " ".join(lines).split())
        >>> flow.capture()
        >>> sorted(run(flow, [(0, "a b"), (0, "c")]))
        [(0, 'a'), (0, 'b'), (0, 'c')]
        """
        self._add("flat_map_batch", step_id, [mapper], ["mapper"])

    def filter(self, predicate: Callable[[Any], bool], step_id: str | None = None) -> None:
        """Keep the items for which ``predicate(item)`` is true.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.filter(lambda x: x % 2 == 0); flow.capture()
        >>> sorted(run(flow, [(0, 1), (0, 2)]))
        [(0, 2)]
        """
        self._add("filter", step_id, [predicate], ["predicate"])

    def filter_map(self, mapper: Callable[[Any], Any], step_id: str | None = None) -> None:
        """Replace each item with ``mapper(item)``, dropping results that are ``None``.

        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.filter_map(lambda s: int(s) if s.isdigit() else None)
        >>> flow.capture()
        >>> sorted(run(flow, [(0, "4"), (0, "x")]))
        [(0, 4)]
        """
        self._add("filter_map", step_id, [mapper], ["mapper"])

    def inspect(self, inspector: Callable[[Any], Any], step_id: str | None = None) -> None:
        """Call ``inspector(item)`` on each item; the items pass on unchanged."""
        self._add("inspect", step_id, [inspector], ["inspector"])

    def inspect_epoch(
        self, inspector: Callable[[int, Any], Any], step_id: str | None = None
    ) -> None:
        """Call ``inspector(epoch, item)`` on each item; the items pass on unchanged."""
        self._add("inspect_epoch", step_id, [inspector], ["inspector"])

    def reduce(
        self,
        step_id: str,
        reducer: Callable[[Any, Any], Any],
        is_complete: Callable[[Any], bool],
    ) -> None:
        """Per state key, fold values across epochs; emit ``(key, acc)`` once complete.

        Items are ``(key, value)``; the first value of a key is its
        accumulator, each later one is folded in with ``reducer(acc,
        value)``, in epoch order.  After each value, if
        ``is_complete(acc)``, the step emits ``(key, acc)`` in that value's
        epoch and forgets the key.

        >>> from timelypy.flow import run
        >>> flow = Dataflow()
        >>> flow.reduce("sessions", lambda acc, x: acc + x, lambda acc: acc[-1] == "end")
        >>> flow.capture()
        >>> list(run(flow, [(0, ("a", ["x"])), (1, ("a", ["end"]))]))
        [(1, ('a', ['x', 'end']))]
        """
        self._add("reduce", step_id, [reducer, is_complete], ["reducer", "is_complete"])

    def reduce_epoch(
        self,
        reducer: Callable[[Any, Any], Any],
        step_id: str | None = None,
        *,
        pre_aggregate: Callable[[list[Any]], Any] | None = None,
    ) -> None:
        """Per state key and epoch, fold the values; emit ``(key, acc)`` when the epoch closes.

        State does not carry into the next epoch.  Within an epoch values
        arrive in no particular order, and each worker folds its own values
        before they are sent to the key's worker (as Spark's
        ``reduceByKey`` does), so ``reducer`` must be associative and
        commutative (``add``, ``max``, set union...).

        >>> from operator import add
        >>> from timelypy.flow import run
        >>> flow = Dataflow(); flow.reduce_epoch(add); flow.capture()
        >>> sorted(run(flow, [(0, ("a", 1)), (0, ("a", 2)), (1, ("a", 5))]))
        [(0, ('a', 3)), (1, ('a', 5))]

        With ``pre_aggregate`` the step's items are anything, and
        ``pre_aggregate(batch)`` turns each batch of them (all of one
        epoch) into partial results: a mapping ``key -> partial`` (a
        ``dict``, a ``Counter``) or a list of ``(key, partial)`` pairs,
        with ``str`` keys.  The partials are folded with ``reducer`` as
        values are, so they must be values ``reducer`` takes:

        >>> from collections import Counter
        >>> flow = Dataflow()
        >>> flow.reduce_epoch(add, pre_aggregate=lambda lines: Counter(" ".join(lines).split()))
        >>> flow.capture()
        >>> sorted(run(flow, [(0, "a b a"), (0, "b"), (1, "a")]))
        [(0, ('a', 2)), (0, ('b', 2)), (1, ('a', 1))]
        """
        self._add_reduce("reduce_epoch", step_id, reducer, pre_aggregate)

    def reduce_epoch_local(
        self,
        reducer: Callable[[Any, Any], Any],
        step_id: str | None = None,
        *,
        pre_aggregate: Callable[[list[Any]], Any] | None = None,
    ) -> None:
        """Like :meth:`reduce_epoch`, but each worker folds only its own items (no exchange).

        A key may then be emitted once per worker that saw it.
        """
        self._add_reduce("reduce_epoch_local", step_id, reducer, pre_aggregate)

    def _add_reduce(
        self,
        operator: str,
        step_id: str | None,
        reducer: Callable[[Any, Any], Any],
        pre_aggregate: Callable[[list[Any]], Any] | None,
    ) -> None:
        if pre_aggregate is None:
            self._add(operator, step_id, [reducer], ["reducer"])
        else:
            self._add(operator, step_id, [reducer, pre_aggregate], ["reducer", "pre_aggregate"])

    def stateful_map(
        self,
        step_id: str,
        builder: Callable[[str], Any],
        mapper: Callable[[Any, Any], tuple[Any, Any]],
    ) -> None:
        """Per state key, keep a state; emit ``(key, output)`` for each value.

        A key's state starts as ``builder(key)``; for each value, in epoch
        order, ``mapper(state, value)`` returns ``(new_state, output)``; a new
        state of ``None`` forgets the key.

        >>> from timelypy.flow import run
        >>> flow = Dataflow()
        >>> flow.stateful_map("total", lambda key: 0, lambda s, x: (s + x, s + x))
        >>> flow.capture()
        >>> sorted(run(flow, [(0, ("a", 1)), (1, ("a", 2)), (2, ("a", 3))]))
        [(0, ('a', 1)), (1, ('a', 3)), (2, ('a', 6))]
        """
        self._add("stateful_map", step_id, [builder, mapper], ["builder", "mapper"])

    # -- windowing --------------------------------------------------------------

    def _window(
        self,
        operator: str,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        logic: dict[str, Callable[..., Any] | None],
        add: Callable[[Any, Any], Any],
        merge: Callable[[Any, Any], Any] | None,
        finish: Callable[[Any], Any],
        late: Callable[[int, Any], Any] | None,
        window_meta: bool,
        fold: tuple[Callable[[], Any], Callable[[Any, Any], Any]] | None = None,
    ) -> Stream[tuple[str, Any]]:
        _check_name(step_id, operator)
        for what, func in logic.items():
            if func is not None:
                _check_callable(func, what, operator, step_id)
        if late is not None:
            _check_callable(late, "late output (epoch, (key, value))", operator, step_id)
        check_configs(step_id, clock_config, window_config)
        spec = WindowSpec(
            operator,
            clock_config,
            window_config,
            add,
            merge,
            finish,
            late,
            bool(window_meta),
            fold,
        )
        return self._add(operator, step_id, options=spec, extra_outs=("late",))[0]

    def fold_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        builder: Callable[[], Any],
        folder: Callable[[Any, Any], Any],
        merger: Callable[[Any, Any], Any] | None = None,
        *,
        late: Callable[[int, Any], Any] | None = None,
        window_meta: bool = False,
    ) -> Stream[tuple[str, Any]]:
        """Per key and window, fold values into ``builder()`` with ``folder(acc, value)``.

        Emits ``(key, acc)`` when the window closes (``window_meta=True``:
        ``(key, (WindowMetadata, acc))``). Session windows that a value
        joins into one need ``merger(acc, acc)``. The values that came
        after their key's watermark are late: ``late(epoch, (key, value))``
        receives them, and so does the returned stream of ``(key, value)``
        items, which graph steps can read (``op.output`` to a sink,
        ``op.inspect``; unread, it is not made).  See
        :mod:`timelypy.flow.window`.

        >>> from datetime import datetime, timedelta, timezone
        >>> import timelypy.flow.operators as op
        >>> from timelypy.flow import run
        >>> from timelypy.flow.testing import TestingSink
        >>> from timelypy.flow.window import EventClockConfig, TumblingWindowConfig
        >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
        >>> clock = EventClockConfig(lambda v: t0 + timedelta(seconds=v), timedelta(0))
        >>> flow = Dataflow()
        >>> late = flow.fold_window("sum", clock, TumblingWindowConfig(timedelta(seconds=10)),
        ...                         int, lambda acc, v: acc + v)
        >>> flow.capture()
        >>> too_late = []
        >>> _ = op.output("late", late, TestingSink(too_late))
        >>> sorted(run(flow, [(0, ("a", 1)), (0, ("a", 12)), (1, ("a", 3)), (1, ("a", 15))]))
        [(0, ('a', 1)), (1, ('a', 27))]
        >>> too_late
        [('a', 3)]
        """
        _check_callable(builder, "builder", "fold_window", str(step_id))
        _check_callable(folder, "folder", "fold_window", str(step_id))
        if merger is None and isinstance(window_config, SessionWindowConfig):
            raise FlowError(
                f"step {step_id!r} (fold_window): session windows merge when a value joins "
                "two of them, so fold_window needs a merger(acc, acc) to combine their "
                "accumulators: pass merger="
            )

        def add(acc: Any, value: Any) -> Any:
            return folder(builder() if acc is NO_ACC else acc, value)

        return self._window(
            "fold_window",
            step_id,
            clock_config,
            window_config,
            {"builder": builder, "folder": folder, "merger": merger},
            add,
            merger,
            _identity,
            late,
            window_meta,
            (builder, folder),
        )

    def reduce_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        reducer: Callable[[Any, Any], Any],
        *,
        late: Callable[[int, Any], Any] | None = None,
        window_meta: bool = False,
    ) -> Stream[tuple[str, Any]]:
        """Per key and window, combine values with ``reducer(acc, value)``; emit ``(key, acc)``.

        See :meth:`fold_window` for ``late`` and ``window_meta``.
        """
        _check_callable(reducer, "reducer", "reduce_window", str(step_id))

        def add(acc: Any, value: Any) -> Any:
            return value if acc is NO_ACC else reducer(acc, value)

        return self._window(
            "reduce_window",
            step_id,
            clock_config,
            window_config,
            {"reducer": reducer},
            add,
            reducer,
            _identity,
            late,
            window_meta,
        )

    def collect_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        *,
        late: Callable[[int, Any], Any] | None = None,
        window_meta: bool = False,
    ) -> Stream[tuple[str, Any]]:
        """Per key and window, collect the values in a list (arrival order); emit ``(key, list)``.

        See :meth:`fold_window` for ``late`` and ``window_meta``.
        """

        def add(acc: Any, value: Any) -> Any:
            if acc is NO_ACC:
                return [value]
            acc.append(value)
            return acc

        return self._window(
            "collect_window",
            step_id,
            clock_config,
            window_config,
            {},
            add,
            _concat,
            _identity,
            late,
            window_meta,
        )

    def count_window(
        self,
        step_id: str,
        clock_config: Any,
        window_config: Any,
        *,
        late: Callable[[int, Any], Any] | None = None,
        window_meta: bool = False,
    ) -> Stream[tuple[str, Any]]:
        """Per key and window, count the values; emit ``(key, count)``.

        See :meth:`fold_window` for ``late`` and ``window_meta``.
        """

        def add(acc: Any, value: Any) -> Any:
            return 1 if acc is NO_ACC else acc + 1

        return self._window(
            "count_window",
            step_id,
            clock_config,
            window_config,
            {},
            add,
            _sum,
            _identity,
            late,
            window_meta,
        )

    def capture(
        self, output_config: OutputConfig | None = None, step_id: str | None = None
    ) -> None:
        """Output every item that reaches this step, with its epoch; items also pass on.

        Without ``output_config`` the items are what ``run`` and
        ``run_cluster`` return; with one they go to that output.
        """
        if output_config is not None and not isinstance(output_config, OutputConfig):
            raise FlowError(
                "capture needs an output config (ManualOutputConfig, StdOutputConfig, a "
                f"PartitionedOutputConfig) or None, got {output_config!r}"
            )
        self._add("capture", step_id, config=output_config)

    def __repr__(self) -> str:
        name = "" if self.flow_id is None else f"{self.flow_id!r}: "
        return f"Dataflow({name}" + " -> ".join(step.step_id for step in self._steps) + ")"


class Stream(Generic[X_co]):
    """A stream of items of type ``X`` in a :class:`Dataflow`'s graph.

    Operators of :mod:`timelypy.flow.operators` take streams and return new
    ones; a stream is only a name (``stream_id``) in its flow's
    description, so it can be read by any number of steps.
    """

    __slots__ = ("flow", "stream_id")

    def __init__(self, stream_id: str, flow: Dataflow) -> None:
        #: the stream's ID: the step ID of the step writing it, and its port
        self.stream_id = stream_id
        #: the flow the stream belongs to
        self.flow = flow

    def then(
        self,
        op: Callable[..., R],
        step_id: str,
        *args: Any,
        **kwargs: Any,
    ) -> R:
        """``op(step_id, self, *args, **kwargs)``: chain operators left to right.

        >>> from timelypy.flow import operators as op
        >>> from timelypy.flow.testing import TestingSource
        >>> flow = Dataflow("doc")
        >>> s = op.input("inp", flow, TestingSource([1, 2])).then(op.map, "double", lambda x: 2 * x)
        >>> s.stream_id
        'doc.double.down'
        """
        return op(step_id, self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"Stream({self.stream_id!r})"


V = TypeVar("V")
#: A stream of ``(state key, value)`` pairs: what keyed (stateful) operators take.
KeyedStream = Stream[tuple[str, V]]


def _flow_of(args: Sequence[Any], kwargs: dict[str, Any]) -> Dataflow | None:
    for value in [*args, *kwargs.values()]:
        if isinstance(value, Dataflow):
            return value
        if isinstance(value, Stream):
            return value.flow
        if isinstance(value, (list, tuple)):
            for inner in value:
                if isinstance(inner, Stream):
                    return inner.flow
    return None


def operator(builder: Callable[P, R]) -> Callable[P, R]:
    """Make ``builder`` a composite operator: its steps get step IDs nested under its own.

    ``builder``'s first argument is the composite's step ID; it takes
    streams (or the flow) and builds steps with other operators, whose
    step IDs become ``flow_id.step_id.inner``.

    >>> from timelypy.flow import operators as op
    >>> from timelypy.flow.testing import TestingSource
    >>> @operator
    ... def add_one_then_double(step_id: str, up: Stream[int]) -> Stream[int]:
    ...     return op.map("double", op.map("add_one", up, lambda x: x + 1), lambda x: 2 * x)
    >>> flow = Dataflow("doc")
    >>> out = add_one_then_double("calc", op.input("inp", flow, TestingSource([1])))
    >>> [step.step_id for step in flow.steps]
    ['doc.inp', 'doc.calc.add_one', 'doc.calc.double']
    """

    @functools.wraps(builder)
    def composite(*args: P.args, **kwargs: P.kwargs) -> R:
        step_id = args[0] if args else kwargs.get("step_id")
        flow = _flow_of(args[1:], kwargs)
        if flow is None:
            raise FlowError(
                f"composite operator {builder.__name__!r} (step {step_id!r}) was given no stream "
                "and no Dataflow"
            )
        if not isinstance(step_id, str):
            raise FlowError(
                f"composite operator {builder.__name__!r} takes its step ID first, got {step_id!r}"
            )
        with flow.scope(step_id):
            return builder(*args, **kwargs)

    return composite


def _identity(acc: Any) -> Any:
    return acc


def _concat(a: list[Any], b: list[Any]) -> list[Any]:
    return a + b


def _sum(a: int, b: int) -> int:
    return a + b
