"""Windowing steps (seed 003): a first, hand-checked look at each windower and error.

The property tests against a plain-Python model of each windower are in
``test_window.py``; these pin the basics by hand.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from timelypy.errors import FlowError, StateKeyError
from timelypy.flow import AdvanceTo, Dataflow, Emit, ManualInputConfig, run, run_cluster
from timelypy.flow.window import (
    EventClockConfig,
    SessionWindowConfig,
    SlidingWindowConfig,
    SystemClockConfig,
    TumblingWindowConfig,
    WindowConfig,
    WindowMetadata,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def frozen_clock(wait: float = 0) -> EventClockConfig:
    """Event time from the value itself; a constant system clock (deterministic watermark)."""
    return EventClockConfig(lambda v: v, timedelta(seconds=wait), now_getter=lambda: T0)


EVENTS = [("a", at(s)) for s in (0, 4, 8, 12, 13, 30, 2)] + [("b", at(s)) for s in (5, 14)]


def windows(output):
    return sorted(
        (key, meta.open_time - T0, meta.close_time - T0, result)
        for _, (key, (meta, result)) in output
    )


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def test_tumbling_counts_and_a_late_value():
    late = []
    flow = Dataflow()
    flow.count_window(
        "count",
        frozen_clock(),
        TumblingWindowConfig(s(10)),
        window_meta=True,
        late=lambda epoch, item: late.append((epoch, item)),
    )
    flow.capture()
    out = list(run(flow, [(0, e) for e in EVENTS]))
    assert windows(out) == [
        ("a", s(0), s(10), 3),
        ("a", s(10), s(20), 2),
        ("a", s(30), s(40), 1),
        ("b", s(0), s(10), 1),
        ("b", s(10), s(20), 1),
    ]
    # ("a", 2 s) came after "a"'s watermark reached 30 s: late, never folded
    assert late == [(0, ("a", at(2)))]


def test_sessions_join_values_within_the_gap_on_two_workers():
    flow = Dataflow()
    flow.collect_window("sessions", frozen_clock(), SessionWindowConfig(s(5)), window_meta=True)
    flow.capture()
    out = run_cluster(flow, [(0, e) for e in EVENTS], 1, 2)
    assert windows(out) == [
        ("a", s(0), s(13), [at(0), at(4), at(8), at(12), at(13)]),
        ("a", s(30), s(30), [at(30)]),
        ("b", s(5), s(5), [at(5)]),
        ("b", s(14), s(14), [at(14)]),
    ]


def test_sliding_windows_close_at_the_epoch_of_the_value_that_passes_them():
    flow = Dataflow()
    flow.count_window("slide", frozen_clock(), SlidingWindowConfig(s(10), s(5)), window_meta=True)
    flow.capture()
    out = sorted(run(flow, [(i, e) for i, e in enumerate(EVENTS)]))
    # ("a", 12 s) at epoch 3 moves "a"'s watermark to 12 s: [-5, 5) closes there
    assert (2, ("a", (WindowMetadata(at(-5), at(5)), 2))) in out
    assert (3, ("a", (WindowMetadata(at(0), at(10)), 3))) in out
    # windows still open when the input ends close at the last epoch seen (8)
    assert (8, ("b", (WindowMetadata(at(10), at(20)), 1))) in out


def test_reduce_and_fold_windows():
    values = [(0, ("k", (at(t), n))) for t, n in [(1, 5), (3, 7), (11, 1)]]
    clock = EventClockConfig(lambda v: v[0], s(0), now_getter=lambda: T0)
    flow = Dataflow()
    flow.map(lambda kv: (kv[0], kv[1]))
    flow.reduce_window(
        "max", clock, TumblingWindowConfig(s(10)), lambda a, b: max(a, b, key=lambda v: v[1])
    )
    flow.capture()
    assert sorted(item for _, item in run(flow, values)) == [("k", (at(3), 7)), ("k", (at(11), 1))]
    flow = Dataflow()
    flow.fold_window(
        "sum", clock, TumblingWindowConfig(s(10)), lambda: 0, lambda acc, v: acc + v[1]
    )
    flow.capture()
    assert sorted(item for _, item in run(flow, values)) == [("k", 1), ("k", 12)]


def test_system_clock_closes_windows_on_time_without_new_input():
    # One value, then the input stays open and quiet (it only re-affirms epoch 0) for
    # longer than the value's 0.2 s window, then one more value at epoch 1.
    def input_builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(0)
        yield Emit(("k", "x"))
        for _ in range(60):
            time.sleep(0.01)
            yield AdvanceTo(0)
        yield AdvanceTo(1)
        yield Emit(("k", "y"))

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(input_builder))
    flow.collect_window("recent", SystemClockConfig(), TumblingWindowConfig(s(0.2)))
    flow.capture()
    out = list(run(flow))
    # "x" was emitted by the worker's timer, while epoch 0 was still the input's epoch
    assert out == [(0, ("k", ["x"])), (1, ("k", ["y"]))]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: EventClockConfig(lambda v: v, timedelta(seconds=-1)), "wait_for_system_duration"),
        (lambda: TumblingWindowConfig(timedelta(0)), "the window length must be positive"),
        (lambda: SlidingWindowConfig(s(10), s(-1)), "the window offset must be positive"),
        (lambda: SessionWindowConfig(s(0)), "the session gap must be positive"),
        (lambda: TumblingWindowConfig(s(10), start_at=datetime(2024, 1, 1)), "timezone-aware"),
        (lambda: "tumbling", "the windower must be"),
    ],
)
def test_bad_configs_name_the_step(make, message):
    config = make()
    clock, windower = (
        (config, TumblingWindowConfig(s(1)))
        if isinstance(config, EventClockConfig)
        else (frozen_clock(), config)
    )
    flow = Dataflow()
    with pytest.raises(FlowError, match=message) as info:
        flow.count_window("counting", clock, windower)
    assert "'counting'" in str(info.value)


def test_bad_items_and_times_name_the_step():
    flow = Dataflow()
    flow.count_window("counting", frozen_clock(), TumblingWindowConfig(s(10)))
    flow.capture()
    with pytest.raises(StateKeyError, match="'counting'"):
        list(run(flow, [(0, "not a pair")]))
    with pytest.raises(StateKeyError, match="'counting'"):
        list(run(flow, [(0, (1, at(0)))]))
    with pytest.raises(FlowError, match=r"'counting'.*timezone-aware"):
        list(run(flow, [(0, ("k", datetime(2024, 1, 1)))]))
    with pytest.raises(FlowError, match=r"'counting'.*must be a datetime"):
        list(run(flow, [(0, ("k", 17))]))

    def broken(value):
        raise KeyError("no time here")

    flow = Dataflow()
    flow.count_window("counting", EventClockConfig(broken), TumblingWindowConfig(s(10)))
    flow.capture()
    with pytest.raises(KeyError) as info:
        list(run(flow, [(0, ("k", 1))]))
    assert any("'counting'" in note and "dt_getter" in note for note in info.value.__notes__)


def test_a_session_fold_window_without_a_merger_is_refused_when_the_flow_is_built():
    flow = Dataflow()
    with pytest.raises(FlowError, match=r"'sum' \(fold_window\).*needs a merger"):
        flow.fold_window(
            "sum", frozen_clock(10), SessionWindowConfig(s(5)), lambda: 0, lambda a, v: a + 1
        )

    class Hourly(WindowConfig):
        pass

    with pytest.raises(FlowError, match="Hourly is not one of the window configs"):
        flow.count_window("hours", frozen_clock(10), Hourly())
    flow = Dataflow()
    flow.fold_window(
        "sum",
        frozen_clock(10),
        SessionWindowConfig(s(5)),
        lambda: 0,
        lambda a, v: a + 1,
        lambda a, b: a + b,
    )
    flow.capture()
    assert [item for _, item in run(flow, [(0, ("k", at(t))) for t in (0, 8, 4)])] == [("k", 3)]


# -- recovery ------------------------------------------------------------------------


def failing_input(fail_at):
    """Epoch e carries values of keys a and b at times 7e and 7e + 3 s; fails once at fail_at."""

    def input_builder(worker_index, worker_count, resume_epoch):
        if worker_index != 0:
            return
        for epoch in range(resume_epoch, 12):
            yield AdvanceTo(epoch)
            if epoch == fail_at:
                raise RuntimeError(f"injected failure at epoch {epoch}")
            for key in "ab":
                yield Emit((key, at(7 * epoch)))
                yield Emit((key, at(7 * epoch + 3)))
            time.sleep(0.02)  # earlier epochs close, and commit, before the failure

    return input_builder


def windowed_flow(fail_at=None):
    flow = Dataflow()
    flow.input("inp", ManualInputConfig(failing_input(fail_at)))
    flow.collect_window("tumbling", frozen_clock(2), TumblingWindowConfig(s(10)), window_meta=True)
    flow.capture()
    return flow


def test_a_failure_mid_window_resumes_to_the_failure_free_output(tmp_path):
    from collections import Counter

    from timelypy.recovery import RecoveryConfig

    def hashable(pairs):
        return Counter((e, (k, (m, tuple(vs)))) for e, (k, (m, vs)) in pairs)

    clean = hashable(run(windowed_flow()))
    config = RecoveryConfig(tmp_path / "store", commit_interval=0)
    first = []
    with pytest.raises(RuntimeError, match="injected failure at epoch 8"):
        for pair in run(windowed_flow(fail_at=8), recovery_config=config):
            first.append(pair)
    resume = config.store().resume_epoch()
    assert 0 < resume <= 8
    # some window was open across the resume epoch: its values came from both executions
    second = list(run_cluster(windowed_flow(), None, 1, 2, recovery_config=config))
    union = hashable(p for p in first if p[0] < resume) + hashable(second)
    assert union == clean


# -- the parts of a window step, alone -------------------------------------------------


def _logic(windower: object, wait: float = 0) -> object:
    from timelypy.flow.dataflow import Dataflow as _Flow
    from timelypy.flow.window_ops import WindowStepLogic

    flow = _Flow()
    flow.count_window("w", frozen_clock(wait), windower)
    return WindowStepLogic(flow.steps[-1].options, "w")


def test_a_key_state_holds_its_clock_and_windows_by_name():
    from timelypy.flow.window_ops import KeyState

    key = KeyState(5.0, session=False)
    assert key.watermark(105.0) == 100.0 and key.open == {} and key.next_session == 0
    # a snapshot of an earlier version (a list) is read back as a KeyState
    old = KeyState.restored([1.0, {3: 2}, None, 0], session=False)
    assert (old.lag, old.open, old.closes) == (1.0, {3: 2}, None)


def test_the_step_logic_applies_a_batch_and_closes_what_the_watermark_passes():
    from timelypy.flow.window_ops import KeyState

    logic = _logic(TumblingWindowConfig(s(10), start_at=T0))
    states: dict[str, KeyState] = {}
    touched, late = logic.apply(states, {}, [("a", at(1)), ("a", at(12))], 0, 0, 0)
    assert set(touched) == {"a"} and late == []
    out: list = []
    logic.close("a", states["a"], states["a"].watermark(0), out)
    assert out == [("a", 1)]  # [0, 10) closed by 12 s (no window_meta: the count alone)
    assert list(states["a"].open) == [1]  # [10, 20) is open
    _, late = logic.apply(states, {}, [("a", at(3))], 0, 1, 0)
    assert late == [("a", at(3))]  # behind the key's watermark (12 s)


def test_a_key_with_no_open_window_is_forgotten_and_its_late_values_stay_late():
    """State is freed: 500 keys, each one value; their windows close on the clock and the
    keys are dropped; a straggler for an emitted window is still late."""
    import datetime as dt

    import timelypy.flow.window_ops as window_ops

    late: list = []
    start = dt.datetime.now(UTC)
    flow = Dataflow()
    flow.count_window(
        "counts",
        EventClockConfig(lambda v: v, timedelta(0)),  # the machine's clock
        TumblingWindowConfig(timedelta(milliseconds=50), start_at=start),
        late=lambda epoch, item: late.append(item),
    )
    flow.capture()

    def source(worker_index: int, worker_count: int, resume_epoch: int):
        yield AdvanceTo(0)
        for i in range(500):
            yield Emit((f"k{i}", start))
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # let the windows close on the clock
            yield AdvanceTo(1)
            time.sleep(0.005)
        yield Emit(("k7", start))  # for the emitted window of k7, which was forgotten

    forgotten: list[str] = []
    sizes: list[int] = []
    real_forget, real_run = window_ops.WorkerWindows.forget, window_ops.WorkerWindows.run_items

    def forget(self, key, key_state):
        forgotten.append(key)
        real_forget(self, key, key_state)

    def run_items(self, cap, items):
        sizes.append(len(self.states))
        real_run(self, cap, items)

    window_ops.WorkerWindows.forget = forget  # type: ignore[method-assign]
    window_ops.WorkerWindows.run_items = run_items  # type: ignore[method-assign]
    try:
        out = list(run(flow, ManualInputConfig(source)))
    finally:
        window_ops.WorkerWindows.forget = real_forget  # type: ignore[method-assign]
        window_ops.WorkerWindows.run_items = real_run  # type: ignore[method-assign]
    assert sorted(n for _, (_, n) in out) == [1] * 500
    assert sorted(forgotten) == sorted(f"k{i}" for i in range(500))
    assert sizes[-1] == 0  # when the straggler came, no key was held
    assert late == [("k7", start)]
