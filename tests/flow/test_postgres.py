"""The PostgreSQL connectors against a real server started for these tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StepError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from ..servers import postgres
from .graph_helpers import ZERO
from .kill_loop import TOPOLOGIES, kill_and_resume, rescaling

psycopg = pytest.importorskip("psycopg", reason="needs psycopg 3: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def dsn():
    with postgres() as server:
        yield server


def sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return cur.fetchall() if cur.description else []


def test_a_table_is_read_in_key_order_and_resumed_after_the_last_key(dsn):
    from timelypy.flow.connectors.postgres import PostgresSource

    sql(dsn, "CREATE TABLE readings (id int PRIMARY KEY, value text)")
    sql(dsn, "INSERT INTO readings SELECT i, 'v' || i FROM generate_series(1, 2500) AS i")
    source = PostgresSource(dsn, "readings", "id", batch_size=1000)
    flow = Dataflow("read")
    out: list[Any] = []
    op.output("out", op.input("rows", flow, source), TestingSink(out))
    run_main(flow)
    assert [row["id"] for row in out] == list(range(1, 2501))
    part = source.build_part("s", "readings", 2400)
    assert [row["id"] for row in part.next_batch()] == list(range(2401, 2501))
    with pytest.raises(StopIteration):
        part.next_batch()


def _flow(dsn: str, items: list[Any], table: str, mode: str = "append") -> Dataflow:
    from timelypy.flow.connectors.postgres import PostgresSink

    flow = Dataflow("sink")
    rows = op.map(
        "row",
        op.input("inp", flow, TestingSource(items)),
        lambda kv: (kv[0], {"k": kv[0], "v": kv[1]}),
    )
    op.output(
        "out",
        rows,
        PostgresSink(dsn, table, mode=mode, key="k" if mode == "upsert" else None, partitions=2),
    )
    return flow


def test_appends_and_upserts_are_exactly_once_across_aborts(dsn, tmp_path):
    sql(dsn, "CREATE TABLE appended (k text, v int)")
    sql(dsn, "CREATE TABLE upserted (k text PRIMARY KEY, v int)")
    values = [(f"k{i % 7}", i) for i in range(60)]
    aborting = [
        *values[:20],
        TestingSource.ABORT(),
        *values[20:45],
        TestingSource.ABORT(),
        *values[45:],
    ]
    for table, mode in (("appended", "append"), ("upserted", "upsert")):
        config = RecoveryConfig(tmp_path / table, partitions=1)
        for _ in range(3):
            run_main(_flow(dsn, aborting, table, mode), epoch_interval=ZERO, recovery_config=config)
    assert sorted(sql(dsn, "SELECT k, v FROM appended")) == sorted(values)
    latest = {key: value for key, value in values}
    assert dict(sql(dsn, "SELECT k, v FROM upserted")) == latest
    # without recovery, every epoch commits as it closes too
    sql(dsn, "CREATE TABLE plain (k text, v int)")
    run_main(_flow(dsn, values, "plain"), epoch_interval=ZERO)
    assert sorted(sql(dsn, "SELECT k, v FROM plain")) == sorted(values)


def test_bad_rows_and_an_unreachable_server_name_the_step(dsn):
    from timelypy.flow.connectors.postgres import PostgresSink

    sql(dsn, "CREATE TABLE strict (k text, v int NOT NULL)")
    with pytest.raises(StepError, match=r"output step 'sink\.out'") as info:
        run_main(_flow(dsn, [("a", None)], "strict"), epoch_interval=ZERO)
    assert "refused" in str(info.value.__cause__) or "null" in str(info.value).lower()
    flow = Dataflow("nowhere")
    sink = PostgresSink(
        "host=127.0.0.1 port=1 user=postgres dbname=postgres",
        "t",
        connect_attempts=2,
        retry_seconds=0.01,
    )
    op.output("out", op.input("inp", flow, TestingSource([("a", {"k": "a"})])), sink)
    # the server is tried when the first epoch closes (the worker is not held up before)
    with pytest.raises(
        StepError, match=r"'nowhere\.out' \(partition 't-0'\).*127\.0\.0\.1:1 after 2 attempts"
    ):
        run_main(flow)
    with pytest.raises(FlowError, match="needs key="):
        PostgresSink("", "t", mode="upsert")


def _table(dsn: str, table: str) -> Counter[tuple[Any, ...]]:
    return Counter(sql(dsn, f"SELECT k, total FROM {table}"))


def _run_with_kills(dsn: str, tmp_path: Path, kills: int, seed: int, items: int) -> int:
    job = Path(__file__).with_name("pg_job.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GRAPH_JOB_COUNT": str(items)}
    prefix = f"kill{seed}"
    for table in ("clean", "out"):
        sql(dsn, f"CREATE TABLE {prefix}_{table} (k text, total int)")
        sql(dsn, f"CREATE TABLE {prefix}_{table}_latest (k text PRIMARY KEY, total int)")

    def start(table: str, out: Path, store: Path, topology: dict[str, str]) -> Any:
        out.mkdir(exist_ok=True)
        return subprocess.Popen(
            [sys.executable, str(job), dsn, f"{prefix}_{table}", str(out), str(store)],
            env={**env, **topology},
            stderr=subprocess.PIPE,
        )

    clean = start("clean", tmp_path / "clean", tmp_path / "clean-store", {})
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    runs = rescaling()  # each run on the next topology: resumed on other worker counts
    killed = kill_and_resume(
        lambda: start("out", out, store, next(runs)),
        out,
        kills,
        seed,
        span=items / 1000 / (kills + 1),
    )
    final = start("out", out, store, next(runs))
    assert final.wait(120) == 0, final.stderr.read().decode() if final.stderr else ""
    want, got = _table(dsn, f"{prefix}_clean"), _table(dsn, f"{prefix}_out")
    assert sum(want.values()) == items  # one running sum per item
    assert got == want, (sum(got.values()), sum(want.values()))
    assert _table(dsn, f"{prefix}_out_latest") == _table(dsn, f"{prefix}_clean_latest")
    print(
        f"PostgreSQL exactly once through {killed} SIGKILLs, resumed on processes x workers "
        f"{TOPOLOGIES} in turn: {sum(got.values())} rows"
    )
    return killed


@pytest.mark.timeout(300)
def test_the_sink_is_exactly_once_through_sigkills(dsn, tmp_path):
    assert _run_with_kills(dsn, tmp_path, kills=3, seed=38, items=1200) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_sink_is_exactly_once_through_twenty_sigkills(dsn, tmp_path):
    assert _run_with_kills(dsn, tmp_path, kills=24, seed=2026, items=5000) >= 20


def test_values_of_other_types_than_their_columns_go_as_copy_text_would_send_them(dsn, caplog):
    """Binary COPY where the columns allow it; a value it cannot send turns the epoch to text."""
    import datetime
    import decimal

    sql(dsn, "CREATE TABLE typed (k text, n int, x float8, ok bool)")
    sql(dsn, "CREATE TABLE mixed (k text, at timestamptz, amount numeric, tags jsonb)")
    typed = [
        ("a", {"k": "a", "n": 1, "x": 0.5, "ok": True}),
        ("b", {"k": "b\tc\n", "n": None, "x": 2, "ok": False}),
        ("c", {"k": "c", "n": "7", "x": 1.25, "ok": None}),  # "7": binary cannot, text can
    ]
    when = datetime.datetime(2026, 11, 27, 12, tzinfo=datetime.UTC)
    mixed = [("m", {"k": "m", "at": when, "amount": decimal.Decimal("1.50"), "tags": '{"a": 1}'})]
    caplog.set_level("INFO", logger="timelypy.flow.connectors")
    for table, items in (("typed", typed), ("mixed", mixed)):
        from timelypy.flow.connectors.postgres import PostgresSink

        flow = Dataflow(table)
        op.output("out", op.input("inp", flow, TestingSource(items)), PostgresSink(dsn, table))
        run_main(flow, epoch_interval=ZERO)
    assert "binary COPY cannot send a value" in caplog.text  # "7" into int
    assert sorted(sql(dsn, "SELECT k, n, x, ok FROM typed")) == [
        ("a", 1, 0.5, True),
        ("b\tc\n", None, 2.0, False),
        ("c", 7, 1.25, None),
    ]
    assert sql(dsn, "SELECT k, at, amount, tags FROM mixed") == [
        ("m", when, decimal.Decimal("1.50"), {"a": 1})
    ]


def test_a_resumed_partition_deletes_the_rows_of_the_epochs_after_its_snapshot(dsn):
    """What a failed execution committed after the recovery store's epoch goes, by ``xmin``."""
    from timelypy.flow.connectors.postgres import EPOCHS_TABLE, PostgresSink

    sql(dsn, "CREATE TABLE rolled (k text, v int)")
    sql(dsn, "INSERT INTO rolled VALUES ('someone else', 0)")
    sink = PostgresSink(dsn, "rolled", partitions=2)
    first = sink.build_part("f.out", "rolled-0", None)
    other = sink.build_part("f.out", "rolled-1", None)
    for epoch in (1, 2, 3):
        first.write_batch([{"k": "a", "v": epoch}, {"k": "b", "v": epoch}])
        assert first.snapshot() == epoch
        other.write_batch([{"k": "c", "v": epoch}])
        other.snapshot()
    first.close()
    other.close()
    # the store had only epoch 1 of partition 0 when the execution failed
    sink.build_part("f.out", "rolled-0", 1).close()
    assert sorted(sql(dsn, "SELECT k, v FROM rolled")) == [
        ("a", 1),
        ("b", 1),
        ("c", 1),
        ("c", 2),
        ("c", 3),
        ("someone else", 0),
    ]
    assert sql(dsn, f"SELECT count(*) FROM {EPOCHS_TABLE} WHERE part = 'rolled-0'") == [(0,)]
