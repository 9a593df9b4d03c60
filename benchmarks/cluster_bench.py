"""The cluster (several processes over ZeroMQ) against its limits, measured side by side.

    python benchmarks/cluster_bench.py [--quick] [--repeat N] [--markdown] [--timeout S]
                                       [--only exchange,wordcount,epochs] [--profile DIR]

Every timelypy figure comes from real processes on 127.0.0.1 started by
this script (``benchmarks/cluster_scripts/``; free ports from
:func:`timelypy.launch.free_ports`, a fresh secret per run, every process
killed on a failure or a timeout).  The scripts time themselves from a
synchronised start (a first empty epoch that every worker waits out) to
the end of the computation, so process start-up, imports, the handshake and
loading data are excluded; they check their results, and this script checks
what they report.  One *round* runs every candidate of a measurement once,
in a fixed order (candidates are interleaved, as in
``benchmarks/_harness.py``); the table quotes medians over ``--repeat``
rounds (5; 3 with ``--quick``) and each candidate's spread ``(max - min) /
median``.  A cluster run's time is the median of its ``reps`` timed epochs
(after one warm-up epoch), each the slower of its workers.

1. **exchange** -- 2 processes x 1 worker.  Worker ``i`` holds 1,000,000
   ``(word, position)`` records (``part-i.txt``), fed in batches of 8,192
   into an operator with pact ``Exchange(itemgetter(1))``: every other
   record (4,096 per batch) crosses to the other process.  The *limit* is
   what crossing costs at least: ``msgpack.unpackb(msgpack.packb((time,
   batch)), use_list=False, strict_map_key=False)`` of exactly the batches
   that cross from worker 0, in this process (decoded batches are kept
   until the pass ends, as the receiving worker keeps them).  Each process
   must pack what it sends and unpack what it receives, so the rates
   compared are *records crossing per process per second*: ``sent /
   time``.  ``MsgpackCodec`` is timelypy's codec doing the same round trips
   in process, to separate the codec from the rest.  The *floor* row adds
   what routing costs: each input batch of 8,192 records split by key in a
   Python pass, as ``Exchange`` does, then the crossing half through
   ``MsgpackCodec``: the least a process does with exact types and no
   engine (no sockets, no waiting for the other process).  Goal: >= 0.5x.
2. **wordcount** -- the 2,000,000-word corpus on 1 process x 1 worker
   (both parts) and on 2 processes x 1 worker (one part each):
   a combiner that counts each worker's lines for the whole epoch (one
   ``(word, n)`` per distinct word crosses, as ``examples/spark_wordcount.py``
   does), exchange by ``stable_hash(word)``, counts per word when the epoch
   completes; also with a per-batch combiner after ``flat_map(str.split)``,
   and without any combiner (every word exchanged).  Counts are checked
   against ``collections.Counter`` over all words.  Speed-up = ``time(1
   process) / time(2 processes)``.  Goal: >= 1.6x (per-epoch combiner).
   ``plain Counter`` calibrates the machine: ``benchmarks/peers/plain.wordcount``
   (no timelypy) over both parts in 1 process, and over one part in each of
   2 independent processes counting at the same time
   (``cluster_scripts/plain_wordcount.py``); its speed-up is the most any
   2-process computation can gain here for this work.
3. **epochs** -- 2 processes x 1 worker; per epoch worker 0 sends one
   record that is exchanged to worker 1, both advance and wait for their
   probe: ``wait=park`` with ``worker.step_or_park``, ``wait=spin`` with
   the examples' ``while probe.less_than(t): worker.step()``.  Against a
   ``zmq`` REQ/REP pair of processes (blocking ``send``/``recv``), plain
   TCP and with CURVE (timelypy's sockets use CURVE).  Ratio = round-trip
   time / raw REQ/REP round-trip time.  Goal: <= 2x.  The *floor* row is
   REQ/REP + CURVE where each side also runs one epoch of a one-worker
   timelypy dataflow per trip (``zmq_reqrep.py epoch=1``): what the round
   trip would cost if crossing processes added nothing to timelypy's own
   per-epoch work, which both workers must do, one after the other.  The
   *spin* row is REQ/REP + CURVE whose receives wait as a parked timelypy
   worker does (poll, yielding, for ``Config.park_spin`` seconds, then
   block; ``zmq_reqrep.py spin=S``): what the raw round trip costs when it
   also trades a little CPU for not waking from a blocking poll.

``--profile DIR`` then runs the timelypy side of 1 and 3 once more under
``cProfile`` (only the timed section) and, when ``py-spy`` is installed,
under ``py-spy record --idle`` too (samples inside the timed function), and
prints where the time goes.  Profiled runs are not in the table.

The machine is shared and small: the load average before and after is
printed with the table, and only ratios measured in the same run mean much.
So is a digest of timelypy's source files, flagged if it changed while the
benchmark ran.
The ``busy`` column is the timed thread's CPU time over its wall time
(median; averaged over a cluster's workers): below 1, the worker waited --
for a message, or for a core.  ``cpu ratio`` is the row's ratio computed
from CPU time instead (the busiest worker's main thread): roughly what the
ratio would be on a machine with an idle core per worker; for epochs it is
the CPU time per epoch over the raw round trip.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import pstats
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import msgpack

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `timelypy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import part_paths
from benchmarks._harness import Stats, fmt_rate, fmt_ratio, fmt_seconds, print_table
from timelypy.communication.codec import MsgpackCodec
from timelypy.communication.config import PARK_SPIN
from timelypy.communication.secret import SECRET_ENV
from timelypy.launch import free_ports

SCRIPTS = Path(__file__).resolve().parent / "cluster_scripts"
REPO_ROOT = SCRIPTS.parent.parent
CHUNK = 8192  # cluster_scripts/_common.CHUNK
MEASUREMENTS = ("exchange", "wordcount", "epochs")

#: Full and --quick sizes.
SIZES = {
    False: {"words": 1_000_000, "lines": 100_000, "epochs": 5000, "warmup": 500, "reps": 3},
    True: {"words": 100_000, "lines": 20_000, "epochs": 1000, "warmup": 200, "reps": 2},
}


# -- running processes -------------------------------------------------------------


class ProcessFailed(RuntimeError):
    """A benchmark process failed or timed out."""


def _start(command: list[str], out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(out.with_suffix(".out"), "wb") as stdout, open(out.with_suffix(".err"), "wb") as err:
        # a session of its own: a wrapper's (py-spy's) children are killed with it
        return subprocess.Popen(
            command, stdout=stdout, stderr=err, env=env, cwd=REPO_ROOT, start_new_session=True
        )


def run_processes(
    commands: Sequence[list[str]], timeout: float, env: dict[str, str] | None = None
) -> list[list[dict[str, Any]]]:
    """Run the commands together; return each one's ``RESULT`` objects.

    Output goes to files (no pipe can fill up); every process still running
    after ``timeout`` seconds, or after another failed, is killed.
    """
    env = dict(os.environ if env is None else env)
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        children: list[subprocess.Popen[bytes]] = []
        failed = None
        try:
            for i, command in enumerate(commands):
                children.append(_start(command, Path(tmp) / f"p{i}", env))
            deadline = time.monotonic() + timeout
            while any(c.poll() is None for c in children):
                failed = next((c for c in children if c.returncode not in (None, 0)), None)
                if failed is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        finally:
            hung = [c for c in children if c.poll() is None]
            stacks = _dump_stacks(hung) if hung and failed is None else ""
            for child in hung:
                try:
                    os.killpg(child.pid, signal.SIGKILL)  # the group this script created
                except ProcessLookupError:
                    pass
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - kill is not refused
                    pass
        outputs = [
            (
                (Path(tmp) / f"p{i}.out").read_text(errors="replace"),
                (Path(tmp) / f"p{i}.err").read_text(errors="replace"),
            )
            for i in range(len(children))
        ]
    # report the process that failed by itself before any that was killed
    order = sorted(range(len(children)), key=lambda i: children[i].returncode in (-9, 137))
    for i in order:
        code = children[i].returncode
        if code != 0:
            stdout, stderr = outputs[i]
            why = (
                f"killed after {timeout:g} s or another's failure" if code == -9 else f"exit {code}"
            )
            raise ProcessFailed(
                f"{' '.join(commands[i][1:])} ({why}):\n{stderr[-3000:]}{stdout[-1000:]}{stacks}"
            )
    results = []
    for i, (stdout, stderr) in enumerate(outputs):
        found = [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("RESULT ")]
        if not found:
            raise ProcessFailed(f"{' '.join(commands[i][1:])} printed no RESULT:\n{stderr}")
        results.append(found)
    return results


def _py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return found if Path(found).exists() else None


def _dump_stacks(children: Sequence[subprocess.Popen[bytes]]) -> str:
    """The Python stacks of processes that hang (with py-spy, when it is installed)."""
    spy = _py_spy()
    if spy is None:
        return ""
    out = []
    for child in children:
        try:
            dump = subprocess.run(
                [spy, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=30
            )
            out.append(f"\n--- py-spy dump of pid {child.pid} (hung) ---\n{dump.stdout}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.append(f"\n(py-spy dump of pid {child.pid} failed: {exc})")
    return "".join(out)


def run_cluster(
    script: str,
    processes: int,
    params: dict[str, Any],
    timeout: float,
    wrap: Callable[[int], list[str]] | None = None,
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Run ``cluster_scripts/<script>`` as ``processes`` processes of 1 worker; their results.

    ``wrap(i)`` may give a command prefix for process ``i`` (a profiler);
    ``env`` adds to (or overrides) this process's environment for them.
    """
    command = [sys.executable, str(SCRIPTS / script), *(f"{k}={v}" for k, v in params.items())]
    env = {**os.environ, **(env or {})}
    with tempfile.TemporaryDirectory(prefix="cluster-bench-hosts-") as tmp:
        if processes == 1:
            commands = [[*command, "-w", "1"]]
        else:
            env[SECRET_ENV] = secrets.token_hex(32)
            hostfile = Path(tmp) / "hosts"
            hostfile.write_text("".join(f"127.0.0.1:{p}\n" for p in free_ports(processes)))
            commands = [
                [*command, "-n", str(processes), "-p", str(i), "-w", "1", "-h", str(hostfile)]
                for i in range(processes)
            ]
        if wrap is not None:
            commands = [wrap(i) + c for i, c in enumerate(commands)]
        results = run_processes(commands, timeout, env)
    flat = [r for rs in results for r in rs]
    for r in flat:
        if not r.get("checked"):
            raise ProcessFailed(f"{script}: a worker did not check its result: {r}")
    return flat


