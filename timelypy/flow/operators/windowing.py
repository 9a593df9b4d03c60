"""Windowing operators for the stream graph: clocks, windowers and window logic per key.

A windowing operator takes a :data:`~timelypy.flow.operators.KeyedStream`
and keeps, per state key:

1. a **clock** (:class:`Clock`): it gives each value its timestamp and the
   key's *watermark*, the time before which no more values are expected.
   :class:`SystemClock` uses the system time for both; :class:`EventClock`
   reads the timestamp from the value and lets the watermark trail the
   largest timestamp seen by ``wait_for_system_duration``, then advance with
   the system time while the key is idle;
2. a **windower** (:class:`Windower`): it puts a timestamp into windows,
   numbered by *window ID*: :class:`TumblingWindower`,
   :class:`SlidingWindower`, :class:`SessionWindower` (sessions that a value
   brings within the gap of each other merge);
3. a :class:`WindowLogic` per open window, which folds the window's values
   and says what to emit when it closes.

A value whose timestamp is before its key's watermark is **late**: it goes
to the ``late`` stream with the window IDs it would have joined, never
silently dropped. A window **closes** when the watermark passes its close
time: after a batch of the key's values, when the system time comes (the
operator asks its worker to wake it), and when the input ends. Each
operator returns :class:`WindowOut`: ``down`` (``(key, (window_id,
result))``), ``late`` (``(key, (window_id, value))``) and ``meta``
(``(key, (window_id, WindowMetadata))`` for each closed window).

With ``ordered=True`` (the default of ``fold_window`` and
``collect_window``) values wait until the watermark passes their timestamp
and are folded in timestamp order, so a fold that is not commutative gives
the same result whatever the arrival order; with ``ordered=False`` they
are folded as they arrive.

A key whose windows have all closed is forgotten, with its clock: its
state (and, once the epoch closes, its snapshot) is freed. What is kept is
its last watermark, in a bounded table per worker
(:data:`TOMBSTONES` keys): a later value for that key before that
watermark is late, so a window that was emitted is never opened again.

This is bytewax 0.21's ``bytewax.operators.windowing``, renamed:

>>> from datetime import datetime, timedelta, timezone
>>> import timelypy.flow.operators as op
>>> from timelypy.flow.dataflow import Dataflow
>>> from timelypy.flow.testing import TestingSource, run_to_list
>>> align = datetime(2024, 1, 1, tzinfo=timezone.utc)
>>> events = [("a", align + timedelta(seconds=s)) for s in (1, 2, 11, 12, 13)]
>>> flow = Dataflow("doc")
>>> keyed = op.input("inp", flow, TestingSource(events))
>>> clock = EventClock(lambda at: at, wait_for_system_duration=timedelta(0))
>>> counts = count_window("count", op.key_rm("rm", keyed), clock,
...                       TumblingWindower(timedelta(seconds=10), align), key=lambda at: "a")
>>> sorted(run_to_list(counts.down))
[('a', (0, 2)), ('a', (1, 3))]
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from timelypy.communication.codec import register_marked
from timelypy.errors import FlowError
from timelypy.flow._fast_windows import FastPlan, FastWindowsLogic, micros
from timelypy.flow._graph import BatchFn, KeyedSpec
from timelypy.flow._windows import TOMBSTONES, WindowsLogic
from timelypy.flow.dataflow import KeyedStream, Stream
from timelypy.flow.operators import (
    JoinEmitMode,
    JoinInsertMode,
    _batch_counts,
    _callable,
    _flow,
    _stateless,
    key_on,
)

__all__ = [
    "UTC_MAX",
    "UTC_MIN",
    "TOMBSTONES",
    "ClockLogic",
    "Clock",
    "SystemClock",
    "EventClock",
    "WindowMetadata",
    "WindowerLogic",
    "Windower",
    "TumblingWindower",
    "SlidingWindower",
    "SessionWindower",
    "WindowLogic",
    "WindowOut",
    "window",
    "fold_window",
    "reduce_window",
    "collect_window",
    "count_window",
    "max_window",
    "min_window",
    "join_window",
]

V = TypeVar("V")
W = TypeVar("W")
W_co = TypeVar("W_co", covariant=True)
S = TypeVar("S")
X = TypeVar("X")

UTC = datetime.UTC
#: The earliest aware datetime: the watermark before any value.
UTC_MIN = datetime.datetime.min.replace(tzinfo=UTC)
#: The latest aware datetime: the watermark at the end of the input.
UTC_MAX = datetime.datetime.max.replace(tzinfo=UTC)
_ZERO = datetime.timedelta(0)


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


def _identity(x: Any) -> Any:
    return x


def _aware(at: Any, what: str) -> datetime.datetime:
    if not isinstance(at, datetime.datetime) or at.tzinfo is None:
        raise FlowError(f"{what} must be an aware datetime (with a tzinfo), got {at!r}")
    return at


# -- clocks ------------------------------------------------------------------------


class ClockLogic(abc.ABC, Generic[V, S]):
    """A key's clock: timestamps of values and the key's watermark (see :class:`Clock`)."""

    @abc.abstractmethod
    def before_batch(self) -> None:
        """A batch of the key's values is about to be read (read the system time once)."""

    @abc.abstractmethod
    def on_item(self, value: V) -> tuple[datetime.datetime, datetime.datetime]:
        """``(timestamp of value, watermark)``; the watermark never goes back."""

    @abc.abstractmethod
    def on_notify(self) -> datetime.datetime:
        """The watermark now (called when the system time the key asked for has come)."""

    @abc.abstractmethod
    def on_eof(self) -> datetime.datetime:
        """The watermark at the end of the input (:data:`UTC_MAX` closes every window)."""

    @abc.abstractmethod
    def to_system_utc(self, timestamp: datetime.datetime) -> datetime.datetime | None:
        """The system time at which the watermark reaches ``timestamp`` (``None``: never)."""

    @abc.abstractmethod
    def snapshot(self) -> S:
        """The clock's state, for ``Clock.build(resume_state)``."""


