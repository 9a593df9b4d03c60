"""The pre-exchange combine of ``fold_final(..., merger=)``: the same results as without it.

With a merger each worker folds its own values per key and epoch into
partial accumulators, only ``(key, partial)`` crosses to the key's worker,
and the merger joins the partials there. For a merger that joins
accumulators as folding the values one by one would, the results must be
those of the plain fold (and of a plain-Python model), on one worker, on
threads and on real processes, and an execution aborted and resumed (on
another number of workers, too) must give what a run without the failure
gives.
"""

from __future__ import annotations

import tempfile
import threading
from collections import defaultdict
from operator import add
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StateKeyError, StepError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig, init_db_dir
from timelypy.flow.testing import TestingSink, TestingSource, cluster_main, run_main

from .graph_helpers import ZERO, collect

_keys = st.sampled_from(["a", "b", "c", "dd", "é", "f"])
_streams = st.lists(st.tuples(_keys, st.integers(min_value=-50, max_value=50)), max_size=80)
_batches = st.integers(min_value=1, max_value=9)


# -- folds and their mergers (module level: the processes get them by reference) --


def _append(acc: list[int], value: int) -> list[int]:
    return [*acc, value]


def _concat(a: list[int], b: list[int]) -> list[int]:
    return a + b


def _append_in_place(acc: list[int], value: int) -> list[int]:
    acc.append(value)
    return acc


def _extend_in_place(a: list[int], b: list[int]) -> list[int]:
    a.extend(b)
    return a


def _count_sum(acc: tuple[int, int], value: int) -> tuple[int, int]:
    return (acc[0] + 1, acc[1] + value)


def _pair_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0], a[1] + b[1])


def _zero_pair() -> tuple[int, int]:
    return (0, 0)


def _plus(acc: int, value: int) -> int:
    return acc + value


def _model(items: list[tuple[str, int]]) -> dict[str, list[int]]:
    """Each key's values in the order of the input."""
    values: dict[str, list[int]] = defaultdict(list)
    for key, value in items:
        values[key].append(value)
    return dict(values)


def _folds(flow: Dataflow, up: Any) -> dict[str, Any]:
    """The same folds without a merger and with one, over ``up``."""
    return {
        "plain_list": op.fold_final("plain_list", up, list, _append),
        "merged_list": op.fold_final("merged_list", up, list, _append, merger=_concat),
        "in_place": op.fold_final("in_place", up, list, _append_in_place, merger=_extend_in_place),
        "plain_pair": op.fold_final("plain_pair", up, _zero_pair, _count_sum),
        "merged_pair": op.fold_final("merged_pair", up, _zero_pair, _count_sum, merger=_pair_add),
        "merged_add": op.fold_final("merged_add", up, int, _plus, merger=add),
    }


def _check_against_the_model(got: dict[str, list[Any]], items: list[Any], ordered: bool) -> None:
    model = _model(items)
    plain = dict(got["plain_list"])
    assert len(plain) == len(got["plain_list"]), "one result per key"
    for name in ("merged_list", "in_place"):
        merged = dict(got[name])
        assert len(merged) == len(got[name])
        if ordered:  # one worker: every value in input order, with or without a merger
            assert merged == plain == model
        else:  # several workers: the values of several workers arrive in any order
            assert {k: sorted(v) for k, v in merged.items()} == {
                k: sorted(v) for k, v in model.items()
            }
    pairs = {key: (len(values), sum(values)) for key, values in model.items()}
    assert dict(got["plain_pair"]) == dict(got["merged_pair"]) == pairs
    assert dict(got["merged_add"]) == {key: total for key, (_, total) in pairs.items()}
    assert sorted(map(repr, got["plain_pair"])) == sorted(map(repr, got["merged_pair"]))


