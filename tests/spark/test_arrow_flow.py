"""run_flow(..., row_type="arrow"): a DataFrame's Arrow batches through Arrow-native steps.

One local[4] session for all (``conftest.py``); the tests run 2 workers.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
import timelypy_spark
from timelypy import ConfigError
from timelypy.flow import Dataflow
from timelypy.flow.sinks import CaptureSink
from timelypy_spark import SparkInput

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
arrow = pytest.importorskip("timelypy.flow.operators.arrow")

SEPARATORS = r'[\s!,.?":;0-9]+'
LINES = [
    "To be, or not to be: that is the question.",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
    "",
    "1 2 3 and 4 more: To BE!",
] * 40


def words_of(batch: Any) -> list[Any]:
    """Lines -> words: lower case, split on the separators, empty tokens dropped."""
    assert type(batch) is pa.RecordBatch  # the DataFrame's own batch, not rows
    tokens = pc.list_flatten(pc.split_pattern_regex(pc.utf8_lower(batch.column(0)), SEPARATORS))
    return [pa.record_batch({"word": pc.filter(tokens, pc.not_equal(tokens, ""))})]


def wordcount_flow() -> Dataflow:
    flow = Dataflow("wc")
    lines = op.input("lines", flow, SparkInput())
    words = arrow.flat_map_arrow("words", lines, words_of)
    counts = arrow.aggregate_arrow("count", words, "word", [([], "count_all")])
    op.output("out", counts, CaptureSink())
    return flow


def test_an_arrow_wordcount_reads_and_writes_dataframes_as_record_batches(idle):
    spark = idle
    frame = spark.createDataFrame([(line,) for line in LINES], "value string").repartition(3)
    result = timelypy_spark.run_flow(
        spark,
        wordcount_flow(),
        frame,
        workers=2,
        row_type="arrow",
        schema="word string, count_all long",
    )
    try:
        assert result.columns == ["epoch", "word", "count_all"]
        got = {(row.epoch, row.word): row.count_all for row in result.collect()}
    finally:
        result.unpersist()
    expected = Counter(
        word for line in LINES for word in re.findall(r'[^\s!,.?":;0-9]+', line.lower())
    )
    assert got == {(0, word): n for word, n in expected.items()}


def test_epochs_of_record_batches_and_a_schema_inferred_from_the_batches(idle):
    spark = idle
    frame = spark.range(0, 1000, numPartitions=2).selectExpr(
        "id", "cast(id % 3 as string) as tag", "id div 250 as part"
    )
    flow = Dataflow("sums")
    batches = op.input("rows", flow, SparkInput())
    doubled = arrow.map_arrow(
        "double",
        batches,
        lambda b: pa.record_batch({"tag": b["tag"], "v": pc.multiply(b["id"], 2)}),
    )
    sums = arrow.aggregate_arrow("sum", doubled, "tag", [("v", "sum"), ([], "count_all")])
    op.output("out", sums, CaptureSink())
    # batches of 50 rows: every batch holds rows of one part (250 rows each, sorted)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "50")
    try:
        result = timelypy_spark.run_flow(
            spark,
            flow,
            frame.repartition(2, "part").sortWithinPartitions("part"),
            workers=2,
            row_type="arrow",
            epoch_of=lambda batch: batch["part"][0].as_py(),
            presorted=True,
            output="frame",
        )
    finally:
        spark.conf.set(key, before)
    try:
        assert [f.name for f in result.schema.fields] == ["epoch", "tag", "v_sum", "count_all"]
        rows = sorted(tuple(row) for row in result.collect())
    finally:
        result.unpersist()
    expected: Counter[tuple[int, str]] = Counter()
    counts: Counter[tuple[int, str]] = Counter()
    for i in range(1000):
        expected[(i // 250, str(i % 3))] += 2 * i
        counts[(i // 250, str(i % 3))] += 1
    assert rows == sorted((e, t, v, counts[(e, t)]) for (e, t), v in expected.items())


def test_a_gang_result_runs_the_workers_once_and_is_cached_for_every_action(idle):
    from pyspark.sql import functions as F

    spark = idle
    calls = spark.sparkContext.accumulator(0)

    @F.udf("string")
    def counted(line):  # no hints: Spark would read them as a pandas UDF's
        calls.add(1)
        return line

    before = len(spark.sparkContext._jsc.getPersistentRDDs())
    frame = spark.createDataFrame([(line,) for line in LINES], "value string").repartition(2)
    result = timelypy_spark.run_flow(
        spark,
        wordcount_flow(),
        frame.select(counted("value").alias("value")),
        row_type="arrow",
        schema="word string, count_all long",
    )
    assert calls.value == len(LINES)  # the workers ran, once
    assert result.is_cached
    assert len(spark.sparkContext._jsc.getPersistentRDDs()) == before + 1
    storage = {info.id(): info for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}
    assert [info.numCachedPartitions() for info in storage.values()] == [2]  # all of it
    expected = Counter(w for line in LINES for w in re.findall(r'[^\s!,.?":;0-9]+', line.lower()))
    assert {row.word: row.count_all for row in result.collect()} == expected
    assert result.count() == len(expected)
    assert len(result.take(2)) == 2  # off the barrier stage: partial jobs are allowed
    assert calls.value == len(LINES)  # no later action ran the workers again
    result.unpersist()


def test_row_type_arrow_needs_a_dataframe_in_and_out(spark):
    frame = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(ConfigError, match="row_type='arrow'"):
        timelypy_spark.run_flow(spark, wordcount_flow(), frame, row_type="arrow", collect=True)
    with pytest.raises(ConfigError, match="row_type='arrow'"):
        timelypy_spark.run_flow(
            spark, wordcount_flow(), frame.rdd, row_type="arrow", schema="word string"
        )


def test_an_output_batch_without_the_schemas_column_names_it(spark):
    frame = spark.createDataFrame([("a b",)], "value string")
    with pytest.raises(Exception, match="no column 'nope'"):
        timelypy_spark.run_flow(
            spark, wordcount_flow(), frame, workers=2, row_type="arrow", schema="nope string"
        )


def map_flow(mapper: Any) -> Dataflow:
    flow = Dataflow("map")
    rows = op.input("rows", flow, SparkInput())
    op.output("out", arrow.map_arrow("upper", rows, mapper), CaptureSink())
    return flow


def upper(batch: Any) -> Any:
    return pa.record_batch({"id": batch["id"], "word": pc.utf8_upper(batch["word"])})


def test_a_flow_of_stateless_steps_runs_as_a_plain_lazy_map_in_arrow(idle):
    spark = idle
    frame = spark.range(0, 5000, numPartitions=3).selectExpr(
        "id", "concat('w', cast(id % 7 as string)) as word"
    )
    result = timelypy_spark.run_flow(
        spark, map_flow(upper), frame, workers=2, row_type="arrow", output="frame"
    )
    # no barrier stage, no shuffle, nothing cached: the plan is the source's, mapped
    plan = result._jdf.queryExecution().executedPlan().toString()
    assert "MapInArrow" in plan and "Exchange" in plan  # the repartition to 2 workers
    assert not result.is_cached
    assert result.columns == ["epoch", "id", "word"]
    rows = sorted(tuple(row) for row in result.collect())
    assert rows == [(0, i, f"W{i % 7}") for i in range(5000)]
    assert result.count() == 5000  # another action runs the flow again


def test_a_stateless_flow_that_raises_fails_the_spark_job_with_the_step_named(spark):
    frame = spark.range(0, 10, numPartitions=2).selectExpr("id", "'a' as word")

    def broken(batch: Any) -> Any:
        raise ValueError("no such luck")

    result = timelypy_spark.run_flow(
        spark, map_flow(broken), frame, row_type="arrow", schema="id long, word string"
    )
    with pytest.raises(Exception, match=r"(?s)'map\.upper'.*no such luck"):
        result.collect()


@pytest.mark.slow
def test_the_arrow_wordcount_example_counts_the_zen():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "spark_arrow_wordcount.py"
    result = subprocess.run(
        [sys.executable, str(example), "--copies", "300", "--master", "local[2]", "--top", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    import codecs
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this

    zen = codecs.decode(this.s, "rot13").splitlines()
    words = Counter(word for line in zen for word in re.findall(r"[a-z']+", line.lower()))
    total = 300 * sum(words.values())
    assert f"Counted {total:,} words of {len(words)} distinct" in out
    assert "by 2 timelypy workers on local[2], in epoch(s) [0]" in out
    top = sorted(words.items(), key=lambda pair: (-pair[1], pair[0]))[:3]
    for word, n in top:
        assert f"  {word} {300 * n:,}\n" in out
    assert f"counted {300 * words['better']:,} = {words['better']} x 300." in out
    assert re.search(r"first run: [\d.]+ s\nwarm run: [\d.]+ s", out)


#: Letters, the seed's separators (Python's whitespace included: ASCII's that RE2's ``\s``
#: leaves out, and some of Unicode's) and characters that are neither.
TOKEN_TEXT = "aZé'_-" + ' \t\n\x0b\x0c\r\x1c\x1f!,.?":;09' + "\x85\xa0\u2003\u3000"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=TOKEN_TEXT, max_size=30), min_size=1, max_size=8), st.booleans())
def test_the_benchmarks_arrow_tokeniser_gives_the_seeds_words(lines, ascii_only):
    """``spark_bench.arrow_words`` (a byte translation for ASCII batches, a regex split
    otherwise) gives the words of the seed's ``findall`` of the lower-cased line."""
    from benchmarks.spark_bench import SEED_TOKEN, arrow_words

    if ascii_only:
        lines = [line.encode("ascii", "ignore").decode() for line in lines]
    batch = pa.record_batch({"value": pa.array(["", *lines])}).slice(1)  # an offset too
    (words,) = arrow_words(batch)
    expected = [word for line in lines for word in re.findall(SEED_TOKEN, line.lower())]
    assert words.column(0).to_pylist() == expected
