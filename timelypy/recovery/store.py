"""The recovery store: partitioned SQLite files in one directory.

A store is a directory of ``N`` SQLite databases, ``part-0.sqlite3`` ..
``part-{N-1}.sqlite3``, each in WAL mode.  Every partition has a ``meta``
table (the store's id, the partition's index and the partition count, the
format version), so a missing, extra or foreign partition is found when the
store is opened.  Partition 0 also keeps the ledger:

* ``executions(ex_num, worker_count, resume_epoch, started)``: one row per
  execution, numbered 1, 2, ...;
* ``fronts(ex_num, worker_index, frontier, done)``: each worker's frontier in
  that execution: every epoch before ``frontier`` is closed on that worker
  and its snapshots are committed; ``done`` is 1 once the worker's input
  ended (then ``frontier`` is one past the last epoch it saw).

Snapshots are spread over all partitions by the stable hash of their state
key: ``snaps(step_id, state_key, epoch, key_hash, state)`` holds a step's
state for a key as of the end of ``epoch`` (``state`` NULL: the key was
discarded).  ``key_hash`` is CRC-32 of the key, the hash that routes the key
to a worker, so a worker of any execution loads its keys with one indexed
query whatever the worker count was before (rescaling).

A run that returns its captured items to a caller across executions (a
Spark ``run_flow`` call) also logs them: ``outs(seq, run, epoch, worker,
items)`` holds a batch of a closed epoch's items under the run's id, in
the partition of its worker, until the run ends; a resumed execution of
the same run re-emits the batches of the epochs before its resume epoch.

The store runs no server: every worker opens its own connections, and
SQLite's locks serialise their commits (``busy_timeout``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zlib import crc32

from timelypy.errors import RecoveryError

__all__ = [
    "FORMAT",
    "Execution",
    "RecoveryStore",
    "create_store",
    "key_hash",
    "partition_paths",
    "SnapshotRow",
    "snapshot_rows",
]

#: The store format this code reads and writes.
FORMAT = "timelypy-recovery-2"
#: Seconds a connection waits for another writer's lock before failing.
BUSY_SECONDS = 30.0
#: Seconds between a writer's trims of the snapshots its keys no longer need.
TRIM_SECONDS = 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snaps (
    step_id TEXT NOT NULL,
    state_key TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    key_hash INTEGER NOT NULL,
    state BLOB,
    PRIMARY KEY (step_id, state_key, epoch)
) WITHOUT ROWID;
"""

_OUTPUTS = """
CREATE TABLE IF NOT EXISTS outs (
    seq INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    worker INTEGER NOT NULL,
    items BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS outs_by_run ON outs (run, worker, seq);
"""

_LEDGER = """
CREATE TABLE IF NOT EXISTS executions (
    ex_num INTEGER PRIMARY KEY,
    worker_count INTEGER NOT NULL,
    resume_epoch INTEGER NOT NULL,
    started REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS fronts (
    ex_num INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    frontier INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ex_num, worker_index)
);
"""


def key_hash(state_key: str) -> int:
    """The stable hash of a state key (CRC-32 of its UTF-8), as the flow routes keys."""
    return crc32(state_key.encode("utf-8", "surrogatepass"))


