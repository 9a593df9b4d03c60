"""Keyed state for the stream graph's stateful operators, on the eager notificator.

Every stateful operator of :mod:`timelypy.flow.operators` (``stateful_map``,
``stateful``, the ``*_final`` folds, ``join``, ``collect``) is one runtime
operator built by :func:`keyed_operator` around a :class:`KeyedLogic`: an
object that owns the state of every key routed to this worker and answers
four questions:

* :meth:`KeyedLogic.apply` -- a batch of ``(key, value)`` items of one
  epoch arrived (in epoch order: the eager notificator applies an epoch's
  items once every earlier epoch has closed): what comes out?
* :meth:`KeyedLogic.notify` -- the system time passed :meth:`KeyedLogic.wake`:
  what comes out of the keys whose timers are due?
* :meth:`KeyedLogic.eof` -- the input ended: what comes out?
* :meth:`KeyedLogic.snapshot` -- a key's state now (``None``: discarded),
  for recovery, taken when an epoch in which the key changed closes.

The operator holds one capability at its input frontier, so what a timer
or the end of input emits carries the epoch the input is at, never an
earlier one, and a resumed execution emits nothing before its resume epoch.
"""

from __future__ import annotations

import datetime
import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pact, Pipeline
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.stream import Stream
from timelypy.errors import StepError
from timelypy.flow._ends import InputEnd, with_input_end
from timelypy.flow.steps import keyed_exchange, step_error

__all__ = [
    "KeyedLogic",
    "StatefulMapLogic",
    "FoldFinalLogic",
    "PerKeyLogic",
    "JoinLogic",
    "CollectLogic",
    "keyed_operator",
    "step_error",
    "Snapshots",
]

_MISSING: Any = object()
_NEVER = float("inf")
_UTC = datetime.UTC

#: ``snapshots(epoch, [(key, state or None)])``: keep keys' states as of the end of ``epoch``.
Snapshots = Callable[[int, list[tuple[str, Any]]], None]


class KeyedLogic:
    """The state of one stateful step's keys on one worker; see the module documentation.

    Subclasses keep their per-key state in whatever shape is fastest for
    them; the defaults do nothing.
    """

    #: the user's function being called, for error messages
    what = "the step's function"
    #: an aligned event clock's wait (windows only; see :class:`AlignedWatermark`)
    aligned_wait: datetime.timedelta | None = None

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Apply a batch of one epoch; return the ``(key, output)`` items."""
        raise NotImplementedError

    def wake(self) -> float | None:
        """The earliest due timer (a POSIX time), or ``None``."""
        return None

    def notify(self, now: float) -> tuple[list[tuple[str, Any]], set[str]]:
        """Run the timers due at ``now``: the outputs and the keys changed."""
        return [], set()

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        """The input ended: the outputs and the keys changed."""
        return [], set()

    def advance_aligned(
        self, watermark: datetime.datetime
    ) -> tuple[list[tuple[str, Any]], set[str]]:
        """An aligned clock's watermark moved (only with :attr:`aligned_wait`)."""
        return [], set()

    def snapshot(self, key: str) -> Any:
        """``key``'s state now, ``None`` if it has none."""
        raise NotImplementedError

    def restore(self, states: dict[str, Any]) -> None:
        """Take the states a resumed execution loaded (key -> snapshot)."""
        raise NotImplementedError


