"""Where timelypy's time goes in the runtime benchmarks: cProfile and py-spy summaries.

    python -m benchmarks.runtime_profile [--quick] [--workload NAME ...]
                                         [--profiler cprofile|py-spy] [--top N] [--markdown]

For each workload of ``benchmarks.runtime_bench`` (all by default) this runs
timelypy's candidate (``to_stream``'s own batches; the round trip as it is)
and prints the ``--top`` functions by *own* time, with their *inclusive*
time, as shares of the profiled total. Call counts do not depend on the
machine, and shares depend far less on its load than absolute times do.

- ``cprofile`` (default): one run after an untimed warm-up, under
  ``cProfile``. It also counts calls, quoted per input batch (``CHUNK``
  records; per epoch for the round trip): the framework's cost per batch or
  per epoch, in function calls. cProfile charges a fixed cost to every Python
  call, so it overstates functions called once per record (the user's
  ``triple``/``is_even``) and code made of many tiny calls (the round trip).
- ``py-spy``: ``--runs`` runs (each after ``gc.collect()``) in a child
  process sampled by ``py-spy record`` (1,000 samples/s, ``--format raw``);
  only samples inside timelypy's candidate count. No per-call overhead, so
  its shares are the ones to quote for where the time goes; it cannot count
  calls. py-spy samples wall time: on a busy machine the process loses whole
  scheduler slices at random places, which puts a few milliseconds of samples
  on whatever it was running; several runs average that out. Needs ``py-spy`` (in the
  venv's ``bin`` or on ``PATH``) and permission to trace a child process.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import print_table
from benchmarks.peers.bytewax_peer import DEFAULT_BATCH_SIZE
from benchmarks.runtime_bench import WORKLOADS, Workload, build_workloads, machine

REPO_ROOT = Path(__file__).resolve().parent.parent
CPROFILE_COLUMNS = ["function", "calls", "calls/unit", "own", "inclusive"]
PYSPY_COLUMNS = ["function", "own", "inclusive"]
SAMPLE_RATE = 1000

_LINE_NUMBER = re.compile(r":\d+\)$")


def _workloads(names: Sequence[str], quick: bool) -> list[Workload]:
    return build_workloads(
        scale=10 if quick else 1, bytewax=False, batch_sizes=(DEFAULT_BATCH_SIZE,), only=names
    )


def _label(key: tuple[str, int, str]) -> str:
    """``path:line function`` with paths relative to the repository; builtins as named."""
    filename, line, function = key
    if filename == "~":
        return function
    path = Path(filename)
    try:
        shown = str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        shown = path.name
    return f"{shown}:{line} {function}"


def cprofile_rows(workload: Workload, top: int) -> tuple[list[list[str]], int]:
    """Profile timelypy's candidate once after a warm-up; return the top rows and all calls."""
    fn = workload.candidates["timelypy"]
    fn()
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    rows, calls_total, _ = profile_rows(profiler, workload.per[0], top)
    return rows, calls_total


def profile_rows(
    profiler: cProfile.Profile, per: int, top: int
) -> tuple[list[list[str]], int, float]:
    """The ``top`` functions by own time (:data:`CPROFILE_COLUMNS`): rows, all calls, seconds.

    Calls are also given per unit of work (``per`` units in the profiled run);
    shares are of the profiler's total own time.
    """
    entries: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in entries.values()) or 1.0
    calls_total = sum(calls for _, calls, _, _, _ in entries.values())
    ordered = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    rows = [
        [_label(key), str(calls), f"{calls / per:.3g}", f"{tt / total:.1%}", f"{ct / total:.1%}"]
        for key, (_, calls, tt, ct, _) in ordered
    ]
    return rows, calls_total, total


