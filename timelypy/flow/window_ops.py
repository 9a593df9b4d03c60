"""The epoch chain's windowing steps: per-key clocks, windows and accumulators.

:func:`window_step` adds one runtime operator for a ``reduce_window``,
``fold_window``, ``collect_window`` or ``count_window`` step, written on the
public operator API like :mod:`timelypy.flow.steps`: items routed by state
key, applied in epoch order with the eager notificator, windows closed
after each batch of a key, when a worker timer (``activate_after``) says
the system time has come, and when the input ends.  The semantics are
:mod:`timelypy.flow.window`'s.

Three parts, each testable alone:

* :class:`KeyState`: one key's clock (its *lag*: the key's watermark is
  the system time minus it) and open windows, in microseconds;
* :class:`WindowStepLogic`: what the step does to keys, the same on every
  worker: put a batch's values into their keys' windows
  (:meth:`~WindowStepLogic.apply`), close what a watermark passes
  (:meth:`~WindowStepLogic.close`), join sessions a value bridges;
* :class:`WorkerWindows`: one worker's part of the step: its keys, their
  timers, the keys it forgot (a key with no open window is dropped, its
  lag kept in a bounded table so that a value for an emitted window is
  still late), late values, and the operator's capabilities.
"""

from __future__ import annotations

import datetime
import heapq
import logging
import time
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.notificator import EagerNotificator
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError
from timelypy.flow._ends import InputEnd, with_input_end_outputs
from timelypy.flow._windows import TOMBSTONES, remember
from timelypy.flow.state import NO_ACC, StepState
from timelypy.flow.steps import keyed_exchange
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

__all__ = ["window_step", "LATE_LOG_SECONDS", "KeyState", "WindowStepLogic", "WorkerWindows"]

log = logging.getLogger("timelypy.flow")

#: Seconds between a worker's warnings about one step's late values.
LATE_LOG_SECONDS = 10.0
_NEVER = float("inf")
_US = datetime.timedelta(microseconds=1)
timedelta = datetime.timedelta


class KeyState:
    """One key's clock and open windows (microseconds since 1970-01-01 UTC)."""

    __slots__ = ("closes", "lag", "next_session", "open")

    def __init__(self, lag: float, session: bool) -> None:
        #: the key's watermark is the system time minus this (0 for the system clock; an
        #: event clock's is inf until the key's first value, then the system time at
        #: which its latest time came, minus that time, plus the wait)
        self.lag = lag
        #: the open windows: accumulators by window ID; for sessions a list of
        #: ``[first time, last time, accumulator, session ID]`` (usually one)
        self.open: Any = [] if session else {}
        #: the ID the key's next session gets
        self.next_session = 0
        #: the watermark at which its first open window closes (inf: none open; None:
        #: to recompute), so that a batch checks each key it touched with one comparison
        self.closes: float | None = _NEVER

    def watermark(self, now: float) -> float:
        """The key's watermark at system time ``now``."""
        return now - self.lag

    @classmethod
    def restored(cls, snapshot: Any, session: bool) -> KeyState:
        """A snapshot as it was stored: a KeyState, or the list of earlier versions."""
        if isinstance(snapshot, KeyState):
            return snapshot
        state = cls(snapshot[0], session)
        state.open, state.next_session, state.closes = snapshot[1], snapshot[3], None
        return state

    def __repr__(self) -> str:
        return f"KeyState(lag={self.lag!r}, open={self.open!r}, closes={self.closes!r})"


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

    def next_close(self, state: KeyState) -> float:
        """The watermark at which the key's first open window closes (inf: none open)."""
        accs = state.open
        if not accs:
            return _NEVER
        if self.session:
            # a session closes once the watermark is more than gap past its last time
            last: int = min([span[1] for span in accs])
            return last + self.gap + 1
        first: int = min(accs)
        return self.start + first * self.offset + self.length

    def due(self, state: KeyState, watermark: float) -> list[int]:
        """The (tumbling or sliding) windows the watermark closes, in order of their ends."""
        accs = state.open
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


