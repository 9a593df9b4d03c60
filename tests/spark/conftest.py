"""One SparkSession (local[4]) for every Spark test: starting one takes 5-20 s."""

from __future__ import annotations

import shutil
import time

import pytest

pytest.importorskip("pyspark", reason="the Spark backend needs pyspark (pip install -e '.[spark]')")

if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("the Spark backend needs Java 17+", allow_module_level=True)


@pytest.fixture(scope="session")
def spark():
    import timelypy_spark

    session = timelypy_spark.session(
        "local[4]",
        "timelypy-tests",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions="4",
    )
    yield session
    session.stop()


@pytest.fixture
def idle(spark):
    """Assert, after the test, that no Spark job or stage is left running.

    Spark's status tracker learns that a job ended from its listener bus, a
    moment after the action returned, so the check waits up to 10 s for it.
    """
    yield spark
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 10.0
    while (tracker.getActiveJobsIds() or tracker.getActiveStageIds()) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert tracker.getActiveJobsIds() == [], "a Spark job was left running"
    assert tracker.getActiveStageIds() == [], "a Spark stage was left running"
