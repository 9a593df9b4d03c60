"""The SparkSession a timelypy program runs on: the user's own, or a new one.

:func:`session` returns the session that is already running, **as it is**:
in a ``pyspark`` shell, a notebook or a job that made its own session,
nothing of the user's settings changes (no shuffle partitions, no log
level).  Only when there is none does it build one, and only that new
session gets timelypy's defaults:

* the master is the one ``spark-submit --master`` (or ``spark.master`` in
  ``spark-defaults.conf``, or ``PYSPARK_SUBMIT_ARGS``) gives; ``master=``
  names one for a plain ``python`` run, and without any, Spark's own
  default applies (``local[*]``);
* for a ``local`` master named here: ``SPARK_LOCAL_IP=127.0.0.1`` (Spark
  binds loopback) and executors on this Python (``PYSPARK_PYTHON``), so
  they import the same timelypy;
* log level ERROR on the new context (Spark's INFO and WARN lines drown a
  program's own output; timelypy's own records go through Python
  ``logging``, at the levels the program sets, ``docs/spark.md``);
* the barrier stage's slot check every second, three times (timelypy checks
  slots itself first, :func:`timelypy_spark.check_slots`).

The Spark UI is left as Spark sets it (on, at port 4040 or the next free
one); timelypy's jobs and stages are named after the program or flow they run.

>>> # spark = timelypy_spark.session()             # spark-submit's master, or local[*]
>>> # spark = timelypy_spark.session("local[2]")   # a plain python run on two cores
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["session", "TIMELYPY_DEFAULTS"]

log = logging.getLogger("timelypy_spark")

#: The settings :func:`session` gives a session it creates (never an existing one).
TIMELYPY_DEFAULTS = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "3",
}


def session(master: str | None = None, app_name: str = "timelypy", **conf: str) -> Any:
    """The running SparkSession, untouched; else a new one for ``master`` with timelypy's defaults.

    ``master`` is only needed for a plain ``python`` run: under
    ``spark-submit`` or in a ``pyspark`` shell, Spark's own ``--master``
    applies.  ``conf`` adds Spark settings to a *new* session:
    ``spark__ui__enabled="false"`` (``__`` for ``.``) or
    ``**{"spark.timelypy.workers": "4"}``.  An existing session is returned
    as it is: if ``master`` or ``conf`` ask for something else, a warning
    says so, and the session keeps its settings.
    """
    from pyspark.sql import SparkSession

    settings = {key.replace("__", "."): str(value) for key, value in conf.items()}
    existing = _running_session()
    if existing is not None:
        _warn_if_different(existing, master, settings)
        return existing
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in {**TIMELYPY_DEFAULTS, **settings}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _running_session() -> Any:
    """The active or default SparkSession of this process, or ``None``."""
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()  # PySpark 3.5+: this thread's, else the default one
    except Exception:  # none yet
        return None


def _warn_if_different(spark: Any, master: str | None, settings: dict[str, str]) -> None:
    sc = spark.sparkContext
    if master is not None and master != sc.master:
        log.warning(
            "timelypy_spark.session(%r): a session is already running on master %r; it is used "
            "as it is (stop it first for another master)",
            master,
            sc.master,
        )
    conf = sc.getConf()
    differ = sorted(key for key, value in settings.items() if conf.get(key, None) != value)
    if differ:
        log.warning(
            "timelypy_spark.session(): a session is already running; its settings are kept "
            "(%s not applied: set them with spark.conf.set, or when you build the session)",
            ", ".join(differ),
        )
