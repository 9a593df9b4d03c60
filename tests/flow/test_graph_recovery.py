"""Recovery of stream-graph flows: sources, stateful operators and sinks resume themselves.

An aborted execution (``TestingSource.ABORT``) and a process killed with
SIGKILL, resumed, give what a run without the failure gives.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import timelypy.flow.operators as op
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig, init_db_dir
from timelypy.flow.testing import TestingSink, TestingSource, run_main
from timelypy.recovery.store import RecoveryStore

from .graph_helpers import ZERO


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def _abort_flow(items: list[Any], out: list[Any]) -> Dataflow:
    flow = Dataflow("abort")
    events = op.input("events", flow, TestingSource(items))
    split = op.branch("big", events, lambda kv: kv[1] >= 10)
    small = op.stateful_map("small_sum", split.falses, _sum)
    big = op.map_value("tag", split.trues, lambda v: -v)
    names = op.input("names", flow, TestingSource([("a", "ann"), ("b", "bob")]))
    joined = op.join("named", names, op.stateful_map("big_sum", big, _sum), emit_mode="running")
    op.output("out", op.merge("all", small, joined), TestingSink(out))
    return flow


def test_abort_and_resume_equal_a_run_without_the_failure(tmp_path):
    values = [("a", 1), ("b", 2), ("a", 11), ("a", 3), ("b", 12), ("b", 4), ("a", 13)]
    clean: list[Any] = []
    run_main(_abort_flow(values, clean), epoch_interval=ZERO)

    aborting = [*values[:3], TestingSource.ABORT(), *values[3:5], TestingSource.ABORT()]
    aborting += values[5:]
    init_db_dir(tmp_path / "db", 2)
    config = RecoveryConfig(tmp_path / "db")
    got: list[Any] = []
    runs = []
    for _ in range(3):
        before = len(got)
        run_main(_abort_flow(aborting, got), epoch_interval=ZERO, recovery_config=config)
        runs.append(got[before:])
    assert all(runs), "each execution emitted something"
    assert Counter(map(repr, got)) == Counter(map(repr, clean))
    # a fourth execution after the end emits nothing again
    again: list[Any] = []
    run_main(_abort_flow(aborting, again), epoch_interval=ZERO, recovery_config=config)
    assert again == []


def test_a_fixed_partitioned_sink_resumes_from_its_snapshot(tmp_path):
    from .graph_recovery_job import LinesSink, read_parts

    items = [("k1", 1), ("k2", 2), TestingSource.ABORT(), ("k1", 3), ("k3", 4)]
    config = RecoveryConfig(tmp_path / "db", partitions=1)
    for _ in range(2):
        flow = Dataflow("sink")
        sums = op.stateful_map("sum", op.input("inp", flow, TestingSource(items)), _sum)
        op.output("out", op.map_value("text", sums, str), LinesSink(tmp_path / "out", 2))
        run_main(flow, epoch_interval=ZERO, recovery_config=config)
    assert sorted(read_parts(tmp_path / "out")) == ["1", "2", "4", "4"]


@pytest.mark.timeout(180)
def test_sigkill_a_process_of_a_graph_flow_with_a_join_and_a_branch_then_resume(tmp_path):
    job = Path(__file__).with_name("graph_recovery_job.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(out: Path, store: Path) -> subprocess.Popen[bytes]:
        out.mkdir()
        return subprocess.Popen(
            [sys.executable, str(job), str(out), str(store)], env=env, stderr=subprocess.PIPE
        )

    clean = start(tmp_path / "clean", tmp_path / "clean-store")
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    from .graph_recovery_job import read_parts

    want = Counter(read_parts(tmp_path / "clean"))
    assert len(want) > 100

    first = start(tmp_path / "out", tmp_path / "store")
    pid_file = tmp_path / "out" / "pid-1"
    deadline = time.monotonic() + 60
    while (
        not (pid_file.exists() and pid_file.read_text())
        or len(read_parts(tmp_path / "out")) < sum(want.values()) // 3
    ):
        assert time.monotonic() < deadline, "the first run made no progress"
        assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        time.sleep(0.02)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    killed = time.monotonic()
    assert first.wait(30) != 0
    assert time.monotonic() - killed < 15, "the surviving process did not stop in seconds"
    resume = RecoveryStore(tmp_path / "store").resume_epoch()
    assert resume > 0

    second = subprocess.Popen(
        [sys.executable, str(job), str(tmp_path / "out"), str(tmp_path / "store")],
        env=env,
        stderr=subprocess.PIPE,
    )
    assert second.wait(120) == 0, second.stderr.read().decode() if second.stderr else ""
    got = Counter(read_parts(tmp_path / "out"))
    assert got == want, (sum(got.values()), sum(want.values()))


def test_job_helpers_read_what_they_wrote(tmp_path):
    from .graph_recovery_job import read_parts

    (tmp_path / "part-x.txt").write_text("'a'\n'b'\n")
    assert [ast.literal_eval(line) for line in read_parts(tmp_path)] == ["a", "b"]


@pytest.mark.parametrize("workers", [1, 3])
def test_each_snapshot_holds_the_state_as_of_the_end_of_its_epoch(tmp_path, monkeypatch, workers):
    # three keys, far more epochs than activations: the snapshot of epoch e must not
    # include the values of later epochs applied in the same pass
    from timelypy.flow.testing import cluster_main
    from timelypy.recovery.store import SnapshotWriter

    taken: list[tuple[int, str, Any]] = []
    original = SnapshotWriter.snapshot

    def spy(self: Any, step_id: str, epoch: int, states: Any) -> None:
        states = list(states)
        if step_id == "snap.sum":
            taken.extend((epoch, key, state) for key, state in states)
        original(self, step_id, epoch, states)

    monkeypatch.setattr(SnapshotWriter, "snapshot", spy)
    items = [(f"k{i % 3}", i) for i in range(300)]
    config = RecoveryConfig(tmp_path / "db", partitions=1, commit_interval=0)
    flow = Dataflow("snap")
    sums = op.stateful_map("sum", op.input("inp", flow, TestingSource(items, 7)), _sum)
    op.output("out", sums, TestingSink([]))
    cluster_main(
        flow, [], 0, worker_count_per_proc=workers, epoch_interval=ZERO, recovery_config=config
    )
    assert len(taken) > 100
    for epoch, state_key, state in taken:
        # the source's batches are 7 items, an epoch each: epoch e holds items 7e..7e+6
        last = min(7 * epoch + 6, 299)
        want = sum(i for i in range(last + 1) if f"k{i % 3}" == state_key)
        assert state == want, (state_key, epoch)


def test_testing_source_eof_ends_an_execution_and_the_next_continues_after_it(tmp_path):
    items = ["a", "b", TestingSource.EOF(), "c", TestingSource.EOF(), "d"]
    config = RecoveryConfig(tmp_path / "db", partitions=1)
    runs = []
    for _ in range(4):
        flow = Dataflow("eof")
        out: list[str] = []
        op.output("out", op.input("inp", flow, TestingSource(items)), TestingSink(out))
        run_main(flow, epoch_interval=ZERO, recovery_config=config)
        runs.append(out)
    assert runs == [["a", "b"], ["c"], ["d"], []]
