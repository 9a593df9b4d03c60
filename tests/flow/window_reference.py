"""A plain-Python model of the windowing steps (timelypy.flow.window), for property tests.

The model replays one input, item by item in arrival order, with the event
clock and a constant ``now_getter`` (so a key's watermark is exactly the
largest ``time - wait`` it has seen), and records which values were late and
which windows closed, with what result and at which epoch.

It is written from the semantics, not from the operator: window ids are
found by walking down from the last window that starts at or before a time,
sessions are a plain list per key, and windows close after every item (the
operator closes after every batch; the two agree because a value for a
window the watermark has passed is late).

>>> from datetime import UTC, datetime
>>> t = lambda s: datetime(2024, 1, 1, 0, 0, s, tzinfo=UTC)
>>> items = [(0, ("k", t(1))), (0, ("k", t(12))), (1, ("k", t(3))), (1, ("k", t(25)))]
>>> result = model(items, lambda v: v, 0, Sliding(10_000_000, 10_000_000), COUNT)
>>> result.late
[(1, ('k', datetime.datetime(2024, 1, 1, 0, 0, 3, tzinfo=datetime.timezone.utc)))]
>>> [(w.result, w.epoch) for w in result.windows]
[(1, 0), (1, 1), (1, None)]
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

__all__ = [
    "Sliding",
    "Session",
    "Logic",
    "fold_logic",
    "reduce_logic",
    "COLLECT",
    "COUNT",
    "ModelWindow",
    "ModelResult",
    "to_micros",
    "sliding_ids",
    "model",
]

_ZERO = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_US = datetime.timedelta(microseconds=1)


def to_micros(at: datetime.datetime) -> int:
    """``at`` (timezone-aware) as whole microseconds since 1970-01-01 UTC.

    >>> to_micros(datetime.datetime(1970, 1, 1, 0, 0, 2, tzinfo=datetime.UTC))
    2000000
    """
    assert at.tzinfo is not None, at
    return (at - _ZERO) // _US


# -- windowers ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Sliding:
    """Windows ``[start + w * offset, start + w * offset + length)``, in microseconds.

    Tumbling windows are ``Sliding(length, length)``.
    """

    length: int
    offset: int
    start: int = 0


@dataclasses.dataclass(frozen=True)
class Session:
    """Sessions of a key's values at most ``gap`` microseconds apart."""

    gap: int


def sliding_ids(windower: Sliding, t: int) -> list[int]:
    """The ids of the windows containing ``t``, in increasing order.

    >>> sliding_ids(Sliding(10, 5), 12)
    [1, 2]
    >>> sliding_ids(Sliding(3, 5), 4)
    []
    """
    length, offset, start = windower.length, windower.offset, windower.start
    # the last window starting at or before t, then earlier ones while they still reach t
    w = (t - start) // offset
    assert start + w * offset <= t < start + (w + 1) * offset
    found = []
    while start + w * offset + length > t:
        found.append(w)
        w -= 1
    return found[::-1]


# -- window logic ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Logic:
    """How a window's accumulator starts, grows, merges (sessions) and finishes."""

    name: str
    new: Callable[[Any], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]
    finish: Callable[[Any], Any] = lambda acc: acc


def fold_logic(
    builder: Callable[[], Any], folder: Callable[[Any, Any], Any], merger: Callable[[Any, Any], Any]
) -> Logic:
    """``fold_window``: ``folder(builder(), value)`` first, then ``folder(acc, value)``."""
    return Logic("fold", lambda value: folder(builder(), value), folder, merger)


def reduce_logic(reducer: Callable[[Any, Any], Any]) -> Logic:
    """``reduce_window``: the first value, then ``reducer(acc, value)``; sessions merge likewise."""
    return Logic("reduce", lambda value: value, reducer, reducer)


#: ``collect_window``: the values in arrival order; merged sessions concatenate.
COLLECT = Logic(
    "collect", lambda value: [value], lambda acc, value: [*acc, value], lambda a, b: [*a, *b]
)

#: ``count_window``: how many values.
COUNT = Logic("count", lambda value: 1, lambda acc, value: acc + 1, lambda a, b: a + b)


# -- the model ---------------------------------------------------------------------


