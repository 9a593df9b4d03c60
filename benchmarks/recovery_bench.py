r"""What recovery costs: timelypy.flow and bytewax 0.21.1, each with recovery off and on.

    python -m benchmarks.recovery_bench [--quick] [--repeat N] [--markdown]
                                        [--no-bytewax] [--workload NAME ...]
                                        [--dir DIR] [--profile [--top N]]

Every candidate does the same work on the same data in the same run; they are
timed interleaved (one untimed warm-up round, then ``--repeat`` rounds,
``gc.collect()`` before each call), and the results of the warm-up and of the
last timed round are checked before any time is quoted: the outputs against
plain Python's, and the recovery store a run left behind against what it must
hold. Quote the medians and their ratios, not the absolute times.

The flow. ``flow_bench``'s ``stateful_map`` workload: a running count per
word over the corpus's words (``benchmarks._data``) as ``(word, 1)`` items,
one output ``(word, count)`` per item, with the same ``builder`` and
``running_count``. timelypy: ``stateful_map("running", builder,
running_count)`` then ``capture()``, ``run(flow, pairs)`` on one worker;
bytewax: ``op.stateful_map("running", ...)`` then ``op.output`` on one worker
(``bytewax.testing.run_main``); plain Python: ``flow_bench``'s dict loop, the
limit. The items are split into consecutive epochs of equal size (item ``i``
is in epoch ``i // size``), given to timelypy as ``(epoch, item)`` pairs:

- ``1000_epochs``: the 2,000,000 words in 1,000 epochs of 2,000 items
  (``--quick``: 200,000 words, 1,000 epochs of 200);
- ``small_epochs``: the first 20,000 words in 2,000 epochs of 10 items
  (``--quick``: 2,000 words, 200 epochs), where the cost per epoch shows.

Recovery. ``timelypy recovery``: ``run(flow, pairs,
recovery_config=RecoveryConfig(dir))`` with the default ``commit_interval``
(0.05 s: each worker commits the snapshots of the epochs closed since its last
commit, and its frontier, at most every 50 ms); ``timelypy recovery commit
0``: the same with ``commit_interval=0``, a commit at every check (about one
per read of the input), closer to bytewax's commit per epoch. ``bytewax
recovery``: ``run_main(flow, epoch_interval=timedelta(0),
recovery_config=bytewax.recovery.RecoveryConfig(dir))``. Each timed run gets
a fresh store of one partition, made before the clock starts
(``timelypy.recovery.create_store(dir, 1)``, ``bytewax.recovery.init_db_dir(dir,
1)``) in a new directory under ``--dir`` (default: the system's temporary
directory; put it on a real disk, since bytewax syncs its commits) and removed
after the run. Inputs are plain lists read by one worker and keep no resume
position in either engine (timelypy's ``PairsInput``, bytewax's
``DynamicSource``), so only the stateful step's state is snapshotted.

bytewax's epochs. bytewax 0.21 has no user epochs: its input closes an epoch
once ``epoch_interval`` of wall time has passed, checked after each batch it
reads (``src/inputs.rs``), and every epoch is a snapshot of the keys changed
in it plus a commit. A time-based interval would make its epoch count depend
on the machine's speed, so the bytewax candidates (off and on) read
``bytewax_peer.list_source`` batches of exactly one timelypy epoch's items
with ``epoch_interval=0``: every batch is its own epoch, and bytewax takes the
same number of snapshots as timelypy has epochs (plus one final epoch in
which its input ends; the check reads bytewax's recorded frontier to confirm
the count). Note two differences of design that the figures include:
bytewax's input reads the next batch only once the previous epoch has passed
its probe, recovery writes included (one epoch in flight), while timelypy
keeps reading up to ``MAX_OPEN_EPOCHS`` ahead; and bytewax sets no
``synchronous`` pragma, so its WAL commits use SQLite's default (FULL, a sync
per commit: ``strace -f -c`` counted 321 ``fsync`` calls in a 100-epoch run),
where timelypy's connections use ``synchronous=NORMAL`` (16 ``fdatasync`` in
the same run: no sync at commit, durable against a crashed process but not a
crashed machine).  So that the comparison is at equal durability too, two
more candidates sync every commit (``synchronous=FULL``, which timelypy has
no setting for: :func:`synced_commits` opens the store's partitions that
way): ``timelypy recovery commit 0, synced`` (a commit at every check, each
synced: bytewax's durability, the row to compare with ``bytewax recovery``)
and ``timelypy recovery synced`` (the 50 ms group commit, each commit
synced).  The ``speed vs bytewax`` of the unsynced rows compares unequal
durability and says so only through their names.

Checks. Outputs are compared as multisets with plain Python's:
``(epoch, word, count)`` for timelypy, ``(word, count)`` for bytewax (whose
outputs carry no epoch). A store must hold every word's final count as its
latest snapshot (timelypy: ``RecoveryStore.load``; bytewax: its ``snaps``
table, unpickled) and the run's end: one execution whose worker is done at
frontier = the number of epochs (timelypy), or a worker frontier of epochs
+ 2 (bytewax starts at epoch 1 and ends with the input's last epoch).

Columns: median wall time; items/s and epochs/s at the median; **recovery
cost**, the median with recovery / the same engine's median without (> 1:
slower); **speed vs bytewax**, bytewax's median with the same recovery
setting / the candidate's (> 1: faster); **busy**, CPU time / wall time by
medians (below 1: the process waited, e.g. for the disk); **store**, the
store's files on disk after the last checked run; and the spread.

``--profile`` runs ``timelypy recovery`` of each workload once under cProfile
(after a warm-up) in its worker thread, and prints the top functions by own
time and the inclusive share of each recovery-store function.

What the profile shows (``--profile``, full size, 2026-11-24, 2 cores). In
``1000_epochs`` SQLite's ``execute`` and ``executemany`` are about three
quarters of the worker thread's profiled time (49% and 29%); by function,
``SnapshotWriter.commit`` is 57% inclusive and the final
``RecoveryStore.collect_garbage`` 20%, while making the snapshots (``snapshot``:
``pickle.dumps`` and the CRC-32 ``key_hash`` of 783,422 states) is about 5%
and the flow itself (``apply``, ``running_count``, reading the pairs) most of
the rest. Both SQLite costs come from the store keeping every snapshot until
a garbage collection runs (every ``GC_SECONDS``, 30 s, on worker 0, and at the
end of the run): ``commit`` inserts one row per word and epoch into a table
whose primary key and ``key_hash`` index grow all run long, so each insert
lands on a random page of a large B-tree, and the final ``collect_garbage``
deletes all but about 5,000 of those rows with a correlated ``MAX(epoch)``
subquery per row. bytewax collects at every commit, so its table stays near
one row per key (2.5 MB on disk at the end against timelypy's 76 MB, which
SQLite does not give back without ``VACUUM``). In ``small_epochs`` (18,611
rows) SQLite is about a third (``commit`` 19%, ``collect_garbage`` 12%),
``snapshot`` 14%, and the engine's per-epoch work the rest. cProfile charges
a fixed cost per Python call, so it overstates the flow's per-item calls
against SQLite's few long ones: without it SQLite's share is larger still.
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import logging
import math
import pickle
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import _data
from benchmarks._harness import (
    Stats,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    peer_parser,
    peer_run,
    print_table,
    timed_call,
)
from benchmarks.flow_bench import (
    Normalized,
    _bytewax_run,
    builder,
    check_result,
    fingerprint,
    from_pairs,
    plain_stateful_map,
    profile_threads,
    running_count,
)
from benchmarks.peers import bytewax_peer
from benchmarks.runtime_bench import machine
from benchmarks.runtime_profile import CPROFILE_COLUMNS, profile_rows
from timelypy.flow import Dataflow, run
from timelypy.recovery import COMMIT_SECONDS, RecoveryConfig, RecoveryStore, create_store

logger = logging.getLogger("benchmarks.recovery_bench")

WORKLOADS = ("1000_epochs", "small_epochs")
#: Epochs of the ``1000_epochs`` workload (all the corpus's words).
EPOCHS = 1_000
#: Words and items per epoch of the ``small_epochs`` workload (full size).
SMALL_ITEMS, SMALL_EPOCH = 20_000, 10
#: The stateful step's ID (it labels the snapshots).
STEP_ID = "running"

COLUMNS = [
    "workload",
    "candidate",
    "median",
    "items/s",
    "epochs/s",
    "recovery cost",
    "speed vs bytewax",
    "busy",
    "store",
    "spread",
]

# -- the candidates -----------------------------------------------------------------

#: timelypy at bytewax's durability: a commit at every check, each synced (FULL).
SYNCED = "timelypy recovery commit 0, synced"
#: The group commit (every 50 ms) at that durability: each commit synced.
SYNCED_GROUP = "timelypy recovery synced"


def running_flow() -> Dataflow:
    """``stateful_map(STEP_ID, builder, running_count)`` then ``capture()``."""
    flow = Dataflow()
    flow.stateful_map(STEP_ID, builder, running_count)
    flow.capture()
    return flow


def timelypy_running(
    pairs: Sequence[tuple[int, tuple[str, int]]],
    store: Path | None = None,
    commit_interval: float | None = None,
) -> list[Any]:
    """``list(run(running_flow(), pairs))``, as an execution against ``store`` if given.

    >>> timelypy_running([(0, ("a", 1)), (1, ("a", 1))])
    [(0, ('a', 1)), (1, ('a', 2))]
    """
    config = None
    if store is not None:
        config = (
            RecoveryConfig(store)
            if commit_interval is None
            else RecoveryConfig(store, commit_interval=commit_interval)
        )
    return list(run(running_flow(), pairs, recovery_config=config))


@contextlib.contextmanager
def synced_commits() -> Iterator[None]:
    """Every partition of a timelypy store commits with ``synchronous=FULL`` while inside.

    timelypy's partition 0 (the only one of a one-partition store) commits
    with ``synchronous=NORMAL``: its log is synced at checkpoints, not at
    every commit.  bytewax's store syncs every commit (SQLite's default,
    FULL).  timelypy has no setting for that, so the bench swaps the store's
    connection function for one that opens every partition with
    ``durable=True`` (``synchronous=FULL``), for the ``synced`` candidates:
    the same durability as bytewax's, a sync per commit.
    """
    from timelypy.recovery import _sqlite
    from timelypy.recovery import store as store_module

    original = store_module._connect
    store_module._connect = lambda path: _sqlite.connect(path, durable=True)
    try:
        yield
    finally:
        store_module._connect = original


def timelypy_synced(
    pairs: Sequence[tuple[int, tuple[str, int]]], store: Path | None, commit_interval: float
) -> list[Any]:
    """:func:`timelypy_running` against ``store``, every commit synced (:func:`synced_commits`)."""
    with synced_commits():
        return timelypy_running(pairs, store, commit_interval=commit_interval)


def bytewax_running(
    items: Sequence[tuple[str, int]], per_epoch: int, store: Path | None = None
) -> list[tuple[str, int]]:
    """``op.stateful_map(STEP_ID, ...)``, one epoch per ``per_epoch`` items; recovery in ``store``.

    >>> sorted(bytewax_running([("a", 1), ("b", 1), ("a", 1)], 2))
    [('a', 1), ('a', 2), ('b', 1)]
    """
    recovery = None
    if store is not None:
        recovery = bytewax_peer._bytewax("recovery").RecoveryConfig(store)

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(items, per_epoch))
        s = op.stateful_map(STEP_ID, s, running_count)
        op.output("out", s, sink)

    return _bytewax_run(
        build, "recovery_bench", epoch_interval=timedelta(0), recovery_config=recovery
    )


def from_keyed(out: Sequence[tuple[str, int]]) -> Normalized:
    """The ``(word, count)`` outputs of bytewax, which carry no epoch."""
    return Counter(out)


def without_epochs(out: Sequence[tuple[int, tuple[str, int]]]) -> Normalized:
    """Plain Python's ``(epoch, (word, count))`` outputs as bytewax's: ``(word, count)``."""
    return Counter(kv for _, kv in out)


# -- the stores ---------------------------------------------------------------------


def new_timelypy_store(root: Path) -> Path:
    """An empty timelypy store of one partition in a new directory under ``root``."""
    directory = Path(tempfile.mkdtemp(prefix="timelypy-", dir=root))
    create_store(directory, 1)
    return directory


def new_bytewax_store(root: Path) -> Path:
    """An empty bytewax store of one partition in a new directory under ``root``."""
    directory = Path(tempfile.mkdtemp(prefix="bytewax-", dir=root))
    bytewax_peer._bytewax("recovery").init_db_dir(directory, 1)
    return directory


def store_bytes(directory: Path) -> int:
    """The size of the files in ``directory`` (the SQLite files and their WAL)."""
    return sum(path.stat().st_size for path in directory.iterdir() if path.is_file())


def timelypy_store_problems(directory: Path, epochs: int, final: dict[str, int]) -> list[str]:
    """What is wrong with the store of a completed timelypy run (nothing: ``[]``)."""
    store = RecoveryStore(directory)
    problems = []
    executions = store.executions()
    if len(executions) != 1:
        problems.append(f"{len(executions)} executions recorded, expected 1")
    elif (fronts := store.fronts(executions[0].ex_num)) != {0: (epochs, True)}:
        problems.append(f"worker frontiers {fronts}, expected worker 0 done at {epochs}")
    states = store.load(STEP_ID, epochs)
    if states != final:
        wrong = sum(1 for key in final.keys() | states.keys() if states.get(key) != final.get(key))
        problems.append(f"{wrong} of {len(final)} words' latest snapshots are not their count")
    return problems


def bytewax_store_problems(directory: Path, epochs: int, final: dict[str, int]) -> list[str]:
    """What is wrong with the store of a completed bytewax run (nothing: ``[]``)."""
    (path,) = directory.glob("*.sqlite3")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        fronts = [row[0] for row in conn.execute("SELECT worker_frontier FROM fronts")]
        rows = conn.execute(
            "SELECT state_key, ser_change FROM snaps AS s WHERE step_id LIKE ? AND snap_epoch = "
            "(SELECT MAX(snap_epoch) FROM snaps WHERE step_id = s.step_id "
            "AND state_key = s.state_key)",
            (f"%.{STEP_ID}.%",),
        ).fetchall()
    finally:
        conn.close()
    problems = []
    if fronts != [epochs + 2]:
        problems.append(f"worker frontiers {fronts}, expected [{epochs + 2}] ({epochs} epochs)")
    states = {key: pickle.loads(blob) for key, blob in rows if blob is not None}
    if states != final:
        wrong = sum(1 for key in final.keys() | states.keys() if states.get(key) != final.get(key))
        problems.append(f"{wrong} of {len(final)} words' latest snapshots are not their count")
    return problems


@dataclass
class Candidate:
    """One way to run the workload: ``call(store)`` is timed, the rest is not."""

    #: ``"plain"``, ``"timelypy"`` or ``"bytewax"``
    engine: str
    #: the timed call, given the fresh store's directory (``None`` without recovery)
    call: Callable[[Path | None], Any]
    #: its result as the multiset compared with plain Python's
    normalize: Callable[[Any], Normalized]
    #: which of the reference's fingerprints it must match: "epochs" or "keys"
    expect: str = "epochs"
    #: makes an empty store under a root directory (``None``: recovery off)
    new_store: Callable[[Path], Path] | None = None
    #: ``problems(directory, epochs, final counts)`` of the store after a run
    problems: Callable[[Path, int, dict[str, int]], list[str]] | None = None

    @property
    def recovery(self) -> bool:
        """Whether this candidate runs with recovery."""
        return self.new_store is not None


@dataclass
class RecoveryWorkload:
    """The candidates of one workload, their timings, and what their checks found."""

    name: str
    items: int
    epochs: int
    candidates: dict[str, Candidate]
    #: fingerprints of plain Python's result: "epochs" with, "keys" without the epochs
    expected: dict[str, tuple[int, int]]
    #: every word's count at the end
    final: dict[str, int]
    stats: dict[str, Stats] = field(default_factory=dict)
    cpu: dict[str, Stats] = field(default_factory=dict)
    #: candidate -> fingerprints of its checked results (warm-up, last timed run)
    fingerprints: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: candidate -> bytes of its store after the last checked run
    sizes: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: how many results were compared with plain Python's, and how many stores checked
    checked: Counter[str] = field(default_factory=Counter)

    def measure(self, repeat: int, root: Path, warmup: int = 1) -> None:
        """Time the candidates interleaved (A, B, C, A, B, C, ...), wall and CPU time.

        Each call gets a fresh store made before its clock starts and removed
        after it stops; results are fingerprinted and stores checked (untimed)
        in the warm-up's last round and the last timed round, then dropped.
        """
        if repeat < 1:
            raise ValueError(f"measure needs repeat >= 1, got {repeat}")
        self.stats = {name: Stats() for name in self.candidates}
        self.cpu = {name: Stats() for name in self.candidates}
        self.fingerprints = {name: [] for name in self.candidates}
        self.problems = []
        self.checked = Counter()
        rounds = warmup + repeat
        for r in range(rounds):
            for name, cand in self.candidates.items():
                store = None if cand.new_store is None else cand.new_store(root)
                try:
                    elapsed, cpu, result = timed_call(functools.partial(cand.call, store))
                    if r >= warmup:
                        self.stats[name].times.append(elapsed)
                        self.cpu[name].times.append(cpu)
                    if r in (warmup - 1, rounds - 1):
                        self.fingerprints[name].append(fingerprint(cand.normalize(result)))
                        self.checked["results"] += 1
                        if store is not None and cand.problems is not None:
                            self.sizes[name] = store_bytes(store)
                            self.checked["stores"] += 1
                            self.problems += [
                                f"{self.name}: {name!r} left a wrong store: {problem}"
                                for problem in cand.problems(store, self.epochs, self.final)
                            ]
                    result = None
                finally:
                    if store is not None:
                        shutil.rmtree(store, ignore_errors=True)

    def check(self) -> None:
        """Raise if a checked result differs from plain Python's, or a store is wrong."""
        for name, prints in self.fingerprints.items():
            expected = self.expected[self.candidates[name].expect]
            for got in prints:
                check_result(self.name, name, got, expected)
        if self.problems:
            raise AssertionError(
                "; ".join(self.problems) + "; fix it before quoting the recovery times"
            )

    def _baseline(self, name: str, engine: str, recovery: bool) -> str | None:
        """The first other candidate of ``engine`` with recovery on or off."""
        return next(
            (
                other
                for other, c in self.candidates.items()
                if other != name and c.engine == engine and c.recovery == recovery
            ),
            None,
        )

    def rows(self) -> list[list[str]]:
        """One table row per candidate (:data:`COLUMNS`)."""
        rows = []
        for name, s in self.stats.items():
            cand = self.candidates[name]
            off = self._baseline(name, cand.engine, False) if cand.recovery else None
            peer = None
            if cand.engine != "bytewax" and cand.engine != "plain":
                peer = self._baseline(name, "bytewax", cand.recovery)
            size = self.sizes.get(name)
            rows.append(
                [
                    self.name,
                    name,
                    fmt_seconds(s.median),
                    fmt_rate(s.throughput(self.items), "items"),
                    fmt_rate(s.throughput(self.epochs), "epochs"),
                    fmt_ratio(s.ratio_to(self.stats[off])) if off else "",
                    fmt_ratio(self.stats[peer].median / s.median) if peer else "",
                    f"{self.cpu[name].median / s.median:.2f}",
                    "" if size is None else f"{size / 1e6:.1f} MB",
                    f"{s.spread:.0%}",
                ]
            )
        return rows

    def release(self) -> None:
        """Drop the candidates, and with them their inputs."""
        self.candidates = {}


