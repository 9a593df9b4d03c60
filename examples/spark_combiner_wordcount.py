"""Wordcount at the runtime layer, with a hand-written combiner, on Spark executors.

    python examples/spark_combiner_wordcount.py                # generated text, local[2]
    python examples/spark_combiner_wordcount.py --master local[4] --workers 4 INPUT [INPUT ...]
    spark-submit --master spark://host:7077 \
        examples/spark_combiner_wordcount.py --workers 8 hdfs:///books

The flow API's wordcount (``examples/spark_wordcount.py``, the README's first
run) needs no combiner: its keyed steps combine on the sending worker.  This
is the same job written against Timely's runtime (``unary_notify`` and
notificators), as a custom operator would be.

Spark reads the text (one partition per worker), each timelypy worker counts
the words of its partition, the partial counts are exchanged between the
workers by word (``stable_hash``, the same in every process), each word's
total is completed when the epoch closes, and the result comes back as a
Spark DataFrame, whose top words are printed.  Without ``INPUT`` a
deterministic text is generated (``--lines`` lines of Zipf-distributed
words).
"""

from __future__ import annotations

import argparse
import random
import string
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import timelypy
import timelypy_spark
from timelypy import Exchange, Pipeline, stable_hash


def count_words(scope: timelypy.Scope, lines: timelypy.Stream) -> timelypy.Stream:
    """``(word, count)`` for every word of ``lines``, per epoch, across all workers."""

    def totals_per_epoch() -> Any:
        counts: dict[Any, Counter[str]] = {}

        def logic(input: Any, output: Any, notificator: Any) -> None:
            for cap, batch in input:
                total = counts.get(cap.time)
                if total is None:
                    total = counts[cap.time] = Counter()
                    notificator.notify_at(cap.retain())
                if batch and type(batch[0]) is str:
                    total.update(" ".join(batch).split())  # lines: one C-level count
                else:
                    for word, n in batch:  # partial counts from other workers
                        total[word] += n
            for cap, _ in notificator:  # the epoch is complete: emit its totals
                output.session(cap).give_batch(list(counts.pop(cap.time).items()))

        return logic

    # A combiner: each worker counts its own lines for the whole epoch, so that
    # every distinct word crosses to the worker that owns it only once.
    local = lines.unary_notify(Pipeline(), "Combine", [], totals_per_epoch())
    return local.unary_notify(
        Exchange(lambda pair: stable_hash(pair[0])), "Count", [], totals_per_epoch()
    )


def generate_text(directory: Path, lines: int, files: int, seed: int = 7) -> list[str]:
    """Write ``lines`` lines of Zipf-distributed words into ``files`` files; return their paths."""
    rng = random.Random(seed)
    vocabulary = sorted(
        {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(2000)}
    )
    rng.shuffle(vocabulary)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    paths = []
    per_file = max(1, lines // files)
    for index in range(files):
        path = directory / f"part-{index}.txt"
        # one choices() call per file, not per line: the words of all its lines at once
        words = rng.choices(vocabulary, weights, k=10 * per_file)
        with path.open("w") as out:
            out.writelines(
                " ".join(words[start : start + 10]) + "\n" for start in range(0, len(words), 10)
            )
        paths.append(str(path))
    return paths


def _default_master() -> str | None:
    """``None`` under spark-submit (its ``--master`` applies), else ``local[2]``."""
    import os

    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[2]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", help="text files or directories (default: generated)")
    parser.add_argument(
        "--master", help="Spark master URL (default: spark-submit's, else local[2])"
    )
    parser.add_argument("--workers", type=int, default=2, help="timelypy workers (Spark tasks)")
    parser.add_argument("--lines", type=int, default=100_000, help="lines of generated text")
    parser.add_argument("--top", type=int, default=10, help="how many words to print")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="timelypy-wordcount-") as tmp:
        inputs = args.inputs or generate_text(Path(tmp), args.lines, args.workers)
        # quiet output: no Spark console progress bar over the result (the web UI stays on)
        spark = timelypy_spark.session(
            args.master or _default_master(),
            "timelypy-wordcount",
            spark__ui__showConsoleProgress="false",
        )
        try:
            lines = spark.sparkContext.textFile(",".join(inputs), args.workers)
            if lines.getNumPartitions() != args.workers:
                lines = lines.repartition(args.workers)
            started = time.perf_counter()
            counts = timelypy_spark.run(
                spark, count_words, lines, workers=args.workers, schema="word string, count long"
            )
            top = counts.orderBy("count", "word", ascending=[False, True]).limit(args.top).collect()
            seconds = time.perf_counter() - started
            total = counts.groupBy().sum("count").collect()[0][0]
            print(
                f"{total} words, {counts.count()} distinct, counted by {args.workers} timelypy "
                f"workers on {args.master} in {seconds:.2f} s"
            )
            for row in top:
                print(f"{row['count']:>10}  {row['word']}")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
