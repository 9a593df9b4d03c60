"""spark_bench's batch-level wordcount candidates count what the seed's functions count.

The benchmark checks every result before quoting a time; this runs the two
batch-level flows (``reduce_epoch(add, pre_aggregate=...)`` through
``run_flow``, from an RDD of lines and from a DataFrame) on the shared
local[4] session, 2 workers, and compares them with ``seed_counts`` and with
the DataFrame that does the same tokenisation.
"""

from __future__ import annotations

from collections import Counter

import pytest

import timelypy_spark
from benchmarks import spark_bench

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

LINES = [
    "To be, or not to be: that is the question.",
    "Whether 'tis nobler in the mind to suffer",
    "",
    '1 2 3 and 4 more: To BE!  "quoted"; semi;colon',
] * 300


def test_the_batch_level_flow_from_an_rdd_counts_the_seeds_tokens(spark):
    lines = spark.sparkContext.parallelize(LINES, 2)
    pairs = timelypy_spark.run_flow(spark, spark_bench.batch_flow(), lines, workers=2, collect=True)
    assert {epoch for epoch, _ in pairs} == {0}
    counts = [item for _, item in pairs]
    assert len(counts) == len({word for word, _ in counts})  # one total per word
    assert Counter(dict(counts)) == spark_bench.seed_counts(LINES)


def test_the_batch_level_flow_from_a_dataframe_matches_the_regex_dataframe(spark, tmp_path):
    paths = []
    for index in range(2):
        path = tmp_path / f"part-{index}.txt"
        path.write_text("\n".join(LINES[index::2]) + "\n")
        paths.append(str(path))
    frame = spark.read.text(paths)
    counts = timelypy_spark.run_flow(
        spark,
        spark_bench.batch_flow(from_rows=True),
        frame,
        workers=2,
        schema="word string, count long",
        epoch_column=None,
    )
    try:
        got = {row[0]: row[1] for row in counts.collect()}
    finally:
        counts.unpersist()
    assert got == dict(spark_bench.seed_counts(LINES))
    assert got == spark_bench.regex_dataframe_wordcount(spark, paths)


def test_count_seed_batch_is_the_seeds_tokenisation_whatever_the_cut():
    expected = spark_bench.seed_counts(LINES)
    for cut in (1, 7, 1_000):
        total: Counter[str] = Counter()
        for start in range(0, len(LINES), cut):
            total += spark_bench.count_seed_batch(LINES[start : start + cut])
        assert total == expected
    rows = [(line,) for line in LINES]
    assert spark_bench.count_seed_rows(rows) == expected
    (floor,) = spark_bench.batch_floor_counts(iter(LINES))  # the no-engine candidate
    assert floor == dict(expected)
