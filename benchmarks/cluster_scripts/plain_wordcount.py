"""How well this machine runs two processes at once: plain wordcount, no timelypy.

    python benchmarks/cluster_scripts/plain_wordcount.py parts=0,1 start_at=T [lines=N] [reps=R]

Counts the words of the first ``lines`` lines of the given parts with
``benchmarks.peers.plain.wordcount`` (a ``collections.Counter``), ``reps``
times after one warm-up, starting at the wall-clock time ``start_at`` (so
that processes started together run together), and prints the times.

``cluster_bench.py`` runs it as one process over both parts and as two
processes over one part each, at the same time.  Nothing is shared between
the two, so ``time(1 process) / time(2 processes)`` is the most a 2-process
computation can gain on this machine for this work: it shows what sharing
the cores, caches and memory bandwidth costs (and any other load on the
machine), which timelypy's speed-up is then read against.
"""

from __future__ import annotations

import gc
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit

from benchmarks._data import part_paths
from benchmarks.peers import plain

DEFAULTS = {"parts": "0,1", "lines": 100_000, "reps": 3, "start_at": 0.0}


def main() -> None:
    params = dict(DEFAULTS)
    for arg in sys.argv[1:]:
        name, sep, value = arg.partition("=")
        if not sep or name not in DEFAULTS:
            raise SystemExit(f"unknown argument {arg!r}; known: {', '.join(DEFAULTS)}")
        params[name] = type(DEFAULTS[name])(value)
    paths = part_paths()
    parts = [int(p) for p in str(params["parts"]).split(",")]
    lines = [
        line
        for p in parts
        for line in paths[p].read_text(encoding="ascii").splitlines()[: params["lines"]]
    ]
    expected = Counter(w for line in lines for w in line.split())
    delay = params["start_at"] - time.time()
    if delay > 0:
        time.sleep(delay)
    times = []
    for rep in range(params["reps"] + 1):  # rep 0 warms up
        gc.collect()
        with Timer() as timer:
            counts = plain.wordcount(lines)
        if counts != expected:
            raise AssertionError("plain wordcount differs from Counter")
        if rep:
            times.append(timer.as_dict())
    emit({"worker": parts, "times": times, "words": expected.total(), "checked": True})


if __name__ == "__main__":
    main()