class Clock(abc.ABC, Generic[V, S]):
    """How a windowing operator tells time; ``build`` makes one :class:`ClockLogic` per key."""

    @abc.abstractmethod
    def build(self, resume_state: S | None) -> ClockLogic[V, S]:
        """A key's clock, resumed from ``resume_state`` if given."""


class _SystemClockLogic(ClockLogic[Any, None]):
    __slots__ = ("_now", "now_getter")

    def __init__(self, now_getter: Callable[[], datetime.datetime]) -> None:
        self.now_getter = now_getter
        self._now = now_getter()

    def before_batch(self) -> None:
        self._now = self.now_getter()

    def on_item(self, value: Any) -> tuple[datetime.datetime, datetime.datetime]:
        return self._now, self._now

    def on_notify(self) -> datetime.datetime:
        self._now = self.now_getter()
        return self._now

    def on_eof(self) -> datetime.datetime:
        return UTC_MAX

    def to_system_utc(self, timestamp: datetime.datetime) -> datetime.datetime | None:
        return timestamp

    def snapshot(self) -> None:
        return None


@dataclasses.dataclass
class SystemClock(Clock[Any, None]):
    """Timestamps and watermark are the system time (UTC): no value is ever late."""

    def build(self, resume_state: None) -> ClockLogic[Any, None]:
        """A system clock."""
        return _SystemClockLogic(_utc_now)


@dataclasses.dataclass
class _EventClockState:
    """The largest timestamp seen, minus the wait, and the system time it was seen at."""

    system_time_of_max_event: datetime.datetime
    watermark_base: datetime.datetime


class _EventClockLogic(ClockLogic[V, _EventClockState]):
    __slots__ = ("_now", "clock", "state")

    def __init__(self, clock: EventClock[V], state: _EventClockState | None) -> None:
        self.clock = clock
        self._now = clock.now_getter()
        self.state = state or _EventClockState(self._now, UTC_MIN)

    def before_batch(self) -> None:
        now = self.clock.now_getter()
        if now > self._now:  # the system time never goes back here
            self._now = now

    def on_item(self, value: V) -> tuple[datetime.datetime, datetime.datetime]:
        clock, state = self.clock, self.state
        at = clock.ts_getter(value)
        try:
            watermark = state.watermark_base + (self._now - state.system_time_of_max_event)
        except OverflowError:
            watermark = UTC_MAX
        try:
            base = at - clock.wait_for_system_duration
            later = base > watermark
        except OverflowError:
            return at, watermark
        except TypeError:
            raise FlowError(
                f"the ts_getter of an EventClock must return an aware datetime (with a "
                f"tzinfo), got {at!r} for {value!r}"
            ) from None
        if later:
            state.watermark_base = base
            state.system_time_of_max_event = self._now
            return at, base
        return at, watermark

    def on_notify(self) -> datetime.datetime:
        self.before_batch()
        state = self.state
        try:
            return state.watermark_base + (self._now - state.system_time_of_max_event)
        except OverflowError:
            return UTC_MAX

    def on_eof(self) -> datetime.datetime:
        return UTC_MAX

    def to_system_utc(self, timestamp: datetime.datetime) -> datetime.datetime | None:
        return self.clock.to_system_utc(timestamp)

    def snapshot(self) -> _EventClockState:
        return copy.copy(self.state)


