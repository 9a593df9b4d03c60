"""The Spark cluster a run goes to: what the driver checks and reads before it starts.

* :func:`spark_context` and :func:`driver_host`: the context of a session,
  and the address its tasks reach the driver at;
* :func:`check_slots`: a free task slot per worker (a barrier stage needs
  them all at once), else a clear error in seconds rather than Spark's own
  minutes of retries; dynamic allocation refused up front;
* :func:`check_executors`: once per SparkContext, one small job whose
  tasks import ``timelypy`` and report its version, so that executors
  without it (or with another version) fail in the time of that job with
  what to do, not after a barrier stage's retries;
* :data:`CONF_KEYS` and :func:`conf_value`: the ``spark.timelypy.*``
  settings a call reads for the keywords it was not given;
* :func:`first_line` and :func:`executor_cause`: the line of a Spark
  failure worth showing, with the Python exception that failed the task on
  its executor.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

from timelypy.errors import ConfigError

__all__ = [
    "CONF_KEYS",
    "SLOT_WAIT",
    "call_site",
    "check_executors",
    "check_slots",
    "conf_value",
    "default_workers",
    "driver_host",
    "executor_cause",
    "first_line",
    "spark_context",
]

#: Seconds to wait for a cluster's executors to register before counting its slots.
SLOT_WAIT = 30.0


def spark_context(spark: Any) -> Any:
    """The ``SparkContext`` of a ``SparkSession`` (or the context itself)."""
    return getattr(spark, "sparkContext", spark)


def driver_host(sc: Any) -> str:
    """The address tasks can reach the driver at."""
    master = sc.master or ""
    if master.startswith("local"):
        return "127.0.0.1"
    host = sc.getConf().get("spark.driver.host", None)
    return host or "127.0.0.1"


def check_slots(sc: Any, workers: int) -> int:
    """Fail fast unless the cluster has ``workers`` task slots; return the slot count."""
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a positive int, got {workers!r}")
    conf = sc.getConf()
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        raise ConfigError(
            "Spark rejects barrier stages under dynamic allocation: set "
            "spark.dynamicAllocation.enabled=false for timelypy_spark"
        )
    jsc = sc._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    slots = int(jsc.maxNumConcurrentTasks(profile))
    master = sc.master or ""
    if slots < workers and not (master.startswith("local") and "cluster" not in master):
        # Executors of a fresh cluster register a moment after the session starts.
        deadline = time.monotonic() + SLOT_WAIT
        while slots < workers and time.monotonic() < deadline:
            time.sleep(0.25)
            slots = int(jsc.maxNumConcurrentTasks(profile))
    if slots < workers:
        raise ConfigError(
            f"timelypy_spark needs {workers} free task slots (one per worker, all at once), "
            f"but the Spark cluster at {sc.master!r} has {slots}: ask for workers={slots} or "
            "fewer, or give Spark more executors or cores"
        )
    return slots


def _import_probe(items: Iterator[Any]) -> Iterator[tuple[str, str, str]]:
    """On an executor: whether ``timelypy`` imports there, its version, and the Python."""
    import sys

    try:
        import timelypy
    except BaseException as exc:  # reported to the driver, not raised
        yield ("error", f"{type(exc).__name__}: {exc}", sys.executable)
    else:
        yield ("ok", str(getattr(timelypy, "__version__", "?")), sys.executable)


# Pickled by value, so that an executor without timelypy can still run it and say so
# (by reference it would have to import this module first, and fail where it cannot).
_import_probe.__module__ = "__main__"
_import_probe.__qualname__ = "_timelypy_import_probe"


def call_site(sc: Any, text: str) -> Any:
    """A context naming the Spark jobs started inside it ``text`` (their UI "call site").

    PySpark names a job after the first PySpark call on the Python stack
    (``copy_local_properties at threading.py`` for a job started from a
    thread); an outer ``SCCallSiteSync`` with our text keeps the inner ones
    from replacing it.  Without that PySpark helper, Spark's own name stays.
    """
    try:
        from pyspark.traceback_utils import SCCallSiteSync
    except ImportError:  # pragma: no cover - present in every PySpark 3.x and 4.x
        return contextlib.nullcontext()
    site = SCCallSiteSync(sc)  # type: ignore[no-untyped-call]
    site._call_site = text
    return site


#: SparkContexts (by application id) whose executors passed :func:`check_executors`.
_checked: set[str] = set()


def check_executors(sc: Any, workers: int) -> None:
    """Fail fast, before any barrier stage, unless executors import this timelypy.

    Runs one small ordinary job of ``workers`` tasks, once per SparkContext:
    each task tries ``import timelypy`` and reports its version.  A missing
    module or another version is a :class:`ConfigError` saying what to do,
    in the time of that job rather than after a barrier stage's retries.
    """
    application = str(sc.applicationId)
    if application in _checked:
        return
    import timelypy

    sc.setJobDescription("timelypy: checking that the executors import timelypy")
    try:
        with call_site(sc, "timelypy executor check"):
            reports = set(
                sc.parallelize(range(workers), workers).mapPartitions(_import_probe).collect()
            )
    finally:
        sc.setJobDescription(None)
    failures = sorted(report for report in reports if report[0] == "error")
    if failures:
        _, error, python = failures[0]
        raise ConfigError(
            f"Spark's executors cannot import timelypy ({error}, with the executor's Python "
            f"{python}). Install timelypy where the executors' Python can import it, point "
            "PYSPARK_PYTHON (spark.pyspark.python) at a Python that has it, send a packed "
            "virtual environment with spark.archives, or call "
            "timelypy_spark.ship_package(spark) once to ship this copy to the executors"
        )
    versions = sorted({version for _, version, _ in reports})
    if versions != [timelypy.__version__]:
        raise ConfigError(
            f"Spark's executors import timelypy {', '.join(versions)}, the driver "
            f"{timelypy.__version__}: workers of one run must run the same timelypy (install "
            "the driver's version on the executors, or ship it with "
            "timelypy_spark.ship_package(spark))"
        )
    _checked.add(application)


#: The Spark configuration keys timelypy_spark reads (``spark.timelypy.*``), what they
#: set when the call leaves the keyword out, and the default when neither does.
CONF_KEYS = {
    "spark.timelypy.workers": "workers (default: Spark's default parallelism)",
    "spark.timelypy.timeout": "timeout, seconds for the whole run (default: none)",
    "spark.timelypy.attempts": "attempts, retries of a failed run (default: 0)",
    "spark.timelypy.serializer": "serializer, 'msgpack' or 'pickle' (default: msgpack)",
    "spark.timelypy.connectTimeout": "connect_timeout, seconds (default: 60)",
}


def conf_value(sc: Any, key: str, given: Any, kind: type, default: Any) -> Any:
    """``given`` unless ``None``, else Spark's ``key`` as ``kind``, else ``default``.

    Spark's value: the active session's runtime configuration (``spark.conf.set``
    and everything the session started with), else the SparkContext's.
    """
    if given is not None:
        return given
    value = None
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None and active.sparkContext is sc:
            value = active.conf.get(key, None)
    except ImportError:  # pragma: no cover - pyspark is there when a context is
        pass
    if value is None:
        value = sc.getConf().get(key, None)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(
            f"the Spark setting {key}={value!r} is not a {kind.__name__}: {CONF_KEYS[key]}"
        ) from None


def default_workers(sc: Any, workers: int | None) -> int:
    """``workers``, else ``spark.timelypy.workers``, else Spark's default parallelism."""
    resolved: int = conf_value(sc, "spark.timelypy.workers", workers, int, None)
    return int(sc.defaultParallelism) if resolved is None else resolved