@settings(max_examples=40, deadline=None)
@given(items=_streams, batch=_batches)
def test_on_one_worker_a_merger_gives_the_plain_fold_value_for_value(items, batch):
    """Property: one worker keeps each key's values in input order, merged or not.

    With the epochs the results come out at, too.
    """
    flow = Dataflow("one")
    up = op.input("inp", flow, TestingSource(items, batch))
    got: dict[str, list[Any]] = {}
    epochs: dict[str, list[int]] = {}
    for name, stream in _folds(flow, up).items():
        got[name], epochs[name] = [], []

        def record(step_id: str, item: Any, epoch: int, worker: int, name: str = name) -> None:
            epochs[name].append(epoch)

        op.output(
            f"out_{name}", op.inspect_debug(f"at_{name}", stream, record), TestingSink(got[name])
        )
    run_main(flow, epoch_interval=ZERO)
    _check_against_the_model(got, items, ordered=True)
    assert got["merged_list"] == got["plain_list"]  # the same keys in the same order
    assert epochs["merged_list"] == epochs["plain_list"]
    assert epochs["merged_pair"] == epochs["plain_pair"]


@settings(max_examples=25, deadline=None)
@given(items=_streams, batch=_batches, workers=st.sampled_from([2, 3]))
def test_on_threads_a_merger_gives_the_plain_fold(items, batch, workers):
    """Property: on several workers (every one of them folding some values), the same results."""
    flow = Dataflow("threads")
    up = op.redistribute("spread", op.input("inp", flow, TestingSource(items, batch)))
    got: dict[str, list[Any]] = {}
    for name, stream in _folds(flow, up).items():
        got[name] = []
        op.output(f"out_{name}", stream, TestingSink(got[name]))
    cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=ZERO)
    _check_against_the_model(got, items, ordered=False)


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=_streams.filter(bool), batch=st.integers(min_value=1, max_value=40))
def test_on_two_processes_a_merger_gives_the_plain_fold(tmp_path, items, batch):
    """Property: two real processes of two workers each, partials crossing between them."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as directory:

        def build(flow: Dataflow) -> dict[str, Any]:
            up = op.redistribute("spread", op.input("inp", flow, TestingSource(items, batch)))
            return _folds(flow, up)

        got = collect("processes", Path(directory), build)
    _check_against_the_model(got, items, ordered=False)


def test_the_folder_runs_where_the_values_are_and_the_merger_where_the_key_lives():
    # one worker reads every value: with a merger only it folds, and each key's worker
    # gets partials; without, each key's worker folds the values it is sent
    items = [(key, n) for n in range(40) for key in "abcdefgh"]
    calls: dict[str, set[str]] = {"folder": set(), "merger": set(), "plain": set()}

    def folder(acc: int, value: int) -> int:
        calls["folder"].add(threading.current_thread().name)
        return acc + value

    def plain(acc: int, value: int) -> int:
        calls["plain"].add(threading.current_thread().name)
        return acc + value

    def merger(a: int, b: int) -> int:
        calls["merger"].add(threading.current_thread().name)
        return a + b

    flow = Dataflow("where")
    up = op.input("inp", flow, TestingSource(items, 10))
    merged: list[Any] = []
    unmerged: list[Any] = []
    op.output(
        "out_merged", op.fold_final("merged", up, int, folder, merger=merger), TestingSink(merged)
    )
    op.output("out_plain", op.fold_final("plain", up, int, plain), TestingSink(unmerged))
    cluster_main(flow, [], 0, worker_count_per_proc=3, epoch_interval=ZERO)
    assert sorted(merged) == sorted(unmerged) == [(k, sum(range(40))) for k in "abcdefgh"]
    assert len(calls["folder"]) == 1, calls  # the reading worker only
    assert len(calls["plain"]) == 3, calls  # the keys' workers: all three
    assert calls["merger"] - calls["folder"], calls  # partials merged on other workers


# -- recovery -------------------------------------------------------------------------


def _recovery_flow(items: list[Any], out: list[Any], merger: bool) -> Dataflow:
    flow = Dataflow("resume")
    up = op.redistribute("spread", op.input("inp", flow, TestingSource(items, 3)))
    if merger:
        folded = op.fold_final("fold", up, list, _append_in_place, merger=_extend_in_place)
    else:
        folded = op.fold_final("fold", up, list, _append_in_place)
    op.output("out", op.map_value("sorted", folded, sorted), TestingSink(out))
    return flow


def _resumed(items: list[Any], aborts: list[int], db: Path, workers: list[int]) -> list[Any]:
    """Run with ABORT markers at ``aborts``, resuming on ``workers[i]`` workers each time."""
    marked: list[Any] = list(items)
    for at in sorted(aborts, reverse=True):
        marked.insert(at, TestingSource.ABORT())
    init_db_dir(db, 2)
    config = RecoveryConfig(db)
    got: list[Any] = []
    for execution in range(len(aborts) + 1):
        count = workers[execution % len(workers)]
        cluster_main(
            _recovery_flow(marked, got, merger=True),
            [],
            0,
            worker_count_per_proc=count,
            epoch_interval=ZERO,
            recovery_config=config,
        )
    again: list[Any] = []
    run_main(
        _recovery_flow(marked, again, merger=True), epoch_interval=ZERO, recovery_config=config
    )
    assert again == [], "an execution after the end emits nothing"
    return got


def test_an_aborted_fold_with_a_merger_resumes_to_the_plain_result(tmp_path):
    items = [(key, n) for n in range(30) for key in ("a", "b", "c")]
    clean: list[Any] = []
    run_main(_recovery_flow(items, clean, merger=False), epoch_interval=ZERO)
    got = _resumed(items, [20, 50], tmp_path / "db", [1, 3, 2])
    assert sorted(got) == sorted(clean) == [(key, list(range(30))) for key in ("a", "b", "c")]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=_streams.filter(bool),
    aborts=st.lists(st.integers(min_value=0, max_value=80), max_size=2),
    workers=st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3),
)
def test_aborted_and_resumed_anywhere_on_any_workers_the_merged_fold_is_the_plain_one(
    tmp_path, items, aborts, workers
):
    """Property: abort anywhere, resume on another worker count: the uninterrupted results."""
    aborts = [min(at, len(items)) for at in aborts]
    clean: list[Any] = []
    run_main(_recovery_flow(items, clean, merger=False), epoch_interval=ZERO)
    with tempfile.TemporaryDirectory(dir=tmp_path) as directory:
        got = _resumed(items, aborts, Path(directory) / "db", workers)
    assert sorted(got) == sorted(clean)


def test_snapshots_of_a_plain_fold_resume_into_a_merged_one(tmp_path):
    # the key's accumulator is the same in both: a flow may add the merger between executions
    items = [(key, n) for n in range(12) for key in ("a", "b")]
    marked = [*items[:10], TestingSource.ABORT(), *items[10:]]
    init_db_dir(tmp_path / "db", 1)
    config = RecoveryConfig(tmp_path / "db")
    got: list[Any] = []
    run_main(_recovery_flow(marked, got, merger=False), epoch_interval=ZERO, recovery_config=config)
    assert got == []
    run_main(_recovery_flow(marked, got, merger=True), epoch_interval=ZERO, recovery_config=config)
    assert sorted(got) == [("a", list(range(12))), ("b", list(range(12)))]


# -- errors ---------------------------------------------------------------------------


def test_a_merger_that_is_not_callable_is_refused_when_the_flow_is_built():
    flow = Dataflow("bad")
    up = op.input("inp", flow, TestingSource([("a", 1)]))
    with pytest.raises(FlowError, match="step 'fold' \\(fold_final\\) needs a callable merger"):
        op.fold_final("fold", up, int, _plus, merger=3)  # type: ignore[arg-type]


def test_a_folder_that_raises_before_the_exchange_names_the_step_and_the_folder():
    def folder(acc: int, value: int) -> int:
        raise ValueError("no")

    flow = Dataflow("err")
    up = op.input("inp", flow, TestingSource([("a", 1)]))
    op.output("out", op.fold_final("fold", up, int, folder, merger=add), TestingSink([]))
    with pytest.raises(StepError, match=r"step .err.fold. on worker 0, epoch .*the folder") as info:
        run_main(flow, epoch_interval=ZERO)
    assert isinstance(info.value.__cause__, ValueError)


def test_a_merger_that_raises_on_the_keys_worker_names_the_merger():
    def merger(a: int, b: int) -> int:
        raise ValueError("no")

    flow = Dataflow("err")
    up = op.input("inp", flow, TestingSource([("a", 1), ("a", 2)]))  # two epochs: two partials
    op.output("out", op.fold_final("fold", up, int, _plus, merger=merger), TestingSink([]))
    with pytest.raises(StepError, match=r"step .err.fold. on worker 0, epoch .*the merger"):
        run_main(flow, epoch_interval=ZERO)


def test_an_item_that_is_not_a_keyed_pair_is_the_same_state_key_error():
    for merger in (None, add):
        flow = Dataflow("err")
        up = op.input("inp", flow, TestingSource([("a", 1), (2, 1)]))
        op.output("out", op.fold_final("fold", up, int, _plus, merger=merger), TestingSink([]))
        with pytest.raises(StateKeyError, match=r"step 'err.fold' \(fold_final\).*\(2, 1\)"):
            run_main(flow, epoch_interval=ZERO)


# -- count_window with a system clock: counted per batch before the exchange ----------


def _window_outputs(flow: Dataflow, up: Any, windower: Any) -> dict[str, Any]:
    """``count_window`` (combined) beside the per-value fold it replaced, as printable items."""
    from timelypy.flow.operators import windowing as w

    combined = w.count_window("combined", up, w.SystemClock(), windower, _word_key)
    plain = w.fold_window(
        "plain",
        op.key_on("plain_key", up, _word_key),
        w.SystemClock(),
        windower,
        int,
        _count_one,
        add,
        ordered=False,
    )
    streams: dict[str, Any] = {}
    for name, out in (("combined", combined), ("plain", plain)):
        streams[f"{name}_down"] = out.down
        streams[f"{name}_late"] = out.late
        streams[f"{name}_meta"] = op.map_value(f"{name}_meta_text", out.meta, _meta_text)
    return streams


def _word_key(word: str) -> str:
    return word


def _count_one(acc: int, value: Any) -> int:
    return acc + 1


def _meta_text(window: tuple[int, Any]) -> tuple[int, str, str, list[int]]:
    window_id, meta = window
    return (
        window_id,
        meta.open_time.isoformat(),
        meta.close_time.isoformat(),
        sorted(meta.merged_ids),
    )


def _windowers() -> dict[str, Any]:
    """Windows long enough that a whole test run falls into the same ones."""
    from datetime import UTC, datetime, timedelta

    from timelypy.flow.operators import windowing as w

    start = datetime.now(UTC) - timedelta(hours=1)
    return {
        "tumbling": w.TumblingWindower(timedelta(days=1), start),
        "sliding": w.SlidingWindower(timedelta(days=1), timedelta(hours=5), start),
        "session": w.SessionWindower(timedelta(days=1)),
    }


_words = st.lists(st.sampled_from(["a", "b", "c", "dd", "é"]), max_size=60)


def _untimed(meta: list[Any]) -> list[str]:
    """A session's open and close times are when its first and last values were read."""
    assert all(opened <= closed for _, (_, opened, closed, _) in meta)
    return sorted(repr((key, window_id, merged)) for key, (window_id, _, _, merged) in meta)


