"""DataFrames in and out of the workers as Arrow batches (barrier ``mapInArrow``).

One local[4] session for all (``conftest.py``); every test runs 2 workers.
"""

from __future__ import annotations

import datetime
import decimal
from collections import Counter
from operator import add

import pytest

import timelypy_spark
from timelypy import ConfigError
from timelypy.flow import Dataflow
from timelypy_spark.arrow import BatchReader, BatchWriter
from timelypy_spark.task import STREAM_BATCHES, STREAM_RECORDS

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

pa = pytest.importorskip("pyarrow")


def every_type():
    """A schema with every Spark SQL type a user would send, and rows with nulls everywhere."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        MapType,
        ShortType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    inner = StructType([StructField("x", IntegerType()), StructField("tag", StringType())])
    schema = StructType(
        [
            StructField("byte", ByteType()),
            StructField("short", ShortType()),
            StructField("int", IntegerType()),
            StructField("long", LongType()),
            StructField("float", FloatType()),
            StructField("double", DoubleType()),
            StructField("dec38", DecimalType(38, 18)),
            StructField("dec10", DecimalType(10, 2)),
            StructField("text", StringType()),
            StructField("blob", BinaryType()),
            StructField("flag", BooleanType()),
            StructField("day", DateType()),
            StructField("moment", TimestampType()),
            StructField("wall", TimestampNTZType()),
            StructField("numbers", ArrayType(LongType())),
            StructField("stamps", ArrayType(TimestampType())),
            StructField("scores", MapType(StringType(), DoubleType())),
            StructField(
                "nested",
                StructType(
                    [
                        StructField("inner", inner),
                        StructField("when", TimestampType()),
                        StructField("items", ArrayType(inner)),
                    ]
                ),
            ),
        ]
    )
    moment = datetime.datetime(2024, 3, 10, 9, 30, 15, 123456)  # a DST change in the US
    rows = [
        (
            -128,
            -32768,
            -(2**31),
            -(2**63),
            1.5,
            -2.25,
            decimal.Decimal("12345678901234567890.123456789012345678"),
            decimal.Decimal("-12345678.90"),
            "naïve ünïcödé ✓ 日本語",
            b"\x00\xff\x10",
            True,
            datetime.date(1969, 12, 31),
            moment,
            datetime.datetime(2001, 2, 3, 4, 5, 6),
            [1, None, 3],
            [moment, None],
            {"a": 1.0, "b": None},
            ((7, "seven"), moment, [(1, None), None]),
        ),
        (
            127,
            32767,
            2**31 - 1,
            2**63 - 1,
            float("inf"),
            1e-300,
            decimal.Decimal("0.000000000000000001"),
            decimal.Decimal("99999999.99"),
            "",
            b"",
            False,
            datetime.date(2262, 4, 11),
            datetime.datetime(1900, 1, 1),
            datetime.datetime(1970, 1, 1),
            [],
            [],
            {},
            (None, None, []),
        ),
        tuple([None] * len(schema)),
        (
            0,
            0,
            0,
            0,
            -0.0,
            float("nan"),
            decimal.Decimal(0),
            decimal.Decimal("0.01"),
            "x",
            b"y",
            None,
            None,
            None,
            None,
            None,
            [None],
            None,
            ((None, None), None, None),
        ),
    ]
    return schema, rows


@pytest.fixture
def new_york(spark):
    """The session's time zone set to one that is not UTC for the test."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def identity(scope, rows):
    return rows.map(lambda row: row)


def test_every_type_round_trips_through_arrow(new_york, idle):
    schema, rows = every_type()
    frame = new_york.createDataFrame(rows, schema).repartition(2)
    result = timelypy_spark.run(new_york, identity, frame, schema=schema)
    assert result.schema == schema
    assert Counter(map(repr, result.collect())) == Counter(map(repr, frame.collect()))
    # the same values as the row path: the user's functions see exactly what df.rdd gives
    seen = timelypy_spark.run(new_york, lambda scope, rows: rows.map(repr), frame, schema="string")
    row_path = timelypy_spark.run(
        new_york, lambda scope, rows: rows.map(repr), frame, output="list"
    )
    assert Counter(row.value for row in seen.collect()) == Counter(row_path)
    assert any("Row(x=7, tag='seven')" in text for text in row_path)