@dataclasses.dataclass
class ModelWindow:
    """A window the model closed.

    ``open``/``close`` are microseconds (a session's first and last time);
    ``epoch`` is the epoch it closed at, ``None`` if it was still open when
    the input ended; ``last_epoch`` is the largest epoch of its values.
    """

    key: str
    open: int
    close: int
    result: Any
    epoch: int | None
    last_epoch: int


@dataclasses.dataclass
class ModelResult:
    """The model's windows (in closing order) and late ``(epoch, (key, value))`` items."""

    windows: list[ModelWindow]
    late: list[tuple[int, tuple[str, Any]]]


@dataclasses.dataclass
class _Open:
    """An open window: bounds (sliding: start and end; session: first and last), accumulator."""

    id: int
    open: int
    close: int
    acc: Any
    last_epoch: int


@dataclasses.dataclass
class _Key:
    watermark: int | None = None
    open: dict[int, _Open] = dataclasses.field(default_factory=dict)
    next_session: int = 0


def model(
    items: list[tuple[int, tuple[str, Any]]],
    time_of: Callable[[Any], datetime.datetime],
    wait: int,
    windower: Sliding | Session,
    logic: Logic,
) -> ModelResult:
    """Replay ``(epoch, (key, value))`` items in order through one windowing step.

    ``time_of`` is the event clock's ``dt_getter``, ``wait`` its
    ``wait_for_system_duration`` in microseconds (the system clock is
    constant). Epochs must not decrease.
    """
    keys: dict[str, _Key] = {}
    closed: list[ModelWindow] = []
    late: list[tuple[int, tuple[str, Any]]] = []
    previous_epoch = None
    for epoch, (key, value) in items:
        assert previous_epoch is None or epoch >= previous_epoch, "epochs must not decrease"
        previous_epoch = epoch
        state = keys.setdefault(key, _Key())
        t = to_micros(time_of(value))
        before = state.watermark
        candidate = t - wait
        state.watermark = candidate if before is None else max(before, candidate)
        if before is not None and t < before:
            late.append((epoch, (key, value)))
        elif isinstance(windower, Session):
            _add_to_session(state, windower.gap, t, value, epoch, logic)
        else:
            for w in sliding_ids(windower, t):
                window = state.open.get(w)
                if window is None:
                    begin = windower.start + w * windower.offset
                    acc = logic.new(value)
                    state.open[w] = _Open(w, begin, begin + windower.length, acc, epoch)
                else:
                    window.acc = logic.add(window.acc, value)
                    window.last_epoch = epoch
        _close(key, state, windower, logic, epoch, closed)
    for key, state in keys.items():
        _close(key, state, windower, logic, None, closed)
    return ModelResult(closed, late)


def _add_to_session(state: _Key, gap: int, t: int, value: Any, epoch: int, logic: Logic) -> None:
    near = sorted(
        (s for s in state.open.values() if s.open - gap <= t <= s.close + gap),
        key=lambda s: (s.open, s.id),
    )
    if not near:
        session = _Open(state.next_session, t, t, logic.new(value), epoch)
        state.open[session.id] = session
        state.next_session += 1
        return
    into = near[0]
    for other in near[1:]:
        del state.open[other.id]
        into.open = min(into.open, other.open)
        into.close = max(into.close, other.close)
        into.acc = logic.merge(into.acc, other.acc)
        into.last_epoch = max(into.last_epoch, other.last_epoch)
    into.open = min(into.open, t)
    into.close = max(into.close, t)
    into.acc = logic.add(into.acc, value)
    into.last_epoch = epoch


def _close(
    key: str,
    state: _Key,
    windower: Sliding | Session,
    logic: Logic,
    epoch: int | None,
    closed: list[ModelWindow],
) -> None:
    """Close the key's windows its watermark has passed (all of them when ``epoch`` is None)."""
    mark = state.watermark
    assert mark is not None
    for w in sorted(state.open):
        window = state.open[w]
        if epoch is None:
            done = True
        elif isinstance(windower, Session):
            done = window.close < mark - windower.gap
        else:
            done = window.close <= mark
        if done:
            del state.open[w]
            closed.append(
                ModelWindow(
                    key,
                    window.open,
                    window.close,
                    logic.finish(window.acc),
                    epoch,
                    window.last_epoch,
                )
            )