def _same_windows(got: dict[str, list[Any]], words: list[str], session: bool) -> None:
    for kind in ("down", "late", "meta"):
        combined, plain = got[f"combined_{kind}"], got[f"plain_{kind}"]
        if kind == "meta" and session:
            assert _untimed(combined) == _untimed(plain)
        else:
            assert sorted(map(repr, combined)) == sorted(map(repr, plain))
    assert got["combined_late"] == []
    totals: dict[str, int] = defaultdict(int)
    for key, (_, count) in got["combined_down"]:
        totals[key] += count
    windows_per_value = len({window for _, (window, _) in got["combined_down"]}) or 1
    assert {k: n // windows_per_value for k, n in totals.items()} == {
        k: words.count(k) for k in set(words)
    }


@settings(max_examples=20, deadline=None)
@given(
    words=_words,
    batch=_batches,
    windower=st.sampled_from(["tumbling", "sliding", "session"]),
    workers=st.sampled_from([1, 3]),
)
def test_a_system_clock_count_window_gives_the_windows_of_the_per_value_fold(
    words, batch, windower, workers
):
    """Property: counted per batch or value by value, the same windows, metadata, late values."""
    flow = Dataflow("count")
    up = op.redistribute("spread", op.input("inp", flow, TestingSource(words, batch)))
    got: dict[str, list[Any]] = {}
    for name, stream in _window_outputs(flow, up, _windowers()[windower]).items():
        got[name] = []
        op.output(f"out_{name}", stream, TestingSink(got[name]))
    cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=ZERO)
    _same_windows(got, words, windower == "session")


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from(["a", "b", "c", "dd", "é"]), min_size=20, max_size=80),
    batch=st.integers(min_value=8, max_value=40),
)
def test_a_system_clock_count_window_on_two_processes(tmp_path, words, batch):
    """Property: on two real processes too (each reads its own system clock)."""
    windowers = _windowers()
    with tempfile.TemporaryDirectory(dir=tmp_path) as directory:

        def build(flow: Dataflow) -> dict[str, Any]:
            up = op.redistribute("spread", op.input("inp", flow, TestingSource(words, batch)))
            streams: dict[str, Any] = {}
            for name, windower in windowers.items():
                with flow.scope(name):
                    for kind, stream in _window_outputs(flow, up, windower).items():
                        streams[f"{name}_{kind}"] = stream
            return streams

        got = collect("processes", Path(directory), build)
    for name in windowers:
        _same_windows({kind: got[f"{name}_{kind}"] for kind in _kinds()}, words, name == "session")


