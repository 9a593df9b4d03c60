"""PostgreSQL: a table's rows in key order, and a sink that is exactly once across failures.

Needs the ``psycopg`` driver (version 3): ``pip install 'timelypy[postgres]'``.

* :class:`PostgresSource` -- the rows of a table in the order of a key
  column, as dicts, a batch at a time; its snapshot is the last key it
  read, so a resumed execution reads on after it;
* :class:`PostgresSink` -- ``(key, row)`` items, ``row`` a dict of column
  values, into a table: each partition's rows of an epoch are one ``COPY``
  (or one upsert) in one transaction that also records the epoch, its
  partition and the transaction's ID in :data:`EPOCHS_TABLE`.

Exactly once, in both of the sink's modes:

* ``mode="append"``: a resumed execution deletes, in one transaction, the
  rows of the epochs its partition committed after the one its snapshot
  closed (a failed execution can commit an epoch in PostgreSQL before the
  recovery store commits the snapshots of that epoch), found by the
  transaction that inserted them (PostgreSQL's ``xmin`` system column,
  matched against the IDs in :data:`EPOCHS_TABLE`); the resumed execution
  writes them again.  The table then holds every row exactly once, and
  the sink adds no column to it.  (A row of such an epoch that someone
  updated in between has a new ``xmin`` and stays: keep the table
  append-only while a flow writes it.)
* ``mode="upsert"`` inserts or updates each row by the ``key`` column(s):
  writing an epoch again leaves the table as it was, so after a failure
  and a resume the table is what a run without the failure gives.

:data:`EPOCHS_TABLE` keeps a row per partition and epoch since the
execution started (a resume deletes them all: none is needed again).

A lost connection is retried ``connect_attempts`` times, the pause
doubling from ``retry_seconds`` (``_retry``), without blocking the worker:
a source partition returns nothing until the pause is over; a sink
partition keeps the epoch's rows, its epoch is held open by the engine
(``StatefulSinkPartition.Retry``), and it redoes the epoch on a new
connection after the pause (after checking in :data:`EPOCHS_TABLE`
whether its commit went through).  Then the error names the step, the
partition and the server.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.connectors._retry import Backoff, log, snapshot_when_closing
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["PostgresSink", "PostgresSource", "EPOCHS_TABLE"]

#: Where each sink partition records the epochs it committed, with their transactions' IDs.
EPOCHS_TABLE = "timelypy_sink_epochs"
#: Seconds a connection attempt may take (libpq's ``connect_timeout``).
CONNECT_TIMEOUT = 5
#: Rows formatted into one block before it goes to the server.
_ROWS_PER_WRITE = 4096
#: Column types (OIDs) whose values binary COPY sends as psycopg dumps them (int, float,
#: str, bool, bytes); any other column makes the epoch's COPY text, parsed by the server.
_BINARY_TYPES = frozenset({16, 17, 20, 21, 23, 25, 700, 701, 1043})
#: A binary COPY's header (signature, flags, extension length) and trailer.
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_BINARY_TRAILER = b"\xff\xff"
#: Transactions after which an ``xmin`` no longer tells which transaction inserted a row.
_XID_HORIZON = 2**31


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FlowError(
            "the PostgreSQL connectors need psycopg 3: pip install 'timelypy[postgres]'"
        ) from exc
    return psycopg


@functools.cache
def _row_formatter(binary: bool) -> Any:
    """The ``COPY`` text row formatter (C in psycopg's binary and c builds), if it has one.

    ``Copy.write_row`` calls it for each row through two Python methods; the
    sink calls it directly and hands each block to the public ``Copy.write``.
    """
    try:
        from psycopg._copy_base import format_row_binary, format_row_text
    except ImportError:  # pragma: no cover - another psycopg layout: write_row instead
        return None
    return format_row_binary if binary else format_row_text


def _where(dsn: str) -> str:
    """The host and port of ``dsn`` (never its password)."""
    parts = dict(item.split("=", 1) for item in dsn.split() if "=" in item)
    return f"{parts.get('host', 'localhost')}:{parts.get('port', '5432')}"


def _ident(name: str) -> Any:
    return _psycopg().sql.Identifier(name)


def _lost(conn: Any, exc: BaseException) -> bool:
    """Whether ``exc`` means the server is gone (and not that it refused a statement)."""
    psycopg = _psycopg()
    if conn is None or conn.closed or conn.broken:
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    return False


class _Rows(StatefulSourcePartition[dict[str, Any], Any]):
    def __init__(self, source: PostgresSource, step_id: str, after: Any) -> None:
        self._source = source
        self._after = after
        what = f"input step {step_id!r} (partition {source.table!r})"
        self._backoff = Backoff(
            source.connect_attempts,
            source.retry_seconds,
            what,
            f"PostgreSQL at {_where(source.dsn)}",
        )
        self._conn: Any = None
        self._awake: Any = None
        sql = _psycopg().sql
        key = _ident(source.key_column)
        self._first = sql.SQL("SELECT * FROM {} ORDER BY {} LIMIT %s").format(
            _ident(source.table), key
        )
        self._next = sql.SQL("SELECT * FROM {} WHERE {} > %s ORDER BY {} LIMIT %s").format(
            _ident(source.table), key, key
        )

    def next_batch(self) -> list[dict[str, Any]]:
        psycopg = _psycopg()
        source = self._source
        try:
            if self._conn is None:
                self._conn = psycopg.connect(
                    source.dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=True
                )
            with self._conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                if self._after is None:
                    cur.execute(self._first, (source.batch_size,))
                else:
                    cur.execute(self._next, (self._after, source.batch_size))
                rows: list[dict[str, Any]] = cur.fetchall()
        except psycopg.Error as exc:
            if not _lost(self._conn, exc):
                raise FlowError(
                    f"{self._backoff.what}: PostgreSQL refused the query: {exc}"
                ) from exc
            self._close()
            self._awake = self._backoff.awake_after(exc)  # the error once the budget is spent
            return []
        self._backoff.reached()
        self._awake = None
        if not rows:
            raise StopIteration()
        self._after = rows[-1][source.key_column]
        return rows

    def next_awake(self) -> Any:
        return self._awake

    def snapshot(self) -> Any:
        return self._after

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._close()


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
    """One partition's rows: streamed into the epoch's transaction, committed at its close.

    In append mode the rows go into the epoch's ``COPY`` as they arrive
    (the server inserts them while the flow computes); the epoch's rows are
    also kept (references only) so that an epoch whose connection is lost
    is written again, whole, on a new one when it closes.
    """

    def __init__(self, sink: PostgresSink, step_id: str, part: str, resume: int | None) -> None:
        self._sink = sink
        self._step_id = step_id
        self._part = part
        self._what = f"output step {step_id!r} (partition {part!r})"
        self._backoff = Backoff(
            sink.connect_attempts,
            sink.retry_seconds,
            self._what,
            f"PostgreSQL at {_where(sink.dsn)}",
        )
        self._conn: Any = None
        #: the epoch's rows, as the flow gave them
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] | None = None
        self._get: Callable[[Any], Any] | None = None
        self._statement: Any = None
        #: the table's column types (OIDs), read at the start; binary COPY when they allow it
        self._types: dict[str, int] = {}
        self._binary: list[int] | None = None
        #: the epoch's open ``COPY`` (append mode), its context and the rows sent into it
        self._copy: Any = None
        self._copying: Any = None
        #: the number of the last epoch committed (this partition's own count)
        self._done = resume or 0
        #: an attempt was lost after its statements were sent: its COMMIT may have gone through
        self._unsure = False
        #: whether what a failed execution committed after the snapshot is deleted yet
        self._rolled_back = False
        try:
            self._attempt(self._roll_back)
            self._rolled_back = True
        except StatefulSinkPartition.Retry:
            pass  # the server is away: the first epoch's close (or close()) rolls back

    # -- connection and transactions ---------------------------------------------------------

    def _attempt(self, action: Callable[[Any, bool], None]) -> None:
        """``action(conn, unsure)`` then ``COMMIT``, once; a lost connection raises ``Retry``.

        The ``Retry`` (``_retry``) asks the engine to call :meth:`snapshot`
        again after the pause, on a new connection, without blocking the
        worker; the attempt after the last allowed one raises the error
        that names the step, the partition and the server.
        """
        psycopg = _psycopg()
        try:
            if self._conn is None:
                self._conn = psycopg.connect(self._sink.dsn, connect_timeout=CONNECT_TIMEOUT)
            action(self._conn, self._unsure)
            self._conn.commit()
        except psycopg.Error as exc:
            self._check_lost(exc)
            self._unsure = True
            raise self._backoff.retry(exc) from None
        self._unsure = False
        self._backoff.reached()

    def _check_lost(self, exc: BaseException) -> None:
        """Forget a lost connection (its epoch is redone); raise what the server refused."""
        lost = _lost(self._conn, exc)
        self._close()
        if not lost:
            raise FlowError(f"{self._what}: PostgreSQL refused the epoch's rows: {exc}") from exc

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        self._copy = self._copying = None  # dropped with its connection
        if conn is not None:
            conn.close()  # an open transaction is rolled back

    def _roll_back(self, conn: Any, again: bool) -> None:
        """Create the epochs table; delete what the partition committed after its snapshot."""
        sql = _psycopg().sql
        sink, epochs = self._sink, _ident(EPOCHS_TABLE)
        # partitions start at once: one at a time through the DDL (two concurrent
        # CREATE TABLE IF NOT EXISTS can both try to create the table)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('timelypy.sink'))")
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (sink text NOT NULL, part text NOT NULL, "
                "seq bigint NOT NULL, xid xid8 NOT NULL, PRIMARY KEY (sink, part, seq))"
            ).format(epochs)
        )
        later = conn.execute(
            sql.SQL(
                "SELECT seq, xid::text, pg_current_xact_id()::text FROM {} "
                "WHERE sink = %s AND part = %s AND seq > %s"
            ).format(epochs),
            (self._step_id, self._part, self._done),
        ).fetchall()
        if later and sink.mode == "append":
            stale = [seq for seq, xid, now in later if int(now) - int(xid) >= _XID_HORIZON]
            if stale:
                raise FlowError(
                    f"{self._what}: the rows of epochs {stale} of a failed execution are too old "
                    f"to be told apart by their transaction ID; delete them by hand, then delete "
                    f"their rows from {EPOCHS_TABLE}"
                )
            xids = [str(int(xid) % 2**32) for _, xid, _ in later]
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE xmin = ANY(%s::xid[])").format(_ident(sink.table)),
                (xids,),
            )
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE sink = %s AND part = %s").format(epochs),
            (self._step_id, self._part),
        )
        self._types = dict(
            conn.execute(
                "SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = "
                "to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (_ident(sink.table).as_string(conn),),
            ).fetchall()
        )

    # -- rows -----------------------------------------------------------------------------------

    def write_batch(self, values: list[dict[str, Any]]) -> None:
        if not values:
            return
        if self._get is None:
            first = values[0]
            if not isinstance(first, dict) or not first:
                raise TypeError(
                    f"{self._what} writes rows as dicts of column values, got {first!r}"
                )
            self._columns = list(first)
            self._get = itemgetter(*self._columns)
            self._statement = self._build_statement(self._columns)
            types = [self._types.get(column) for column in self._columns]
            if self._sink.mode == "append" and all(oid in _BINARY_TYPES for oid in types):
                self._binary = [oid for oid in types if oid is not None]
        self._rows.extend(values)
        if self._sink.mode != "append" or self._conn is None:
            return  # upserts go at the epoch's close; a lost connection is redone there
        try:
            if self._copy is None:
                self._open_copy(self._conn)
            self._send(values)
        except _psycopg().Error as exc:
            self._check_lost(exc)

    def _records(self, values: list[dict[str, Any]]) -> Any:
        get = self._get
        assert get is not None
        if len(self._columns or ()) == 1:
            return [(value,) for value in map(get, values)]
        return map(get, values)

    def _send(self, values: list[dict[str, Any]]) -> None:
        """``values`` into the open ``COPY``, formatted by psycopg's own row formatters."""
        copy = self._copy
        formatter = getattr(copy, "formatter", None)
        transformer = getattr(formatter, "transformer", None)
        format_row = _row_formatter(binary=self._binary is not None)
        try:
            for start in range(0, len(values), _ROWS_PER_WRITE):
                records = self._records(values[start : start + _ROWS_PER_WRITE])
                if format_row is not None and transformer is not None:
                    # what Copy.write_row does for each row, without its two Python calls
                    block = bytearray()
                    for record in records:
                        format_row(record, transformer, block)
                    copy.write(block)
                else:  # pragma: no cover - a psycopg without its row formatters
                    for record in records:
                        copy.write_row(record)
        except (KeyError, TypeError, IndexError) as exc:
            bad = next((value for value in values if not isinstance(value, dict)), None)
            if bad is not None:
                self._close()
                raise TypeError(
                    f"{self._what} writes rows as dicts of column values, got {bad!r}"
                ) from None
            if isinstance(exc, KeyError) or self._binary is None:
                self._close()
                raise FlowError(
                    f"{self._what}: every row needs the columns {self._columns}, one lacks {exc}"
                ) from None
            self._restart_as_text(exc)
        except (ValueError, OverflowError, _psycopg().DataError) as exc:
            if self._binary is None:
                raise
            self._restart_as_text(exc)

    def _restart_as_text(self, exc: BaseException) -> None:
        """A value binary COPY cannot send as its column's type: text from now on.

        The binary ``COPY`` is abandoned and its transaction rolled back; the
        epoch's rows so far go again into a text ``COPY``, where the server
        parses each value (or refuses it, as a direct ``COPY`` would).
        """
        log.info("%s: binary COPY cannot send a value (%s); sending text", self._what, exc)
        copying, conn = self._copying, self._conn
        self._copy = self._copying = None
        self._binary = None
        try:
            copying.__exit__(type(exc), exc, None)  # CopyFail: the server drops what it got
        except _psycopg().Error:
            pass
        conn.rollback()
        self._open_copy(conn)
        self._send(self._rows)

    def _open_copy(self, conn: Any) -> None:
        cursor = conn.cursor()
        if self._binary is None:
            self._copying = cursor.copy(self._statement)
            self._copy = self._copying.__enter__()
            return
        sql = _psycopg().sql
        self._copying = cursor.copy(sql.SQL("{} (FORMAT BINARY)").format(self._statement))
        self._copy = self._copying.__enter__()
        self._copy.set_types(self._binary)
        self._copy.write(_BINARY_HEADER)

    def _end_copy(self) -> None:
        """The end of the epoch's ``COPY``: the server's verdict on its rows."""
        copy, copying = self._copy, self._copying
        self._copy = self._copying = None
        if self._binary is not None:
            copy.write(_BINARY_TRAILER)
        copying.__exit__(None, None, None)

    def _build_statement(self, columns: list[str]) -> Any:
        """The epoch's ``COPY`` (append) or ``INSERT ... ON CONFLICT`` (upsert)."""
        sql = _psycopg().sql
        sink = self._sink
        table = _ident(sink.table)
        names = sql.SQL(", ").join(map(_ident, columns))
        if sink.mode == "append":
            return sql.SQL("COPY {} ({}) FROM STDIN").format(table, names)
        keys = list(sink.key)
        assigned = [
            sql.SQL("{} = EXCLUDED.{}").format(_ident(c), _ident(c))
            for c in columns
            if c not in keys
        ]
        return sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO {}").format(
            table,
            names,
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            sql.SQL(", ").join(map(_ident, keys)),
            sql.SQL("UPDATE SET {}").format(sql.SQL(", ").join(assigned))
            if assigned
            else sql.SQL("NOTHING"),
        )

    def _commit(self, conn: Any, again: bool) -> None:
        """The epoch's rows and its number (``_done + 1``) with this transaction's ID."""
        sql = _psycopg().sql
        epochs = _ident(EPOCHS_TABLE)
        seq = self._done + 1
        if again:  # a connection was lost: perhaps during the COMMIT, which then went through
            found = conn.execute(
                sql.SQL("SELECT 1 FROM {} WHERE sink = %s AND part = %s AND seq = %s").format(
                    epochs
                ),
                (self._step_id, self._part, seq),
            ).fetchone()
            if found:
                return
        if self._sink.mode == "append":
            if self._copy is None:  # not streamed (the connection was lost): all of it now
                self._open_copy(conn)
                self._send(self._rows)
            self._end_copy()
        else:
            with conn.cursor() as cur:
                cur.executemany(self._statement, list(self._records(self._rows)))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (sink, part, seq, xid) VALUES (%s, %s, %s, pg_current_xact_id())"
            ).format(epochs),
            (self._step_id, self._part, seq),
        )

    def snapshot(self) -> int:
        """The epoch closed: its rows and its number in one transaction (none without rows).

        Raises ``Retry`` while the server is away (the rows are kept).
        """
        if not self._rolled_back:
            self._attempt(self._roll_back)
            self._rolled_back = True
        if self._rows:
            self._attempt(self._commit)
            self._rows = []
            self._done += 1
        return self._done

    def close(self) -> None:
        if self._rows or not self._rolled_back:
            snapshot_when_closing(self.snapshot)
        self._close()


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
