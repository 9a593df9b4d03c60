r"""PySpark peers: wordcount over the corpus files, as RDD and as DataFrame.

These are the peers for timelypy's Spark examples (DESIGN.md section 5). Both
read the text files themselves, so their times include reading and splitting
the files, as a Spark job's would; the plain-Python and bytewax wordcounts get
the lines already in memory.

``make_session`` builds a local session tuned to start quietly and run small
jobs fast on a 2-core machine; the benchmark starts it once, outside the
timings, and runs one untimed warm-up job per peer (JIT, Python worker start).

- ``rdd_wordcount``: ``textFile`` -> ``flatMap(str.split)`` -> ``map((w, 1))``
  -> ``reduceByKey(add)`` -> ``collectAsMap``. The split and the pairing run in
  Python workers, so this is the "Python UDF on Spark" cost.
- ``dataframe_wordcount``: ``read.text`` -> ``explode(split(value, '\s+'))``
  -> drop empty words -> ``groupBy('word').count()`` -> collect. Everything
  runs in the JVM; Python only collects the 5,000 result rows. The regex
  split plus the empty-word filter gives exactly ``str.split()``'s words for
  ASCII text.

PySpark is imported lazily; without it the functions raise an ``ImportError``
that says how to install it.
"""

from __future__ import annotations

import importlib
import operator
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["make_session", "rdd_wordcount", "dataframe_wordcount"]

_INSTALL_HINT = (
    "the PySpark peers need pyspark (and Java 17), which is not importable in this "
    "Python ({error}); install it with `pip install -e '.[spark]'`"
)

# Root logger at ERROR from the first line the JVM logs, so the startup
# warnings (native-hadoop, loopback address, ...) stay out of the output. The
# org.apache.spark logger is set too: PySpark counts as a shell, and Spark
# prints "Setting default log level" unless the logger of the class that first
# logs has a configured level of its own.
_LOG4J2 = """\
rootLogger.level = error
logger.spark.name = org.apache.spark
logger.spark.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _pyspark(name: str) -> ModuleType:
    """Import ``pyspark.<name>``, or say how to install PySpark."""
    try:
        return importlib.import_module(f"pyspark.{name}")
    except ImportError as e:
        raise ImportError(_INSTALL_HINT.format(error=e)) from e


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / "timelypy-bench-log4j2.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


def make_session(master: str = "local[2]", app_name: str = "timelypy-peers") -> Any:
    """Return a quiet local ``SparkSession`` (start-up time is not part of any timing).

    Sets ``SPARK_LOCAL_IP=127.0.0.1`` and the Python workers' interpreter to
    this one, turns the UI and console progress bars off, logs only errors
    (from JVM start), and sizes shuffles for a small machine (2 shuffle
    partitions). Stop it with ``session.stop()``.
    """
    sql = _pyspark("sql")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile=file:{_log4j2_file()}"
    builder = (
        sql.SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.driver.extraJavaOptions", log4j)
        .config("spark.executor.extraJavaOptions", log4j)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.python.worker.reuse", "true")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _paths(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    return [str(Path(p).resolve()) for p in paths]


def _pair_one(word: str) -> tuple[str, int]:
    return (word, 1)


def rdd_wordcount(spark: Any, paths: Sequence[str | os.PathLike[str]]) -> dict[str, int]:
    """Count words with the RDD API: textFile, flatMap(split), reduceByKey(add)."""
    rdd = spark.sparkContext.textFile(",".join(_paths(paths)))
    return rdd.flatMap(str.split).map(_pair_one).reduceByKey(operator.add).collectAsMap()


def dataframe_wordcount(spark: Any, paths: Sequence[str | os.PathLike[str]]) -> dict[str, int]:
    """Count words with the DataFrame API: read.text, explode(split), groupBy().count()."""
    functions = _pyspark("sql.functions")
    words = spark.read.text(_paths(paths)).select(
        functions.explode(functions.split("value", r"\s+")).alias("word")
    )
    counts = words.where(functions.col("word") != "").groupBy("word").count()
    return {row["word"]: row["count"] for row in counts.collect()}
