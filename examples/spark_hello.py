"""Timely's ``hello``, with every worker a Spark task.

    python examples/spark_hello.py --master local[4] --workers 4

Worker 0 sends the rounds 0..9; each is routed to worker ``round % workers``,
which prints it.  The driver then prints what every worker saw, in order.
"""

from __future__ import annotations

import argparse

import timelypy
import timelypy_spark


def hello(worker: timelypy.Worker) -> list[str]:
    handle = timelypy.InputHandle()
    probe = timelypy.ProbeHandle()
    seen: list[str] = []
    index = worker.index

    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .exchange(lambda x: x)
            .inspect(lambda x: seen.append(f"worker {index}:\thello {x}"))
            .probe_with(probe)
        )
    )
    for round_ in range(10):
        if index == 0:
            handle.send(round_)
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[4]", help="Spark master URL")
    parser.add_argument("--workers", type=int, default=4, help="timelypy workers (Spark tasks)")
    args = parser.parse_args()
    # quiet output: no Spark console progress bar between the lines (the web UI stays on)
    spark = timelypy_spark.session(
        args.master, "timelypy-hello", spark__ui__showConsoleProgress="false"
    )
    try:
        for lines in timelypy_spark.execute(spark, hello, workers=args.workers):
            for line in lines:
                print(line)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
