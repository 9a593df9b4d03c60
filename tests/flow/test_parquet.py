"""The Parquet sink across SIGKILLs, resumed on other worker counts: every row exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .kill_loop import TOPOLOGIES, kill_and_resume, rescaling

pq = pytest.importorskip("pyarrow.parquet", reason="needs pyarrow: pip install pyarrow")


def _rows(directory: Path) -> Counter[tuple[Any, ...]]:
    if not directory.exists():
        return Counter()
    table = pq.read_table(directory)
    return Counter(
        zip(table.column("k").to_pylist(), table.column("total").to_pylist(), strict=True)
    )


def _run_with_kills(tmp_path: Path, kills: int, seed: int, items: int) -> int:
    job = Path(__file__).with_name("parquet_job.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GRAPH_JOB_COUNT": str(items)}

    def start(out: Path, store: Path, topology: dict[str, str]) -> subprocess.Popen[bytes]:
        out.mkdir(exist_ok=True)
        return subprocess.Popen(
            [sys.executable, str(job), str(out), str(store)],
            env={**env, **topology},
            stderr=subprocess.PIPE,
        )

    clean = start(tmp_path / "clean", tmp_path / "clean-store", {})
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    want = _rows(tmp_path / "clean" / "ds")
    assert sum(want.values()) == items  # one running sum per item
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    runs = rescaling()  # each run on the next topology: resumed on other worker counts
    killed = kill_and_resume(
        lambda: start(out, store, next(runs)), out, kills, seed, span=items / 1000 / (kills + 1)
    )
    final = start(out, store, next(runs))
    assert final.wait(120) == 0, final.stderr.read().decode() if final.stderr else ""
    got = _rows(out / "ds")
    assert got == want, (sum(got.values()), sum(want.values()))
    hidden = [p.name for p in (out / "ds").iterdir() if p.name.startswith(".")]
    assert hidden == []  # no temporary file of a killed run is left behind
    print(
        f"Parquet exactly once through {killed} SIGKILLs, resumed on processes x workers "
        f"{TOPOLOGIES} in turn: {sum(got.values())} rows"
    )
    return killed


@pytest.mark.timeout(300)
def test_the_sink_is_exactly_once_through_sigkills(tmp_path):
    assert _run_with_kills(tmp_path, kills=3, seed=38, items=1200) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_sink_is_exactly_once_through_twenty_sigkills(tmp_path):
    assert _run_with_kills(tmp_path, kills=24, seed=2026, items=5000) >= 20
