"""timelypy_spark as a Spark operator runs it: the user's session, outputs, start-up errors.

On the suite's real local[4] session: ``session()`` leaves a running
session's settings alone; a result RDD is an ordinary RDD that runs the
workers once and leaves nothing cached; a program whose module the
executors cannot import fails in one attempt with one clear message;
``ship_package`` leaves no directory behind per call.  The cluster tests
(``spark-submit --master``, lost executors) are in ``test_deployments.py``
and ``test_recovery.py`` (slow).
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

import timelypy_spark
from timelypy.errors import ConfigError
from timelypy.flow import Dataflow, run
from timelypy_spark import ship

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def persisted(spark) -> int:
    return len(spark.sparkContext._jsc.getPersistentRDDs())


def test_session_returns_the_running_session_with_its_settings(spark, caplog):
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        again = timelypy_spark.session("local[2]", spark__sql__shuffle__partitions="3")
        assert again is spark
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
        assert spark.sparkContext.master == "local[4]"
        messages = " ".join(record.getMessage() for record in caplog.records)
        assert "already running on master 'local[4]'" in messages
        assert "spark.sql.shuffle.partitions not applied" in messages
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")


def expand(n: int) -> list[tuple[int, int]]:
    return [(n, i) for i in range(50)]


def test_an_rdd_result_runs_the_workers_once_and_caches_nothing(spark, idle):
    flow = Dataflow()
    flow.flat_map(expand)
    flow.capture()
    calls = spark.sparkContext.accumulator(0)

    def counted(n: int) -> int:
        calls.add(1)
        return n

    before = persisted(spark)
    rdd = spark.sparkContext.parallelize(range(200), 2).map(counted)
    result = timelypy_spark.run_flow(spark, flow, rdd, workers=2)
    assert persisted(spark) == before  # nothing cached behind the caller's back
    assert calls.value == 200
    want = Counter((0, pair) for n in range(200) for pair in expand(n))
    assert Counter(result.collect()) == want
    assert result.count() == 200 * 50
    assert len(result.take(3)) == 3  # an ordinary RDD: partial jobs are allowed
    assert calls.value == 200  # the later actions did not run the workers again
    assert result.getNumPartitions() == 2
    result.persist()  # the user's own choice
    assert persisted(spark) == before + 1
    result.unpersist()


def test_a_frame_result_of_an_rdd_caches_nothing(spark, idle):
    flow = Dataflow()
    flow.flat_map(expand)
    flow.capture()
    before = persisted(spark)
    rdd = spark.sparkContext.parallelize(range(20), 2)
    frame = timelypy_spark.run_flow(spark, flow, rdd, schema="n long, i long")
    assert persisted(spark) == before
    assert frame.count() == 20 * 50
    assert sorted(frame.limit(2).collect())[0][0] == 0


def helper_module(directory: Path) -> object:
    """A module the driver imports but Spark's Python workers cannot."""
    name = f"timelypy_missing_helper_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text("def double(x):\n    return 2 * x\n")
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(directory))


@pytest.mark.parametrize("collect", [False, True], ids=["rdd-output", "collect"])
def test_a_module_missing_on_executors_fails_once_with_one_message(spark, idle, tmp_path, collect):
    helper = helper_module(tmp_path)
    flow = Dataflow()
    flow.map(helper.double)  # type: ignore[attr-defined]
    flow.capture()
    rdd = spark.sparkContext.parallelize(range(10), 2)
    with pytest.raises(ConfigError) as caught:
        timelypy_spark.run_flow(spark, flow, rdd, workers=2, collect=collect)
    message = str(caught.value)
    assert "cannot load the program" in message
    assert f"No module named '{helper.__name__}'" in message
    assert "addPyFile" in message  # what to do
    assert "worker " in message and "executor at" in message  # where
    group = next(
        note.rsplit(" ", 1)[-1] for note in caught.value.__notes__ if "Spark job group" in note
    )
    tracker = spark.sparkContext.statusTracker()
    stages = [
        stage
        for job in tracker.getJobIdsForGroup(group)
        for stage in tracker.getJobInfo(job).stageIds
    ]
    assert stages, group
    for stage in stages:
        info = tracker.getStageInfo(stage)
        if info is not None:
            # one attempt of the stage, its tasks cancelled by the driver rather than failed
            assert info.currentAttemptId == 0, info
            assert info.numFailedTasks == 0, info


def test_build_archive_writes_into_the_directory_given_or_the_process_one(tmp_path):
    archive = ship.build_archive(tmp_path)
    assert archive.parent == tmp_path
    first, second = ship.build_archive(), ship.build_archive()
    assert first == second == ship._ship_directory() / "timelypy.zip"  # no directory per call


def test_the_result_equals_the_local_run_after_these_changes(spark, idle):
    flow = Dataflow()
    flow.map(lambda x: (f"k{x % 3}", x))
    flow.reduce_epoch(lambda a, b: a + b)
    flow.capture()
    pairs = [(x // 10, x) for x in range(40)]
    rdd = spark.sparkContext.parallelize([x for _, x in pairs], 2)
    got = timelypy_spark.run_flow(spark, flow, rdd, epoch_of=lambda x: x // 10).collect()
    assert Counter(got) == Counter(run(flow, pairs))
