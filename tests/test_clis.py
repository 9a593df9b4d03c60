"""The four command lines share one style: argparse, ``--help``, ``TIMELYPY_*`` defaults.

Each is run as a real program (``python -m ...``).  A failure prints one line
naming what failed; ``--traceback`` (or ``TIMELYPY_TRACEBACK=1``) prints the
whole traceback instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(module: str, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("module", "variable"),
    [
        ("timelypy.flow", "TIMELYPY_METRICS_PORT"),
        ("timelypy.launch", "TIMELYPY_PROCESSES"),
        ("timelypy.visualize", "TIMELYPY_VISUALIZE_FORMAT"),
        ("timelypy.recovery", "TIMELYPY_RECOVERY_DIRECTORY"),
    ],
)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_cli_prints_its_help_with_its_environment_defaults(module, variable, flag):
    result = cli(module, flag)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {module}")
    assert variable in result.stdout
    assert result.stderr == ""


def test_the_recovery_cli_reads_its_store_from_the_environment(tmp_path):
    store = tmp_path / "store"
    env = {"TIMELYPY_RECOVERY_DIRECTORY": str(store)}
    made = cli("timelypy.recovery", "create", "--partitions", "2", env=env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"created {store} with 2 partition(s)"
    shown = cli("timelypy.recovery", "show", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "resume epoch for the next execution: 0" in shown.stdout
    missing = cli("timelypy.recovery", "show", str(tmp_path / "nothing"))
    assert missing.returncode == 2
    (line,) = missing.stderr.splitlines()
    assert line.startswith(f"timelypy.recovery: show {tmp_path / 'nothing'}: no recovery store")
    traced = cli("timelypy.recovery", "--traceback", "show", str(tmp_path / "nothing"))
    assert traced.returncode == 2 and "Traceback" in traced.stderr
    traced = cli(
        "timelypy.recovery",
        "show",
        str(tmp_path / "nothing"),
        env={"TIMELYPY_TRACEBACK": "1"},
    )
    assert traced.returncode == 2 and "Traceback" in traced.stderr


def test_a_failing_flow_prints_one_line_unless_asked_for_the_traceback(tmp_path):
    (tmp_path / "failing.py").write_text(
        "import timelypy.flow.operators as op\n"
        "from timelypy.flow import Dataflow\n"
        "from timelypy.flow.testing import TestingSink, TestingSource\n"
        "flow = Dataflow('failing')\n"
        "numbers = op.input('numbers', flow, TestingSource([1, 0]))\n"
        "op.output('out', op.map('invert', numbers, lambda x: 1 / x), TestingSink([]))\n"
    )
    result = cli("timelypy.flow", "failing:flow", cwd=tmp_path)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("timelypy.flow: failing:flow failed: StepError: ")
    assert "'failing.invert'" in line and "ZeroDivisionError: division by zero" in line
    assert line.endswith("[--traceback or TIMELYPY_TRACEBACK=1 for the whole traceback]")
    traced = cli("timelypy.flow", "failing:flow", cwd=tmp_path, env={"TIMELYPY_TRACEBACK": "1"})
    assert traced.returncode == 1 and "Traceback" in traced.stderr