def test_dict_rows_and_row_objects_are_those_of_the_row_path(idle):
    schema, rows = every_type()
    frame = idle.createDataFrame(rows, schema).repartition(2)
    for row_type in ("dict", "row"):
        seen = timelypy_spark.run(
            idle,
            lambda scope, rows: rows.map(repr),
            frame,
            schema="string",
            row_type=row_type,
            serializer="pickle",
        )
        row_path = timelypy_spark.run(
            idle,
            lambda scope, rows: rows.map(repr),
            frame,
            output="list",
            row_type=row_type,
            serializer="pickle",
        )
        assert Counter(row.value for row in seen.collect()) == Counter(row_path), row_type


def test_output_records_by_position_by_name_and_bare_values(idle):
    frame = idle.range(0, 20, numPartitions=2)

    def named(scope, rows):
        return rows.map(lambda row: {"n": row[0], "square": row[0] ** 2})

    by_name = timelypy_spark.run(idle, named, frame, schema="square long, n long")
    assert sorted(by_name.collect()) == sorted((n * n, n) for n in range(20))
    bare = timelypy_spark.run(
        idle, lambda scope, rows: rows.map(lambda row: f"#{row[0]}"), frame, schema="string"
    )
    assert bare.columns == ["value"] and len(bare.take(3)) == 3
    assert sorted(row.value for row in bare.collect()) == sorted(f"#{n}" for n in range(20))


def test_output_schema_is_inferred_from_a_sample(idle):
    frame = idle.createDataFrame(
        [(word, n) for n, word in enumerate("the quick brown fox jumps".split())],
        "word string, n int",
    ).repartition(2)
    pairs = timelypy_spark.run(
        idle,
        lambda scope, rows: rows.map(lambda row: (row[0].upper(), row[1] * 1.5)),
        frame,
        output="frame",
    )
    assert [(f.name, f.dataType.simpleString()) for f in pairs.schema] == [
        ("_1", "string"),
        ("_2", "double"),
    ]
    assert sorted(pairs.collect()) == sorted((w.upper(), n * 1.5) for w, n in frame.collect())
    named = timelypy_spark.run(
        idle,
        lambda scope, rows: rows.map(lambda row: {"word": row[0], "size": len(row[0])}),
        frame,
        output="frame",
    )
    assert named.columns == ["size", "word"]  # Spark orders a dict's fields by name
    assert named.schema["size"].dataType.simpleString() == "bigint"
    bare = timelypy_spark.run(
        idle, lambda scope, rows: rows.map(lambda r: r[1]), frame, output="frame"
    )
    assert bare.columns == ["value"]
    assert sorted(row.value for row in bare.collect()) == [0, 1, 2, 3, 4]


def test_inference_that_cannot_decide_says_to_pass_a_schema(idle):
    frame = idle.range(0, 10, numPartitions=2)
    with pytest.raises(ConfigError, match="gave no output records; pass schema="):
        timelypy_spark.run(
            idle, lambda scope, rows: rows.filter(lambda r: False), frame, output="frame"
        )
    with pytest.raises(ConfigError, match=r"cannot infer the output schema.*pass schema="):
        timelypy_spark.run(
            idle,
            lambda scope, rows: rows.map(lambda r: (r[0], "x" if r[0] % 2 else 1.5)),
            frame,
            output="frame",
        )
    with pytest.raises(ConfigError, match=r"cannot infer the output schema.*pass schema="):
        timelypy_spark.run(
            idle, lambda scope, rows: rows.map(lambda r: (r[0], None)), frame, output="frame"
        )
    with pytest.raises(ConfigError, match=r"cannot infer the output schema.*pass schema="):
        timelypy_spark.run(
            idle,
            lambda scope, rows: rows.map(lambda r: (r[0], [r[0]] if r[0] % 2 else 1.5)),
            frame,
            output="frame",
        )
    with pytest.raises(ConfigError, match="collect=True returns a list"):
        timelypy_spark.run(idle, identity, frame, output="frame", collect=True)
    with pytest.raises(ConfigError, match="output must be"):
        timelypy_spark.run(idle, identity, frame, output="table")


