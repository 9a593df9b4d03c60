"""The flow's operators, written on the runtime's public operator API.

Each function here adds one runtime operator for one or more flow steps,
with :func:`~timelypy.dataflow.operators.generic.unary` /
``unary_frontier`` and the :class:`~timelypy.dataflow.notificator.EagerNotificator`,
exactly as a user's own operator would be written:

* :func:`stateless_chain` -- consecutive stateless steps (``map``,
  ``flat_map``, ``filter``, ``filter_map``, ``map_batch``,
  ``flat_map_batch``, ``inspect``, ``inspect_epoch``) fused into one
  operator that applies each step to a whole batch in turn (one activation
  and one progress update per batch, not per step); a run of per-item
  steps is one comprehension (:mod:`timelypy.flow._fused`);
* :func:`combine_epoch` -- ``reduce_epoch``'s fold per epoch and key, used
  twice: on the sending worker before the exchange, where it takes the
  stateless steps before it into its fold (:func:`checked_fold`), and on
  the key's worker after it; :func:`reduce_epoch` builds the two;
* :func:`keyed_step` -- ``reduce`` and ``stateful_map``: state per key,
  items applied in epoch order, eagerly within the frontier epoch;
* :func:`output_sink` -- a ``capture`` step's writer.

Operators are named after their step IDs (``count``, ``count.local``; a
fused chain ``lower+tokenize+map``, a fold with its chain
``lower+tokenize+map+count``), and an error raised by your logic gets a
note naming the exact step, so it names the step and the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from zlib import crc32

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange, Pact, Pipeline
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError, StateKeyError, StepError, short_repr
from timelypy.flow import _batch
from timelypy.flow._folds import _fold, checked_fold, item_kind, keyed_check
from timelypy.flow._fused import FusedRun, PerItem, per_item, runs
from timelypy.flow._step_errors import noted, raise_from, step_error
from timelypy.flow.dataflow import Step
from timelypy.flow.state import StepState

if TYPE_CHECKING:
    from timelypy.flow._graph import GraphBuilder

__all__ = [
    "BatchFn",
    "stateless_chain",
    "batch_function",
    "keyed_check",
    "route_by_key",
    "partition_by_key",
    "keyed_exchange",
    "combine_epoch",
    "checked_fold",
    "step_error",
    "reduce_epoch",
    "take_chain",
    "keyed_step",
    "output_sink",
]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]

_MISSING = object()


def batch_function(step: Step) -> BatchFn:
    """The batch function of a stateless step.

    Per-item steps (``map``, ``flat_map``, ``filter``, ``filter_map``) give
    a :class:`~timelypy.flow._fused.PerItem`, which a fused chain compiles
    together with its neighbours (:mod:`timelypy.flow._fused`).
    """
    op = step.operator
    func = step.logic[0] if step.logic else None
    assert func is not None
    if op in ("map", "flat_map", "filter", "filter_map"):
        return per_item(op, func)
    if op == "map_batch":
        return _batch.map_batch(func)
    if op == "flat_map_batch":
        return _batch.flat_map_batch(func)
    if op == "inspect":

        def inspect(epoch: int, items: list[Any]) -> list[Any]:
            for item in items:
                func(item)
            return items

        return inspect
    if op == "inspect_epoch":

        def inspect_epoch(epoch: int, items: list[Any]) -> list[Any]:
            for item in items:
                func(epoch, item)
            return items

        return inspect_epoch
    raise AssertionError(f"not a stateless operator: {op}")


def route_by_key(item: tuple[str, Any]) -> int:
    """The stable hash of an item's state key: CRC-32 of its UTF-8 bytes.

    Raises :class:`~timelypy.errors.StateKeyError` for an item that is not
    ``(str, value)``.
    """
    try:
        return crc32(item[0].encode("utf-8", "surrogatepass"))
    except (AttributeError, TypeError, IndexError, KeyError):
        raise StateKeyError(
            f"a keyed step takes (key, value) 2-tuples with a str state key, but got "
            f"{short_repr(item)} ({item_kind(item)}); map items to (str(key), value) before it"
        ) from None


#: How many state keys' hashes :func:`partition_by_key` remembers, per process.
ROUTE_MEMO_KEYS = 1 << 16
#: Keys longer than this (in characters) are hashed each time, never remembered.
ROUTE_MEMO_KEY_CHARS = 64
#: With the memo full and missing most keys, batches skip it; one in this many looks again.
ROUTE_MEMO_RESAMPLE = 64


class _RouteMemo:
    """The process's memo of state-key hashes, and whether looking keys up in it pays."""

    __slots__ = ("hashes", "skipped", "useful")

    def __init__(self) -> None:
        self.hashes: dict[str, int] = {}
        #: False while the memo is full and the last batch that looked missed most keys.
        self.useful = True
        #: Batches routed without the memo since it last looked.
        self.skipped = 0


