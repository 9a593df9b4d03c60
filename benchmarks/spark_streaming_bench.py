r"""Structured Streaming micro-batches: ``stream_flow``'s gang against Spark alone.

    python -m benchmarks.spark_streaming_bench [--small N] [--large N] [--batches B]
                                               [--warmup W] [--markdown]

One Spark session (``local[3]``: the gang's 2 workers and one slot for the
micro-batches' jobs; Spark alone gets all 3, see *Slots* below).  The computation is a running
word count, its updated counts on the driver after every micro-batch:

* **timelypy** -- :func:`timelypy_spark.streaming.stream_flow` with a flow
  ``flat_map(split) -> map((w, 1)) -> reduce_epoch(add) -> stateful_map``
  (the running total of each word seen in the epoch), read from the
  micro-batch one partition at a time (``toLocalIterator``), and again with
  ``arrow=True`` (the whole micro-batch as one Arrow table);
* **Spark alone (state store, checkpointed)** -- Structured Streaming:
  ``explode(split(value))``, ``groupBy("word").count()`` in ``update``
  output mode, and a ``foreachBatch`` that collects each micro-batch's
  updated counts.  Its state store writes every micro-batch's changes to
  the query's checkpoint, which the gang does not do;
* **Spark alone (no state store)** -- the comparison at equal
  checkpointing: a ``foreachBatch`` that counts each micro-batch with a
  batch ``groupBy().count()`` and keeps the running totals on the driver
  (both this and ``stream_flow``'s query checkpoint only the file source's
  offsets).

Slots: the session is ``local[3]`` for every candidate; the gang takes 2
for its workers and leaves 1 for the micro-batches' jobs, Spark alone may
use all 3, and its aggregation runs in 2 shuffle partitions
(``spark.sql.shuffle.partitions``), one per gang worker.  The verdict
columns name the Spark candidate they compare with.

Both read a file stream (``spark.readStream.text`` with
``maxFilesPerTrigger=1``, the default trigger) of a directory the benchmark
fills in a closed loop: it drops one file of lines from the benchmark
corpus (:mod:`benchmarks._data`), waits until that micro-batch's counts
reach the driver, and drops the next.  **File -> driver** is the time from a
file's rename into the directory to its counts on the driver (it counts
Spark noticing the file, reading it, the computation and the way back);
for timelypy **close -> driver** is the part after the micro-batch's rows
were all inside the gang (its epoch closed) -- the gang's own latency.
Records/s are lines per micro-batch over the median file -> driver time.
Run with ``--small`` lines per file (latency) and ``--large`` (throughput);
the first ``--warmup`` micro-batches of each run are left out.  Every run's
final counts are checked against ``collections.Counter``.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._data import load_lines
from benchmarks._harness import print_table

WORKERS = 2
MASTER = "local[3]"
WAIT = 120.0  # seconds for one micro-batch's result, at most


def drop(directory: Path, index: int, lines: Sequence[str]) -> float:
    """Write file ``index`` under a hidden name, rename it in; the time of the rename."""
    hidden = directory / f".part-{index:05d}.txt"
    hidden.write_text("\n".join(lines) + "\n")
    stamp = 1_700_000_000 + index  # oldest first, whatever the clock's resolution
    os.utime(hidden, (stamp, stamp))
    moment = time.time()
    hidden.rename(directory / f"part-{index:05d}.txt")
    return moment


def wordcount_flow() -> Any:
    """The running count of every word, once per micro-batch that saw it."""
    from operator import add

    from timelypy.flow import Dataflow

    flow = Dataflow()
    flow.flat_map(lambda row: row[0].split())
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.stateful_map("total", lambda word: 0, lambda total, n: (total + n, total + n))
    flow.capture()
    return flow


def run_timelypy(
    spark: Any, batches: list[list[str]], arrow: bool
) -> tuple[list[float], list[float], dict[str, int]]:
    """File -> driver and close -> driver times of each micro-batch, and the final counts."""
    from timelypy_spark.streaming import stream_flow

    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        frame = spark.readStream.option("maxFilesPerTrigger", 1).text(folder)
        run = stream_flow(spark, wordcount_flow(), frame, workers=WORKERS, arrow=arrow)
        dropped = [drop(directory, 0, batches[0])]
        arrived: dict[int, float] = {}
        counts: dict[str, int] = {}
        with run:
            for epoch, items in run:
                arrived[epoch] = time.time()
                counts.update(dict(items))
                if len(arrived) == len(batches):
                    run.stop()
                elif len(dropped) == len(arrived):
                    dropped.append(drop(directory, len(dropped), batches[len(dropped)]))
        taken = {batch: end for batch, _, _, end in run.feed.deliveries}
    epochs = sorted(arrived)
    file_to_driver = [arrived[e] - dropped[i] for i, e in enumerate(epochs)]
    close_to_driver = [arrived[e] - taken[e] for e in epochs]
    return file_to_driver, close_to_driver, counts


def run_spark(
    spark: Any, batches: list[list[str]], state_store: bool = True
) -> tuple[list[float], dict[str, int]]:
    """File -> driver time of each micro-batch with Spark alone, and the final counts.

    With ``state_store`` the running counts are Spark's streaming
    aggregation (``groupBy().count()``, ``update`` mode): its state store
    writes each micro-batch's changes to the query's checkpoint.  Without,
    each micro-batch is counted on its own (a batch ``groupBy().count()``
    inside ``foreachBatch``) and the running totals are kept on the driver:
    no state store, nothing checkpointed but the file source's offsets, as
    for ``stream_flow``'s own query (whose gang keeps the totals in its
    workers, not checkpointed).
    """
    from pyspark.sql.functions import explode, split

    results: queue.Queue[tuple[int, list[Any], float]] = queue.Queue()
    totals: dict[str, int] = {}

    def collect(frame: Any, batch_id: int) -> None:
        rows = frame.collect()
        results.put((batch_id, rows, time.time()))

    def count_batch(frame: Any, batch_id: int) -> None:
        words = frame.select(explode(split(frame.value, " ")).alias("word"))
        updated = []
        for row in words.groupBy("word").count().collect():
            totals[row["word"]] = totals.get(row["word"], 0) + row["count"]
            updated.append({"word": row["word"], "count": totals[row["word"]]})
        results.put((batch_id, updated, time.time()))

    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        lines = spark.readStream.option("maxFilesPerTrigger", 1).text(folder)
        if state_store:
            words = lines.select(explode(split(lines.value, " ")).alias("word"))
            writer = words.groupBy("word").count().writeStream.outputMode("update")
            query = writer.foreachBatch(collect).start()
        else:
            query = lines.writeStream.foreachBatch(count_batch).start()
        latencies: list[float] = []
        counts: dict[str, int] = {}
        try:
            for index, batch in enumerate(batches):
                moment = drop(directory, index, batch)
                while True:  # skip empty micro-batches, if Spark runs any
                    _, rows, at = results.get(timeout=WAIT)
                    if rows:
                        break
                latencies.append(at - moment)
                counts.update({row["word"]: row["count"] for row in rows})
        finally:
            query.stop()
    return latencies, counts


def summary(values: list[float]) -> tuple[float, float]:
    """Median and 90th percentile."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both sizes with the three candidates; print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_streaming_bench")
    parser.add_argument("--small", type=int, default=100, help="lines per file, latency runs")
    parser.add_argument("--large", type=int, default=20_000, help="lines per file, throughput")
    parser.add_argument("--batches", type=int, default=15, help="micro-batches per run")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    import timelypy_spark

    corpus = load_lines()
    spark = timelypy_spark.session(
        MASTER,
        "timelypy-streaming-bench",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        # Spark's aggregation in as many tasks as the gang has workers
        spark__sql__shuffle__partitions=str(WORKERS),
    )
    rows = []
    try:
        for size in (args.small, args.large):
            batches = [
                [corpus[(b * size + i) % len(corpus)] for i in range(size)]
                for b in range(args.batches)
            ]
            expected = Counter(word for batch in batches for line in batch for word in line.split())
            medians, p90s = {}, {}
            for state_store in (False, True):
                spark_times, spark_counts = run_spark(spark, batches, state_store)
                assert spark_counts == expected, "Spark's counts differ from Counter's"
                medians[state_store], p90s[state_store] = summary(spark_times[args.warmup :])
            for state_store in (False, True):
                name = "state store, checkpointed" if state_store else "no state store"
                med = medians[state_store]
                rows.append(
                    [
                        f"Spark alone ({name}), {size:,} lines",
                        f"{med * 1000:.0f} ms",
                        f"{p90s[state_store] * 1000:.0f} ms",
                        "-",
                        f"{size / med:,.0f}",
                        f"{medians[False] / med:.2f}x",
                        f"{medians[True] / med:.2f}x",
                    ]
                )
            spark_med = medians[False]
            for arrow in (False, True):
                file_times, close_times, counts = run_timelypy(spark, batches, arrow)
                assert counts == expected, "timelypy's counts differ from Counter's"
                med, p90 = summary(file_times[args.warmup :])
                close_med, close_p90 = summary(close_times[args.warmup :])
                rows.append(
                    [
                        f"timelypy{' arrow' if arrow else ''}, {size:,} lines",
                        f"{med * 1000:.0f} ms",
                        f"{p90 * 1000:.0f} ms",
                        f"{close_med * 1000:.0f} / {close_p90 * 1000:.0f} ms",
                        f"{size / med:,.0f}",
                        f"{spark_med / med:.2f}x",
                        f"{medians[True] / med:.2f}x",
                    ]
                )
    finally:
        spark.stop()
    print(
        f"running word count over a file stream, {MASTER} (3 task slots for every candidate), "
        f"timelypy gang of {WORKERS} workers, Spark's aggregation in {WORKERS} shuffle "
        f"partitions, {args.batches} micro-batches per run, the first {args.warmup} left out; "
        "timelypy and 'no state store' checkpoint nothing but the file source's offsets"
    )
    print_table(
        rows,
        [
            "run",
            "file->driver median",
            "p90",
            "close->driver median / p90",
            "lines/s",
            "vs Spark, no state store",
            "vs Spark, state store",
        ],
        markdown=args.markdown,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
