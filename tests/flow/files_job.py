"""A flow writing with FileSink and DirSink, for the kill tests (a script; JOB_PROCS x JOB_WORKERS).

``python files_job.py OUT_DIR STORE_DIR``: the paced partitioned source of
graph_recovery_job, running sums per key to a DirSink of three files, and
the odd values joined with a second source to a FileSink.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import timelypy.flow.operators as op
from timelypy.flow import run_cluster
from timelypy.flow.connectors.files import DirSink, FileSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.flow.graph_recovery_job import Paced, PidSink
from tests.flow.kill_loop import job_topology


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def build(out: str) -> Dataflow:
    flow = Dataflow("files")
    a = op.input("a", flow, Paced("a", 4, "p"))
    b = op.input("b", flow, Paced("b", 2, ""))
    sums = op.stateful_map("sums", a, _sum)
    texts = op.map_value("text", sums, lambda s: f"sum {s}")
    op.output("write_sums", texts, DirSink(Path(out) / "dir", 3))
    odd = op.key_on(
        "by_j", op.key_rm("rm", op.filter("odd", a, lambda kv: kv[1] % 2 == 1)), lambda j: f"j{j}"
    )
    pairs = op.join("pair", odd, b, insert_mode="first")
    op.output(
        "write_pairs",
        op.map_value("show", pairs, lambda row: f"pair {row}"),
        FileSink(Path(out) / "pairs.txt"),
    )
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
