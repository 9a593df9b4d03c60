"""Kill-and-resume at named moments of a two-process run with recovery (issue 39).

The default suite kills a process right after the handshake and during
the final commit; the ``slow`` suite sweeps every kill point of
:data:`~tests.flow.kill_points.KILL_POINTS` and runs slow final commits.
Each kill point must end the survivor (no hang), and the resumed run must
end with success, the store done, and exact totals.  The figures (hangs,
seconds from the kill to the survivor's exit) are what
``benchmarks/reliability_bench.py`` reports; here only hangs and wrong
results fail.
"""

from __future__ import annotations

import pytest

from tests.flow.kill_points import KILL_POINTS, try_kill_point, try_slow_final_commit


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("moment", "victim"),
    [("handshake-1", 0), ("final-commit-1", 1)],
    ids=["right-after-the-handshake", "at-the-final-commit"],
)
def test_a_kill_at_a_named_moment_ends_the_survivor_and_resumes_exactly(tmp_path, moment, victim):
    outcome = try_kill_point(tmp_path, moment, victim)
    assert not outcome.hung, f"the survivor hangs after a kill at {moment}"
    assert outcome.resumed_ok, outcome.problems


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_kill_point_ends_the_survivors_and_resumes_exactly(tmp_path):
    hung, wrong = [], []
    for number, (moment, victim) in enumerate(KILL_POINTS):
        outcome = try_kill_point(tmp_path / str(number), moment, victim, seed=number)
        if outcome.hung:
            hung.append((moment, victim))
        if not outcome.resumed_ok:
            wrong.append((moment, victim, outcome.problems))
    assert hung == []
    assert wrong == []


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("process", [0, 1])
@pytest.mark.parametrize("seconds", [1.0, 4.0])
def test_slow_final_commits_end_in_success(tmp_path, process, seconds):
    ok, why = try_slow_final_commit(tmp_path, process, seconds)
    assert ok, why
