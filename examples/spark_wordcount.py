r"""Wordcount on Spark, written with the flow API: the README's first run.

    python examples/spark_wordcount.py                    # local[2], 2 workers
    python examples/spark_wordcount.py --copies 100000 --epochs 8
    spark-submit --master spark://host:7077 examples/spark_wordcount.py --workers 8

The text is the Zen of Python (``python -m this``), ``--copies`` times over,
so every count can be checked by hand: "better" is in the Zen 8 times, so an
epoch of 5,000 copies counts it 40,000 times.  Spark makes the lines (an RDD,
one partition per worker); each timelypy worker is one long-lived Spark task
that reads its partition; copy ``c`` of the text belongs to epoch
``c * epochs // copies``, so every epoch holds the same number of copies.

The flow is the classic epoch wordcount (``docs/flow_epochs.md``): lower-case each
line, split it into words, ``(word, 1)``, and ``reduce_epoch(add)`` -- no
hand-written combiner: each worker adds up its own words of an epoch before
one ``(word, n)`` per word crosses to the word's worker.  ``iter_flow``
yields each epoch's counts on the driver as soon as every worker has closed
it, and the program prints the top words of each.

Times: the start-up (a Spark session, the first Python workers), the first
run, and a second, warm run of the same job (what a job costs on a running
cluster).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import os
import re
import sys
import time
from collections.abc import Iterator
from operator import add
from typing import Any

import timelypy_spark
from timelypy.flow import Dataflow

with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
    import this

#: The Zen of Python, as ``python -m this`` prints it.
ZEN = codecs.decode(this.s, "rot13").splitlines()
WORD = re.compile(r"[a-z']+")


def wordcount() -> Dataflow:
    """The classic wordcount: ``(copy, line)`` records in, ``(word, count)`` per epoch out."""
    flow = Dataflow()
    flow.map(lambda record: record[1].lower())  # (copy, line) -> the line, lower-cased
    flow.flat_map(WORD.findall)
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)  # the epoch's total per word, when the epoch closes
    flow.capture()
    return flow


def copies_of_the_text(copies: Iterator[int]) -> Iterator[tuple[int, str]]:
    """``(copy, line)`` for every line of the given copies of the Zen."""
    return ((copy, line) for copy in copies for line in ZEN)


def run_once(spark: Any, copies: int, epochs: int, workers: int) -> list[tuple[int, list[Any]]]:
    """One run of the job: ``(epoch, [(word, count), ...])`` in epoch order."""
    lines = spark.sparkContext.parallelize(range(copies), workers).mapPartitions(copies_of_the_text)
    return list(
        timelypy_spark.iter_flow(
            spark,
            wordcount(),
            lines,
            workers=workers,
            epoch_of=lambda record: record[0] * epochs // copies,
            presorted=True,  # each partition's copies are in order already
        )
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--master", help="Spark master URL (default: spark-submit's, else local[2])"
    )
    parser.add_argument("--workers", type=int, default=2, help="timelypy workers (Spark tasks)")
    parser.add_argument("--copies", type=int, default=20_000, help="copies of the Zen of Python")
    parser.add_argument("--epochs", type=int, default=4, help="epochs the copies are split into")
    parser.add_argument("--top", type=int, default=4, help="words printed per epoch")
    args = parser.parse_args(argv)
    master = args.master
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        master = "local[2]"

    started = time.perf_counter()
    # quiet output: no Spark console progress bar over the result (the web UI stays on)
    spark = timelypy_spark.session(
        master, "timelypy-wordcount", spark__ui__showConsoleProgress="false"
    )
    try:
        spark.sparkContext.parallelize(range(args.workers), args.workers).count()
        startup = time.perf_counter() - started
        first_started = time.perf_counter()
        run_once(spark, args.copies, args.epochs, args.workers)
        first = time.perf_counter() - first_started
        warm_started = time.perf_counter()
        result = run_once(spark, args.copies, args.epochs, args.workers)
        warm = time.perf_counter() - warm_started
        report(spark.sparkContext.master, args, result, startup, first, warm)
    finally:
        spark.stop()


def report(
    master: str,
    args: argparse.Namespace,
    result: list[tuple[int, list[Any]]],
    startup: float,
    first: float,
    warm: float,
) -> None:
    """Print what the run did: the text, the epochs' top words, the times."""
    per_copy = sum(len(WORD.findall(line.lower())) for line in ZEN)
    words = per_copy * args.copies
    print(
        f"Counted {words:,} words: the Zen of Python (python -m this) {args.copies:,} times, "
        f"in {len(result)} epochs,\nby {args.workers} timelypy workers running as Spark tasks "
        f"on {master}."
    )
    for epoch, counts in result:
        top = sorted(counts, key=lambda pair: (-pair[1], pair[0]))[: args.top]
        shown = ", ".join(f"{word} {count:,}" for word, count in top)
        total = sum(count for _, count in counts)
        print(f"  epoch {epoch}: {total:,} words; {shown}")
    better = sum(line.lower().split().count("better") for line in ZEN)
    print(
        f'Check: "better" is in the Zen {better} times, so each epoch of '
        f"{args.copies // max(1, len(result)):,} copies counts it "
        f"{better * (args.copies // max(1, len(result))):,} times."
    )
    print(
        f"Spark start-up {startup:.1f} s; first run {first:.1f} s; warm run {warm:.2f} s "
        f"({words / warm / 1e6:.1f} M words/s)."
    )


if __name__ == "__main__":
    sys.exit(main())