class StatefulMapLogic(KeyedLogic):
    """``stateful_map`` and ``stateful_flat_map``: ``mapper(state or None, value)``."""

    what = "the mapper"

    def __init__(self, mapper: Callable[[Any, Any], Any], flat: bool, step_id: str) -> None:
        self.mapper = mapper
        self.flat = flat
        self.step_id = step_id
        self.states: dict[str, Any] = {}

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        states, mapper = self.states, self.mapper
        out: list[tuple[str, Any]] = []
        get, pop, append = states.get, states.pop, out.append
        # a 2-tuple until the mapper returns: an error the mapper itself raises on the
        # first item is then re-raised as it is, not taken for a wrong return shape
        result: Any = (None, None)
        try:
            if self.flat:
                for key, value in items:
                    result = mapper(get(key), value)
                    new, emit = result
                    if new is None:
                        pop(key, None)
                    else:
                        states[key] = new
                    out.extend([(key, one) for one in emit])
            else:
                for key, value in items:
                    result = mapper(get(key), value)
                    new, emit = result  # one unpacking checks the shape
                    if new is None:
                        pop(key, None)
                    else:
                        states[key] = new
                    append((key, emit))
        except (TypeError, ValueError) as exc:
            if type(result) is not tuple or len(result) != 2:
                raise TypeError(
                    f"the mapper of step {self.step_id!r} must return a 2-tuple "
                    f"(updated_state, emit_value), got {result!r}"
                ) from exc
            raise
        return out

    def snapshot(self, key: str) -> Any:
        return self.states.get(key)

    def restore(self, states: dict[str, Any]) -> None:
        self.states.update(states)


class FoldFinalLogic(KeyedLogic):
    """``fold_final`` / ``reduce_final``: fold each key's values, emit every key at the end.

    ``builder`` ``None`` means reduce: a key's first value starts its
    accumulator.  With ``reducer`` :func:`operator.add` the loop adds
    inline (the same operation, without a call per item).  ``fold_final``
    with a merger is a reduce too: the items are the partials each worker
    folded per epoch (:class:`~timelypy.flow._folds.FoldInto`), ``folder``
    the merger, and ``what`` names it in errors.
    """

    what = "the folder"

    def __init__(
        self,
        builder: Callable[[], Any] | None,
        folder: Callable[[Any, Any], Any],
        add: bool,
        what: str = "the folder",
    ) -> None:
        self.builder = builder
        self.folder = folder
        self.add = add
        self.what = what
        self.accs: dict[str, Any] = {}

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        accs, folder, builder = self.accs, self.folder, self.builder
        if self.add:
            for key, value in items:
                if key in accs:
                    accs[key] = accs[key] + value
                else:
                    accs[key] = value
        elif builder is None:
            for key, value in items:
                if key in accs:
                    accs[key] = folder(accs[key], value)
                else:
                    accs[key] = value
        else:
            get = accs.get
            for key, value in items:
                acc = get(key, _MISSING)
                accs[key] = folder(builder() if acc is _MISSING else acc, value)
        return []

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        out = list(self.accs.items())
        keys = set(self.accs)
        self.accs = {}
        return out, keys

    def snapshot(self, key: str) -> Any:
        return self.accs.get(key)

    def restore(self, states: dict[str, Any]) -> None:
        self.accs.update(states)


class AlignedWatermark:
    """An aligned clock's watermark: the smallest of the workers' largest timestamps, less the wait.

    Each worker sends marks ``(worker, largest timestamp so far)`` at the
    epochs of its values (``aligned_marks``), and ``(worker, None)`` when
    its input ends.  :meth:`before` folds in the marks of the epochs before
    an epoch, once the frontiers say they are all in: the same marks on
    every worker, so the same watermark.
    """

    __slots__ = ("largest", "pending", "wait", "watermark")

    def __init__(self, wait: datetime.timedelta) -> None:
        self.wait = wait
        #: epoch -> marks received at it, not folded in yet
        self.pending: dict[int, list[tuple[int, Any]]] = {}
        #: worker -> its largest timestamp (None: its input ended)
        self.largest: dict[int, datetime.datetime | None] = {}
        self.watermark: datetime.datetime | None = None

    def add(self, epoch: int, marks: list[tuple[int, Any]]) -> None:
        """Marks that came at ``epoch``."""
        entry = self.pending.get(epoch)
        if entry is None:
            self.pending[epoch] = list(marks)
        else:
            entry.extend(marks)

    def before(self, epoch: int) -> datetime.datetime | None:
        """Fold in the marks of the epochs before ``epoch``; the new watermark if it moved."""
        pending = self.pending
        done = sorted(e for e in pending if e < epoch)
        if not done:
            return None
        largest = self.largest
        for e in done:
            for worker, at in pending.pop(e):
                if at is None:
                    largest[worker] = None
                else:
                    known = largest.get(worker, _MISSING)
                    if known is _MISSING or (known is not None and at > known):
                        largest[worker] = at
        live = [at for at in largest.values() if at is not None]
        if not live:
            watermark = _AWARE_MAX if largest else None
        else:
            try:
                watermark = min(live) - self.wait
            except OverflowError:
                watermark = _AWARE_MIN
        if watermark is None or (self.watermark is not None and watermark <= self.watermark):
            return None
        self.watermark = watermark
        return watermark


