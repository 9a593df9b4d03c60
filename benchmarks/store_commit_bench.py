"""What a worker's commit to the recovery store costs, this checkout against another one.

    python -m benchmarks.store_commit_bench --before DIR [--commits N] [--repeat R]

``DIR`` holds another checkout's ``timelypy`` package (``git archive REV
timelypy | tar -x -C DIR``).  Each candidate, in a fresh process with only
its own package importable, creates a store of 1 and of 2 partitions under
the system's temporary directory, begins an execution, and times ``N``
commits of one worker, each of 20 snapshot rows (keys spread over the
partitions) and a new frontier: the commit a flow makes at most every
``commit_interval``.  Candidates alternate (before, after, before, ...)
``R`` times; the medians per commit are quoted with their ratio.  Issue 39
made the partitions other than the ledger's commit with
``synchronous=FULL`` (a sync per commit) and fenced every commit: this says
what that costs on this disk.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, tempfile, time
from timelypy.recovery.store import create_store
partitions, commits = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as scratch:
    store = create_store(f"{scratch}/store", partitions)
    ex = store.begin_execution(1)
    writer = store.writer(ex.ex_num, 0)
    started = time.perf_counter()
    for epoch in range(commits):
        writer.snapshot("sum", epoch, [(f"key-{i}", epoch) for i in range(20)])
        writer.commit(epoch + 1)
    elapsed = time.perf_counter() - started
    writer.close()
print(json.dumps(elapsed / commits))
"""


def _time(code: Path, partitions: int, commits: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONPATH"] = str(code)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(partitions), str(commits)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return float(json.loads(done.stdout))


def main(argv: list[str] | None = None) -> int:
    """Time both candidates; print the medians per commit and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    for partitions in (1, 2):
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.repeat):
            times["before"].append(_time(args.before, partitions, args.commits))
            times["after"].append(_time(ROOT, partitions, args.commits))
        before, after = (statistics.median(times[k]) for k in ("before", "after"))
        print(
            f"{partitions} partition(s): before {before * 1e6:,.0f} us/commit, after "
            f"{after * 1e6:,.0f} us/commit, after/before {after / before:.2f}x "
            f"(medians of {args.repeat}, {args.commits} commits each)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
