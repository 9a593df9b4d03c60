"""Where a two-process epoch round trip spends its time: the critical path, stretch by stretch.

    python benchmarks/epoch_path.py [--epochs N] [--repeat R] [--lines [--top K]] [--order]
                                    [--timeout S]

``cluster_bench.py --only epochs`` says how long an epoch takes between two
processes; this says where that time goes.  It runs
``cluster_scripts/epoch_path.py`` (the epochs of ``epochs.py``, with the
cluster's sends and deliveries timestamped on the host's one monotonic
clock) as two processes on 127.0.0.1, ``--repeat`` times, and splits each
epoch's period along its critical path:

1. worker 0, from its probe passing the previous epoch to the start of
   sending this epoch's record (the program's ``send`` and ``advance_to``,
   which encodes the record and sends it on);
2. the record's hop: from that send's start to its delivery on worker 1
   (the send call, ZeroMQ and CURVE on both sides, worker 1 noticing);
3. worker 1, from the record's delivery to the start of sending its next
   message, the acknowledgement (a step: the progress received so far
   applied, the operators run, the consumption counted and packed);
4. the acknowledgement's hop, to its delivery on worker 0;
5. worker 0, from that delivery to its probe passing the epoch (a step
   that applies the acknowledgement).

The other messages (worker 0's progress batch, worker 1's downgrade) are
off this path; they cost CPU on both sides.  Printed per stretch: the
median over the epochs of each run, then the median over runs.  The
stretches of one epoch add up to its period.

``--lines`` then counts instead of timing (``lines=1``, with
``TIMELYPY_PARK_SPIN=0``): the Python lines each worker interprets per
epoch in stretches 1 and 3, in stretch 5 (counted from the first message
worker 0 receives after the step that follows the record's send, which may
come before the acknowledgement), and off the path, and the functions they are in
(the ``--top`` most, 8 unless told).
Counts are not inflated by a busy machine's preemption, as timings are;
they still vary by about 5% between runs with which messages happen to
arrive together, so they cannot tell apart changes smaller than that.

``--order`` prints, for each worker, the order of its sends and receipts
in an epoch (from worker 0's record send, or worker 1's record receipt, to
the next), the most common orders first: whether the off-path messages
stayed off the path.  ``sB`` is a send holding a batch, ``rP`` a receipt
holding only progress, and so on.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.cluster_bench import run_cluster  # noqa: E402
from timelypy.communication.config import PARK_SPIN_ENV  # noqa: E402

#: The stretches of the critical path, in the order an epoch runs them.
STRETCHES = (
    "w0: probe passed -> record send",
    "record send -> delivered on w1",
    "w1: record delivered -> ack send",
    "ack send -> delivered on w0",
    "w0: ack delivered -> probe passed",
)
PERIOD = "period (passed -> passed)"


def split(w0: Sequence[Sequence[Any]], w1: Sequence[Sequence[Any]]) -> dict[str, list[int]]:
    """Each epoch's stretches (ns) from the two workers' traces, keyed as :data:`STRETCHES`.

    ``w0`` and ``w1`` are the ``events`` of ``cluster_scripts/epoch_path.py``.
    An epoch whose record or acknowledgement cannot be matched is skipped.
    """
    passed = {e[3]: e[1] for e in w0 if e[0] == "passed"}
    records = [e for e in w0 if e[0] == "send" and "B" in e[3]]
    arrivals = [e for e in w1 if e[0] == "recv" and "B" in e[3]]
    w1_sends = [e for e in w1 if e[0] == "send"]
    w0_recvs = [e for e in w0 if e[0] == "recv"]
    w1_send_starts = [e[1] for e in w1_sends]
    w0_recv_starts = [e[1] for e in w0_recvs]
    first = min(passed, default=0)
    out: dict[str, list[int]] = {name: [] for name in (*STRETCHES, PERIOD)}
    # the record of epoch first + i is the i-th record sent after the warm-up
    for i, (record, arrival) in enumerate(zip(records, arrivals, strict=False)):
        epoch = first + i
        if epoch - 1 not in passed or epoch not in passed:
            continue
        j = bisect.bisect_left(w1_send_starts, arrival[1])
        if j == len(w1_sends):
            break
        ack = w1_sends[j]
        k = bisect.bisect_left(w0_recv_starts, ack[1])
        if k == len(w0_recvs):
            break
        back = w0_recvs[k]
        if back[1] > passed[epoch]:
            continue  # the probe passed on another message (not this path's shape)
        parts = (
            record[1] - passed[epoch - 1],
            arrival[1] - record[1],
            ack[1] - arrival[1],
            back[1] - ack[1],
            passed[epoch] - back[1],
        )
        for name, value in zip(STRETCHES, parts, strict=True):
            out[name].append(value)
        out[PERIOD].append(passed[epoch] - passed[epoch - 1])
    return out


def medians(stretches: dict[str, list[int]]) -> dict[str, float]:
    """The median of each stretch, in microseconds."""
    return {k: statistics.median(v) / 1000 for k, v in stretches.items() if v}


def orders(events: Sequence[Sequence[Any]], marker: str) -> Counter[tuple[str, ...]]:
    """How often each order of one worker's sends and receipts occurs in an epoch.

    ``events`` are one worker's (``cluster_scripts/epoch_path.py``); each
    send or receipt is named by its first letter and the kinds it held
    (``"sB"``, ``"rP"``).  An epoch's order runs from one ``marker`` to the
    next (worker 0: ``"sB"``, its record's send; worker 1: ``"rB"``).
    """
    names = [e[0][0] + e[3] for e in sorted(events, key=lambda e: e[1]) if e[0] in ("send", "recv")]
    starts = [i for i, name in enumerate(names) if name == marker]
    return Counter(tuple(names[a:b]) for a, b in pairwise(starts))


def trace_events(epochs: int, timeout: float) -> dict[int, list[Any]]:
    """One traced two-process run: each worker's events, by worker index."""
    results = run_cluster("epoch_path.py", 2, {"epochs": epochs}, timeout)
    return {r["worker"]: r["events"] for r in results}


def trace_once(epochs: int, timeout: float) -> dict[str, float]:
    """One traced two-process run; the median of each stretch (us)."""
    by_worker = trace_events(epochs, timeout)
    found = split(by_worker[0], by_worker[1])
    if len(found[PERIOD]) < epochs // 2:
        raise AssertionError(
            f"only {len(found[PERIOD])} of {epochs} epochs had the expected critical path"
        )
    return medians(found)


def count_lines(epochs: int, timeout: float) -> list[dict[str, Any]]:
    """One run counting interpreted lines per stretch, the park spin off; each worker's result."""
    params = {"epochs": epochs, "lines": 1}
    return run_cluster("epoch_path.py", 2, params, timeout, env={PARK_SPIN_ENV: "0"})


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the stretches (and with ``--lines`` the line counts)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3000, help="traced epochs per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--lines", action="store_true", help="also count interpreted lines")
    parser.add_argument(
        "--top", type=int, default=8, help="functions listed per stretch with --lines (default 8)"
    )
    parser.add_argument(
        "--order", action="store_true", help="also print each worker's message order per epoch"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    args = parser.parse_args(argv)
    runs = [trace_once(args.epochs, args.timeout) for _ in range(args.repeat)]
    names = (*STRETCHES, PERIOD)
    print(f"epoch round trip, 2 processes x 1 worker, {args.epochs} epochs x {args.repeat} runs")
    print(f"{'stretch':38s} {'median us':>10s}  per run")
    for name in names:
        values = [run[name] for run in runs]
        each = " ".join(f"{v:7.1f}" for v in values)
        print(f"{name:38s} {statistics.median(values):10.1f}  {each}")
    if args.order:
        events = trace_events(args.epochs, args.timeout)
        print(f"\nmessage order per epoch (one more run, {args.epochs} epochs)")
        for worker, marker in ((0, "sB"), (1, "rB")):
            counted = orders(events[worker], marker)
            total = sum(counted.values())
            print(f"worker {worker}: {total} epochs")
            for order, n in counted.most_common(4):
                print(f"  {100 * n / total:5.1f}%  {' '.join(order)}")
    if args.lines:
        epochs = max(100, args.epochs // 5)
        print(f"\ninterpreted Python lines per epoch ({epochs} epochs, no park spin)")
        for result in sorted(count_lines(epochs, args.timeout), key=lambda r: r["worker"]):
            lines = result["lines"]
            print(f"worker {result['worker']}: {sum(lines.values()):.0f} in all")
            for stretch, n in sorted(lines.items(), key=lambda kv: -kv[1]):
                print(f"  {n:7.1f}  {stretch}")
                top = sorted(
                    (
                        f
                        for f in result["functions"]
                        if f[0] == stretch and stretch.startswith(("w0", "w1"))
                    ),
                    key=lambda f: -f[2],
                )
                for _, function, count in top[: args.top]:
                    print(f"           {count:7.1f}  {function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
