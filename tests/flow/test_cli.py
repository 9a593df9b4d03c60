"""``python -m timelypy.flow module:flow`` with Timely's options, as real processes."""

from __future__ import annotations

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