def cluster_time(results: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Median over the timed epochs of the slowest worker's time; busy share; CPU time.

    The busy share is the main thread's CPU time over wall time, averaged
    over the workers (median over the epochs): how much of the time the
    workers computed rather than waited (for a peer, or for a core).  The
    CPU time is the largest main-thread CPU time of the workers (median over
    the epochs): about the wall time the run would take if every worker had a
    core to itself and never waited.
    """
    reps = list(zip(*(r["times"] for r in results), strict=True))
    wall = statistics.median(max(t["wall"] for t in rep) for rep in reps)
    busy = statistics.median(
        statistics.mean(t["thread_cpu"] / t["wall"] for t in rep) for rep in reps
    )
    cpu = statistics.median(max(t["thread_cpu"] for t in rep) for rep in reps)
    return wall, busy, cpu


class Candidate:
    """One candidate's wall times (``stats``), busy shares and CPU times over the rounds."""

    def __init__(self) -> None:
        self.stats = Stats()
        self.busy: list[float] = []
        self.cpus: list[float] = []

    def add(self, wall: float, busy: float, cpu: float) -> None:
        """Record one round."""
        self.stats.times.append(wall)
        self.busy.append(busy)
        self.cpus.append(cpu)

    @property
    def cpu(self) -> float:
        """Median CPU time."""
        return statistics.median(self.cpus)


def _in_process(fn: Callable[[], Any]) -> tuple[float, float, float]:
    """Wall time, busy share and CPU time of ``fn()`` (after ``gc.collect()``)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return wall, cpu / wall, cpu


def reqrep(
    trips: int, warmup: int, curve: bool, timeout: float, epoch: bool = False, spin: float = 0.0
) -> tuple[float, float, float]:
    """Mean seconds per raw ZeroMQ REQ/REP round trip between two processes; busy; CPU.

    ``epoch``: each side also runs a one-worker timelypy epoch per trip.  ``spin``:
    each receive polls (yielding) for up to this many seconds before it blocks.
    """
    (port,) = free_ports(1)
    base = [
        sys.executable,
        str(SCRIPTS / "zmq_reqrep.py"),
        f"port={port}",
        f"trips={trips}",
        f"warmup={warmup}",
        f"curve={int(curve)}",
        f"epoch={int(epoch)}",
        f"spin={spin}",
        f"timeout={timeout}",
    ]
    results = run_processes([[*base, "role=rep"], [*base, "role=req"]], timeout)
    (result,) = results[1]
    if not result.get("checked") or result["trips"] != trips:
        raise ProcessFailed(f"zmq_reqrep: unexpected result {result}")
    return (
        result["wall"] / trips,
        result["thread_cpu"] / result["wall"],
        result["thread_cpu"] / trips,
    )


# -- 1. exchange ---------------------------------------------------------------------


def input_batches(words: int) -> list[list[tuple[str, int]]]:
    """The batches worker 0 feeds its exchange in ``exchange.py``."""
    part = part_paths()[0].read_text(encoding="ascii").split()[:words]
    records = [(word, i) for i, word in enumerate(part)]  # _common.exchange_records(part, 0)
    return [records[i : i + CHUNK] for i in range(0, len(records), CHUNK)]


def crossing_batches(words: int) -> list[list[tuple[str, int]]]:
    """The batches worker 0 sends to worker 1 in ``exchange.py`` (positions ``& 1 == 1``)."""
    return [[r for r in batch if r[1] & 1] for batch in input_batches(words)]


def msgpack_pass(batches: list[list[Any]]) -> tuple[float, float]:
    """Pack and unpack every batch as ``(time, batch)``, timed; checks the result."""
    packb, unpackb = msgpack.packb, msgpack.unpackb
    kept: list[Any] = []

    def run() -> None:
        kept[:] = [unpackb(packb((1, b)), use_list=False, strict_map_key=False) for b in batches]

    timed = _in_process(run)
    if any(k[0] != 1 or list(k[1]) != b for k, b in zip(kept, batches, strict=True)):
        raise AssertionError("plain msgpack did not round-trip a batch")
    return timed


def codec_pass(batches: list[list[Any]]) -> tuple[float, float]:
    """Encode and decode every batch with timelypy's ``MsgpackCodec``, timed; checked."""
    codec = MsgpackCodec()
    encode, decode = codec.encode_batch, codec.decode_batch
    kept: list[Any] = []

    def run() -> None:
        kept[:] = [decode(encode(1, b)) for b in batches]

    timed = _in_process(run)
    if kept != [(1, b) for b in batches]:
        raise AssertionError("MsgpackCodec did not round-trip a batch")
    return timed


def floor_pass(inputs: list[list[Any]]) -> tuple[float, float]:
    """Route every input batch by key as ``Exchange`` does, then carry the crossing half; timed.

    The least one process of the exchange does with exact types and no
    engine: a Python pass putting each record in its worker's list (the
    key is ``itemgetter(1)``, the worker ``key & 1``), and ``MsgpackCodec``
    encoding the half it sends and decoding as much received (the same
    half here, as both processes send alike).
    """
    codec = MsgpackCodec()
    encode, decode = codec.encode_batch, codec.decode_batch
    key = itemgetter(1)
    kept: list[Any] = []

    def run() -> None:
        kept.clear()
        for batch in inputs:
            parts: list[list[Any]] = [[], []]
            appends = [part.append for part in parts]
            for record in batch:
                appends[key(record) & 1](record)
            kept.append(parts[0])
            kept.append(decode(encode(1, parts[1]))[1])

    timed = _in_process(run)
    if sum(map(len, kept)) != sum(map(len, inputs)):
        raise AssertionError("the exchange floor lost records")
    return timed


def measure_exchange(rounds: int, size: dict[str, int], timeout: float) -> list[dict[str, str]]:
    inputs = input_batches(size["words"])
    batches = [[r for r in batch if r[1] & 1] for batch in inputs]
    sent = sum(map(len, batches))
    params = {"words": size["words"], "reps": size["reps"]}
    msgpack_pass(batches)  # warm up
    codec_pass(batches)
    floor_pass(inputs)
    stats = {
        "timelypy": Candidate(),
        "msgpack": Candidate(),
        "codec": Candidate(),
        "floor": Candidate(),
    }
    for _ in range(rounds):
        results = run_cluster("exchange.py", 2, params, timeout)
        for r in results:
            if r["sent_remote"] != sent or r["received"] != size["words"]:
                raise AssertionError(f"exchange: worker {r['worker']} reports {r}; sent {sent}")
        stats["timelypy"].add(*cluster_time(results))
        stats["msgpack"].add(*msgpack_pass(batches))
        stats["codec"].add(*codec_pass(batches))
        stats["floor"].add(*floor_pass(inputs))
    limit = stats["msgpack"].stats

    def row(candidate: str, name: str, note: str, goal: str = "") -> dict[str, str]:
        """The row of ``stats[name]``: its rate and its ratio to the limit."""
        return _row(
            "exchange",
            candidate,
            stats[name],
            rate=sent,
            ratio=limit.median / stats[name].stats.median,
            cpu_ratio=stats["msgpack"].cpu / stats[name].cpu,
            goal=goal,
            note=note,
        )

    return [
        row(
            "timelypy 2 proc x 1 worker",
            "timelypy",
            f"{sent:,} rec cross per process, {len(batches)} batches",
            goal=">= 0.5x",
        ),
        row("MsgpackCodec encode+decode, 1 proc", "codec", "timelypy's codec alone"),
        row(
            "route by key + MsgpackCodec, 1 proc",
            "floor",
            "the floor: routing and the exact codec, no engine",
        ),
        row("plain msgpack pack+unpack (limit)", "msgpack", "same batches, 1 process"),
    ]


# -- 2. wordcount --------------------------------------------------------------------


def expected_counts(lines: int) -> Counter[str]:
    """``Counter`` over the words of the first ``lines`` lines of every part."""
    counts: Counter[str] = Counter()
    for path in part_paths():
        counts.update(
            w
            for line in path.read_text(encoding="ascii").splitlines()[:lines]
            for w in line.split()
        )
    return counts


def check_counts(results: list[dict[str, Any]], expected: Counter[str], label: str) -> None:
    merged: dict[str, int] = {}
    for r in results:
        overlap = merged.keys() & r["counts"].keys()
        if overlap:
            raise AssertionError(f"{label}: {len(overlap)} words counted on two workers")
        merged.update(r["counts"])
    if merged != expected:
        raise AssertionError(
            f"{label}: merged counts differ from collections.Counter ({len(merged)} words, "
            f"{sum(merged.values())} in all; expected {len(expected)}, {expected.total()})"
        )


def plain_processes(processes: int, size: dict[str, int], timeout: float) -> list[dict[str, Any]]:
    """``cluster_scripts/plain_wordcount.py`` as 1 process over both parts or 2 over one each.

    The processes share nothing; they start counting at one wall-clock time.
    """
    script = str(SCRIPTS / "plain_wordcount.py")
    parts = ["0,1"] if processes == 1 else [str(i) for i in range(processes)]
    start_at = time.time() + 2.0  # after every process has loaded its lines
    common = [f"lines={size['lines']}", f"reps={size['reps']}", f"start_at={start_at}"]
    results = run_processes(
        [[sys.executable, script, f"parts={p}", *common] for p in parts], timeout
    )
    return [r for rs in results for r in rs]


def measure_wordcount(rounds: int, size: dict[str, int], timeout: float) -> list[dict[str, str]]:
    expected = expected_counts(size["lines"])
    words = expected.total()
    candidates = {
        ("epoch combiner", 1): {"combine": 2},
        ("epoch combiner", 2): {"combine": 2},
        ("combiner", 1): {"combine": 1},
        ("combiner", 2): {"combine": 1},
        ("no combiner", 1): {"combine": 0},
        ("no combiner", 2): {"combine": 0},
    }
    stats = {key: Candidate() for key in (*candidates, ("plain", 1), ("plain", 2))}
    for _ in range(rounds):
        for processes in (1, 2):
            results = plain_processes(processes, size, timeout)
            if sum(r["words"] for r in results) != words:
                raise AssertionError(f"plain wordcount counted {results}, expected {words} words")
            stats["plain", processes].add(*cluster_time(results))
        for (variant, processes), extra in candidates.items():
            params = {"lines": size["lines"], "reps": size["reps"], **extra}
            results = run_cluster("wordcount.py", processes, params, timeout)
            check_counts(results, expected, f"wordcount {variant} on {processes} processes")
            stats[variant, processes].add(*cluster_time(results))
    rows = []
    labels = {
        "epoch combiner": ("combiner per epoch", ">= 1.6x"),
        "combiner": ("combiner per batch", ""),
        "no combiner": ("no combiner", ""),
        "plain": ("plain Counter, no timelypy", ""),
    }
    for variant, (label, goal) in labels.items():
        one, two = stats[variant, 1], stats[variant, 2]
        plain_one = stats["plain", 1].stats.median
        rows.append(
            _row(
                "wordcount",
                f"{label}: 1 proc",
                one,
                rate=words,
                unit="words",
                ratio=1.0,
                cpu_ratio=1.0,
                note=f"{words:,} words; time / plain 1 proc: "
                + fmt_ratio(one.stats.median / plain_one),
            )
        )
        rows.append(
            _row(
                "wordcount",
                f"{label}: 2 proc"
                + (" (independent halves)" if variant == "plain" else " x 1 worker"),
                two,
                rate=words,
                unit="words",
                ratio=one.stats.median / two.stats.median,
                cpu_ratio=one.cpu / two.cpu,
                goal=goal,
                note="speed-up = time(1 proc) / time(2 proc)"
                + ("; the machine's own limit" if variant == "plain" else ""),
            )
        )
    return rows


# -- 3. epochs -----------------------------------------------------------------------


def measure_epochs(rounds: int, size: dict[str, int], timeout: float) -> list[dict[str, str]]:
    n, warmup = size["epochs"], size["warmup"]
    names = ("park", "spin", "floor", "raw", "raw curve", "raw curve spin")
    stats = {name: Candidate() for name in names}
    for _ in range(rounds):
        for wait in ("park", "spin"):
            results = run_cluster(
                "epochs.py", 2, {"epochs": n, "warmup": warmup, "wait": wait}, timeout
            )
            if any(r["epochs"] != n for r in results):
                raise AssertionError(f"epochs: unexpected results {results}")
            busy = statistics.mean(r["thread_cpu"] / r["wall"] for r in results)
            cpu = max(r["thread_cpu"] for r in results) / n
            stats[wait].add(max(r["wall"] for r in results) / n, busy, cpu)
        stats["raw"].add(*reqrep(n, warmup, False, timeout))
        stats["raw curve"].add(*reqrep(n, warmup, True, timeout))
        stats["floor"].add(*reqrep(n, warmup, True, timeout, epoch=True))
        stats["raw curve spin"].add(*reqrep(n, warmup, True, timeout, spin=PARK_SPIN))
    raw = stats["raw"].stats
    rows = []
    for name, label, goal in (
        ("park", "timelypy, step_or_park", "<= 2x"),
        ("spin", "timelypy, spin step()", "<= 2x"),
        ("floor", "REQ/REP + CURVE + 1-worker epoch each side", ""),
        ("raw curve", "raw zmq REQ/REP + CURVE", ""),
        ("raw curve spin", f"raw zmq REQ/REP + CURVE, {PARK_SPIN * 1e3:g} ms spin", ""),
        ("raw", "raw zmq REQ/REP (baseline)", ""),
    ):
        s = stats[name].stats
        rows.append(
            {
                "measurement": "epochs",
                "candidate": label,
                "median": fmt_seconds(s.median) + " / rt",
                "rate": fmt_rate(1 / s.median, "rt" if name.startswith("raw") else "epochs"),
                "ratio": fmt_ratio(s.median / raw.median),
                "goal": goal,
                "spread": f"{s.spread:.2f}",
                "busy": f"{statistics.median(stats[name].busy):.2f}",
                "cpu ratio": fmt_ratio(stats[name].cpu / raw.median),
                "note": {
                    "park": "ratio: round trip / raw",
                    "floor": "the least a 2-process epoch costs here",
                    "raw curve spin": "waits as a parked worker does (Config.park_spin)",
                }.get(name, ""),
            }
        )
    return rows


# -- table -----------------------------------------------------------------------------


def _row(
    measurement: str,
    candidate: str,
    cand: Candidate,
    *,
    rate: int,
    ratio: float,
    cpu_ratio: float | None = None,
    unit: str = "rec",
    goal: str = "",
    note: str = "",
) -> dict[str, str]:
    stats = cand.stats
    return {
        "measurement": measurement,
        "candidate": candidate,
        "median": fmt_seconds(stats.median),
        "rate": fmt_rate(rate / stats.median, unit),
        "ratio": fmt_ratio(ratio),
        "goal": goal,
        "spread": f"{stats.spread:.2f}",
        "busy": f"{statistics.median(cand.busy):.2f}",
        "cpu ratio": "" if cpu_ratio is None else fmt_ratio(cpu_ratio),
        "note": note,
    }


# -- profiles --------------------------------------------------------------------------


def _short(where: str) -> str:
    """``func (file.py:line)`` from py-spy's ``func (path/file.py:line)``."""
    m = re.match(r"(.*) \((.*?):(\d+)\)$", where)
    if not m:
        return where
    func = m.group(1).replace("<locals>.", "")
    return f"{func} ({Path(m.group(2)).name})"


def spy_summary(path: Path, marker: str, top: int) -> list[str]:
    """Self and inclusive shares of py-spy's raw samples that pass through ``marker``."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or not any(marker in f for f in frames):
            continue
        n = int(count)
        total += n
        own[_short(frames[-1])] += n
        for name in {_short(f) for f in frames}:
            inclusive[name] += n
    if not total:
        return ["  (no samples in the timed section)"]
    out = [f"  {total} samples in {marker}; self:"]
    out += [f"    {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    out.append("  inclusive (callers of the above):")
    skip = {name for name, n in inclusive.items() if n == total}
    out += [
        f"    {100 * n / total:5.1f}%  {name}"
        for name, n in inclusive.most_common(top + len(skip))
        if name not in skip
    ][:top]
    return out


def cprofile_summary(path: Path, top: int, per: int, unit: str) -> list[str]:
    """Top functions by own time, with calls and microseconds per ``unit`` (``per`` of them)."""
    stats = pstats.Stats(str(path))
    rows = []
    total = stats.total_tt  # type: ignore[attr-defined]
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tottime, ncalls, cumtime, f"{func} ({Path(file).name}:{line})"))
    rows.sort(reverse=True)
    out = [f"  {total:.3f} s profiled; own time, calls per {unit}, us per {unit}:"]
    for tottime, ncalls, _cum, name in rows[:top]:
        out.append(
            f"    {100 * tottime / total:5.1f}%  {ncalls / per:8.2f} calls  "
            f"{1e6 * tottime / per:9.2f} us  {name}"
        )
    return out


def profile(directory: Path, size: dict[str, int], timeout: float, top: int = 12) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    spy = _py_spy()
    have_spy = spy is not None
    cases = [
        (
            "exchange",
            "exchange.py",
            {"words": size["words"], "reps": size["reps"]},
            "timed_epoch",
            size["reps"] * (size["words"] // CHUNK + 1),
            "input batch",
        ),
        (
            "epochs-park",
            "epochs.py",
            {"epochs": size["epochs"], "warmup": size["warmup"], "wait": "park"},
            "timed_epochs",
            size["epochs"],
            "epoch",
        ),
        (
            "epochs-spin",
            "epochs.py",
            {"epochs": size["epochs"], "warmup": size["warmup"], "wait": "spin"},
            "timed_epochs",
            size["epochs"],
            "epoch",
        ),
    ]
    for name, script, params, marker, per, unit in cases:
        base = directory / name
        run_cluster(script, 2, {**params, "profile": str(base)}, timeout)
        for i in range(2):
            print(f"\n[cProfile] {name}, process {i} ({base}.p{i}.prof)")
            print("\n".join(cprofile_summary(Path(f"{base}.p{i}.prof"), top, per, unit)))
        if have_spy:

            def wrap(i: int, base: Path = base) -> list[str]:
                return [
                    spy,
                    "record",
                    "--idle",
                    "--nonblocking",
                    "--rate",
                    "1000",
                    "--format",
                    "raw",
                    "--output",
                    f"{base}.p{i}.spy.txt",
                    "--",
                ]

            run_cluster(script, 2, params, timeout, wrap=wrap)
            for i in range(2):
                print(f"\n[py-spy --idle] {name}, process {i} ({base}.p{i}.spy.txt)")
                print("\n".join(spy_summary(Path(f"{base}.p{i}.spy.txt"), marker, top)))
    if not have_spy:
        print("\n(py-spy not found: sampling profiles skipped)")


# -- main ------------------------------------------------------------------------------


def source_digest() -> str:
    """A short digest of timelypy's source files, to tell which code a table measured."""
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "timelypy").rglob("*.py")):
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, 3 rounds")
    parser.add_argument("--repeat", type=int, help="interleaved rounds (default 5, quick 3)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--only",
        default=",".join(MEASUREMENTS),
        help="comma-separated subset of " + ", ".join(MEASUREMENTS),
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="also profile the timelypy side of exchange and epochs into DIR",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds any one benchmark process may run (default 120)",
    )
    args = parser.parse_args(argv)
    rounds = args.repeat or (3 if args.quick else 5)
    if rounds < 1:
        parser.error("--repeat must be at least 1")
    only = [m.strip() for m in args.only.split(",") if m.strip()]
    unknown = set(only) - set(MEASUREMENTS)
    if unknown:
        parser.error(f"unknown measurement(s) {sorted(unknown)}; choose from {MEASUREMENTS}")
    size = SIZES[args.quick]

    load_before = os.getloadavg()
    digest = source_digest()
    started = time.monotonic()
    rows: list[dict[str, str]] = []
    measure = {
        "exchange": measure_exchange,
        "wordcount": measure_wordcount,
        "epochs": measure_epochs,
    }
    for name in MEASUREMENTS:
        if name in only:
            rows += measure[name](rounds, size, args.timeout)
    load_after = os.getloadavg()
    changed = " (CHANGED during the run)" if source_digest() != digest else ""
    print(
        f"cluster benchmark: median of {rounds} interleaved rounds, {os.cpu_count()} CPUs, "
        f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after, "
        f"{time.monotonic() - started:.0f} s; timelypy source {digest}{changed}"
    )
    print(
        "ratio: exchange = throughput / plain msgpack; wordcount = speed-up over 1 process; "
        "epochs = round trip / raw zmq REQ/REP"
    )
    print(
        "busy: the timed thread's CPU time / wall time (median); below 1 it waited for a "
        "peer or a core"
    )
    print(
        "cpu ratio: the ratio from the timed threads' CPU time instead of wall time (the "
        "slowest worker's), what a machine with a free core per worker would approach; "
        "epochs: CPU per epoch / raw round trip"
    )
    columns = [
        "measurement",
        "candidate",
        "median",
        "rate",
        "ratio",
        "goal",
        "spread",
        "busy",
        "cpu ratio",
        "note",
    ]
    print_table(rows, columns, markdown=args.markdown)
    if args.profile is not None:
        profile(args.profile, size, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
