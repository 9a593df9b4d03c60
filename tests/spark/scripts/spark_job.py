"""A Spark job for the deployment tests: wordcount on a given master, result as JSON.

    python spark_job.py --master MASTER --workers N [--ship] OUTPUT.json INPUT...
    spark-submit --master MASTER spark_job.py --workers N OUTPUT.json INPUT...

With ``--ship`` the driver ships timelypy with ``ship_package`` first (twice:
the second call must add nothing), for executors whose Python does not have
it.  The job also reports where the executors imported timelypy from and the
master its session runs on (without ``--master``, ``spark-submit``'s).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the driver imports the repository's timelypy

import timelypy_spark  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ship", action="store_true")
    parser.add_argument("output")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    spec = importlib.util.spec_from_file_location(
        "spark_combiner_wordcount", ROOT / "examples" / "spark_combiner_wordcount.py"
    )
    example = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(example)

    spark = timelypy_spark.session(args.master, "timelypy-deploy-test")
    try:
        if args.ship:
            first = timelypy_spark.ship_package(spark)
            assert timelypy_spark.ship_package(spark) == first
        lines = spark.sparkContext.textFile(",".join(args.inputs), args.workers)
        started = time.monotonic()
        try:
            result = timelypy_spark.run(spark, example.count_words, lines, workers=args.workers)
        except Exception:
            print(f"the run failed after {time.monotonic() - started:.1f} s", file=sys.stderr)
            raise
        counts = dict(result.collect())

        def where(worker):
            import os

            import timelypy

            return (timelypy.__file__, os.getpid())

        origins = timelypy_spark.execute(spark, where, workers=args.workers)
        report = {"counts": counts, "origins": origins, "master": spark.sparkContext.master}
        Path(args.output).write_text(json.dumps(report))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
