"""One SparkSession (local[4]) for every Spark test: starting one takes 5-20 s."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyspark", reason="the Spark backend needs pyspark (pip install -e '.[spark]')")

if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("the Spark backend needs Java 17+", allow_module_level=True)


@pytest.fixture(scope="session")
def spark():
    import timelypy_spark

    session = timelypy_spark.session(
        "local[4]", "timelypy-tests", spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
    )
    yield session
    session.stop()


@pytest.fixture
def idle(spark):
    """Assert, after the test, that no Spark job or stage is left running."""
    yield spark
    tracker = spark.sparkContext.statusTracker()
    assert tracker.getActiveJobsIds() == [], "a Spark job was left running"
    assert tracker.getActiveStageIds() == [], "a Spark stage was left running"
