"""Smoke tests for benchmarks/recovery_bench.py: it runs, checks its results, and can fail.

Tiny inputs (a few hundred words), one timed round; the stores go to
pytest's temporary directory. bytewax's candidates run when it is installed.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

from benchmarks import _data, recovery_bench
from benchmarks.flow_bench import plain_stateful_map

HAS_BYTEWAX = importlib.util.find_spec("bytewax") is not None


@pytest.fixture(scope="module")
def words() -> list[str]:
    return _data.load_words()[:120]


@pytest.mark.slow
def test_quick_mode_runs_and_verifies_every_result(tmp_path, capsys):
    args = ["--quick", "--scale", "10000", "--repeat", "1", "--dir", str(tmp_path)]
    assert recovery_bench.main(args + ([] if HAS_BYTEWAX else ["--no-bytewax"])) == 0
    out = capsys.readouterr().out
    candidates = 8 if HAS_BYTEWAX else 6
    stores = 5 if HAS_BYTEWAX else 4
    workloads = len(recovery_bench.WORKLOADS)
    # warm-up and the one timed round are both checked, for every candidate
    checked = re.search(r"checked before quoting: (\d+) results .*, (\d+) recovery stores", out)
    assert checked is not None, out
    assert (int(checked[1]), int(checked[2])) == (
        2 * candidates * workloads,
        2 * stores * workloads,
    )
    for name in (
        "timelypy recovery",
        "timelypy recovery commit 0",
        recovery_bench.SYNCED,
        recovery_bench.SYNCED_GROUP,
    ):
        assert re.search(rf"1000_epochs +{name} .* MB", out), out
    if HAS_BYTEWAX:
        assert re.search(r"small_epochs +bytewax recovery .* MB", out), out
    assert list(tmp_path.iterdir()) == [], "the stores were not removed"


@pytest.mark.slow
def test_a_wrong_result_fails_the_check(tmp_path, words):
    w = recovery_bench.build_workload("tiny", words, 7, bytewax=False)
    pairs = [(0, (word, 1)) for word in words]  # every item in epoch 0: wrong epochs
    w.candidates["timelypy"].call = lambda _: plain_stateful_map(pairs)
    w.measure(repeat=1, root=tmp_path)
    with pytest.raises(AssertionError, match="'timelypy' returned a different result"):
        w.check()


@pytest.mark.slow
def test_a_store_without_the_run_fails_the_check(tmp_path, words):
    w = recovery_bench.build_workload("tiny", words, 7, bytewax=False)
    # the right outputs, but the run never touched its store
    w.candidates["timelypy recovery"].call = lambda _: recovery_bench.timelypy_running(
        [(i // 7, (word, 1)) for i, word in enumerate(words)]
    )
    w.measure(repeat=1, root=tmp_path)
    with pytest.raises(AssertionError, match="'timelypy recovery' left a wrong store: 0 exec"):
        w.check()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_BYTEWAX, reason="bytewax is not installed")
def test_bytewax_epochs_match_timelypys_and_its_store_is_checked(tmp_path, words):
    w = recovery_bench.build_workload("tiny", words, 7, bytewax=True)
    assert w.epochs == 18  # 120 words in epochs of 7
    w.measure(repeat=1, root=tmp_path)
    w.check()
    assert w.checked == {"results": 16, "stores": 10}
    # a store that saw one epoch fewer is caught by its recorded frontier
    problems = recovery_bench.bytewax_store_problems
    w.candidates["bytewax recovery"].problems = lambda d, epochs, final: problems(
        d, epochs - 1, final
    )
    w.measure(repeat=1, root=tmp_path)
    with pytest.raises(AssertionError, match=r"worker frontiers \[20\], expected \[19\]"):
        w.check()


def test_the_synced_candidates_sync_every_commit_and_only_they_do(tmp_path):
    from timelypy.recovery import create_store
    from timelypy.recovery import store as store_module

    create_store(tmp_path, 1)
    path = tmp_path / "part-0.sqlite3"

    def synchronous() -> int:
        conn = store_module._connect(path)
        try:
            return int(conn.execute("PRAGMA synchronous").fetchone()[0])
        finally:
            conn.close()

    assert synchronous() == 1  # NORMAL: partition 0 as timelypy opens it
    with recovery_bench.synced_commits():
        assert synchronous() == 2  # FULL: a sync per commit, as bytewax's store
    assert synchronous() == 1
