"""Run every benchmark in ``benchmarks/`` and print one combined table.

    python -m benchmarks.run_all [--quick] [--repeat N] [--markdown]
                                 [--no-bytewax] [--no-spark] [--no-cluster]

Each benchmark runs in its own Python process (a fresh heap, no JVM or
bytewax state left over from another), in this order:

- ``progress_bench`` (``int`` and ``Product`` timestamps): the cost of
  ``Tracker.propagate_all`` as graphs grow, and its growth exponent;
- ``codec_bench``: the wire codecs against plain msgpack;
- ``runtime_bench``: timelypy's runtime against plain Python and bytewax;
- ``flow_bench``: the epoch layer ``timelypy.flow`` against plain Python and
  bytewax (``--no-cluster`` leaves out its 2-thread and 2-process rows);
- ``cluster_bench``: several processes over ZeroMQ against their limits,
  unless ``--no-cluster`` is given;
- ``spark_bench``: wordcount with timelypy workers as Spark tasks against
  PySpark RDD and DataFrame on the same session, when PySpark is installed
  and ``--no-spark`` is not given.

``--quick`` is passed to every one (smaller inputs, fewer rounds);
``--repeat`` to those that take it. ``peers_bench`` (the peers alone) is not
run here. Each benchmark's own tables are printed as it finishes, then the
combined table: one row per candidate with its throughput and its **speed vs
limit**, the limit's median time / the candidate's median time (1.00x is as
fast as the limit, higher is faster), the limit being named in the last
column. The benchmarks that report a slowdown (``codec_bench``, candidate time
/ limit time) are inverted to that convention. The progress rows quote the
largest graph and the fitted growth exponent instead, and the cluster rows
their own ratio, whose meaning differs by measurement (its legend line says
how). The runtime and flow goals come last.

A benchmark that fails is reported in the table, the others still run, and
the exit status is 1.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fmt_rate, fmt_ratio, format_table

REPO_ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ["benchmark", "case", "candidate", "throughput", "speed vs limit", "limit, or note"]

Table = list[dict[str, str]]
Row = list[str]

_PROGRESS_ROW = re.compile(r"^(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")
_PROGRESS_FIT = re.compile(r"^(\w+)\s+growth exponent k = ([\d.]+)")
_RATIO = re.compile(r"^([\d.]+)x$")


@dataclass
class Benchmark:
    """One benchmark run: its command and how to turn its output into combined rows."""

    name: str
    args: list[str]
    summarize: Callable[[str, str], list[Row]]


def markdown_tables(text: str) -> list[Table]:
    r"""Parse every Markdown table in ``text`` into a list of ``{column: cell}`` rows.

    >>> markdown_tables("x\n| a | b |\n|--:|---|\n| 1 | y |\n")
    [[{'a': '1', 'b': 'y'}]]
    """
    tables: list[Table] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if len(block) >= 2:
            header = block[0]
            tables.append([dict(zip(header, row, strict=True)) for row in block[2:]])
        block = []
    return tables


def rerender(text: str, markdown: bool) -> str:
    """Return ``text`` with its Markdown tables rendered as plain text unless ``markdown``."""
    if markdown:
        return text
    out: list[str] = []
    tables = iter(markdown_tables(text))
    in_table = False
    for line in text.splitlines():
        if line.startswith("|"):
            if not in_table:
                table = next(tables)
                columns = [c.strip() for c in line.strip().strip("|").split("|")]
                out.append(format_table(table, columns))
                in_table = True
            continue
        in_table = False
        out.append(line)
    return "\n".join(out)


def _speed(slowdown: str) -> str:
    """Invert a formatted slowdown ratio (``"2.00x"``) into a speed (``"0.500x"``)."""
    match = _RATIO.match(slowdown)
    return fmt_ratio(1.0 / float(match.group(1))) if match else slowdown


def summarize_progress(label: str) -> Callable[[str, str], list[Row]]:
    """Rows for progress_bench: the largest graph of each shape and the growth exponent."""

    def summarize(name: str, text: str) -> list[Row]:
        largest: dict[str, tuple[int, float]] = {}
        fits: dict[str, str] = {}
        for line in text.splitlines():
            if m := _PROGRESS_ROW.match(line):
                shape, nodes, per_update = m.group(1), int(m.group(2)), float(m.group(3))
                if nodes >= largest.get(shape, (0, 0.0))[0]:
                    largest[shape] = (nodes, per_update)
            elif m := _PROGRESS_FIT.match(line):
                fits[m.group(1)] = m.group(2)
        return [
            [
                f"{name} ({label})",
                f"{shape}, {nodes:,} nodes",
                "Tracker.propagate_all",
                fmt_rate(1e6 / per_update, "updates"),
                "",
                f"growth exponent k = {fits.get(shape, '?')} (1.00 = linear)",
            ]
            for shape, (nodes, per_update) in largest.items()
        ]

    return summarize


def summarize_codec(name: str, text: str) -> list[Row]:
    """Rows for codec_bench: throughput and speed relative to plain msgpack."""
    (table,) = markdown_tables(text)
    return [
        [name, r["batch"], r["candidate"], r["throughput"], _speed(r["ratio"]), "plain msgpack"]
        for r in table
    ]


def summarize_runtime(name: str, text: str) -> list[Row]:
    """Rows for runtime_bench: its main table (already a speed relative to plain Python)."""
    table = markdown_tables(text)[0]  # flow_bench's main table has the same columns
    return [
        [name, r["workload"], r["candidate"], r["throughput"], r["speed vs plain"], "plain Python"]
        for r in table
    ]


def summarize_cluster(name: str, text: str) -> list[Row]:
    """Rows for cluster_bench: its ratios keep their own meaning (see its legend line)."""
    (table,) = markdown_tables(text)
    return [
        [
            name,
            r["measurement"],
            r["candidate"],
            r["rate"],
            "",
            f"ratio {r['ratio']}" + (f", goal {r['goal']}" if r["goal"] else ""),
        ]
        for r in table
    ]


def summarize_spark(name: str, text: str) -> list[Row]:
    """Rows for spark_bench: each candidate's speed relative to PySpark's, side by side."""
    rows: list[Row] = []
    for table in markdown_tables(text):
        for r in table:
            peer = "vs DataFrame" if "vs DataFrame" in r else "vs mapInArrow"
            rate = r.get("words/s") or r.get("rows/s", "")
            rows.append(
                [
                    name,
                    r["workload"],
                    r["candidate"],
                    rate,
                    "",
                    f"{r[peer]} the speed of PySpark {peer[3:]}",
                ]
            )
    return rows


def summarize_peers(name: str, text: str) -> list[Row]:
    """Rows for peers_bench: the PySpark peers only (the others are in runtime_bench)."""
    (table,) = markdown_tables(text)
    return [
        [name, r["workload"], r["peer"], r["throughput"], _speed(r["vs plain"]), "plain Python"]
        for r in table
        if r["peer"].startswith("pyspark")
    ]


def benchmarks(args: argparse.Namespace) -> list[Benchmark]:
    """The benchmarks to run, with the options passed through."""
    quick = ["--quick"] if args.quick else []
    repeat = ["--repeat", str(args.repeat)] if args.repeat else []
    runs = [
        Benchmark("progress_bench", [*quick], summarize_progress("int")),
        Benchmark("progress_bench", [*quick, "--product"], summarize_progress("Product")),
        Benchmark("codec_bench", [*quick, *repeat, "--markdown"], summarize_codec),
        Benchmark(
            "runtime_bench",
            [*quick, *repeat, "--markdown", *(["--no-bytewax"] if args.no_bytewax else [])],
            summarize_runtime,
        ),
        Benchmark(
            "flow_bench",
            [
                *quick,
                *repeat,
                "--markdown",
                *(["--no-bytewax"] if args.no_bytewax else []),
                *(["--no-cluster"] if args.no_cluster else []),
            ],
            summarize_runtime,
        ),
    ]
    if not args.no_cluster:
        runs.append(Benchmark("cluster_bench", [*quick, *repeat, "--markdown"], summarize_cluster))
    if not args.no_spark:
        if importlib.util.find_spec("pyspark") is None:
            print(
                "# run_all: PySpark is not installed, so the PySpark peers are skipped "
                "(install them with `pip install -e '.[spark]'`)",
                file=sys.stderr,
            )
        else:
            runs.append(Benchmark("spark_bench", [*quick, *repeat, "--markdown"], summarize_spark))
    return runs


def run(bench: Benchmark) -> tuple[int, str]:
    """Run one benchmark as ``python -m benchmarks.<name>``; return its status and stdout.

    Its stderr (progress notes) goes straight to ours.
    """
    command = [sys.executable, "-m", f"benchmarks.{bench.name}", *bench.args]
    print(f"# run_all: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, check=False)
    return done.returncode, done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark; print their tables, the combined table and the goals."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run_all", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds, where taken")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--no-bytewax", action="store_true", help="skip the bytewax peers")
    parser.add_argument("--no-spark", action="store_true", help="skip spark_bench")
    parser.add_argument(
        "--no-cluster", action="store_true", help="skip cluster_bench (several processes)"
    )
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be >= 1")

    started = datetime.datetime.now().isoformat(timespec="minutes")
    load = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "unknown"
    heading = "## " if args.markdown else "== "
    rows: list[Row] = []
    goals: list[tuple[str, str]] = []
    failed = False
    for bench in benchmarks(args):
        status, text = run(bench)
        title = " ".join([bench.name, *bench.args])
        print(f"{heading}{title}\n")
        print(rerender(text.rstrip(), args.markdown))
        print()
        if status != 0:
            failed = True
            rows.append([bench.name, "", "", f"failed (exit {status})", "", "see its output"])
            continue
        try:
            rows += bench.summarize(bench.name, text)
        except (ValueError, KeyError, StopIteration) as exc:
            failed = True
            rows.append([bench.name, "", "", f"unreadable output ({exc})", "", ""])
            continue
        if bench.name in ("runtime_bench", "flow_bench") and "\ngoals (" in text:
            goals.append((bench.name, text[text.find("\ngoals (") + 1 :]))

    print(
        f"{heading}combined: {'quick (1/10 size)' if args.quick else 'full size'}, "
        f"started {started} (load average then {load}), {os.cpu_count()} CPUs "
        f"({platform.machine()}), Python {platform.python_version()}\n"
    )
    print(format_table(rows, COLUMNS, markdown=args.markdown))
    for name, text in goals:
        print()
        print(f"{name} {rerender(text.rstrip(), args.markdown)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
