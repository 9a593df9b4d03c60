"""Windowing operators of the stream graph: every backend, recovery, freed state, bad input.

Agreement with bytewax 0.21 line for line is in test_bytewax_compat.py;
here the same random streams must give the same windows on one worker,
threads and processes, across an aborted execution, and the state of keys
whose windows closed must be gone.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StepError
from timelypy.flow import operators
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.operators import windowing as w
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.sources import DynamicSource, StatelessSourcePartition
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from .graph_helpers import BACKENDS, ZERO, collect

ALIGN = datetime(2024, 1, 1, tzinfo=UTC)


def _fixed_now() -> datetime:
    return ALIGN


def events(seed: int, n: int = 150) -> list[tuple[str, tuple[datetime, int]]]:
    """Keyed values with timestamps that mostly rise, sometimes jump back (late ones)."""
    rng = random.Random(seed)
    t, out = 0, []
    for i in range(n):
        t += rng.choice([0, 1, 2, 5, 30]) - (rng.random() < 0.2) * rng.randint(0, 40)
        out.append((rng.choice("abcd"), (ALIGN + timedelta(seconds=max(t, 0)), i)))
    return out


def _at(value: tuple[datetime, int]) -> datetime:
    return value[0]


def _windows(items: list[Any]) -> Any:
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        s = op.input("inp", flow, TestingSource(items, batch_size=3))
        clock = w.EventClock(_at, timedelta(seconds=5), now_getter=_fixed_now)
        tumbling = w.TumblingWindower(timedelta(seconds=10), ALIGN)
        sliding = w.SlidingWindower(timedelta(seconds=10), timedelta(seconds=4), ALIGN)
        session = w.SessionWindower(timedelta(seconds=6))
        fold = w.fold_window(
            "fold", s, clock, tumbling, list, lambda a, v: [*a, v[1]], lambda a, b: a + b
        )
        coll = w.collect_window("collect", s, clock, sliding)
        sess = w.fold_window(
            "sessions", s, clock, session, list, lambda a, v: [*a, v[1]], lambda a, b: a + b
        )
        meta = op.map_value(
            "meta", sess.meta, lambda m: (m[0], m[1].open_time.isoformat(), sorted(m[1].merged_ids))
        )
        return {
            "fold": fold.down,
            "late": op.map_value("late_i", fold.late, lambda wv: (wv[0], wv[1][1])),
            "collect": op.map_value("vals", coll.down, lambda wv: (wv[0], [v[1] for v in wv[1]])),
            "sessions": sess.down,
            "meta": meta,
        }

    return build


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_are_the_same_on_every_backend(backend, tmp_path):
    items = events(7)
    want = collect("one", tmp_path / "ref", _windows(items))
    assert want["late"], "the stream has late values"
    got = collect(backend, tmp_path / backend, _windows(items))
    for name in want:
        assert Counter(map(repr, got[name])) == Counter(map(repr, want[name])), name


def _abort_flow(items: list[Any], out: list[Any]) -> Dataflow:
    flow = Dataflow("win")
    s = op.input("inp", flow, TestingSource(items, batch_size=2))
    clock = w.EventClock(_at, timedelta(seconds=5), now_getter=_fixed_now)
    folded = w.fold_window(
        "fold",
        s,
        clock,
        w.TumblingWindower(timedelta(seconds=10), ALIGN),
        list,
        lambda a, v: [*a, v[1]],
        lambda a, b: a + b,
    )
    op.output("down", folded.down, TestingSink(out))
    op.output("late", op.map("tag", folded.late, lambda kv: ("late", kv)), TestingSink(out))
    return flow


def test_windows_open_across_an_abort_resume_to_the_failure_free_result(tmp_path):
    items = events(11, 80)
    clean: list[Any] = []
    run_main(_abort_flow(items, clean), epoch_interval=ZERO)
    aborting = [
        *items[:25],
        TestingSource.ABORT(),
        *items[25:60],
        TestingSource.ABORT(),
        *items[60:],
    ]
    config = RecoveryConfig(tmp_path / "db", partitions=2)
    got: list[Any] = []
    for _ in range(3):
        run_main(_abort_flow(aborting, got), epoch_interval=ZERO, recovery_config=config)
    assert Counter(map(repr, got)) == Counter(map(repr, clean))


def test_a_system_clock_window_closes_on_time_and_resumes_after_the_resume_epoch(tmp_path):
    # two values, a pause longer than the window, then the end: the first window
    # closes on the clock during the pause, the second at the end of the input
    items = [("k", 1), TestingSource.PAUSE(timedelta(seconds=0.3)), ("k", 2)]
    flow = Dataflow("sys")
    s = op.input("inp", flow, TestingSource(items))
    windows = w.collect_window(
        "collect",
        s,
        w.SystemClock(),
        w.TumblingWindower(timedelta(seconds=0.1), datetime.now(UTC)),
    )
    out: list[Any] = []
    op.output("out", op.map_value("vals", windows.down, lambda wv: wv[1]), TestingSink(out))
    run_main(flow, epoch_interval=timedelta(seconds=0.05))
    assert out == [("k", [1]), ("k", [2])]


def test_the_state_of_keys_whose_windows_closed_is_freed():
    import time

    from timelypy.flow._windows import WindowsLogic

    now = [ALIGN]
    clock = w.EventClock(_at, timedelta(0), now_getter=lambda: now[0])
    logic = WindowsLogic(
        clock,
        w.TumblingWindower(timedelta(seconds=1), ALIGN),
        lambda state: w._FoldLogic(lambda a, v: a + 1, lambda a, b: a + b, state or 0),
        True,
        "test.count",
        tombstones=1000,
    )
    # 20,000 session-like keys, one value each: each key's window stays open...
    for n in range(20):
        batch = [(f"user{n}-{i}", (ALIGN + timedelta(seconds=n), i)) for i in range(1000)]
        assert logic.apply(0, batch) == []
    assert len(logic.keys) == 20_000
    # ...until the system time moves on an hour: every window closes on its timer
    now[0] += timedelta(hours=1)
    emitted, changed = logic.notify(time.time())
    assert sum(1 for _, (kind, _, _) in emitted if kind == 0) == 20_000
    assert len(changed) == 20_000
    assert logic.keys == {}, "no key keeps state once its windows closed"
    assert logic.timers.at == {} and logic.wake() is None
    assert len(logic.tombstones) == 1000, "the forgotten keys' watermarks are bounded"
    assert logic.snapshot("user3-7") is None


def test_a_forgotten_key_never_reopens_an_emitted_window():
    flow = Dataflow("reopen")
    at = [ALIGN + timedelta(seconds=s) for s in (1, 15, 2)]
    # k's window [0, 10) closes at 15 (wait 0); then a value at 2 for k is late, not
    # a second window 0
    s = op.input("inp", flow, TestingSource([("k", (t, i)) for i, t in enumerate(at)]))
    clock = w.EventClock(_at, timedelta(0), now_getter=_fixed_now)
    out = w.count_window(
        "count",
        op.key_rm("rm", s),
        clock,
        w.TumblingWindower(timedelta(seconds=10), ALIGN),
        lambda v: "k",
    )
    down: list[Any] = []
    late: list[Any] = []
    op.output("down", out.down, TestingSink(down))
    op.output("late", out.late, TestingSink(late))
    run_main(flow, epoch_interval=ZERO)
    assert sorted(down) == [("k", (0, 1)), ("k", (1, 1))]
    assert late == [("k", (0, (at[2], 2)))]


def test_bad_windowing_input_is_refused_when_the_flow_is_built():
    flow = Dataflow("bad")
    s = op.input("inp", flow, TestingSource([("k", 1)]))
    clock = w.SystemClock()
    tumbling = w.TumblingWindower(timedelta(seconds=1), ALIGN)
    with pytest.raises(FlowError, match="needs a callable merger"):
        w.fold_window("f", s, clock, w.SessionWindower(timedelta(1)), list, list.__add__, None)  # type: ignore[arg-type]
    with pytest.raises(FlowError, match="needs a Clock"):
        w.collect_window("c", s, "system", tumbling)  # type: ignore[arg-type]
    with pytest.raises(FlowError, match="needs a Windower"):
        w.collect_window("c", s, clock, timedelta(1))  # type: ignore[arg-type]
    with pytest.raises(FlowError, match="aware datetime"):
        w.TumblingWindower(timedelta(seconds=1), datetime(2024, 1, 1))
    with pytest.raises(FlowError, match="offset can't be longer"):
        w.SlidingWindower(timedelta(seconds=1), timedelta(seconds=2), ALIGN)
    with pytest.raises(FlowError, match="positive timedelta"):
        w.TumblingWindower(timedelta(0), ALIGN)
    with pytest.raises(FlowError, match="wait_for_system_duration"):
        w.EventClock(_at, timedelta(seconds=-1))
    with pytest.raises(FlowError, match="now_getter must return an aware datetime"):
        w.EventClock(_at, timedelta(0), now_getter=lambda: datetime(2024, 1, 1))
    with pytest.raises(FlowError, match="list, set or dict"):
        w.collect_window("c2", s, clock, tumbling, into=tuple)


def test_a_naive_timestamp_names_the_step():
    flow = Dataflow("naive")
    s = op.input("inp", flow, TestingSource([("k", datetime(2024, 1, 1))]))
    clock = w.EventClock(lambda v: v, timedelta(0))
    out = w.collect_window("collect", s, clock, w.TumblingWindower(timedelta(1), ALIGN))
    op.output("out", out.down, TestingSink([]))
    with pytest.raises(StepError, match=r"step 'naive\.collect' on worker 0") as failure:
        run_main(flow)
    assert isinstance(failure.value.__cause__, FlowError)
    assert "must return an aware datetime" in str(failure.value)


def test_collect_into_set_and_dict_and_join_window():
    flow = Dataflow("into")
    t = ALIGN + timedelta(seconds=1)
    s = op.input("inp", flow, TestingSource([("k", ("x", t)), ("k", ("y", t)), ("k", ("x", t))]))
    clock = w.EventClock(lambda v: v[1], timedelta(seconds=5))
    tumbling = w.TumblingWindower(timedelta(seconds=10), ALIGN)
    sets: list[Any] = []
    dicts: list[Any] = []
    op.output(
        "sets",
        w.collect_window("s", op.map_value("v", s, lambda v: v), clock, tumbling, into=set).down,
        TestingSink(sets),
    )
    op.output(
        "dicts", w.collect_window("d", s, clock, tumbling, into=dict).down, TestingSink(dicts)
    )
    a = op.input("a", flow, TestingSource([("k", (t, 1))]))
    b = op.input("b", flow, TestingSource([("k", (t, "B"))]))
    joined: list[Any] = []
    op.output(
        "joined",
        w.join_window("j", w.EventClock(_at, timedelta(seconds=5)), tumbling, a, b).down,
        TestingSink(joined),
    )
    run_main(flow)
    assert sets == [("k", (0, {("x", t), ("y", t)}))]
    assert dicts == [("k", (0, {"x": t, "y": t}))]
    assert joined == [("k", (0, ((t, 1), (t, "B"))))]
    assert operators.windowing is w


def jittered(seed: int, n: int = 200) -> list[tuple[str, tuple[datetime, int]]]:
    """Timestamps that wander back and forth by a few seconds: sessions bridge and merge."""
    rng = random.Random(seed)
    t, out = 100, []
    for i in range(n):
        t += rng.choice([0, 3, 6, 12, 25]) - rng.choice([0, 0, 5, 9])
        out.append((rng.choice("ab"), (ALIGN + timedelta(seconds=max(t, 0)), i)))
    return out


def _per_key(items: list[tuple[str, Any]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for key, item in items:
        grouped.setdefault(key, []).append(item)
    return grouped


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_gives_every_event_the_general_engine_gives(seed):
    """Built-in clocks, windowers and folds run in microseconds; same events, same order."""
    from timelypy.flow._fast_windows import FastWindowsLogic
    from timelypy.flow._windows import WindowsLogic

    rng = random.Random(seed)
    now = [ALIGN]
    clock = w.EventClock(_at, timedelta(seconds=rng.choice([0, 2, 7])), now_getter=lambda: now[0])
    windower = rng.choice(
        [
            w.TumblingWindower(timedelta(seconds=10), ALIGN),
            w.SlidingWindower(timedelta(seconds=10), timedelta(seconds=3), ALIGN),
            w.SessionWindower(timedelta(seconds=rng.choice([0, 4, 9]))),
        ]
    )
    ordered = rng.random() < 0.5

    def folder(acc: list[int], value: Any) -> list[int]:
        return [*acc, value[1]]

    def merger(a: list[int], b: list[int]) -> list[int]:
        return a + b  # not commutative: the order of merges shows

    def make(state: Any) -> Any:
        return w._FoldLogic(folder, merger, [] if state is None else state)

    make.fold = (list, folder, merger)  # type: ignore[attr-defined]
    plan = w.fast_plan(clock, windower, make)
    assert plan is not None
    general = WindowsLogic(clock, windower, make, ordered, "s")
    fast = FastWindowsLogic(plan, make.fold, ordered, "s")
    values = events(seed, 200) if seed % 2 else jittered(seed)
    for start in range(0, len(values), 7):
        batch = values[start : start + 7]
        # each key's items in the same order (keys may interleave differently)
        assert _per_key(general.apply(0, batch)) == _per_key(fast.apply(0, batch))
        if rng.random() < 0.3:
            # the clock moves on; every key with an open window or a queue is woken
            # (the engines schedule wake-ups differently: the fast path when the
            # watermark will reach the window, the general one at its close time)
            now[0] += timedelta(seconds=rng.choice([1, 5, 20]))
            assert (general.wake() is None) == (fast.wake() is None)
            later = time.time() + 10**6 * (start + 1)  # past any wake-up either asked for
            woken = [general.notify(later), fast.notify(later)]
            assert woken[0][1] == woken[1][1]  # the same keys (in another order)
            assert sorted(map(repr, woken[0][0])) == sorted(map(repr, woken[1][0]))
    for key in "abcd":
        assert (general.snapshot(key) is None) == (fast.snapshot(key) is None)
    assert general.eof() == fast.eof()
    assert general.keys == {} and fast.keys == {}


_batches = st.integers(min_value=1, max_value=9)
_streams = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(min_value=0, max_value=120)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=25, deadline=None)
@given(stream=_streams, batch=_batches, wait=st.integers(min_value=0, max_value=15))
def test_windows_do_not_depend_on_the_number_of_workers(stream, batch, wait):
    """Property: one worker and three give the same windows, late values and metadata.

    At the same epochs, too: those closed by the end of the input included
    (they carry the input's last epoch, whichever worker closes them).
    """
    from timelypy.flow.testing import cluster_main

    items = [(key, (ALIGN + timedelta(seconds=t), i)) for i, (key, t) in enumerate(stream)]

    def outputs(workers: int) -> dict[str, Counter[str]]:
        flow = Dataflow("prop")
        s = op.input("inp", flow, TestingSource(items, batch))
        clock = w.EventClock(_at, timedelta(seconds=wait), now_getter=_fixed_now)
        got: dict[str, list[Any]] = {"down": [], "late": [], "meta": []}
        for name, windower in (
            ("tumbling", w.TumblingWindower(timedelta(seconds=10), ALIGN)),
            ("session", w.SessionWindower(timedelta(seconds=6))),
        ):
            out = w.collect_window(name, s, clock, windower)
            for kind, seen in got.items():

                def record(step_id: str, item: Any, epoch: int, worker: int, seen=seen) -> None:
                    seen.append((step_id, epoch, item))

                op.inspect_debug(f"{name}_{kind}", getattr(out, kind), record)
        cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=ZERO)
        return {kind: Counter(map(repr, values)) for kind, values in got.items()}

    assert outputs(1) == outputs(3)


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stream=_streams, batch=_batches, wait=st.integers(min_value=0, max_value=15))
def test_windows_on_two_processes_match_one_worker_epoch_for_epoch(tmp_path, stream, batch, wait):
    """Property: two processes of two workers give one worker's windows, at the same epochs."""
    from .graph_helpers import run_on

    items = [(key, (ALIGN + timedelta(seconds=t), i)) for i, (key, t) in enumerate(stream)]
    run_id = uuid.uuid4().hex

    def outputs(backend: str) -> Counter[str]:
        path = str(tmp_path / f"{run_id}-{backend}.txt")
        flow = Dataflow("prop")
        s = op.input("inp", flow, TestingSource(items, batch))
        clock = w.EventClock(_at, timedelta(seconds=wait), now_getter=_fixed_now)
        for name, windower in (
            ("tumbling", w.TumblingWindower(timedelta(seconds=10), ALIGN)),
            ("session", w.SessionWindower(timedelta(seconds=6))),
        ):
            out = w.collect_window(name, s, clock, windower)
            for kind in ("down", "late", "meta"):
                op.inspect_debug(f"{name}_{kind}", getattr(out, kind), _step_recorder(path))
        run_on(backend, flow)
        return Counter(Path(path).read_text().splitlines()) if Path(path).exists() else Counter()

    one = outputs("one")
    assert one  # every value comes out: in a window or late
    assert outputs("processes") == one


def _step_recorder(path: str) -> Any:
    def record(step_id: str, item: Any, epoch: int, worker: int) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{step_id}|{epoch}|{item!r}\n")

    return record


def _epoch_recorder(path: str) -> Any:
    def record(step_id: str, item: Any, epoch: int, worker: int) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{epoch}|{item!r}\n")

    return record


def test_windows_the_end_closes_carry_the_inputs_last_epoch_on_every_backend(tmp_path):
    """Two inputs ending at different epochs: what the end of input closes carries the later.

    The same (epoch, window) pairs on one worker, three threads and two
    processes of two workers.
    """
    from .graph_helpers import run_on

    rng = random.Random(37)

    def values(keys: str, n: int) -> list[Any]:
        at = [rng.randint(0, 300) for _ in range(n)]
        return [(rng.choice(keys), (ALIGN + timedelta(seconds=t), i)) for i, t in enumerate(at)]

    long, short = values("abcde", 30), values("cdefg", 10)
    seen: dict[str, Counter[str]] = {}
    for backend in BACKENDS:
        path = str(tmp_path / f"{backend}.txt")
        flow = Dataflow("ends")
        merged = op.merge(
            "both",
            op.input("long", flow, TestingSource(long, 2)),
            op.input("short", flow, TestingSource(short, 5)),
        )
        clock = w.EventClock(_at, timedelta(seconds=30), now_getter=_fixed_now)
        windower = w.TumblingWindower(timedelta(seconds=20), ALIGN)
        out = w.collect_window("win", merged, clock, windower)
        op.inspect_debug("down", out.down, _epoch_recorder(path))
        run_on(backend, flow)
        seen[backend] = Counter(Path(path).read_text().splitlines())
    one = seen["one"]
    # the long input sends 15 batches, an epoch each from epoch 0: its last epoch is 15
    assert max(int(line.split("|")[0]) for line in one) == 15
    assert any(line.startswith("15|") for line in one)  # the wait kept windows open to the end
    assert seen["threads"] == one
    assert seen["processes"] == one


class _Shares(DynamicSource[Any]):
    """Worker ``i`` of ``n`` reads items ``i, i + n, ...`` in batches of 3; a worker's pace
    depends on its index (worker 0 rushes ahead, the others lag)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        return _SharePart(self.items[worker_index::worker_count], worker_index)


class _SharePart(StatelessSourcePartition[Any]):
    def __init__(self, items: list[Any], index: int) -> None:
        self.items, self.index = items, index

    def next_batch(self) -> list[Any]:
        if not self.items:
            raise StopIteration()
        if self.index:
            time.sleep(0.002 * self.index)
        batch, self.items = self.items[:3], self.items[3:]
        return batch


def _aligned_windows(
    items: list[Any], workers: int, aligned: bool = True, processes: int = 1
) -> Counter[str]:
    from timelypy.flow import run_cluster
    from timelypy.flow.sinks import CaptureSink
    from timelypy.flow.testing import cluster_main

    flow = Dataflow("aligned")
    s = op.input("inp", flow, _Shares(items))
    clock = w.EventClock(_at, timedelta(seconds=1), now_getter=_fixed_now, aligned=aligned)
    out = w.collect_window("win", s, clock, w.TumblingWindower(timedelta(seconds=10), ALIGN))
    got: list[Any] = []
    # ordered=False: a window's list is in arrival order; compare contents as sorted lists
    sink = op.map("sorted", out.down, lambda kv: (kv[0], (kv[1][0], sorted(kv[1][1]))))
    late = op.map("late", out.late, lambda kv: ("LATE", kv))
    if processes > 1:  # the items come back from the other processes too
        op.output("out", op.merge("all", sink, late), CaptureSink())
        captured = run_cluster(
            flow, proc_count=processes, worker_count_per_proc=workers, epoch_interval=ZERO
        )
        return Counter(repr(item) for _, item in captured)
    op.output("out", op.merge("all", sink, late), TestingSink(got))
    cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=ZERO)
    return Counter(map(repr, got))


def test_an_aligned_clock_gives_the_same_windows_on_one_two_and_four_readers():
    """One watermark for the step, from every worker's progress: no reader runs ahead.

    Each worker reads its share of a stream in time order, at its own
    pace. Per-key watermarks follow arrival order, so with several readers
    a key's values from a lagging reader can come after the watermark a
    faster reader moved (measured on this stream without ``aligned``: 0, 11
    and 41 late values on 1, 2 and 4 readers); the aligned watermark waits
    for the slowest.
    """
    rng = random.Random(7)
    items = [(rng.choice("abc"), (ALIGN + timedelta(seconds=t), t)) for t in range(0, 120)]
    one = _aligned_windows(items, 1)
    assert not any(line.startswith("('LATE'") for line in one)
    expected: dict[tuple[str, int], list[Any]] = {}
    for key, (at, t) in items:
        expected.setdefault((key, t // 10), []).append((at, t))
    assert sum(one.values()) == len(expected)
    assert _aligned_windows(items, 2) == one
    assert _aligned_windows(items, 4) == one
    assert _aligned_windows(items, 2, processes=2) == one  # 4 readers in 2 processes


def _window_kills(tmp_path: Path, windower: str, kills: int, items: int, seed: int) -> int:
    import os
    import subprocess
    import sys

    from .graph_recovery_job import read_parts
    from .kill_loop import kill_and_resume

    job = Path(__file__).with_name("window_recovery_job.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GRAPH_JOB_COUNT": str(items)}

    def start(out: Path, store: Path) -> subprocess.Popen[bytes]:
        out.mkdir(exist_ok=True)
        args = [sys.executable, str(job), str(out), str(store), windower]
        return subprocess.Popen(args, env=env, stderr=subprocess.PIPE)

    clean = start(tmp_path / "clean", tmp_path / "clean-store")
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    want = Counter(read_parts(tmp_path / "clean"))
    assert sum(want.values()) >= 20  # 20 keys: one session each, or a window per item
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    span = items / 1000 / (kills + 1)  # the job's length (4 ms an item per partition) / kills
    killed = kill_and_resume(lambda: start(out, store), out, kills, seed, span=span)
    final = start(out, store)
    assert final.wait(120) == 0, final.stderr.read().decode() if final.stderr else ""
    got = Counter(read_parts(out))
    assert got == want, (sum(got.values()), sum(want.values()))
    print(f"{windower} windows exactly once through {killed} SIGKILLs: {sum(got.values())} lines")
    return killed


@pytest.mark.timeout(300)
@pytest.mark.parametrize("windower", ["tumbling", "session"])
def test_windows_open_across_sigkills_resume_to_the_failure_free_output(windower, tmp_path):
    """Kill a process of a two-process window flow at random points, resume: exactly once.

    The clock waits 30 s of event time and its system time is frozen, so
    every key has windows open at every kill, and windows close after each
    resume (on values, and at the end of the input).
    """
    assert _window_kills(tmp_path, windower, kills=3, items=1200, seed=37) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_windows_through_twenty_sigkills(tmp_path):
    assert _window_kills(tmp_path, "tumbling", kills=24, items=5000, seed=2037) >= 20


@pytest.mark.parametrize("seed", range(12))
def test_the_fast_path_resumed_from_a_snapshot_continues_as_if_uninterrupted(seed):
    """Ordered queues (a heap) and open windows survive snapshot and restore, ties included."""
    from timelypy.flow._fast_windows import FastWindowsLogic

    rng = random.Random(seed)
    clock = w.EventClock(_at, timedelta(seconds=rng.choice([2, 7, 30])), now_getter=_fixed_now)
    windower = rng.choice(
        [
            w.TumblingWindower(timedelta(seconds=10), ALIGN),
            w.SlidingWindower(timedelta(seconds=10), timedelta(seconds=3), ALIGN),
            w.SessionWindower(timedelta(seconds=4)),
        ]
    )

    def folder(acc: list[int], value: Any) -> list[int]:
        return [*acc, value[1]]

    def make(state: Any) -> Any:
        return w._FoldLogic(folder, list.__add__, [] if state is None else state)

    make.fold = (list, folder, list.__add__)  # type: ignore[attr-defined]
    plan = w.fast_plan(clock, windower, make)
    assert plan is not None
    # whole seconds, few of them: many values share a timestamp (ties keep arrival order)
    values = [
        (rng.choice("ab"), (ALIGN + timedelta(seconds=rng.randint(0, 60)), i)) for i in range(120)
    ]
    straight = FastWindowsLogic(plan, make.fold, True, "s")
    resumed = FastWindowsLogic(plan, make.fold, True, "s")
    cut = rng.randrange(1, 12)
    got_straight: list[Any] = []
    got_resumed: list[Any] = []
    for n, start in enumerate(range(0, len(values), 10)):
        batch = values[start : start + 10]
        got_straight += straight.apply(0, batch)
        if n == cut:
            again = FastWindowsLogic(plan, make.fold, True, "s")
            again.restore({key: resumed.snapshot(key) for key in list(resumed.keys)})
            resumed = again
        got_resumed += resumed.apply(0, batch)
    got_straight += straight.eof()[0]
    got_resumed += resumed.eof()[0]
    assert got_resumed == got_straight
