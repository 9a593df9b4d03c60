"""Kill points, hangs, and slow last commits of a two-process run with recovery (issue 39).

``python -m benchmarks.reliability_bench [--repeat N] [--json PATH] [--code DIR]`` runs
``tests/flow/reliability_job.py`` (two processes, 20 keys, 40 epochs, a
recovery store) and, on this machine:

* every kill point of ``tests/flow/kill_points.py`` (right after each
  process's handshake, when each starts reading, a random moment, during
  each process's final commit; each process as the victim), ``N`` times,
  plus the peer SIGKILLed right after its HELLO while the survivor's own
  connection waits to retry.  Each killed run is resumed to its end and its
  totals checked;
* slow final commits: one process's last commit takes 1 s or 4 s longer
  (each process in turn), ``N`` times each.

It prints the kill points tried, the hangs (a survivor still running 60 s
after the kill; goal 0), the seconds from the kill to the survivors' exit
(median and max), the resumed runs with exact totals, and the slow-final-
commit runs that ended in success with the store done (goal: all).  These
are absolute seconds of one machine, a bound to watch rather than a speed
to compare: nothing here has a peer to measure beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.flow.kill_points import (
    KILL_POINTS,
    try_kill_point,
    try_lost_after_hello,
    try_slow_final_commit,
)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="sweeps of every kill point")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--code",
        type=Path,
        help="run the job with the timelypy package under this directory (e.g. an older "
        "checkout, for a before/after); the checks always use this one",
    )
    args = parser.parse_args(argv)
    if args.code is not None:
        os.environ["RELIABILITY_CODE"] = str(args.code.resolve())
    started = time.monotonic()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        root = Path(scratch)
        number = 0
        for _sweep in range(args.repeat):
            for moment, victim in KILL_POINTS:
                number += 1
                outcome = try_kill_point(root / str(number), moment, victim, seed=number)
                outcomes.append(outcome)
                print(
                    f"{moment:>15} kill {victim}: "
                    + ("not reached" if not outcome.killed else "")
                    + ("HANG " if outcome.hung else "")
                    + (
                        f"survivor exit {outcome.survivor_exit:.2f} s (rc {outcome.survivor_code})"
                        if outcome.survivor_exit is not None
                        else ""
                    )
                    + ("" if outcome.resumed_ok else f" WRONG {outcome.problems}"),
                    flush=True,
                )
            number += 1
            outcome = try_lost_after_hello(root / str(number))
            outcomes.append(outcome)
            print(
                f"{'after-hello':>15} kill 1: "
                + ("HANG" if outcome.hung else f"survivor exit {outcome.survivor_exit:.2f} s"),
                flush=True,
            )
        slow = []
        for _ in range(args.repeat):
            for seconds in (1.0, 4.0):
                for process in (0, 1):
                    number += 1
                    ok, why = try_slow_final_commit(root / str(number), process, seconds)
                    slow.append(ok)
                    print(
                        f"slow final commit on process {process} (+{seconds:g} s): "
                        + ("success, store done" if ok else f"FAILED {why}"),
                        flush=True,
                    )
    killed = [o for o in outcomes if o.killed]
    exits = [o.survivor_exit for o in killed if o.survivor_exit is not None]
    figures = {
        "kill_points_tried": len(outcomes),
        "kills_landed": len(killed),
        "hangs": sum(o.hung for o in outcomes),
        "survivor_exit_median_s": round(statistics.median(exits), 3) if exits else None,
        "survivor_exit_max_s": round(max(exits), 3) if exits else None,
        "resumed_exact": sum(o.resumed_ok for o in outcomes if o.moment != "after-hello"),
        "resumed_runs": sum(1 for o in outcomes if o.moment != "after-hello"),
        "slow_final_commit_success": sum(slow),
        "slow_final_commit_runs": len(slow),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(figures, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["hangs"] == 0 and all(slow) else 1


if __name__ == "__main__":
    sys.exit(main())
