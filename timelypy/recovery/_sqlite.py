"""The recovery store's SQLite plumbing: connections, write transactions, errors, fences.

Three rules live here, so that every part of the store keeps them:

* **Errors name the file and the cause.**  Whatever SQLite raises (a full
  disk, a corrupt page, a locked file) becomes a
  :class:`~timelypy.errors.RecoveryError` that names the partition file,
  what the store was doing, and what to do; a write transaction that fails
  is rolled back (only if SQLite has not already done it: a failed
  ``COMMIT`` on a full disk ends the transaction itself), so nothing of it
  is written.
* **Durability follows the ledger.**  Partition 0 holds the ledger (each
  worker's frontier); a frontier must never be durable before the
  snapshots it covers.  Within one file, SQLite's write-ahead log keeps
  commits in order, so ``synchronous=NORMAL`` (a crash may lose the last
  commits, never reorder them) is enough for partition 0; the other
  partitions commit with ``synchronous=FULL`` (the log is synced before each
  commit returns), so their snapshots are on disk before the frontier that
  covers them is written.
* **Fencing.**  Every partition's ``meta`` row ``execution`` names the
  current execution; :meth:`~timelypy.recovery.store.RecoveryStore.begin_execution`
  sets it in every partition, and every write transaction of a worker
  checks it first (:func:`check_fence`), under the partition's write lock:
  a process of an older execution that wakes up (it was paused, or its
  peers were lost while it was busy) writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from timelypy.errors import RecoveryError

__all__ = ["BUSY_SECONDS", "Connection", "connect", "immediate", "reading", "store_error"]

#: Seconds a connection waits for another writer's lock before failing.
BUSY_SECONDS = 30.0
#: Free bytes under which a disk I/O error is reported as a full disk.
FULL_BYTES = 1 << 20
#: The ``meta`` row that names the current execution (the fence).
FENCE = "execution"


class Connection(sqlite3.Connection):
    """A connection that knows its file (for error messages)."""

    path: Path


def store_error(path: Path, doing: str, exc: BaseException) -> RecoveryError:
    """The :class:`RecoveryError` for SQLite's ``exc`` while ``doing`` on partition ``path``."""
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "disk i/o error" in lowered:
        with contextlib.suppress(OSError):
            if shutil.disk_usage(path.parent).free < FULL_BYTES:
                lowered += " full"
    if "full" in lowered:
        advice = "the disk (or the file system's quota) is full: free space, then run again"
    elif "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        advice = (
            "the file is damaged: restore the whole store from one backup (docs/recovery.md, "
            "'Backing up a store')"
        )
    elif "locked" in lowered or "busy" in lowered:
        advice = f"another process held the file's lock for more than {BUSY_SECONDS:g} s"
    elif "readonly" in lowered or "read-only" in lowered or "permission" in lowered:
        advice = "the file or its directory cannot be written by this process"
    else:
        advice = "see the cause above"
    return RecoveryError(f"recovery store partition {path}: {doing} failed: {text} ({advice})")


def connect(path: Path, *, durable: bool) -> Connection:
    """A connection to partition ``path`` in WAL mode; ``durable``: ``synchronous=FULL``."""
    try:
        conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None, factory=Connection)
    except sqlite3.Error as exc:
        raise store_error(path, "opening the file", exc) from exc
    conn.path = path
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
    except sqlite3.Error as exc:
        conn.close()
        raise store_error(path, "opening the file", exc) from exc
    return conn


@contextlib.contextmanager
def reading(path: Path, doing: str) -> Iterator[None]:
    """Turn SQLite's errors in the block into a :class:`RecoveryError` naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(path, doing, exc) from exc


@contextlib.contextmanager
def immediate(conn: Connection, doing: str) -> Iterator[Connection]:
    """A write transaction on ``conn`` (``BEGIN IMMEDIATE``): all of it, or none of it.

    If the block or the ``COMMIT`` raises, the transaction is rolled back
    (unless SQLite already ended it) and SQLite's errors are raised as a
    :class:`RecoveryError` naming the file and the cause.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise store_error(conn.path, doing, exc) from exc


def check_fence(conn: Connection, ex_num: int) -> None:
    """Raise unless execution ``ex_num`` is still the current one in ``conn``'s partition."""
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (FENCE,)).fetchone()
    current = None if row is None else int(row[0])
    if current is not None and current != ex_num:
        raise RecoveryError(
            f"execution {ex_num} is no longer the current execution of the recovery store "
            f"{conn.path.parent} (execution {current} began since): this worker writes "
            "nothing more and stops. A process of an old execution that was paused or cut "
            "off must not overwrite the state of the next one."
        )


def set_fence(conn: Connection, ex_num: int) -> None:
    """Make ``ex_num`` the current execution of ``conn``'s partition (in a transaction)."""
    conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (FENCE, str(ex_num)))


def private_file(path: Path) -> None:
    """Create ``path`` empty, readable and writable by its owner only (0600).

    SQLite gives a database's ``-wal`` and ``-shm`` files the permissions of
    the database itself, so they stay private too.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
