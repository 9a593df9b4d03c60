r"""The stream graph's operators: typed plain functions that take and return streams.

Each operator adds one step to the flow of its input streams and returns
its output stream(s); the first argument is always the step's ID (unique
in its scope; stateful steps label their recovery data with it).  The
shape is bytewax 0.21's, so a bytewax program runs after its imports are
renamed from ``bytewax`` to ``timelypy.flow``:

>>> from timelypy.flow.dataflow import Dataflow
>>> import timelypy.flow.operators as op
>>> from timelypy.flow.testing import TestingSink, TestingSource, run_main
>>> flow = Dataflow("wordcount")
>>> lines = op.input("lines", flow, TestingSource(["to be", "or not to be"]))
>>> words = op.flat_map("split", lines, str.split)
>>> counts = op.count_final("count", words, lambda word: word)
>>> out = []
>>> op.output("out", counts, TestingSink(out))
>>> run_main(flow)
>>> sorted(out)
[('be', 2), ('not', 1), ('or', 1), ('to', 2)]

Keyed operators take a :data:`KeyedStream` of ``(key, value)`` 2-tuples
whose key, the *state key*, is a ``str``: items with one key reach one
worker (by a stable hash, the same in every process), and are applied in
epoch order.  Operators named ``*_final`` emit when their input ends.  A
function of yours that raises stops the flow with a
:class:`~timelypy.errors.StepError` naming the step, the worker and the
epoch, whose ``__cause__`` is your exception.
"""

from __future__ import annotations

import abc
import builtins as _builtins
import dataclasses
import datetime
import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from operator import add
from typing import Any, Generic, Literal, TypeVar, cast

from timelypy.errors import FlowError
from timelypy.flow import _batch
from timelypy.flow._folds import FoldInto, keyed_check
from timelypy.flow._fused import PerItem, per_item
from timelypy.flow._graph import BatchFn, KeyedSpec, StatelessSpec
from timelypy.flow._keyed import (
    CollectLogic,
    FoldFinalLogic,
    JoinLogic,
    PerKeyLogic,
    StatefulMapLogic,
)
from timelypy.flow.dataflow import Dataflow, KeyedStream, Step, Stream, operator
from timelypy.flow.sinks import Sink
from timelypy.flow.sources import Source

__all__ = [
    "KeyedStream",
    "BranchOut",
    "StatefulLogic",
    "TTLCache",
    "JoinInsertMode",
    "JoinEmitMode",
    "operator",
    "input",
    "output",
    "map",
    "filter",
    "filter_map",
    "flat_map",
    "flatten",
    "map_batch",
    "flat_map_batch",
    "map_value",
    "filter_value",
    "filter_map_value",
    "flat_map_value",
    "key_on",
    "key_rm",
    "branch",
    "merge",
    "join",
    "inspect",
    "inspect_debug",
    "raises",
    "redistribute",
    "collect",
    "count_final",
    "fold_final",
    "reduce_final",
    "max_final",
    "min_final",
    "stateful_map",
    "stateful_flat_map",
    "stateful",
    "enrich_cached",
]

X = TypeVar("X")
Y = TypeVar("Y")
V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S")
DK = TypeVar("DK")
DV = TypeVar("DV")

#: How ``join`` keeps a side's values: its first, its latest, or all of them.
JoinInsertMode = Literal["first", "last", "product"]
#: When ``join`` emits: once every side has a value, at every value, or at the end.
JoinEmitMode = Literal["complete", "final", "running"]


def _callable(func: object, what: str, step_id: str, operator_name: str) -> None:
    if not callable(func):
        raise FlowError(f"step {step_id!r} ({operator_name}) needs a callable {what}, got {func!r}")


def _flow(up: Stream[Any], step_id: str, operator_name: str) -> Dataflow:
    if not isinstance(up, Stream):
        raise FlowError(
            f"step {step_id!r} ({operator_name}) takes a Stream as its upstream, got {up!r}; "
            "did you forget to take .trues/.falses (branch) or .down (a window)?"
        )
    return up.flow


def _stateless(
    operator_name: str,
    step_id: str,
    up: Stream[Any],
    make: Callable[[int, str], BatchFn],
    what: str,
) -> Stream[Any]:
    flow = _flow(up, step_id, operator_name)
    return flow.add_step(operator_name, step_id, [up], options=StatelessSpec(make, what))[0]