class WindowStepLogic:
    """What a window step does to its keys, the same on every worker."""

    def __init__(self, spec: WindowSpec, step_id: str) -> None:
        clock = spec.clock
        self.windows = windows = _Windows(spec.windower)
        self.add, self.merge, self.finish = spec.add, spec.merge, spec.finish
        # fold_window's builder and folder, called directly (one call per value, not two)
        self.builder: Callable[[], Any] = _no_builder
        self.fold: Callable[[Any, Any], Any] | None = None
        if spec.fold is not None:
            self.builder, self.fold = spec.fold
        self.late_out, self.window_meta = spec.late, spec.window_meta
        self.now_us = clock.now_micros()
        self.event = isinstance(clock, EventClockConfig)
        self.dt_getter: Callable[[Any], Any] = (
            clock.dt_getter if isinstance(clock, EventClockConfig) else _no_time
        )
        self.wait = (
            span_micros(clock.wait_for_system_duration, "wait", zero_ok=True)
            if isinstance(clock, EventClockConfig)
            else 0
        )
        self.session = windows.session
        self.tumbling = not windows.session and windows.offset == windows.length
        self.where = f"step {step_id!r}"
        #: tumbling and sliding windows' metadata (every key closes the same windows)
        self.metas: dict[int, WindowMetadata] = {}

    def new_key(self, lag: float | None = None) -> KeyState:
        """A key's state before its first value (``lag``: a forgotten key's)."""
        if lag is None:
            lag = _NEVER if self.event else 0
        return KeyState(lag, self.session)

    def closes_at(self, key_state: KeyState) -> float:
        """The key's cached next close watermark (recomputed when stale)."""
        closes = key_state.closes
        if closes is None:
            closes = key_state.closes = self.windows.next_close(key_state)
        return closes

    def deadline(self, key_state: KeyState) -> float:
        """The system time at which the key's first open window closes (inf: never)."""
        return self.closes_at(key_state) + key_state.lag

    def apply(
        self,
        states: dict[str, KeyState],
        tombstones: dict[str, float],
        items: list[Any],
        now: int,
        epoch: int,
        worker: int,
    ) -> tuple[dict[str, KeyState], list[tuple[str, Any]]]:
        """Put a batch's ``(key, value)`` items into their keys' windows at system time ``now``.

        Returns the keys touched and the late items.  (The per-value loop
        inlines the common cases: this is where a window step spends its
        time.)
        """
        # locals, not attributes, in the per-value loop
        datetime_type, epoch_zero, one_us = datetime.datetime, UTC_EPOCH, _US
        event, dt_getter, session, tumbling = (
            self.event,
            self.dt_getter,
            self.session,
            self.tumbling,
        )
        fold, add, builder = self.fold, self.add, self.builder
        windows = self.windows
        start, length, offset = windows.start, windows.length, windows.offset
        now_wait = now + self.wait
        lag0 = _NEVER if event else 0
        touched: dict[str, KeyState] = {}
        late_items: list[tuple[str, Any]] = []
        get = states.get
        key: Any = None
        value: Any = None
        reading = False
        where = self.where
        try:
            for key, value in items:
                key_state = touched.get(key)
                if key_state is None:
                    key_state = get(key)
                    if key_state is None:
                        lag = tombstones.pop(key, lag0) if tombstones else lag0
                        key_state = states[key] = KeyState(lag, session)
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
                    lag = key_state.lag
                    if now_wait - t < lag:
                        key_state.lag = now_wait - t  # not late: t - wait > watermark
                    elif t < now - lag:
                        late_items.append((key, value))
                        continue
                else:
                    t = now  # the system clock: nothing is late
                if session:
                    self._add_to_session(key_state, t, value)
                elif tumbling:
                    # tumbling: the one window containing t
                    w = (t - start) // length
                    accs = key_state.open
                    if fold is not None:
                        acc = accs.get(w, NO_ACC)
                        accs[w] = fold(builder() if acc is NO_ACC else acc, value)
                    else:
                        accs[w] = add(accs.get(w, NO_ACC), value)
                    end = start + w * length + length
                    closes = key_state.closes
                    if closes is not None and end < closes:
                        key_state.closes = end
                else:
                    # sliding: every window containing t, inlined like tumbling's
                    since = t - start
                    accs = key_state.open
                    closes = key_state.closes
                    for w in range((since - length) // offset + 1, since // offset + 1):
                        if fold is not None:
                            acc = accs.get(w, NO_ACC)
                            accs[w] = fold(builder() if acc is NO_ACC else acc, value)
                        else:
                            accs[w] = add(accs.get(w, NO_ACC), value)
                        end = start + w * offset + length
                        if closes is not None and end < closes:
                            key_state.closes = closes = end
        except FlowError:
            raise
        except Exception as exc:
            if reading:
                exc.add_note(f"in {where}: dt_getter raised on {value!r} at epoch {epoch}")
            else:
                exc.add_note(f"in {where}: raised on key {key!r} at epoch {epoch}")
            raise
        return touched, late_items

    def _add_to_session(self, key_state: KeyState, t: int, value: Any) -> None:
        """A value at ``t`` joins the session near it, or bridges several, or starts one."""
        fold, add, gap = self.fold, self.add, self.windows.gap
        spans = key_state.open
        if len(spans) == 1:
            # the common case: the key's one open session
            span = spans[0]
            if span[0] - gap <= t <= span[1] + gap:
                if t < span[0]:
                    span[0] = t
                elif t > span[1]:
                    span[1] = t
                span[2] = fold(span[2], value) if fold is not None else add(span[2], value)
                key_state.closes = span[1] + gap + 1
                return
        elif spans:
            # several open sessions: join the one near t, unless t is near several
            # (join_sessions()) or none (a new session)
            found = None
            for span in spans:
                if span[0] - gap <= t <= span[1] + gap:
                    if found is not None:
                        found = False  # near two or more
                        break
                    found = span
            if found is False:
                self.join_sessions(key_state, t, value)
                return
            if found is not None:
                span = found
                was = span[1] + gap + 1
                if t < span[0]:
                    span[0] = t
                elif t > span[1]:
                    span[1] = t
                span[2] = fold(span[2], value) if fold is not None else add(span[2], value)
                if key_state.closes == was:  # it was the first to close
                    key_state.closes = None
                return
        # near no open session: a new one
        w = key_state.next_session
        key_state.next_session = w + 1
        first = fold(self.builder(), value) if fold is not None else add(NO_ACC, value)
        spans.append([t, t, first, w])
        closes = key_state.closes
        if closes is not None and t + gap + 1 < closes:
            key_state.closes = t + gap + 1

    def join_sessions(self, key_state: KeyState, t: int, value: Any) -> None:
        """A value at ``t`` near several of a key's sessions: they become one, then take it."""
        gap, merge, fold, add = self.windows.gap, self.merge, self.fold, self.add
        spans = key_state.open
        near = [span for span in spans if span[0] - gap <= t <= span[1] + gap]
        if merge is None:
            raise FlowError(
                f"{self.where}: a value joins {len(near)} sessions into one, and fold_window "
                "needs a merger(acc, acc) to combine their accumulators: pass merger="
            )
        near.sort(key=lambda span: (span[0], span[3]))  # into the first to start
        into, joined = near[0], near[1:]
        # by identity: == would compare the user's accumulators
        key_state.open = [span for span in spans if not any(span is j for j in joined)]
        for other in joined:
            into[0] = min(into[0], other[0])
            into[1] = max(into[1], other[1])
            into[2] = merge(into[2], other[2])
        if t < into[0]:
            into[0] = t
        elif t > into[1]:
            into[1] = t
        into[2] = fold(into[2], value) if fold is not None else add(into[2], value)
        key_state.closes = None  # recompute after the batch

    def close(self, key: str, key_state: KeyState, mark: float, out: list[Any]) -> None:
        """Close the key's windows that watermark ``mark`` passed; results into ``out``."""
        if mark < self.closes_at(key_state):
            return
        if self.session:
            self._close_sessions(key, key_state, mark, out)
            return
        accs = key_state.open
        key_state.closes = None  # some windows close: recompute
        for w in self.windows.due(key_state, mark):
            result = self._finish(key, accs.pop(w))
            if self.window_meta:
                out.append((key, (self._meta(w), result)))
            else:
                out.append((key, result))

    def _close_sessions(self, key: str, key_state: KeyState, mark: float, out: list[Any]) -> None:
        gap = self.windows.gap
        spans = key_state.open
        limit = mark - gap
        closing = [span for span in spans if span[1] < limit]
        if len(closing) > 1:
            closing.sort(key=lambda span: (span[1], span[3]))
        if closing:
            key_state.open = spans = [span for span in spans if span[1] >= limit]
        key_state.closes = min([span[1] for span in spans]) + gap + 1 if spans else _NEVER
        for first, last, acc, _ in closing:
            result = self._finish(key, acc)
            if self.window_meta:
                meta = WindowMetadata(
                    UTC_EPOCH + timedelta(0, 0, first), UTC_EPOCH + timedelta(0, 0, last)
                )
                out.append((key, (meta, result)))
            else:
                out.append((key, result))

    def _finish(self, key: str, acc: Any) -> Any:
        try:
            return self.finish(acc)
        except Exception as exc:
            exc.add_note(f"in {self.where}: finishing the window of key {key!r} raised")
            raise

    def _meta(self, window: int) -> WindowMetadata:
        metas = self.metas
        cached = metas.get(window)
        if cached is not None:
            return cached
        first, last = self.windows.bounds(window)
        meta = WindowMetadata(from_micros(first), from_micros(last))
        if len(metas) >= 4096:
            metas.clear()
        metas[window] = meta
        return meta


class WorkerWindows:
    """One worker's part of a window step: its keys, timers, forgotten keys and outputs.

    Called as the operator's logic, ``(input, output, [late output])``.
    """

    def __init__(
        self,
        logic: WindowStepLogic,
        state: StepState,
        cap: Capability,
        info: OperatorInfo,
        end: InputEnd,
        tombstones: int = TOMBSTONES,
    ) -> None:
        self.logic = logic
        self.state = state
        self.states: dict[str, Any] = state.states
        self.info = info
        self.end = end
        self.worker = info.worker_index
        self.eager = EagerNotificator()
        #: the capability timers and the end of input send at (at the input frontier)
        self.held: list[Capability] = [cap.retain()]
        self.deadlines: list[tuple[float, str]] = []  # (system time, key), a heap
        self.scheduled: dict[str, float] = {}
        #: forgotten keys' lags, oldest first (event clocks only: a system clock's
        #: watermark is the system time, the same for every key)
        self.tombstones: dict[str, float] = {}
        self.capacity = tombstones
        self.last_logged = -LATE_LOG_SECONDS
        #: the largest epoch this step has seen items at, on this worker
        self.latest = 0
        #: the system time the worker's timer for this step is set for
        self.armed = _NEVER
        self.output: OperatorOutput[Any] | None = None
        self.late_output: OperatorOutput[Any] | None = None
        #: epoch -> the capability its late items go out with (with a late stream)
        self.late_caps: dict[int, Capability] = {}
        # Keys reloaded by recovery: their windows close on time too (a system clock
        # that resumes past a window's end closes it at once).
        session = logic.session
        for key, snapshot in list(self.states.items()):
            key_state = self.states[key] = KeyState.restored(snapshot, session)
            self.schedule(key, key_state)
        if self.deadlines:
            info.activate()

    # -- keys' timers and lives ------------------------------------------------------

    def arm(self, now: int) -> None:
        """Ask the worker to wake the step at its first deadline."""
        deadlines = self.deadlines
        if now >= self.armed:
            self.armed = _NEVER  # that timer fired
        if deadlines and deadlines[0][0] < self.armed:
            self.armed = deadlines[0][0]
            self.info.activate_after(max(0.0, (deadlines[0][0] - now) / 1_000_000))

    def schedule(self, key: str, key_state: KeyState) -> None:
        """Wake the key when its first open window closes (on the system clock)."""
        deadline = self.logic.deadline(key_state)
        if deadline == _NEVER:
            self.scheduled.pop(key, None)
            return
        if self.scheduled.get(key, _NEVER) > deadline:
            self.scheduled[key] = deadline
            heapq.heappush(self.deadlines, (deadline, key))
            self.compact()

    def compact(self) -> None:
        """Drop the deadlines that an earlier one for the same key made stale."""
        deadlines = self.deadlines
        if len(deadlines) > 4 * len(self.scheduled) + 4096:
            deadlines[:] = [(d, k) for k, d in self.scheduled.items()]
            heapq.heapify(deadlines)

    def forget(self, key: str, key_state: KeyState) -> None:
        """The key has no open window: drop it, keep its lag (values before it stay late)."""
        del self.states[key]
        self.scheduled.pop(key, None)
        if self.logic.event:
            remember(self.tombstones, key, key_state.lag, self.capacity)

    def note_late(self, epoch: int, items: list[tuple[str, Any]]) -> None:
        """Count, log and hand on late items (to the late stream and ``late=``)."""
        state, where, late_out = self.state, self.logic.where, self.logic.late_out
        state.late += len(items)
        if self.late_output is not None:
            self.late_output.give_batch(self.late_caps[epoch], items)
        if late_out is not None:
            item: Any = None
            try:
                for item in items:
                    late_out(epoch, item)
            except Exception as exc:
                exc.add_note(f"in {where}: its late output raised on {item!r}")
                raise
        wall = time.monotonic()
        if wall - self.last_logged >= LATE_LOG_SECONDS:
            # a warning unless the step has an output for them (then they are not lost)
            kept = late_out is not None or self.late_output is not None
            log.log(
                logging.INFO if kept else logging.WARNING,
                "%s on worker %d: %d late value(s) so far (older than their key's watermark)%s",
                where,
                self.worker,
                state.late,
                "" if kept else "; give the step late= or read its late stream to keep them",
            )
            self.last_logged = wall

    # -- the operator -------------------------------------------------------------

    def run_items(self, cap: Capability, items: list[Any]) -> None:
        """Apply one epoch's batch; close what it closes; wake its keys in time."""
        epoch = cap.time
        if epoch > self.latest:
            self.latest = epoch
        logic = self.logic
        now = logic.now_us()
        touched, late_items = logic.apply(
            self.states, self.tombstones, items, now, epoch, self.worker
        )
        if late_items:
            self.note_late(epoch, late_items)
        out: list[Any] = []
        # Per key touched: one comparison unless a window is due (schedule() inlined).
        # Its watermark is now - lag, the system time at which its first open
        # window closes closes + lag.
        scheduled, deadlines = self.scheduled, self.deadlines
        scheduled_get, push, next_close = scheduled.get, heapq.heappush, logic.windows.next_close
        for key, key_state in touched.items():
            closes = key_state.closes
            if closes is None:
                closes = key_state.closes = next_close(key_state)
            lag = key_state.lag
            if now - lag >= closes:
                logic.close(key, key_state, now - lag, out)
                if not key_state.open:
                    self.forget(key, key_state)
                    continue
                closes = logic.closes_at(key_state)
            if closes + lag < scheduled_get(key, _NEVER):
                scheduled[key] = closes + lag
                push(deadlines, (closes + lag, key))
        self.compact()
        self.state.touch_keys(epoch, touched)
        if out:
            assert self.output is not None
            self.output.give_batch(cap, out)
        self.arm(now)

    def closed(self, cap: Capability) -> None:
        """An epoch closed: snapshot what it changed, drop its late items' capability."""
        self.state.close_epoch(cap.time)
        late_cap = self.late_caps.pop(cap.time, None)
        if late_cap is not None:
            late_cap.drop()

    def __call__(self, inp: OperatorInput[Any], out: OperatorOutput[Any], *late: Any) -> None:
        """The operator's logic: queue and apply batches, close on timers and at the end."""
        self.output = out
        eager, late_caps = self.eager, self.late_caps
        if late:
            self.late_output = late[0]
            for cap, items in inp:
                if cap.time not in late_caps:
                    late_caps[cap.time] = cap.retain(1)
                eager.notify_at(cap.retain(), items)
        else:
            for cap, items in inp:
                eager.notify_at(cap.retain(), items)
        eager.for_each([inp.frontier], self.run_items, self.closed)
        if not self.held:
            return
        frontier = list(inp.frontier)
        if not frontier:
            if self.end.reached():  # else other readers have not said where they ended yet
                self.end_of_input(out)
            return
        hold = self.held[0]
        low = min(frontier)
        if hold.time < low:
            hold.downgrade(low)
        if self.deadlines:
            self.on_timers(out, hold)

    def on_timers(self, out: OperatorOutput[Any], hold: Capability) -> None:
        """Close the windows whose keys' deadlines passed on the system clock."""
        logic, states, scheduled, deadlines = (
            self.logic,
            self.states,
            self.scheduled,
            self.deadlines,
        )
        now = logic.now_us()
        results: list[Any] = []
        while deadlines and deadlines[0][0] <= now:
            _, key = heapq.heappop(deadlines)
            if scheduled.get(key) is None:
                continue
            del scheduled[key]
            key_state = states.get(key)
            if key_state is None:
                continue
            logic.close(key, key_state, key_state.watermark(now), results)
            self.state.touch_keys(hold.time, (key,))
            if not key_state.open:
                self.forget(key, key_state)
            else:
                self.schedule(key, key_state)
        if results:
            out.give_batch(hold, results)
        self.arm(now)

    def end_of_input(self, out: OperatorOutput[Any]) -> None:
        """The input ended: every window closes, at the input's last epoch.

        That epoch is the same on any number of workers (the readers say
        where they ended), or the last this worker saw if later.
        """
        hold = self.held[0]
        final = self.end.epoch(max(hold.time, self.latest))
        if hold.time < final:
            hold.downgrade(final)
        results: list[Any] = []
        logic, states = self.logic, self.states
        for key, key_state in states.items():
            if key_state.open:
                logic.close(key, key_state, _NEVER, results)
                self.state.touch_keys(hold.time, (key,))
            # (the keys stay, with their clocks: a next execution may continue them)
        if results:
            out.give_batch(hold, results)
        self.state.close_epoch(hold.time)
        self.held.clear()
        hold.drop()
        self.deadlines.clear()
        self.scheduled.clear()


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
    logic = WindowStepLogic(spec, step_id)

    def constructor(cap: Capability, info: OperatorInfo, end: InputEnd) -> Callable[..., None]:
        return WorkerWindows(logic, state, cap, info, end)

    streams = with_input_end_outputs(
        stream, keyed_exchange(), step_id, ends, constructor, 2 if late_stream else 1
    )
    return streams[0], streams[1] if late_stream else None
