"""Wordcount on Spark: timelypy workers as barrier tasks vs PySpark RDD and DataFrame.

    python -m benchmarks.spark_bench [--quick] [--repeat N] [--master local[2]] [--markdown]

All three count the words of the 2,000,000-word corpus (``benchmarks/_data.py``)
on the same SparkSession, reading the same text files, with as many
partitions (and timelypy workers) as the master has cores:

* ``timelypy_spark`` -- ``textFile`` -> :func:`timelypy_spark.run` with the
  ``count_words`` dataflow of ``examples/spark_wordcount.py`` (a per-batch
  combiner, exchange by ``stable_hash``, totals per epoch), ``collect=True``
  (one Spark job, like the peers);
* ``pyspark rdd`` -- ``textFile`` -> ``flatMap(split)`` -> ``map((w, 1))``
  -> ``reduceByKey(add)`` -> ``collectAsMap``;
* ``pyspark dataframe`` -- ``read.text`` -> ``split``/``explode`` ->
  ``groupBy().count()`` -> collect.

Session start is excluded; every candidate runs once untimed first (Python
workers start, files are cached), then the candidates alternate.  Every
result is checked against ``collections.Counter``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._data import load_lines, part_paths  # noqa: E402
from benchmarks._harness import fmt_ratio, measure_interleaved, print_table  # noqa: E402
from benchmarks.peers import pyspark_peer  # noqa: E402


def _count_words() -> Any:
    spec = importlib.util.spec_from_file_location(
        "spark_wordcount", ROOT / "examples" / "spark_wordcount.py"
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(module)
    return module.count_words


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark, print the table, and return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the corpus, 3 runs")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)

    import timelypy_spark

    paths = [str(p) for p in part_paths()]
    lines = load_lines()
    if args.quick:
        lines = lines[: len(lines) // 10]
        quick_dir = ROOT / ".bench-data" / "spark-quick"
        quick_dir.mkdir(parents=True, exist_ok=True)
        half = len(lines) // 2
        paths = []
        for index, chunk in enumerate((lines[:half], lines[half:])):
            path = quick_dir / f"part-{index}.txt"
            path.write_text("\n".join(chunk) + "\n")
            paths.append(str(path))
    expected = Counter(word for line in lines for word in line.split())
    repeat = 3 if args.quick else args.repeat
    words = sum(expected.values())

    spark = timelypy_spark.session(
        args.master, "timelypy-spark-bench", spark__ui__showConsoleProgress="false"
    )
    try:
        sc = spark.sparkContext
        cores = sc.defaultParallelism
        count_words = _count_words()

        def with_timelypy() -> dict[str, int]:
            source = sc.textFile(",".join(paths), cores)
            if source.getNumPartitions() != cores:
                source = source.repartition(cores)
            return dict(timelypy_spark.run(spark, count_words, source, workers=cores, collect=True))

        candidates = {
            "timelypy_spark": with_timelypy,
            "pyspark rdd": lambda: pyspark_peer.rdd_wordcount(spark, paths),
            "pyspark dataframe": lambda: pyspark_peer.dataframe_wordcount(spark, paths),
        }
        stats = measure_interleaved(candidates, repeat=repeat, warmup=1)
        for name, stat in stats.items():
            if dict(stat.result) != dict(expected):
                raise AssertionError(f"{name} counted differently from collections.Counter")
    finally:
        spark.stop()

    base = stats["timelypy_spark"].median
    rows = [
        {
            "workload": f"wordcount {words:,} words on {args.master}",
            "candidate": name,
            "median s": f"{stat.median:.2f}",
            "words/s": f"{words / stat.median / 1e6:.2f} M",
            "timelypy speed-up": fmt_ratio(stat.median / base),
        }
        for name, stat in stats.items()
    ]
    print_table(
        rows,
        ["workload", "candidate", "median s", "words/s", "timelypy speed-up"],
        markdown=args.markdown,
    )
    return rows


if __name__ == "__main__":
    main()