def _fixed(fn: Callable[[str], BatchFn]) -> Callable[[int, str], BatchFn]:
    """A batch function that does not depend on the worker."""
    return lambda worker, step_id: fn(step_id)


# -- inputs and outputs -------------------------------------------------------------


def input(step_id: str, flow: Dataflow, source: Source[X]) -> Stream[X]:
    """Read ``source`` (a :mod:`timelypy.flow.inputs` source) into a new stream of ``flow``.

    Items get the epoch of the system clock when they are read
    (``epoch_interval`` long; see :func:`timelypy.flow.testing.run_main`).
    An epoch-chain input config (``ManualInputConfig``,
    ``PartitionedInputConfig``) works too: its items keep the epochs it gives.
    """
    from timelypy.flow.inputs import InputConfig

    if not isinstance(flow, Dataflow):
        raise FlowError(f"input step {step_id!r} takes the Dataflow second, got {flow!r}")
    if not isinstance(source, (Source, InputConfig)):
        raise FlowError(
            f"input step {step_id!r} needs a source (a FixedPartitionedSource, DynamicSource, "
            f"TestingSource...), got {source!r}"
        )
    return flow.add_step("input", step_id, [], config=source)[0]


def output(step_id: str, up: Stream[X], sink: Sink[X]) -> None:
    """Write every item of ``up`` to ``sink`` (a :mod:`timelypy.flow.outputs` sink)."""
    flow = _flow(up, step_id, "output")
    if not isinstance(sink, Sink):
        raise FlowError(
            f"output step {step_id!r} needs a sink (a FixedPartitionedSink, DynamicSink, "
            f"TestingSink...), got {sink!r}"
        )
    flow.add_step("output", step_id, [up], outs=(), config=sink)


# -- stateless ----------------------------------------------------------------------


def map_batch(step_id: str, up: Stream[X], mapper: Callable[[list[X]], list[Y]]) -> Stream[Y]:
    """Call ``mapper`` once per batch of items; it returns a list with one output per item.

    A batch holds items of one epoch, as many as the engine gathered (its
    size depends on the input and the number of workers), so ``mapper``
    must treat each item on its own; the list it gets is the engine's:
    return a new one.  Anything but a list of the batch's length stops the
    flow with a :class:`~timelypy.errors.FlowError` naming the step.  See
    ``docs/batch_steps.md``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource(["a", "b"], batch_size=2))
    >>> run_to_list(map_batch("upper", s, lambda batch: " ".join(batch).upper().split()))
    ['A', 'B']
    """
    _callable(mapper, "mapper", step_id, "map_batch")
    return _stateless(
        "map_batch", step_id, up, _fixed(lambda _: _batch.map_batch(mapper)), "the mapper"
    )


def flat_map_batch(
    step_id: str, up: Stream[X], mapper: Callable[[list[X]], Iterable[Y]]
) -> Stream[Y]:
    """Call ``mapper`` once per batch of items; emit every item of what it returns.

    The fastest way to run Python over a stream: one call per batch, not
    per item.  ``mapper`` returns a list (or another iterable; not a
    ``str``, ``bytes`` or mapping, which are refused with a
    :class:`~timelypy.errors.FlowError` naming the step).

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([1, 2, 3], batch_size=3))
    >>> run_to_list(flat_map_batch("sum", s, lambda batch: [sum(batch)]))
    [6]
    """
    _callable(mapper, "mapper", step_id, "flat_map_batch")
    return _stateless(
        "flat_map_batch",
        step_id,
        up,
        _fixed(lambda _: _batch.flat_map_batch(mapper)),
        "the mapper",
    )


def map(step_id: str, up: Stream[X], mapper: Callable[[X], Y]) -> Stream[Y]:
    """Replace each item with ``mapper(item)``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> run_to_list(map("double", input("inp", flow, TestingSource([1, 2])), lambda x: 2 * x))
    [2, 4]
    """
    _callable(mapper, "mapper", step_id, "map")
    return _stateless("map", step_id, up, _fixed(lambda _: per_item("map", mapper)), "the mapper")


def _bool_check(what: str, step_id: str, func: Any, results: list[Any]) -> None:
    if list(_builtins.map(type, results)).count(bool) != len(results):
        bad = next(r for r in results if type(r) is not bool)
        raise TypeError(
            f"{what} {getattr(func, '__name__', func)!r} of step {step_id!r} must return a bool, "
            f"got {type(bad).__name__} {bad!r}"
        )


