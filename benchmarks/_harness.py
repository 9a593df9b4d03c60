"""Timing and tabulating for benchmarks that compare candidates side by side.

The machines these run on are small (2 cores) and noisy, so a lone absolute
time means little. The rules this module supports:

- quote the **median** of several runs (``Stats.median``), with the minimum as
  a sanity bound;
- compare candidates measured **in the same run**, interleaved (A, B, C, A, B,
  C, ...) by ``measure_interleaved`` so that a slow phase of the machine hits
  every candidate alike;
- report **ratios** (``Stats.ratio_to``) against the plain-Python limit.

Before each timed call the harness runs ``gc.collect()`` so garbage left by
one candidate is not collected on another's clock; the collector stays enabled
during the call, since allocation-heavy work pays for it in real use too.

``format_table``/``print_table`` render the results as an aligned plain-text
table, or as Markdown for ``docs/performance.md``.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "Stats",
    "measure",
    "measure_interleaved",
    "format_table",
    "print_table",
    "peer_parser",
    "timed_call",
    "peer_run",
    "PeerRun",
    "fmt_seconds",
    "fmt_rate",
    "fmt_ratio",
]


@dataclass
class Stats:
    """Wall times of repeated runs of one candidate, in seconds.

    ``result`` holds what the last timed call returned, so the caller can check
    it for correctness without running the candidate again.

    >>> s = Stats([0.3, 0.1, 0.2])
    >>> s.median, s.min, s.max
    (0.2, 0.1, 0.3)
    >>> s.throughput(1000)
    5000.0
    >>> s.ratio_to(Stats([0.1]))
    2.0
    """

    times: list[float] = field(default_factory=list)
    result: Any = field(default=None, repr=False, compare=False)

    @property
    def median(self) -> float:
        """Median wall time: the figure to quote."""
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        """Fastest wall time."""
        return min(self.times)

    @property
    def max(self) -> float:
        """Slowest wall time."""
        return max(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median``: how noisy the runs were (0 is perfectly steady)."""
        return (self.max - self.min) / self.median if self.median else 0.0

    def throughput(self, items: float) -> float:
        """Items per second at the median time, for a run that processed ``items``."""
        return items / self.median

    def ratio_to(self, baseline: Stats) -> float:
        """How many times slower than ``baseline`` this is, by median (``> 1`` is slower)."""
        return self.median / baseline.median


def timed_call(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, CPU seconds, result)`` of one ``fn()``, after a ``gc.collect()``."""
    gc.collect()
    cpu_start = time.process_time()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu_start, result


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1) -> Stats:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeat`` times timed.

    >>> s = measure(lambda: sum(range(100)), repeat=3)
    >>> len(s.times), s.result
    (3, 4950)
    """
    if repeat < 1:
        raise ValueError(f"measure needs repeat >= 1, got {repeat}")
    for _ in range(warmup):
        fn()
    stats = Stats()
    for _ in range(repeat):
        elapsed, stats.result = _timed(fn)
        stats.times.append(elapsed)
    return stats


def measure_interleaved(
    candidates: Mapping[str, Callable[[], Any]], repeat: int = 5, warmup: int = 1
) -> dict[str, Stats]:
    """Time several candidates round-robin: A, B, C, A, B, C, ...

    Each candidate is first called ``warmup`` times (in the same round-robin
    order), then every round times each candidate once. Interleaving spreads
    the machine's slow and fast phases over all candidates, so their ratios
    are more trustworthy than those of back-to-back blocks.

    >>> stats = measure_interleaved({"a": lambda: 1, "b": lambda: 2}, repeat=2)
    >>> {name: (len(s.times), s.result) for name, s in stats.items()}
    {'a': (2, 1), 'b': (2, 2)}
    """
    if repeat < 1:
        raise ValueError(f"measure_interleaved needs repeat >= 1, got {repeat}")
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    stats = {name: Stats() for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            elapsed, stats[name].result = _timed(fn)
            stats[name].times.append(elapsed)
    return stats


def fmt_seconds(seconds: float) -> str:
    """Format a duration with a unit that keeps 3 significant digits.

    >>> fmt_seconds(1.5), fmt_seconds(0.0123), fmt_seconds(4.2e-6)
    ('1.50 s', '12.3 ms', '4.20 us')
    """
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if seconds >= scale or unit == "ns":
            return f"{_sig3(seconds / scale)} {unit}"
    raise AssertionError("unreachable")


def _sig3(value: float) -> str:
    """Three significant digits, keeping trailing zeros, no trailing point."""
    return f"{value:.0f}" if value >= 100 else f"{value:#.3g}"


def fmt_rate(per_second: float, unit: str = "rec") -> str:
    """Format a rate with a metric prefix.

    >>> fmt_rate(2_345_678), fmt_rate(51_200, "epochs"), fmt_rate(12.5)
    ('2.35 M rec/s', '51.2 k epochs/s', '12.5 rec/s')
    """
    for scale, prefix in ((1e9, "G "), (1e6, "M "), (1e3, "k ")):
        if per_second >= scale:
            return f"{_sig3(per_second / scale)} {prefix}{unit}/s"
    return f"{_sig3(per_second)} {unit}/s"


def fmt_ratio(ratio: float) -> str:
    """Format a slowdown ratio (time / baseline time).

    >>> fmt_ratio(1.0), fmt_ratio(2.345), fmt_ratio(123.4)
    ('1.00x', '2.35x', '123x')
    """
    return f"{_sig3(ratio)}x"


def _cells(row: Mapping[str, Any] | Sequence[Any], columns: Sequence[str]) -> list[str]:
    if isinstance(row, Mapping):
        return [str(row.get(c, "")) for c in columns]
    if len(row) != len(columns):
        raise ValueError(f"row {row!r} has {len(row)} cells for {len(columns)} columns")
    return [str(v) for v in row]


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "-+.")


