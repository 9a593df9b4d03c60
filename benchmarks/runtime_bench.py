"""timelypy's runtime against plain Python and bytewax, measured side by side.

    python -m benchmarks.runtime_bench [--quick] [--repeat N] [--markdown]
                                       [--no-bytewax] [--batch-size B ...]
                                       [--workload NAME ...]

Workloads (full size; ``--quick`` is 10x smaller with 3 repeats), one worker:

- ``map_filter``: ``list(range(2_000_000))`` through ``triple`` (``x * 3``)
  then ``is_even`` (``y % 2 == 0``); throughput counts input records.
  timelypy: ``scope.to_stream(ints).map(f).filter(g)`` collected with
  ``inspect_batch(lambda t, d: out.extend(d))``.
- ``wordcount``: the 200,000-line, 2,000,000-word corpus of
  ``benchmarks._data``, all lines at one epoch; throughput counts words.
  timelypy: ``flat_map(str.split)``, then a ``unary_frontier`` counter with an
  ``Exchange(stable_hash)`` pact that updates one ``Counter`` per time with
  whole batches and gives ``(word, count)`` when the time completes
  (``benchmarks/timelypy_side.py``).
- ``epoch_round_trip``: 100,000 epochs of one record each through ``map``
  (``x + 1``) to a probe: ``handle.send(x); handle.advance_to(e + 1); while
  probe.less_than(handle.time): worker.step()``; throughput counts epochs.
  bytewax's analogue is ``bytewax_peer.epoch_round_trip`` (see its
  docstring): a one-record batch per epoch with ``epoch_interval=0``.
  ``python floor`` (``benchmarks/peers/progress_floor.py``) does only the
  progress bookkeeping this loop needs, written out for this one graph with
  no engine: what the round trip costs in Python at the least.

Candidates per workload: ``plain`` (``benchmarks/peers/plain.py``, the limit),
``timelypy`` (``to_stream``'s own batches of ``CHUNK`` records), ``timelypy
batch B`` (the same dataflow fed ``B``-record slices) and bytewax, each row
naming its operators and its input batch size. bytewax runs at every
``--batch-size`` (default 1,000 and 10,000: ``bytewax_peer.BATCH_SIZES``,
bytewax's default order and ten times it), each written two ways: with
its per-item operators (``op.map`` + ``op.filter``; ``op.flat_map`` +
``op.count_final``) and with its own batch API (``op.flat_map_batch``, one
Python call per batch; for the wordcount a ``Counter`` per batch, then
``op.reduce_final``). ``timelypy batch B`` runs at the same sizes.
``epoch_round_trip`` has one bytewax row, batch 1 by definition. They are
timed interleaved (``--repeat`` rounds after one untimed warm-up round) and
every result is checked against the plain-Python result before any time is
quoted.

The table quotes the median time, the throughput at that median, **speed vs
plain** = plain's median / the candidate's median (1.00x is as fast as plain
Python; the goal for ``map_filter``, whose map and filter run fused, is
>= 0.90x), **vs bytewax** = the median of the workload's first bytewax row
(per-item operators at the first batch size; named under the table) / the
candidate's median, **vs fastest bytewax** = the same against whichever
bytewax row had the smallest median in this run (also named), the same two
ratios by CPU time (``cpu vs ...``, medians of ``time.process_time()`` over
the same calls) and the wall-clock spread ``(max - min) / median``. A
second table sets each goal next to its measured figure; a goal against
bytewax (>= 3x for ``map_filter`` and ``wordcount``, >= 1x and >= 1.5x
for ``epoch_round_trip``) gets one row per bytewax row it is judged against:
``timelypy`` against every bytewax row, ``timelypy batch B`` against
bytewax's rows at batch B. The goals are judged by wall-clock medians, as
the issue asks; the CPU-time ratios are there because this runs on small
shared machines: another process competing for the cores stretches a run's
wall time but hardly its CPU time, so the CPU ratios move less from run to
run.

``benchmarks/runtime_profile.py`` profiles timelypy's side of these workloads.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _data, timelypy_side
from benchmarks._harness import (
    Stats,
    bytewax_available,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    log_progress,
    measure_interleaved,
    print_table,
)
from benchmarks.peers import bytewax_peer, plain, progress_floor
from benchmarks.peers.plain import is_even, triple
from timelypy.dataflow.operators.to_stream import CHUNK

logger = logging.getLogger("benchmarks.runtime_bench")

MAP_FILTER_RECORDS = 2_000_000
ROUND_TRIP_EPOCHS = 100_000
WORKLOADS = ("map_filter", "wordcount", "epoch_round_trip")
COLUMNS = [
    "workload",
    "candidate",
    "median",
    "throughput",
    "speed vs plain",
    "vs bytewax",
    "vs fastest bytewax",
    "cpu vs plain",
    "cpu vs bytewax",
    "spread",
]
GOAL_COLUMNS = ["workload", "goal", "measured", "by CPU time", "met"]

# The goals of the runtime-benchmark issue, of the small-epoch issue (fused
# pipelines >= 0.9x plain Python, the round trip >= bytewax's epochs/s) and of
# the two-processes issue (the round trip >= 1.5x bytewax's epochs/s):
# (workload, candidate, kind, target).
SPEED_VS_PLAIN, SPEED_VS_BYTEWAX, RATE = "speed vs plain", "vs bytewax", "rate"
GOALS: list[tuple[str, str, str, float]] = [
    ("map_filter", "timelypy", SPEED_VS_PLAIN, 0.9),
    ("map_filter", "timelypy", SPEED_VS_BYTEWAX, 3.0),
    ("wordcount", "timelypy", SPEED_VS_BYTEWAX, 3.0),
    ("epoch_round_trip", "timelypy", RATE, 100_000.0),
    ("epoch_round_trip", "timelypy", SPEED_VS_BYTEWAX, 1.0),
    ("epoch_round_trip", "timelypy", SPEED_VS_BYTEWAX, 1.5),
]


@dataclass
class Workload:
    """One workload: its candidates (``plain``, the limit, first) and its size."""

    name: str
    items: int
    unit: str
    candidates: dict[str, Callable[[], Any]]
    #: what the profile divides call counts by: (number, unit name)
    per: tuple[int, str] = (1, "run")
    #: wall-clock times per candidate
    stats: dict[str, Stats] = field(default_factory=dict)
    #: CPU times (``time.process_time``) of the same calls
    cpu: dict[str, Stats] = field(default_factory=dict)

    def measure(self, repeat: int, warmup: int = 1) -> None:
        """Time the candidates interleaved; record each timed call's CPU time as well.

        CPU time counts only this process's work, so it moves much less than
        wall time when other processes compete for the machine's cores.
        """
        cpu_times: dict[str, list[float]] = {name: [] for name in self.candidates}

        def cpu_timed(fn: Callable[[], Any], sink: list[float]) -> Callable[[], Any]:
            def run() -> Any:
                start = time.process_time()
                result = fn()
                sink.append(time.process_time() - start)
                return result

            return run

        timed = {name: cpu_timed(fn, cpu_times[name]) for name, fn in self.candidates.items()}
        self.stats = measure_interleaved(timed, repeat=repeat, warmup=warmup)
        self.cpu = {name: Stats(times[warmup:]) for name, times in cpu_times.items()}

    def check(self) -> None:
        """Raise if any candidate's result differs from plain Python's."""
        expected = self.stats["plain"].result
        for name, s in self.stats.items():
            if s.result != expected:
                size = len(s.result) if hasattr(s.result, "__len__") else "?"
                raise AssertionError(
                    f"{self.name}: {name!r} returned a different result from plain Python "
                    f"({size} items vs {len(expected)}); fix it before quoting its time"
                )

    def bytewax_name(self) -> str | None:
        """The first bytewax candidate's name (what ``vs bytewax`` is against), if bytewax runs."""
        return next((n for n in self.stats or self.candidates if n.startswith("bytewax")), None)

    def bytewax_names(self) -> list[str]:
        """Every bytewax candidate, in the table's order."""
        return [n for n in self.stats or self.candidates if n.startswith("bytewax")]

    def fastest_bytewax(self) -> str | None:
        """The bytewax candidate with the smallest median (wall clock), once measured."""
        names = [n for n in self.bytewax_names() if n in self.stats]
        return min(names, key=lambda n: self.stats[n].median) if names else None

    def legend(self) -> str | None:
        """One line naming the bytewax rows the ``vs bytewax`` columns are against."""
        first, fastest = self.bytewax_name(), self.fastest_bytewax()
        if first is None or fastest is None:
            return None
        if first == fastest:
            return f"{self.name}: 'vs bytewax' and 'vs fastest bytewax' are against '{first}'"
        return (
            f"{self.name}: 'vs bytewax' is against '{first}', "
            f"'vs fastest bytewax' against '{fastest}'"
        )

    def speed_vs(self, name: str, baseline: str, *, cpu: bool = False) -> float:
        """``baseline``'s median time / ``name``'s median time (> 1: ``name`` is faster).

        Wall-clock medians, or CPU-time medians with ``cpu=True``.
        """
        stats = self.cpu if cpu else self.stats
        return stats[baseline].median / stats[name].median

    def rows(self) -> list[list[str]]:
        """One table row per candidate."""
        bytewax, fastest = self.bytewax_name(), self.fastest_bytewax()
        return [
            [
                self.name,
                name,
                fmt_seconds(s.median),
                fmt_rate(s.throughput(self.items), self.unit),
                fmt_ratio(self.speed_vs(name, "plain")),
                fmt_ratio(self.speed_vs(name, bytewax)) if bytewax else "n/a",
                fmt_ratio(self.speed_vs(name, fastest)) if fastest else "n/a",
                fmt_ratio(self.speed_vs(name, "plain", cpu=True)),
                fmt_ratio(self.speed_vs(name, bytewax, cpu=True)) if bytewax else "n/a",
                f"{s.spread:.0%}",
            ]
            for name, s in self.stats.items()
        ]


