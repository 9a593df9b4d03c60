"""Kill one Spark task's Python worker mid-run on a local-cluster; report what run_flow did.

    python lost_task.py --master MASTER [--recover DIR] [--no-kill]
        [--call run_flow|collect|iter_flow] [--kill python|executor] PIDS_DIR OUTPUT.json

The flow counts records per key with ``stateful_map`` over an RDD whose
records arrive slowly (so epochs close, and commit, while it runs); every
Python worker that reads records writes its PID into ``PIDS_DIR``.  Once
both workers are reading, the driver SIGKILLs one of them.  With
``--recover DIR`` the run has a recovery store there and 2 attempts; the
JSON says whether its result equals the failure-free one (computed first
with ``timelypy.flow.run``), the store's executions, and how long the
resumed execution took from the kill to its first epoch.  Without it, the
JSON has the error and how long after the kill it came.  ``--no-kill`` kills
nothing (a baseline); ``elapsed`` is the run_flow call's seconds either way
(``benchmarks/spark_recovery_bench.py`` runs this script).  ``--call``
picks how the flow runs (``run_flow`` to an RDD, ``run_flow(collect=True)``,
or ``iter_flow``); ``--kill executor`` kills the executor JVM that runs the
Python worker instead of the worker (``local-cluster`` masters only).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the driver imports the repository's timelypy

import timelypy_spark  # noqa: E402
from timelypy.flow import Dataflow, run  # noqa: E402
from timelypy.recovery import RecoveryConfig, RecoveryStore  # noqa: E402

RECORDS = 3000
PER_EPOCH = 100


def key_of(x: int) -> tuple[str, int]:
    return (f"k{x % 7}", 1)


def running(total: int, value: int) -> tuple[int, int]:
    return total + value, total + value


def executor_of(pid: int) -> int:
    """The executor JVM (CoarseGrainedExecutorBackend) above Python worker ``pid``."""
    while pid > 1:
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise RuntimeError("no executor JVM above the Python worker (a local-cluster master?)")


def make_flow() -> Dataflow:
    flow = Dataflow()
    flow.map(key_of)
    flow.stateful_map("running", lambda key: 0, running)
    flow.capture()
    return flow


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--recover")
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--call", choices=["run_flow", "collect", "iter_flow"], default="run_flow")
    parser.add_argument("--kill", choices=["python", "executor"], default="python")
    parser.add_argument("pids")
    parser.add_argument("output")
    args = parser.parse_args()
    pids = args.pids
    flow = make_flow()
    want = Counter(run(flow, [(x // PER_EPOCH, x) for x in range(RECORDS)]))

    def slow_record(x: int) -> int:
        import os
        import time

        Path(pids, str(os.getpid())).touch()
        time.sleep(0.002)
        return x

    spark = timelypy_spark.session(args.master, "timelypy-lost-task-test")
    sc = spark.sparkContext
    report: dict = {}
    killed: list[float] = []
    first_epochs: dict[int, float] = {}

    class FirstEpochs(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            mark = getattr(record, "timelypy_first_epoch", None)
            if mark is not None:
                first_epochs[mark[0]] = mark[1]

    logger = logging.getLogger("timelypy_spark")
    logger.setLevel(logging.INFO)
    logger.addHandler(FirstEpochs())

    def killer() -> None:
        while len(os.listdir(pids)) < 2:
            time.sleep(0.05)
        time.sleep(1.5)
        pid = int(sorted(os.listdir(pids))[0])
        if args.kill == "executor":
            pid = executor_of(pid)
        killed.append(time.time())
        os.kill(pid, signal.SIGKILL)

    if not args.no_kill:
        threading.Thread(target=killer, daemon=True).start()
    rdd = sc.parallelize(range(RECORDS), 2).map(slow_record)
    options: dict = {}
    if args.recover:
        options = {"recovery_config": RecoveryConfig(args.recover), "attempts": 2}
    started = time.monotonic()
    try:
        keywords = dict(workers=2, epoch_of=lambda x: x // PER_EPOCH, presorted=True)
        if args.call == "iter_flow":
            pairs = [
                (epoch, item)
                for epoch, items in timelypy_spark.iter_flow(spark, flow, rdd, **keywords)
                for item in items
            ]
        elif args.call == "collect":
            pairs = timelypy_spark.run_flow(spark, flow, rdd, collect=True, **keywords, **options)
        else:
            pairs = timelypy_spark.run_flow(spark, flow, rdd, **keywords, **options).collect()
        got = Counter(pairs)
        report["elapsed"] = time.monotonic() - started
        report["equal"] = got == want
        report["missing"] = repr(list((want - got).items())[:5])
        report["extra"] = repr(list((got - want).items())[:5])
    except Exception as exc:
        report["error"] = type(exc).__name__
        report["message"] = str(exc)
        report["after_kill"] = time.time() - killed[0] if killed else None
    report["killed"] = bool(killed)
    report["persisted"] = len(sc._jsc.getPersistentRDDs())
    if args.recover:
        store = RecoveryStore(args.recover)
        report["executions"] = [(e.ex_num, e.resume_epoch) for e in store.executions()]
        last = store.executions()[-1].ex_num
        if killed and last in first_epochs:
            report["kill_to_first_epoch"] = first_epochs[last] - killed[0]
    Path(args.output).write_text(json.dumps(report))
    spark.stop()


if __name__ == "__main__":
    main()