def filter(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> Stream[X]:
    """Keep the items for which ``predicate(item)`` is ``True`` (it must return a ``bool``).

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([1, 2, 4]))
    >>> run_to_list(filter("even", s, lambda x: x % 2 == 0))
    [2, 4]
    """
    _callable(predicate, "predicate", step_id, "filter")

    def make(step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            keep = list(_builtins.map(predicate, items))
            _bool_check("the predicate", step_id, predicate, keep)
            return list(itertools.compress(items, keep))

        def refuse(result: Any) -> None:
            _bool_check("the predicate", step_id, predicate, [result])

        # fused with its neighbours, the bool check is made inline (``filter_bool``)
        return PerItem("filter_bool", predicate, fn, refuse)

    return _stateless("filter", step_id, up, _fixed(make), "the predicate")


def filter_map(step_id: str, up: Stream[X], mapper: Callable[[X], Y | None]) -> Stream[Y]:
    """Replace each item with ``mapper(item)``, dropping the ``None`` results.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource(["1", "x", "3"]))
    >>> run_to_list(filter_map("ints", s, lambda s: int(s) if s.isdigit() else None))
    [1, 3]
    """
    _callable(mapper, "mapper", step_id, "filter_map")
    return _stateless(
        "filter_map", step_id, up, _fixed(lambda _: per_item("filter_map", mapper)), "the mapper"
    )


def flat_map(step_id: str, up: Stream[X], mapper: Callable[[X], Iterable[Y]]) -> Stream[Y]:
    """Replace each item with every item of ``mapper(item)``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> run_to_list(flat_map("split", input("inp", flow, TestingSource(["a b", "c"])), str.split))
    ['a', 'b', 'c']
    """
    _callable(mapper, "mapper", step_id, "flat_map")
    return _stateless(
        "flat_map", step_id, up, _fixed(lambda _: per_item("flat_map", mapper)), "the mapper"
    )


def flatten(step_id: str, up: Stream[Iterable[X]]) -> Stream[X]:
    """Emit every item of each (iterable) item.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> run_to_list(flatten("flat", input("inp", flow, TestingSource([[1, 2], [3]]))))
    [1, 2, 3]
    """

    def make(step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            try:
                return [y for x in items for y in x]
            except TypeError:
                bad = next(x for x in items if not isinstance(x, Iterable))
                raise TypeError(
                    f"step {step_id!r} (flatten) takes iterable items, got a "
                    f"{type(bad).__name__}: {bad!r}"
                ) from None

        return fn

    return _stateless("flatten", step_id, up, _fixed(make), "flatten")


def map_value(step_id: str, up: KeyedStream[V], mapper: Callable[[V], W]) -> KeyedStream[W]:
    """Replace the value of each ``(key, value)`` with ``mapper(value)``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1)]))
    >>> run_to_list(map_value("inc", s, lambda v: v + 1))
    [('a', 2)]
    """
    _callable(mapper, "mapper", step_id, "map_value")
    return _stateless(
        "map_value",
        step_id,
        up,
        _fixed(lambda _: lambda e, items: [(k, mapper(v)) for k, v in items]),
        "the mapper",
    )


def filter_value(
    step_id: str, up: KeyedStream[V], predicate: Callable[[V], bool]
) -> KeyedStream[V]:
    """Keep the ``(key, value)`` items for which ``predicate(value)`` is ``True``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1), ("b", 2)]))
    >>> run_to_list(filter_value("odd", s, lambda v: v % 2 == 1))
    [('a', 1)]
    """
    _callable(predicate, "predicate", step_id, "filter_value")

    def make(step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            keep = [predicate(v) for _, v in items]
            _bool_check("the predicate", step_id, predicate, keep)
            return list(itertools.compress(items, keep))

        return fn

    return _stateless("filter_value", step_id, up, _fixed(make), "the predicate")


def filter_map_value(
    step_id: str, up: KeyedStream[V], mapper: Callable[[V], W | None]
) -> KeyedStream[W]:
    """Replace each value with ``mapper(value)``, dropping the items where it is ``None``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", "1"), ("b", "x")]))
    >>> run_to_list(filter_map_value("int", s, lambda v: int(v) if v.isdigit() else None))
    [('a', 1)]
    """
    _callable(mapper, "mapper", step_id, "filter_map_value")

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        out = []
        for k, v in items:
            w = mapper(v)
            if w is not None:
                out.append((k, w))
        return out

    return _stateless("filter_map_value", step_id, up, _fixed(lambda _: fn), "the mapper")


def flat_map_value(
    step_id: str, up: KeyedStream[V], mapper: Callable[[V], Iterable[W]]
) -> KeyedStream[W]:
    """Replace each ``(key, value)`` with ``(key, w)`` for every ``w`` of ``mapper(value)``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", "x y")]))
    >>> run_to_list(flat_map_value("split", s, str.split))
    [('a', 'x'), ('a', 'y')]
    """
    _callable(mapper, "mapper", step_id, "flat_map_value")
    return _stateless(
        "flat_map_value",
        step_id,
        up,
        _fixed(lambda _: lambda e, items: [(k, w) for k, v in items for w in mapper(v)]),
        "the mapper",
    )


def _str_keys(keys: list[Any], key: Any, step_id: str) -> None:
    """Raise unless every one of ``keys`` (what ``key`` returned) is a ``str``."""
    if list(_builtins.map(type, keys)).count(str) != len(keys):
        bad = next(k for k in keys if type(k) is not str)
        raise TypeError(
            f"the key function {getattr(key, '__name__', key)!r} of step {step_id!r} "
            f"must return a str state key, got {type(bad).__name__} {bad!r}; use str(...) on it"
        )


def key_on(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[X]:
    """Make each item ``(key(item), item)``; ``key`` must return a ``str`` (the state key).

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource(["ab"]))
    >>> run_to_list(key_on("by_len", s, lambda s: str(len(s))))
    [('2', 'ab')]
    """
    _callable(key, "key", step_id, "key_on")

    def make(step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            keys = list(_builtins.map(key, items))
            _str_keys(keys, key, step_id)
            return list(zip(keys, items, strict=True))

        return fn

    return _stateless("key_on", step_id, up, _fixed(make), "the key function")


def key_rm(step_id: str, up: KeyedStream[X]) -> Stream[X]:
    """Drop the keys: each ``(key, value)`` becomes ``value``.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> run_to_list(key_rm("rm", input("inp", flow, TestingSource([("a", 1)]))))
    [1]
    """
    return _stateless(
        "key_rm", step_id, up, _fixed(lambda _: lambda e, items: [v for _, v in items]), "key_rm"
    )


def inspect(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X], None] | None = None,
) -> Stream[X]:
    """Call ``inspector(step_id, item)`` on each item (default: print ``step_id: item``).

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> _ = run_to_list(inspect("see", input("inp", flow, TestingSource(["a"]))))
    doc.see: 'a'
    """
    if inspector is not None:
        _callable(inspector, "inspector", step_id, "inspect")

    def make(step_id: str) -> BatchFn:
        if inspector is None:

            def show(epoch: int, items: list[Any]) -> list[Any]:
                print("".join([f"{step_id}: {item!r}\n" for item in items]), end="", flush=True)
                return items

            return show

        def fn(epoch: int, items: list[Any]) -> list[Any]:
            for item in items:
                inspector(step_id, item)
            return items

        return fn

    return _stateless("inspect", step_id, up, _fixed(make), "the inspector")


def inspect_debug(
    step_id: str,
    up: Stream[X],
    inspector: Callable[[str, X, int, int], None] | None = None,
) -> Stream[X]:
    """Call ``inspector(step_id, item, epoch, worker_index)`` on each item.

    The default prints ``step_id W<worker> @<epoch>: item``.
    """
    if inspector is not None:
        _callable(inspector, "inspector", step_id, "inspect_debug")

    def make(worker: int, step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            if inspector is None:
                text = "".join([f"{step_id} W{worker} @{epoch}: {item!r}\n" for item in items])
                print(text, end="", flush=True)
            else:
                for item in items:
                    inspector(step_id, item, epoch, worker)
            return items

        return fn

    return _stateless("inspect_debug", step_id, up, make, "the inspector")


def raises(step_id: str, up: Stream[Any]) -> None:
    """Fail the flow if any item reaches this step (for tests: "this never happens").

    >>> from timelypy.flow.testing import TestingSource, run_main
    >>> flow = Dataflow("doc")
    >>> raises("never", filter("none", input("inp", flow, TestingSource([1])), lambda x: False))
    >>> run_main(flow)
    """

    def make(step_id: str) -> BatchFn:
        def fn(epoch: int, items: list[Any]) -> list[Any]:
            if items:
                raise RuntimeError(f"`raises` step {step_id!r} got an item: {items[0]!r}")
            return items

        return fn

    _stateless("raises", step_id, up, _fixed(make), "raises")


def redistribute(step_id: str, up: Stream[X]) -> Stream[X]:
    """Spread the items over the workers (round robin), to share out work that is uneven.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> run_to_list(redistribute("spread", input("inp", flow, TestingSource([1, 2]))))
    [1, 2]
    """
    return _flow(up, step_id, "redistribute").add_step("redistribute", step_id, [up])[0]


@dataclasses.dataclass(frozen=True)
class BranchOut(Generic[X, Y]):
    """The two streams of :func:`branch`: the items ``trues`` and ``falses``."""

    trues: Stream[X]
    falses: Stream[Y]


def branch(step_id: str, up: Stream[X], predicate: Callable[[X], bool]) -> BranchOut[X, X]:
    """Split ``up``: items where ``predicate(item)`` is true go to ``trues``, others to ``falses``.

    >>> from timelypy.flow.testing import TestingSink, TestingSource, run_main
    >>> flow = Dataflow("doc")
    >>> b = branch("even", input("inp", flow, TestingSource([1, 2, 3])), lambda x: x % 2 == 0)
    >>> evens, odds = [], []
    >>> output("evens", b.trues, TestingSink(evens)); output("odds", b.falses, TestingSink(odds))
    >>> run_main(flow)
    >>> evens, odds
    ([2], [1, 3])
    """
    _callable(predicate, "predicate", step_id, "branch")
    flow = _flow(up, step_id, "branch")
    trues, falses = flow.add_step(
        "branch", step_id, [up], outs=("trues", "falses"), options=predicate
    )
    return BranchOut(trues, falses)


def merge(step_id: str, *ups: Stream[Any]) -> Stream[Any]:
    """One stream with the items of every stream of ``ups`` (in no particular order).

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> a, b = input("a", flow, TestingSource([1])), input("b", flow, TestingSource([2]))
    >>> sorted(run_to_list(merge("both", a, b)))
    [1, 2]
    """
    if not ups:
        raise FlowError(f"merge step {step_id!r} needs at least one upstream stream")
    flow = _flow(ups[0], step_id, "merge")
    return flow.add_step("merge", step_id, list(ups))[0]


# -- stateful -----------------------------------------------------------------------


def _keyed(
    operator_name: str,
    step_id: str,
    ups: list[Stream[Any]],
    make: Callable[[str], Any],
    *,
    prepare: Callable[[str], BatchFn] | None = None,
    combine: Callable[[Any, Any], Any] | None = None,
) -> Stream[Any]:
    flow = _flow(ups[0], step_id, operator_name)
    return flow.add_step(operator_name, step_id, ups, options=KeyedSpec(make, prepare, combine))[0]


def stateful_map(
    step_id: str, up: KeyedStream[V], mapper: Callable[[S | None, V], tuple[S | None, W]]
) -> KeyedStream[W]:
    """Per key, ``mapper(state, value)`` returns ``(new_state, emit)``; emits ``(key, emit)``.

    A key's state starts as ``None``; a new state of ``None`` forgets the key.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1), ("a", 2), ("b", 5)]))
    >>> def running_sum(total, value):
    ...     total = (total or 0) + value
    ...     return total, total
    >>> sorted(run_to_list(stateful_map("sum", s, running_sum)))
    [('a', 1), ('a', 3), ('b', 5)]
    """
    _callable(mapper, "mapper", step_id, "stateful_map")
    return _keyed("stateful_map", step_id, [up], lambda full: StatefulMapLogic(mapper, False, full))


def stateful_flat_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[S | None, V], tuple[S | None, Iterable[W]]],
) -> KeyedStream[W]:
    """Like :func:`stateful_map`, but emits ``(key, w)`` for every ``w`` the mapper returns.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1), ("a", 2)]))
    >>> def seen_so_far(seen, value):
    ...     seen = (seen or []) + [value]
    ...     return seen, seen
    >>> run_to_list(stateful_flat_map("seen", s, seen_so_far))
    [('a', 1), ('a', 1), ('a', 2)]
    """
    _callable(mapper, "mapper", step_id, "stateful_flat_map")
    return _keyed(
        "stateful_flat_map", step_id, [up], lambda full: StatefulMapLogic(mapper, True, full)
    )


class StatefulLogic(abc.ABC, Generic[V, W, S]):
    """A key's logic in :func:`stateful`: what to do with each value, on a timer, at the end.

    Each ``on_*`` method returns ``(outputs, discard)``: the values to emit
    (each as ``(key, value)``) and whether to forget this key's logic
    (:attr:`DISCARD`) or keep it (:attr:`RETAIN`).  :meth:`notify_at`
    asks for :meth:`on_notify` at a system time; :meth:`snapshot` is the
    state a resumed execution rebuilds the logic from (``builder(state)``).
    """

    #: Keep the key's logic.
    RETAIN: bool = False
    #: Forget the key's logic (and its snapshots, once an epoch closes).
    DISCARD: bool = True

    @abc.abstractmethod
    def on_item(self, value: V) -> tuple[Iterable[W], bool]:
        """A value of this key arrived."""

    def on_notify(self) -> tuple[Iterable[W], bool]:
        """The time :meth:`notify_at` asked for has come."""
        return ((), StatefulLogic.RETAIN)

    def on_eof(self) -> tuple[Iterable[W], bool]:
        """The input ended."""
        return ((), StatefulLogic.RETAIN)

    def notify_at(self) -> datetime.datetime | None:
        """When to call :meth:`on_notify` (an aware ``datetime``), or ``None``."""
        return None

    @abc.abstractmethod
    def snapshot(self) -> S:
        """The key's state, picklable, for a resumed execution's ``builder(state)``."""


def stateful(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[S | None], StatefulLogic[V, W, S]],
) -> KeyedStream[W]:
    """Run a :class:`StatefulLogic` per key, built by ``builder(resume_state or None)``."""
    _callable(builder, "builder", step_id, "stateful")
    return _keyed("stateful", step_id, [up], lambda full: PerKeyLogic(builder, full))


def fold_final(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
    *,
    merger: Callable[[S, S], S] | None = None,
) -> KeyedStream[S]:
    """Per key, fold the values into ``builder()`` with ``folder``; emit ``(key, acc)`` at the end.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1), ("a", 2)]))
    >>> run_to_list(fold_final("collect", s, list, lambda acc, v: acc + [v]))
    [('a', [1, 2])]

    With ``merger`` each worker first folds its own values of each epoch,
    per key, into partial accumulators (each from a fresh ``builder()``);
    only one ``(key, partial)`` per key and epoch crosses to the key's
    worker, which joins the partials into the key's accumulator with
    ``merger(acc, partial)``: the combiner of Spark's ``aggregateByKey``,
    with no combiner to write.  ``merger`` must join two accumulators as
    folding the values one after the other would, ``merger(fold(xs),
    fold(ys)) == fold(xs + ys)`` (a sum, a count, a list's ``+``, a
    ``(count, total)`` pair); then the results are those without it.
    A worker's values keep their order; the partials of one epoch from
    several workers are merged in the order they arrive, as the values
    themselves are without a merger.

    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 2.0), ("b", 1.0), ("a", 4.0)]))
    >>> def add_value(acc, v):
    ...     return (acc[0] + 1, acc[1] + v)
    >>> def merge(a, b):
    ...     return (a[0] + b[0], a[1] + b[1])
    >>> counts = fold_final("mean", s, lambda: (0, 0.0), add_value, merger=merge)
    >>> sorted(run_to_list(counts))
    [('a', (2, 6.0)), ('b', (1, 1.0))]
    """
    _callable(builder, "builder", step_id, "fold_final")
    _callable(folder, "folder", step_id, "fold_final")
    if merger is None:
        return _keyed(
            "fold_final", step_id, [up], lambda full: FoldFinalLogic(builder, folder, False)
        )
    _callable(merger, "merger", step_id, "fold_final")
    merge = merger

    def prepare(full: str) -> BatchFn:
        # the items are checked here, as the key's worker checks them without a merger
        return keyed_check(Step("fold_final", full, form="graph"))

    return _keyed(
        "fold_final",
        step_id,
        [up],
        lambda full: FoldFinalLogic(None, merge, merge is add, "the merger"),
        prepare=prepare,
        combine=FoldInto(builder, folder, merge),
    )


def reduce_final(
    step_id: str,
    up: Stream[Any],
    reducer: Callable[[V, V], V],
    *,
    pre_aggregate: Callable[[list[Any]], Any] | None = None,
) -> KeyedStream[V]:
    """Per key, combine the values with ``reducer``; emit ``(key, acc)`` at the end.

    Each worker combines its own values first (so ``reducer`` must be
    associative), then the key's worker combines those.
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 1), ("a", 2), ("b", 5)]))
    >>> sorted(run_to_list(reduce_final("sum", s, lambda a, b: a + b)))
    [('a', 3), ('b', 5)]

    With ``pre_aggregate`` the stream's items are anything, and
    ``pre_aggregate(batch)`` turns each batch of them (all of one epoch)
    into partial results: a mapping ``key -> partial`` (a ``dict``, a
    ``Counter``) or a list of ``(key, partial)`` pairs, with ``str`` keys,
    which are combined with ``reducer`` as values are (see
    ``docs/batch_steps.md``):

    >>> from collections import Counter
    >>> from operator import add
    >>> flow = Dataflow("doc")
    >>> lines = input("lines", flow, TestingSource(["a b a", "b"]))
    >>> counts = reduce_final(
    ...     "count", lines, add, pre_aggregate=lambda batch: Counter(" ".join(batch).split())
    ... )
    >>> sorted(run_to_list(counts))
    [('a', 2), ('b', 2)]
    """
    _callable(reducer, "reducer", step_id, "reduce_final")
    prepare: Callable[[str], BatchFn] | None = None
    if pre_aggregate is not None:
        _callable(pre_aggregate, "pre_aggregate", step_id, "reduce_final")
        aggregate = pre_aggregate

        def prepare(full: str) -> BatchFn:
            return _batch.pre_aggregate(aggregate, full, "reduce_final")

    return _keyed(
        "reduce_final",
        step_id,
        [up],
        lambda full: FoldFinalLogic(None, reducer, reducer is add),
        prepare=prepare,
        combine=reducer,
    )


def count_final(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[int]:
    """Count the items per ``key(item)``; emit ``(key, count)`` at the end.

    Each worker counts its own items first, so one item per key and epoch
    crosses to the key's worker.
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource(["a", "b", "a"]))
    >>> sorted(run_to_list(count_final("count", s, lambda word: word)))
    [('a', 2), ('b', 1)]
    """
    _callable(key, "key", step_id, "count_final")
    return _keyed(
        "count_final",
        step_id,
        [up],
        lambda full: FoldFinalLogic(None, add, True),
        prepare=lambda full: _batch_counts(key, full),
        combine=add,
    )


def _batch_counts(key: Callable[[Any], str], step_id: str) -> BatchFn:
    """A batch's items as ``(key(item), n)``, one per distinct key (counted in C).

    A key that is not a ``str`` stops the flow, naming the step.
    """

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        counts = Counter(_builtins.map(key, items))
        _str_keys(list(counts), key, step_id)
        return list(counts.items())

    return fn


def _identity(x: Any) -> Any:
    return x


def max_final(
    step_id: str, up: KeyedStream[V], by: Callable[[V], Any] = _identity
) -> KeyedStream[V]:
    """Per key, the largest value (by ``by(value)``), emitted at the end.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", 3), ("a", 7), ("a", 5)]))
    >>> run_to_list(max_final("max", s))
    [('a', 7)]
    """
    _callable(by, "by", step_id, "max_final")

    def bigger(a: Any, b: Any) -> Any:
        return b if by(b) > by(a) else a

    return cast(KeyedStream[V], reduce_final(step_id, up, bigger))


def min_final(
    step_id: str, up: KeyedStream[V], by: Callable[[V], Any] = _identity
) -> KeyedStream[V]:
    """Per key, the smallest value (by ``by(value)``), emitted at the end.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("a", "ccc"), ("a", "b")]))
    >>> run_to_list(min_final("shortest", s, by=len))
    [('a', 'b')]
    """
    _callable(by, "by", step_id, "min_final")

    def smaller(a: Any, b: Any) -> Any:
        return b if by(b) < by(a) else a

    return cast(KeyedStream[V], reduce_final(step_id, up, smaller))


def join(
    step_id: str,
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "complete",
) -> KeyedStream[tuple[Any, ...]]:
    """Join keyed streams on their keys: emit ``(key, (v0, v1, ...))``, one value per side.

    ``insert_mode``: ``"first"`` keeps each side's first value, ``"last"``
    its latest, ``"product"`` all of them (emitting every combination).
    ``emit_mode``: ``"complete"`` emits once every side has a value, then
    forgets the key; ``"running"`` emits on every value (``None`` for a
    side with none yet) and keeps it; ``"final"`` emits at the end.

    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> names = input("names", flow, TestingSource([("1", "ann")]))
    >>> emails = input("emails", flow, TestingSource([("1", "ann@x.org")]))
    >>> run_to_list(join("user", names, emails))
    [('1', ('ann', 'ann@x.org'))]
    """
    if not sides:
        raise FlowError(f"join step {step_id!r} needs at least one side")
    if insert_mode not in ("first", "last", "product"):
        raise FlowError(
            f"join step {step_id!r}: unknown insert_mode {insert_mode!r}; use 'first', 'last' "
            "or 'product'"
        )
    if emit_mode not in ("complete", "final", "running"):
        raise FlowError(
            f"join step {step_id!r}: unknown emit_mode {emit_mode!r}; use 'complete', 'final' "
            "or 'running'"
        )
    count = len(sides)
    return _keyed(
        "join", step_id, list(sides), lambda full: JoinLogic(count, insert_mode, emit_mode)
    )


def collect(
    step_id: str, up: KeyedStream[V], timeout: datetime.timedelta, max_size: int
) -> KeyedStream[list[V]]:
    """Per key, gather values into lists of ``max_size``, or fewer after ``timeout`` without one.

    A key's list is emitted when it holds ``max_size`` values, when
    ``timeout`` (system time) passed since its last value, or at the end.
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> s = input("inp", flow, TestingSource([("k", 1), ("k", 2), ("k", 3), ("j", 1)]))
    >>> sorted(run_to_list(collect("batch", s, datetime.timedelta(seconds=10), max_size=2)))
    [('j', [1]), ('k', [1, 2]), ('k', [3])]
    """
    if not isinstance(timeout, datetime.timedelta) or timeout < datetime.timedelta(0):
        raise FlowError(f"collect step {step_id!r} needs a timedelta timeout, got {timeout!r}")
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
        raise FlowError(f"collect step {step_id!r} needs max_size >= 1, got {max_size!r}")
    seconds = timeout.total_seconds()
    return _keyed("collect", step_id, [up], lambda full: CollectLogic(seconds, max_size))


@dataclasses.dataclass
class TTLCache(Generic[DK, DV]):
    """A cache of ``v_getter(key)``, refreshed once a value is older than ``ttl``."""

    v_getter: Callable[[DK], DV]
    now_getter: Callable[[], datetime.datetime]
    ttl: datetime.timedelta
    _cache: dict[DK, tuple[datetime.datetime, DV]] = dataclasses.field(default_factory=dict)

    def get(self, k: DK) -> DV:
        """The value for ``k``: cached, or fetched with ``v_getter`` if missing or expired."""
        now = self.now_getter()
        hit = self._cache.get(k)
        if hit is not None and now - hit[0] <= self.ttl:
            return hit[1]
        value = self.v_getter(k)
        self._cache[k] = (now, value)
        return value

    def remove(self, k: DK) -> None:
        """Forget ``k`` (``KeyError`` if it is not cached)."""
        del self._cache[k]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def enrich_cached(
    step_id: str,
    up: Stream[X],
    getter: Callable[[DK], DV],
    mapper: Callable[[TTLCache[DK, DV], X], Y],
    ttl: datetime.timedelta = datetime.timedelta.max,
    _now_getter: Callable[[], datetime.datetime] = _utc_now,
) -> Stream[Y]:
    """``mapper(cache, item)`` per item, with a per-worker :class:`TTLCache` of ``getter``.

    For lookups in a slow external service: each worker fetches a key at
    most once per ``ttl``.  The clock is read once per batch.
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> prices = {"apple": 3}
    >>> s = input("inp", flow, TestingSource(["apple", "apple"]))
    >>> def price(cache, fruit):
    ...     return fruit, cache.get(fruit)
    >>> run_to_list(enrich_cached("price", s, prices.get, price))
    [('apple', 3), ('apple', 3)]
    """
    _callable(getter, "getter", step_id, "enrich_cached")
    _callable(mapper, "mapper", step_id, "enrich_cached")

    def make(worker: int, step_id: str) -> BatchFn:
        now = [_now_getter()]
        cache: TTLCache[DK, DV] = TTLCache(getter, lambda: now[0], ttl)

        def fn(epoch: int, items: list[Any]) -> list[Any]:
            now[0] = _now_getter()
            return [mapper(cache, item) for item in items]

        return fn

    return _stateless("enrich_cached", step_id, up, make, "the mapper")
