"""Clusters that must not hang, must not be misreported (issue 39): real processes, real signals.

Each test runs ``tests/flow/reliability_job.py`` (a two-process flow with
recovery) by hand and acts at a precise moment:

* a peer SIGKILLed right after it said HELLO, while the survivor's own
  connection to it still waits to retry, ends the survivor within seconds
  (it used to spin for ever);
* a peer whose last commit is slow, and whose partner said goodbye and
  left meanwhile, ends with success, and the store says both are done
  (it used to be "lost process N ... without a goodbye");
* processes started with different ``-w``, or running different flows,
  are refused at once, by name;
* processes with different secrets both stop promptly, both saying so.

Deadlines here only tell a hang from an end: none of them is a speed goal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flow import reliability_runs as runs
from tests.flow.kill_points import try_lost_after_hello, try_paused_old_execution
from timelypy.recovery import RecoveryStore

#: A run that should end (with success or an error) must end within this: past it, a hang.
END = 60.0


@pytest.mark.timeout(180)
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_a_peer_lost_right_after_it_said_hello_ends_the_survivor(tmp_path):
    # process 1 is SIGKILLed once it said HELLO, while process 0's own connection to it
    # still waits to retry (tests.flow.kill_points.try_lost_after_hello)
    outcome = try_lost_after_hello(tmp_path)
    assert not outcome.hung, "process 0 hangs after its peer died right after HELLO"
    assert outcome.survivor_code not in (None, 0)
    assert outcome.resumed_ok, outcome.problems  # (its error names process 1)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("slow", [0, 1])
def test_a_slow_last_commit_ends_in_success_with_the_store_done(tmp_path, slow):
    # the slow process's partner completes, says goodbye and leaves while the slow one
    # is still in its last commit, not reading its socket
    store = tmp_path / "store"
    run = runs.start(tmp_path / "out", store, 30, env={"JOB_SLOW_FINAL_COMMIT": f"{slow}:3"})
    try:
        codes = run.wait(END + 30)
        assert codes == [0, 0], f"{codes}\n{run.stderr(0)}\n{run.stderr(1)}"
    finally:
        run.stop()
    assert (tmp_path / "out" / f"final-commit-{slow}").exists()
    recovered = RecoveryStore(store)
    (last,) = recovered.executions()
    assert recovered.fronts(last.ex_num) == {0: (30, True), 1: (30, True)}
    assert runs.check_totals([tmp_path / "out"], 30, 20) == []


@pytest.mark.timeout(120)
def test_processes_started_with_different_worker_counts_are_refused_at_once(tmp_path):
    run = runs.start(tmp_path / "out", tmp_path / "store", 10, workers=(1, 2))
    try:
        codes = run.wait(END)
        assert None not in codes, "a process hangs"
    finally:
        run.stop()
    assert codes[0] != 0 and codes[1] != 0
    for index in (0, 1):
        text = run.stderr(index)
        assert "must be started with the same -n and -w" in text, text
        assert "lost process" not in text and "heard nothing" not in text


@pytest.mark.timeout(120)
def test_processes_running_different_flows_are_refused_at_once(tmp_path):
    store = tmp_path / "store"
    run = runs.start(tmp_path / "out", store, 10, per_process={1: {"JOB_EXTRA_STEP": "1"}})
    try:
        codes = run.wait(END)
        assert None not in codes, "a process hangs"
    finally:
        run.stop()
    assert codes[0] != 0 and codes[1] != 0
    both = run.stderr(0) + run.stderr(1)
    assert "worker 1 runs another flow than worker 0" in both, both
    assert "steps only here: ['map']" in both
    # refused before worker 0 began an execution of the store
    assert (
        not store.exists()
        or not list(store.glob("part-*"))
        or not RecoveryStore(store).executions()
    )


@pytest.mark.timeout(120)
def test_processes_with_different_secrets_both_stop_saying_so(tmp_path):
    run = runs.start(
        tmp_path / "out",
        tmp_path / "store",
        10,
        per_process={1: {"TIMELYPY_SECRET": "another-secret-Qx7Lm2Vb9Zt4Kp8Wn3Hd"}},
    )
    try:
        codes = run.wait(END)
        assert None not in codes, "a process waits for ever"
    finally:
        run.stop()
    assert codes[0] != 0 and codes[1] != 0
    for index in (0, 1):
        text = run.stderr(index)
        # (TIMELYPY_CONNECT_TIMEOUT is 60 s here: a process that only timed out would
        # have said "heard nothing" after a minute, past END)
        assert "do not share the same cluster secret" in text, text


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_paused_process_of_an_old_execution_writes_nothing_when_it_wakes(tmp_path):
    # (slow: 10 s; the default suite's fencing test is tests/test_store_reliability.py's)
    # SIGSTOP process 1 of execution 1; execution 2 runs to its end; SIGCONT process 1
    unchanged, said, changed = try_paused_old_execution(tmp_path)
    assert unchanged, changed
    print(said)