def _kinds() -> list[str]:
    return [f"{form}_{kind}" for form in ("combined", "plain") for kind in ("down", "late", "meta")]


def test_short_system_clock_windows_count_every_item_once():
    # windows of a millisecond: which window a value falls into depends on when it
    # arrives, but every item is counted in exactly one tumbling window, combined or not
    from datetime import UTC, datetime, timedelta

    from timelypy.flow.operators import windowing as w

    words = [w_ for _ in range(300) for w_ in ("a", "b", "c")]
    windower = w.TumblingWindower(timedelta(milliseconds=1), datetime.now(UTC))
    flow = Dataflow("short")
    up = op.input("inp", flow, TestingSource(words, 7))
    got: dict[str, list[Any]] = {}
    for name, stream in _window_outputs(flow, up, windower).items():
        got[name] = []
        op.output(f"out_{name}", stream, TestingSink(got[name]))
    cluster_main(flow, [], 0, worker_count_per_proc=2, epoch_interval=ZERO)
    for form in ("combined", "plain"):
        totals: dict[str, int] = defaultdict(int)
        for key, (_, count) in got[f"{form}_down"]:
            totals[key] += count
        assert dict(totals) == {"a": 300, "b": 300, "c": 300}
        assert got[f"{form}_late"] == []
        assert len(got[f"{form}_meta"]) == len(got[f"{form}_down"])


