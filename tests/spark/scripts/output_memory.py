"""Peak memory of Spark's Python workers while a flow's output grows.

    python output_memory.py RECORDS OUTPUT.json

Runs ``timelypy_spark.run`` on ``local[2]`` over 2 partitions of numbers, each
expanded into 1,000 output records (``RECORDS`` in all), counts the output,
and writes ``{"records": n, "peak_kb": {pid: kb}}``: each Python worker's peak
resident set (``ru_maxrss``), recorded by the expanding function as it runs.
Output that streams out of the tasks keeps that peak flat as ``RECORDS``
grows; output held until the dataflow ends makes it grow with it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import timelypy_spark  # noqa: E402

FAN_OUT = 100


def main() -> None:
    records, output = int(sys.argv[1]), Path(sys.argv[2])
    peaks = Path(tempfile.mkdtemp(prefix="timelypy-rss-"))

    def expand(n: int) -> list[tuple[int, int]]:
        import resource

        (peaks / str(os.getpid())).write_text(
            str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        )
        return [(n, i) for i in range(FAN_OUT)]

    def build(scope, stream):
        return stream.flat_map(expand)

    spark = timelypy_spark.session("local[2]", "timelypy-output-memory", spark__ui__enabled="false")
    try:
        rdd = spark.sparkContext.parallelize(range(records // FAN_OUT), 2)
        result = timelypy_spark.run(spark, build, rdd, workers=2)
        counted = result.count()
        result.unpersist()
    finally:
        spark.stop()
    peak = {path.name: int(path.read_text()) for path in peaks.iterdir()}
    output.write_text(json.dumps({"records": counted, "peak_kb": peak}))


if __name__ == "__main__":
    main()
