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
  to a file. ``timelypy``: ``FileSource`` -> ``(key, line)`` ->
  ``FileSink``; ``bytewax``: its own ``FileSource`` and ``FileSink``, the
  same steps. Checked: the output's lines.
- **csv**: a CSV of ``N`` rows read into a count of rows per name.
  ``timelypy`` and ``bytewax``: each its own ``CSVSource``, ``count_final``
  by the name column. Checked: the counts.

The servers are started here as the tests start theirs (``tests/servers``);
a machine without them skips their rows. Goals (issue 38): the sinks >=
0.8x their direct client; files and CSV >= 2x bytewax.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _data
from benchmarks._harness import Stats, fmt_ratio, print_table, timed_call
from benchmarks.runtime_bench import machine

#: table numbers, unique in this process (several workloads share a server)
_tables = itertools.count(0, 1000)

GOALS = {
    "postgres": ("direct", 0.8),
    "redis": ("direct", 0.8),
    "files": ("bytewax", 2.0),
    "csv": ("bytewax", 2.0),
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


def files_candidates(work: Path, bytewax: bool) -> dict[str, Callable[[], Any]]:
    from timelypy.flow.connectors import files

    lines = _data.load_lines()
    source = work / "corpus.txt"
    source.write_text("".join(line + "\n" for line in lines))
    counter = iter(range(10**9))

    def keyed(op: Any, s: Any) -> Any:
        return op.map("key", s, _keyed_line)

    def read(path: Path) -> int:
        return sum(1 for _ in path.open())

    def timelypy() -> int:
        out = work / f"out-{next(counter)}.txt"
        _graph(files.FileSource(source), keyed, files.FileSink(out), "files")
        return read(out)

    cands: dict[str, Callable[[], Any]] = {"timelypy": timelypy}
    if bytewax:
        from bytewax.connectors import files as bw_files

        def bytewax_files() -> int:
            out = work / f"bw-{next(counter)}.txt"
            _bytewax(bw_files.FileSource(source), keyed, bw_files.FileSink(out), "files")
            return read(out)

        cands["bytewax"] = bytewax_files
    return cands


def _keyed_line(line: str) -> tuple[str, str]:
    return ("", line)


def csv_candidates(work: Path, rows: int, bytewax: bool) -> dict[str, Callable[[], Any]]:
    from timelypy.flow.connectors import files
    from timelypy.flow.testing import TestingSink

    path = work / "rows.csv"
    path.write_text("name,qty\n" + "".join(f"n{i % 100},{i}\n" for i in range(rows)))

    def counts(op: Any, s: Any) -> Any:
        return op.count_final("count", s, _name)

    def timelypy() -> list[Any]:
        out: list[Any] = []
        _graph(files.CSVSource(path), counts, TestingSink(out), "csv")
        return sorted(out)

    cands: dict[str, Callable[[], Any]] = {"timelypy": timelypy}
    if bytewax:
        from bytewax.connectors import files as bw_files
        from bytewax.testing import TestingSink as BwSink

        def bytewax_csv() -> list[Any]:
            out: list[Any] = []
            _bytewax(bw_files.CSVSource(path), counts, BwSink(out), "csv")
            return sorted(out)

        cands["bytewax"] = bytewax_csv
    return cands


def _name(row: dict[str, str]) -> str:
    return row["name"]


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
                rows.append([name, "not run", str(exc), "", ""])
    print(f"connectors, {args.rows:,} rows, median of {args.repeat}, {machine()}")
    print_table(
        rows, ["workload", "candidate", "median", "vs peer", "goal"], markdown=args.markdown
    )
    return 0


def _rows(name: str, stats: dict[str, Stats]) -> list[list[str]]:
    peer, goal = GOALS[name]
    out = []
    for candidate, stat in stats.items():
        ratio = stats[peer].median / stat.median if peer in stats else None
        met = ""
        if candidate == "timelypy" and ratio is not None:
            met = f">= {fmt_ratio(goal)}: {'met' if ratio >= goal else 'NOT met'}"
        out.append(
            [
                name,
                candidate,
                f"{stat.median * 1000:.0f} ms",
                fmt_ratio(ratio) if ratio else "",
                met,
            ]
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