def _counting_flow(words: list[Any], out: list[Any]) -> Dataflow:
    from datetime import UTC, datetime, timedelta

    from timelypy.flow.operators import windowing as w

    flow = Dataflow("resume_count")
    up = op.redistribute("spread", op.input("inp", flow, TestingSource(words, 4)))
    windower = w.TumblingWindower(timedelta(days=1), datetime.now(UTC) - timedelta(hours=1))
    counts = w.count_window("count", up, w.SystemClock(), windower, _word_key)
    op.output("out", counts.down, TestingSink(out))
    return flow


def test_an_aborted_system_clock_count_window_resumes_to_the_same_counts(tmp_path):
    words = [word for n in range(25) for word in ("a", "b", "c")[: 1 + n % 3]]
    clean: list[Any] = []
    run_main(_counting_flow(words, clean), epoch_interval=ZERO)
    marked: list[Any] = [*words[:10], TestingSource.ABORT(), *words[10:30]]
    marked += [TestingSource.ABORT(), *words[30:]]
    init_db_dir(tmp_path / "db", 2)
    config = RecoveryConfig(tmp_path / "db")
    got: list[Any] = []
    for workers in (2, 1, 3):
        cluster_main(
            _counting_flow(marked, got),
            [],
            0,
            worker_count_per_proc=workers,
            epoch_interval=ZERO,
            recovery_config=config,
        )
    assert sorted(got) == sorted(clean) == [(key, (0, words.count(key))) for key in ("a", "b", "c")]


