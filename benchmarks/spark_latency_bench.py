r"""Per-epoch latency on the driver: from an epoch's close in the tasks to ``iter_flow``.

    python -m benchmarks.spark_latency_bench [--epochs N] [--interval S] [--markdown]

One Spark session (``local[2]``, 2 workers).  A flow reads an unbounded
``ManualInputConfig`` whose readers close an epoch every ``--interval``
seconds (default 0.1): each emits its share of 100 items, waits (in 5 ms
slices, yielding ``AdvanceTo`` of its epoch between them, as a reader waiting
for data should), then
closes the epoch (``AdvanceTo`` the next one) and stamps the wall-clock time
of that close on the next epoch's first item.  The flow maps the items and
captures them; :func:`timelypy_spark.iter_flow` yields each epoch on the
driver, where the time of arrival is taken.  The latency of epoch ``e`` is
its arrival minus the later of the two workers' close stamps, so it counts
the flow, the frontier reaching every worker, the report to the driver and
the driver's completeness check.  Tasks and driver share this machine's
clock.  The first epochs (the run starting up) are left out: ``--warmup``,
default 5.  The table gives the median, 90th percentile and maximum.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from benchmarks._harness import print_table

ITEMS_PER_EPOCH = 100


def reader(interval: float, epochs: int) -> Any:
    """The input builder: ``epochs`` epochs, one every ``interval`` seconds."""
    from timelypy.flow.inputs import AdvanceTo, Emit

    def build(worker_index: int, worker_count: int, resume_epoch: int) -> Iterator[Any]:
        closed = None  # when the previous epoch was closed
        for epoch in range(epochs + 1):
            yield AdvanceTo(epoch)
            yield Emit((epoch, -1, closed))
            for i in range(worker_index, ITEMS_PER_EPOCH, worker_count):
                yield Emit((epoch, i, None))
            until = time.monotonic() + interval
            while time.monotonic() < until:  # wait in slices, the worker stepping between
                time.sleep(min(0.005, max(0.0, until - time.monotonic())))
                yield AdvanceTo(epoch)
            closed = time.time()  # the next AdvanceTo closes this epoch

    return build


def measure(spark: Any, epochs: int, interval: float) -> list[float]:
    """Each epoch's latency in seconds, in epoch order."""
    import timelypy_spark
    from timelypy.flow import Dataflow
    from timelypy.flow.inputs import ManualInputConfig

    flow = Dataflow()
    flow.input("ticks", ManualInputConfig(reader(interval, epochs)))
    flow.map(lambda item: item)
    flow.capture()
    arrived: dict[int, float] = {}
    closed: dict[int, float] = {}
    for epoch, items in timelypy_spark.iter_flow(spark, flow, workers=2):
        arrived[epoch] = time.time()
        stamps = [stamp for _, i, stamp in items if i == -1 and stamp is not None]
        if stamps:
            closed[epoch - 1] = max(stamps)  # both workers closed epoch - 1 by then
    return [arrived[e] - closed[e] for e in sorted(arrived) if e in closed]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the latency table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_latency_bench")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    import timelypy_spark

    spark = timelypy_spark.session("local[2]", "timelypy-latency-bench", spark__ui__enabled="false")
    try:
        latencies = measure(spark, args.epochs, args.interval)[args.warmup :]
    finally:
        spark.stop()
    ordered = sorted(latencies)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    print(
        f"iter_flow, local[2], 2 workers, an epoch every {args.interval:g} s of "
        f"{ITEMS_PER_EPOCH} items, {len(latencies)} epochs after {args.warmup} warm-up"
    )
    figures = (statistics.median(latencies), p90, ordered[-1])
    print_table(
        [["epoch close -> driver", *(f"{v * 1000:.0f} ms" for v in figures)]],
        ["measure", "median", "p90", "max"],
        markdown=args.markdown,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
