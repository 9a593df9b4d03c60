"""Run every example as a program and compare what it prints, exactly.

Expected outputs come from Timely's own documentation and programs (the
README for ``simple`` and ``hello``, ``timely/examples/*.rs`` for
``wordcount``, ``distinct`` and ``capture_send``/``capture_recv``, the book's
chapter 4.2 for ``collatz``) and, for the seed patterns, from what each
pattern computes.  Where an expected text is long it is produced here by a
few lines of plain Python that do the same computation without timelypy.

Where several workers print and nothing in Timely's semantics orders their
lines, a test compares what *is* fixed: the lines of each worker in order,
each worker's set of lines, or the multiset of all lines -- each test says
which and why.  Where progress does order them (a driver that waits on a
probe before the next round), the comparison is exact.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import timelypy
from timelypy import Config

ROOT = Path(__file__).resolve().parents[1]


def run(example: str, *args: str, cwd: Path = ROOT) -> list[str]:
    """Run ``examples/<example>`` in ``cwd`` with ``args``; return its stdout lines.

    It must exit 0 and write nothing to stderr.
    """
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    return result.stdout.splitlines()


def by_worker(lines: list[str]) -> dict[int, list[str]]:
    """Group ``worker i:...`` lines by ``i``, keeping each worker's order."""
    grouped: dict[int, list[str]] = {}
    for line in lines:
        assert line.startswith("worker "), line
        index = int(line[len("worker ") : line.index(":")])
        grouped.setdefault(index, []).append(line)
    return grouped


#: Timely's progress modes, as arguments.  Every port of Timely's examples and every
#: seed pattern must print the same in both: demand mode holds a worker's progress
#: batch back until it could move a frontier, which changes when other workers learn
#: of progress, never what a frontier becomes.  One worker delivers its batches to
#: itself at once in either mode, so only runs of two workers or more tell them apart.
MODES = {"eager": [], "demand": ["--progress-mode", "demand"]}


@pytest.fixture(params=sorted(MODES))
def progress(request: pytest.FixtureRequest) -> list[str]:
    """The arguments of one progress mode (for runs of two workers or more)."""
    return MODES[request.param]


# -- Timely's examples ----------------------------------------------------------------


def test_simple():
    # Timely's README: `cargo run --example simple`.
    assert run("simple.py") == [f"seen: {x}" for x in range(10)]


@pytest.mark.parametrize(
    ("workers", "mode"), [(1, "eager"), (2, "eager"), (3, "eager"), (2, "demand"), (3, "demand")]
)
def test_hello(workers, mode):
    # Timely's README: round r is printed by worker r % peers.  Only worker 0 sends, and
    # round r + 1 is sent only once the probe says round r is done everywhere, which is
    # after its line was printed: the whole output is in round order, exactly.
    expected = [f"worker {r % workers}:\thello {r}" for r in range(10)]
    assert run("hello.py", "-w", str(workers), *MODES[mode]) == expected


def test_wordcount_one_worker():
    # timely/examples/wordcount.rs: one ("round", 1) per round, a running count.
    assert run("wordcount.py") == [f"seen: ('round', {k})" for k in range(1, 11)]


def test_wordcount_two_workers(progress):
    # Every worker's input handle sends ("round", 1) each round (the Rust program has no
    # `if index == 0`), so with two workers the count reaches 20, not 10: -w 1 and -w 2
    # do NOT print the same multiset.  All pairs meet on the one worker "round" is routed
    # to, and each round completes before the next is sent, so the order is exact too.
    expected = [f"seen: ('round', {k})" for k in range(1, 21)]
    assert run("wordcount.py", "-w", "2", *progress) == expected


def test_distinct_one_worker():
    # timely/examples/distinct.rs: worker 0 sends 0 1 2 2 2 3 3 4 and sees it all.
    assert run("distinct.py") == [f"worker 0:\tvalue {v}" for v in range(5)]


def test_distinct_two_workers(progress):
    # Worker 0 receives the evens, worker 1 the odds, from both senders.  Which sender's
    # batch a worker reads first is not fixed (worker 0 may print 0 4 2), so compare each
    # worker's set of lines.
    grouped = by_worker(run("distinct.py", "-w", "2", *progress))
    assert sorted(grouped) == [0, 1]
    assert sorted(grouped[0]) == [f"worker 0:\tvalue {v}" for v in (0, 2, 4)]
    assert sorted(grouped[1]) == [f"worker 1:\tvalue {v}" for v in (1, 3, 5, 7)]