def partition_paths(directory: str | os.PathLike[str], count: int) -> list[Path]:
    """The files of a store of ``count`` partitions in ``directory``."""
    return [Path(directory) / f"part-{i}.sqlite3" for i in range(count)]


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction on ``conn`` (``BEGIN IMMEDIATE``), rolled back if the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def create_store(directory: str | os.PathLike[str], partitions: int) -> RecoveryStore:
    """Create an empty store of ``partitions`` SQLite files in ``directory`` (made if absent).

    Refuses a directory that already holds partition files.
    """
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise RecoveryError(f"a store needs a positive number of partitions, got {partitions!r}")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    existing = sorted(root.glob("part-*.sqlite3"))
    if existing:
        raise RecoveryError(
            f"{root} already holds a recovery store ({len(existing)} partition file(s)); "
            "open it instead, or create the new store in an empty directory"
        )
    store_id = uuid.uuid4().hex
    # Each partition is made under a temporary name and renamed into place, partition 0
    # last: a process opening the store meanwhile never sees a half-made partition.
    made = []
    for index, path in enumerate(partition_paths(root, partitions)):
        making = path.with_name(f".{path.name}.{store_id}.tmp")
        conn = _connect(making)
        try:
            conn.executescript(_SCHEMA + _OUTPUTS + (_LEDGER if index == 0 else ""))
            conn.executemany(
                "INSERT INTO meta (name, value) VALUES (?, ?)",
                [
                    ("format", FORMAT),
                    ("store_id", store_id),
                    ("partition", str(index)),
                    ("partitions", str(partitions)),
                ],
            )
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        made.append((making, path))
    try:
        for making, path in reversed(made):
            try:
                os.link(making, path)  # never replaces: a concurrent creator's file wins
            except FileExistsError:
                raise RecoveryError(
                    f"{root} already holds a recovery store (another process created it "
                    "at the same time); open it instead"
                ) from None
    finally:
        for making, _ in made:
            making.unlink(missing_ok=True)
    return RecoveryStore(root)


@dataclass(frozen=True)
class Execution:
    """One run of a flow against a store: its number and the epoch it resumes from."""

    ex_num: int
    resume_epoch: int
    worker_count: int


