"""run_cluster's helper processes started by fork or by spawn (issue 42).

Fork copies the calling process, so its helpers start in milliseconds
where a new interpreter spends a few tenths of a second importing; it is
only safe while the caller runs one thread. The runs that fork happen in a
fresh interpreter (``start_method_job.py``), whose single thread the test
runner's own cannot disturb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from timelypy.errors import ClusterError, ConfigError
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow

JOB = Path(__file__).with_name("start_method_job.py")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="fork start needs Linux's /proc"
)


def _job(case: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(JOB), case],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(JOB.parents[2])},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_fork_spawn_and_auto_give_the_same_results_and_fork_copies_the_caller():
    runs = _job("results")
    words = [f"w{i % 7}" for i in range(200)]
    expected = sorted(
        (word, n) for word, count in Counter(words).items() for n in range(1, count + 1)
    )
    for method in ("auto", "fork", "spawn"):
        assert runs[method]["items"] == [list(pair) for pair in expected], method
        assert runs[method]["processes"] == 2, method  # both processes counted keys
        assert runs[method]["parent_seen"], method
    # a forked helper's parent is the caller (multiprocessing knows it); a spawned one's is not
    assert runs["fork"]["forked_processes"] == 1
    assert runs["auto"]["forked_processes"] == 1  # one thread in the caller: auto forks
    assert runs["spawn"]["forked_processes"] == 0


def test_a_forked_helpers_error_stops_the_run_naming_the_step_and_worker():
    failed = _job("raises")
    assert failed["error"] == "ClusterError"
    assert "step 'start_method_failure.boom' on worker 1" in failed["message"]
    assert "ValueError: bad word" in failed["message"]
    assert failed["seconds"] < 10


def test_a_forked_helper_killed_stops_the_run_within_seconds():
    failed = _job("killed")
    assert failed["error"] == "ClusterError"
    assert "process 1" in failed["message"] and "-9" in failed["message"]
    assert failed["seconds"] < 10


def _doubling() -> Dataflow:
    flow = Dataflow()
    flow.map(lambda x: x * 2)
    flow.capture()
    return flow


def test_fork_is_refused_while_the_caller_runs_other_threads():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        with pytest.raises(
            ConfigError, match=r"start_method='fork'.*single thread.*has ([2-9]|[1-9][0-9]+) "
        ):
            run_cluster(_doubling(), [(0, 1)], proc_count=2, start_method="fork")
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("processes", [1, 2])
def test_an_unknown_start_method_is_refused(processes):
    with pytest.raises(ConfigError, match=r"start_method must be one of 'auto', 'fork', 'spawn'"):
        run_cluster(_doubling(), [(0, 1)], proc_count=processes, start_method="forkserver")


def test_spawn_works_beside_other_threads():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        pairs = run_cluster(_doubling(), [(0, 1), (0, 2), (1, 3)], proc_count=2)
        assert sorted(pairs) == [(0, 2), (0, 4), (1, 6)]
    finally:
        stop.set()
        other.join()


def test_a_failed_run_leaves_no_helper_behind():
    flow = Dataflow()
    flow.map(lambda x: 1 // x)
    flow.capture()
    with pytest.raises((ClusterError, ZeroDivisionError)):
        run_cluster(flow, [(0, 1), (0, 0)], proc_count=2, worker_count_per_proc=1)
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    if children.exists():
        assert children.read_text().split() == []