# -- a process killed with partials in flight ------------------------------------------

_KILL_JOB = """
import datetime
import sys

import timelypy.flow.operators as op
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig
from tests.flow.graph_recovery_job import LinesSink, Paced, PidSink


def append(acc, value):
    acc.append(value)
    return acc


def extend(a, b):
    a.extend(b)
    return a


def running_sum(total, value):
    total = (total or 0) + value
    return total, total


out, store = sys.argv[1], sys.argv[2]
flow = Dataflow("job")
a = op.redistribute("spread", op.input("a", flow, Paced("a", 4, "p")))
folded = op.fold_final("fold", a, list, append, merger=extend)
op.output("out", op.map_value("fmt", folded, lambda acc: repr(sorted(acc))), LinesSink(out, 3))
sums = op.map_value("show", op.stateful_map("sums", a, running_sum), repr)
op.output("progress", sums, LinesSink(out + "/progress", 2))
op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
run_cluster(
    flow,
    proc_count=2,
    worker_count_per_proc=2,
    epoch_interval=datetime.timedelta(milliseconds=20),
    recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
)
"""


@pytest.mark.timeout(180)
def test_sigkill_a_process_of_a_merged_fold_then_resume(tmp_path):
    # two processes of two workers, each folding values into partials: the second
    # process dies with partials of open epochs held or in flight; the resumed run
    # must give exactly the fold of every value
    import os
    import signal
    import subprocess
    import sys
    import time

    from timelypy.recovery.store import RecoveryStore

    from .graph_recovery_job import read_parts

    job = tmp_path / "job.py"
    job.write_text(_KILL_JOB)
    count = 600
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "GRAPH_JOB_COUNT": str(count),
    }

    def start(out: Path, store: Path) -> subprocess.Popen[bytes]:
        out.mkdir(exist_ok=True)
        return subprocess.Popen(
            [sys.executable, str(job), str(out), str(store)], env=env, stderr=subprocess.PIPE
        )

    want: dict[str, list[int]] = defaultdict(list)
    for j in range(count):
        want[f"p{j % 4}-{j % 5}"].append(j)
    expected = sorted(repr(sorted(values)) for values in want.values())

    clean = start(tmp_path / "clean", tmp_path / "clean-store")
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    assert sorted(read_parts(tmp_path / "clean")) == expected

    first = start(tmp_path / "out", tmp_path / "store")
    pid_file = tmp_path / "out" / "pid-3"  # a worker of the second process
    deadline = time.monotonic() + 60
    while (
        not (pid_file.exists() and pid_file.read_text())
        or len(read_parts(tmp_path / "out" / "progress")) < count // 3
    ):
        assert time.monotonic() < deadline, "the first run made no progress"
        assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        time.sleep(0.02)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert first.wait(30) != 0
    assert read_parts(tmp_path / "out") == [], "fold_final emits only at the end"
    assert RecoveryStore(tmp_path / "store").resume_epoch() > 0

    second = start(tmp_path / "out", tmp_path / "store")
    assert second.wait(120) == 0, second.stderr.read().decode() if second.stderr else ""
    assert sorted(read_parts(tmp_path / "out")) == expected
