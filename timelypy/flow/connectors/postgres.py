"""PostgreSQL: a table's rows in key order, and a sink that is exactly once across failures.

Needs the ``psycopg`` driver (version 3): ``pip install 'timelypy[postgres]'``.

* :class:`PostgresSource` -- the rows of a table in the order of a key
  column, as dicts, a batch at a time; its snapshot is the last key it
  read, so a resumed execution reads on after it;
* :class:`PostgresSink` -- ``(key, row)`` items, ``row`` a dict of column
  values, into a table, one transaction per epoch and partition that also
  records which epoch it wrote (in the table ``timelypy_sink_progress``).

Exactly once, in both of the sink's modes:

* ``mode="append"`` adds two columns to the table (``timelypy_part``,
  ``timelypy_seq``: which partition wrote a row, in which of its epochs),
  whose defaults read settings the epoch's transaction sets, so ``COPY``
  sends only the rows' own columns.
  A resumed execution deletes, in one transaction, the rows its partition
  wrote in epochs after the one its snapshot closed; the resumed execution
  writes them again.  The table then holds every row exactly once.
* ``mode="upsert"`` inserts or updates each row by the ``key`` column(s):
  writing an epoch again leaves the table as it was, so after a failure
  and a resume the table is what a run without the failure gives.

Every connection is retried a bounded number of times
(``connect_attempts``, ``retry_seconds`` apart); then the error names the
step, the partition and the server.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["PostgresSink", "PostgresSource", "PROGRESS_TABLE"]

#: Where each sink partition records the last epoch it committed.
PROGRESS_TABLE = "timelypy_sink_progress"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FlowError(
            "the PostgreSQL connectors need psycopg 3: pip install 'timelypy[postgres]'"
        ) from exc
    return psycopg


def _connect(dsn: str, what: str, attempts: int, pause: float) -> Any:
    psycopg = _psycopg()
    for attempt in range(1, attempts + 1):
        try:
            return psycopg.connect(dsn, connect_timeout=10)
        except psycopg.OperationalError as exc:
            if attempt == attempts:
                raise FlowError(
                    f"{what}: cannot connect to PostgreSQL at {_where(dsn)} after {attempts} "
                    f"attempts: {str(exc).strip()}"
                ) from exc
            time.sleep(pause)
    raise AssertionError("unreachable")


def _where(dsn: str) -> str:
    """The host and port of ``dsn`` (never its password)."""
    parts = dict(item.split("=", 1) for item in dsn.split() if "=" in item)
    return f"{parts.get('host', 'localhost')}:{parts.get('port', '5432')}"


def _ident(name: str) -> Any:
    return _psycopg().sql.Identifier(name)


class _Rows(StatefulSourcePartition[dict[str, Any], Any]):
    def __init__(self, source: PostgresSource, step_id: str, after: Any) -> None:
        self._source = source
        self._after = after
        what = f"input step {step_id!r} (table {source.table!r})"
        self._conn = _connect(source.dsn, what, source.connect_attempts, source.retry_seconds)
        self._conn.autocommit = True

    def next_batch(self) -> list[dict[str, Any]]:
        sql = _psycopg().sql
        source = self._source
        key = _ident(source.key_column)
        query = sql.SQL("SELECT * FROM {} {} ORDER BY {} LIMIT %s").format(
            _ident(source.table),
            sql.SQL("WHERE {} > %s").format(key) if self._after is not None else sql.SQL(""),
            key,
        )
        params = (source.batch_size,) if self._after is None else (self._after, source.batch_size)
        with self._conn.cursor(row_factory=_psycopg().rows.dict_row) as cur:
            rows: list[dict[str, Any]] = cur.execute(query, params).fetchall()
        if not rows:
            raise StopIteration()
        self._after = rows[-1][source.key_column]
        return rows

    def snapshot(self) -> Any:
        return self._after

    def close(self) -> None:
        self._conn.close()


class PostgresSource(FixedPartitionedSource[dict[str, Any], Any]):
    """The rows of ``table`` in the order of ``key_column`` (unique), ``batch_size`` at a time."""

    def __init__(
        self,
        dsn: str,
        table: str,
        key_column: str,
        batch_size: int = 1000,
        connect_attempts: int = 5,
        retry_seconds: float = 0.5,
    ) -> None:
        self.dsn = dsn
        self.table = table
        self.key_column = key_column
        self.batch_size = batch_size
        self.connect_attempts = connect_attempts
        self.retry_seconds = retry_seconds

    def __repr__(self) -> str:
        return f"PostgresSource({_where(self.dsn)}, {self.table!r})"

    def list_parts(self) -> list[str]:
        """One partition: the table."""
        return [self.table]

    def build_part(
        self, step_id: str, for_part: str, resume_state: Any
    ) -> StatefulSourcePartition[dict[str, Any], Any]:
        """A reader of the rows after key ``resume_state`` (``None``: from the first)."""
        return _Rows(self, step_id, resume_state)


class _Writer(StatefulSinkPartition[dict[str, Any], int]):
    """One partition's rows: buffered during an epoch, committed with its number at its close."""

    def __init__(self, sink: PostgresSink, step_id: str, part: str, resume: int | None) -> None:
        self._sink = sink
        self._step_id = step_id
        self._part = part
        self._what = f"output step {step_id!r} (partition {part!r})"
        self._conn = _connect(sink.dsn, self._what, sink.connect_attempts, sink.retry_seconds)
        self._pending: list[dict[str, Any]] = []
        self._columns: list[str] | None = None
        done = resume or 0
        sql = _psycopg().sql
        with self._conn.transaction():
            # partitions start at once: one at a time through the DDL (two concurrent
            # CREATE TABLE IF NOT EXISTS can both try to create the table)
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('timelypy.sink'))")
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (sink text, part text, seq bigint NOT NULL, "
                    "PRIMARY KEY (sink, part))"
                ).format(_ident(PROGRESS_TABLE))
            )
            if sink.mode == "append":
                table = _ident(sink.table)
                # the tags come from settings of the epoch's transaction (SET LOCAL), so
                # COPY sends the rows' own columns only, as a direct writer would
                self._conn.execute(
                    sql.SQL(
                        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS timelypy_part text, "
                        "ADD COLUMN IF NOT EXISTS timelypy_seq bigint, "
                        "ALTER COLUMN timelypy_part SET DEFAULT "
                        "NULLIF(current_setting('timelypy.part', true), ''), "
                        "ALTER COLUMN timelypy_seq SET DEFAULT "
                        "NULLIF(current_setting('timelypy.seq', true), '')::bigint"
                    ).format(table)
                )
                # what a failed execution committed after the resume point goes
                self._conn.execute(
                    sql.SQL("DELETE FROM {} WHERE timelypy_part = %s AND timelypy_seq > %s").format(
                        table
                    ),
                    (part, done),
                )
            self._record(done)
        #: the number of the epoch being written (this partition's own count)
        self._seq = done + 1

    def _record(self, seq: int) -> None:
        sql = _psycopg().sql
        self._conn.execute(
            sql.SQL(
                "INSERT INTO {} (sink, part, seq) VALUES (%s, %s, %s) "
                "ON CONFLICT (sink, part) DO UPDATE SET seq = EXCLUDED.seq"
            ).format(_ident(PROGRESS_TABLE)),
            (self._step_id, self._part, seq),
        )

    def write_batch(self, values: list[dict[str, Any]]) -> None:
        if list(map(type, values)).count(dict) != len(values):
            bad = next((value for value in values if not isinstance(value, dict)), None)
            if bad is not None:
                raise TypeError(f"{self._what} writes rows as dicts of column values, got {bad!r}")
        self._pending.extend(values)

    def _flush(self) -> None:
        rows, self._pending = self._pending, []
        if not rows:
            return
        sink = self._sink
        columns = self._columns
        if columns is None:
            columns = self._columns = list(rows[0])
        try:
            get = itemgetter(*columns)
            records = list(map(get, rows)) if len(columns) > 1 else [(get(r),) for r in rows]
        except KeyError as exc:
            raise FlowError(
                f"{self._what}: every row needs the columns {columns}, one lacks {exc}"
            ) from None
        sql = _psycopg().sql
        table = _ident(sink.table)
        names = sql.SQL(", ").join(map(_ident, columns))
        if sink.mode == "append":
            self._conn.execute(
                "SELECT set_config('timelypy.part', %s, true), "
                "set_config('timelypy.seq', %s, true)",
                (self._part, str(self._seq)),
            )
            copy = sql.SQL("COPY {} ({}) FROM STDIN").format(table, names)
            with self._conn.cursor() as cur, cur.copy(copy) as writer:
                write = writer.write_row
                for record in records:
                    write(record)
            return
        keys = list(sink.key)
        assigned = [
            sql.SQL("{} = EXCLUDED.{}").format(_ident(c), _ident(c))
            for c in columns
            if c not in keys
        ]
        updates = sql.SQL(", ").join(assigned)
        query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO {}").format(
            table,
            names,
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            sql.SQL(", ").join(map(_ident, keys)),
            sql.SQL("UPDATE SET {}").format(updates) if assigned else sql.SQL("NOTHING"),
        )
        with self._conn.cursor() as cur:
            cur.executemany(query, records)

    def snapshot(self) -> int:
        """The epoch closed: its rows and its number, in one transaction."""
        try:
            with self._conn.transaction():
                self._flush()
                self._record(self._seq)
        except _psycopg().Error as exc:
            raise FlowError(f"{self._what}: PostgreSQL refused the epoch's rows: {exc}") from exc
        seq = self._seq
        self._seq += 1
        return seq

    def close(self) -> None:
        if self._pending:
            self.snapshot()
        self._conn.close()