def first_line(error: BaseException) -> str:
    """The informative line of a Spark error, and the executor's Python cause if it has one.

    py4j's first line only names the call; a barrier stage's failure says only
    that a task "finished unsuccessfully", while the Python exception that
    failed it on the executor (a ``ModuleNotFoundError`` when executors lack
    timelypy) is further down the Java message.
    """
    java = getattr(error, "java_exception", None)
    text = str(error)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # the JVM may be gone already
            pass
    first = type(error).__name__
    for line in text.strip().splitlines():
        line = line.strip()
        if line and not line.startswith("An error occurred while calling"):
            first = line
            break
    cause = executor_cause(str(error) + "\n" + text)
    if cause and cause not in first:
        hint = ""
        if "No module named 'timelypy" in cause:
            hint = (
                " (the executors' Python cannot import timelypy: set PYSPARK_PYTHON to a "
                "Python that has it, or call timelypy_spark.ship_package(spark))"
            )
        return f"{first}; on the executor: {cause}{hint}"
    return first


_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def executor_cause(text: str) -> str | None:
    r"""The last ``SomeError: message`` line of the Python traceback inside a Spark error.

    >>> executor_cause("Stage failed ...\norg.apache.spark.api.python.PythonException: "
    ...                "Traceback (most recent call last):\n  File \"x\", line 1\n"
    ...                "ModuleNotFoundError: No module named 'timelypy'\n\tat org.apache")
    "ModuleNotFoundError: No module named 'timelypy'"
    """
    found = None
    in_traceback = False
    for line in text.splitlines():
        if "Traceback (most recent call last)" in line:
            in_traceback = True
            continue
        if in_traceback:
            match = _PYTHON_ERROR.match(line.strip())
            if match and not match.group(1).startswith(("org.", "java.", "scala.")):
                found = line.strip()
            if line.startswith("\tat "):
                in_traceback = False
    return found
