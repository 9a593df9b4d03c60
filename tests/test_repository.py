"""Repository hygiene: the README's commands, CI, docs examples, lint."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, "README.md must open with a ```sh block of set-up commands"
    assert text.index("```sh") < text.index("\n\n", text.index("# ")) + 3, (
        "the set-up commands must come right after the title"
    )
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_the_readme_main_job_is_the_spark_wordcount_on_a_fresh_venv():
    # a fresh venv with the spark extra, then the flow-API wordcount on Spark
    # (tests/spark/test_spark.py runs that example and checks what it prints)
    main = readme_commands()[0]
    assert main.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e '.[spark]'")
    assert main.endswith("&& .venv/bin/python examples/spark_wordcount.py")
    assert "Dataflow" in (ROOT / "examples" / "spark_wordcount.py").read_text()
    assert readme_commands()[1].startswith(
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[spark,test]'"
    )


def readme_quick_path() -> str:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"Without Spark[^`]*`(python3 -m venv[^`]*)`", text)
    assert found, "README.md must give a one-line quick path without Spark"
    return found.group(1)


def test_the_readme_quick_path_installs_no_spark_and_runs():
    quick = readme_quick_path()
    assert "spark" not in quick
    assert quick.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e . && ")
    run = quick.rsplit(" && ", 1)[1].split()  # the program, on this checkout's venv
    assert run[0] == ".venv/bin/python"
    result = subprocess.run(
        [sys.executable, *run[1:]], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "('timelypy', " in result.stdout  # this README's own words, counted


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_docs_examples_run(doc):
    for block in python_blocks(doc):
        exec(compile(block, str(doc), "exec"), {"__name__": "__docs__"})


def find_ruff() -> str | None:
    beside = Path(sys.executable).parent / "ruff"
    return str(beside) if beside.exists() else shutil.which("ruff")


@pytest.mark.skipif(find_ruff() is None, reason="ruff is not installed (pip install -e '.[test]')")
def test_ruff_clean():
    ruff = find_ruff()
    result = subprocess.run([ruff, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(find_ruff() is None, reason="ruff is not installed (pip install -e '.[test]')")
def test_ruff_formatted():
    """Every file is as ``ruff format`` writes it: run ``ruff format .`` before committing."""
    ruff = find_ruff()
    result = subprocess.run(
        [ruff, "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_progress_example_runs():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "progress_tracking.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "complete"
    assert "body: [1], loop: [1], sink: [0]" in result.stdout