_AWARE_MAX = datetime.datetime.max.replace(tzinfo=datetime.UTC)
_AWARE_MIN = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def aligned_marks(
    stream: Stream[Any], step_id: str, ts_getter: Callable[[Any], Any]
) -> Stream[tuple[int, Any]]:
    """Each worker's marks of ``stream``'s ``(key, value)`` items, broadcast.

    A mark is ``(worker, largest timestamp so far)``, at the epoch of the
    values that moved it, and ``(worker, None)`` at the input's end. A value
    whose timestamp cannot be read is skipped here (the window step itself
    reports it, naming the step).
    """

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        held: list[Capability] = [cap.retain()]
        worker = info.worker_index
        largest: list[Any] = [None]

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for item_cap, items in inp:
                top = largest[0]
                for _, value in items:
                    try:
                        at = ts_getter(value)
                        if top is None or at > top:
                            top = at
                    except Exception:
                        continue
                if top is not None and top is not largest[0]:
                    largest[0] = top
                    out.give_batch(item_cap, [(worker, top)])
            if held:
                elements = inp.frontier.frontier()
                if elements:
                    low = min(elements)
                    if low > held[0].time:
                        held[0].downgrade(low)
                else:
                    last = held.pop()
                    out.give_batch(last, [(worker, None)])
                    last.drop()

        return logic

    return stream.unary_frontier(Pipeline(), f"{step_id}.marks", constructor).broadcast()


class _Timers:
    """Per-key wake-up times: the latest one a key asked for, and a heap to find the first."""

    __slots__ = ("at", "heap")

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.heap: list[tuple[float, str]] = []

    def set(self, key: str, when: float | None) -> None:
        if when is None:
            self.at.pop(key, None)
            return
        if self.at.get(key) != when:
            self.at[key] = when
            heapq.heappush(self.heap, (when, key))

    def first(self) -> float | None:
        heap, at = self.heap, self.at
        while heap and at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[str]:
        heap, at, keys = self.heap, self.at, []
        while heap and heap[0][0] <= now:
            when, key = heapq.heappop(heap)
            if at.get(key) == when:
                del at[key]
                keys.append(key)
        return keys


def _posix(when: Any, step_id: str) -> float | None:
    if when is None:
        return None
    if not isinstance(when, datetime.datetime) or when.tzinfo is None:
        raise TypeError(
            f"notify_at of step {step_id!r} must return an aware datetime or None, got {when!r}"
        )
    return when.timestamp()


