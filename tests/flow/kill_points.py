"""Kill points of ``reliability_job.py``: SIGKILL one process at a named moment, then resume.

A *kill point* is ``(moment, victim)``: ``moment`` is a marker the job
writes (``handshake-P`` right after process P's handshake, ``pid-P`` when
its worker starts reading, ``final-commit-P`` when its last commit
begins) or ``mid`` (a random moment of the run), and ``victim`` the
process killed then.  For each, :func:`try_kill_point` records whether the
survivor ended (or hung: still running :data:`HANG_SECONDS` after the
kill), how long after the kill it ended, and whether the resumed run ended
with success and exact totals.  The tests and ``benchmarks/reliability_bench.py``
share it.
"""

from __future__ import annotations

import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from tests.flow import reliability_runs as runs
from timelypy.recovery import RecoveryStore

#: A survivor still running this long after its peer was killed is hung.
HANG_SECONDS = 60.0
#: Epochs of a kill-point run, and keys.
EPOCHS = 40
KEYS = 20

#: The kill points a full sweep tries: every marker, each process as the victim.
KILL_POINTS = [
    (moment, victim)
    for moment in (
        "handshake-0",
        "handshake-1",
        "pid-0",
        "pid-1",
        "mid",
        "final-commit-0",
        "final-commit-1",
    )
    for victim in (0, 1)
]


@dataclass
class Outcome:
    """What happened at one kill point."""

    moment: str
    victim: int
    killed: bool  # False: the run ended before the moment came, or the victim had exited
    hung: bool
    survivor_exit: float | None  # seconds from the kill to the survivor's exit
    survivor_code: int | None
    resumed_ok: bool
    problems: list[str]


def try_kill_point(
    folder: Path, moment: str, victim: int, seed: int = 0, slow_final: float = 0.5
) -> Outcome:
    """Run the job, SIGKILL ``victim`` at ``moment``, then resume it to its end; check totals.

    ``slow_final`` widens the final-commit moment (the process whose last
    commit it is takes that much longer), so a kill lands inside it.
    """
    store = folder / "store"
    first = folder / "first"
    env = {}
    if moment.startswith("final-commit-"):
        env["JOB_SLOW_FINAL_COMMIT"] = f"{moment[-1]}:{slow_final}"
    run = runs.start(first, store, EPOCHS, env=env)
    killed_at = None
    try:
        if moment == "mid":
            runs.wait_for(run, "pid-0")
            runs.wait_for(run, "pid-1")
            time.sleep(random.Random(seed).uniform(0.0, EPOCHS * 0.02))
            reached = True
        else:
            reached = runs.wait_for(run, moment)
        if reached and run.processes[victim].poll() is None:
            killed_at = run.kill(victim)
        codes = run.wait(HANG_SECONDS)
    finally:
        run.stop()
    survivor = 1 - victim
    hung = killed_at is not None and codes[survivor] is None
    exit_after = (
        run.exited[survivor] - killed_at
        if killed_at is not None and survivor in run.exited
        else None
    )
    # the next execution, to its end
    second = folder / "second"
    resumed = runs.start(second, store, EPOCHS)
    try:
        resumed_codes = resumed.wait(HANG_SECONDS * 2)
    finally:
        resumed.stop()
    problems = []
    if resumed_codes != [0, 0]:
        problems.append(
            f"the resumed run ended {resumed_codes}: {resumed.stderr(0)[-500:]} "
            f"{resumed.stderr(1)[-500:]}"
        )
    else:
        recovered = RecoveryStore(store)
        last = recovered.executions()[-1]
        fronts = recovered.fronts(last.ex_num)
        if sorted(fronts.values()) != [(EPOCHS, True), (EPOCHS, True)]:
            problems.append(f"the store is not done after the resumed run: {fronts}")
        problems += runs.check_totals([first, second], EPOCHS, KEYS)
    return Outcome(
        moment=moment,
        victim=victim,
        killed=killed_at is not None,
        hung=hung,
        survivor_exit=exit_after,
        survivor_code=codes[survivor],
        resumed_ok=not problems,
        problems=problems,
    )


