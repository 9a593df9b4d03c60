"""A flow appending to Redis streams, for the kill tests (a script; JOB_PROCS x JOB_WORKERS).

``python redis_job.py HOST PORT PREFIX OUT_DIR STORE_DIR``: the paced source
of graph_recovery_job; each item's running sum appended to one of three
streams ``PREFIX:0..2`` by its key.
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
from timelypy.flow.connectors.redis_streams import RedisStreamSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def build(client: dict[str, object], prefix: str, out: str) -> Dataflow:
    flow = Dataflow("redis")
    a = op.input("a", flow, Paced("a", 4, "p"))
    sums = op.stateful_map("sums", a, _sum)
    entries = op.map("entry", sums, lambda kv: (kv[0], {"k": kv[0], "total": str(kv[1])}))
    streams = [f"{prefix}:{i}" for i in range(3)]
    op.output("append", entries, RedisStreamSink(client, streams))
    op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
    return flow


if __name__ == "__main__":
    host, port, prefix, out_dir, store = sys.argv[1:6]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    procs, workers = job_topology()
    run_cluster(
        build({"host": host, "port": int(port)}, prefix, out_dir),
        proc_count=procs,
        worker_count_per_proc=workers,
        epoch_interval=datetime.timedelta(milliseconds=20),
        recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
    )
