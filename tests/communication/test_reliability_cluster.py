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

import socket
import time
from pathlib import Path

import pytest

from tests.flow import reliability_runs as runs
from timelypy.recovery import RecoveryStore

#: A run that should end (with success or an error) must end within this: past it, a hang.
END = 60.0


def _established_to(port: int) -> int:
    """How many TCP connections to 127.0.0.1:``port`` are established (from /proc/net/tcp)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "01" and int(fields[2].split(":")[1], 16) == port:
            count += 1
    return count


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return False
    return True


@pytest.mark.timeout(180)
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_a_peer_lost_right_after_it_said_hello_ends_the_survivor(tmp_path):
    # Process 0 starts alone; its connections to process 1, refused at first, wait 5 s
    # before retrying.  Process 1 then starts, connects to process 0 and says HELLO on
    # both connections: process 0 has heard all a handshake used to need, but nothing of
    # its own watches process 1 yet.  Process 1 is SIGKILLed in that moment.
    out, store = tmp_path / "out", tmp_path / "store"
    runs.prepare(out)
    port0 = int((out / "hosts").read_text().split()[0].split(":")[1])
    env = runs.environment()
    first = runs.launch(out, store, 40, 0, {**env, "JOB_RECONNECT": "5"})
    run = runs.Run(out, [first])
    try:
        deadline = time.monotonic() + END
        while not _listening(port0):
            assert time.monotonic() < deadline and first.poll() is None, run.stderr(0)
            time.sleep(0.05)
        second = runs.launch(out, store, 40, 1, env)
        run.processes.append(second)
        while _established_to(port0) < 2:  # process 1 makes two: control and worker
            assert time.monotonic() < deadline and second.poll() is None, run.stderr(1)
            time.sleep(0.005)
        time.sleep(0.3)  # its HELLOs arrive; process 0's retry is seconds away
        killed_at = run.kill(1)
        codes = run.wait(END)
        assert codes[0] is not None, "process 0 hangs after its peer died right after HELLO"
        assert codes[0] != 0
        assert "process 1" in run.stderr(0), run.stderr(0)
        print(f"survivor exit {run.exited[0] - killed_at:.2f} s after the kill")
    finally:
        run.stop()


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