@dataclasses.dataclass
class EventClock(Clock[V, _EventClockState]):
    """Timestamps from the values (``ts_getter``, aware datetimes); a watermark that waits.

    The watermark is the largest timestamp seen minus
    ``wait_for_system_duration``, plus the system time passed since it was
    seen: values up to that much out of order are on time.
    ``now_getter`` is the "system" time (default: UTC now);
    ``to_system_utc`` maps a window's close time to the system time at
    which to wake up and close it (``None``: only values or the end of the
    input close it).

    ``aligned=True`` gives every key of the step one watermark that does
    not depend on how many workers read the input, as Flink's does: the
    smallest, over the workers sending values into the step, of the
    largest timestamp each has sent, minus the wait. It moves as epochs
    complete (the engine's frontier says when every worker's values of an
    epoch are in), not with the system time: a value of epoch ``e`` is late
    when it is before the watermark of the epochs before ``e``. A worker
    counts from the first epoch it sends a value in, and stops holding the
    watermark back when its input ends; a worker whose input has paused
    holds it back (Flink's idle sources). Each worker's values should be in
    time order up to the wait: give each worker one partition, or
    partitions that keep pace with each other.
    """

    ts_getter: Callable[[V], datetime.datetime]
    wait_for_system_duration: datetime.timedelta
    now_getter: Callable[[], datetime.datetime] = _utc_now
    to_system_utc: Callable[[datetime.datetime], datetime.datetime | None] = _identity
    aligned: bool = False

    def __post_init__(self) -> None:
        if not callable(self.ts_getter):
            raise FlowError(f"EventClock needs a callable ts_getter, got {self.ts_getter!r}")
        wait = self.wait_for_system_duration
        if not isinstance(wait, datetime.timedelta) or wait < _ZERO:
            raise FlowError(
                f"EventClock's wait_for_system_duration must be a timedelta >= 0, got {wait!r}"
            )
        if self.now_getter is not _utc_now:
            # a naive system time fails on the first comparison, days later: say so now
            if not callable(self.now_getter):
                raise FlowError(
                    f"EventClock's now_getter must be callable, got {self.now_getter!r}"
                )
            now = self.now_getter()
            if not isinstance(now, datetime.datetime) or now.tzinfo is None:
                raise FlowError(
                    f"EventClock's now_getter must return an aware datetime (with a tzinfo), "
                    f"got {now!r}"
                )

    def build(self, resume_state: _EventClockState | None) -> ClockLogic[V, _EventClockState]:
        """A key's event clock."""
        return _EventClockLogic(self, resume_state)


# -- windowers ---------------------------------------------------------------------


@dataclasses.dataclass
class WindowMetadata:
    """A window's open and close times; a session's IDs merged into it."""

    open_time: datetime.datetime
    close_time: datetime.datetime
    merged_ids: set[int] = dataclasses.field(default_factory=set)


register_marked(
    WindowMetadata,
    1,
    lambda meta: [meta.open_time, meta.close_time, sorted(meta.merged_ids)],
    lambda fields: WindowMetadata(fields[0], fields[1], set(fields[2])),
)


class WindowerLogic(abc.ABC, Generic[S]):
    """A key's windows: which a timestamp falls in, which merged, which closed."""

    @abc.abstractmethod
    def open_for(self, timestamp: datetime.datetime) -> Iterable[int]:
        """The IDs of the windows an on-time value at ``timestamp`` joins (opening them)."""

    @abc.abstractmethod
    def late_for(self, timestamp: datetime.datetime) -> Iterable[int]:
        """The IDs of the windows a late value at ``timestamp`` would have joined."""

    @abc.abstractmethod
    def merged(self) -> Iterable[tuple[int, int]]:
        """``(from_id, into_id)`` for every window merged into another since the last call."""

    @abc.abstractmethod
    def close_for(self, watermark: datetime.datetime) -> Iterable[tuple[int, WindowMetadata]]:
        """The windows that ``watermark`` closes (forgetting them), with their metadata."""

    @abc.abstractmethod
    def notify_at(self) -> datetime.datetime | None:
        """When the next window closes, or ``None``."""

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """Whether no window is open (the key can then be forgotten)."""

    @abc.abstractmethod
    def snapshot(self) -> S:
        """The windower's state, for ``Windower.build(resume_state)``."""