class RecoveryStore:
    """An opened store: validates its partitions; methods open their own connections.

    A ``RecoveryStore`` object is cheap and holds no connection, so it can be
    pickled to another process; :meth:`writer` gives one worker its own
    connections.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.partitions, self.store_id = self._validate()

    def __repr__(self) -> str:
        return f"RecoveryStore({str(self.directory)!r}, partitions={self.partitions})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (RecoveryStore, (str(self.directory),))

    # -- opening ----------------------------------------------------------------

    def _validate(self) -> tuple[int, str]:
        root = self.directory
        if not root.is_dir():
            raise RecoveryError(
                f"no recovery store at {root}: create one with `python -m timelypy.recovery "
                f"create {root} --partitions N`, or use RecoveryConfig(..., create=N)"
            )
        files = sorted(root.glob("part-*.sqlite3"))
        if not files:
            raise RecoveryError(
                f"{root} holds no partition files (part-N.sqlite3): create the store with "
                f"`python -m timelypy.recovery create {root} --partitions N`"
            )
        metas: dict[Path, dict[str, str]] = {}
        for path in files:
            try:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_SECONDS)
                try:
                    metas[path] = dict(conn.execute("SELECT name, value FROM meta").fetchall())
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                raise RecoveryError(
                    f"{path} is not a timelypy recovery partition ({exc})"
                ) from None
        counts = {meta.get("partitions") for meta in metas.values()}
        ids = {meta.get("store_id") for meta in metas.values()}
        formats = {meta.get("format") for meta in metas.values()}
        if formats != {FORMAT}:
            raise RecoveryError(
                f"{root}: partition format(s) {sorted(map(str, formats))}, this code reads "
                f"{FORMAT!r}"
            )
        if len(ids) != 1 or len(counts) != 1:
            raise RecoveryError(
                f"{root}: the partition files come from different stores "
                f"({len(ids)} store id(s), partition counts {sorted(map(str, counts))}); "
                "a store's files must not be mixed with another's"
            )
        count = int(next(iter(counts)) or 0)
        expected = {path.name for path in partition_paths(root, count)}
        names = {path.name for path in files}
        for path, meta in metas.items():
            if path.name != f"part-{meta.get('partition')}.sqlite3":
                raise RecoveryError(
                    f"{path} says it is partition {meta.get('partition')} of the store; "
                    "partition files must not be renamed"
                )
        if names != expected:
            problems = []
            if expected - names:
                problems.append(f"missing {', '.join(sorted(expected - names))}")
            if names - expected:
                problems.append(f"extra {', '.join(sorted(names - expected))}")
            raise RecoveryError(
                f"{root}: the store has {count} partitions, but {'; '.join(problems)}"
            )
        return count, str(next(iter(ids)))

    @contextlib.contextmanager
    def _ledger(self) -> Iterator[sqlite3.Connection]:
        conn = _connect(partition_paths(self.directory, self.partitions)[0])
        try:
            yield conn
        finally:
            conn.close()

    def _each_partition(self) -> Iterator[sqlite3.Connection]:
        for path in partition_paths(self.directory, self.partitions):
            conn = _connect(path)
            try:
                yield conn
            finally:
                conn.close()

    # -- executions ---------------------------------------------------------------

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Hold the store's execution lock while the block runs; refuse if another holds it.

        The lock is an OS lock (``flock``) on ``execution.lock`` in the store
        directory, held by the process that starts an execution: the
        operating system releases it when that process exits, even by
        ``kill -9``, so a crashed execution never blocks the next one.
        """
        import fcntl

        path = self.directory / "execution.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                raise RecoveryError(
                    f"another execution is running against the recovery store "
                    f"{self.directory} (process {holder}); executions never overlap: stop "
                    "it, or wait for it to end, before starting a new one"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def executions(self) -> list[Execution]:
        """Every execution so far, oldest first."""
        with self._ledger() as conn:
            rows = conn.execute(
                "SELECT ex_num, resume_epoch, worker_count FROM executions ORDER BY ex_num"
            ).fetchall()
        return [Execution(*row) for row in rows]

    def fronts(self, ex_num: int) -> dict[int, tuple[int, bool]]:
        """Worker index -> (frontier, done) recorded in execution ``ex_num``."""
        with self._ledger() as conn:
            rows = conn.execute(
                "SELECT worker_index, frontier, done FROM fronts WHERE ex_num = ?", (ex_num,)
            ).fetchall()
        return {index: (frontier, bool(done)) for index, frontier, done in rows}

    def resume_epoch(self) -> int:
        """The epoch a new execution resumes from: the last execution's cluster frontier.

        The smallest frontier of the last execution's workers (a worker that
        recorded none is still at that execution's resume epoch); if every
        worker's input had ended, the largest of their frontiers, so that a
        continuation starts after everything already seen.  0 for a new store.
        """
        with self._ledger() as conn:
            return self._resume_epoch(conn)

    @staticmethod
    def _resume_epoch(conn: sqlite3.Connection) -> int:
        last = conn.execute(
            "SELECT ex_num, resume_epoch, worker_count FROM executions ORDER BY ex_num DESC LIMIT 1"
        ).fetchone()
        if last is None:
            return 0
        ex_num, resume, workers = last
        rows = conn.execute(
            "SELECT frontier, done FROM fronts WHERE ex_num = ?", (ex_num,)
        ).fetchall()
        if len(rows) == workers and all(done for _, done in rows):
            return int(max([resume, *(frontier for frontier, _ in rows)]))
        frontiers = [frontier for frontier, done in rows if not done]
        if len(rows) < workers:
            frontiers.append(resume)
        return int(max(resume, min(frontiers)))

    def begin_execution(self, worker_count: int) -> Execution:
        """Start the next execution: number it, compute its resume epoch, drop its future.

        Snapshots at or after the resume epoch belong to a failed execution's
        unfinished epochs; they are deleted so that no later resume can mix
        them with the new execution's.  Garbage is collected too.
        """
        with self._ledger() as conn, _immediate(conn):
            resume = self._resume_epoch(conn)
            (last,) = conn.execute("SELECT COALESCE(MAX(ex_num), 0) FROM executions").fetchone()
            execution = Execution(last + 1, resume, worker_count)
            conn.execute(
                "INSERT INTO executions (ex_num, worker_count, resume_epoch, started) "
                "VALUES (?, ?, ?, ?)",
                (execution.ex_num, worker_count, resume, time.time()),
            )
        for part in self._each_partition():
            part.execute("DELETE FROM snaps WHERE epoch >= ?", (resume,))
            part.execute("DELETE FROM outs WHERE epoch >= ?", (resume,))
        self.collect_garbage()
        return execution

    # -- snapshots ----------------------------------------------------------------

    def load(
        self, step_id: str, before: int, worker_index: int = 0, worker_count: int = 1
    ) -> dict[str, Any]:
        """The state of every key of ``step_id`` as of epoch ``before``, for one worker.

        The latest snapshot of each key before ``before``; a discarded key is
        absent.  Only the keys routed to ``worker_index`` of ``worker_count``.
        """
        states: dict[str, Any] = {}
        query = (
            "SELECT state_key, state FROM snaps AS s WHERE step_id = ? AND key_hash % ? = ? "
            "AND epoch = (SELECT MAX(epoch) FROM snaps WHERE step_id = s.step_id "
            "AND state_key = s.state_key AND epoch < ?)"
        )
        for conn in self._each_partition():
            for state_key, blob in conn.execute(
                query, (step_id, worker_count, worker_index, before)
            ):
                if blob is not None:
                    states[state_key] = pickle.loads(blob)
        return states

    def load_keys(self, step_id: str, keys: Iterable[str], before: int) -> dict[str, Any]:
        """The state of each of ``keys`` of ``step_id`` as of epoch ``before`` (if it has one).

        The latest snapshot of each key before ``before``; a key with none,
        or whose latest is a discard, is absent.
        """
        states: dict[str, Any] = {}
        wanted = sorted(set(keys))
        if not wanted:
            return states
        paths = partition_paths(self.directory, self.partitions)
        for index, path in enumerate(paths):
            mine = [key for key in wanted if key_hash(key) % self.partitions == index]
            if not mine:
                continue
            conn = _connect(path)
            try:
                for key in mine:
                    row = conn.execute(
                        "SELECT state FROM snaps WHERE step_id = ? AND state_key = ? "
                        "AND epoch < ? ORDER BY epoch DESC LIMIT 1",
                        (step_id, key, before),
                    ).fetchone()
                    if row is not None and row[0] is not None:
                        states[key] = pickle.loads(row[0])
            finally:
                conn.close()
        return states

    def replay_outputs(
        self,
        run: str,
        before: int,
        worker_index: int,
        worker_count: int,
        after: tuple[int, int] = (0, 0),
        limit: int = 256,
    ) -> list[tuple[tuple[int, int], bytes]]:
        """The logged output batches of ``run`` before epoch ``before`` for one worker.

        Batches logged by worker ``w`` go to worker ``w % worker_count``;
        ``after`` (the position of the last batch already read: partition,
        seq) and ``limit`` page through them.
        """
        rows: list[tuple[tuple[int, int], bytes]] = []
        start_part, start_seq = after
        for index, path in enumerate(partition_paths(self.directory, self.partitions)):
            if index < start_part:
                continue
            conn = _connect(path)
            try:
                found = conn.execute(
                    "SELECT seq, items FROM outs WHERE run = ? AND epoch < ? AND worker % ? = ? "
                    "AND seq > ? ORDER BY seq LIMIT ?",
                    (
                        run,
                        before,
                        worker_count,
                        worker_index,
                        start_seq if index == start_part else 0,
                        limit - len(rows),
                    ),
                ).fetchall()
            finally:
                conn.close()
            rows.extend(((index, seq), blob) for seq, blob in found)
            if len(rows) >= limit:
                break
        return rows

    def drop_outputs(self, run: str) -> None:
        """Forget the logged output batches of ``run`` (it ended)."""
        for conn in self._each_partition():
            conn.execute("DELETE FROM outs WHERE run = ?", (run,))

    def snapshots(self, step_id: str | None = None) -> list[tuple[str, str, int, Any]]:
        """Every stored snapshot ``(step_id, state_key, epoch, state)``, sorted (tests, tools)."""
        out: list[tuple[str, str, int, Any]] = []
        for conn in self._each_partition():
            rows = conn.execute(
                "SELECT step_id, state_key, epoch, state FROM snaps"
                + (" WHERE step_id = ?" if step_id is not None else ""),
                (step_id,) if step_id is not None else (),
            ).fetchall()
            out.extend(
                (s, k, e, None if blob is None else pickle.loads(blob)) for s, k, e, blob in rows
            )
        return sorted(out, key=lambda row: row[:3])

    def collect_garbage(self) -> int:
        """Delete the snapshots no resume can need; return how many were deleted.

        A resume starts at the current resume epoch ``R`` or later, so of a
        key's snapshots before ``R`` only the latest is needed, and not even
        that one if it is a discard.  Snapshots at ``R`` and after stay.
        """
        resume = self.resume_epoch()
        deleted = 0
        for conn in self._each_partition():
            with _immediate(conn):
                cur = conn.execute(
                    "DELETE FROM snaps WHERE epoch < ? AND epoch < (SELECT MAX(epoch) FROM snaps "
                    "AS t WHERE t.step_id = snaps.step_id AND t.state_key = snaps.state_key "
                    "AND t.epoch < ?)",
                    (resume, resume),
                )
                deleted += cur.rowcount
                cur = conn.execute("DELETE FROM snaps WHERE epoch < ? AND state IS NULL", (resume,))
                deleted += cur.rowcount
        return deleted

    def writer(self, ex_num: int, worker_index: int) -> SnapshotWriter:
        """A worker's writer of snapshots and frontiers (its own connections)."""
        return SnapshotWriter(self, ex_num, worker_index)


