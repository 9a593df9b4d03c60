"""Windowing steps on Spark: ``run_flow`` agrees with one worker, threads and processes."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

import timelypy_spark
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.window import EventClockConfig, SessionWindowConfig, TumblingWindowConfig

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def event_time(value):
    return T0 + timedelta(seconds=value)


def frozen_now():
    return T0


def count_flow(windower) -> Dataflow:
    # An hour of wait: values from different Spark partitions interleave in any order,
    # and none may be late, so every backend sees the same windows.
    clock = EventClockConfig(event_time, timedelta(hours=1), now_getter=frozen_now)
    flow = Dataflow()
    flow.map(lambda n: (f"k{n % 3}", n * 7 % 200))
    flow.count_window("count", clock, windower, window_meta=True)
    flow.capture()
    return flow


@pytest.mark.parametrize(
    "windower",
    [TumblingWindowConfig(timedelta(seconds=10)), SessionWindowConfig(timedelta(seconds=6))],
    ids=["tumbling", "session"],
)
def test_windows_agree_on_spark_threads_and_processes(spark, idle, windower):
    numbers = list(range(300))
    pairs = [(n // 100, n) for n in numbers]

    def windows(output):
        return Counter(item for _, item in output)

    expected = windows(run(count_flow(windower), pairs))
    assert windows(run_cluster(count_flow(windower), pairs, 1, 3)) == expected
    assert windows(run_cluster(count_flow(windower), pairs, 2, 1)) == expected
    rdd = spark.sparkContext.parallelize(numbers, 2)
    result = timelypy_spark.run_flow(
        spark, count_flow(windower), rdd, workers=2, epoch_of=lambda n: n // 100, collect=True
    )
    assert windows(result) == expected
