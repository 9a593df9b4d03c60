"""``run_cluster`` started each way, in a fresh interpreter (one thread, so fork is allowed).

``python start_method_job.py CASE`` prints one JSON line:

* ``results`` -- a keyed running count over 2 processes x 2 workers with
  ``start_method`` ``auto``, ``fork`` and ``spawn``; for each, the sorted
  output and which processes' workers saw a parent process made by
  ``multiprocessing`` (a forked helper does, a spawned one does not);
* ``raises`` -- a step that raises on process 1, started by fork: the error
  run_cluster raised;
* ``killed`` -- process 1, started by fork, kills itself with SIGKILL: the
  error run_cluster raised and how long it took.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import timelypy.flow.operators as op
from tests.flow.graph_helpers import LinesSink, read_lines
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.testing import TestingSource

WORDS = [f"w{i % 7}" for i in range(200)]


def _count(total: int | None, word: str) -> tuple[int, tuple[int, bool, int]]:
    """A running count, and where it ran: on the key's worker, after the exchange."""
    total = (total or 0) + 1
    return total, (total, multiprocessing.parent_process() is not None, os.getpid())


def _results() -> dict[str, object]:
    out: dict[str, object] = {}
    for method in ("auto", "fork", "spawn"):
        with tempfile.TemporaryDirectory() as directory:
            flow = Dataflow("start_method")
            words = op.input("inp", flow, TestingSource(WORDS, batch_size=10))
            keyed = op.key_on("key", words, str)
            op.output("out", op.stateful_map("count", keyed, _count), LinesSink(directory))
            run_cluster(flow, proc_count=2, worker_count_per_proc=2, start_method=method)
            lines = read_lines(directory)
        pids = {pid for _, (_, _, pid) in lines}
        out[method] = {
            "items": sorted((key, total) for key, (total, _, _) in lines),
            "processes": len(pids),
            "forked_processes": len({pid for _, (_, forked, pid) in lines if forked}),
            "parent_seen": os.getpid() in pids,
        }
    return out


def _raising(state: None, word: str) -> tuple[None, str]:
    if multiprocessing.parent_process() is not None:
        raise ValueError(f"bad word {word!r}")
    return None, word


def _killing(state: None, word: str) -> tuple[None, str]:
    if multiprocessing.parent_process() is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    return None, word


def _failing(fn: object) -> dict[str, object]:
    flow = Dataflow("start_method_failure")
    words = op.input("inp", flow, TestingSource(WORDS, batch_size=10))
    keyed = op.key_on("key", words, str)
    with tempfile.TemporaryDirectory() as directory:
        op.output("out", op.stateful_map("boom", keyed, fn), LinesSink(directory))  # type: ignore[arg-type]
        started = time.monotonic()
        try:
            run_cluster(flow, proc_count=2, start_method="fork")
        except BaseException as exc:  # reported to the test
            return {
                "error": type(exc).__name__,
                "message": str(exc),
                "notes": getattr(exc, "__notes__", []),
                "seconds": time.monotonic() - started,
            }
    return {"error": None}


def main() -> None:
    case = sys.argv[1]
    if case == "results":
        print(json.dumps(_results()))
    elif case == "raises":
        print(json.dumps(_failing(_raising)))
    elif case == "killed":
        print(json.dumps(_failing(_killing)))
    else:
        raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main()
