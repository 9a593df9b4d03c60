"""The kill-and-resume loop of the connector tests: SIGKILL a two-process job, resume it.

A job writes ``pid-0`` and ``pid-1`` (the process ids of workers 0 and 1)
to its output directory once it runs (``graph_recovery_job.PidSink``).

Resumed runs may run on another number of processes and workers: a job
reads its topology from ``JOB_PROCS`` and ``JOB_WORKERS``
(:func:`job_topology`), and :func:`rescaling` hands the kill loop's runs
the topologies of :data:`TOPOLOGIES` in turn (a partition's snapshot is
keyed by its name, so whichever worker writes it next resumes it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: (processes, workers per process) of the runs the rescaling kill tests cycle through
TOPOLOGIES = [(2, 1), (1, 2), (2, 2)]


def job_topology() -> tuple[int, int]:
    """The job's (processes, workers per process): ``JOB_PROCS`` x ``JOB_WORKERS``, 2 x 1."""
    return int(os.environ.get("JOB_PROCS", "2")), int(os.environ.get("JOB_WORKERS", "1"))


def rescaling() -> Iterator[dict[str, str]]:
    """Environment for the kill loop's runs, one topology of :data:`TOPOLOGIES` after another."""
    run = 0
    while True:
        procs, workers = TOPOLOGIES[run % len(TOPOLOGIES)]
        run += 1
        yield {"JOB_PROCS": str(procs), "JOB_WORKERS": str(workers)}


def kill_and_resume(
    start: Callable[[], subprocess.Popen[bytes]],
    out: Path,
    kills: int,
    seed: int,
    span: float = 0.5,
) -> int:
    """Start the job ``kills`` times, SIGKILL one of its processes at a random point; resume.

    The kill point is up to ``span`` seconds after both processes run: keep
    ``kills * span`` below the job's own length, or later runs end before
    their kill point. Returns how many runs were killed (a run that ended
    before its kill point, or whose process ended just before the signal, is
    not counted); the caller then runs the job once more to its end.
    """
    rng = random.Random(seed)
    killed = 0
    for _ in range(kills):
        for pid_file in out.glob("pid-*"):
            pid_file.unlink()
        run = start()
        deadline = time.monotonic() + 30
        while not ((out / "pid-0").exists() and (out / "pid-1").exists()):
            assert time.monotonic() < deadline and run.poll() is None, "the job did not start"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, span))  # a random point of the run, its start included
        if run.poll() is not None:
            continue  # it ended before the kill point
        try:
            os.kill(int((out / f"pid-{rng.choice([0, 1])}").read_text()), signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass  # that process ended between the poll and the signal: the run is ending
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait(10)
        for other in out.glob("pid-*"):  # a helper left behind by a killed parent
            try:
                os.kill(int(other.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    return killed