def try_slow_final_commit(folder: Path, process: int, seconds: float) -> tuple[bool, str]:
    """One run whose process ``process`` takes ``seconds`` longer in its last commit.

    Returns whether both processes ended with success and the store says both
    are done, and what went wrong otherwise.
    """
    store = folder / "store"
    run = runs.start(
        folder / "out", store, EPOCHS, env={"JOB_SLOW_FINAL_COMMIT": f"{process}:{seconds}"}
    )
    try:
        codes = run.wait(HANG_SECONDS + seconds)
    finally:
        run.stop()
    if codes != [0, 0]:
        return False, f"ended {codes}: {run.stderr(0)[-400:]} {run.stderr(1)[-400:]}"
    recovered = RecoveryStore(store)
    fronts = recovered.fronts(recovered.executions()[-1].ex_num)
    if sorted(fronts.values()) != [(EPOCHS, True), (EPOCHS, True)]:
        return False, f"the store is not done: {fronts}"
    problems = runs.check_totals([folder / "out"], EPOCHS, KEYS)
    return not problems, "; ".join(problems)


def _established_to(port: int) -> int:
    """How many TCP connections to 127.0.0.1:``port`` are established (Linux's /proc/net/tcp)."""
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


def try_lost_after_hello(folder: Path, retry: float = 5.0) -> Outcome:
    """Kill process 1 once it said HELLO, while process 0's own connection to it waits to retry.

    Process 0 starts alone; its connections to process 1, refused at first,
    wait ``retry`` seconds before trying again.  Process 1 then starts,
    connects to process 0 and says HELLO on both its connections: process
    0 has heard everything a handshake used to need, but nothing of its own
    watches process 1 yet.  Process 1 gets SIGKILL in that moment.
    """
    out, store = folder / "out", folder / "store"
    runs.prepare(out)
    port0 = int((out / "hosts").read_text().split()[0].split(":")[1])
    env = runs.environment()
    first = runs.launch(out, store, EPOCHS, 0, {**env, "JOB_RECONNECT": str(retry)})
    run = runs.Run(out, [first])
    killed_at = None
    try:
        deadline = time.monotonic() + HANG_SECONDS
        while not _listening(port0):
            if time.monotonic() > deadline or first.poll() is not None:
                raise RuntimeError(f"process 0 did not start: {run.stderr(0)}")
            time.sleep(0.05)
        second = runs.launch(out, store, EPOCHS, 1, env)
        run.processes.append(second)
        while _established_to(port0) < 2:  # process 1's control and worker connections
            if time.monotonic() > deadline or second.poll() is not None:
                raise RuntimeError(f"process 1 did not connect: {run.stderr(1)}")
            time.sleep(0.005)
        time.sleep(min(0.3, retry / 4))  # its HELLOs arrive; process 0's retry is far off
        killed_at = run.kill(1)
        codes = run.wait(HANG_SECONDS)
    finally:
        run.stop()
    return Outcome(
        moment="after-hello",
        victim=1,
        killed=True,
        hung=codes[0] is None,
        survivor_exit=run.exited[0] - killed_at if 0 in run.exited else None,
        survivor_code=codes[0],
        resumed_ok=codes[0] is not None and "process 1" in run.stderr(0),
        problems=[] if codes[0] is None else [run.stderr(0)[-300:]],
    )


def try_paused_old_execution(folder: Path) -> tuple[bool, str, str]:
    """SIGSTOP a process of execution 1, run execution 2 to its end, then SIGCONT the old one.

    Returns whether the store was left as execution 2 left it (nothing of
    the woken process written), what the woken process said, and what
    changed otherwise.
    """
    import os
    import signal

    store = folder / "store"
    first = runs.start(folder / "first", store, EPOCHS, env={"JOB_EPOCH_SLEEP": "0.05"})
    try:
        runs.wait_for(first, "pid-1")
        time.sleep(0.5)  # a few epochs in: snapshots pending and committed
        os.kill(first.processes[1].pid, signal.SIGSTOP)
        deadline = time.monotonic() + HANG_SECONDS
        while first.processes[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # process 0 notices its paused peer and ends
        if first.processes[0].poll() is None:
            return False, "", "process 0 did not end while its peer was paused"
        second = runs.start(folder / "second", store, EPOCHS)
        try:
            if second.wait(HANG_SECONDS * 2) != [0, 0]:
                return False, "", f"execution 2 failed: {second.stderr(0)[-400:]}"
        finally:
            second.stop()
        recovered = RecoveryStore(store)
        before = (recovered.snapshots(), recovered.fronts(1), recovered.fronts(2))
        os.kill(first.processes[1].pid, signal.SIGCONT)
        first.wait(HANG_SECONDS)
    finally:
        first.stop()
    after = (recovered.snapshots(), recovered.fronts(1), recovered.fronts(2))
    changed = "" if after == before else f"before {before[1:]}, after {after[1:]}"
    return after == before, first.stderr(1)[-600:], changed
