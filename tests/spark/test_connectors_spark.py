"""Connectors inside Spark tasks: file, Parquet and demo connectors, and PostgreSQL.

Each flow runs with :func:`timelypy_spark.run_flow` on two tasks and is
compared with the same flow run by :func:`timelypy.flow.run` on one worker;
Spark itself reads the Parquet sink's dataset back.
"""

from __future__ import annotations

from typing import Any

import pytest

import timelypy.flow.operators as op
import timelypy_spark
from timelypy.flow import run
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.outputs import CaptureSink

from ..flow import connector_flows
from ..servers import postgres

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
pytest.importorskip("pyarrow.parquet", reason="needs pyarrow: pip install pyarrow")


def test_file_parquet_and_demo_connectors_run_in_spark_tasks(idle, tmp_path):
    connector_flows.write_inputs(tmp_path / "in")
    one = tmp_path / "one"
    want = connector_flows.outputs(one, list(run(connector_flows.build(tmp_path / "in", one))))
    spark_out = tmp_path / "spark"
    captured = timelypy_spark.run_flow(
        idle, connector_flows.build(tmp_path / "in", spark_out), workers=2, collect=True
    )
    assert connector_flows.outputs(spark_out, captured) == want
    # the Parquet sink's dataset, as Spark reads it (hidden temporary files are skipped)
    frame = idle.read.parquet(str(spark_out / "ds"))
    assert sorted((row["word"], row["n"]) for row in frame.collect()) == want["parquet"]
    assert want["parquet"] == connector_flows.expected_counts()


def _sql(dsn: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def _pg_flow(dsn: str, table: str) -> Dataflow:
    from timelypy.flow.connectors.postgres import PostgresSink, PostgresSource

    flow = Dataflow("pg")
    rows = op.input("rows", flow, PostgresSource(dsn, "readings", "id", batch_size=100))
    keyed = op.map("key", rows, lambda r: (f"s{r['id'] % 5}", r["value"]))
    totals = op.reduce_final("total", keyed, lambda a, b: a + b)
    out = op.map("row", totals, lambda kv: (kv[0], {"sensor": kv[0], "total": kv[1]}))
    op.output("db", out, PostgresSink(dsn, table, mode="upsert", key="sensor", partitions=2))
    log = op.map("log", keyed, lambda kv: (kv[0], {"key": kv[0], "value": kv[1]}))
    op.output("appended", log, PostgresSink(dsn, f"{table}_log", partitions=2))
    op.output("seen", op.map("n", keyed, lambda kv: 1), CaptureSink())
    return flow


def test_postgres_source_and_sinks_run_in_spark_tasks(idle):
    with postgres() as dsn:
        _sql(dsn, "CREATE TABLE readings (id int PRIMARY KEY, value int)")
        _sql(dsn, "INSERT INTO readings SELECT i, i * 3 FROM generate_series(1, 1000) AS i")
        for table in ("one", "spark"):
            _sql(dsn, f"CREATE TABLE {table} (sensor text PRIMARY KEY, total int)")
            _sql(dsn, f"CREATE TABLE {table}_log (key text, value int)")
        assert len(list(run(_pg_flow(dsn, "one")))) == 1000
        captured = timelypy_spark.run_flow(idle, _pg_flow(dsn, "spark"), workers=2, collect=True)
        assert len(captured) == 1000
        want = sorted(_sql(dsn, "SELECT sensor, total FROM one"))
        assert want == sorted(
            (f"s{k}", sum(i * 3 for i in range(1, 1001) if i % 5 == k)) for k in range(5)
        )
        assert sorted(_sql(dsn, "SELECT sensor, total FROM spark")) == want
        log = "SELECT key, value FROM {} ORDER BY value"
        assert _sql(dsn, log.format("spark_log")) == _sql(dsn, log.format("one_log"))
