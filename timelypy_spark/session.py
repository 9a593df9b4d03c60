"""A quiet SparkSession for timelypy programs, examples and tests.

:func:`session` builds (or reuses) a session with the settings the
measured facts about Spark recommend (``docs/spark.md``):

* ``SPARK_LOCAL_IP=127.0.0.1`` for local masters, so Spark binds loopback;
* executors use this Python (``PYSPARK_PYTHON``) for local masters, so they
  import the same timelypy;
* log level ERROR; the Spark UI is left as Spark sets it (on, at port 4040
  or the next free one), and timelypy's jobs and stages are named after the
  program or flow they run;
* a bounded barrier slot check, in case Spark's own is ever reached.

>>> # spark = timelypy_spark.session("local[4]")
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["session"]


def session(master: str = "local[2]", app_name: str = "timelypy", **conf: str) -> Any:
    """A SparkSession for ``master`` with quiet, timelypy-friendly settings.

    ``conf`` adds Spark settings: ``spark__ui__enabled="false"`` (``__`` for
    ``.``) or ``**{"spark.timelypy.workers": "4"}``.
    """
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "3")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
