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
from operator import add, itemgetter
from typing import TYPE_CHECKING, Any
from zlib import crc32

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange, Pact, Pipeline
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError, StateKeyError, StepError
from timelypy.flow import _batch
from timelypy.flow._batch import BatchRefused
from timelypy.flow._fused import (
    FOLD_CHECK,
    FOLD_UNPACK,
    FusedRun,
    PerItem,
    per_item,
    runs,
)
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
    "combine_epoch",
    "checked_fold",
    "reduce_epoch",
    "take_chain",
    "keyed_step",
    "output_sink",
]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]
#: ``fold(epoch, acc, items)``: fold a batch of ``(key, value)`` items into ``acc``.
Fold = Callable[[int, dict[str, Any], list[Any]], None]

_MISSING = object()
_first = itemgetter(0)


def _noted(exc: BaseException, step_id: str, operator: str, what: str) -> None:
    exc.add_note(f"in step {step_id!r} ({operator}): {what}")


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


def _bad_item(items: list[Any]) -> Any:
    for item in items:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            return item
    return _MISSING


def keyed_check(step: Step) -> BatchFn:
    """Check that every item of a batch is ``(str, value)`` before it enters keyed ``step``.

    Three passes in C (types, lengths, key types) rather than a Python
    loop; the slow scan runs only to name the offending item.  Each pass
    counts matches in a list (``list(map(type, items)).count(tuple)``),
    which compares types by identity first: about 37 ns an item against 52
    for building a set of the types and comparing it (a batch of 10,000
    ``(word, 1)`` items).
    """

    def check(epoch: int, items: list[Any]) -> list[Any]:
        n = len(items)
        if (
            list(map(type, items)).count(tuple) != n
            or list(map(len, items)).count(2) != n
            or list(map(type, map(_first, items))).count(str) != n
        ):
            error = _refusal(step, epoch, items)
            if error is not None:
                raise error
        return items

    return check


def _refusal(step: Step, epoch: int, items: list[Any]) -> StateKeyError | None:
    """The :class:`StateKeyError` for the first item of ``items`` that is not ``(str, value)``."""
    bad = _bad_item(items)
    if bad is _MISSING:
        return None
    kind = (
        f"a key of type {type(bad[0]).__name__}"
        if type(bad) is tuple and len(bad) == 2
        else f"a {type(bad).__name__}"
    )
    return StateKeyError(
        f"step {step.step_id!r} ({step.operator}) takes (key, value) 2-tuples with a str state "
        f"key, but got {bad!r} ({kind}) at epoch {epoch}; map items to "
        "(str(key), value) before this step"
    )


def route_by_key(item: tuple[str, Any]) -> int:
    """The stable hash of an item's state key: CRC-32 of its UTF-8 bytes."""
    return crc32(item[0].encode("utf-8", "surrogatepass"))


def step_error(step_id: str, worker: int, epoch: Any, what: str, exc: BaseException) -> StepError:
    """The :class:`StepError` for ``exc`` raised by the user's ``what`` in ``step_id``."""
    return StepError(
        f"step {step_id!r} on worker {worker}, epoch {epoch}: {what} raised "
        f"{type(exc).__name__}: {exc}"
    )


def _failure(step: Step | None, fn: Any, worker: int, epoch: int, exc: Exception) -> Exception:
    """The error to raise for ``exc``, raised by ``fn`` of ``step`` at ``epoch``.

    A refused return (:class:`~timelypy.flow._batch.BatchRefused`) becomes a
    :class:`FlowError` naming the step, the worker and the epoch; in a
    stream-graph step, a user function's exception becomes a
    :class:`StepError` whose cause it is; in a chain step it stays itself,
    with a note naming the step.  A :class:`StateKeyError` (already named)
    stays as it is.
    """
    if isinstance(exc, BatchRefused):
        where = "" if step is None else f"step {step.step_id!r} ({step.operator}) "
        error = FlowError(f"{where}on worker {worker}, epoch {epoch}: {exc}")
        error.__cause__ = None
        error.__suppress_context__ = True
        return error
    if step is None or isinstance(exc, StateKeyError):
        return exc
    if step.form == "graph":
        what = getattr(fn, "what", None) or getattr(step.options, "what", "your function")
        failed = step_error(step.step_id, worker, epoch, str(what), exc)
        failed.__cause__ = exc
        return failed
    _noted(exc, step.step_id, step.operator, f"your function raised at epoch {epoch}")
    return exc


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


def _raise_from(
    current: Step | FusedRun | None, fn: Any, worker: int, epoch: int, exc: Exception
) -> None:
    """Raise the error for ``exc`` raised by ``current`` (a step, or a fused run of them)."""
    step: Step | None
    if isinstance(current, FusedRun):
        owner, _ = current.owner(exc)
        step = owner if isinstance(owner, Step) else current.steps[0]
        fn = None
    else:
        step = current
    error = _failure(step, fn, worker, epoch, exc)
    if error is exc:
        raise exc
    raise error


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
                epoch = cap.time
                current = fn = None
                try:
                    for current, fn in chain:  # noqa: B007 - read in the handler
                        items = fn(epoch, items)
                        if not items:
                            break
                except Exception as exc:
                    _raise_from(current, fn, worker, epoch, exc)
                if items:
                    out.give_batch(cap, items)

        return logic

    return stream.unary(Pipeline(), name, constructor)


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
        return combine_epoch(stream, step.step_id, step, Exchange(route_by_key), state)
    return combine_epoch(stream, name, step, Pipeline(), state, check=check, prelude=prelude)