# A key's snapshots older than its latest before the resume epoch (and a discard as the
# latest before it): (step_id, state_key, resume) twice.
_DROP_SUPERSEDED = (
    "DELETE FROM snaps WHERE step_id = ?1 AND state_key = ?2 AND epoch < ?3 AND ("
    "epoch < (SELECT MAX(epoch) FROM snaps WHERE step_id = ?1 AND state_key = ?2 AND epoch < ?3)"
    " OR state IS NULL)"
)

#: A snapshot as stored: ``(step_id, state_key, epoch, key_hash, pickled state or None)``.
SnapshotRow = tuple[str, str, int, int, bytes | None]


def snapshot_rows(
    step_id: str, epoch: int, states: Iterable[tuple[str, Any]], worker_index: int
) -> list[SnapshotRow]:
    """The rows snapshotting ``(state_key, state)`` of ``step_id`` at the end of ``epoch``.

    States are pickled now (they may change once the epoch is over); a
    state that cannot be pickled is a :class:`RecoveryError` naming the
    step, key, epoch and worker.
    """
    rows: list[SnapshotRow] = []
    for state_key, state in states:
        try:
            blob = None if state is None else pickle.dumps(state, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise RecoveryError(
                f"step {step_id!r} on worker {worker_index}: the state of key "
                f"{state_key!r} at epoch {epoch} cannot be snapshotted ({exc}); keep "
                "picklable state in stateful steps"
            ) from exc
        rows.append((step_id, state_key, epoch, key_hash(state_key), blob))
    return rows


class SnapshotWriter:
    """One worker's snapshots and frontier, committed in batches.

    :meth:`snapshot` queues rows (serialised at once: the state may change
    after the epoch closes); :meth:`commit` writes the queued snapshots to
    their partitions, then the worker's frontier to the ledger, so a
    committed frontier never runs ahead of the snapshots it covers.
    """

    def __init__(self, store: RecoveryStore, ex_num: int, worker_index: int) -> None:
        self.store = store
        self.ex_num = ex_num
        self.worker_index = worker_index
        self._conns = [
            _connect(path) for path in partition_paths(store.directory, store.partitions)
        ]
        self._pending: list[list[SnapshotRow]] = [[] for _ in self._conns]
        self._outputs: list[tuple[str, int, int, bytes]] = []
        # per partition: (step_id, state_key) written since the last trim
        self._superseded: list[set[tuple[str, str]]] = [set() for _ in self._conns]
        self._next_trim = time.monotonic() + TRIM_SECONDS
        self.committed: tuple[int, bool] | None = None

    def snapshot(self, step_id: str, epoch: int, states: Iterable[tuple[str, Any]]) -> None:
        """Queue ``(state_key, state)`` of ``step_id`` at the end of ``epoch`` (None: discard)."""
        self.queue(snapshot_rows(step_id, epoch, states, self.worker_index))

    def queue(self, rows: Iterable[SnapshotRow]) -> None:
        """Queue snapshot rows made by :func:`snapshot_rows` (perhaps in another process)."""
        pending, parts, superseded = self._pending, self.store.partitions, self._superseded
        for row in rows:
            part = row[3] % parts
            pending[part].append(row)
            superseded[part].add((row[0], row[1]))

    def log_output(self, run: str, epoch: int, items: bytes) -> None:
        """Queue a pickled batch of items captured at ``epoch`` for ``run``'s output log."""
        self._outputs.append((run, epoch, self.worker_index, items))

    def commit(self, frontier: int, done: bool = False) -> None:
        """Write the queued snapshots and output batches, then record this worker's frontier."""
        for conn, rows in zip(self._conns, self._pending, strict=True):
            if rows:
                with _immediate(conn):
                    conn.executemany("INSERT OR REPLACE INTO snaps VALUES (?, ?, ?, ?, ?)", rows)
                rows.clear()
        now = time.monotonic()
        if done or now >= self._next_trim:
            # The keys written since the last trim keep only what a resume can need: of
            # their snapshots before the epoch a resume would start at now, the latest.
            # (Every TRIM_SECONDS, not every commit: a key written in many epochs is
            # trimmed once, and the table stays about TRIM_SECONDS of snapshots big.)
            self._next_trim = now + TRIM_SECONDS
            resume = RecoveryStore._resume_epoch(self._conns[0])
            for conn, keys in zip(self._conns, self._superseded, strict=True):
                if keys:
                    with _immediate(conn):
                        conn.executemany(_DROP_SUPERSEDED, [(*key, resume) for key in keys])
                    keys.clear()
        if self._outputs:
            conn = self._conns[self.worker_index % len(self._conns)]
            with _immediate(conn):
                conn.executemany(
                    "INSERT INTO outs (run, epoch, worker, items) VALUES (?, ?, ?, ?)",
                    self._outputs,
                )
            self._outputs.clear()
        if self.committed != (frontier, done):
            self._conns[0].execute(
                "INSERT OR REPLACE INTO fronts (ex_num, worker_index, frontier, done) "
                "VALUES (?, ?, ?, ?)",
                (self.ex_num, self.worker_index, frontier, int(done)),
            )
            self.committed = (frontier, done)

    def close(self) -> None:
        """Close the connections (queued snapshots not committed are dropped)."""
        for conn in self._conns:
            conn.close()


def describe(store: RecoveryStore) -> Sequence[str]:
    """Lines describing ``store``: partitions, executions and their fronts, snapshot counts."""
    lines = [f"{store.directory}: {store.partitions} partition(s), store {store.store_id}"]
    for ex in store.executions():
        fronts = store.fronts(ex.ex_num)
        shown = ", ".join(
            f"{w}: {f}{' (done)' if d else ''}" for w, (f, d) in sorted(fronts.items())
        )
        lines.append(
            f"execution {ex.ex_num}: {ex.worker_count} worker(s), resumed at epoch "
            f"{ex.resume_epoch}; frontiers {{{shown}}}"
        )
    lines.append(f"resume epoch for the next execution: {store.resume_epoch()}")
    count = sum(
        conn.execute("SELECT COUNT(*) FROM snaps").fetchone()[0] for conn in store._each_partition()
    )
    lines.append(f"snapshots: {count}")
    return lines
