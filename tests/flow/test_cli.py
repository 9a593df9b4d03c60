"""``python -m timelypy.flow module:flow`` with Timely's options, as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

FLOW = """
from operator import add
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig


def input_builder(worker_index, worker_count, resume_epoch):
    for epoch in range(3):
        yield AdvanceTo(epoch)
        for i in range(worker_index, 12, worker_count):
            yield Emit((f"k{i % 3}", 1))


def make():
    flow = Dataflow()
    flow.input("numbers", ManualInputConfig(input_builder))
    flow.reduce_epoch(add)
    flow.capture()
    return flow


flow = make()
"""


def cli(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    (tmp_path / "counting.py").write_text(FLOW)
    return subprocess.run(
        [sys.executable, "-m", "timelypy.flow", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def counts(stdout: str) -> Counter:
    # lines may carry the launcher's "[I] " prefix
    return Counter(line.split("] ")[-1] for line in stdout.splitlines())


EXPECTED = Counter({"('k0', 4)": 3, "('k1', 4)": 3, "('k2', 4)": 3})


def test_cli_runs_a_flow_on_worker_threads(tmp_path):
    result = cli(tmp_path, "counting:flow", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == EXPECTED


def test_cli_starts_every_process_without_p(tmp_path):
    result = cli(tmp_path, "counting:make", "-n", "2", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == EXPECTED


def test_cli_usage_errors(tmp_path):
    result = cli(tmp_path, "nope:flow")
    assert result.returncode == 2 and "cannot import 'nope'" in result.stderr
    result = cli(tmp_path, "counting:missing")
    assert result.returncode == 2 and "has no attribute 'missing'" in result.stderr
    result = cli(tmp_path, "counting:flow", "--bogus")
    assert result.returncode == 2 and "unknown option '--bogus'" in result.stderr
    result = cli(tmp_path, "--help")
    assert result.returncode == 0 and "usage: python -m timelypy.flow" in result.stdout


RECOVERING_FLOW = """
import os
import time
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig

FAIL_AT = int(os.environ.get("FAIL_AT", "-1"))


def input_builder(worker_index, worker_count, resume_epoch):
    for epoch in range(resume_epoch, 6):
        yield AdvanceTo(epoch)
        if epoch == FAIL_AT:
            raise RuntimeError(f"injected failure at epoch {epoch}")
        for i in range(worker_index, 12, worker_count):
            yield Emit((f"k{i % 3}", 1))
        time.sleep(0.1)


def running(total, value):
    return total + value, total + value


flow = Dataflow()
flow.input("numbers", ManualInputConfig(input_builder))
flow.stateful_map("running", lambda key: 0, running)
flow.capture()
"""


def test_cli_recovery_resumes_a_failed_run_from_its_store(tmp_path):
    (tmp_path / "recovering.py").write_text(RECOVERING_FLOW)
    store = str(tmp_path / "store")

    def cli_run(*args: str, fail_at: int = -1) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "timelypy.flow", "recovering", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "FAIL_AT": str(fail_at)},
        )

    first = cli_run("-w", "2", "-r", store, "--commit-interval", "0", fail_at=4)
    assert first.returncode == 1 and "injected failure at epoch 4" in first.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "timelypy.recovery", "show", store],
        capture_output=True, text=True, timeout=60,
    ).stdout
    resume = int(shown.split("resume epoch for the next execution: ")[1].split()[0])
    assert 1 <= resume <= 4, shown
    # the second execution runs as 2 processes (rescaled), and resumes with the state
    second = cli_run("-n", "2", f"--recovery={store}")
    assert second.returncode == 0, second.stderr
    # 4 items per key and epoch: running counts 4e+1 .. 4e+4 belong to epoch e
    total = 4 * resume
    kept = Counter(line for line in counts(first.stdout).elements() if int(line[7:-1]) <= total)
    resumed = counts(second.stdout)
    assert min(int(line[7:-1]) for line in resumed) == total + 1, "state was reloaded"
    assert kept + resumed == Counter(f"('k{k}', {v})" for k in range(3) for v in range(1, 25))


def test_cli_recovery_usage_errors(tmp_path):
    result = cli(tmp_path, "counting:flow", "--commit-interval", "1")
    assert result.returncode == 2 and "--commit-interval needs -r DIR" in result.stderr
    result = cli(tmp_path, "counting:flow", "-r")
    assert result.returncode == 2 and "-r needs a value" in result.stderr
    result = cli(tmp_path, "counting:flow", "-r", str(tmp_path / "s"), "--commit-interval", "x")
    assert result.returncode == 2 and "--commit-interval takes seconds" in result.stderr