def summarize_raw(raw: str, within: str, top: int) -> tuple[list[list[str]], int]:
    r"""Own and inclusive sample shares per function from py-spy's ``--format raw`` output.

    Only stacks with a frame matching the regular expression ``within`` count.
    Frames are ``function (file:line)``; the line is dropped so that a
    function is one row, and so is every ``.<locals>`` of nested functions'
    names (``map.<locals>.logic`` is shown as ``map.logic``).

    >>> raw = "main (a.py:1);run (b.py:2);f (c.py:3) 3\nmain (a.py:1);run (b.py:5) 1\n"
    >>> summarize_raw(raw, r"^run \(", 5)
    ([['f (c.py)', '75.0%', '75.0%'], ['run (b.py)', '25.0%', '100.0%']], 4)
    """
    pattern = re.compile(within)
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [
            _LINE_NUMBER.sub(")", frame).replace(".<locals>", "") for frame in stack.split(";")
        ]
        if not any(pattern.search(frame) for frame in frames):
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    denominator = total or 1
    rows = [
        [frame, f"{n / denominator:.1%}", f"{inclusive[frame] / denominator:.1%}"]
        for frame, n in own.most_common(top)
    ]
    return rows, total


def _py_spy() -> str:
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit(
            "runtime_profile: py-spy is not installed; install it with `pip install py-spy`, "
            "or use --profiler cprofile"
        )
    return found


def py_spy_rows(name: str, quick: bool, top: int, runs: int) -> tuple[list[list[str]], int]:
    """Sample ``runs`` runs of timelypy's candidate in a child process with py-spy.

    Returns the top rows and the number of samples they are shares of.
    """
    with tempfile.TemporaryDirectory(prefix="timelypy-py-spy-") as tmp:
        out = Path(tmp) / "profile.raw"
        child = [
            sys.executable,
            "-m",
            "benchmarks.runtime_profile",
            "--child",
            name,
            "--runs",
            str(runs),
        ]
        command = [
            _py_spy(),
            "record",
            "--rate",
            str(SAMPLE_RATE),
            "--format",
            "raw",
            "--output",
            str(out),
            "--",
            *child,
            *(["--quick"] if quick else []),
        ]
        done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not out.exists():
            raise SystemExit(
                f"runtime_profile: py-spy failed (exit {done.returncode}):\n{done.stderr.strip()}"
            )
        # samples inside timelypy_side.<name>: the candidate itself, not the data loading
        return summarize_raw(out.read_text(), rf"^{name} \(.*timelypy_side\.py\)$", top)


def main(argv: Sequence[str] | None = None) -> int:
    """Profile the workloads and print one table per workload."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.runtime_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="10x smaller inputs")
    parser.add_argument(
        "--workload", choices=WORKLOADS, action="append", help="profile only this (repeatable)"
    )
    parser.add_argument("--profiler", choices=("cprofile", "py-spy"), default="cprofile")
    parser.add_argument("--top", type=int, default=15, help="functions per table (%(default)s)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs sampled by py-spy, per workload (%(default)s)"
    )
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if args.child:  # the process py-spy samples: run timelypy's candidate once
        (workload,) = _workloads([args.child], args.quick)
        for _ in range(args.runs):
            gc.collect()  # as the harness does before each timed call
            workload.candidates["timelypy"]()
        return 0

    names = args.workload or list(WORKLOADS)
    size = "quick (1/10 size)" if args.quick else "full size"
    print(f"runtime profiles ({args.profiler}), {size}, 1 worker, {machine()}")
    for name in names:
        print(f"# profiling timelypy on {name}", file=sys.stderr, flush=True)
        print()
        if args.profiler == "cprofile":
            (workload,) = _workloads([name], args.quick)
            rows, calls = cprofile_rows(workload, args.top)
            per, unit = workload.per
            print(
                f"{name}: top {args.top} by own time, shares of the profiled total; "
                f"{calls:,} calls in all, {calls / per:,.0f} per input {unit} ({per:,} of them "
                "in the run)"
            )
            print()
            print_table(rows, CPROFILE_COLUMNS, markdown=args.markdown)
        else:
            rows, samples = py_spy_rows(name, args.quick, args.top, args.runs)
            print(
                f"{name}: top {args.top} by own samples, shares of the {samples:,} samples "
                f"taken inside timelypy's candidate ({args.runs} runs, {SAMPLE_RATE}/s)"
            )
            print()
            print_table(rows, PYSPY_COLUMNS, markdown=args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
