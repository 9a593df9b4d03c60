"""The windowing operators' keyed state: a clock, a windower and window logics per key.

:class:`WindowsLogic` is the :class:`~timelypy.flow._keyed.KeyedLogic` of
every operator of :mod:`timelypy.flow.operators.windowing`.  For each key
it keeps a :class:`KeyWindows`; for each batch of a key's values it asks
the key's clock for each value's timestamp and the watermark, sends late
values to the late stream, queues the others (in timestamp order when
``ordered``), folds the values the watermark has passed into their windows,
merges the windows the windower merged, and closes the windows the
watermark closed.  A key with nothing open is forgotten; its last
watermark stays in a bounded table of *tombstones* so that a later value
before it is late rather than reopening an emitted window.

Events leave as ``(key, (kind, window_id, payload))`` with ``kind``
:data:`DOWN`, :data:`LATE` or :data:`META`; :func:`split_events` sends
each kind to its own stream.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.handles import Frontier
from timelypy.dataflow.stream import Stream
from timelypy.errors import FlowError
from timelypy.flow._keyed import KeyedLogic, _Timers
from timelypy.progress.operate import FrontierInterest

__all__ = [
    "DOWN",
    "LATE",
    "META",
    "TOMBSTONES",
    "KeyWindows",
    "WindowsLogic",
    "forget",
    "group_by_key",
    "remember",
    "split_events",
]

#: How many forgotten keys' last watermarks a worker keeps per step (oldest dropped first).
TOMBSTONES = 65_536
#: Seconds before a key woken too early (its watermark short of its window) is woken again.
NOTIFY_BACKOFF = 0.05
#: An event's kind: a window's result, a late value, a closed window's metadata.
DOWN, LATE, META = 0, 1, 2
_UTC = datetime.UTC
_UTC_MIN = datetime.datetime.min.replace(tzinfo=_UTC)
_UTC_MAX = datetime.datetime.max.replace(tzinfo=_UTC)


def group_by_key(items: list[tuple[str, Any]]) -> dict[str, list[Any]]:
    """The values of ``(key, value)`` items per key, each key's in their order."""
    groups: dict[str, list[Any]] = {}
    add = groups.setdefault  # a list made per item and mostly dropped: still the fastest
    for key, value in items:
        add(key, []).append(value)
    return groups


def forget(logic: Any, key: str, watermark: Any) -> None:
    """Drop ``key``'s state and timer from ``logic``; keep its watermark as a tombstone.

    ``logic`` has ``keys``, ``timers``, ``tombstones`` (oldest first) and
    ``capacity``: past that many tombstones the oldest goes.
    """
    del logic.keys[key]
    logic.timers.set(key, None)
    remember(logic.tombstones, key, watermark, logic.capacity)


def remember(tombstones: dict[str, Any], key: str, value: Any, capacity: int) -> None:
    """Keep ``value`` as a forgotten ``key``'s tombstone; past ``capacity`` the oldest goes."""
    tombstones[key] = value
    if len(tombstones) > capacity:
        del tombstones[next(iter(tombstones))]


class KeyWindows:
    """One key's windowing state."""

    __slots__ = ("clock", "floor", "logics", "queue", "watermark", "windower")

    def __init__(self, clock: Any, windower: Any, floor: datetime.datetime) -> None:
        #: the key's ClockLogic
        self.clock = clock
        #: the key's WindowerLogic
        self.windower = windower
        #: window ID -> its WindowLogic
        self.logics: dict[int, Any] = {}
        #: on-time values the watermark has not passed yet: (value, timestamp)
        self.queue: list[tuple[Any, datetime.datetime]] = []
        #: the key's watermark so far (it never goes back)
        self.watermark = floor
        #: the watermark of the key's forgotten state (values before it are late)
        self.floor = floor

    def is_empty(self) -> bool:
        """Nothing open, nothing queued: the key can be forgotten."""
        return not self.logics and not self.queue and self.windower.is_empty()