def build_workload(
    name: str, words: Sequence[str], per_epoch: int, *, bytewax: bool = True
) -> RecoveryWorkload:
    """``words`` as ``(word, 1)`` items in epochs of ``per_epoch``, every candidate bound to it."""
    if per_epoch < 1 or not words:
        raise ValueError(f"{name}: needs words and per_epoch >= 1, got {len(words)}, {per_epoch}")
    items = [(word, 1) for word in words]
    pairs = [(i // per_epoch, item) for i, item in enumerate(items)]
    epochs = math.ceil(len(items) / per_epoch)
    reference = plain_stateful_map(pairs)
    expected = {
        "epochs": fingerprint(from_pairs(reference)),
        "keys": fingerprint(without_epochs(reference)),
    }
    del reference
    cands: dict[str, Candidate] = {
        "plain": Candidate("plain", lambda _: plain_stateful_map(pairs), from_pairs),
        "timelypy": Candidate("timelypy", lambda _: timelypy_running(pairs), from_pairs),
        "timelypy recovery": Candidate(
            "timelypy",
            lambda store: timelypy_running(pairs, store),
            from_pairs,
            new_store=new_timelypy_store,
            problems=timelypy_store_problems,
        ),
        "timelypy recovery commit 0": Candidate(
            "timelypy",
            lambda store: timelypy_running(pairs, store, commit_interval=0),
            from_pairs,
            new_store=new_timelypy_store,
            problems=timelypy_store_problems,
        ),
        SYNCED: Candidate(
            "timelypy",
            lambda store: timelypy_synced(pairs, store, 0),
            from_pairs,
            new_store=new_timelypy_store,
            problems=timelypy_store_problems,
        ),
        SYNCED_GROUP: Candidate(
            "timelypy",
            lambda store: timelypy_synced(pairs, store, COMMIT_SECONDS),
            from_pairs,
            new_store=new_timelypy_store,
            problems=timelypy_store_problems,
        ),
    }
    if bytewax:
        cands["bytewax"] = Candidate(
            "bytewax", lambda _: bytewax_running(items, per_epoch), from_keyed, "keys"
        )
        cands["bytewax recovery"] = Candidate(
            "bytewax",
            lambda store: bytewax_running(items, per_epoch, store),
            from_keyed,
            "keys",
            new_store=new_bytewax_store,
            problems=bytewax_store_problems,
        )
    return RecoveryWorkload(name, len(items), epochs, cands, expected, dict(Counter(words)))


def workload_inputs(name: str, scale: int) -> tuple[list[str], int]:
    """The words and the items per epoch of workload ``name`` at 1/``scale`` size."""
    words = _data.load_words()
    if name == "1000_epochs":
        words = words[: max(1, len(words) // scale)]
        return words, max(1, len(words) // EPOCHS)
    if name == "small_epochs":
        return words[: max(1, SMALL_ITEMS // scale)], SMALL_EPOCH
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")


# -- profiling ----------------------------------------------------------------------


def store_rows(profiler: cProfile.Profile, total: float) -> list[list[str]]:
    """Calls and inclusive share of each function of ``timelypy/recovery/`` (0.1% or more)."""
    import pstats

    entries: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        (ct, [f"{func} ({Path(file).name})", str(calls), f"{ct / total:.1%}"])
        for (file, _, func), (_, calls, _, ct, _) in entries.items()
        if Path(file).parent.name == "recovery" and ct >= total / 1000
    ]
    return [row for _, row in sorted(rows, key=lambda r: r[0], reverse=True)]


def print_profile(w: RecoveryWorkload, root: Path, top: int, markdown: bool) -> None:
    """Profile ``timelypy recovery`` on ``w`` once, after a warm-up, in its worker thread."""
    cand = w.candidates["timelypy recovery"]
    new_store = cand.new_store
    assert new_store is not None

    def once() -> None:
        store = new_store(root)
        try:
            cand.call(store)
        finally:
            shutil.rmtree(store, ignore_errors=True)

    once()
    logger.info("profiling timelypy recovery on %s", w.name)
    _, others = profile_threads(once)
    for profiler in others:
        rows, calls, total = profile_rows(profiler, w.epochs, top)
        print()
        print(
            f"{w.name}, timelypy recovery, worker thread: top {top} by own time, shares of its "
            f"{total:.2f} s profiled; {calls:,} calls, {calls / w.epochs:,.1f} per epoch "
            f"({w.epochs:,} epochs)"
        )
        print()
        print_table(rows, CPROFILE_COLUMNS, markdown=markdown)
        print()
        print(f"{w.name}: the recovery store's functions, inclusive")
        print()
        print_table(
            store_rows(profiler, total), ["function", "calls", "inclusive"], markdown=markdown
        )


# -- command line -------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the recovery benchmark (or profile it) and print its table."""
    parser = peer_parser(
        "benchmarks.recovery_bench",
        __doc__,
        "10x smaller inputs, 3 repeats",
        "workload",
        WORKLOADS,
        "profile 'timelypy recovery' instead of timing",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the stores go (a fresh temporary directory)"
    )
    args = parser.parse_args(argv)
    settings = peer_run(parser, args, logger)
    bytewax, scale, repeat, size = (
        settings.bytewax,
        settings.scale,
        settings.repeat,
        settings.size,
    )
    names = [name for name in WORKLOADS if name in (args.workload or WORKLOADS)]
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="recovery_bench-", dir=args.dir))
    try:
        if args.profile:
            print(f"timelypy recovery profile (cProfile), {size}, 1 worker, {machine()}")
            for name in names:
                words, per_epoch = workload_inputs(name, scale)
                w = build_workload(name, words, per_epoch, bytewax=False)
                print_profile(w, root, args.top, args.markdown)
                w.release()
            return 0
        rows: list[list[str]] = []
        shapes = []
        checked: Counter[str] = Counter()
        for name in names:
            words, per_epoch = workload_inputs(name, scale)
            w = build_workload(name, words, per_epoch, bytewax=bytewax)
            logger.info("measuring %s: %s", w.name, ", ".join(w.candidates))
            w.measure(repeat=repeat, root=root)
            w.check()
            checked += w.checked
            rows += w.rows()
            w.release()
            shapes.append(f"{name}: {w.items:,} items in {w.epochs:,} epochs of {per_epoch:,}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"stateful_map with recovery off and on, {size} ({'; '.join(shapes)}), median of "
        f"{repeat} interleaved runs, 1 worker, stores under {root.parent}, {machine()}"
        + ("" if bytewax else "; bytewax not run")
    )
    print()
    print_table(rows, COLUMNS, markdown=args.markdown)
    print()
    print(
        f"checked before quoting: {checked['results']:,} results against plain Python's, "
        f"{checked['stores']:,} recovery stores for their final states and frontiers"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
