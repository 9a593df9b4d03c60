"""A running word count over files dropped into a directory, on a long-lived Spark gang.

    python examples/spark_streaming_wordcount.py                  # local[3], 2 workers, 4 files
    python examples/spark_streaming_wordcount.py --master 'local[5]' --workers 4 --files 6

Spark Structured Streaming watches a directory (``spark.readStream.text``,
one file per micro-batch); :func:`timelypy_spark.streaming.stream_flow`
feeds every micro-batch to one gang of timelypy workers that stays up for
the whole stream, at the epoch of the micro-batch's id.  The flow counts
each micro-batch's words (``reduce_epoch``) and adds them to each word's
running total (``stateful_map``: state the workers keep from one
micro-batch to the next).  The program drops a file, prints that epoch's
updated totals when they reach the driver, drops the next, and after the
last one stops the query: the gang closes its last epoch and the loop ends.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from operator import add
from pathlib import Path

import timelypy_spark
from timelypy.flow import Dataflow
from timelypy_spark.streaming import stream_flow

TEXTS = [
    "To be, or not to be, that is the question",
    "Whether tis nobler in the mind to suffer the slings and arrows of outrageous fortune",
    "Or to take arms against a sea of troubles and by opposing end them",
    "To die, to sleep, no more, and by a sleep to say we end the heart-ache",
    "To sleep, perchance to dream, ay, there's the rub",
    "For in that sleep of death what dreams may come",
]


def running_wordcount() -> Dataflow:
    """Each epoch's words, with every updated word's total over all epochs so far."""
    flow = Dataflow()
    flow.flat_map(lambda row: re.findall(r"[a-z']+", row[0].lower()))
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)  # the micro-batch's count of each word
    flow.stateful_map("total", lambda word: 0, lambda total, n: (total + n, total + n))
    flow.capture()
    return flow


def drop(directory: Path, index: int, text: str) -> None:
    """Write file ``index`` under a hidden name and rename it in, so Spark reads it whole."""
    hidden = directory / f".lines-{index}.txt"
    hidden.write_text(text + "\n")
    stamp = time.time() - 1000 + index  # dated in order: Spark takes the oldest first
    os.utime(hidden, (stamp, stamp))
    hidden.rename(directory / f"lines-{index}.txt")


def main() -> None:
    """Drop ``--files`` files one by one and print each epoch's running totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[3]")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args()
    spark = timelypy_spark.session(
        args.master, "streaming-wordcount", spark__ui__showConsoleProgress="false"
    )
    try:
        with tempfile.TemporaryDirectory() as folder:
            directory = Path(folder)
            lines = spark.readStream.option("maxFilesPerTrigger", 1).text(folder)
            run = stream_flow(
                spark,
                running_wordcount(),
                lines,
                workers=args.workers,
                trigger={"processingTime": "200 milliseconds"},
            )
            with run:
                dropped = 1
                drop(directory, 0, TEXTS[0])
                for epoch, totals in run:
                    top = sorted(totals, key=lambda pair: (-pair[1], pair[0]))[:5]
                    shown = ", ".join(f"{word}={total}" for word, total in top)
                    print(f"epoch {epoch}: {len(totals)} words updated; top: {shown}")
                    if dropped < args.files:
                        drop(directory, dropped, TEXTS[dropped % len(TEXTS)])
                        dropped += 1
                    else:
                        run.stop()  # the loop still gets the epochs the gang closes now
            print(
                f"{run.feed.rows} lines in {run.feed.batches} micro-batches, "
                f"one gang of {args.workers} workers"
            )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
