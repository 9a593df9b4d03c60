"""Wordcount over the benchmark corpus, one share of the lines per worker.

    python benchmarks/cluster_scripts/wordcount.py [combine=0|1|2] [lines=N] [reps=R]
    python -m timelypy.launch -n 2 -w 1 benchmarks/cluster_scripts/wordcount.py [combine=1] ...

Each worker feeds its share of the lines -- ``part-i.txt`` for worker ``i``
of two, both parts for a single worker; the first ``lines`` lines of each
part -- in batches of ``CHUNK`` lines through an input handle, one
``worker.step()`` per batch, into::

    flat_map(str.split)
      -> Combine   (combine=1: Counter of each batch, emitted as (word, n) pairs)
      -> Count     (Exchange by stable_hash(word); per time a dict of counts,
                    emitted as (word, count) pairs when the frontier passes it)

With ``combine=0`` every word is exchanged as it is and ``Count`` counts
words with ``Counter.update``.  ``combine=1`` pre-aggregates each batch;
``combine=2`` pre-aggregates each whole epoch (lines counted directly, one
``(word, n)`` per distinct word per epoch), as ``examples/spark_wordcount.py``
does.

Per rep the worker checks the counts it produced against
``collections.Counter`` over all words of the corpus share in play (it loads
every part outside the clock), restricted to the words it owns; it prints
its last rep's counts so the benchmark can check the merged result too.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Profiler, chunks, parse, run_and_emit, sync, timed_epoch

import timelypy
from benchmarks._data import part_paths
from timelypy import stable_hash
from timelypy.dataflow import Exchange, Pipeline

DEFAULTS = {"lines": 100_000, "reps": 3, "combine": 1, "profile": ""}


def combine(cap, info):
    """Pre-aggregate each batch of words into ``(word, n)`` pairs."""

    def logic(inp, out) -> None:
        for cap, words in inp:
            out.session(cap).give_batch(list(Counter(words).items()))

    return logic


def combine_epoch(inp, out, notificator) -> None:
    """Count each epoch's lines locally; give ``(word, n)`` pairs once the epoch completes.

    The combiner a Timely user writes for a batch job: every distinct word
    crosses to its owner once per epoch instead of once per batch.
    """
    totals = _EPOCH_TOTALS
    for cap, lines in inp:
        total = totals.get(cap.time)
        if total is None:
            total = totals[cap.time] = Counter()
            notificator.notify_at(cap.retain())
        total.update(" ".join(lines).split())
    for cap, _ in notificator:
        out.session(cap).give_batch(list(totals.pop(cap.time).items()))


_EPOCH_TOTALS: dict = {}


def count_pairs(cap, info):
    """Sum ``(word, n)`` pairs per time; give ``(word, count)`` once the time completes."""
    counts: dict = {}

    def logic(inp, out) -> None:
        for cap, pairs in inp:
            entry = counts.get(cap.time)
            if entry is None:
                entry = counts[cap.time] = (cap.retain(), {})
            total = entry[1]
            get = total.get
            for word, n in pairs:
                total[word] = get(word, 0) + n
        if counts:
            frontier = inp.frontier
            for time in sorted(t for t in counts if not frontier.less_equal(t)):
                done, total = counts.pop(time)
                out.session(done).give_batch(list(total.items()))
                done.drop()

    return logic


def count_words(cap, info):
    """Count words per time with ``Counter.update``; give ``(word, count)`` when complete."""
    counts: dict = {}

    def logic(inp, out) -> None:
        for cap, words in inp:
            entry = counts.get(cap.time)
            if entry is None:
                entry = counts[cap.time] = (cap.retain(), Counter())
            entry[1].update(words)
        if counts:
            frontier = inp.frontier
            for time in sorted(t for t in counts if not frontier.less_equal(t)):
                done, total = counts.pop(time)
                out.session(done).give_batch(list(total.items()))
                done.drop()

    return logic


def main() -> None:
    config, params = parse(sys.argv, DEFAULTS)
    n, reps, combined = params["lines"], params["reps"], bool(params["combine"])
    per_epoch = params["combine"] == 2
    profiler = Profiler(params["profile"], config.process_index)

    def program(worker: timelypy.Worker) -> dict:
        index, peers = worker.index, worker.peers
        parts = [p.read_text(encoding="ascii").splitlines()[:n] for p in part_paths()]
        mine = [line for i, part in enumerate(parts) if i % peers == index for line in part]
        expected_all = Counter(w for part in parts for line in part for w in line.split())
        mask = peers - 1 if peers & (peers - 1) == 0 else None
        owner = (
            (lambda w: stable_hash(w) & mask)
            if mask is not None
            else (lambda w: stable_hash(w) % peers)
        )
        expected = {w: c for w, c in expected_all.items() if owner(w) == index}
        batches = chunks(mine)
        del parts, expected_all

        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        results: list[tuple[int, list]] = []

        def build(scope):
            lines = scope.input_from(handle)
            if per_epoch:
                pairs = lines.unary_notify(Pipeline(), "CombineEpoch", [], combine_epoch)
                counted = pairs.unary_frontier(
                    Exchange(lambda pair: stable_hash(pair[0])), "Count", count_pairs
                )
                counted.inspect_batch(lambda t, data: results.append((t, data))).probe_with(probe)
                return
            words = lines.flat_map(str.split)
            if combined:
                pairs = words.unary(Pipeline(), "Combine", combine)
                counted = pairs.unary_frontier(
                    Exchange(lambda pair: stable_hash(pair[0])), "Count", count_pairs
                )
            else:
                counted = words.unary_frontier(Exchange(stable_hash), "Count", count_words)
            counted.inspect_batch(lambda t, data: results.append((t, data))).probe_with(probe)

        worker.dataflow(build)
        epoch = 0
        times = []
        counts: dict = {}
        for rep in range(reps + 1):  # rep 0 warms up
            gc.collect()
            epoch += 1
            sync(worker, handle, probe, epoch)
            epoch += 1
            with profiler.timed(enabled=rep > 0):
                timer = timed_epoch(worker, handle, probe, batches, epoch)
            counts = {}
            for t, data in results:
                if t != epoch - 1:
                    raise AssertionError(f"worker {index}: counts at time {t}, fed {epoch - 1}")
                counts.update(data)
            if counts != expected:
                raise AssertionError(
                    f"worker {index} rep {rep}: {len(counts)} words counted, "
                    f"{sum(counts.values())} in all; expected {len(expected)} words, "
                    f"{sum(expected.values())} in all"
                )
            results.clear()
            if rep:
                times.append(timer.as_dict())
        return {
            "worker": index,
            "times": times,
            "lines": len(mine),
            "owned_words": sum(expected.values()),
            "combine": int(combined),
            "counts": counts,
            "checked": True,
        }

    run_and_emit(config, program, profiler)


if __name__ == "__main__":
    main()