class Windower(abc.ABC, Generic[S]):
    """How timestamps are put into windows; ``build`` makes one :class:`WindowerLogic` per key."""

    @abc.abstractmethod
    def build(self, resume_state: S | None) -> WindowerLogic[S]:
        """A key's windower, resumed from ``resume_state`` if given."""


class _SlidingLogic(WindowerLogic[dict[int, WindowMetadata]]):
    __slots__ = ("align_to", "length", "offset", "opened")

    def __init__(
        self,
        length: datetime.timedelta,
        offset: datetime.timedelta,
        align_to: datetime.datetime,
        opened: dict[int, WindowMetadata] | None,
    ) -> None:
        self.length, self.offset, self.align_to = length, offset, align_to
        self.opened: dict[int, WindowMetadata] = opened if opened is not None else {}

    def _ids(self, timestamp: datetime.datetime) -> range:
        since = timestamp - self.align_to
        return range((since - self.length) // self.offset + 1, since // self.offset + 1)

    def open_for(self, timestamp: datetime.datetime) -> list[int]:
        ids = self._ids(timestamp)
        opened = self.opened
        for window_id in ids:
            if window_id not in opened:
                start = self.align_to + self.offset * window_id
                opened[window_id] = WindowMetadata(start, start + self.length)
        return list(ids)

    def late_for(self, timestamp: datetime.datetime) -> list[int]:
        return list(self._ids(timestamp))

    def merged(self) -> Iterable[tuple[int, int]]:
        return ()

    def close_for(self, watermark: datetime.datetime) -> list[tuple[int, WindowMetadata]]:
        opened = self.opened
        closed = [(wid, meta) for wid, meta in opened.items() if meta.close_time <= watermark]
        for wid, _ in closed:
            del opened[wid]
        return closed

    def notify_at(self) -> datetime.datetime | None:
        return min((meta.close_time for meta in self.opened.values()), default=None)

    def is_empty(self) -> bool:
        return not self.opened

    def snapshot(self) -> dict[int, WindowMetadata]:
        return copy.deepcopy(self.opened)


def _window_span(value: Any, what: str) -> datetime.timedelta:
    if not isinstance(value, datetime.timedelta) or value <= _ZERO:
        raise FlowError(f"{what} must be a positive timedelta, got {value!r}")
    return value


@dataclasses.dataclass
class SlidingWindower(Windower[dict[int, WindowMetadata]]):
    """Windows of ``length``, one starting every ``offset``, aligned to ``align_to``.

    Window ``i`` covers ``[align_to + i * offset, align_to + i * offset +
    length)``; ``offset`` may not exceed ``length`` (no gaps).
    """

    length: datetime.timedelta
    offset: datetime.timedelta
    align_to: datetime.datetime

    def __post_init__(self) -> None:
        _window_span(self.length, "SlidingWindower's length")
        _window_span(self.offset, "SlidingWindower's offset")
        _aware(self.align_to, "SlidingWindower's align_to")
        if self.offset > self.length:
            raise FlowError(
                "SlidingWindower's offset can't be longer than its length: there would be "
                "gaps between the windows"
            )

    def build(self, resume_state: dict[int, WindowMetadata] | None) -> WindowerLogic[Any]:
        """A key's sliding windows."""
        return _SlidingLogic(self.length, self.offset, self.align_to, resume_state)


@dataclasses.dataclass
class TumblingWindower(Windower[dict[int, WindowMetadata]]):
    """Back-to-back windows of ``length``, aligned to ``align_to``.

    Window ``i`` covers ``[align_to + i * length, align_to + (i + 1) * length)``.
    """

    length: datetime.timedelta
    align_to: datetime.datetime

    def __post_init__(self) -> None:
        _window_span(self.length, "TumblingWindower's length")
        _aware(self.align_to, "TumblingWindower's align_to")

    def build(self, resume_state: dict[int, WindowMetadata] | None) -> WindowerLogic[Any]:
        """A key's tumbling windows."""
        return _SlidingLogic(self.length, self.length, self.align_to, resume_state)


@dataclasses.dataclass
class _SessionState:
    max_key: int = -1
    sessions: dict[int, WindowMetadata] = dataclasses.field(default_factory=dict)
    merge_queue: list[tuple[int, int]] = dataclasses.field(default_factory=list)


#: The window ID of a value late for a session window (it joins none).
LATE_SESSION_ID = -1


class _SessionLogic(WindowerLogic[_SessionState]):
    __slots__ = ("gap", "state")

    def __init__(self, gap: datetime.timedelta, state: _SessionState | None) -> None:
        self.gap = gap
        self.state = state or _SessionState()

    def _find_merges(self) -> None:
        sessions = self.state.sessions
        if len(sessions) < 2:
            return
        ordered = sorted(sessions.items(), key=lambda item: item[1].open_time)
        last_id, last = ordered[0]
        for this_id, this in ordered[1:]:
            if this.open_time - last.close_time <= self.gap:
                last.close_time = max(last.close_time, this.close_time)
                last.merged_ids.add(this_id)
                self.state.merge_queue.append((this_id, last_id))
                del sessions[this_id]
            else:
                last_id, last = this_id, this

    def open_for(self, timestamp: datetime.datetime) -> tuple[int]:
        gap = self.gap
        for window_id, meta in self.state.sessions.items():
            until_open = meta.open_time - timestamp
            since_close = timestamp - meta.close_time
            if until_open <= _ZERO and since_close <= _ZERO:
                return (window_id,)
            if _ZERO < until_open <= gap:
                meta.open_time = timestamp
                self._find_merges()
                return (window_id,)
            if _ZERO < since_close <= gap:
                meta.close_time = timestamp
                self._find_merges()
                return (window_id,)
        self.state.max_key += 1
        window_id = self.state.max_key
        self.state.sessions[window_id] = WindowMetadata(timestamp, timestamp)
        return (window_id,)

    def late_for(self, timestamp: datetime.datetime) -> tuple[int]:
        return (LATE_SESSION_ID,)

    def merged(self) -> list[tuple[int, int]]:
        merged, self.state.merge_queue = self.state.merge_queue, []
        return merged

    def close_for(self, watermark: datetime.datetime) -> list[tuple[int, WindowMetadata]]:
        try:
            after = watermark - self.gap
        except OverflowError:
            after = UTC_MIN
        sessions = self.state.sessions
        closed = [(wid, meta) for wid, meta in sessions.items() if meta.close_time < after]
        for wid, _ in closed:
            del sessions[wid]
        return closed

    def notify_at(self) -> datetime.datetime | None:
        first = min((meta.close_time for meta in self.state.sessions.values()), default=None)
        if first is None:
            return None
        try:
            return first + self.gap
        except OverflowError:
            return None

    def is_empty(self) -> bool:
        return not self.state.sessions

    def snapshot(self) -> _SessionState:
        return copy.deepcopy(self.state)


@dataclasses.dataclass
class SessionWindower(Windower[_SessionState]):
    """Sessions: a key's values within ``gap`` of each other share a window."""

    gap: datetime.timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.gap, datetime.timedelta) or self.gap < _ZERO:
            raise FlowError(f"SessionWindower's gap must be a timedelta >= 0, got {self.gap!r}")

    def build(self, resume_state: _SessionState | None) -> WindowerLogic[_SessionState]:
        """A key's sessions."""
        return _SessionLogic(self.gap, resume_state)


