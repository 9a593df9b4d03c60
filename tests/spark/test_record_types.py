"""Records keep their type on Spark too: buffers exchanged between executor workers."""

from __future__ import annotations

import pytest

import timelypy_spark
from tests.flow.record_types import buffer_flow, expected

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_buffers_cross_spark_workers_exactly(spark, idle):
    numbers = list(range(40))
    rdd = spark.sparkContext.parallelize(numbers, 2)
    # described inside the flow, after the exchange over ZeroMQ: Spark's own collect
    # pickles results, and pickle refuses memoryviews
    result = timelypy_spark.run_flow(
        spark, buffer_flow(), rdd, workers=2, epoch_of=lambda n: n // 10, collect=True
    )
    assert sorted(repr(item) for _, item in result) == expected(numbers)
