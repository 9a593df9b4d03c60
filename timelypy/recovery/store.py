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

**What keeps a resume exact** (:mod:`timelypy.recovery._sqlite` holds the
plumbing):

* A frontier is never durable before the snapshots it covers: the other
  partitions commit with ``synchronous=FULL`` before the frontier is
  written to partition 0, and every commit of a worker's snapshots to a
  partition also counts itself in that partition's ``marks(ex_num,
  worker_index, seq)``; the frontier row records the counts it covers
  (``fronts.marks``).  :meth:`RecoveryStore.begin_execution` compares them
  and refuses a store whose partition lost committed snapshots (copied
  without its ``-wal`` files, or restored from backups of different
  moments) instead of resuming with wrong state.
* Every partition names the current execution (a fence); a worker's
  commit to a partition of a later execution is refused, so a paused
  process of an old execution writes nothing once a new one began.
* Every SQLite error is a :class:`~timelypy.errors.RecoveryError` naming
  the partition file and the cause; :meth:`RecoveryStore.begin_execution`
  reads every partition before it writes anything, so a damaged store is
  refused before an execution is recorded.
* Snapshots are pickles: the store is as trusted as the code that runs
  against it.  It is created private to its owner (a ``0700`` directory,
  ``0600`` files).
"""

from __future__ import annotations

import contextlib
import json
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
from timelypy.recovery._sqlite import (
    BUSY_SECONDS,
    Connection,
    check_fence,
    connect,
    immediate,
    private_file,
    reading,
    set_fence,
)

__all__ = [
    "Execution",
    "RecoveryStore",
    "create_store",
    "key_hash",
]

#: The store format this code reads and writes.
FORMAT = "timelypy-recovery-2"
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

_MARKS = """
CREATE TABLE IF NOT EXISTS marks (
    ex_num INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (ex_num, worker_index)
);
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


def _connect(path: Path) -> Connection:
    """A connection to a partition: ``synchronous=FULL`` but for partition 0 (see above)."""
    return connect(path, durable=path.name != "part-0.sqlite3")


def _upgrade(conn: Connection, index: int) -> None:
    """Add what this version keeps to a partition made by an earlier one (in a transaction)."""
    conn.execute(_MARKS)
    if index == 0:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(fronts)")]
        if "marks" not in columns:
            conn.execute("ALTER TABLE fronts ADD COLUMN marks TEXT")