class PerKeyLogic(KeyedLogic):
    """``stateful``: one user :class:`~timelypy.flow.operators.StatefulLogic` per key."""

    what = "the StatefulLogic"

    def __init__(self, builder: Callable[[Any], Any], step_id: str) -> None:
        self.builder = builder
        self.step_id = step_id
        self.logics: dict[str, Any] = {}
        self.timers = _Timers()

    def _keep(self, key: str, logic: Any, discard: Any) -> None:
        if discard:
            self.logics.pop(key, None)
            self.timers.set(key, None)
        else:
            self.logics[key] = logic
            self.timers.set(key, _posix(logic.notify_at(), self.step_id))

    def _outputs(self, key: str, result: Any, method: str, out: list[tuple[str, Any]]) -> bool:
        if type(result) is not tuple or len(result) != 2:
            raise TypeError(
                f"{method} of step {self.step_id!r} must return (outputs, discard), got {result!r}"
            )
        emit, discard = result
        out.extend([(key, one) for one in emit])
        return bool(discard)

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        logics, builder = self.logics, self.builder
        out: list[tuple[str, Any]] = []
        for key, value in items:
            logic = logics.get(key)
            if logic is None:
                logic = builder(None)
            discard = self._outputs(key, logic.on_item(value), "on_item", out)
            self._keep(key, logic, discard)
        return out

    def wake(self) -> float | None:
        return self.timers.first()

    def notify(self, now: float) -> tuple[list[tuple[str, Any]], set[str]]:
        out: list[tuple[str, Any]] = []
        keys = self.timers.due(now)
        for key in keys:
            logic = self.logics.get(key)
            if logic is not None:
                discard = self._outputs(key, logic.on_notify(), "on_notify", out)
                self._keep(key, logic, discard)
        return out, set(keys)

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        out: list[tuple[str, Any]] = []
        keys = set(self.logics)
        for key in sorted(keys):
            logic = self.logics[key]
            discard = self._outputs(key, logic.on_eof(), "on_eof", out)
            self._keep(key, logic, discard)
        return out, keys

    def snapshot(self, key: str) -> Any:
        logic = self.logics.get(key)
        return None if logic is None else logic.snapshot()

    def restore(self, states: dict[str, Any]) -> None:
        for key, state in states.items():
            logic = self.builder(state)
            self._keep(key, logic, False)


