"""Windowing: clocks, windowers, and the windowing steps.

A windowing step (``reduce_window``, ``fold_window``, ``collect_window``,
``count_window`` on :class:`~timelypy.flow.Dataflow`) takes ``(key: str,
value)`` items and keeps, *per state key*, a clock and a set of open
windows:

1. the **clock** (:class:`ClockConfig`) gives each value its time and the
   key's *watermark*: the time before which no more values are expected;
   :class:`SystemClockConfig` uses the system time for both,
   :class:`EventClockConfig` reads the time from the value and lets the
   watermark trail the largest time seen by ``wait_for_system_duration``,
   then advance with the system clock while the key is idle;
2. the **windower** (:class:`WindowConfig`) puts the time into windows:
   :class:`TumblingWindowConfig`, :class:`SlidingWindowConfig`,
   :class:`SessionWindowConfig`;
3. a value whose time is before the key's watermark is **late**: it is
   counted and logged per step, and given to the step's ``late`` output if
   it has one, never silently dropped; other values are folded into their
   windows;
4. a window **closes** when the key's watermark passes its end (a session:
   its last time plus the gap), checked after each batch of the key's
   values, when the system time comes (the step asks its worker to wake it),
   and when the input ends (everything closes). The step then emits
   ``(key, result)`` -- or ``(key, (WindowMetadata, result))`` with
   ``window_meta=True`` -- at the epoch it is in.

Times are timezone-aware :class:`~datetime.datetime` objects (a naive one
is an error naming the step); internally they are whole microseconds since
1970-01-01 UTC, so window boundaries are exact.

Each key's state (clock, open windows, accumulators) lives in the step's
:class:`~timelypy.flow.state.StepState`, so recovery snapshots it when an
epoch closes like any stateful step's.  A key keeps its clock after its
windows close, so a value for a closed window stays late instead of
opening the window a second time.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any

from timelypy.communication.codec import register_marked
from timelypy.errors import FlowError

__all__ = [
    "ClockConfig",
    "SystemClockConfig",
    "EventClockConfig",
    "WindowConfig",
    "TumblingWindowConfig",
    "SlidingWindowConfig",
    "SessionWindowConfig",
    "WindowMetadata",
    "UTC_EPOCH",
]

#: Time zero of the internal clock, and the default ``start_at`` of windows.
UTC_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_US = datetime.timedelta(microseconds=1)


def micros(at: datetime.datetime, what: str = "a time") -> int:
    """``at`` as whole microseconds since 1970-01-01 UTC (``at`` must be timezone-aware).

    >>> micros(datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc))
    1000000
    """
    if type(at) is not datetime.datetime and not isinstance(at, datetime.datetime):
        raise FlowError(f"{what} must be a datetime, got {at!r}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise FlowError(
            f"{what} must be timezone-aware, got the naive {at!r}: attach a zone, e.g. "
            "dt.replace(tzinfo=datetime.timezone.utc)"
        )
    return (at - UTC_EPOCH) // _US


def from_micros(us: int) -> datetime.datetime:
    """The UTC datetime ``us`` microseconds after 1970-01-01 UTC."""
    return UTC_EPOCH + datetime.timedelta(0, 0, us)  # positional: faster than microseconds=


def span_micros(value: object, what: str, zero_ok: bool = False) -> int:
    """A ``timedelta`` as whole microseconds; a clear error for anything else, or <= 0."""
    if not isinstance(value, datetime.timedelta):
        raise FlowError(f"{what} must be a datetime.timedelta, got {value!r}")
    us = value // _US
    if us < 0 or (us == 0 and not zero_ok):
        raise FlowError(f"{what} must be {'>= 0' if zero_ok else 'positive'}, got {value!r}")
    return int(us)


def system_now() -> int:
    """The system time in microseconds since 1970-01-01 UTC."""
    return int(time.time() * 1_000_000)


# -- clocks ------------------------------------------------------------------------


class ClockConfig:
    """How a windowing step tells the time: see the subclasses."""

    def now_micros(self) -> Callable[[], int]:
        """The clock's "now" in microseconds (the system time unless ``now_getter`` is given)."""
        getter = getattr(self, "now_getter", None)
        if getter is None:
            return system_now

        def now() -> int:
            return micros(getter(), "now_getter()")

        return now


@dataclasses.dataclass(frozen=True)
class SystemClockConfig(ClockConfig):
    """Every value's time is the system time when the step processes it; so is the watermark.

    Nothing is ever late; a window closes once the system time passes its
    end. On resume, a window stored during recovery whose end has passed in
    the meantime closes at once. ``now_getter`` (a function
    returning an aware datetime) replaces the system clock, for tests.
    """

    now_getter: Callable[[], datetime.datetime] | None = None


