"""The flow layer's types, as a user's ``mypy --strict`` sees them.

``tests/typing/flows_ok.py`` must type-check; every line of
``tests/typing/flows_bad.py`` that holds a mistake carries the ignore for
the error mypy must report there, and ``--warn-unused-ignores`` fails the
check if mypy lets one through.  mypy runs in a temporary directory,
outside the checkout, so it finds timelypy as a user's mypy would: through
the installed package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"


@pytest.mark.timeout(300)
def test_mypy_strict_accepts_good_flows_and_catches_the_mistakes(tmp_path):
    pytest.importorskip("mypy")
    for name in ("flows_ok.py", "flows_bad.py"):
        shutil.copy(HERE / name, tmp_path / name)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--warn-unused-ignores",
            "--no-incremental",
            "flows_ok.py",
            "flows_bad.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 2 source files" in result.stdout
