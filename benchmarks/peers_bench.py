"""Measure the peers side by side and print one table.

    python -m benchmarks.peers_bench [--quick] [--no-spark] [--no-bytewax] [--markdown]

Workloads (full size; ``--quick`` uses a 10x smaller slice and 3 repeats):

- ``map_filter``: ``list(range(2_000_000))`` through ``triple`` (``x * 3``)
  then ``is_even`` (``y % 2 == 0``); throughput counts input records.
- ``wordcount``: the 200,000-line, 2,000,000-word corpus from
  ``benchmarks._data``; throughput counts words. Plain Python and bytewax get
  the lines in memory; PySpark reads the same lines from the part files.
- ``epoch_round_trip``: 100,000 epochs of one record each through
  ``add_one`` (``x + 1``) to the output; throughput counts epochs.

bytewax is measured at two input batch sizes, 1,000 and 10,000 records
(``--batch-size`` to choose), each written two ways: with the per-item
operators (``op.map``/``op.filter``, ``op.flat_map`` + ``op.count_final``)
and with bytewax's own batch API (``op.flat_map_batch``, one Python call
per batch; then ``op.reduce_final`` of per-batch counts for the wordcount).
Every bytewax row names its operators and batch size.

For each workload the candidates are timed interleaved (one run of each in
turn, ``--repeat`` rounds after one untimed warm-up round), every candidate's
result is checked against the plain-Python result, and the table quotes the
median time, the throughput at that median, the ratio to plain Python's median
(the limit; ``> 1`` is slower) and the spread, ``(max - min) / median``. The
Spark session is started once, before and outside all timings.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _data
from benchmarks._harness import (
    Stats,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    log_progress,
    measure_interleaved,
    print_table,
)
from benchmarks.peers import bytewax_peer, plain, pyspark_peer
from benchmarks.peers.plain import is_even, triple

logger = logging.getLogger("benchmarks.peers_bench")

MAP_FILTER_RECORDS = 2_000_000
ROUND_TRIP_EPOCHS = 100_000
COLUMNS = ["workload", "peer", "median", "throughput", "vs plain", "spread"]


@dataclass
class Workload:
    """One workload: its candidates (the first is the plain-Python limit) and its size."""

    name: str
    items: int
    unit: str
    candidates: dict[str, Callable[[], Any]]


def _check(workload: Workload, stats: dict[str, Stats]) -> None:
    """Raise if any candidate's result differs from the plain-Python one."""
    names = list(stats)
    expected = stats[names[0]].result
    for name in names[1:]:
        got = stats[name].result
        if got != expected:
            size = len(got) if hasattr(got, "__len__") else "?"
            raise AssertionError(
                f"{workload.name}: peer {name!r} returned a different result from "
                f"{names[0]!r} ({size} items vs {len(expected)}); fix the peer before timing it"
            )


def _rows(workload: Workload, stats: dict[str, Stats]) -> list[list[str]]:
    limit = next(iter(stats.values()))
    return [
        [
            workload.name,
            name,
            fmt_seconds(s.median),
            fmt_rate(s.throughput(workload.items), workload.unit),
            fmt_ratio(s.ratio_to(limit)),
            f"{s.spread:.0%}",
        ]
        for name, s in stats.items()
    ]


def _write_lines(directory: Path, lines: Sequence[str]) -> list[Path]:
    """Write ``lines`` as two part files (the first half, the second half) for Spark."""
    half = len(lines) // 2
    return _data.write_parts(directory, [lines[:half], lines[half:]])


