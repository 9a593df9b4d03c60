"""Event-time windows on two processes with recovery, for the kill tests (a script).

``python window_recovery_job.py OUT_DIR STORE_DIR [SESSION]``: the paced
source of graph_recovery_job (keys ``p{partition}-{j % 5}``, item ``j``
at event time ``T0 + j`` seconds), summed per key in 10 s tumbling
windows (or 25 s-gap sessions) on an event clock that waits 30 s and
reads a frozen system time, so only values and the end of the input close
windows: every key has windows open across any kill, and windows close
after a resume. Results go to graph_recovery_job's exactly-once
:class:`LinesSink`; the late stream too.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import timelypy.flow.operators as op
from tests.flow.graph_recovery_job import LinesSink, Paced, PidSink
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.operators import windowing as w
from timelypy.flow.recovery import RecoveryConfig

T0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def frozen_now() -> datetime.datetime:
    """The clock's system time, frozen: windows close on values and at the end only."""
    return T0


def at(value: int) -> datetime.datetime:
    """Item ``j``'s event time."""
    return T0 + datetime.timedelta(seconds=value)


def build(out: str, session: bool) -> Dataflow:
    """Windows per key over the paced source; results and late values to ``out``."""
    flow = Dataflow("windows")
    a = op.input("a", flow, Paced("a", 4, "p"))
    clock = w.EventClock(at, datetime.timedelta(seconds=30), now_getter=frozen_now)
    windower: w.Windower = (
        w.SessionWindower(datetime.timedelta(seconds=25))
        if session
        else w.TumblingWindower(datetime.timedelta(seconds=10), T0)
    )
    sums = w.fold_window("sums", a, clock, windower, int, lambda s, j: s + j, lambda x, y: x + y)
    shown = op.map("show", sums.down, lambda kv: (kv[0], f"{kv[0]} window {kv[1][0]} = {kv[1][1]}"))
    late = op.map("late", sums.late, lambda kv: (kv[0], f"late {kv}"))
    op.output("out", op.merge("all", shown, late), LinesSink(out, 3))
    op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
    return flow


if __name__ == "__main__":
    out_dir, store = sys.argv[1], sys.argv[2]
    session = len(sys.argv) > 3 and sys.argv[3] == "session"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    run_cluster(
        build(out_dir, session),
        proc_count=2,
        worker_count_per_proc=1,
        epoch_interval=datetime.timedelta(milliseconds=20),
        recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
    )