# -- window logic ------------------------------------------------------------------


class WindowLogic(abc.ABC, Generic[V, W, S]):
    """What one open window of a key does with its values (:func:`window`'s ``builder``)."""

    @abc.abstractmethod
    def on_value(self, value: V) -> Iterable[W]:
        """A value joined the window; what to emit now."""

    @abc.abstractmethod
    def on_merge(self, original: Any) -> Iterable[W]:
        """The window ``original`` (a session) merged into this one; what to emit now."""

    @abc.abstractmethod
    def on_close(self) -> Iterable[W]:
        """The window closed; what to emit."""

    @abc.abstractmethod
    def snapshot(self) -> S:
        """The window's state, for ``builder(resume_state)``."""


class _FoldLogic(WindowLogic[Any, Any, Any]):
    __slots__ = ("folder", "merger", "state")

    def __init__(
        self, folder: Callable[[Any, Any], Any], merger: Callable[[Any, Any], Any], state: Any
    ) -> None:
        self.folder, self.merger, self.state = folder, merger, state

    def on_value(self, value: Any) -> tuple[()]:
        self.state = self.folder(self.state, value)
        return ()

    def on_merge(self, original: Any) -> tuple[()]:
        self.state = self.merger(self.state, original.state)
        return ()

    def on_close(self) -> tuple[Any]:
        return (self.state,)

    def snapshot(self) -> Any:
        return copy.deepcopy(self.state)


@dataclasses.dataclass(frozen=True)
class WindowOut(Generic[V, W_co]):
    """A windowing operator's streams: results, late values, and closed windows' metadata."""

    down: KeyedStream[tuple[int, W_co]]
    late: KeyedStream[tuple[int, V]]
    meta: KeyedStream[tuple[int, WindowMetadata]]