class WindowsLogic(KeyedLogic):
    """The windowing state of one step's keys on one worker."""

    what = "the window logic"

    def __init__(
        self,
        clock: Any,
        windower: Any,
        builder: Callable[[Any], Any],
        ordered: bool,
        step_id: str,
        tombstones: int | None = None,
    ) -> None:
        self.clock = clock
        self.windower = windower
        self.builder = builder
        self.ordered = ordered
        self.step_id = step_id
        self.keys: dict[str, KeyWindows] = {}
        self.timers = _Timers()
        #: forgotten keys' last watermarks, oldest first
        self.tombstones: dict[str, datetime.datetime] = {}
        self.capacity = TOMBSTONES if tombstones is None else tombstones
        #: an aligned event clock's wait (see :class:`AlignedWatermark`), else None;
        #: then timers are in event time and the operator moves :attr:`aligned`
        self.aligned_wait: datetime.timedelta | None = (
            clock.wait_for_system_duration if getattr(clock, "aligned", False) else None
        )
        self.ts_getter: Callable[[Any], Any] | None = (
            clock.ts_getter if self.aligned_wait is not None else None
        )
        #: the step's aligned watermark so far (with an aligned clock)
        self.aligned = _UTC_MIN

    # -- a key's life -------------------------------------------------------------

    def _key(self, key: str) -> KeyWindows:
        state = self.keys.get(key)
        if state is None:
            floor = self.tombstones.pop(key, _UTC_MIN)
            state = self.keys[key] = KeyWindows(
                self.clock.build(None), self.windower.build(None), floor
            )
        return state

    def _settle(self, key: str, state: KeyWindows) -> None:
        """Forget the key if nothing is open; else ask for a wake-up when a window is due."""
        if state.is_empty():
            forget(self, key, state.watermark)
            return
        when = state.windower.notify_at()
        if self.ordered and state.queue:
            first = min(at for _, at in state.queue)
            when = first if when is None else min(when, first)
        if when is not None and self.aligned_wait is None:
            when = state.clock.to_system_utc(when)
        self.timers.set(key, None if when is None else when.timestamp())

    def _advance(self, state: KeyWindows, watermark: datetime.datetime) -> datetime.datetime:
        if watermark < state.floor:
            watermark = state.floor
        if watermark > state.watermark:
            state.watermark = watermark
        return state.watermark

    def _flush(self, key: str, state: KeyWindows, out: list[Any]) -> None:
        """Fold what the watermark passed, merge, close; events into ``out``."""
        watermark = state.watermark
        if self.ordered:
            due = [entry for entry in state.queue if entry[1] <= watermark]
            if due:
                state.queue = [entry for entry in state.queue if entry[1] > watermark]
                due.sort(key=_timestamp)
        else:
            due, state.queue = state.queue, []
        windower, logics, builder = state.windower, state.logics, self.builder
        for value, at in due:
            for window_id in windower.open_for(at):
                logic = logics.get(window_id)
                if logic is None:
                    logic = logics[window_id] = builder(None)
                for result in logic.on_value(value):
                    out.append((key, (DOWN, window_id, result)))
        for original, into in windower.merged():
            if original != into:
                merged = logics.pop(original)
                for result in logics[into].on_merge(merged):
                    out.append((key, (DOWN, into, result)))
        for window_id, meta in windower.close_for(watermark):
            logic = logics.pop(window_id, None)
            if logic is not None:
                for result in logic.on_close():
                    out.append((key, (DOWN, window_id, result)))
            out.append((key, (META, window_id, meta)))

    # -- KeyedLogic ---------------------------------------------------------------

    def apply(self, epoch: int, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        groups = group_by_key(items)
        out: list[Any] = []
        for key, values in groups.items():
            state = self._key(key)
            clock, windower = state.clock, state.windower
            clock.before_batch()
            queue = state.queue
            aligned = self.aligned_wait is not None
            for value in values:
                at, watermark = clock.on_item(value)
                if aligned:
                    watermark = self.aligned  # the step's, not the key's own
                if watermark > state.watermark or watermark < state.floor:
                    watermark = self._advance(state, watermark)
                else:
                    watermark = state.watermark
                try:
                    late = at < watermark
                except TypeError:
                    raise FlowError(
                        f"step {self.step_id!r}: the clock gave the timestamp {at!r} for "
                        f"{value!r}; timestamps are aware datetimes"
                    ) from None
                if late:
                    for window_id in windower.late_for(at):
                        out.append((key, (LATE, window_id, value)))
                else:
                    queue.append((value, at))
            self._flush(key, state, out)
            self._settle(key, state)
        return out

    def wake(self) -> float | None:
        if self.aligned_wait is not None:
            return None  # an aligned watermark moves with epochs, not the system time
        return self.timers.first()

    def advance_aligned(
        self, watermark: datetime.datetime
    ) -> tuple[list[tuple[str, Any]], set[str]]:
        """An aligned clock's watermark moved to ``watermark``: close what it passed."""
        out: list[Any] = []
        if watermark <= self.aligned:
            return out, set()
        self.aligned = watermark
        keys = self.timers.due(watermark.timestamp()) if watermark < _UTC_MAX else None
        if keys is None:
            keys = sorted(self.keys)
        for key in keys:
            state = self.keys.get(key)
            if state is None:
                continue
            self._advance(state, watermark)
            self._flush(key, state, out)
            self._settle(key, state)
        return out, set(keys)

    def notify(self, now: float) -> tuple[list[tuple[str, Any]], set[str]]:
        out: list[Any] = []
        keys = self.timers.due(now)
        for key in keys:
            state = self.keys.get(key)
            if state is None:
                continue
            self._advance(state, state.clock.on_notify())
            self._flush(key, state, out)
            self._settle(key, state)
            again = self.timers.at.get(key)
            if again is not None and again <= now:
                # the watermark has not reached the window yet (an event clock that
                # waits): look again a little later, not at once
                self.timers.set(key, now + NOTIFY_BACKOFF)
        return out, set(keys)

    def eof(self) -> tuple[list[tuple[str, Any]], set[str]]:
        out: list[Any] = []
        keys = sorted(self.keys)
        for key in keys:
            state = self.keys[key]
            self._advance(state, state.clock.on_eof())
            self._flush(key, state, out)
            self._settle(key, state)
        return out, set(keys)

    def snapshot(self, key: str) -> Any:
        state = self.keys.get(key)
        if state is None:
            return None
        return (
            state.clock.snapshot(),
            state.windower.snapshot(),
            {window_id: logic.snapshot() for window_id, logic in state.logics.items()},
            list(state.queue),
            state.watermark,
            state.floor,
        )

    def restore(self, states: dict[str, Any]) -> None:
        for key, (clock, windower, logics, queue, watermark, floor) in states.items():
            state = KeyWindows(self.clock.build(clock), self.windower.build(windower), floor)
            state.logics = {window_id: self.builder(s) for window_id, s in logics.items()}
            state.queue = list(queue)
            state.watermark = watermark
            self.keys[key] = state
            self._settle(key, state)


def _timestamp(entry: tuple[Any, datetime.datetime]) -> datetime.datetime:
    return entry[1]


def split_events(stream: Stream[Any], name: str) -> tuple[Stream[Any], Stream[Any], Stream[Any]]:
    """The ``down``, ``late`` and ``meta`` streams of a window step's events."""
    builder = OperatorBuilder(name, stream.scope)
    inp = builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER)
    outputs = [builder.new_output() for _ in range(3)]
    handles = [handle for handle, _ in outputs]

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        def logic(frontiers: list[Frontier]) -> None:
            for cap, items in inp:
                kinds: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
                for key, (kind, window_id, payload) in items:
                    kinds[kind].append((key, (window_id, payload)))
                for handle, batch in zip(handles, kinds, strict=True):
                    if batch:
                        handle.give_batch(cap, batch)

        return logic

    builder.build(constructor)
    down, late, meta = (out for _, out in outputs)
    return down, late, meta