def collatz_book_output() -> list[str]:
    """The book's loop in plain Python: every stepped value, step by step."""
    printed: list[str] = []
    current, time = list(range(1, 10)), 0
    while current:
        stepped = [x // 2 if x % 2 == 0 else 3 * x + 1 for x in current]
        printed.extend(str(x) for x in stepped)
        current = [x for x in stepped if x != 1] if time < 100 else []
        time += 1
    return printed


def test_collatz_book():
    lines = run("collatz.py")
    assert lines[:9] == ["4", "1", "10", "2", "16", "3", "22", "4", "28"]
    assert lines == collatz_book_output()


def test_collatz_exercise():
    # Stepping before testing (as the book's loop does): 1 -> 4 -> 2 -> 1 is 3 steps; the
    # rest are the usual Collatz stopping times (9 takes 19, as the chapter says).
    steps = {1: 3, 2: 1, 3: 7, 4: 2, 5: 5, 6: 8, 7: 16, 8: 3, 9: 19}
    expected = [f"{n}: {k} step{'' if k == 1 else 's'}" for n, k in steps.items()]
    assert run("collatz.py", "exercise") == expected


def test_capture_replay_one_worker():
    # capture_send/capture_recv with one source worker: replayed 0..9, in order.
    assert run("capture_replay.py") == [f"replayed: {x}" for x in range(10)]


def test_capture_replay_three_workers(progress):
    # Each of the three source workers' 0..9 is replayed once; the replaying workers
    # print concurrently and the lines do not name them, so compare the multiset.
    lines = run("capture_replay.py", "-w", "3", *progress)
    assert Counter(lines) == Counter(f"replayed: {x}" for x in range(10) for _ in range(3))


# -- The seed patterns ------------------------------------------------------------------


def test_custom_unary():
    assert run("patterns/custom_unary.py") == [f"Result: {5 * x}" for x in range(10)]


def test_custom_unary_two_workers(progress):
    # Each worker multiplies its own 0..9 (Pipeline): every line twice; the two workers
    # print concurrently, so compare the multiset.
    lines = run("patterns/custom_unary.py", "-w", "2", *progress)
    assert Counter(lines) == Counter(f"Result: {5 * x}" for x in range(10) for _ in range(2))


def test_unary_notify_aggregation():
    # ("apple", 1), ("banana", 1), ("apple", 2): apple twice, banana once, keys sorted.
    expected = ["Key: apple, Count: 2", "Key: banana, Count: 1"]
    assert run("patterns/unary_notify_aggregation.py") == expected


def test_unary_notify_aggregation_two_workers(progress):
    # Both workers send the records, so the counts double; the two keys may be counted on
    # different workers, which print concurrently: compare the sorted lines.
    lines = run("patterns/unary_notify_aggregation.py", "-w", "2", *progress)
    assert sorted(lines) == ["Key: apple, Count: 4", "Key: banana, Count: 2"]


def feedback_loop_output() -> list[str]:
    """Pattern 4 in plain Python: print, then double while value < 100 and iteration < 10."""
    printed: list[str] = []
    current = [(x, 0) for x in range(1, 6)]
    while current:
        printed.extend(f"Iteration {i}: value = {v}" for v, i in current)
        current = [(v * 2, i + 1) for v, i in current if v < 100 and i < 10]
    return printed


def test_feedback_loop():
    lines = run("patterns/feedback_loop.py")
    assert lines[-1] == "Iteration 7: value = 128"
    assert lines == feedback_loop_output()


def test_feedback_loop_two_workers(progress):
    # Each worker runs the loop on its own inputs; their lines interleave: compare the
    # multiset.
    lines = run("patterns/feedback_loop.py", "-w", "2", *progress)
    assert Counter(lines) == Counter(feedback_loop_output() * 2)


BARRIER_JOIN = [
    "joined at 0: ('apple', 3, 50)",
    "joined at 0: ('apple', 4, 50)",
    "joined at 0: ('banana', 2, 20)",
    "joined at 1: ('apple', 1, 55)",
    "joined at 2: ('cherry', 5, 70)",
    "joined at 2: ('cherry', 5, 75)",
]


def test_barrier_join():
    # ('apple', 4) arrives in a later installment than the price ('apple', 50): joining
    # only complete times is what keeps ('apple', 4, 50).
    assert run("patterns/barrier_join.py") == BARRIER_JOIN


def test_barrier_join_two_workers(progress):
    # Keys are joined on the worker they are routed to; within an epoch the two workers
    # print concurrently, so compare the sorted lines.  Epochs do stay in order: worker 0
    # sends epoch e + 1 only after the probe says epoch e was joined and printed.
    lines = run("patterns/barrier_join.py", "-w", "2", *progress)
    assert sorted(lines) == BARRIER_JOIN
    epochs = [line.split(":")[0] for line in lines]
    assert epochs == sorted(epochs)


@pytest.mark.parametrize(("workers", "mode"), [(1, "eager"), (3, "eager"), (3, "demand")])
def test_input_probe(workers, mode):
    # Every worker sends each round; no worker sends round r + 1 before the probe says
    # round r is done everywhere (after it was printed), so the order is exact.
    lines = run("patterns/input_probe.py", "-w", str(workers), *MODES[mode])
    assert lines == [f"Saw: {r}" for r in range(10) for _ in range(workers)]


# -- Regressions: two core bugs found while writing the examples -------------------------
#
# replay_into once held one capability too few per worker (the constructor's borrowed
# capability was already released), and on one worker a scope once reported itself
# complete although its last propagation had activated operators, so they never saw
# their final empty frontier.  On one worker the two cancelled out in capture_replay.


def test_replayed_frontier_follows_the_recorded_progress():
    def program(worker: timelypy.Worker) -> list[tuple[int, ...]]:
        queue = timelypy.CaptureQueue()
        probe = worker.dataflow(lambda scope: timelypy.replay_into([queue], scope).probe())
        frontiers = []
        for event in [
            None,
            timelypy.Messages(0, [1]),
            timelypy.ProgressUpdates([(0, -1), (1, 1)]),
            timelypy.ProgressUpdates([(1, -1)]),
        ]:
            if event is not None:
                queue.push(event)
            # One worker: a few steps apply everything.
            for _ in range(10):
                worker.step()
            frontiers.append(probe.frontier())
        return frontiers

    # A recording starts at the minimum time: nothing is complete until it says so.
    assert timelypy.execute(Config.thread(), program) == [[(0,), (0,), (1,), ()]]


@pytest.mark.parametrize("workers", [1, 2])
def test_operators_see_the_final_empty_frontier(workers):
    def program(worker: timelypy.Worker) -> list[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []
        worker.dataflow(lambda scope: scope.to_stream([1]).inspect_frontier(seen.append))
        return seen

    assert timelypy.execute(Config.process(workers), program) == [[(0,), ()]] * workers


@pytest.mark.parametrize("workers", [1, 2])
def test_capture_records_the_closing_progress(workers):
    # The recording must say the stream ended, or a replay of it waits forever.
    def program(worker: timelypy.Worker) -> list[object]:
        events: list[object] = []
        worker.dataflow(lambda scope: scope.to_stream([1]).capture_into(events))
        return events

    expected = [timelypy.Messages(0, [1]), timelypy.ProgressUpdates([(0, -1)])]
    assert timelypy.execute(Config.process(workers), program) == [expected] * workers


def test_testing_an_operator():
    (line,) = run("testing_an_operator.py")
    assert line.startswith("ok: sum_by_key matches its model in 100 simulations; ")
    assert "the early-emitting variant fails on" in line


def test_metrics_server():
    pytest.importorskip("prometheus_client")
    lines = run("metrics_server.py")
    records = {
        line.split("{")[0] + " " + line.split('operator="')[1].split('"')[0]: line.split()[-1]
        for line in lines
    }
    assert records["timelypy_operator_records_in_total FlatMap"] == "500.0"
    assert records["timelypy_operator_records_out_total FlatMap"] == "1000.0"
    assert records["timelypy_operator_records_out_total Filter"] == "499.0"


def test_live_progress():
    assert run("live_progress.py") == ["sent 100,000 records"]  # stderr is not a terminal


def test_why_not_complete():
    assert run("why_not_complete.py") == [
        "worker 0: a capability at 0 on output 0 of operator 'Holdout' (address (0, 1)): "
        "0 held on worker 0, 1 on other workers",
        "worker 1: worker 1: operator 'Holdout' (address (0, 1)) holds a capability at 0 "
        "on output 0",
        "complete on both workers",
    ]