class JoinLogic(KeyedLogic):
    """``join``: items ``(key, (side, value))``; rows ``(key, (v0, v1, ...))``.

    ``insert``: ``first`` keeps a side's first value, ``last`` its latest,
    ``product`` every one (rows are then the product of the sides).
    ``emit``: ``complete`` once every side has a value, then forget the
    key; ``running`` on every value, keeping it; ``final`` at the end.
    """

    what = "join"

    def __init__(self, sides: int, insert: str, emit: str) -> None:
        self.sides = sides
        self.insert = insert
        self.emit = emit
        self.states: dict[str, list[Any]] = {}

    def _rows(self, state: list[Any]) -> list[tuple[Any, ...]]:
        if self.insert == "product":
            return list(itertools.product(*[values or [None] for values in state]))
        return [tuple(None if value is _MISSING else value for value in state)]

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        if self.insert != "product":
            return self._apply_one_value(items)
        # ``product``: every value of every side, rows the product of the sides
        states, sides, emit = self.states, self.sides, self.emit
        out: list[tuple[str, Any]] = []
        for key, (side, value) in items:
            state = states.get(key)
            if state is None:
                state = states[key] = [[] for _ in range(sides)]
            state[side].append(value)
            if emit == "running":
                out.extend([(key, row) for row in self._rows(state)])
            elif emit == "complete" and all(state):
                out.extend([(key, row) for row in self._rows(state)])
                del states[key]
        return out

    def _apply_one_value(self, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """``first`` and ``last`` inserts: one value per side, rows built inline."""
        states, sides, emit = self.states, self.sides, self.emit
        last = self.insert == "last"
        running, complete = emit == "running", emit == "complete"
        out: list[tuple[str, Any]] = []
        append = out.append
        get = states.get
        missing = _MISSING
        for key, (side, value) in items:
            state = get(key)
            if state is None:
                state = states[key] = [missing] * sides
            if last or state[side] is missing:
                state[side] = value
            if running:
                append((key, tuple([None if v is missing else v for v in state])))
            elif complete and not any([v is missing for v in state]):  # by identity
                append((key, tuple(state)))
                del states[key]
        return out

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        if self.emit != "final":
            return [], set()
        out = [(key, row) for key, state in self.states.items() for row in self._rows(state)]
        keys = set(self.states)
        self.states = {}
        return out, keys

    def snapshot(self, key: str) -> Any:
        state = self.states.get(key)
        if state is None or self.insert == "product":
            return state
        return [(value is not _MISSING, None if value is _MISSING else value) for value in state]

    def restore(self, states: dict[str, Any]) -> None:
        for key, state in states.items():
            if self.insert != "product":
                state = [value if present else _MISSING for present, value in state]
            self.states[key] = state


class CollectLogic(KeyedLogic):
    """``collect``: a list per key, emitted at ``max_size`` values, on a timeout, or at the end."""

    what = "collect"

    def __init__(self, timeout: float, max_size: int) -> None:
        self.timeout = timeout
        self.max_size = max_size
        self.lists: dict[str, list[Any]] = {}
        self.timers = _Timers()

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        lists, max_size = self.lists, self.max_size
        out: list[tuple[str, Any]] = []
        deadline = time.time() + self.timeout
        for key, value in items:
            values = lists.get(key)
            if values is None:
                values = lists[key] = []
            values.append(value)
            if len(values) >= max_size:
                out.append((key, values))
                del lists[key]
                self.timers.set(key, None)
            else:
                self.timers.set(key, deadline)
        return out

    def wake(self) -> float | None:
        return self.timers.first()

    def notify(self, now: float) -> tuple[list[tuple[str, Any]], set[str]]:
        keys = [key for key in self.timers.due(now) if key in self.lists]
        return [(key, self.lists.pop(key)) for key in keys], set(keys)

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        out = list(self.lists.items())
        keys = set(self.lists)
        self.lists = {}
        self.timers = _Timers()
        return out, keys

    def snapshot(self, key: str) -> Any:
        return self.lists.get(key)

    def restore(self, states: dict[str, Any]) -> None:
        deadline = time.time() + self.timeout
        for key, values in states.items():
            self.lists[key] = list(values)
            self.timers.set(key, deadline)


def keyed_operator(
    stream: Stream[Any],
    step_id: str,
    logic: KeyedLogic,
    check: Callable[[int, list[Any]], Any],
    snapshots: Snapshots | None,
    pact: Pact | None = None,
    ends: Stream[int] | None = None,
    marks: Stream[tuple[int, Any]] | None = None,
) -> Stream[Any]:
    """One runtime operator running ``logic`` on the ``(key, value)`` items of ``stream``.

    Items are routed to their key's worker (``pact``, by default the
    stable hash of the key), checked with ``check(epoch, items)``, queued
    per epoch and applied in epoch order.  With ``snapshots`` every key
    that changed in an epoch is snapshotted when the epoch closes.  What
    the end of the input closes comes out at the input's last epoch, told
    by ``ends`` (see :mod:`timelypy.flow._ends`), the same on any number of
    workers.  With ``marks`` (an aligned clock's, see :func:`aligned_marks`)
    an epoch's items wait until every worker's marks of the epochs before
    it are in, and the logic's aligned watermark moves before they apply.
    """

    def constructor(cap: Capability, info: OperatorInfo, end: InputEnd) -> Callable[..., None]:
        eager = EagerNotificator()
        wait = logic.aligned_wait
        aligned = AlignedWatermark(wait) if marks is not None and wait is not None else None
        # the capability that timers and the end of input emit at: at the input frontier
        held: list[Capability] = [cap.retain()]
        # epoch -> keys changed in it, snapshotted when it closes (only with snapshots)
        touched: dict[int, set[str]] = {}
        worker = info.worker_index
        # the wake-up time this operator has asked the worker for
        scheduled = [_NEVER]

        def failed(exc: Exception, epoch: Any) -> StepError:
            return step_error(step_id, worker, epoch, logic.what, exc)

        def touch(epoch: int, keys: Iterable[str]) -> None:
            entry = touched.get(epoch)
            if entry is None:
                entry = touched[epoch] = set()
            entry.update(keys)

        def snapshot_before(epoch: Any, inclusive: bool) -> None:
            # Snapshots of the epochs before ``epoch`` (and it, if inclusive), which have
            # closed: taken before any later epoch's items change the state.
            for done in sorted(touched):
                if done > epoch or (done == epoch and not inclusive):
                    break
                keys = touched.pop(done)
                assert snapshots is not None
                snapshots(done, [(key, logic.snapshot(key)) for key in sorted(keys)])

        def snapshot_closed(frontier: Any) -> None:
            for epoch in sorted(touched):
                if frontier.less_equal(epoch):
                    break
                snapshot_before(epoch, True)

        def logic_fn(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            def run_items(epoch_cap: Capability, items: list[Any]) -> None:
                epoch = epoch_cap.time
                if touched:
                    snapshot_before(epoch, False)
                if aligned is not None:
                    move_aligned(epoch, lambda results, keys: emit(epoch_cap, results, keys))
                check(epoch, items)
                try:
                    results = logic.apply(epoch, items)
                except Exception as exc:
                    raise failed(exc, epoch) from exc
                if snapshots is not None:
                    touch(epoch, [item[0] for item in items])
                if results:
                    out.give_batch(epoch_cap, results)

            def close(epoch_cap: Capability) -> None:
                if touched:
                    snapshot_before(epoch_cap.time, True)

            def emit(at: Capability, results: list[Any], keys: set[str]) -> None:
                if results:
                    out.give_batch(at, results)
                if snapshots is not None and keys:
                    touch(at.time, keys)

            def emit_held(results: list[Any], keys: set[str]) -> None:
                emit(held[0], results, keys)

            def move_aligned(before: Any, send: Callable[[list[Any], set[str]], None]) -> None:
                assert aligned is not None
                watermark = aligned.before(before)
                if watermark is not None:
                    try:
                        results, keys = logic.advance_aligned(watermark)
                    except Exception as exc:
                        raise failed(exc, before) from exc
                    send(results, keys)

            for item_cap, items in inp:
                eager.notify_at(item_cap.retain(), items)
            frontier = inp.frontier
            if aligned is not None:
                for mark_cap, batch in marks_in[0]:
                    aligned.add(mark_cap.time, batch)
                eager.for_each([frontier, marks_in[0].frontier], run_items, close)
            else:
                eager.for_each([frontier], run_items, close)
            if held:
                elements = frontier.frontier()
                if elements:
                    low = min(elements)
                    if low > held[0].time:
                        held[0].downgrade(low)
                    if aligned is not None:
                        # the marks of every epoch both frontiers passed: what they close
                        move_aligned(min([low, *marks_in[0].frontier.frontier()]), emit_held)
                now = time.time()
                if scheduled[0] <= now:
                    scheduled[0] = _NEVER
                wake = logic.wake()
                if wake is not None and wake <= now:
                    try:
                        results, keys = logic.notify(now)
                    except Exception as exc:
                        raise failed(exc, held[0].time) from exc
                    emit_held(results, keys)
                    wake = logic.wake()
                if not elements:
                    if not end.reached() or (
                        aligned is not None and marks_in[0].frontier.frontier()
                    ):
                        return  # other readers have not said where they ended yet
                    final = end.epoch(held[0].time)
                    if final > held[0].time:
                        held[0].downgrade(final)
                    try:
                        results, keys = logic.eof()
                    except Exception as exc:
                        raise failed(exc, held[0].time) from exc
                    emit_held(results, keys)
                    last = held.pop()
                    if snapshots is not None:
                        snapshot_closed(frontier)
                    last.drop()
                    return
                if wake is not None and wake < scheduled[0]:
                    scheduled[0] = wake
                    info.activate_after(max(0.0, wake - now))
            if snapshots is not None and touched:
                snapshot_closed(frontier)

        return logic_fn

    marks_in: list[OperatorInput[Any]] = []  # the marks' input, once the operator is built
    return with_input_end(
        stream,
        pact if pact is not None else keyed_exchange(),
        step_id,
        ends,
        constructor,
        extra_input=(marks, marks_in) if marks is not None else None,
    )