_route_memo = _RouteMemo()


def partition_by_key(items: list[tuple[str, Any]], peers: int) -> list[list[Any]]:
    """Split ``items`` into one list per worker, each where :func:`route_by_key` sends it.

    A keyed stream sees the same keys again and again, so the process's
    workers share a memo of the hashes of the first :data:`ROUTE_MEMO_KEYS`
    state keys they route (of up to :data:`ROUTE_MEMO_KEY_CHARS`
    characters: about 8 MB when full of keys of a dozen characters): a
    lookup costs less than encoding and hashing the key (72 ns an item
    against 103, batches of 1,000 with 10,000 keys).  A batch that finds
    fewer than half its keys in the memo and cannot add them (it is full,
    or they are long) has the next batches hash every key without looking
    (one in :data:`ROUTE_MEMO_RESAMPLE` looks again), so a stream of ever
    new keys pays no lookups it cannot use (125 ns an item, as before the
    memo).  An item whose key is not a ``str`` may raise (``TypeError``,
    ``IndexError``...): the exchange then routes the batch item by item, and
    reports the key as it would any.

    >>> parts = partition_by_key([("a", 1), ("d", 2), ("a", 3)], 2)
    >>> parts[route_by_key(("a", 0)) % 2]
    [('a', 1), ('a', 3)]
    """
    parts: list[list[Any]] = [[] for _ in range(peers)]
    appends = [part.append for part in parts]
    state = _route_memo
    if not state.useful:
        state.skipped += 1
        if state.skipped < ROUTE_MEMO_RESAMPLE:
            for item in items:
                key = item[0]
                if type(key) is not str:
                    raise TypeError(f"a state key must be a str, got {type(key).__name__}")
                appends[crc32(key.encode("utf-8", "surrogatepass")) % peers](item)
            return parts
        state.skipped = 0
    memo = state.hashes
    known = memo.get
    room = ROUTE_MEMO_KEYS - len(memo)
    unknown = 0  # keys looked up in vain that the memo could not take either
    for item in items:
        key = item[0]
        hashed = known(key)
        if hashed is None:
            if type(key) is not str:
                raise TypeError(f"a state key must be a str, got {type(key).__name__}")
            hashed = crc32(key.encode("utf-8", "surrogatepass"))
            if room > 0 and len(key) <= ROUTE_MEMO_KEY_CHARS:
                memo[key] = hashed
                room -= 1
            else:
                unknown += 1
        appends[hashed % peers](item)
    state.useful = 2 * unknown <= len(items)
    return parts


def keyed_exchange() -> Exchange:
    """A keyed step's exchange: :func:`route_by_key`, batches split by :func:`partition_by_key`."""
    return Exchange(route_by_key, partition=partition_by_key)


def _compiled(chain: list[tuple[Step, BatchFn]], name: str) -> list[tuple[Step | FusedRun, Any]]:
    """``chain`` with each run of per-item steps compiled into one function."""
    out: list[tuple[Step | FusedRun, Any]] = []
    for part in runs(chain):
        if isinstance(part, list):
            fused = FusedRun(part, name)
            out.append((fused, fused.fn))
        else:
            out.append(part)
    return out


def stateless_chain(
    stream: Stream[Any], name: str, steps: list[tuple[Step, BatchFn]]
) -> Stream[Any]:
    """One operator applying each ``(step, fn)`` in turn to every batch.

    Each run of per-item steps is one comprehension (:mod:`timelypy.flow._fused`).
    """
    chain = _compiled(list(steps), name)

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        worker = info.worker_index

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, items in inp:
                items = apply_chain(chain, worker, cap.time, items)
                if items:
                    out.give_batch(cap, items)

        return logic

    return stream.unary(Pipeline(), name, constructor)


