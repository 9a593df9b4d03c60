r"""Recovery on Spark: what it costs, and how fast a lost task is over.

    python -m benchmarks.spark_recovery_bench [--repeat N] [--markdown]

Each trial is a fresh driver process on ``local-cluster[2,1,1024]`` (two
executor JVMs, one core each) running ``tests/spark/scripts/lost_task.py``:
a ``stateful_map`` running count over 3,000 records arriving at 2 ms each
on 2 workers (30 epochs of 100 records), collected and checked against
``timelypy.flow.run``.  Modes, interleaved trial by trial:

- ``off``: no recovery, nothing killed (the baseline);
- ``on``: recovery on (the driver keeps the store), nothing killed;
- ``on, killed``: recovery on, 2 attempts, one task's Python worker
  SIGKILLed about 1.5 s into the run: the result must still equal the
  failure-free one; reports the seconds from the kill to the resumed
  execution's first closed epoch;
- ``off, killed``: no recovery: reports the seconds from the kill to the
  ``TaskLostError``.

The records arrive slowly on purpose (the kill must land mid-run), so the
``elapsed`` figures compare modes, not engines; medians of ``--repeat``
trials (default 3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks._harness import print_table

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "spark" / "scripts" / "lost_task.py"
MASTER = "local-cluster[2,1,1024]"

MODES = {
    "off": ["--no-kill"],
    "on": ["--no-kill", "--recover"],
    "on, killed": ["--recover"],
    "off, killed": [],
}


def trial(mode: str) -> dict:
    """One fresh driver running ``lost_task.py`` in ``mode``; its JSON report."""
    with tempfile.TemporaryDirectory() as root:
        pids = Path(root, "pids")
        pids.mkdir()
        args = [a if a != "--recover" else f"--recover={root}/store" for a in MODES[mode]]
        output = Path(root, "report.json")
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--master", MASTER, *args, str(pids), str(output)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=root,
            env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
        )
        if result.returncode != 0:
            raise RuntimeError(f"{mode}: the driver failed:\n{result.stderr[-3000:]}")
        report = json.loads(output.read_text())
    if mode != "off, killed" and not report.get("equal"):
        raise RuntimeError(f"{mode}: the result differs from the failure-free one: {report}")
    if mode == "off, killed" and report.get("error") != "TaskLostError":
        raise RuntimeError(f"{mode}: expected a TaskLostError, got {report}")
    return report


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    reports: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for round_ in range(args.repeat):
        for mode in MODES:
            print(f"# round {round_ + 1}: {mode}", file=sys.stderr)
            reports[mode].append(trial(mode))
    elapsed = {m: [r["elapsed"] for r in rs if "elapsed" in r] for m, rs in reports.items()}
    base = statistics.median(elapsed["off"])
    rows = []
    for mode, rs in reports.items():
        ratio = f"{statistics.median(elapsed[mode]) / base:.2f}x" if elapsed[mode] else "-"
        rows.append(
            [
                mode,
                median(elapsed[mode]),
                ratio,
                median([r["kill_to_first_epoch"] for r in rs if "kill_to_first_epoch" in r]),
                median([r["after_kill"] for r in rs if r.get("after_kill") is not None]),
                str(len(rs)),
            ]
        )
    print_table(
        rows,
        [
            "mode",
            "run_flow median",
            "vs off",
            "kill -> resumed 1st epoch",
            "kill -> TaskLostError",
            "trials",
        ],
        markdown=args.markdown,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
