"""Smoke tests for benchmarks/window_bench.py: it runs, checks its results, and can fail.

Tiny inputs (a few thousand events), one timed round. bytewax's candidates
run when it is installed.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
from datetime import timedelta

import pytest

from benchmarks import window_bench
from benchmarks.window_bench import (
    T0,
    WINDOWERS,
    WINDOWINGS,
    build_workload,
    check_plain,
    from_bytewax,
    from_plain,
    from_timelypy,
    make_events,
    plain_session,
    timelypy_windows,
)
from timelypy.flow.window import SessionWindowConfig, TumblingWindowConfig

HAS_BYTEWAX = importlib.util.find_spec("bytewax") is not None


@pytest.fixture(scope="module")
def events():
    return make_events(3_000)


def layouts(events):
    return [(i // 1_000, e) for i, e in enumerate(events)], [(0, e) for e in events]


@pytest.mark.slow
def test_a_tiny_run_verifies_every_result(capsys):
    args = ["--scale", "500", "--repeat", "1"]  # 2,000 events
    assert window_bench.main(args + ([] if HAS_BYTEWAX else ["--no-bytewax"])) == 0
    out = capsys.readouterr().out
    candidates = 9 if HAS_BYTEWAX else 6  # plain, 2 chain, 3 graph; 3 bytewax
    # the warm-up and the one timed round are both checked, for every candidate
    checked = re.search(r"checked before quoting: (\d+) results", out)
    assert checked is not None, out
    assert int(checked[1]) == 2 * candidates * len(WINDOWERS)
    for name in WINDOWERS:
        assert re.search(rf"{name} +timelypy +\S+ \S+ .*events/s", out), out
        if HAS_BYTEWAX:
            assert re.search(rf"{name} +timelypy .*(NOT met|met)", out), out


def test_a_wrong_result_fails_the_check(events):
    pairs, one_epoch = layouts(events)
    w = build_workload(WINDOWINGS["tumbling"], events, pairs, one_epoch, bytewax=False)
    # 20 s windows instead of 10 s: the same events, other windows
    w.candidates["timelypy"] = lambda: timelypy_windows(
        TumblingWindowConfig(timedelta(seconds=20)), pairs
    )
    w.measure(repeat=1)
    with pytest.raises(AssertionError, match="'timelypy' returned a different result"):
        w.check()


def test_a_late_event_fails_the_plain_check(events):
    assert check_plain(WINDOWINGS["session"], events) > 0
    late = [*events, ("k000", (T0, 7))]  # far behind k000's watermark: dropped as late
    with pytest.raises(AssertionError, match="late or lost"):
        check_plain(WINDOWINGS["session"], late)


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


#: a@4 joins the sessions of a@0 and a@8 (gap 5 s): both engines must merge them
MERGING = [
    ("a", (at(0), 1)),
    ("a", (at(8), 2)),
    ("b", (at(1), 5)),
    ("a", (at(4), 3)),
    ("a", (at(30), 4)),
]


def test_merged_sessions_agree_with_plain_python():
    expected = from_plain(plain_session(MERGING))
    assert expected == {
        ("a", at(0), at(8), 6): 1,
        ("a", at(30), at(30), 4): 1,
        ("b", at(1), at(1), 5): 1,
    }
    config = SessionWindowConfig(timedelta(seconds=5))
    assert from_timelypy(timelypy_windows(config, [(0, e) for e in MERGING])) == expected


@pytest.mark.skipif(not HAS_BYTEWAX, reason="bytewax is not installed")
def test_bytewax_window_ids_map_to_the_same_windows(events):
    assert from_bytewax(window_bench.bytewax_windows("session", MERGING)) == from_plain(
        plain_session(MERGING)
    )
    for name in WINDOWERS:
        expected = from_plain(WINDOWINGS[name].plain(events))
        for ordered in (False, True):
            got = window_bench.bytewax_windows(name, events, ordered=ordered)
            assert from_bytewax(got) == expected, (name, ordered)


def test_the_modules_examples():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(window_bench):
        if test.name.endswith("bytewax_windows") and not HAS_BYTEWAX:
            continue
        runner.run(test)
    assert runner.failures == 0
    assert runner.tries >= 4
