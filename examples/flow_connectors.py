"""Orders from a CSV file, totals per user into files, a Parquet dataset, PostgreSQL and Redis.

    python examples/flow_connectors.py                       # files and Parquet only
    python examples/flow_connectors.py --postgres "host=127.0.0.1 port=5433 user=postgres"
    python examples/flow_connectors.py --redis 127.0.0.1:6380 -w 2

``orders.csv`` (made up here, in a temporary directory) has ``user,amount``
rows.  The flow reads it with ``CSVSource``, sums the amounts per user
(``reduce_final``) and writes each ``(user, total)``

* as a line ``user total`` to a ``DirSink`` of two files,
* as a row to a ``ParquetSink`` dataset (read back with pyarrow),
* with ``--postgres DSN``: upserted into the table ``order_totals``
  (created if missing) by a ``PostgresSink``,
* with ``--redis HOST:PORT``: appended to the stream ``order-totals`` by a
  ``RedisStreamSink`` (the stream is emptied first).

It runs with a recovery store, on ``-w`` worker threads, and then prints
what each sink holds, sorted, one ``sink: user total`` line each::

    dir: ann 45
    ...
    parquet: ann 45
    ...

Every sink here is exactly once across a crash and a resume (see
docs/connectors.md), so each user appears once per sink.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import timelypy.flow.operators as op
from timelypy.flow import run_cluster
from timelypy.flow.connectors.files import CSVSource, DirSink
from timelypy.flow.connectors.parquet import ParquetSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig

USERS = ["ann", "bob", "cyd", "dee", "eve"]


def write_orders(path: Path) -> None:
    """300 orders: user ``USERS[i % 5]`` spends ``i % 7``."""
    rows = "".join(f"{USERS[i % len(USERS)]},{i % 7}\n" for i in range(300))
    path.write_text("user,amount\n" + rows)


def build(work: Path, postgres: str | None, redis: dict[str, Any] | None) -> Dataflow:
    """The flow: totals per user from ``work/orders.csv`` into every sink asked for."""
    flow = Dataflow("orders")
    rows = op.input("rows", flow, CSVSource(work / "orders.csv"))
    pairs = op.map("pair", rows, lambda row: (row["user"], int(row["amount"])))
    totals = op.reduce_final("totals", pairs, lambda a, b: a + b)
    lines = op.map("line", totals, lambda kv: (kv[0], f"{kv[0]} {kv[1]}"))
    op.output("dir", lines, DirSink(work / "totals", 2))
    records = op.map("record", totals, lambda kv: (kv[0], {"name": kv[0], "total": kv[1]}))
    op.output("parquet", records, ParquetSink(work / "dataset", 2))
    if postgres is not None:
        from timelypy.flow.connectors.postgres import PostgresSink

        sink = PostgresSink(postgres, "order_totals", mode="upsert", key="name")
        op.output("postgres", records, sink)
    if redis is not None:
        from timelypy.flow.connectors.redis_streams import RedisStreamSink

        fields = op.map_value("fields", totals, lambda t: {"total": str(t)})
        keyed = op.map("keyed", fields, lambda kv: (kv[0], {"name": kv[0], **kv[1]}))
        op.output("redis", keyed, RedisStreamSink(redis, ["order-totals"]))
    return flow


def main() -> None:
    """Parse the flags, run the flow, print what the sinks hold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", metavar="DSN", help="also upsert into order_totals")
    parser.add_argument("--redis", metavar="HOST:PORT", help="also append to order-totals")
    parser.add_argument("-w", "--workers", type=int, default=1, help="worker threads")
    args = parser.parse_args()
    redis = None
    if args.redis:
        host, _, port = args.redis.rpartition(":")
        redis = {"host": host, "port": int(port)}
        import redis as redis_py

        redis_py.Redis(**redis).delete("order-totals")
    if args.postgres:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS order_totals (name text PRIMARY KEY, total int)"
            )
    work = Path(tempfile.mkdtemp(prefix="timelypy-connectors-"))
    write_orders(work / "orders.csv")
    run_cluster(
        build(work, args.postgres, redis),
        worker_count_per_proc=args.workers,
        recovery_config=RecoveryConfig(work / "store"),
    )
    lines = [
        f"dir: {line}" for p in (work / "totals").iterdir() for line in p.read_text().splitlines()
    ]
    import pyarrow.parquet as pq

    table = pq.read_table(work / "dataset").to_pylist()
    lines += [f"parquet: {row['name']} {row['total']}" for row in table]
    if args.postgres:
        with psycopg.connect(args.postgres) as conn:
            found = conn.execute("SELECT name, total FROM order_totals").fetchall()
        lines += [f"postgres: {user} {total}" for user, total in found]
    if redis is not None:
        entries = redis_py.Redis(**redis, decode_responses=True).xrange("order-totals")
        lines += [f"redis: {f['name']} {f['total']}" for _, f in entries]
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