def format_table(
    rows: Sequence[Mapping[str, Any] | Sequence[Any]],
    columns: Sequence[str],
    *,
    markdown: bool = False,
) -> str:
    """Render rows (mappings keyed by column, or sequences in column order).

    Columns whose cells all start like numbers are right-aligned.

    >>> print(format_table([("map", "1.5 s"), ("wordcount", "12 s")], ["workload", "median"]))
    workload   median
    ---------  ------
    map         1.5 s
    wordcount    12 s
    >>> print(format_table([{"a": 1, "b": "x"}], ["a", "b"], markdown=True))
    | a | b |
    |--:|---|
    | 1 | x |
    """
    body = [_cells(r, columns) for r in rows]
    right = [all(_numeric(r[i]) for r in body) and bool(body) for i in range(len(columns))]
    if markdown:
        rule = ["--:" if r else "---" for r in right]
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(rule) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        out = [
            cell.rjust(w) if r else cell.ljust(w)
            for cell, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(out).rstrip()

    header = line(columns)
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([header, rule, *(line(r) for r in body)])


def print_table(
    rows: Sequence[Mapping[str, Any] | Sequence[Any]],
    columns: Sequence[str],
    *,
    markdown: bool = False,
    file: TextIO | None = None,
) -> None:
    """Print ``format_table(rows, columns, markdown=markdown)``."""
    print(format_table(rows, columns, markdown=markdown), file=file)


def log_progress() -> None:
    """Print the ``benchmarks`` loggers' progress notes on stderr as ``# message`` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("# %(message)s"))
    progress = logging.getLogger("benchmarks")
    progress.addHandler(handler)
    progress.setLevel(logging.INFO)


def bytewax_available(wanted: bool, logger: logging.Logger) -> bool:
    """Whether to run the bytewax peers: ``wanted`` and installed (else a warning says how)."""
    if wanted and importlib.util.find_spec("bytewax") is None:
        logger.warning(
            "bytewax is not installed, so the bytewax peers are skipped; install the "
            "benchmark extras with `pip install -e '.[bench]'` to compare with it"
        )
        return False
    return wanted


@dataclass(frozen=True)
class PeerRun:
    """The common settings of a peer benchmark's command line (see :func:`peer_parser`)."""

    bytewax: bool
    scale: int
    repeat: int
    size: str


def peer_parser(
    module: str,
    doc: str,
    quick_help: str,
    choice: str,
    choices: Sequence[str],
    profile_help: str,
) -> Any:
    """An ``argparse`` parser with the options every peer benchmark takes.

    ``--quick`` (``quick_help``), ``--repeat``, ``--markdown``, ``--no-bytewax``,
    ``--CHOICE`` (repeatable, one of ``choices``), ``--profile``, ``--top``
    and the hidden ``--scale``; add the benchmark's own options to it.
    """
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds (5; 3 quick)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--no-bytewax", action="store_true", help="skip the bytewax peers")
    parser.add_argument(
        f"--{choice}", choices=list(choices), action="append", help="run only this (repeatable)"
    )
    parser.add_argument("--profile", action="store_true", help=profile_help)
    parser.add_argument("--top", type=int, default=15, help="functions per profile (%(default)s)")
    parser.add_argument("--scale", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def peer_run(parser: Any, args: Any, logger: logging.Logger) -> PeerRun:
    """Check ``args`` of a :func:`peer_parser` parser; start progress notes; the settings."""
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be >= 1")
    log_progress()
    bytewax = bytewax_available(not args.no_bytewax and not args.profile, logger)
    scale = args.scale or (10 if args.quick else 1)
    repeat = args.repeat or (3 if args.quick else 5)
    return PeerRun(bytewax, scale, repeat, "full size" if scale == 1 else f"1/{scale} size")
