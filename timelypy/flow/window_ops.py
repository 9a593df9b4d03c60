"""The windowing steps' operator: per-key clocks, windows and accumulators.

:func:`window_step` adds one runtime operator for a ``reduce_window``,
``fold_window``, ``collect_window`` or ``count_window`` step, written on the
public operator API like :mod:`timelypy.flow.steps`: items routed by state
key, applied in epoch order with the eager notificator, windows closed
after each batch of a key, when a worker timer (``activate_after``) says
the system time has come, and when the input ends.  The semantics are
:mod:`timelypy.flow.window`'s.
"""

from __future__ import annotations

import datetime
import heapq
import logging
import time
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError
from timelypy.flow.state import NO_ACC, StepState
from timelypy.flow.steps import route_by_key
from timelypy.flow.window import (
    UTC_EPOCH,
    EventClockConfig,
    SessionWindowConfig,
    SlidingWindowConfig,
    TumblingWindowConfig,
    WindowConfig,
    WindowMetadata,
    WindowSpec,
    from_micros,
    micros,
    span_micros,
)

__all__ = ["window_step", "LATE_LOG_SECONDS"]

log = logging.getLogger("timelypy.flow")

#: Seconds between a worker's warnings about one step's late values.
LATE_LOG_SECONDS = 10.0
_NEVER = float("inf")
_US = datetime.timedelta(microseconds=1)

# -- the operator ------------------------------------------------------------------

# A key's state, a list (cheap to pickle, mutated in place):
#   [0] the clock: None (no value yet / system clock) or [watermark_base, system_time_of_max]
#   [1] accumulators by window id
#   [2] sessions: window id -> [open, close] (session windower only, else None)
#   [3] the next session id
#   [4] the watermark at which its first open window closes (inf: none open; None: to
#       recompute), so that a batch checks each key it touched with one comparison
_CLOCK, _ACCS, _SESSIONS, _NEXT, _CLOSES = 0, 1, 2, 3, 4


class _Windows:
    """The compiled windower: window bounds, first close and the windows a watermark closes."""

    def __init__(self, config: WindowConfig) -> None:
        self.session = isinstance(config, SessionWindowConfig)
        if isinstance(config, SessionWindowConfig):
            self.gap = span_micros(config.gap, "the gap")
            self.start = self.length = self.offset = 0
            return
        if isinstance(config, TumblingWindowConfig):
            self.length = self.offset = span_micros(config.length, "the length")
        else:
            assert isinstance(config, SlidingWindowConfig)
            self.length = span_micros(config.length, "the length")
            self.offset = span_micros(config.offset, "the offset")
        start = getattr(config, "start_at", None)
        self.start = 0 if start is None else micros(start, "start_at")
        self.gap = 0

    def bounds(self, state: list[Any], window: int) -> tuple[int, int]:
        """A window's start and end (a session's: first and last time)."""
        if self.session:
            first, last = state[_SESSIONS][window]
            return first, last
        open_time = self.start + window * self.offset
        return open_time, open_time + self.length

    def next_close(self, state: list[Any]) -> float:
        """The watermark at which the key's first open window closes (inf: none open)."""
        accs = state[_ACCS]
        if not accs:
            return _NEVER
        if self.session:
            # closes once the watermark is more than gap past its last time
            last: int = min(last for _, last in state[_SESSIONS].values())
            return last + self.gap + 1
        first: int = min(accs)
        return self.start + first * self.offset + self.length

    def due(self, state: list[Any], watermark: float) -> list[int]:
        """The windows the watermark closes, in order of their ends (then ids)."""
        accs = state[_ACCS]
        if not accs:
            return []
        if self.session:
            sessions = state[_SESSIONS]
            limit = watermark - self.gap
            closing = [w for w, (_, last) in sessions.items() if last < limit]
            closing.sort(key=lambda w: (sessions[w][1], w))
            return closing
        # window w ends at start + w * offset + length <= watermark
        if watermark == _NEVER:
            return sorted(accs)
        last = (int(watermark) - self.start - self.length) // self.offset
        return sorted(w for w in accs if w <= last)


def _no_builder() -> Any:
    raise AssertionError("only fold_window's steps have a builder")


def _no_time(value: Any) -> Any:
    raise AssertionError("only an event clock reads times from values")


