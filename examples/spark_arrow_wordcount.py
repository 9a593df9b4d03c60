r"""Wordcount on Spark with Arrow-native steps: a DataFrame in, a DataFrame out.

    python examples/spark_arrow_wordcount.py                    # local[2], 2 workers
    python examples/spark_arrow_wordcount.py --copies 200000 --top 5
    spark-submit --master spark://host:7077 examples/spark_arrow_wordcount.py --workers 8

The text is the Zen of Python (``python -m this``), ``--copies`` times over,
made by Spark itself (``spark.range`` picking lines), so no line is ever a
Python object: the flow's items are the DataFrame's own Arrow record
batches (``run_flow(..., row_type="arrow")``), each timelypy worker one
long-lived Spark task.

The flow (``docs/arrow.md``) is three steps:

* ``flat_map_arrow``: a batch of lines -> a batch of their words, with
  ``pyarrow.compute`` (lower-case, split on anything that is not a letter
  or an apostrophe, empty strings dropped);
* ``aggregate_arrow``: the rows per word (``count_all``), grouped and
  combined in Arrow on each worker, the partial counts sent to each word's
  worker, the totals emitted as record batches when the epoch closes;
* ``op.output`` to a ``CaptureSink``: those record batches become the
  result DataFrame's batches.

It prints the top words, a check ("better" is in the Zen 8 times, so
``--copies N`` counts it ``8 * N`` times) and the times of a first and a
warm run.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import os
import re
import time
from typing import Any

import timelypy.flow.operators as op
import timelypy_spark
from timelypy.flow import Dataflow
from timelypy.flow.operators.arrow import aggregate_arrow, flat_map_arrow
from timelypy.flow.sinks import CaptureSink
from timelypy_spark import SparkInput

with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
    import this

#: The Zen of Python, as ``python -m this`` prints it.
ZEN = codecs.decode(this.s, "rot13").splitlines()
#: A word: letters and apostrophes, after lower-casing.
WORD = r"[a-z']+"
#: What separates words: anything else.
SEPARATORS = r"[^a-z']+"


def words_of(batch: Any) -> list[Any]:
    """A record batch of lines -> one record batch of their words (column ``word``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lower = pc.utf8_lower(batch.column("line"))
    tokens = pc.list_flatten(pc.split_pattern_regex(lower, SEPARATORS))
    return [pa.record_batch({"word": pc.filter(tokens, pc.not_equal(tokens, ""))})]


def wordcount() -> Dataflow:
    """Lines in, ``(word, count_all)`` record batches out, one per epoch and worker."""
    flow = Dataflow("arrow_wordcount")
    lines = op.input("lines", flow, SparkInput())
    words = flat_map_arrow("words", lines, words_of)
    counts = aggregate_arrow("count", words, "word", [([], "count_all")])
    op.output("out", counts, CaptureSink())
    return flow


def zen_lines(spark: Any, copies: int, workers: int) -> Any:
    """A DataFrame of ``copies`` copies of the Zen, one column ``line``, made in the JVM."""
    from pyspark.sql import functions as F

    text = F.array(*[F.lit(line) for line in ZEN])
    index = (F.col("id") % len(ZEN) + 1).cast("int")
    rows = spark.range(0, copies * len(ZEN), numPartitions=workers)
    return rows.select(F.element_at(text, index).alias("line"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--master", help="Spark master URL (default: spark-submit's, else local[2])"
    )
    parser.add_argument("--workers", type=int, default=2, help="timelypy workers (Spark tasks)")
    parser.add_argument("--copies", type=int, default=20_000, help="copies of the Zen of Python")
    parser.add_argument("--top", type=int, default=4, help="words printed")
    args = parser.parse_args(argv)
    master = args.master
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        master = "local[2]"
    spark = timelypy_spark.session(
        master, "timelypy-arrow-wordcount", spark__ui__showConsoleProgress="false"
    )
    try:
        lines = zen_lines(spark, args.copies, args.workers)
        for run in ("first", "warm"):
            started = time.perf_counter()
            counts = timelypy_spark.run_flow(
                spark,
                wordcount(),
                lines,
                workers=args.workers,
                row_type="arrow",
                schema="word string, count_all long",
            )
            rows = counts.orderBy(counts.count_all.desc(), counts.word).collect()
            counts.unpersist()
            elapsed = time.perf_counter() - started
            print(f"{run} run: {elapsed:.2f} s")
        total = sum(row.count_all for row in rows)
        print(
            f"Counted {total:,} words of {len(rows)} distinct, the Zen of Python "
            f"{args.copies:,} times, by {args.workers} timelypy workers on "
            f"{spark.sparkContext.master}, in epoch(s) {sorted({row.epoch for row in rows})}."
        )
        for row in rows[: args.top]:
            print(f"  {row.word} {row.count_all:,}")
        counted = next(row.count_all for row in rows if row.word == "better")
        times = sum(re.findall(WORD, line.lower()).count("better") for line in ZEN)
        print(
            f'Check: "better" is in the Zen {times} times; counted {counted:,} = '
            f"{times} x {args.copies:,}."
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