def create_store(directory: str | os.PathLike[str], partitions: int) -> RecoveryStore:
    """Create an empty store of ``partitions`` SQLite files in ``directory`` (made if absent).

    Refuses a directory that already holds partition files.
    """
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise RecoveryError(f"a store needs a positive number of partitions, got {partitions!r}")
    root = Path(directory)
    if not root.exists():
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Snapshots are pickles, run on resume: nobody else may read or write them.
        with contextlib.suppress(OSError):
            os.chmod(root, 0o700)
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
        try:
            private_file(making)
        except OSError as exc:
            raise RecoveryError(f"cannot create the recovery store file {making}: {exc}") from None
        conn = _connect(making)
        try:
            conn.executescript(_SCHEMA + _OUTPUTS + _MARKS + (_LEDGER if index == 0 else ""))
            if index == 0:
                conn.execute("ALTER TABLE fronts ADD COLUMN marks TEXT")
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
        #: The step IDs whose state was loaded through this object (:meth:`load`,
        #: :meth:`load_keys`): the steps of the flow that claim stored state.
        self.claimed: set[str] = set()

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
    def _ledger(self) -> Iterator[Connection]:
        path = partition_paths(self.directory, self.partitions)[0]
        conn = _connect(path)
        try:
            with reading(path, "reading the ledger"):
                yield conn
        finally:
            conn.close()

    def _each_partition(self) -> Iterator[Connection]:
        """Each partition's connection in turn (the caller wraps its use in ``reading``)."""
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
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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
        them with the new execution's.  Every partition is read first (its
        commit marks checked against the ledger, its snapshots scanned), so
        a partition that lost committed snapshots, or is damaged, is refused
        with a :class:`RecoveryError` naming it before anything is written;
        then every partition is fenced to the new execution (an older
        execution's worker can write nothing more), and the execution is
        recorded.  Garbage is collected too.
        """
        paths = partition_paths(self.directory, self.partitions)
        with self._ledger() as ledger, immediate(ledger, "beginning an execution"):
            _upgrade(ledger, 0)
            resume = self._resume_epoch(ledger)
            (last,) = ledger.execute("SELECT COALESCE(MAX(ex_num), 0) FROM executions").fetchone()
            execution = Execution(last + 1, resume, worker_count)
            needed = self._needed_marks(ledger)
            others = [_connect(path) for path in paths[1:]]
            try:
                for index, conn in enumerate(others, start=1):
                    with reading(conn.path, "checking the partition"):
                        self._check_partition(conn, index, needed, paths[0])
                for conn in others:
                    with immediate(conn, "beginning an execution"):
                        _upgrade(conn, 1)
                        set_fence(conn, execution.ex_num)
                        conn.execute("DELETE FROM snaps WHERE epoch >= ?", (resume,))
                        conn.execute("DELETE FROM outs WHERE epoch >= ?", (resume,))
            finally:
                for conn in others:
                    conn.close()
            ledger.execute("SELECT COUNT(*) FROM snaps WHERE epoch >= ?", (resume,)).fetchone()
            set_fence(ledger, execution.ex_num)
            ledger.execute("DELETE FROM snaps WHERE epoch >= ?", (resume,))
            ledger.execute("DELETE FROM outs WHERE epoch >= ?", (resume,))
            ledger.execute(
                "INSERT INTO executions (ex_num, worker_count, resume_epoch, started) "
                "VALUES (?, ?, ?, ?)",
                (execution.ex_num, worker_count, resume, time.time()),
            )
        self.collect_garbage()
        return execution

    @staticmethod
    def _needed_marks(ledger: Connection) -> dict[int, dict[tuple[int, int], int]]:
        """Partition -> (ex_num, worker) -> the commit count its latest frontier covers."""
        needed: dict[int, dict[tuple[int, int], int]] = {}
        for ex_num, worker, marks in ledger.execute(
            "SELECT ex_num, worker_index, marks FROM fronts WHERE marks IS NOT NULL"
        ):
            for index, seq in enumerate(json.loads(marks)):
                if seq:
                    needed.setdefault(index, {})[(ex_num, worker)] = seq
        return needed

    @staticmethod
    def _check_partition(
        conn: Connection, index: int, needed: dict[int, dict[tuple[int, int], int]], ledger: Path
    ) -> None:
        """Refuse partition ``index`` if it lacks commits the ledger covers; scan its snapshots."""
        want = needed.get(index, {})
        if want:
            have = dict(
                ((ex_num, worker), seq)
                for ex_num, worker, seq in conn.execute(
                    "SELECT ex_num, worker_index, seq FROM marks"
                )
            )
            for (ex_num, worker), seq in sorted(want.items()):
                if have.get((ex_num, worker), 0) < seq:
                    raise RecoveryError(
                        f"recovery store partition {conn.path} lacks snapshots that its ledger "
                        f"({ledger.name}) says were committed: worker {worker} of execution "
                        f"{ex_num} committed {seq} time(s) to it, the file holds "
                        f"{have.get((ex_num, worker), 0)}. The partition lost committed writes "
                        "(copied without its -wal file, or restored from a backup of another "
                        "moment than the other partitions); resuming would give wrong state. "
                        "Restore the whole store from one backup (docs/recovery.md, 'Backing "
                        "up a store')."
                    )
        # Reading every snapshot page finds a damaged file before anything is written.
        conn.execute("SELECT COUNT(*), SUM(LENGTH(state)) FROM snaps").fetchone()

    # -- which steps the stored state belongs to ---------------------------------------

    def stored_steps(self, before: int) -> set[str]:
        """The step IDs with a snapshot before epoch ``before`` (what a resume would restore)."""
        steps: set[str] = set()
        for conn in self._each_partition():
            with reading(conn.path, "listing the stored steps"):
                steps.update(
                    row[0]
                    for row in conn.execute(
                        "SELECT DISTINCT step_id FROM snaps WHERE epoch < ?", (before,)
                    )
                )
        return steps

    def drop_steps(self, step_ids: Iterable[str]) -> int:
        """Delete every snapshot of ``step_ids``; return how many were deleted."""
        steps = sorted(set(step_ids))
        deleted = 0
        for conn in self._each_partition():
            with immediate(conn, "dropping state no step claims"):
                for step_id in steps:
                    deleted += conn.execute(
                        "DELETE FROM snaps WHERE step_id = ?", (step_id,)
                    ).rowcount
        return deleted

    # -- snapshots ----------------------------------------------------------------

    def load(
        self, step_id: str, before: int, worker_index: int = 0, worker_count: int = 1
    ) -> dict[str, Any]:
        """The state of every key of ``step_id`` as of epoch ``before``, for one worker.

        The latest snapshot of each key before ``before``; a discarded key is
        absent.  Only the keys routed to ``worker_index`` of ``worker_count``.
        The step counts as claiming its stored state (:attr:`claimed`).
        """
        self.claimed.add(step_id)
        states: dict[str, Any] = {}
        query = (
            "SELECT state_key, state FROM snaps AS s WHERE step_id = ? AND key_hash % ? = ? "
            "AND epoch = (SELECT MAX(epoch) FROM snaps WHERE step_id = s.step_id "
            "AND state_key = s.state_key AND epoch < ?)"
        )
        for conn in self._each_partition():
            with reading(conn.path, f"loading the state of step {step_id!r}"):
                found = conn.execute(query, (step_id, worker_count, worker_index, before))
                for state_key, blob in found:
                    if blob is not None:
                        states[state_key] = pickle.loads(blob)
        return states

    def load_keys(self, step_id: str, keys: Iterable[str], before: int) -> dict[str, Any]:
        """The state of each of ``keys`` of ``step_id`` as of epoch ``before`` (if it has one).

        The latest snapshot of each key before ``before``; a key with none,
        or whose latest is a discard, is absent.  The step counts as
        claiming its stored state (:attr:`claimed`).
        """
        self.claimed.add(step_id)
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
                with reading(path, f"loading the state of step {step_id!r}"):
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
                with reading(path, "replaying logged output"):
                    found = conn.execute(
                        "SELECT seq, items FROM outs WHERE run = ? AND epoch < ? "
                        "AND worker % ? = ? AND seq > ? ORDER BY seq LIMIT ?",
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
            with reading(conn.path, "dropping logged output"):
                conn.execute("DELETE FROM outs WHERE run = ?", (run,))

    def snapshots(self, step_id: str | None = None) -> list[tuple[str, str, int, Any]]:
        """Every stored snapshot ``(step_id, state_key, epoch, state)``, sorted (tests, tools)."""
        out: list[tuple[str, str, int, Any]] = []
        for conn in self._each_partition():
            with reading(conn.path, "reading snapshots"):
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
            with immediate(conn, "collecting garbage"):
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


def _keep_untrimmed(keys: dict[tuple[str, str], int], resume: int) -> None:
    """After a trim at ``resume``: forget the keys it finished, keep those written since.

    A key whose latest snapshot (or discard) is at ``resume`` or later kept
    rows the trim could not drop (a resume may still need them); it is
    trimmed again next time, or its rows would stay until the next
    execution's garbage collection (a store that grows with every key a
    long run ever saw).
    """
    for key in [key for key, epoch in keys.items() if epoch < resume]:
        del keys[key]


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
    committed frontier never runs ahead of the snapshots it covers.  Every
    write checks first that its execution is still the store's current one
    (else a :class:`RecoveryError`, nothing written).
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
        # per partition: (step_id, state_key) written since the last trim, or written
        # before it at an epoch it could not trim yet -> the latest epoch written
        self._superseded: list[dict[tuple[str, str], int]] = [{} for _ in self._conns]
        self._next_trim = time.monotonic() + TRIM_SECONDS
        # per partition: how many commits this worker made to it in this execution
        self._marks = [0] * len(self._conns)
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
            written = superseded[part]
            key = (row[0], row[1])
            if written.get(key, -1) < row[2]:
                written[key] = row[2]

    def log_output(self, run: str, epoch: int, items: bytes) -> None:
        """Queue a pickled batch of items captured at ``epoch`` for ``run``'s output log."""
        self._outputs.append((run, epoch, self.worker_index, items))

    def _mark(self, conn: Connection, index: int) -> None:
        """Count one more commit of this worker to partition ``index`` (in its transaction)."""
        if index == 0:
            return  # the ledger's own partition: its frontier commits with these rows
        self._marks[index] += 1
        conn.execute(
            "INSERT OR REPLACE INTO marks (ex_num, worker_index, seq) VALUES (?, ?, ?)",
            (self.ex_num, self.worker_index, self._marks[index]),
        )

    def commit(self, frontier: int, done: bool = False) -> None:
        """Write the queued snapshots and output batches, then record this worker's frontier.

        The other partitions first (each synced before its commit returns),
        then partition 0: its snapshots and the frontier in one transaction,
        with the commit counts the frontier covers.
        """
        ex_num = self.ex_num
        conns, pending = self._conns, self._pending
        outputs, out_part = self._outputs, self.worker_index % len(conns)
        for index in range(1, len(conns)):
            rows = pending[index]
            logged = outputs if index == out_part and outputs else None
            if rows or logged:
                conn = conns[index]
                with immediate(conn, f"committing worker {self.worker_index}'s snapshots"):
                    check_fence(conn, ex_num)
                    if rows:
                        conn.executemany(
                            "INSERT OR REPLACE INTO snaps VALUES (?, ?, ?, ?, ?)", rows
                        )
                    if logged:
                        conn.executemany(
                            "INSERT INTO outs (run, epoch, worker, items) VALUES (?, ?, ?, ?)",
                            logged,
                        )
                    self._mark(conn, index)
                rows.clear()
                if logged:
                    outputs.clear()
        now = time.monotonic()
        if done or now >= self._next_trim:
            # The keys written since the last trim keep only what a resume can need: of
            # their snapshots before the epoch a resume would start at now, the latest.
            # (Every TRIM_SECONDS, not every commit: a key written in many epochs is
            # trimmed once, and the table stays about TRIM_SECONDS of snapshots big.)
            self._next_trim = now + TRIM_SECONDS
            with reading(conns[0].path, "reading the ledger"):
                resume = RecoveryStore._resume_epoch(conns[0])
            for index in range(1, len(conns)):
                keys = self._superseded[index]
                if keys:
                    conn = conns[index]
                    with immediate(conn, "trimming superseded snapshots"):
                        check_fence(conn, ex_num)
                        conn.executemany(_DROP_SUPERSEDED, [(*key, resume) for key in keys])
                    _keep_untrimmed(keys, resume)
        else:
            resume = None
        rows = pending[0]
        logged = outputs if out_part == 0 and outputs else None
        trim = self._superseded[0] if resume is not None else None
        if rows or logged or trim or self.committed != (frontier, done):
            conn = conns[0]
            with immediate(conn, f"committing worker {self.worker_index}'s frontier"):
                check_fence(conn, ex_num)
                if rows:
                    conn.executemany("INSERT OR REPLACE INTO snaps VALUES (?, ?, ?, ?, ?)", rows)
                if logged:
                    conn.executemany(
                        "INSERT INTO outs (run, epoch, worker, items) VALUES (?, ?, ?, ?)", logged
                    )
                if trim:
                    conn.executemany(_DROP_SUPERSEDED, [(*key, resume) for key in trim])
                conn.execute(
                    "INSERT OR REPLACE INTO fronts (ex_num, worker_index, frontier, done, marks) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (ex_num, self.worker_index, frontier, int(done), json.dumps(self._marks)),
                )
            rows.clear()
            if logged:
                outputs.clear()
            if trim:
                assert resume is not None
                _keep_untrimmed(trim, resume)
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
