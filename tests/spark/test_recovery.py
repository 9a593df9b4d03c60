"""Recovery on Spark: ``run_flow(..., recovery_config=...)`` with a store the driver keeps.

The fast tests use the suite's ``local[4]`` session: a worker error in the
first attempt, a continuation, overlapping executions.  The slow ones run a
driver in a subprocess on ``local-cluster[2,1,1024]`` (separate executor
JVMs) and SIGKILL one task's Python worker mid-run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import timelypy_spark
from timelypy.errors import RecoveryError
from timelypy.flow import Dataflow, PartitionedInputConfig, run
from timelypy.recovery import RecoveryConfig, RecoveryStore

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "spark" / "scripts" / "lost_task.py"
PER_EPOCH = 50


def running(total, value):
    return total + value, total + value


def counting_flow(fail_marker: str | None = None, fail_epoch: int = 0) -> Dataflow:
    """A running count per key; raises once at ``fail_epoch`` while ``fail_marker`` exists."""

    def key_of(x):
        if fail_marker is not None and x // PER_EPOCH == fail_epoch:
            try:
                os.unlink(fail_marker)
            except FileNotFoundError:
                pass
            else:
                raise RuntimeError(f"injected failure at epoch {fail_epoch}")
        return (f"k{x % 5}", 1)

    flow = Dataflow()
    flow.map(key_of)
    flow.stateful_map("running", lambda key: 0, running)
    flow.capture()
    return flow


def slow(x):
    time.sleep(0.002)  # epochs close, and commit, while the partition is read
    return x


def expected(records):
    return Counter(run(counting_flow(), [(x // PER_EPOCH, x) for x in records]))


def test_a_failed_attempt_is_retried_as_an_execution_that_resumes(spark, idle, tmp_path):
    marker = tmp_path / "fail-once"
    marker.touch()
    records = range(1000)
    rdd = spark.sparkContext.parallelize(records, 2).map(slow)
    config = RecoveryConfig(tmp_path / "store", commit_interval=0)
    result = timelypy_spark.run_flow(
        spark,
        counting_flow(str(marker), fail_epoch=8),
        rdd,
        workers=2,
        epoch_of=lambda x: x // PER_EPOCH,
        presorted=True,
        attempts=1,
        recovery_config=config,
        collect=True,
    )
    assert not marker.exists(), "the first attempt failed"
    assert Counter(result) == expected(records)
    executions = RecoveryStore(tmp_path / "store").executions()
    assert [e.ex_num for e in executions] == [1, 2]
    assert executions[1].resume_epoch > 0, "the retry resumed from the store, not from scratch"


def test_a_later_call_continues_from_the_store(spark, idle, tmp_path):
    sc = spark.sparkContext
    config = RecoveryConfig(tmp_path / "store")
    # The first call sees epochs 0-3, the second epochs 4-7 of the same keys.
    first = timelypy_spark.run_flow(
        spark,
        counting_flow(),
        sc.parallelize(range(200), 2),
        workers=2,
        epoch_of=lambda x: x // PER_EPOCH,
        recovery_config=config,
    )
    assert Counter(first.collect()) == expected(range(200))
    first.unpersist()
    second = timelypy_spark.run_flow(
        spark,
        counting_flow(),
        sc.parallelize(range(400), 2),
        workers=2,
        epoch_of=lambda x: x // PER_EPOCH,
        recovery_config=config,
        collect=True,
    )
    want = expected(range(400))
    assert Counter(second) == Counter({p: n for p, n in want.items() if p[0] >= 4})
    assert RecoveryStore(tmp_path / "store").resume_epoch() == 8


def test_an_execution_already_running_is_refused(spark, idle, tmp_path):
    config = RecoveryConfig(tmp_path / "store")
    store = config.store()
    rdd = spark.sparkContext.parallelize(range(10), 2)
    with store.running():
        started = time.monotonic()
        with pytest.raises(RecoveryError, match="another execution is running"):
            timelypy_spark.run_flow(spark, counting_flow(), rdd, recovery_config=config)
        assert time.monotonic() - started < 10
    assert store.executions() == []


def lost_task(tmp_path: Path, *extra: str) -> dict:
    pids = tmp_path / "pids"
    pids.mkdir()
    output = tmp_path / "result.json"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--master",
            "local-cluster[2,1,1024]",
            *extra,
            str(pids),
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(output.read_text())
    assert report["killed"], "the run ended before a Python worker could be killed"
    assert report["persisted"] == 0, "a persisted RDD leaked"
    return report


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_killing_a_python_worker_resumes_to_the_failure_free_result(tmp_path):
    report = lost_task(tmp_path, "--recover", str(tmp_path / "store"))
    assert report.get("error") is None, report
    assert report["equal"], report
    executions = report["executions"]
    assert len(executions) == 2 and executions[1][1] > 0, executions


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("call", "kill"),
    [
        ("run_flow", "python"),
        ("collect", "python"),
        ("collect", "executor"),
        ("iter_flow", "python"),
        ("iter_flow", "executor"),
    ],
)
def test_a_lost_task_raises_task_lost_error_naming_the_executor(tmp_path, call, kill):
    report = lost_task(tmp_path, "--call", call, "--kill", kill)
    assert report["error"] == "TaskLostError", report
    assert "was lost" in report["message"]
    # which executor: Spark's own words for the loss, or where the lost worker's task ran
    assert re.search(r"executor (\d+|at \S+)", report["message"]), report["message"]
    if kill == "executor":
        assert "ExecutorLostFailure" in report["message"] or "exited" in report["message"]
    assert report["after_kill"] < 60, report


ROWS = {f"log-{name}": [(epoch, name) for epoch in range(12) for _ in range(3)] for name in "xyz"}


class OffsetReader:
    """Reads one log's rows from an offset, slowly; its snapshot is the offset."""

    def __init__(self, part, offset, opened, marker):
        self.part, self.offset, self.marker = part, offset, marker
        with open(opened, "a") as log:
            log.write(f"{part} {offset}\n")

    def snapshot(self):
        return self.offset

    def __iter__(self):
        from timelypy.flow import AdvanceTo, Emit

        rows, current = ROWS[self.part], None
        while self.offset < len(rows):
            epoch, name = rows[self.offset]
            if epoch != current:
                yield AdvanceTo(epoch)
                current = epoch
                if epoch == 8 and os.path.exists(self.marker):
                    os.unlink(self.marker)
                    raise RuntimeError("injected failure at epoch 8")
            self.offset += 1
            yield Emit((name, 1))
            time.sleep(0.01)


