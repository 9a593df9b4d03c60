"""Connectors against their direct clients and against bytewax 0.21.1, in one run.

    python -m benchmarks.connector_bench [--rows N] [--repeat N] [--only WORKLOADS] [--markdown]

Each candidate does the same work on the same data; they are timed
interleaved (one untimed warm-up round, then ``--repeat`` rounds) and each
result is checked before any time is quoted. Quote the ratios.

- **postgres**: ``N`` rows ``(k text, v int)`` into a fresh table. ``direct``:
  psycopg's ``COPY`` of every row in one transaction (the fastest a client
  can write); ``timelypy``: a flow (``TestingSource`` of 1,000-row batches,
  one epoch) into ``PostgresSink(mode="append")``, whose epoch is one
  ``COPY`` in one transaction with its row in ``timelypy_sink_epochs``. Checked: the table's
  row count and sum.
- **redis**: ``N`` entries into a fresh stream. ``direct``: redis-py
  pipelines of 1,000 ``XADD``; ``timelypy``: ``RedisStreamSink``. Checked:
  the stream's length.
- **files**: the corpus's lines (``benchmarks._data``) copied from a file
  to a file. ``timelypy``: ``FileSource`` -> ``op.map`` to ``(key, line)``
  -> ``FileSink``; ``bytewax``: its own ``FileSource`` and ``FileSink``,
  the same steps. Checked: the output's lines.
- **csv**: a CSV of ``N`` rows read into a count of rows per name.
  ``timelypy`` and ``bytewax``: each its own ``CSVSource``, ``count_final``
  by the name column. Checked: the counts.

Every file and CSV candidate runs with its source's batch at 1,000
(bytewax's default) and at 10,000, and each row names its operators and
batch size. bytewax also runs in its batch API at 10,000: the file copy's
``op.flat_map_batch`` (one call per batch), and for the CSV an
``op.flat_map_batch`` counting each batch's names with one ``Counter``,
then ``op.reduce_final(add)``. ``vs peer`` is against the direct client,
or for files and CSV against bytewax's per-item operators at 1,000, the
form the goal was set against; ``vs fastest bytewax`` against the fastest
bytewax row of the workload.

The servers are started here as the tests start theirs (``tests/servers``);
a machine without them skips their rows. Goals (issue 38): the sinks >=
0.8x their direct client; files and CSV >= 2x bytewax's per-item
operators at batch 1,000.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from operator import add
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _data
from benchmarks._harness import Stats, fmt_ratio, print_table, timed_call
from benchmarks.flow_bench import bytewax_label
from benchmarks.runtime_bench import machine

#: table numbers, unique in this process (several workloads share a server)
_tables = itertools.count(0, 1000)


def timelypy_label(operators: str, batch_size: int) -> str:
    """A timelypy row's name: its operators and its input batch size.

    >>> timelypy_label("op.map", 1000)
    'timelypy op.map, batch 1,000'
    """
    return f"timelypy {operators}, batch {batch_size:,}"


#: workload -> (its peer, the goal against it, the candidate the goal judges)
GOALS = {
    "postgres": ("direct", 0.8, "timelypy"),
    "redis": ("direct", 0.8, "timelypy"),
    "files": (bytewax_label("op.map", 1000), 2.0, timelypy_label("op.map", 1000)),
    "csv": (
        bytewax_label("op.count_final", 1000),
        2.0,
        timelypy_label("op.count_final", 1000),
    ),
}


def _graph(source: Any, steps: Callable[[Any, Any], Any], sink: Any, name: str) -> None:
    import timelypy.flow.operators as op
    from timelypy.flow.dataflow import Dataflow
    from timelypy.flow.testing import run_main

    flow = Dataflow(name)
    op.output("out", steps(op, op.input("inp", flow, source)), sink)
    run_main(flow)


def _bytewax(source: Any, steps: Callable[[Any, Any], Any], sink: Any, name: str) -> None:
    from bytewax import operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import run_main

    flow = Dataflow(name)
    op.output("out", steps(op, op.input("inp", flow, source)), sink)
    run_main(flow)


def postgres_candidates(dsn: str, rows: int) -> dict[str, Callable[[], Any]]:
    import psycopg

    from timelypy.flow.connectors.postgres import PostgresSink
    from timelypy.flow.testing import TestingSource

    data = [(f"k{i % 1000}", i) for i in range(rows)]
    items = [(k, {"k": k, "v": v}) for k, v in data]
    counter = itertools.count(next(_tables))

    def fresh() -> str:
        table = f"bench_{next(counter)}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (k text, v int)")
        return table

    def check(table: str) -> tuple[int, int]:
        with psycopg.connect(dsn) as conn:
            count, total = conn.execute(f"SELECT count(*), sum(v) FROM {table}").fetchone()
        return count, total

    def direct() -> tuple[int, int]:
        table = fresh()
        with psycopg.connect(dsn) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY {table} (k, v) FROM STDIN") as copy:
                for record in data:
                    copy.write_row(record)
        return check(table)

    def timelypy() -> tuple[int, int]:
        table = fresh()
        _graph(TestingSource(items, 1000), lambda op, s: s, PostgresSink(dsn, table), "pg")
        return check(table)

    return {"direct": direct, "timelypy": timelypy}


def redis_candidates(address: dict[str, Any], rows: int) -> dict[str, Callable[[], Any]]:
    import redis

    from timelypy.flow.connectors.redis_streams import RedisStreamSink
    from timelypy.flow.testing import TestingSource

    client = redis.Redis(**address)
    entries = [{"n": str(i)} for i in range(rows)]
    counter = iter(range(10**9))

    def direct() -> int:
        key = f"bench:{next(counter)}"
        pipe = client.pipeline(transaction=False)
        for start in range(0, rows, 1000):
            for fields in entries[start : start + 1000]:
                pipe.xadd(key, fields)
            pipe.execute()
        return int(client.xlen(key))

    def timelypy() -> int:
        key = f"bench:{next(counter)}"
        items = [("k", fields) for fields in entries]
        _graph(TestingSource(items, 1000), lambda op, s: s, RedisStreamSink(address, [key]), "r")
        return int(client.xlen(key))

    return {"direct": direct, "timelypy": timelypy}


#: The input batch sizes every file candidate runs at: bytewax's default, and ten times it.
BATCH_SIZES = (1000, 10_000)


def files_candidates(work: Path, bytewax: bool) -> dict[str, Callable[[], Any]]:
    """The file copy: each engine's ``FileSource`` -> ``(key, line)`` -> ``FileSink``.

    At both of ``BATCH_SIZES``; bytewax also in its batch API
    (``op.flat_map_batch``: one call per batch), at 10,000.
    """
    from timelypy.flow.connectors import files

    lines = _data.load_lines()
    source = work / "corpus.txt"
    source.write_text("".join(line + "\n" for line in lines))
    counter = iter(range(10**9))

    def keyed(op: Any, s: Any) -> Any:
        return op.map("key", s, _keyed_line)

    def keyed_batch(op: Any, s: Any) -> Any:
        return op.flat_map_batch("key", s, _keyed_lines)

    def read(path: Path) -> int:
        return sum(1 for _ in path.open())

    def timelypy_at(size: int) -> Callable[[], int]:
        def timelypy() -> int:
            out = work / f"out-{next(counter)}.txt"
            _graph(files.FileSource(source, batch_size=size), keyed, files.FileSink(out), "files")
            return read(out)

        return timelypy

    cands: dict[str, Callable[[], Any]] = {}
    for size in BATCH_SIZES:
        cands[timelypy_label("op.map", size)] = timelypy_at(size)
    if bytewax:
        from bytewax.connectors import files as bw_files

        def bytewax_at(size: int, steps: Callable[[Any, Any], Any]) -> Callable[[], int]:
            def bytewax_files() -> int:
                out = work / f"bw-{next(counter)}.txt"
                source_at = bw_files.FileSource(source, batch_size=size)
                _bytewax(source_at, steps, bw_files.FileSink(out), "files")
                return read(out)

            return bytewax_files

        _add_bytewax_forms(cands, bytewax_at, ("op.map", keyed), ("op.flat_map_batch", keyed_batch))
    return cands


def _keyed_line(line: str) -> tuple[str, str]:
    return ("", line)


def _keyed_lines(lines: list[str]) -> list[tuple[str, str]]:
    return [("", line) for line in lines]


def csv_candidates(work: Path, rows: int, bytewax: bool) -> dict[str, Callable[[], Any]]:
    """Rows per name of a CSV: each engine's ``CSVSource`` -> ``count_final``.

    At both of ``BATCH_SIZES``; bytewax also in its batch API at 10,000:
    ``op.flat_map_batch`` counting a batch's names (one ``Counter`` per
    batch), then ``op.reduce_final(add)``.
    """
    from timelypy.flow.connectors import files
    from timelypy.flow.testing import TestingSink

    path = work / "rows.csv"
    path.write_text("name,qty\n" + "".join(f"n{i % 100},{i}\n" for i in range(rows)))

    def counts(op: Any, s: Any) -> Any:
        return op.count_final("count", s, _name)

    def batch_counts(op: Any, s: Any) -> Any:
        return op.reduce_final("count", op.flat_map_batch("names", s, _name_counts), add)

    def timelypy_at(size: int) -> Callable[[], list[Any]]:
        def timelypy() -> list[Any]:
            out: list[Any] = []
            _graph(files.CSVSource(path, batch_size=size), counts, TestingSink(out), "csv")
            return sorted(out)

        return timelypy

    cands: dict[str, Callable[[], Any]] = {}
    for size in BATCH_SIZES:
        cands[timelypy_label("op.count_final", size)] = timelypy_at(size)
    if bytewax:
        from bytewax.connectors import files as bw_files
        from bytewax.testing import TestingSink as BwSink

        def bytewax_at(size: int, steps: Callable[[Any, Any], Any]) -> Callable[[], list[Any]]:
            def bytewax_csv() -> list[Any]:
                out: list[Any] = []
                _bytewax(bw_files.CSVSource(path, batch_size=size), steps, BwSink(out), "csv")
                return sorted(out)

            return bytewax_csv

        _add_bytewax_forms(
            cands,
            bytewax_at,
            ("op.count_final", counts),
            ("op.flat_map_batch+op.reduce_final", batch_counts),
        )
    return cands


def _add_bytewax_forms(
    cands: dict[str, Callable[[], Any]],
    make: Callable[[int, Callable[[Any, Any], Any]], Callable[[], Any]],
    per_item: tuple[str, Callable[[Any, Any], Any]],
    batch_api: tuple[str, Callable[[Any, Any], Any]],
) -> None:
    """Add the bytewax candidates: per item at each of ``BATCH_SIZES``, batch API at the largest.

    ``make(size, steps)`` is the candidate reading batches of ``size``;
    ``per_item`` and ``batch_api`` are ``(operators, steps)``.
    """
    for size in BATCH_SIZES:
        cands[bytewax_label(per_item[0], size)] = make(size, per_item[1])
    cands[bytewax_label(batch_api[0], BATCH_SIZES[-1])] = make(BATCH_SIZES[-1], batch_api[1])


def _name(row: dict[str, str]) -> str:
    return row["name"]


def _name_counts(rows: list[dict[str, str]]) -> list[tuple[str, int]]:
    return list(Counter(map(_name, rows)).items())


def measure(cands: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Stats]:
    """Interleaved rounds after one warm-up; every candidate's results must agree."""
    stats = {name: Stats() for name in cands}
    results: dict[str, Any] = {}
    for r in range(repeat + 1):
        for name, fn in cands.items():
            elapsed, _, result = timed_call(fn)
            if r:
                stats[name].times.append(elapsed)
            results[name] = result
        if len({repr(value) for value in results.values()}) != 1:
            raise AssertionError(f"the candidates disagree: {results}")
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """Run the connector benchmark and print its table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.connector_bench")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--no-bytewax", action="store_true")
    parser.add_argument(
        "--only",
        default=",".join(GOALS),
        help="the workloads to run, comma-separated (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    if only - set(GOALS):
        parser.error(f"unknown workloads {sorted(only - set(GOALS))}; known: {list(GOALS)}")
    from tests.servers import postgres, redis

    bytewax = not args.no_bytewax
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        workloads: list[tuple[str, Callable[[], dict[str, Callable[[], Any]]]]] = [
            ("files", lambda: files_candidates(work, bytewax)),
            ("csv", lambda: csv_candidates(work, args.rows, bytewax)),
        ]
        for name, build in workloads:
            if name in only:
                rows += _rows(name, measure(build(), args.repeat))
        for name, server, build_server in (
            ("postgres", postgres, postgres_candidates),
            ("redis", redis, redis_candidates),
        ):
            if name not in only:
                continue
            try:
                with server() as address:
                    rows += _rows(name, measure(build_server(address, args.rows), args.repeat))
            except BaseException as exc:  # pytest.skip: no server here
                if type(exc).__name__ != "Skipped":
                    raise
                rows.append([name, "not run", str(exc), "", "", ""])
    print(f"connectors, {args.rows:,} rows, median of {args.repeat}, {machine()}")
    print_table(
        rows,
        ["workload", "candidate", "median", "vs peer", "vs fastest bytewax", "goal"],
        markdown=args.markdown,
    )
    print(
        "vs peer: the workload's peer (the direct client; for files and csv bytewax's per-item "
        "operators at its default batch of 1,000) over the row; vs fastest bytewax: the "
        "fastest bytewax row of the workload (any batch size, or its batch API) over the row"
    )
    return 0


def _rows(name: str, stats: dict[str, Stats]) -> list[list[str]]:
    """One row per candidate: its median, and its ratios and verdict.

    The ratios are to the workload's peer and to its fastest bytewax row;
    the verdict is the goal's, on the candidate the goal judges.
    """
    peer, goal, judged = GOALS[name]
    bytewax_rows = [stat.median for candidate, stat in stats.items() if "bytewax" in candidate]
    fastest = min(bytewax_rows) if bytewax_rows else None
    out = []
    for candidate, stat in stats.items():
        ratio = stats[peer].median / stat.median if peer in stats else None
        met = ""
        if candidate == judged and ratio is not None:
            met = f">= {fmt_ratio(goal)}: {'met' if ratio >= goal else 'NOT met'}"
        out.append(
            [
                name,
                candidate,
                f"{stat.median * 1000:.0f} ms",
                fmt_ratio(ratio) if ratio else "",
                fmt_ratio(fastest / stat.median)
                if fastest is not None and candidate.startswith("timelypy")
                else "",
                met,
            ]
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
