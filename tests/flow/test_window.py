"""Windowing steps against a plain-Python model (tests/flow/window_reference.py).

Random streams of ``(key, (time, n))`` values, out of order within and
beyond the clock's wait, through every windower and every windowing step on
one to four workers, must give the model's windows, results, late values and
closing epochs. The clock is the event clock with a constant ``now_getter``,
so each key's watermark is exactly its largest ``time - wait`` so far.

The functions a flow uses are defined at module level, so that a flow
travels to other processes with cloudpickle.
"""

from __future__ import annotations

import pickle
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.flow.window_reference import (
    COLLECT,
    COUNT,
    ModelResult,
    Session,
    Sliding,
    fold_logic,
    model,
    reduce_logic,
    to_micros,
)
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.window import (
    UTC_EPOCH,
    EventClockConfig,
    SessionWindowConfig,
    SlidingWindowConfig,
    TumblingWindowConfig,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SECOND = 1_000_000
KEYS = "abc"

# -- the step's functions (module level: they pickle by reference) -------------------


def event_time(value: tuple[datetime, int]) -> datetime:
    return value[0]


def frozen_now() -> datetime:
    return T0


def fold_builder() -> str:
    return "<"


def fold_folder(acc: str, value: tuple[datetime, int]) -> str:
    return f"{acc}{value[1]},"


def fold_merger(into: str, other: str) -> str:
    # order-sensitive and visible: which session absorbed which, in which order
    return f"{into}|{other}"


def reducer(acc: tuple[datetime, int], value: tuple[datetime, int]) -> tuple[datetime, int]:
    # neither commutative nor associative: results pin the order of values and merges
    return (min(acc[0], value[0]), (acc[1] * 31 + value[1] + 1) % 1_000_003)


LOGICS = {
    "fold": fold_logic(fold_builder, fold_folder, fold_merger),
    "reduce": reduce_logic(reducer),
    "collect": COLLECT,
    "count": COUNT,
}


class LateToFiles:
    """A ``late`` output that works in any process: one pickle file per late item."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, epoch: int, item: Any) -> None:
        (self.folder / uuid.uuid4().hex).write_bytes(pickle.dumps((epoch, item)))

    def read(self) -> list[Any]:
        return [pickle.loads(path.read_bytes()) for path in self.folder.iterdir()]


# -- building the flow and the model's input ------------------------------------------


def config_of(windower: Sliding | Session) -> Any:
    """The step's window config for the model's windower."""
    if isinstance(windower, Session):
        return SessionWindowConfig(timedelta(microseconds=windower.gap))
    start = None if windower.start == 0 else UTC_EPOCH + timedelta(microseconds=windower.start)
    if windower.length == windower.offset:
        return TumblingWindowConfig(timedelta(microseconds=windower.length), start_at=start)
    return SlidingWindowConfig(
        timedelta(microseconds=windower.length),
        timedelta(microseconds=windower.offset),
        start_at=start,
    )


def window_flow(windower: Sliding | Session, wait: int, op: str, late: Any = None) -> Dataflow:
    clock = EventClockConfig(event_time, timedelta(microseconds=wait), now_getter=frozen_now)
    config = config_of(windower)
    flow = Dataflow()
    options = {"late": late, "window_meta": True}
    if op == "fold":
        flow.fold_window("win", clock, config, fold_builder, fold_folder, fold_merger, **options)
    elif op == "reduce":
        flow.reduce_window("win", clock, config, reducer, **options)
    elif op == "collect":
        flow.collect_window("win", clock, config, **options)
    else:
        assert op == "count"
        flow.count_window("win", clock, config, **options)
    flow.capture()
    return flow


def run_on(flow: Dataflow, pairs: list[Any], workers: int) -> list[tuple[int, Any]]:
    if workers == 1:
        return list(run(flow, pairs))
    return run_cluster(flow, pairs, 1, workers)


def freeze(result: Any) -> Any:
    if isinstance(result, list):
        return tuple(freeze(r) for r in result)
    return result


def closed_windows(output: list[tuple[int, Any]]) -> dict[tuple[str, int, int], tuple[Any, int]]:
    """``(key, open, close) -> (result, epoch)`` of the step's output (each window once)."""
    found: dict[tuple[str, int, int], tuple[Any, int]] = {}
    for epoch, (key, (meta, result)) in output:
        window = (key, to_micros(meta.open_time), to_micros(meta.close_time))
        assert window not in found, f"window {window} closed twice"
        found[window] = (freeze(result), epoch)
    return found


def assert_matches_model(
    output: list[tuple[int, Any]], late: list[Any] | None, expected: ModelResult, pairs: list[Any]
) -> None:
    got = closed_windows(output)
    # 1. the windows and their results, as a multiset of (key, open, close, result)
    assert Counter((*w, result) for w, (result, _) in got.items()) == Counter(
        (w.key, w.open, w.close, freeze(w.result)) for w in expected.windows
    )
    # 2. the late values
    if late is not None:
        assert Counter(late) == Counter(expected.late)
    # 3. the epochs: a window the watermark closed at the epoch of the value that moved it;
    #    one still open at the end at the input's last epoch, on any number of workers
    last_input_epoch = max((epoch for epoch, _ in pairs), default=0)
    for w in expected.windows:
        epoch = got[(w.key, w.open, w.close)][1]
        if w.epoch is not None:
            assert epoch == w.epoch, (w, epoch)
        else:
            assert epoch == last_input_epoch, (w, epoch)


# -- strategies -----------------------------------------------------------------------


def spans(low_s: float, high_s: float) -> st.SearchStrategy[int]:
    """Microseconds from ``low_s`` to ``high_s`` seconds: often whole seconds (they meet)."""
    low, high = int(low_s * SECOND), int(high_s * SECOND)
    any_micros = st.integers(low, high)
    if high < SECOND:
        return any_micros
    whole = st.integers(-(-low // SECOND), high // SECOND).map(lambda s: s * SECOND)
    return st.one_of(whole, any_micros)


def waits(scale: int) -> st.SearchStrategy[int]:
    """A clock's wait: none, up to 90 s, a few ``scale`` steps, or an hour (nothing is late)."""
    return st.one_of(
        st.just(0),
        spans(0.5, 90),
        st.integers(1, 8).map(lambda n: n * scale),
        st.just(3600 * SECOND),
    )


#: Window starts: the default (1970), or up to 100 s either side of T0.
starts = st.one_of(
    st.just(0), st.integers(-100 * SECOND, 100 * SECOND).map(lambda d: to_micros(T0) + d)
)


@st.composite
def windowers(draw: st.DrawFn, kind: str) -> Sliding | Session:
    if kind == "tumbling":
        length = draw(spans(0.5, 60))
        return Sliding(length, length, draw(starts))
    if kind == "sliding":  # overlapping windows: offset < length
        offset = draw(spans(0.5, 30))
        length = offset + draw(st.integers(1, 4 * offset))
        return Sliding(length, offset, draw(starts))
    if kind == "gaps":  # windows with gaps between them: offset > length
        length = draw(spans(0.5, 30))
        offset = length + draw(st.integers(1, 2 * length))
        return Sliding(length, offset, draw(starts))
    assert kind == "session"
    return Session(draw(spans(0.5, 40)))


@st.composite
def streams(
    draw: st.DrawFn, scale: int = SECOND, max_size: int = 30, in_order: bool = False
) -> list[Any]:
    """``(epoch, (key, (time, n)))`` pairs from T0 on, out of order (unless ``in_order``).

    A key's consecutive times (sorted) are up to a step apart: about
    ``scale`` (a window's offset, a session's gap) or 10 s; often whole
    seconds, so that they meet window bounds. Out of order: each key's times
    are moved a little (within most waits) or a lot (beyond any), or come
    every other one first, then the ones between (those join sessions).
    ``in_order``: every time is at least the time of every value before it.
    """
    size = draw(st.integers(0, max_size))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=size, max_size=size))
    step = draw(st.sampled_from([scale // 2, scale, 2 * scale, 10 * SECOND]))
    increments = st.one_of(
        st.integers(0, step),
        st.integers(0, step // SECOND).map(lambda s: s * SECOND),
        st.integers(0, 4).map(lambda k: k * step // 4),
    )
    if in_order:
        offsets = list(accumulate(draw(st.lists(increments, min_size=size, max_size=size))))
    else:
        spread = draw(st.sampled_from([0, SECOND, scale, 4 * scale, 60 * SECOND, -1]))
        moves = st.one_of(
            st.integers(-spread, spread), st.integers(-4, 4).map(lambda k: k * spread // 4)
        )
        per_key = {}
        for key in sorted(set(keys)):
            n = keys.count(key)
            times = list(accumulate(draw(st.lists(increments, min_size=n, max_size=n))))
            if spread == -1:
                times = times[::2] + times[1::2]
            elif spread:
                times = [t + draw(moves) for t in times]
            per_key[key] = iter(times)
        offsets = [next(per_key[key]) for key in keys]
    epochs = draw(epoch_lists(size))
    return [
        (epoch, (key, (T0 + timedelta(microseconds=o), n)))
        for n, (epoch, key, o) in enumerate(zip(epochs, keys, offsets, strict=True))
    ]


def scale_of(windower: Sliding | Session) -> int:
    """A time step of the windower's size: its offset, or its gap."""
    return windower.gap if isinstance(windower, Session) else windower.offset


def epoch_lists(size: int) -> st.SearchStrategy[list[int]]:
    """Non-decreasing epochs for ``size`` items."""
    steps = st.lists(st.integers(0, 2), min_size=size, max_size=size)
    return steps.map(lambda s: list(accumulate(s)))


worker_counts = st.sampled_from([1, 2, 3, 4])
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WINDOWERS = ["tumbling", "sliding", "gaps", "session"]


# -- 1. every windower and step, on one to four workers ----------------------------------


@pytest.mark.parametrize("op", list(LOGICS))
@pytest.mark.parametrize("kind", WINDOWERS)
@SETTINGS
@given(data=st.data(), workers=worker_counts)
def test_windows_match_the_model(kind, op, data, workers):
    windower = data.draw(windowers(kind), label="windower")
    wait = data.draw(waits(scale_of(windower)), label="wait")
    pairs = data.draw(streams(scale_of(windower)), label="pairs")
    late: list[Any] = []
    flow = window_flow(windower, wait, op, late=lambda epoch, item: late.append((epoch, item)))
    output = run_on(flow, pairs, workers)
    expected = model(pairs, event_time, wait, windower, LOGICS[op])
    assert_matches_model(output, late, expected, pairs)


# -- 2. processes ---------------------------------------------------------------------

FIXED_PAIRS = [
    (epoch, (key, (T0 + timedelta(seconds=s), n)))
    for n, (epoch, key, s) in enumerate(
        [
            (0, "a", 0),
            (0, "b", 3),
            (0, "a", 4),
            (0, "c", 9.5),
            (1, "a", 11),
            (1, "b", 1),
            (1, "a", 2),
            (1, "c", 30),
            (2, "b", 12),
            (2, "a", 25),
            (2, "a", 9),
            (3, "c", 16),
            (3, "b", 40),
            (3, "a", 27),
            (4, "a", 60),
            (4, "c", 61),
            (4, "b", 14),
        ]
    )
]


@pytest.mark.parametrize(
    "windower",
    [Sliding(10 * SECOND, 10 * SECOND), Sliding(10 * SECOND, 4 * SECOND), Session(5 * SECOND)],
    ids=["tumbling", "sliding", "session"],
)
def test_two_processes_of_two_workers_match_the_model(windower, tmp_path):
    late = LateToFiles(tmp_path)
    flow = window_flow(windower, 2 * SECOND, "collect", late=late)
    output = run_cluster(flow, FIXED_PAIRS, 2, 2)
    expected = model(FIXED_PAIRS, event_time, 2 * SECOND, windower, COLLECT)
    assert expected.late  # the example has late values
    assert_matches_model(output, late.read(), expected, FIXED_PAIRS)


@pytest.mark.parametrize("workers", [(1, 1), (2, 2)], ids=["one", "two_processes"])
def test_the_late_stream_carries_the_late_values_at_their_epochs(workers, tmp_path):
    """A chain window step's returned late stream, read by a graph step, holds the late values."""
    import timelypy.flow.operators as graph_ops

    late_files = LateToFiles(tmp_path)
    clock = EventClockConfig(event_time, timedelta(seconds=2), now_getter=frozen_now)
    flow = Dataflow()
    late = flow.collect_window(
        "win", clock, TumblingWindowConfig(timedelta(seconds=10)), window_meta=True
    )
    flow.capture()
    graph_ops.inspect_debug("late", late, lambda step, item, epoch, worker: late_files(epoch, item))
    procs, per_proc = workers
    output = (
        run_cluster(flow, FIXED_PAIRS, procs, per_proc)
        if procs > 1
        else list(run(flow, FIXED_PAIRS))
    )
    expected = model(
        FIXED_PAIRS, event_time, 2 * SECOND, Sliding(10 * SECOND, 10 * SECOND), COLLECT
    )
    assert expected.late
    assert_matches_model(output, late_files.read(), expected, FIXED_PAIRS)


# -- 3. epochs do not change results when nothing is late -------------------------------


@pytest.mark.parametrize("kind", WINDOWERS)
@SETTINGS
@given(data=st.data(), workers=worker_counts)
def test_epochs_do_not_change_results_when_nothing_is_late(kind, data, workers):
    windower = data.draw(windowers(kind), label="windower")
    wait = data.draw(waits(scale_of(windower)), label="wait")
    pairs = data.draw(streams(scale_of(windower), in_order=True), label="pairs")
    op = data.draw(st.sampled_from(list(LOGICS)), label="op")
    again = data.draw(epoch_lists(len(pairs)), label="other epochs")
    reassigned = [(epoch, item) for epoch, (_, item) in zip(again, pairs, strict=True)]

    def results(pairs: list[Any]) -> Counter:
        late: list[Any] = []
        flow = window_flow(windower, wait, op, late=lambda e, item: late.append(item))
        output = run_on(flow, pairs, workers)
        assert late == []
        return Counter((*w, result) for w, (result, _) in closed_windows(output).items())

    first = results(pairs)
    assert results(reassigned) == first
    expected = model(pairs, event_time, wait, windower, LOGICS[op])
    assert first == Counter((w.key, w.open, w.close, freeze(w.result)) for w in expected.windows)
