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
from timelypy.flow._ends import InputEnd, with_input_end_outputs
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
timedelta = datetime.timedelta

# -- the operator ------------------------------------------------------------------

# A key's state, a list (cheap to pickle, mutated in place):
#   [0] the clock's lag: the key's watermark is the system time minus it (0 for the
#       system clock; an event clock's is inf until the key's first value, then
#       the system time at which its latest time came minus that time, plus the wait)
#   [1] the open windows: accumulators by window id; for sessions a list of
#       [first time, last time, accumulator, session id] (usually one)
#   [2] unused (None)
#   [3] the next session id
#   [4] the watermark at which its first open window closes (inf: none open; None: to
#       recompute), so that a batch checks each key it touched with one comparison
_CLOCK, _OPEN, _CLOSES = 0, 1, 4  # slot 3, the next session id, is read in place


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

    def bounds(self, window: int) -> tuple[int, int]:
        """A (tumbling or sliding) window's start and end."""
        open_time = self.start + window * self.offset
        return open_time, open_time + self.length

    def next_close(self, state: list[Any]) -> float:
        """The watermark at which the key's first open window closes (inf: none open)."""
        accs = state[_OPEN]
        if not accs:
            return _NEVER
        if self.session:
            # a session closes once the watermark is more than gap past its last time
            last: int = min([span[1] for span in accs])
            return last + self.gap + 1
        first: int = min(accs)
        return self.start + first * self.offset + self.length

    def due(self, state: list[Any], watermark: float) -> list[int]:
        """The (tumbling or sliding) windows the watermark closes, in order of their ends."""
        accs = state[_OPEN]
        if not accs:
            return []
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
    stream: Stream[Any],
    step_id: str,
    spec: WindowSpec,
    state: StepState,
    ends: Stream[int] | None = None,
    late_stream: bool = False,
) -> tuple[Stream[Any], Stream[Any] | None]:
    """A windowing step: per-key clocks and windows; see the module documentation.

    Returns the step's output and, with ``late_stream``, the stream of its
    late ``(key, value)`` items (at the epochs they came in).
    """
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
        lag: float = key_state[_CLOCK]
        return now - lag

    def closes_at(key_state: list[Any]) -> float:
        """The key's cached next close watermark (recomputed when stale)."""
        closes = key_state[_CLOSES]
        if closes is None:
            closes = key_state[_CLOSES] = next_close(key_state)
        result: float = closes
        return result

    def system_deadline(key_state: list[Any], now: int) -> float:
        """The system time at which the key's first open window closes."""
        lag: float = key_state[_CLOCK]
        return closes_at(key_state) + lag  # inf when none is open or the clock has no time

    def join_sessions(key_state: list[Any], t: int, value: Any) -> None:
        """A value at ``t`` near several of a key's sessions: they become one, then take it."""
        spans = key_state[_OPEN]
        near = [span for span in spans if span[0] - gap <= t <= span[1] + gap]
        if merge is None:
            raise FlowError(
                f"{where}: a value joins {len(near)} sessions into one, and fold_window "
                "needs a merger(acc, acc) to combine their accumulators: pass merger="
            )
        near.sort(key=lambda span: (span[0], span[3]))  # into the first to start
        into, joined = near[0], near[1:]
        # by identity: == would compare the user's accumulators
        key_state[_OPEN] = [span for span in spans if not any(span is j for j in joined)]
        for other in joined:
            into[0] = min(into[0], other[0])
            into[1] = max(into[1], other[1])
            into[2] = merge(into[2], other[2])
        if t < into[0]:
            into[0] = t
        elif t > into[1]:
            into[1] = t
        into[2] = fold(into[2], value) if fold is not None else add(into[2], value)
        key_state[_CLOSES] = None  # recompute after the batch

    metas: dict[int, WindowMetadata] = {}

    def close(key: str, key_state: list[Any], mark: float, out: list[Any]) -> None:
        if mark < closes_at(key_state):
            return
        if session:
            spans = key_state[_OPEN]
            limit = mark - gap
            closing = [span for span in spans if span[1] < limit]
            if len(closing) > 1:
                closing.sort(key=lambda span: (span[1], span[3]))
            if closing:
                key_state[_OPEN] = spans = [span for span in spans if span[1] >= limit]
            key_state[_CLOSES] = min([span[1] for span in spans]) + gap + 1 if spans else _NEVER
            for first, last, acc, _ in closing:
                try:
                    result = finish(acc)
                except Exception as exc:
                    exc.add_note(f"in {where}: finishing the window of key {key!r} raised")
                    raise
                if window_meta:
                    meta = WindowMetadata(
                        UTC_EPOCH + timedelta(0, 0, first), UTC_EPOCH + timedelta(0, 0, last)
                    )
                    out.append((key, (meta, result)))
                else:
                    out.append((key, result))
            return
        accs = key_state[_OPEN]
        key_state[_CLOSES] = None  # some windows close: recompute
        for w in due(key_state, mark):
            acc = accs.pop(w)
            try:
                result = finish(acc)
            except Exception as exc:
                exc.add_note(f"in {where}: finishing the window of key {key!r} raised")
                raise
            if window_meta:
                cached = metas.get(w)
                if cached is not None:
                    meta = cached
                else:
                    # every key closes the same windows: make each one's metadata once
                    first, last = bounds(w)
                    meta = WindowMetadata(from_micros(first), from_micros(last))
                    if len(metas) >= 4096:
                        metas.clear()
                    metas[w] = meta
                out.append((key, (meta, result)))
            else:
                out.append((key, result))

    def constructor(cap: Capability, info: OperatorInfo, end: InputEnd) -> Callable[..., None]:
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
            if late_output is not None:
                late_output.give_batch(late_caps[epoch], items)
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
                    "%s on worker %d: %d late value(s) so far (older than their key's watermark)%s",
                    where,
                    worker,
                    state.late,
                    ""
                    if late_out is not None or late_output is not None
                    else "; give the step late= or read its late stream to keep them",
                )
                last_logged[0] = wall

        def run_items(cap: Capability, items: list[Any]) -> None:
            epoch = cap.time
            # locals, not globals, in the per-value loop; state slots by number:
            # 0 clock lag, 1 open windows, 3 next session id, 4 next close
            datetime_type, epoch_zero, one_us = datetime.datetime, UTC_EPOCH, _US
            if epoch > latest[0]:
                latest[0] = epoch
            now = now_us()
            now_wait = now + wait
            lag0 = _NEVER if event else 0
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
                            key_state = states[key] = [lag0, [] if session else {}, None, 0, _NEVER]
                        touched[key] = key_state
                    if event:
                        try:  # costs nothing unless it raises (Python 3.11)
                            at = dt_getter(value)
                        except Exception:
                            reading = True
                            raise
                        try:
                            if type(at) is not datetime_type:
                                raise TypeError  # a subclass or no datetime: micros() decides
                            # a naive datetime raises TypeError here
                            t = (at - epoch_zero) // one_us
                        except TypeError:
                            try:
                                t = micros(at, f"dt_getter({value!r})")  # or the clear error
                            except FlowError as exc:
                                raise FlowError(
                                    f"{where} on worker {worker}, epoch {epoch}: {exc}"
                                ) from None
                        # the key's watermark is now - lag; t - wait moves it on
                        lag = key_state[0]
                        if now_wait - t < lag:
                            key_state[0] = now_wait - t  # not late: t - wait > watermark
                        elif t < now - lag:
                            late_items.append((key, value))
                            continue
                    else:
                        t = now  # the system clock: nothing is late
                    if session:
                        spans = key_state[1]
                        if len(spans) == 1:
                            # sessions' common case inlined: the key's one open session
                            span = spans[0]
                            if span[0] - gap <= t <= span[1] + gap:
                                if t < span[0]:
                                    span[0] = t
                                elif t > span[1]:
                                    span[1] = t
                                span[2] = (
                                    fold(span[2], value)
                                    if fold is not None
                                    else add(span[2], value)
                                )
                                key_state[4] = span[1] + gap + 1
                                continue
                        elif spans:
                            # several open sessions: join the one near t inline, unless t
                            # is near several (join_sessions()) or none (a new session)
                            found = None
                            for span in spans:
                                if span[0] - gap <= t <= span[1] + gap:
                                    if found is not None:
                                        found = False  # near two or more
                                        break
                                    found = span
                            if found is False:
                                join_sessions(key_state, t, value)
                                continue
                            if found is not None:
                                span = found
                                was = span[1] + gap + 1
                                if t < span[0]:
                                    span[0] = t
                                elif t > span[1]:
                                    span[1] = t
                                span[2] = (
                                    fold(span[2], value)
                                    if fold is not None
                                    else add(span[2], value)
                                )
                                if key_state[4] == was:  # it was the first to close
                                    key_state[4] = None
                                continue
                        # near no open session: a new one
                        w = key_state[3]
                        key_state[3] = w + 1
                        spans.append(
                            [
                                t,
                                t,
                                fold(builder(), value) if fold is not None else add(NO_ACC, value),
                                w,
                            ]
                        )
                        closes = key_state[4]
                        if closes is not None and t + gap + 1 < closes:
                            key_state[4] = t + gap + 1
                    elif tumbling:
                        # tumbling: the one window containing t
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
                    else:
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
            # Its watermark is now - lag, the system time at which its first open
            # window closes closes + lag.
            scheduled_get, push = scheduled.get, heapq.heappush
            for key, key_state in touched.items():
                closes = key_state[4]
                if closes is None:
                    closes = key_state[4] = next_close(key_state)
                lag = key_state[0]
                if now - lag >= closes:
                    close(key, key_state, now - lag, out)
                    closes = closes_at(key_state)
                if closes + lag < scheduled_get(key, _NEVER):
                    scheduled[key] = closes + lag
                    push(deadlines, (closes + lag, key))
            compact()
            state.touch_keys(epoch, touched)
            if out:
                output.give_batch(cap, out)
            arm(now)

        output: OperatorOutput[Any]
        late_output: OperatorOutput[Any] | None = None
        # epoch -> the capability late items of that epoch go out with (with late_stream)
        late_caps: dict[int, Capability] = {}

        def closed(cap: Capability) -> None:
            state.close_epoch(cap.time)
            late_cap = late_caps.pop(cap.time, None)
            if late_cap is not None:
                late_cap.drop()

        # Keys reloaded by recovery: their windows close on time too (a system clock
        # that resumes past a window's end closes it at once, seed 003).
        started = now_us()
        for key, key_state in states.items():
            if len(key_state) < 5:
                key_state.append(None)  # a snapshot without the cached close
            schedule(key, key_state, started)
        if deadlines:
            info.activate()

        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any], *late: Any) -> None:
            nonlocal output, late_output
            output = out
            if late:
                late_output = late[0]
                for cap, items in inp:
                    if cap.time not in late_caps:
                        late_caps[cap.time] = cap.retain(1)
                    eager.notify_at(cap.retain(), items)
            else:
                for cap, items in inp:
                    eager.notify_at(cap.retain(), items)
            eager.for_each([inp.frontier], run_items, closed)
            if not held:
                return
            frontier = list(inp.frontier)
            hold = held[0]
            if not frontier:
                if not end.reached():
                    return  # other readers have not said where they ended yet
                # The input ended: every window closes, at the input's last epoch (the
                # same on any number of workers), or the last this worker saw.
                final = end.epoch(max(hold.time, latest[0]))
                if hold.time < final:
                    hold.downgrade(final)
                results: list[Any] = []
                for key, key_state in states.items():
                    if key_state[_OPEN]:
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

    streams = with_input_end_outputs(
        stream, Exchange(route_by_key), step_id, ends, constructor, 2 if late_stream else 1
    )
    return streams[0], streams[1] if late_stream else None