class Logs(PartitionedInputConfig):
    def __init__(self, opened, marker):
        self.opened, self.marker = str(opened), str(marker)

    def list_parts(self, worker_index, worker_count):
        return sorted(ROWS)

    def build_part(self, part, resume_epoch, resume_state=None):
        return OffsetReader(part, resume_state or 0, self.opened, self.marker)


def test_partitions_resume_from_their_own_snapshots_on_spark(spark, idle, tmp_path):
    opened, marker = tmp_path / "opened.txt", tmp_path / "fail-once"
    flow = Dataflow()
    flow.input("logs", Logs(opened, tmp_path / "never"))
    flow.stateful_map("running", lambda key: 0, running)
    flow.capture()
    want = Counter(run(flow))
    marker.touch()
    flow = Dataflow()
    flow.input("logs", Logs(opened, marker))
    flow.stateful_map("running", lambda key: 0, running)
    flow.capture()
    opened.write_text("")
    result = timelypy_spark.run_flow(
        spark,
        flow,
        workers=2,
        attempts=1,
        collect=True,
        recovery_config=RecoveryConfig(tmp_path / "store", commit_interval=0),
    )
    assert Counter(result) == want
    resume = RecoveryStore(tmp_path / "store").executions()[-1].resume_epoch
    assert resume > 0
    reopened = opened.read_text().splitlines()[len(ROWS) :]  # the second attempt's readers
    assert sorted(reopened) == [f"{part} {3 * resume}" for part in sorted(ROWS)]


def test_a_renamed_stateful_step_is_refused_on_spark(spark, idle, tmp_path):
    """State no step claims (a step renamed since) is refused, as on threads and processes."""
    sc = spark.sparkContext
    config = RecoveryConfig(tmp_path / "store")
    first = timelypy_spark.run_flow(
        spark,
        counting_flow(),
        sc.parallelize(range(100), 2),
        workers=2,
        epoch_of=lambda x: x // PER_EPOCH,
        recovery_config=config,
        collect=True,
    )
    assert Counter(first) == expected(range(100))
    renamed = Dataflow()
    renamed.map(lambda x: (f"k{x % 5}", 1))
    renamed.stateful_map("renamed", lambda key: 0, running)
    renamed.capture()
    with pytest.raises(RecoveryError, match=r"no step\s+of this flow claims"):
        timelypy_spark.run_flow(
            spark,
            renamed,
            sc.parallelize(range(200), 2),
            workers=2,
            epoch_of=lambda x: x // PER_EPOCH,
            recovery_config=config,
            collect=True,
        )