# -- operators ---------------------------------------------------------------------


def _check_clock_windower(step_id: str, clock: object, windower: object) -> None:
    if not isinstance(clock, Clock):
        raise FlowError(
            f"windowing step {step_id!r} needs a Clock (SystemClock, EventClock, or a subclass "
            f"of Clock with a build method), got {clock!r}"
        )
    if not isinstance(windower, Windower):
        raise FlowError(
            f"windowing step {step_id!r} needs a Windower (TumblingWindower, "
            f"SlidingWindower, SessionWindower, or a subclass of Windower), got {windower!r}"
        )


def window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    builder: Callable[[S | None], WindowLogic[V, W, S]],
    ordered: bool = True,
) -> WindowOut[V, W]:
    """Run a :class:`WindowLogic` (``builder(resume_state or None)``) per key and window.

    The general windowing operator; the others are made with it.
    """
    _check_clock_windower(step_id, clock, windower)
    _callable(builder, "builder", step_id, "window")
    flow = _flow(up, step_id, "window")
    make: Callable[[str], Any]
    plan = fast_plan(clock, windower, builder)
    if plan is not None:
        # a built-in clock, windower and fold: the same results, in microseconds
        fold = builder.fold  # type: ignore[attr-defined]
        make = functools.partial(FastWindowsLogic, plan, fold, bool(ordered))
    else:
        make = functools.partial(WindowsLogic, clock, windower, builder, bool(ordered))
    down, late, meta = flow.add_step(
        "window", step_id, [up], outs=("down", "late", "meta"), options=KeyedSpec(make)
    )
    return WindowOut(down, late, meta)


_US = datetime.timedelta(microseconds=1)


def fast_plan(clock: Any, windower: Any, builder: Any) -> FastPlan | None:
    """The fast path's plan for a built-in clock, windower and fold; else ``None``.

    The clock must be a :class:`SystemClock` or an :class:`EventClock`
    with the default ``to_system_utc``, the windower a tumbling, sliding
    or session one, and ``builder`` a fold's (:func:`fold_window` marks it).
    """
    fold = getattr(builder, "fold", None)
    if fold is None:
        return None
    if type(clock) is EventClock:
        if clock.to_system_utc is not _identity or clock.aligned:
            return None
        event, now_getter, ts_getter = True, clock.now_getter, clock.ts_getter
        wait = clock.wait_for_system_duration // _US
    elif type(clock) is SystemClock:
        event, now_getter, ts_getter, wait = False, _utc_now, None, 0
    else:
        return None
    if type(windower) is SessionWindower:
        return FastPlan(
            event, now_getter, ts_getter, wait, True, windower.gap // _US, 0, 0, 0, WindowMetadata
        )
    if type(windower) is TumblingWindower:
        offset = windower.length
    elif type(windower) is SlidingWindower:
        offset = windower.offset
    else:
        return None
    return FastPlan(
        event,
        now_getter,
        ts_getter,
        wait,
        False,
        0,
        windower.length // _US,
        offset // _US,
        micros(windower.align_to),
        WindowMetadata,
    )


def fold_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    builder: Callable[[], S],
    folder: Callable[[S, V], S],
    merger: Callable[[S, S], S],
    ordered: bool = True,
) -> WindowOut[V, S]:
    """Per key and window, fold values into ``builder()`` with ``folder``; emit when it closes.

    ``merger(acc, acc)`` combines two sessions' accumulators when a value
    joins them (required: sessions merge whenever data brings them close).

    >>> from datetime import datetime, timedelta, timezone
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.dataflow import Dataflow
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> flow = Dataflow("doc")
    >>> s = op.input("inp", flow, TestingSource([("a", (t0, 1)), ("a", (t0, 2))]))
    >>> clock = EventClock(lambda v: v[0], timedelta(seconds=10))
    >>> out = fold_window("sum", s, clock, TumblingWindower(timedelta(1), t0),
    ...                   int, lambda acc, v: acc + v[1], lambda a, b: a + b)
    >>> run_to_list(out.down)
    [('a', (0, 3))]
    """
    _callable(builder, "builder", step_id, "fold_window")
    _callable(folder, "folder", step_id, "fold_window")
    if merger is None or not callable(merger):
        raise FlowError(
            f"fold_window step {step_id!r} needs a callable merger(acc, acc): sessions merge "
            f"when a value joins two of them, got {merger!r}"
        )

    def make(resume_state: Any) -> WindowLogic[V, S, S]:
        return _FoldLogic(folder, merger, builder() if resume_state is None else resume_state)

    make.fold = (builder, folder, merger)  # type: ignore[attr-defined]  # for the fast path
    return window(step_id, up, clock, windower, make, ordered)


