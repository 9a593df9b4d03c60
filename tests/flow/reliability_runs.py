"""Start, kill, and check runs of ``reliability_job.py`` (the tests and the benchmark share it).

A *run* is the job's two processes, started by hand against one recovery
store; a *kill point* is a moment of a run at which one process gets
SIGKILL.  Every wait here is bounded: a run that outlives its bound is a
hang, counted as such and killed.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from timelypy.launch import free_ports

JOB = Path(__file__).resolve().parent / "reliability_job.py"
ROOT = JOB.parents[2]
#: The secret the job's processes share (varied enough to be accepted).
SECRET = "reliability-test-4f9Kq2Lw8Zx3Vn7Tb5Hd"


@dataclass
class Run:
    """The two processes of one run, their output folder, and when each exited."""

    out: Path
    processes: list[subprocess.Popen[bytes]]
    started: float = field(default_factory=time.monotonic)
    exited: dict[int, float] = field(default_factory=dict)

    def poll(self) -> list[int | None]:
        """Each process's exit code (None: running); records when each was seen to exit."""
        codes = []
        for index, process in enumerate(self.processes):
            code = process.poll()
            if code is not None and index not in self.exited:
                self.exited[index] = time.monotonic()
            codes.append(code)
        return codes

    def wait(self, timeout: float) -> list[int | None]:
        """Wait up to ``timeout`` s for both to exit; the codes (None: still running, a hang)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            codes = self.poll()
            if all(code is not None for code in codes):
                return codes
            time.sleep(0.01)
        return self.poll()

    def kill(self, index: int) -> float:
        """SIGKILL process ``index``; return when (``time.monotonic()``)."""
        os.kill(self.processes[index].pid, signal.SIGKILL)
        return time.monotonic()

    def stop(self) -> None:
        """Kill whatever still runs and reap it."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)

    def stderr(self, index: int) -> str:
        """What process ``index`` wrote to stderr."""
        return (self.out / f"stderr-{index}").read_text(errors="replace")


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The job's environment: this one without TIMELYPY_/JOB_ settings, the secret, ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TIMELYPY_", "JOB_"))}
    base.update(
        {
            # RELIABILITY_CODE: another timelypy checkout to run the job with (a before/after)
            "PYTHONPATH": os.pathsep.join(
                [p for p in (os.environ.get("RELIABILITY_CODE"), str(ROOT)) if p] + sys.path
            ),
            "TIMELYPY_SECRET": SECRET,
            "TIMELYPY_CONNECT_TIMEOUT": "60",
            **(env or {}),
        }
    )
    return base


def prepare(out: Path) -> Path:
    """Make ``out`` (clearing an earlier run's markers) and a fresh host file in it."""
    out.mkdir(parents=True, exist_ok=True)
    for marker in out.glob("*-[01]"):
        if not marker.name.startswith(("stderr", "out")):
            marker.unlink()
    hostfile = out / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in free_ports(2)))
    return hostfile


def launch(
    out: Path, store: Path, epochs: int, index: int, env: dict[str, str], workers: int = 1
) -> subprocess.Popen[bytes]:
    """Start process ``index`` of the job (``prepare`` made ``out/hosts``)."""
    command = [sys.executable, str(JOB), str(out), str(store), str(epochs)]
    command += ["-n", "2", "-p", str(index), "-w", str(workers), "-h", str(out / "hosts")]
    with open(out / f"stderr-{index}", "ab") as err:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)


def start(
    out: Path,
    store: Path,
    epochs: int,
    env: dict[str, str] | None = None,
    per_process: dict[int, dict[str, str]] | None = None,
    workers: tuple[int, int] = (1, 1),
) -> Run:
    """Start the job's two processes against ``store``."""
    prepare(out)
    base = environment(env)
    processes = [
        launch(out, store, epochs, index, {**base, **(per_process or {}).get(index, {})}, count)
        for index, count in enumerate(workers)
    ]
    return Run(out, processes)


def wait_for(run: Run, marker: str, timeout: float = 60.0) -> bool:
    """Wait until ``run.out/marker`` exists; False if the run ended first or ``timeout`` passed."""
    path = run.out / marker
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline or any(code is not None for code in run.poll()):
            return path.exists()
        time.sleep(0.002)
    return True


def outputs(folders: Iterable[Path]) -> list[tuple[int, tuple[str, int]]]:
    """Every ``(epoch, (key, total))`` the runs in ``folders`` wrote, in no order."""
    found = []
    for folder in folders:
        for path in sorted(folder.glob("out-*")):
            found += [ast.literal_eval(line) for line in path.read_text().splitlines() if line]
    return found


def check_totals(folders: Iterable[Path], epochs: int, keys: int) -> list[str]:
    """What is wrong with the runs' outputs: [] if exact.

    Every run that wrote a key's total at an epoch must have written the
    same total (the state a resume restores is exact), and the total at
    the last epoch must be ``sum(epoch + 1)`` over every epoch.
    """
    problems = []
    seen: dict[tuple[str, int], set[int]] = {}
    for epoch, (key, total) in outputs(folders):
        seen.setdefault((key, epoch), set()).add(total)
    for (key, epoch), totals in sorted(seen.items()):
        if len(totals) > 1:
            problems.append(f"{key} at epoch {epoch}: totals {sorted(totals)} in different runs")
    want = sum(range(1, epochs + 1))
    for i in range(keys):
        final = seen.get((f"k{i}", epochs - 1))
        if final != {want}:
            problems.append(f"k{i} at the last epoch: {final}, want {want}")
    return problems
