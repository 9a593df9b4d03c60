"""One flow through the file, Parquet and demo connectors, to run on any topology and compare.

:func:`write_inputs` lays out a directory of text files and a CSV file;
:func:`build` reads them (``DirSource``, ``CSVSource``) with three
``RandomMetricSource`` metrics, and writes word counts to a ``DirSink``
and a ``ParquetSink``, each name's total quantity to a ``FileSink``, and
each metric's count of values and their bounds to a ``CaptureSink``.
:func:`outputs` reads back what the sinks hold, in an order that does not
depend on the number of workers, for the tests to compare runs with.
"""

from __future__ import annotations

import datetime
import functools
import random
from pathlib import Path
from typing import Any

import timelypy.flow.operators as op
from timelypy.flow.connectors.demo import RandomMetricSource
from timelypy.flow.connectors.files import CSVSource, DirSink, DirSource, FileSink
from timelypy.flow.connectors.parquet import ParquetSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.outputs import CaptureSink

WORDS = ["apple", "fig", "kiwi", "date", "lime", "pear", "plum"]
METRIC_VALUES = 40


def write_inputs(root: Path) -> None:
    """Three text files of words and a CSV of (name, qty) rows under ``root``."""
    (root / "text").mkdir(parents=True)
    for f in range(3):
        lines = [" ".join(WORDS[(f + i + j) % len(WORDS)] for j in range(4)) for i in range(150)]
        (root / "text" / f"doc{f}.txt").write_text("".join(line + "\n" for line in lines))
    rows = "".join(f"{WORDS[i % len(WORDS)]},{i}\n" for i in range(500))
    (root / "rows.csv").write_text("name,qty\n" + rows)


def _bounds(acc: tuple[int, float, float] | None, value: float) -> tuple[int, float, float]:
    if acc is None:
        return (1, value, value)
    return (acc[0] + 1, min(acc[1], value), max(acc[2], value))


def _digits(seed: int) -> functools.partial[int]:
    # seeded, so that every run draws the same values and the bounds compare exactly
    return functools.partial(random.Random(seed).randrange, 0, 10)


def build(root: Path, out: Path) -> Dataflow:
    """The flow, reading under ``root`` and writing under ``out``."""
    flow = Dataflow("conn")
    lines = op.input("lines", flow, DirSource(root / "text", "*.txt"))
    words = op.flat_map("split", lines, str.split)
    counts = op.count_final("count", words, lambda w: w)
    op.output("dir", op.map_value("text", counts, lambda n: f"{n}"), DirSink(out / "dir", 3))
    op.output(
        "parquet",
        op.map("row", counts, lambda kv: (kv[0], {"word": kv[0], "n": kv[1]})),
        ParquetSink(out / "ds", 2),
    )
    rows = op.input("rows", flow, CSVSource(root / "rows.csv"))
    qty = op.reduce_final(
        "qty", op.map("pair", rows, lambda r: (r["name"], int(r["qty"]))), lambda a, b: a + b
    )
    op.output("file", op.map("line", qty, lambda kv: ("", f"{kv[0]} {kv[1]}")), FileSink(out / "q"))
    every = datetime.timedelta(milliseconds=1)
    metrics = [
        op.input(f"m{i}", flow, RandomMetricSource(f"m{i}", every, METRIC_VALUES, _digits(i)))
        for i in range(3)
    ]
    bounds = op.fold_final("bounds", op.merge("metrics", *metrics), lambda: None, _bounds)
    op.output("captured", bounds, CaptureSink())
    return flow


def outputs(out: Path, captured: Any) -> dict[str, Any]:
    """What the sinks hold under ``out``, and the captured items, independent of worker count."""
    import pyarrow.parquet as pq

    dir_lines = sorted(
        (path.name, line)
        for path in (out / "dir").iterdir()
        for line in path.read_text().splitlines()
    )
    table = pq.read_table(out / "ds")
    parquet = sorted(
        zip(table.column("word").to_pylist(), table.column("n").to_pylist(), strict=True)
    )
    bounds = sorted(item for _, item in captured)
    return {
        "dir": dir_lines,
        "parquet": parquet,
        "file": sorted((out / "q").read_text().splitlines()),
        "metrics": bounds,
    }


def expected_counts() -> list[tuple[str, int]]:
    """The word counts :func:`write_inputs`' files give."""
    counts: dict[str, int] = {}
    for f in range(3):
        for i in range(150):
            for j in range(4):
                word = WORDS[(f + i + j) % len(WORDS)]
                counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items())