def window_step(
    stream: Stream[Any], step_id: str, spec: WindowSpec, state: StepState
) -> Stream[Any]:
    """A windowing step: per-key clocks and windows; see the module documentation."""
    clock, windows = spec.clock, _Windows(spec.windower)
    states = state.states
    add, merge, finish = spec.add, spec.merge, spec.finish
    # fold_window's builder and folder, called directly (one call per value, not two)
    builder: Callable[[], Any] = _no_builder
    fold: Callable[[Any, Any], Any] | None = None
    if spec.fold is not None:
        builder, fold = spec.fold
    late_out, window_meta = spec.late, spec.window_meta
    now_us = clock.now_micros()
    event = isinstance(clock, EventClockConfig)
    dt_getter: Callable[[Any], Any] = (
        clock.dt_getter if isinstance(clock, EventClockConfig) else _no_time
    )
    wait = (
        span_micros(clock.wait_for_system_duration, "wait", zero_ok=True)
        if isinstance(clock, EventClockConfig)
        else 0
    )
    session = windows.session
    tumbling = not session and windows.offset == windows.length
    start, length, offset = windows.start, windows.length, windows.offset
    due, next_close, bounds = windows.due, windows.next_close, windows.bounds
    gap = windows.gap
    where = f"step {step_id!r}"

    def watermark(key_state: list[Any], now: int) -> float:
        if not event:
            return now
        clock_state = key_state[_CLOCK]
        if clock_state is None:
            return -_NEVER
        base: int
        seen_at: int
        base, seen_at = clock_state
        return base + (now - seen_at)

    def closes_at(key_state: list[Any]) -> float:
        """The key's cached next close watermark (recomputed when stale)."""
        closes = key_state[_CLOSES]
        if closes is None:
            closes = key_state[_CLOSES] = next_close(key_state)
        result: float = closes
        return result

    def system_deadline(key_state: list[Any], now: int) -> float:
        """The system time at which the key's first open window closes."""
        close = closes_at(key_state)
        if close == _NEVER:
            return _NEVER
        if not event:
            return close
        clock_state = key_state[_CLOCK]
        if clock_state is None:
            return _NEVER
        base: int
        seen_at: int
        base, seen_at = clock_state
        return seen_at + (close - base)

    def insert(key_state: list[Any], t: int, value: Any) -> None:
        """A value at ``t`` into a key's sessions: the general case (none or several near)."""
        accs = key_state[_ACCS]
        sessions = key_state[_SESSIONS]
        near = [w for w, span in sessions.items() if span[0] - gap <= t <= span[1] + gap]
        if not near:
            w = key_state[_NEXT]
            key_state[_NEXT] = w + 1
            sessions[w] = [t, t]
            accs[w] = add(NO_ACC, value)
            closes = key_state[_CLOSES]
            if closes is not None and t + gap + 1 < closes:
                key_state[_CLOSES] = t + gap + 1
            return
        key_state[_CLOSES] = None  # sessions grow or merge: recompute after the batch
        if len(near) > 1:
            if merge is None:
                raise FlowError(
                    f"{where}: a value joins {len(near)} sessions into one, and fold_window "
                    "needs a merger(acc, acc) to combine their accumulators: pass merger="
                )
            near.sort(key=lambda w: (sessions[w][0], w))
            into = near[0]
            for other in near[1:]:
                first, last = sessions.pop(other)
                bounds_into = sessions[into]
                bounds_into[0] = min(bounds_into[0], first)
                bounds_into[1] = max(bounds_into[1], last)
                accs[into] = merge(accs[into], accs.pop(other))
            w = into
        else:
            w = near[0]
        span = sessions[w]
        if t < span[0]:
            span[0] = t
        elif t > span[1]:
            span[1] = t
        accs[w] = fold(accs[w], value) if fold is not None else add(accs[w], value)

    metas: dict[int, WindowMetadata] = {}

    def close(key: str, key_state: list[Any], mark: float, out: list[Any]) -> None:
        if mark < closes_at(key_state):
            return
        closing = due(key_state, mark)
        key_state[_CLOSES] = None  # some windows close: recompute
        if not closing:
            return
        accs = key_state[_ACCS]
        sessions = key_state[_SESSIONS]
        for w in closing:
            acc = accs.pop(w)
            try:
                result = finish(acc)
            except Exception as exc:
                exc.add_note(f"in {where}: finishing the window of key {key!r} raised")
                raise
            if window_meta:
                meta = None if session else metas.get(w)
                if meta is None:
                    first, last = bounds(key_state, w)
                    meta = WindowMetadata(from_micros(first), from_micros(last))
                    if not session:
                        # every key closes the same windows: make each one's metadata once
                        if len(metas) >= 4096:
                            metas.clear()
                        metas[w] = meta
                out.append((key, (meta, result)))
            else:
                out.append((key, result))
            if session:
                del sessions[w]

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        eager = EagerNotificator()
        held: list[Capability] = [cap.retain()]
        deadlines: list[tuple[float, str]] = []  # (system time, key), a heap
        scheduled: dict[str, float] = {}
        last_logged = [-LATE_LOG_SECONDS]
        latest = [0]  # the largest epoch this step has seen items at, on this worker
        armed = [_NEVER]  # the system time the worker's timer for this step is set for
        worker = info.worker_index

        def arm(now: int) -> None:
            if now >= armed[0]:
                armed[0] = _NEVER  # that timer fired
            if deadlines and deadlines[0][0] < armed[0]:
                armed[0] = deadlines[0][0]
                info.activate_after(max(0.0, (deadlines[0][0] - now) / 1_000_000))

        def schedule(key: str, key_state: list[Any], now: int) -> None:
            deadline = system_deadline(key_state, now)
            if deadline == _NEVER:
                scheduled.pop(key, None)
                return
            if scheduled.get(key, _NEVER) > deadline:
                scheduled[key] = deadline
                heapq.heappush(deadlines, (deadline, key))
                compact()

        def compact() -> None:
            if len(deadlines) > 4 * len(scheduled) + 4096:
                # drop the entries that an earlier deadline for the same key made stale
                deadlines[:] = [(d, k) for k, d in scheduled.items()]
                heapq.heapify(deadlines)

        def note_late(epoch: int, items: list[tuple[str, Any]]) -> None:
            state.late += len(items)
            if late_out is not None:
                item: Any = None
                try:
                    for item in items:
                        late_out(epoch, item)
                except Exception as exc:
                    exc.add_note(f"in {where}: its late output raised on {item!r}")
                    raise
            wall = time.monotonic()
            if wall - last_logged[0] >= LATE_LOG_SECONDS:
                # a warning unless the step has an output for them (then they are not lost)
                log.log(
                    logging.WARNING if late_out is None else logging.INFO,
                    "%s on worker %d: %d late value(s) so far (older than their key's "
                    "watermark)%s",
                    where, worker, state.late,
                    "" if late_out is not None else "; give the step late= to keep them",
                )
                last_logged[0] = wall

        def run_items(cap: Capability, items: list[Any]) -> None:
            epoch = cap.time
            # locals, not globals, in the per-value loop; state slots by number:
            # 0 clock, 1 accumulators, 2 sessions, 3 next session id, 4 next close
            datetime_type, epoch_zero, one_us = datetime.datetime, UTC_EPOCH, _US
            if epoch > latest[0]:
                latest[0] = epoch
            now = now_us()
            touched: dict[str, list[Any]] = {}
            late_items: list[tuple[str, Any]] = []
            get = states.get
            key: Any = None
            value: Any = None
            reading = False
            try:
                for key, value in items:
                    key_state = touched.get(key)
                    if key_state is None:
                        key_state = get(key)
                        if key_state is None:
                            key_state = states[key] = [
                                None, {}, {} if session else None, 0, _NEVER
                            ]
                        touched[key] = key_state
                    if event:
                        reading = True
                        at = dt_getter(value)
                        reading = False
                        if type(at) is not datetime_type or at.tzinfo is None:
                            try:
                                micros(at, f"dt_getter({value!r})")  # raises the clear error
                            except FlowError as exc:
                                raise FlowError(
                                    f"{where} on worker {worker}, epoch {epoch}: {exc}"
                                ) from None
                        t = (at - epoch_zero) // one_us
                        clock_state = key_state[0]
                        candidate = t - wait
                        if clock_state is None:
                            key_state[0] = [candidate, now]
                            mark = candidate
                        else:
                            mark = clock_state[0] + (now - clock_state[1])
                            if candidate > mark:
                                clock_state[0], clock_state[1] = candidate, now
                                mark = candidate
                        if t < mark:
                            late_items.append((key, value))
                            continue
                    else:
                        t = now  # the system clock: nothing is late
                    if tumbling:
                        # insert() inlined for the commonest windower: one window per time
                        w = (t - start) // length
                        accs = key_state[1]
                        if fold is not None:
                            acc = accs.get(w, NO_ACC)
                            accs[w] = fold(builder() if acc is NO_ACC else acc, value)
                        else:
                            accs[w] = add(accs.get(w, NO_ACC), value)
                        end = start + w * length + length
                        closes = key_state[4]
                        if closes is not None and end < closes:
                            key_state[4] = end
                    elif not session:
                        # sliding: every window containing t, inlined like tumbling's
                        since = t - start
                        accs = key_state[1]
                        closes = key_state[4]
                        for w in range((since - length) // offset + 1, since // offset + 1):
                            if fold is not None:
                                acc = accs.get(w, NO_ACC)
                                accs[w] = fold(builder() if acc is NO_ACC else acc, value)
                            else:
                                accs[w] = add(accs.get(w, NO_ACC), value)
                            end = start + w * offset + length
                            if closes is not None and end < closes:
                                key_state[4] = closes = end
                    else:
                        sessions = key_state[2]
                        count = len(sessions)
                        if count == 1:
                            # sessions' common case inlined: the key's one open session
                            ((w, span),) = sessions.items()
                            if span[0] - gap <= t <= span[1] + gap:
                                if t < span[0]:
                                    span[0] = t
                                elif t > span[1]:
                                    span[1] = t
                                accs = key_state[1]
                                accs[w] = (
                                    fold(accs[w], value) if fold is not None
                                    else add(accs[w], value)
                                )
                                key_state[4] = span[1] + gap + 1
                                continue
                        elif count == 0:
                            w = key_state[3]
                            key_state[3] = w + 1
                            sessions[w] = [t, t]
                            key_state[1][w] = (
                                fold(builder(), value) if fold is not None
                                else add(NO_ACC, value)
                            )
                            key_state[4] = t + gap + 1
                            continue
                        else:
                            # several open sessions: join the one near t inline, unless t
                            # is near none (a new session) or several (a merge: insert())
                            found = None
                            for w, span in sessions.items():
                                if span[0] - gap <= t <= span[1] + gap:
                                    if found is not None:
                                        found = None
                                        break
                                    found = (w, span)
                            else:
                                if found is not None:
                                    w, span = found
                                    was = span[1] + gap + 1
                                    if t < span[0]:
                                        span[0] = t
                                    elif t > span[1]:
                                        span[1] = t
                                    accs = key_state[1]
                                    accs[w] = (
                                        fold(accs[w], value) if fold is not None
                                        else add(accs[w], value)
                                    )
                                    if key_state[4] == was:  # it was the first to close
                                        key_state[4] = None
                                    continue
                        insert(key_state, t, value)
            except FlowError:
                raise
            except Exception as exc:
                if reading:
                    exc.add_note(f"in {where}: dt_getter raised on {value!r} at epoch {epoch}")
                else:
                    exc.add_note(f"in {where}: raised on key {key!r} at epoch {epoch}")
                raise
            if late_items:
                note_late(epoch, late_items)
            out: list[Any] = []
            # Per key touched: one comparison unless a window is due (schedule() inlined).
            scheduled_get, push = scheduled.get, heapq.heappush
            for key, key_state in touched.items():
                closes = key_state[_CLOSES]
                if closes is None:
                    closes = key_state[_CLOSES] = next_close(key_state)
                clock_state = key_state[_CLOCK]
                if event:
                    mark = clock_state[0] + (now - clock_state[1])
                else:
                    mark = now
                if mark >= closes:
                    close(key, key_state, mark, out)
                    closes = closes_at(key_state)
                if closes == _NEVER:
                    continue
                deadline = clock_state[1] + (closes - clock_state[0]) if event else closes
                if scheduled_get(key, _NEVER) > deadline:
                    scheduled[key] = deadline
                    push(deadlines, (deadline, key))
            compact()
            state.touch_keys(epoch, touched)
            if out:
                output.give_batch(cap, out)
            arm(now)

        output: OperatorOutput[Any]

        # Keys reloaded by recovery: their windows close on time too (a system clock
        # that resumes past a window's end closes it at once, seed 003).
        started = now_us()
        for key, key_state in states.items():
            if len(key_state) < 5:
                key_state.append(None)  # a snapshot without the cached close
            schedule(key, key_state, started)
        if deadlines:
            info.activate()

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            nonlocal output
            output = out
            for cap, items in inp:
                eager.notify_at(cap.retain(), items)
            eager.for_each([inp.frontier], run_items, lambda cap: state.close_epoch(cap.time))
            if not held:
                return
            frontier = list(inp.frontier)
            hold = held[0]
            if not frontier:
                # The input ended: every window closes, at the last epoch seen.
                if hold.time < latest[0]:
                    hold.downgrade(latest[0])
                results: list[Any] = []
                for key, key_state in states.items():
                    if key_state[_ACCS]:
                        close(key, key_state, _NEVER, results)
                        state.touch_keys(hold.time, (key,))
                if results:
                    out.give_batch(hold, results)
                state.close_epoch(hold.time)
                held.clear()
                hold.drop()
                deadlines.clear()
                scheduled.clear()
                return
            low = min(frontier)
            if hold.time < low:
                hold.downgrade(low)
            if deadlines:
                now = now_us()
                results = []
                while deadlines and deadlines[0][0] <= now:
                    _, key = heapq.heappop(deadlines)
                    if scheduled.get(key) is None:
                        continue
                    del scheduled[key]
                    key_state = states.get(key)
                    if key_state is None:
                        continue
                    close(key, key_state, watermark(key_state, now), results)
                    schedule(key, key_state, now)
                    state.touch_keys(hold.time, (key,))
                if results:
                    out.give_batch(hold, results)
                arm(now)

        return logic

    return stream.unary_frontier(Exchange(route_by_key), step_id, constructor)


