"""Stream-graph flows on Spark: their own sources, an RDD or DataFrame into an ``op.input``.

Each result is compared with the same flow run by :func:`timelypy.flow.run`
on one worker.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import timelypy.flow.operators as op
import timelypy_spark
from timelypy.errors import FlowError
from timelypy.flow import run
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.outputs import CaptureSink
from timelypy.flow.testing import TestingSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

LINES = ["to be or not to be", "that is the question", "to sleep perchance to dream"]


def _graph(source: Any, rows: bool = False) -> Dataflow:
    """Words counted, joined with their lengths; short and long words on two branches.

    With ``rows`` the input's items are a DataFrame's rows, whose first field is the line.
    """
    flow = Dataflow("g")
    lines = op.input("lines", flow, source)
    if rows:
        lines = op.map("line", lines, lambda row: row[0])
    words = op.flat_map("split", lines, str.split)
    split = op.branch("short", words, lambda w: len(w) <= 2)
    counts = op.count_final("count", split.falses, lambda w: w)
    lengths = op.map(
        "len", op.key_on("key", split.falses, lambda w: w), lambda kv: (kv[0], len(kv[1]))
    )
    joined = op.join("both", counts, lengths, insert_mode="first")
    shorts = op.map("tag", split.trues, lambda w: ("short", w))
    op.output("out", op.merge("all", joined, shorts), CaptureSink())
    return flow


def _items(pairs: Any) -> Counter[Any]:
    return Counter(repr(item) for _, item in pairs)


def test_a_graph_flow_with_its_own_source_runs_on_spark_tasks(idle):
    want = _items(run(_graph(TestingSource(LINES * 3, 2))))
    got = timelypy_spark.run_flow(
        idle, _graph(TestingSource(LINES * 3, 2)), workers=2, collect=True
    )
    assert _items(got) == want


def test_an_rdd_and_a_dataframe_feed_a_spark_input(idle):
    want = _items(run(_graph(TestingSource(LINES * 4, 3))))
    rdd = idle.sparkContext.parallelize(LINES * 4, 3)
    got = timelypy_spark.run_flow(idle, _graph(timelypy_spark.SparkInput()), rdd, collect=True)
    assert _items(got) == want
    # a DataFrame's rows arrive as tuples: the flow takes the line out first
    frame = idle.createDataFrame([(line,) for line in LINES * 4], "line string")
    got = timelypy_spark.run_flow(
        idle, _graph(timelypy_spark.SparkInput(), rows=True), frame, workers=2, collect=True
    )
    assert _items(got) == want


def test_iter_flow_streams_a_graph_flow(idle):
    flow = Dataflow("it")
    numbers = op.input("numbers", flow, TestingSource(list(range(50)), 5))
    op.output("out", op.map("square", numbers, lambda x: x * x), CaptureSink())
    got = [item for _, items in timelypy_spark.iter_flow(idle, flow, workers=2) for item in items]
    assert sorted(got) == [x * x for x in range(50)]


def test_several_rdds_and_a_dataframe_feed_several_spark_inputs(idle):
    def build() -> Dataflow:
        flow = Dataflow("many")
        names = op.input("names", flow, timelypy_spark.SparkInput())
        ages = op.input("ages", flow, timelypy_spark.SparkInput())
        towns = op.map("town", op.input("towns", flow, timelypy_spark.SparkInput()), tuple)
        joined = op.join("people", names, ages, towns, emit_mode="final")
        op.output("out", joined, CaptureSink())
        return flow

    names = [(f"u{i}", f"name{i}") for i in range(40)]
    ages = [(f"u{i}", 20 + i) for i in range(0, 40, 2)]
    towns = [(f"u{i}", f"town{i}") for i in range(0, 40, 3)]
    sources = {
        "names": idle.sparkContext.parallelize(names, 3),
        "ages": idle.sparkContext.parallelize(ages, 2),
        "towns": idle.createDataFrame(towns, "k string, town string"),
    }
    got = timelypy_spark.run_flow(idle, build(), sources, workers=2, collect=True)
    age, town = dict(ages), dict(towns)
    want = [(k, (n, age.get(k), town.get(k))) for k, n in names]
    assert sorted(item for _, item in got) == sorted(want)
    with pytest.raises(
        FlowError, match=r"no source was given for the SparkInput step\(s\) \['many.towns'\]"
    ):
        timelypy_spark.run_flow(idle, build(), {k: v for k, v in sources.items() if k != "towns"})
    with pytest.raises(FlowError, match="which is no SparkInput step"):
        timelypy_spark.run_flow(idle, build(), {**sources, "bogus": sources["ages"]})


def test_spark_input_misuse_is_refused(idle):
    with pytest.raises(FlowError, match=r"pass run_flow the RDD or DataFrame"):
        timelypy_spark.run_flow(idle, _graph(timelypy_spark.SparkInput()), collect=True)
    flow = Dataflow("two")
    a = op.input("a", flow, timelypy_spark.SparkInput())
    b = op.input("b", flow, timelypy_spark.SparkInput())
    op.output("out", op.merge("m", a, b), CaptureSink())
    rdd = idle.sparkContext.parallelize([1], 1)
    with pytest.raises(FlowError, match=r"this flow has 2"):
        timelypy_spark.run_flow(idle, flow, rdd, collect=True)
    with pytest.raises(FlowError, match=r"only timelypy_spark\.run_flow"):
        list(run(_graph(timelypy_spark.SparkInput())))


def test_spark_reads_the_parquet_dataset_a_flow_wrote(idle, tmp_path):
    from timelypy.flow.connectors.parquet import ParquetSink
    from timelypy.flow.testing import run_main

    flow = Dataflow("pq")
    rows = op.map(
        "row",
        op.input("words", flow, TestingSource(LINES, 1)),
        lambda line: (line, {"line": line, "words": len(line.split())}),
    )
    op.output("out", rows, ParquetSink(tmp_path / "ds", partitions=2))
    run_main(flow)
    frame = idle.read.parquet(str(tmp_path / "ds"))
    assert sorted((r["line"], r["words"]) for r in frame.collect()) == sorted(
        (line, len(line.split())) for line in LINES
    )