def _no_acc() -> Any:
    return None


def reduce_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    reducer: Callable[[V, V], V],
) -> WindowOut[V, V]:
    """Per key and window, combine the values with ``reducer`` (in arrival order)."""
    _callable(reducer, "reducer", step_id, "reduce_window")

    def folder(acc: Any, value: Any) -> Any:
        return value if acc is None else reducer(acc, value)

    return fold_window(step_id, up, clock, windower, _no_acc, folder, reducer, ordered=False)


def _into(
    step_id: str, into: Any
) -> tuple[Callable[[], Any], Callable[..., Any], Callable[..., Any]]:
    if isinstance(into, type) and issubclass(into, list):

        def add(acc: list[Any], value: Any) -> list[Any]:
            acc.append(value)
            return acc

        return list, add, list.__add__
    if isinstance(into, type) and issubclass(into, set):

        def put(acc: set[Any], value: Any) -> set[Any]:
            acc.add(value)
            return acc

        return set, put, set.union
    if isinstance(into, type) and issubclass(into, dict):

        def assign(acc: dict[Any, Any], value: Any) -> dict[Any, Any]:
            try:
                k, v = value
            except (TypeError, ValueError):
                raise TypeError(
                    f"step {step_id!r} collects into a dict: its values must be (key, value) "
                    f"2-tuples, got {value!r}"
                ) from None
            acc[k] = v
            return acc

        def update(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
            a.update(b)
            return a

        return dict, assign, update
    raise FlowError(
        f"collect_window step {step_id!r} collects into list, set or dict, got {into!r}; "
        "use fold_window for anything else"
    )


def collect_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    into: type = list,
    ordered: bool = True,
) -> WindowOut[V, Any]:
    """Per key and window, gather the values into a ``list`` (or ``set``, ``dict``)."""
    builder, folder, merger = _into(step_id, into)
    return fold_window(step_id, up, clock, windower, builder, folder, merger, ordered)


def count_window(
    step_id: str,
    up: Stream[X],
    clock: Clock[X, Any],
    windower: Windower[Any],
    key: Callable[[X], str],
) -> WindowOut[X, int]:
    """Count the items per ``key(item)`` and window.

    With a :class:`SystemClock` and a built-in windower each worker counts
    its own items per key in each batch, and one ``(key, count)`` per key
    and batch crosses to the key's worker (see :func:`_counted_batches`);
    with an :class:`EventClock` every item crosses, since whether it is late
    is told by its key's watermark, on the key's worker.

    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.dataflow import Dataflow
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> from datetime import datetime, timedelta, timezone
    >>> day = timedelta(days=1)
    >>> start = datetime.now(timezone.utc) - timedelta(hours=1)  # one window holds the run
    >>> flow = Dataflow("doc")
    >>> clicks = op.input("inp", flow, TestingSource(["home", "cart", "home"]))
    >>> counts = count_window("count", clicks, SystemClock(), TumblingWindower(day, start), str)
    >>> sorted(run_to_list(counts.down))
    [('cart', (0, 1)), ('home', (0, 2))]
    """
    _callable(key, "key", step_id, "count_window")
    flow = _flow(up, step_id, "count_window")
    with flow.scope(step_id):
        if type(clock) is SystemClock and type(windower) in _BUILT_IN_WINDOWERS:
            counted = _counted_batches("key", up, key)
            return fold_window("count", counted, clock, windower, int, _plus, _plus, ordered=False)
        keyed = key_on("key", up, key)
        return fold_window("count", keyed, clock, windower, int, _count, _plus, ordered=False)


def _counted_batches(step_id: str, up: Stream[X], key: Callable[[X], str]) -> KeyedStream[int]:
    """``(key, n)`` for each key of a batch, ``n`` its items there (counted in C).

    A :class:`SystemClock` gives every value the system time its key's
    worker reads when it takes the batch the value came in, and none is
    ever late; a built-in windower puts a value into windows by that time
    alone. So ``n`` values arriving together and ``(key, n)`` arriving in
    their place fall into the same windows, which count them the same, and
    close at the same times: the windows, their metadata and (empty) late
    values are those of the values one by one. The counts leave with the
    batch, as its values would, not held to the end of the epoch: a later
    arrival would read a later time, and could fall into a later window.
    """

    def make(worker: int, step_id: str) -> BatchFn:
        return _batch_counts(key, step_id)

    return _stateless("key_count", step_id, up, make, "the key function")