def _fold(step: Step, reducer: Callable[[Any, Any], Any]) -> Fold:
    """``fold(epoch, acc, items)``: fold each ``(key, value)`` of ``items`` into ``acc`` in order.

    A key's first value is kept as it is; each later one is folded in with
    ``reducer(old, value)``.  When ``reducer`` is :func:`operator.add` the
    loop writes ``old + value`` instead of calling it: the same
    ``PyNumber_Add`` on the same operands in the same order, so the same
    values, types and exceptions, without a call per item (and with ``in``
    and ``acc[key]``, bytecodes, rather than a ``dict.get`` call): about
    58 ns an item against 64 for the generic loop (batches of 10,000
    ``(word, 1)`` items on the 2-core benchmark machine).

    Counting the keys in C (``collections.Counter``'s helper) when every
    value is the int 1 was measured and is not used: proving that (the
    values' types and equality to 1, needed to keep a lone ``True`` a
    ``True`` and a float a float) costs two more passes over the batch,
    and with them the C count was slower (62 ns an item) than this loop.
    """
    step_id, operator = step.step_id, step.operator

    def noted(exc: BaseException, key: Any, epoch: int) -> None:
        _noted(exc, step_id, operator, f"the reducer raised on key {key!r} at epoch {epoch}")

    if reducer is add:

        def fold_add(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
            key: Any = None
            try:
                for key, value in items:
                    if key in acc:
                        acc[key] = acc[key] + value
                    else:
                        acc[key] = value
            except Exception as exc:
                noted(exc, key, epoch)
                raise

        return fold_add

    def fold(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
        get = acc.get
        key: Any = None
        try:
            for key, value in items:
                old = get(key, _MISSING)
                acc[key] = value if old is _MISSING else reducer(old, value)
        except Exception as exc:
            noted(exc, key, epoch)
            raise

    return fold


def _refuser(step: Step) -> Callable[[int, Any], None]:
    def refuse(epoch: int, item: Any) -> None:
        error = _refusal(step, epoch, [item])
        assert error is not None
        raise error

    return refuse


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
            current = fn = None
            try:
                for current, fn in chain:  # noqa: B007 - read in the handler
                    items = fn(epoch, items)
                    if not items:
                        return
            except Exception as exc:
                _raise_from(current, fn, worker, epoch, exc)
            try:
                fold(epoch, acc, items)
            except Exception as exc:
                if step.form != "graph" or isinstance(exc, (StateKeyError, StepError)):
                    raise
                raise step_error(step.step_id, worker, epoch, "the reducer", exc) from exc

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


def checked_fold(
    step: Step,
    reducer: Callable[[Any, Any], Any],
    members: list[tuple[Step, PerItem]] | None = None,
    name: str | None = None,
    worker: int = 0,
) -> Fold:
    """The first fold of keyed ``step``, checking each item as it folds it.

    ``members`` (per-item steps before the fold) are compiled with it into
    one loop (:class:`~timelypy.flow._fused.FusedRun`).  An item that is
    not a ``(str, value)`` 2-tuple is refused with the
    :class:`StateKeyError` :func:`keyed_check` gives for it; an error of a
    member names that member, one of the reducer the key and the epoch.
    Items before the bad one are folded into the accumulator, but the
    error stops the dataflow.
    """
    fused = FusedRun(
        list(members or []), name or step.step_id, fold=(step, reducer, _refuser(step))
    )
    run = fused.fn

    def fold(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
        try:
            run(epoch, acc, items)
        except Exception as exc:
            _raise_fused(fused, step, worker, epoch, exc)

    return fold


def _raise_fused(fused: FusedRun, step: Step, worker: int, epoch: int, exc: Exception) -> None:
    """Raise the error for ``exc`` raised in the fused fold of keyed ``step``."""
    owner, local = fused.owner(exc)
    if isinstance(owner, Step):
        _raise_from(owner, None, worker, epoch, exc)
    if isinstance(exc, StateKeyError) or owner == FOLD_CHECK:
        raise exc
    if owner == FOLD_UNPACK:
        error = _refusal(step, epoch, [local.get(fused.item_name)])
        if error is not None:
            raise error from None
        raise exc
    key = local.get("key")
    _noted(exc, step.step_id, step.operator, f"the reducer raised on key {key!r} at epoch {epoch}")
    raise exc


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
                _noted(exc, step_id, operator, f"raised on key {key!r} at epoch {epoch}")
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
                _noted(exc, step_id, operator, f"raised on key {key!r} at epoch {epoch}")
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

    return stream.unary_frontier(Exchange(route_by_key), step_id, constructor)


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
