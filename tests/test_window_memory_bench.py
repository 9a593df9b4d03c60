"""The window memory benchmark runs and checks its own results (every window emitted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_window_memory_benchmark_runs_small():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.window_memory",
            "--keys",
            "2000",
            "4000",
            "--repeat",
            "1",
            "--no-bytewax",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("timelypy ")]
    assert [row[1] for row in rows] == ["2,000", "4,000"]
    assert all(float(row[5]) > 0 for row in rows)  # the store's live pages were measured