def test_a_user_error_in_the_arrow_path_comes_back_as_itself(idle):
    frame = idle.range(0, 1000, numPartitions=2)

    def check(row):
        if row[0] == 777:
            raise LookupError("row 777 is not welcome")
        return row

    with pytest.raises(LookupError, match="row 777 is not welcome") as info:
        timelypy_spark.run(idle, lambda scope, rows: rows.map(check), frame, schema="id long")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "'Map'" in notes and "worker 1" in notes

    flow = Dataflow()
    flow.map(check, step_id="check_row")
    flow.capture()
    with pytest.raises(LookupError, match="row 777") as info:
        timelypy_spark.run_flow(idle, flow, frame, schema="id long")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "check_row" in notes and "worker 1" in notes


def test_a_record_that_does_not_fit_the_schema_names_the_column(idle):
    frame = idle.range(0, 10, numPartitions=2)
    with pytest.raises(TypeError, match="does not fit the column 'n'"):
        timelypy_spark.run(
            idle, lambda scope, rows: rows.map(lambda r: (f"{r[0]}",)), frame, schema="n long"
        )


def test_epochs_of_records_through_arrow(idle):
    frame = idle.createDataFrame(
        [(n, f"k{n % 3}") for n in range(60)], "n long, key string"
    ).repartition(2)
    flow = Dataflow()
    flow.map(lambda row: (row[1], 1))
    flow.reduce_epoch(add)
    flow.capture()
    counts = timelypy_spark.run_flow(
        idle, flow, frame, epoch_of=lambda row: row[0] // 20, schema="key string, count long"
    )
    assert counts.columns == ["epoch", "key", "count"]
    expected = Counter((n // 20, f"k{n % 3}") for n in range(60))
    assert {(r.epoch, r.key): r["count"] for r in counts.collect()} == expected
    inferred = timelypy_spark.run_flow(
        idle, flow, frame, epoch_of=lambda row: row[0] // 20, output="frame", epoch_column="e"
    )
    assert inferred.columns == ["e", "_1", "_2"]
    assert sorted(tuple(r) for r in inferred.collect()) == sorted(
        (epoch, key, n) for (epoch, key), n in expected.items()
    )
    # run(): one count per epoch on the worker every record was sent to
    per_epoch = timelypy_spark.run(
        idle,
        lambda scope, rows: rows.exchange(lambda r: 0).count(),
        frame,
        epoch_of=lambda row: row[0] // 20,
        schema="long",
    )
    assert sorted(row.value for row in per_epoch.collect()) == [20, 20, 20]


def test_output_beyond_the_queue_bound_streams_out(idle):
    # More output per task than the queue between worker and Spark can hold: a task that
    # did not yield while its worker runs would leave the worker waiting on a full queue.
    bound = STREAM_BATCHES * STREAM_RECORDS
    fan_out = 1000
    inputs = 2 * (bound // fan_out + 10)
    frame = idle.range(0, inputs, numPartitions=2)

    def expand(scope, rows):
        return rows.flat_map(lambda row: ((row[0], i) for i in range(fan_out)))

    result = timelypy_spark.run(idle, expand, frame, schema="n long, i long")
    total = inputs * fan_out
    assert total > 2 * bound
    assert result.count() == total
    assert result.groupBy().sum("i").collect()[0][0] == inputs * sum(range(fan_out))


def test_batch_reader_and_writer_without_spark_jobs(spark):
    schema, rows = every_type()
    writer = BatchWriter(schema)
    batch = writer(rows)
    assert batch.num_rows == len(rows) and batch.schema == writer.arrow_schema()
    back = BatchReader(schema).records(batch)
    assert [repr(tuple(r)) for r in back] == [
        repr(tuple(r)) for r in spark.createDataFrame(rows, schema).collect()
    ]
    with pytest.raises(TypeError, match="has 1 fields, but the output schema has"):
        writer([(1,)])