def _count(acc: int, value: Any) -> int:
    return acc + 1


def _plus(a: int, b: int) -> int:
    return a + b


_BUILT_IN_WINDOWERS = (TumblingWindower, SlidingWindower, SessionWindower)


def max_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """Per key and window, the largest value (by ``by(value)``)."""
    return reduce_window(step_id, up, clock, windower, functools.partial(max, key=by))


def min_window(
    step_id: str,
    up: KeyedStream[V],
    clock: Clock[V, Any],
    windower: Windower[Any],
    by: Callable[[V], Any] = _identity,
) -> WindowOut[V, V]:
    """Per key and window, the smallest value (by ``by(value)``)."""
    return reduce_window(step_id, up, clock, windower, functools.partial(min, key=by))


class _JoinLogic(WindowLogic[tuple[int, Any], tuple[Any, ...], list[list[Any]]]):
    __slots__ = ("emit", "insert", "seen")

    def __init__(self, insert: str, emit: str, seen: list[list[Any]]) -> None:
        self.insert, self.emit, self.seen = insert, emit, seen

    def _rows(self) -> list[tuple[Any, ...]]:
        import itertools

        return list(itertools.product(*[values or [None] for values in self.seen]))

    def _check(self) -> list[tuple[Any, ...]]:
        if self.emit == "complete" and all(self.seen):
            rows = self._rows()
            for values in self.seen:
                values.clear()
            return rows
        if self.emit == "running":
            return self._rows()
        return []

    def on_value(self, value: tuple[int, Any]) -> list[tuple[Any, ...]]:
        side, item = value
        if self.insert == "first":
            if not self.seen[side]:
                self.seen[side] = [item]
        elif self.insert == "last":
            self.seen[side] = [item]
        else:
            self.seen[side].append(item)
        return self._check()

    def on_merge(self, original: Any) -> list[tuple[Any, ...]]:
        theirs = original.seen
        if self.insert == "first":
            self.seen = [mine or other for mine, other in zip(self.seen, theirs, strict=True)]
        elif self.insert == "last":
            self.seen = [other or mine for mine, other in zip(self.seen, theirs, strict=True)]
        else:
            self.seen = [mine + other for mine, other in zip(self.seen, theirs, strict=True)]
        return self._check()

    def on_close(self) -> list[tuple[Any, ...]]:
        return self._rows() if self.emit == "final" else []

    def snapshot(self) -> list[list[Any]]:
        return copy.deepcopy(self.seen)


def join_window(
    step_id: str,
    clock: Clock[Any, Any],
    windower: Windower[Any],
    *sides: KeyedStream[Any],
    insert_mode: JoinInsertMode = "last",
    emit_mode: JoinEmitMode = "final",
    ordered: bool = True,
) -> WindowOut[Any, tuple[Any, ...]]:
    """Join keyed streams per key and window: ``(key, (window_id, (v0, v1, ...)))``.

    ``insert_mode`` and ``emit_mode`` as for
    :func:`~timelypy.flow.operators.join` (``final``: when the window closes).
    An :class:`EventClock` reads each side's values as they are.
    """
    if not sides:
        raise FlowError(f"join_window step {step_id!r} needs at least one side")
    if insert_mode not in ("first", "last", "product"):
        raise FlowError(f"join_window step {step_id!r}: unknown insert_mode {insert_mode!r}")
    if emit_mode not in ("complete", "final", "running"):
        raise FlowError(f"join_window step {step_id!r}: unknown emit_mode {emit_mode!r}")
    _check_clock_windower(step_id, clock, windower)
    flow = _flow(sides[0], step_id, "join_window")
    count = len(sides)
    if isinstance(clock, EventClock):
        getter = clock.ts_getter
        clock = dataclasses.replace(clock, ts_getter=lambda side_value: getter(side_value[1]))
    with flow.scope(step_id):
        from timelypy.flow.operators import map_value, merge

        tagged = [
            map_value(f"side_{i}", side, functools.partial(_tag, i)) for i, side in enumerate(sides)
        ]
        merged = merge("merge", *tagged)

        def make(resume_state: Any) -> _JoinLogic:
            seen = resume_state if resume_state is not None else [[] for _ in range(count)]
            return _JoinLogic(insert_mode, emit_mode, seen)

        return window("window", merged, clock, windower, make, ordered)


def _tag(side: int, value: Any) -> tuple[int, Any]:
    return side, value