def apply_chain(
    chain: list[tuple[Step | FusedRun, Any]], worker: int, epoch: int, items: list[Any]
) -> list[Any]:
    """``items`` through each ``(step, fn)`` of a :func:`_compiled` chain in turn.

    Stops early at an empty batch; an error of a step's function stops the
    flow with the error naming that step, the worker and the epoch.
    """
    current = fn = None
    try:
        for current, fn in chain:  # noqa: B007 - read in the handler
            items = fn(epoch, items)
            if not items:
                break
    except Exception as exc:
        raise_from(current, fn, worker, epoch, exc)
    return items


def take_chain(
    graph: GraphBuilder, stream_id: str, step: Step
) -> tuple[Stream[Any], list[tuple[Step, BatchFn]]]:
    """The stream ``step`` reads and the stateless steps still to apply to it.

    When ``step`` is the stream's only reader, the chain is handed over for
    ``step``'s own operator to run (a fold consumes it item by item);
    otherwise the stream is built as usual, with nothing left to apply.
    """
    if graph.flow.consumers(stream_id) == 1:
        lazy = graph.lazy(stream_id, step)
        return lazy.base, list(lazy.chain)
    return graph.materialize(stream_id, step), []


def reduce_epoch(graph: GraphBuilder, step: Step, peers: int, state: StepState) -> Stream[Any]:
    """The operators of a chain ``reduce_epoch`` or ``reduce_epoch_local`` step.

    The first fold, on the worker the items are made on, takes the
    stateless steps before it and folds what they make as it is made
    (:class:`~timelypy.flow._fused.FusedRun`), or folds the
    ``pre_aggregate``'s partial results of each batch; with several
    workers, ``reduce_epoch`` then sends one ``(key, acc)`` per key and
    epoch to the key's worker, which folds those.
    """
    stream, prelude = take_chain(graph, step.ups[0], step)
    check = True
    if len(step.logic) > 1:  # a pre_aggregate: (key, partial) pairs, checked per batch
        prepare = _batch.pre_aggregate(step.logic[1], step.step_id, step.operator)
        prelude = [*prelude, (step, prepare)]
        check = False
    name = "+".join([*(part.step_id for part, _ in prelude if part is not step), step.step_id])
    if step.operator == "reduce_epoch" and peers > 1:
        stream = combine_epoch(
            stream, f"{name}.local", step, Pipeline(), None, check=check, prelude=prelude
        )
        return combine_epoch(stream, step.step_id, step, keyed_exchange(), state)
    return combine_epoch(stream, name, step, Pipeline(), state, check=check, prelude=prelude)