@dataclasses.dataclass(frozen=True)
class EventClockConfig(ClockConfig):
    """A value's time is ``dt_getter(value)`` (an aware datetime).

    Per key, the watermark is the largest time seen minus
    ``wait_for_system_duration``, plus the system time that has passed
    since that largest time was seen: values may arrive out of order by up
    to the wait, and windows close even when the key's input goes quiet.
    On resume the key's watermark continues from its snapshot, so the time
    the flow was down counts as idle time and may close windows at once.
    ``now_getter`` replaces the system clock (a constant one makes the
    watermark exactly the largest time seen minus the wait).
    """

    dt_getter: Callable[[Any], datetime.datetime]
    wait_for_system_duration: datetime.timedelta = datetime.timedelta(0)
    now_getter: Callable[[], datetime.datetime] | None = None


# -- windowers ---------------------------------------------------------------------


class WindowConfig:
    """How a windowing step buckets times into windows: see the subclasses."""


@dataclasses.dataclass(frozen=True)
class SlidingWindowConfig(WindowConfig):
    """Windows ``[start_at + k * offset, start_at + k * offset + length)`` for every integer k.

    A time falls in every window that contains it (``length / offset`` of
    them when the offset divides the length; none when the offset is longer
    than the length and the time falls in a gap). ``start_at`` defaults to
    1970-01-01 UTC, so windows line up with the clock (a 10-minute window
    starts at :00, :10, ...) the same way on every worker and after every
    resume.
    """

    length: datetime.timedelta
    offset: datetime.timedelta
    start_at: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class TumblingWindowConfig(WindowConfig):
    """Back-to-back windows of ``length``: a sliding window whose offset is its length.

    Every time falls in exactly one window; ``start_at`` as for
    :class:`SlidingWindowConfig`.
    """

    length: datetime.timedelta
    start_at: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class SessionWindowConfig(WindowConfig):
    """A key's values less than ``gap`` apart (inclusive) are one session.

    A value within the gap of several sessions joins them into one (their
    accumulators are merged in order of their start, then the value is
    folded in). A session closes once the watermark is more than ``gap``
    past its last time.
    """

    gap: datetime.timedelta


@dataclasses.dataclass(frozen=True, order=True, slots=True)  # slots: one object, not two
class WindowMetadata:
    """A closed window: its start (inclusive) and end (exclusive; a session's last time)."""

    open_time: datetime.datetime
    close_time: datetime.datetime


register_marked(
    WindowMetadata,
    0,
    lambda meta: [meta.open_time, meta.close_time],
    lambda fields: WindowMetadata(*fields),
)


@dataclasses.dataclass(frozen=True)
class WindowSpec:
    """What a windowing step needs besides its step ID: configs, logic, options."""

    kind: str
    clock: ClockConfig
    windower: WindowConfig
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any] | None
    finish: Callable[[Any], Any]
    late: Callable[[int, tuple[str, Any]], Any] | None = None
    window_meta: bool = False
    #: ``(builder, folder)`` of a fold_window: ``add`` spelled out, for a faster path
    fold: tuple[Callable[[], Any], Callable[[Any, Any], Any]] | None = None


def check_configs(step_id: str, clock: object, windower: object) -> None:
    """Clear errors, naming the step, for bad clock and window configs."""
    where = f"step {step_id!r}"
    if not isinstance(clock, ClockConfig):
        raise FlowError(
            f"{where}: the clock must be a SystemClockConfig or an EventClockConfig, got {clock!r}"
        )
    if isinstance(clock, EventClockConfig):
        if not callable(clock.dt_getter):
            raise FlowError(f"{where}: EventClockConfig needs a callable dt_getter")
        span_micros(
            clock.wait_for_system_duration, f"{where}: wait_for_system_duration", zero_ok=True
        )
    if not isinstance(windower, WindowConfig):
        raise FlowError(
            f"{where}: the windower must be a TumblingWindowConfig, SlidingWindowConfig or "
            f"SessionWindowConfig, got {windower!r}"
        )
    if isinstance(windower, TumblingWindowConfig):
        span_micros(windower.length, f"{where}: the window length")
    elif isinstance(windower, SlidingWindowConfig):
        span_micros(windower.length, f"{where}: the window length")
        span_micros(windower.offset, f"{where}: the window offset")
    elif isinstance(windower, SessionWindowConfig):
        span_micros(windower.gap, f"{where}: the session gap")
    else:
        raise FlowError(
            f"{where}: {type(windower).__name__} is not one of the window configs this step "
            "runs (TumblingWindowConfig, SlidingWindowConfig, SessionWindowConfig); windows "
            "of your own go on the stream graph, with a Windower and "
            "timelypy.flow.operators.windowing.window"
        )
    start = getattr(windower, "start_at", None)
    if start is not None:
        micros(start, f"{where}: start_at")