def _require(module: str, flag: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise SystemExit(
            f"peers_bench: {module} is not installed; install it with "
            f"`pip install -e '.[{extra}]'`, or leave its peers out with {flag}"
        )


def build_workloads(
    *, scale: int, spark: Any, bytewax: bool, batch_sizes: Sequence[int], tmp: Path
) -> list[Workload]:
    """Load the inputs (divided by ``scale``) and bind every candidate to them."""
    ints = list(range(MAP_FILTER_RECORDS // scale))
    lines = _data.load_lines()
    if scale == 1:
        paths = _data.part_paths()
    else:
        lines = lines[: len(lines) // scale]
        paths = _write_lines(tmp, lines)
    n_words = sum(len(line.split()) for line in lines)
    epochs = ROUND_TRIP_EPOCHS // scale

    map_filter: dict[str, Callable[[], Any]] = {
        "plain": lambda: plain.map_filter(ints, triple, is_even),
    }
    wordcount: dict[str, Callable[[], Any]] = {"plain": lambda: plain.wordcount(lines)}
    round_trip: dict[str, Callable[[], Any]] = {"plain": lambda: plain.epoch_round_trip(epochs)}
    if bytewax:
        for size in batch_sizes:
            batch = f"batch {size:,}"
            map_filter[f"bytewax op.map+op.filter, {batch}"] = functools.partial(
                bytewax_peer.map_filter, ints, triple, is_even, batch_size=size
            )
            map_filter[f"bytewax op.flat_map_batch, {batch}"] = functools.partial(
                bytewax_peer.map_filter_batch, ints, triple, is_even, batch_size=size
            )
            wordcount[f"bytewax op.flat_map+op.count_final, {batch}"] = functools.partial(
                bytewax_peer.wordcount, lines, batch_size=size
            )
            wordcount[f"bytewax op.flat_map_batch+op.reduce_final, {batch}"] = functools.partial(
                bytewax_peer.wordcount_batch, lines, batch_size=size
            )
        round_trip["bytewax op.map, batch 1 (an epoch per record)"] = lambda: (
            bytewax_peer.epoch_round_trip(epochs)
        )
    if spark is not None:
        wordcount["pyspark rdd"] = lambda: pyspark_peer.rdd_wordcount(spark, paths)
        wordcount["pyspark dataframe"] = lambda: pyspark_peer.dataframe_wordcount(spark, paths)
    return [
        Workload("map_filter", len(ints), "rec", map_filter),
        Workload("wordcount", n_words, "words", wordcount),
        Workload("epoch_round_trip", epochs, "epochs", round_trip),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the peers benchmark and print its table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="10x smaller inputs, 3 repeats")
    parser.add_argument("--no-spark", action="store_true", help="skip the PySpark peers")
    parser.add_argument("--no-bytewax", action="store_true", help="skip the bytewax peers")
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds (5; 3 quick)")
    parser.add_argument(
        "--batch-size",
        type=int,
        action="append",
        default=None,
        help="records per bytewax input batch, repeatable (default: "
        + " and ".join(f"{size:,}" for size in bytewax_peer.BATCH_SIZES)
        + ")",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (%(default)s)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    log_progress()  # this script's and _data's progress notes

    if not args.no_bytewax:
        _require("bytewax", "--no-bytewax", "bench")
    if not args.no_spark:
        _require("pyspark", "--no-spark", "spark")
    scale = 10 if args.quick else 1
    repeat = args.repeat or (3 if args.quick else 5)
    batch_sizes = args.batch_size or list(bytewax_peer.BATCH_SIZES)

    spark = None
    with tempfile.TemporaryDirectory(prefix="timelypy-peers-") as tmp:
        try:
            if not args.no_spark:
                logger.info("starting Spark (%s), not timed", args.master)
                spark = pyspark_peer.make_session(args.master)
            workloads = build_workloads(
                scale=scale,
                spark=spark,
                bytewax=not args.no_bytewax,
                batch_sizes=batch_sizes,
                tmp=Path(tmp),
            )
            rows: list[list[str]] = []
            for w in workloads:
                logger.info("measuring %s: %s", w.name, ", ".join(w.candidates))
                stats = measure_interleaved(w.candidates, repeat=repeat, warmup=1)
                _check(w, stats)
                rows += _rows(w, stats)
        finally:
            if spark is not None:
                spark.stop()

    versions = [f"Python {platform.python_version()}"]
    for dist in ("bytewax", "pyspark"):
        if importlib.util.find_spec(dist) is not None:
            versions.append(f"{dist} {version(dist)}")
    print(
        f"peers, {'quick (1/10 size)' if args.quick else 'full size'}, median of {repeat} "
        f"interleaved runs, {os.cpu_count()} CPUs, {', '.join(versions)}, "
        f"bytewax batches of {' and '.join(f'{size:,}' for size in batch_sizes)} records "
        f"(each row names its batch size and operators), Spark {args.master}"
    )
    print()
    print_table(rows, COLUMNS, markdown=args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