def combine_epoch(
    stream: Stream[Any],
    name: str,
    step: Step,
    pact: Pact,
    state: StepState | None,
    check: bool = False,
    prelude: list[tuple[Step, BatchFn]] | None = None,
) -> Stream[Any]:
    """Fold ``(key, value)`` items per epoch and key; emit ``(key, acc)`` as each epoch closes.

    Epochs close in order; within one, nothing is emitted before it closes,
    so the fold order does not matter (the reducer is commutative and
    associative).  ``state``, when given, sees each epoch close.  With
    ``check`` every item is checked as :func:`keyed_check` would, as it is
    folded (for the first fold of a ``reduce_epoch``, whose items come
    straight from the user's steps): that it is a tuple, and that a key
    new to the epoch's accumulator is a ``str``.

    ``prelude`` (``Pipeline`` only) holds stateless steps to apply to each
    batch first; a run of per-item steps at its end is compiled with the
    fold into one loop (:class:`~timelypy.flow._fused.FusedRun`), so the
    pairs it makes are folded as they are made.
    """
    reducer = step.logic[0]
    before = list(prelude or [])
    fused_members: list[tuple[Step, PerItem]] = []
    while before and isinstance(before[-1][1], PerItem):
        fused_members.insert(0, before.pop())  # type: ignore[arg-type]
    if not check:
        before += fused_members
    chain = _compiled(before, name)

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        pending: dict[int, tuple[Capability, dict[str, Any]]] = {}
        worker = info.worker_index
        if check:
            fold = checked_fold(step, reducer, fused_members, name, worker)
        else:
            fold = _fold(step, reducer)

        def fold_batch(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
            if chain:
                items = apply_chain(chain, worker, epoch, items)
                if not items:
                    return
            try:
                fold(epoch, acc, items)
            except Exception as exc:
                if step.form != "graph" or isinstance(exc, (StateKeyError, StepError)):
                    raise
                what = getattr(reducer, "what", "the reducer")  # fold_final's: the folder
                raise step_error(step.step_id, worker, epoch, what, exc) from exc

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, items in inp:
                epoch = cap.time
                entry = pending.get(epoch)
                if entry is None:
                    entry = pending[epoch] = (cap.retain(), {})
                fold_batch(epoch, entry[1], items)
            if pending:
                frontier = inp.frontier
                for epoch in sorted(pending):
                    if frontier.less_equal(epoch):
                        break
                    held, acc = pending.pop(epoch)
                    if acc:
                        out.give_batch(held, list(acc.items()))
                    held.drop()
                    if state is not None:
                        state.close_epoch(epoch)

        return logic

    return stream.unary_frontier(pact, name, constructor)


def keyed_step(stream: Stream[Any], step: Step, state: StepState) -> Stream[Any]:
    """``reduce`` or ``stateful_map``: per-key state in ``state``, items applied in epoch order.

    Items are routed to their key's worker, queued per epoch by an
    :class:`EagerNotificator`, applied as soon as their epoch is the
    frontier epoch (outputs leave at once) and, for later epochs, once every
    earlier epoch has ended; ``state`` sees each epoch close, which is when
    a snapshot can read it.
    """
    step_id, operator = step.step_id, step.operator
    states = state.states
    apply: Callable[[int, list[Any]], list[Any]]
    if operator == "stateful_map":
        builder, mapper = step.logic

        def apply(epoch: int, items: list[Any]) -> list[Any]:
            out: list[Any] = []
            # locals, not closure cells or attribute lookups, in the per-item loop
            get, pop, append, table = states.get, states.pop, out.append, states
            build, map_state, missing = builder, mapper, _MISSING
            key: Any = None
            result: Any = _MISSING
            try:
                for key, value in items:
                    current = get(key, missing)
                    if current is missing:
                        current = build(key)
                    result = map_state(current, value)
                    new, output = result
                    if new is None:
                        pop(key, None)
                    else:
                        table[key] = new
                    append((key, output))
            except Exception as exc:
                if result is not _MISSING and (type(result) is not tuple or len(result) != 2):
                    raise FlowError(
                        f"step {step_id!r} (stateful_map): the mapper must return a "
                        f"(new_state, output) pair, got {result!r} for key {key!r} at epoch {epoch}"
                    ) from exc
                noted(exc, step_id, operator, f"raised on key {key!r} at epoch {epoch}")
                raise
            state.touch_all(epoch, items)
            return out

    elif operator == "reduce":
        reducer, is_complete = step.logic

        def apply(epoch: int, items: list[Any]) -> list[Any]:
            out = []
            get = states.get
            key: Any = None
            try:
                for key, value in items:
                    acc = get(key, _MISSING)
                    acc = value if acc is _MISSING else reducer(acc, value)
                    if is_complete(acc):
                        states.pop(key, None)
                        out.append((key, acc))
                    else:
                        states[key] = acc
            except Exception as exc:
                noted(exc, step_id, operator, f"raised on key {key!r} at epoch {epoch}")
                raise
            state.touch_all(epoch, items)
            return out

    else:
        raise AssertionError(f"not a keyed operator: {operator}")

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        eager = EagerNotificator()

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, items in inp:
                eager.notify_at(cap.retain(), items)

            def run_items(held: Capability, items: list[Any]) -> None:
                results = apply(held.time, items)
                if results:
                    out.give_batch(held, results)

            def close(held: Capability) -> None:
                state.close_epoch(held.time)

            eager.for_each([inp.frontier], run_items, close)

        return logic

    return stream.unary_frontier(keyed_exchange(), step_id, constructor)


def output_sink(
    stream: Stream[Any], name: str, pact: Pact, write: Callable[[int, list[Any]], Any]
) -> Stream[Any]:
    """Call ``write(epoch, items)`` for each batch.

    Returns the sink's output: it carries no items, but its frontier tells
    when every item of an epoch has been written (the flow's probe watches
    it, and so does the worker frontier of recovery).
    """

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, items in inp:
                write(cap.time, items)

        return logic

    return stream.unary(pact, name, constructor)