def bytewax_label(operators: str, batch_size: int) -> str:
    """A bytewax row's name: its operators and its input batch size.

    >>> bytewax_label("op.map+op.filter", 10_000)
    'bytewax op.map+op.filter, batch 10,000'
    """
    return f"bytewax {operators}, batch {batch_size:,}"


def timelypy_label(batch_size: int) -> str:
    """The name of timelypy fed ``batch_size``-record slices.

    >>> timelypy_label(1_000)
    'timelypy batch 1,000'
    """
    return f"timelypy batch {batch_size:,}"


#: The bytewax rows of each workload: (operators, the peer function), per-item first.
MAP_FILTER_PEERS = (
    ("op.map+op.filter", bytewax_peer.map_filter),
    ("op.flat_map_batch", bytewax_peer.map_filter_batch),
)
WORDCOUNT_PEERS = (
    ("op.flat_map+op.count_final", bytewax_peer.wordcount),
    ("op.flat_map_batch+op.reduce_final", bytewax_peer.wordcount_batch),
)
#: The round trip's bytewax row: one record per batch, one batch per epoch.
ROUND_TRIP_BYTEWAX = "bytewax op.map, batch 1 (an epoch per record)"


def build_workloads(
    *,
    scale: int,
    bytewax: bool,
    batch_sizes: Sequence[int] = bytewax_peer.BATCH_SIZES,
    only: Sequence[str] = WORKLOADS,
) -> list[Workload]:
    """Load the inputs (divided by ``scale``) and bind every candidate to them.

    bytewax's rows (and ``timelypy batch B``) run at each of ``batch_sizes``;
    bytewax's per-item rows come first, at every size, then its batch API's.
    """
    workloads = []
    if "map_filter" in only:
        ints = list(range(MAP_FILTER_RECORDS // scale))
        mf: dict[str, Callable[[], Any]] = {
            "plain": lambda: plain.map_filter(ints, triple, is_even),
            "timelypy": lambda: timelypy_side.map_filter(ints, triple, is_even),
        }
        for size in batch_sizes:
            mf[timelypy_label(size)] = functools.partial(
                timelypy_side.map_filter, ints, triple, is_even, batch_size=size
            )
        if bytewax:
            for operators, peer in MAP_FILTER_PEERS:
                for size in batch_sizes:
                    mf[bytewax_label(operators, size)] = functools.partial(
                        peer, ints, triple, is_even, batch_size=size
                    )
        batches = math.ceil(len(ints) / CHUNK)
        workloads.append(Workload("map_filter", len(ints), "rec", mf, (batches, "batch")))
    if "wordcount" in only:
        lines = _data.load_lines()
        lines = lines[: len(lines) // scale]
        n_words = sum(len(line.split()) for line in lines)
        wc: dict[str, Callable[[], Any]] = {
            "plain": lambda: plain.wordcount(lines),
            "timelypy": lambda: timelypy_side.wordcount(lines),
        }
        for size in batch_sizes:
            wc[timelypy_label(size)] = functools.partial(
                timelypy_side.wordcount, lines, batch_size=size
            )
        if bytewax:
            for operators, count in WORDCOUNT_PEERS:
                for size in batch_sizes:
                    wc[bytewax_label(operators, size)] = functools.partial(
                        count, lines, batch_size=size
                    )
        batches = math.ceil(len(lines) / CHUNK)
        workloads.append(Workload("wordcount", n_words, "words", wc, (batches, "batch")))
    if "epoch_round_trip" in only:
        epochs = ROUND_TRIP_EPOCHS // scale
        rt: dict[str, Callable[[], Any]] = {
            "plain": lambda: plain.epoch_round_trip(epochs),
            "timelypy": lambda: timelypy_side.epoch_round_trip(epochs),
            "python floor": lambda: progress_floor.epoch_round_trip(epochs),
        }
        if bytewax:
            rt[ROUND_TRIP_BYTEWAX] = lambda: bytewax_peer.epoch_round_trip(epochs)
        workloads.append(Workload("epoch_round_trip", epochs, "epochs", rt, (epochs, "epoch")))
    return workloads


def judged_against(w: Workload, timely: str) -> list[str]:
    """The bytewax rows a timelypy candidate's goal is judged against.

    ``timelypy batch B`` against bytewax's rows at batch ``B`` (per-item
    operators and batch API); any other timelypy candidate against every
    bytewax row.
    """
    names = w.bytewax_names()
    if timely.startswith("timelypy batch "):
        size = timely.removeprefix("timelypy batch ")
        return [n for n in names if n.endswith(f", batch {size}")]
    return names


def goal_rows(workloads: Sequence[Workload]) -> list[list[str]]:
    """Each goal of the issue next to its measured figure (medians)."""
    by_name = {w.name: w for w in workloads}
    rows = []
    for name, candidate, kind, target in GOALS:
        w = by_name.get(name)
        if w is None:
            continue
        if kind == RATE:
            goal = f"{candidate} >= {fmt_rate(target, w.unit)}"
            measured = w.stats[candidate].throughput(w.items)
            by_cpu = fmt_rate(w.cpu[candidate].throughput(w.items), w.unit)
            shown = fmt_rate(measured, w.unit)
        elif kind == SPEED_VS_PLAIN:
            goal = f"{candidate} >= {fmt_ratio(target)} plain Python's speed"
            measured = w.speed_vs(candidate, "plain")
            by_cpu = fmt_ratio(w.speed_vs(candidate, "plain", cpu=True))
            shown = fmt_ratio(measured)
        else:
            if w.bytewax_name() is None:
                goal = f"{candidate} >= {fmt_ratio(target)} bytewax's speed"
                rows.append([name, goal, "bytewax not run", "n/a", "n/a"])
                continue
            # every timelypy candidate: its own batches, and each of bytewax's batch sizes
            for timely in (n for n in w.stats if n.startswith(candidate)):
                for bytewax in judged_against(w, timely):
                    measured = w.speed_vs(timely, bytewax)
                    by_cpu = fmt_ratio(w.speed_vs(timely, bytewax, cpu=True))
                    goal = f"{timely} >= {fmt_ratio(target)} {bytewax}'s speed"
                    rows.append([name, goal, fmt_ratio(measured), by_cpu, _met(measured, target)])
            continue
        rows.append([name, goal, shown, by_cpu, _met(measured, target)])
    return rows


def _met(measured: float, target: float) -> str:
    return "met" if measured >= target else "NOT met"


def machine() -> str:
    """One line describing the machine, its load now, and the software measured."""
    versions = [f"Python {platform.python_version()}"]
    if importlib.util.find_spec("bytewax") is not None:
        versions.append(f"bytewax {version('bytewax')}")
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{os.cpu_count()} CPUs ({platform.machine()}, {platform.system()}){load}, "
        f"{', '.join(versions)}, {datetime.date.today().isoformat()}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the runtime benchmark and print its tables."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.runtime_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="10x smaller inputs, 3 repeats")
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds (5; 3 quick)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--no-bytewax", action="store_true", help="skip the bytewax peers")
    parser.add_argument(
        "--batch-size",
        type=int,
        action="append",
        default=None,
        help="records per input batch for bytewax and 'timelypy batch B', repeatable (default: "
        + " and ".join(f"{size:,}" for size in bytewax_peer.BATCH_SIZES)
        + ")",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        action="append",
        help="run only this workload (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be >= 1")
    log_progress()
    bytewax = bytewax_available(not args.no_bytewax, logger)
    scale = 10 if args.quick else 1
    repeat = args.repeat or (3 if args.quick else 5)
    size = "quick (1/10 size)" if args.quick else "full size"
    batch_sizes = args.batch_size or list(bytewax_peer.BATCH_SIZES)
    if min(batch_sizes) < 1:
        parser.error("--batch-size must be >= 1")

    workloads = build_workloads(
        scale=scale, bytewax=bytewax, batch_sizes=batch_sizes, only=args.workload or WORKLOADS
    )
    rows: list[list[str]] = []
    for w in workloads:
        logger.info("measuring %s: %s", w.name, ", ".join(w.candidates))
        w.measure(repeat=repeat, warmup=1)
        w.check()
        rows += w.rows()

    print_report(
        f"runtime, {size}, 1 worker, median of {repeat} interleaved runs, {machine()}, "
        f"timelypy to_stream batch {CHUNK}, bytewax and 'timelypy batch B' at batches of "
        + " and ".join(f"{b:,}" for b in batch_sizes)
        + ("" if bytewax else "; bytewax not run"),
        rows,
        goal_rows(workloads),
        markdown=args.markdown,
        legend=[line for w in workloads if (line := w.legend())],
    )
    return 0


def print_report(
    title: str,
    rows: list[list[str]],
    goals: list[list[str]],
    *,
    markdown: bool,
    legend: Sequence[str] = (),
) -> None:
    """The title, the table of ``rows`` (:data:`COLUMNS`), ``legend``'s lines, the goals table."""
    print(title)
    print()
    print_table(rows, COLUMNS, markdown=markdown)
    print()
    if legend:
        for line in legend:
            print(f"- {line}")
        print()
    print("goals (medians of the runs above; met or not by the wall-clock medians)")
    print()
    print_table(goals, GOAL_COLUMNS, markdown=markdown)


if __name__ == "__main__":
    sys.exit(main())
