"""A flow writing to PostgreSQL, for the kill tests (a script; JOB_PROCS x JOB_WORKERS).

``python pg_job.py DSN TABLE OUT_DIR STORE_DIR``: the paced source of
graph_recovery_job; each item's running sum appended to TABLE (two
partitions), and each key's latest sum upserted into TABLE_latest.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import timelypy.flow.operators as op
from tests.flow.graph_recovery_job import Paced, PidSink
from tests.flow.kill_loop import job_topology
from timelypy.flow import run_cluster
from timelypy.flow.connectors.postgres import PostgresSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def build(dsn: str, table: str, out: str) -> Dataflow:
    flow = Dataflow("pg")
    a = op.input("a", flow, Paced("a", 4, "p"))
    sums = op.stateful_map("sums", a, _sum)
    rows = op.map("row", sums, lambda kv: (kv[0], {"k": kv[0], "total": kv[1]}))
    op.output("append", rows, PostgresSink(dsn, table, partitions=2))
    op.output("latest", rows, PostgresSink(dsn, f"{table}_latest", mode="upsert", key="k"))
    op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
    return flow


if __name__ == "__main__":
    dsn, table, out_dir, store = sys.argv[1:5]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    procs, workers = job_topology()
    run_cluster(
        build(dsn, table, out_dir),
        proc_count=procs,
        worker_count_per_proc=workers,
        epoch_interval=datetime.timedelta(milliseconds=20),
        recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
    )
