"""A flow on JOB_PROCS processes x JOB_WORKERS workers (2 x 1) writing a Parquet dataset.

``python parquet_job.py OUT_DIR STORE_DIR`` (a script, for the kill tests):
the paced source of graph_recovery_job, each item's running sum as a row
``{"k": key, "total": sum}`` into a ParquetSink of three partitions in
OUT_DIR/ds.
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
from timelypy.flow.connectors.parquet import ParquetSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def build(out: str) -> Dataflow:
    flow = Dataflow("parquet")
    a = op.input("a", flow, Paced("a", 4, "p"))
    sums = op.stateful_map("sums", a, _sum)
    rows = op.map("row", sums, lambda kv: (kv[0], {"k": kv[0], "total": kv[1]}))
    op.output("write", rows, ParquetSink(Path(out) / "ds", 3))
    op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
    return flow


if __name__ == "__main__":
    out_dir, store = sys.argv[1], sys.argv[2]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    procs, workers = job_topology()
    run_cluster(
        build(out_dir),
        proc_count=procs,
        worker_count_per_proc=workers,
        epoch_interval=datetime.timedelta(milliseconds=20),
        recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
    )