class PostgresSink(FixedPartitionedSink[dict[str, Any], int]):
    """``(key, row)`` items into ``table``: appended or upserted, exactly once (see the module).

    ``row`` is a dict of column values (the same columns in every row);
    ``key`` names the unique column(s) of an upsert.  ``partitions``
    connections write in parallel, each its share of the keys.
    """

    def __init__(
        self,
        dsn: str,
        table: str,
        *,
        mode: str = "append",
        key: str | Sequence[str] | None = None,
        partitions: int = 1,
        connect_attempts: int = 5,
        retry_seconds: float = 0.5,
    ) -> None:
        if mode not in ("append", "upsert"):
            raise FlowError(f"PostgresSink's mode is 'append' or 'upsert', got {mode!r}")
        if mode == "upsert" and not key:
            raise FlowError("PostgresSink(mode='upsert') needs key=: the column(s) rows upsert on")
        if not isinstance(partitions, int) or partitions < 1:
            raise FlowError(f"PostgresSink needs partitions >= 1, got {partitions!r}")
        self.dsn = dsn
        self.table = table
        self.mode = mode
        self.key = (key,) if isinstance(key, str) else tuple(key or ())
        self.partitions = partitions
        self.connect_attempts = connect_attempts
        self.retry_seconds = retry_seconds

    def __repr__(self) -> str:
        return f"PostgresSink({_where(self.dsn)}, {self.table!r}, mode={self.mode!r})"

    def list_parts(self) -> list[str]:
        """``partitions`` partitions."""
        return [f"{self.table}-{i}" for i in range(self.partitions)]

    def part_fn(self, item_key: str) -> int:
        """Adler-32 of the key."""
        return adler32(item_key.encode())

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSinkPartition[dict[str, Any], int]:
        """A writer of one partition, rolled back to the epoch of ``resume_state``."""
        return _Writer(self, step_id, for_part, resume_state)
