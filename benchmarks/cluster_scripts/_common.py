"""What the cluster benchmark scripts share: arguments, data, timing, output.

The scripts in this folder are ordinary timelypy programs: they read
Timely's options (``-n``, ``-p``, ``-w``, ``-h``) with
:meth:`timelypy.Config.from_args` and their own parameters as free
``name=value`` arguments, so they run under ``python -m timelypy.launch``
as well as under ``benchmarks/cluster_bench.py``, which starts the
processes itself::

    python -m timelypy.launch -n 2 -w 1 benchmarks/cluster_scripts/exchange.py reps=3

Timing: every script builds its dataflow, then runs one *sync* epoch (an
empty epoch that every worker waits out with its probe) before it starts
the clock, so process start-up, imports, the cluster handshake and
loading the data are never timed, and the workers start within one
network round trip of each other.  ``gc.collect()`` runs before the sync;
the collector stays enabled while timed, as in ``benchmarks/_harness.py``.

Output: one line ``RESULT {json}`` per process on stdout, read by
``cluster_bench.py``.  Correctness checks run after the clock stops, in the
script when the worker can check alone, otherwise in ``cluster_bench.py``
from what the workers report.

Profiling: ``profile=PATH`` wraps every timed section in one
``cProfile.Profile`` and writes ``PATH.p<process>.prof``.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(REPO_ROOT))

import timelypy  # noqa: E402
from timelypy import Config  # noqa: E402

__all__ = [
    "REPO_ROOT",
    "CHUNK",
    "PARK_SECONDS",
    "parse",
    "emit",
    "Profiler",
    "Timer",
    "sync",
    "timed_epoch",
    "run_and_emit",
    "exchange_records",
    "chunks",
]

#: Records per input batch: ``scope.to_stream``'s batch size.
CHUNK = 8192
#: Longest single park while waiting for a probe (a message ends it sooner).
PARK_SECONDS = 1.0


def parse(argv: list[str], defaults: dict[str, Any]) -> tuple[Config, dict[str, Any]]:
    """Timely's options from ``argv``, and ``name=value`` parameters typed like ``defaults``."""
    config, rest = Config.from_args(argv)
    params = dict(defaults)
    for arg in rest:
        name, sep, value = arg.partition("=")
        if not sep or name not in defaults:
            raise SystemExit(f"unknown argument {arg!r}; known: {', '.join(defaults)}")
        kind = type(defaults[name])
        params[name] = value if defaults[name] is None else kind(value)
    return config, params


def emit(result: dict[str, Any]) -> None:
    """Print the process's result for ``cluster_bench.py``."""
    print("RESULT " + json.dumps(result), flush=True)


class Profiler:
    """A ``cProfile.Profile`` switched on only inside ``timed()`` (a no-op without a path)."""

    def __init__(self, path: str | None, process: int) -> None:
        self.path = f"{path}.p{process}.prof" if path else None
        self.profile = cProfile.Profile() if path else None

    @contextlib.contextmanager
    def timed(self, enabled: bool = True) -> Iterator[None]:
        """Profile the body (when profiling and ``enabled``)."""
        if self.profile is None or not enabled:
            yield
            return
        self.profile.enable()
        try:
            yield
        finally:
            self.profile.disable()

    def dump(self) -> None:
        if self.profile is not None and self.path is not None:
            self.profile.dump_stats(self.path)


class Timer:
    """Wall time, and CPU time of this thread and of the whole process, of a ``with`` body.

    CPU time well below wall time means the worker waited: for a peer, or for
    a core (the machine is shared).  The process's CPU time includes ZeroMQ's
    I/O thread, which does the sending, receiving and CURVE encryption.
    """

    __slots__ = ("_start", "process", "thread", "wall")

    def __enter__(self) -> Timer:
        self._start = (time.perf_counter(), time.thread_time(), time.process_time())
        return self

    def __exit__(self, *exc: object) -> None:
        wall, thread, process = self._start
        self.wall = time.perf_counter() - wall
        self.thread = time.thread_time() - thread
        self.process = time.process_time() - process

    def as_dict(self) -> dict[str, float]:
        """The three times, for ``emit``."""
        return {"wall": self.wall, "thread_cpu": self.thread, "process_cpu": self.process}


def sync(
    worker: timelypy.Worker, handle: timelypy.InputHandle, probe: timelypy.ProbeHandle, time: int
) -> None:
    """Advance ``handle`` to ``time`` and step until the probe has passed every earlier time.

    When this returns, every worker has advanced its input to ``time``.  The
    worker waits with ``step_or_park``: it blocks in the network poll while no
    operator has work, instead of spinning ``worker.step()``.  On a 2-core
    machine a spinning worker takes the core that the other process and
    ZeroMQ's I/O threads need (``epochs.py wait=spin`` measures the effect).
    """
    handle.advance_to(time)
    while probe.less_than(time):
        worker.step_or_park(PARK_SECONDS)


def timed_epoch(
    worker: timelypy.Worker,
    handle: timelypy.InputHandle,
    probe: timelypy.ProbeHandle,
    batches: list[list[Any]],
    epoch: int,
) -> Timer:
    """Feed ``batches`` at the current epoch, advance to ``epoch``, step until done; timed."""
    with Timer() as timer:
        for batch in batches:
            handle.send_batch(list(batch))
            worker.step()
        sync(worker, handle, probe, epoch)
    return timer


def run_and_emit(
    config: Config, program: Callable[[timelypy.Worker], dict[str, Any]], profiler: Profiler
) -> None:
    """Run ``program`` on this process's workers, save the profile, emit each worker's result."""
    results = timelypy.execute(config, program)
    profiler.dump()
    for result in results:
        emit(result)


def chunks(items: list[Any], size: int = CHUNK) -> list[list[Any]]:
    """``items`` cut into lists of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def exchange_records(words: list[str], process: int) -> list[tuple[str, int]]:
    """The exchange benchmark's records of the worker that holds part ``process``.

    ``(word, position)`` with the word's position in the whole corpus, so an
    exchange keyed by the position sends exactly every other record to the
    other of two workers.
    """
    base = process * len(words)
    return [(word, base + i) for i, word in enumerate(words)]
