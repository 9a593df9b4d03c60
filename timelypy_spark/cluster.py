"""The Spark cluster a run goes to: what the driver checks and reads before it starts.

* :func:`spark_context` and :func:`driver_host`: the context of a session,
  and the address its tasks reach the driver at;
* :func:`check_slots`: a free task slot per worker (a barrier stage needs
  them all at once), else a clear error in seconds rather than Spark's own
  minutes of retries; dynamic allocation refused up front;
* :func:`check_executors`: once per SparkContext, one small job whose
  tasks import everything a timelypy task needs and report a fingerprint of
  the timelypy code they run, so that executors without it (or with other
  code) fail in the time of that job with what to do, not after a barrier
  stage's retries;
* :data:`CONF_KEYS` and :func:`conf_value`: the ``spark.timelypy.*``
  settings a call reads for the keywords it was not given;
* :func:`first_line` and :func:`executor_cause`: the line of a Spark
  failure worth showing, with the Python exception that failed the task on
  its executor.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from timelypy.errors import ConfigError
from timelypy_spark._compat import check_msgpack, max_concurrent_tasks

__all__ = [
    "CONF_KEYS",
    "SLOT_WAIT",
    "call_site",
    "check_executors",
    "check_slots",
    "code_fingerprint",
    "conf_value",
    "default_workers",
    "driver_host",
    "executor_cause",
    "first_line",
    "lost_task_cause",
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
    slots = max_concurrent_tasks(sc)
    master = sc.master or ""
    if slots < workers and not (master.startswith("local") and "cluster" not in master):
        # Executors of a fresh cluster register a moment after the session starts.
        deadline = time.monotonic() + SLOT_WAIT
        while slots < workers and time.monotonic() < deadline:
            time.sleep(0.25)
            slots = max_concurrent_tasks(sc)
    if slots < workers:
        raise ConfigError(
            f"timelypy_spark needs {workers} free task slots (one per worker, all at once), "
            f"but the Spark cluster at {sc.master!r} has {slots}: ask for workers={slots} or "
            "fewer, or give Spark more executors or cores"
        )
    return slots


def _executor_probe(items: Iterator[Any]) -> Iterator[tuple[str, str, str, str]]:
    """On an executor: what of a task's needs fail there, and the code it would run.

    Yields ``(problems, fingerprint, python, host)``: ``problems`` is empty
    when every module a task imports is there (``timelypy``,
    ``timelypy_spark``, ``zmq``, ``msgpack``, ``cloudpickle``) and msgpack
    has the packer hook timelypy's codec extends; ``fingerprint`` is
    :func:`code_fingerprint` of the timelypy it imports.
    """
    import importlib
    import socket
    import sys

    problems = []
    for name in ("timelypy", "timelypy_spark", "zmq", "msgpack", "cloudpickle"):
        try:
            importlib.import_module(name)
        except BaseException as exc:  # reported to the driver, not raised
            problems.append(f"{type(exc).__name__}: {exc}")
    fingerprint = ""
    if not problems:
        try:
            # by name: this function runs by value, outside its module
            importlib.import_module("timelypy_spark._compat").check_msgpack()
            fingerprint = importlib.import_module("timelypy_spark.cluster").code_fingerprint()
        except BaseException as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
    yield ("; ".join(problems), fingerprint, sys.executable, socket.gethostname())


# Pickled by value, so that an executor without timelypy can still run it and say so
# (by reference it would have to import this module first, and fail where it cannot).
_executor_probe.__module__ = "__main__"
_executor_probe.__qualname__ = "_timelypy_executor_probe"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the source of the ``timelypy`` and ``timelypy_spark`` this process imports.

    The same on the driver and on executors that run the same code, whether
    installed, an editable checkout or shipped as an archive
    (:func:`timelypy_spark.ship_package`); a version number would not tell
    two checkouts of one version apart.
    """
    import timelypy

    digest = hashlib.sha256()
    # this module's folder is timelypy_spark's (importing the package here would be a cycle)
    for root in (Path(str(timelypy.__file__)).parent, Path(__file__).parent):
        for name, text in sorted(_sources(root)):
            digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def _sources(root: Path) -> Iterator[tuple[str, bytes]]:
    """``(path relative to the package's parent, bytes)`` of every ``.py`` file of a package."""
    text = str(root)
    marker = text.find(".zip" + os.sep)
    if marker < 0:
        for path in root.rglob("*.py"):
            yield str(path.relative_to(root.parent).as_posix()), path.read_bytes()
        return
    archive, inner = text[: marker + 4], text[marker + 5 :].replace(os.sep, "/")
    with zipfile.ZipFile(archive) as zipped:
        for name in zipped.namelist():
            if name.startswith(inner + "/") and name.endswith(".py"):
                yield name, zipped.read(name)


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
    """Fail fast, before any barrier stage, unless executors can run timelypy's tasks.

    Runs one small ordinary job of ``workers`` tasks, once per SparkContext:
    each task imports what a timelypy task needs (``timelypy``,
    ``timelypy_spark``, ``zmq``, ``msgpack``, ``cloudpickle``), checks
    msgpack's packer, and reports a fingerprint of the timelypy code it
    imports.  A missing module (all of them at once) or other code than the
    driver's is a :class:`ConfigError` saying what to do, in the time of
    that job rather than after a barrier stage's retries.  (The task's own
    program, the user's functions, is checked by each task as it starts,
    :func:`timelypy_spark.task.barrier_task`.)
    """
    application = str(sc.applicationId)
    if application in _checked:
        return
    check_msgpack()
    mine = code_fingerprint()
    sc.setJobDescription("timelypy: checking that the executors can run timelypy's tasks")
    try:
        with call_site(sc, "timelypy executor check"):
            reports = set(
                sc.parallelize(range(workers), workers).mapPartitions(_executor_probe).collect()
            )
    finally:
        sc.setJobDescription(None)
    failures = sorted(report for report in reports if report[0])
    if failures:
        problems, _, python, host = failures[0]
        raise ConfigError(
            f"Spark's executors cannot run timelypy's tasks ({problems}; on host {host}, with "
            f"the executor's Python {python}). Install timelypy[spark] where the executors' "
            "Python can import it, point PYSPARK_PYTHON (spark.pyspark.python) at a Python "
            "that has it, send a packed virtual environment with spark.archives, or, when only "
            "timelypy itself is missing, call timelypy_spark.ship_package(spark) once to ship "
            "this copy to the executors"
        )
    others = sorted({(fingerprint, python, host) for _, fingerprint, python, host in reports})
    others = [other for other in others if other[0] != mine]
    if others:
        fingerprint, python, host = others[0]
        raise ConfigError(
            f"Spark's executors run other timelypy code than the driver (source fingerprint "
            f"{fingerprint} on host {host}, Python {python}; the driver's {mine}): workers of "
            "one run must run the same code. Install the driver's copy on the executors, or "
            "ship it with timelypy_spark.ship_package(spark)"
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
    "spark.timelypy.metrics.port": (
        "metrics port: worker I serves Prometheus metrics on port + I of its executor's "
        "host (0: a free port each, logged; default: no endpoint)"
    ),
}


def conf_value(sc: Any, key: str, given: Any, kind: type, default: Any) -> Any:
    """``given`` unless ``None``, else Spark's ``key`` as ``kind``, else ``default``.

    Spark's value: the active session's runtime configuration (``spark.conf.set``
    and everything the session started with), else the SparkContext's.  The
    runtime configuration already holds the context's settings, so the
    context's own is read (a copy of the whole configuration through py4j,
    milliseconds each) only without a session.
    """
    if given is not None:
        return given
    value = None
    session = False
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is None:
            # the active session is per thread: a run started from another thread
            # (a service, a test) still reads the session its context belongs to
            active = SparkSession.builder.getOrCreate()
        if active is not None and active.sparkContext is sc:
            session = True
            value = active.conf.get(key, None)
    except ImportError:  # pragma: no cover - pyspark is there when a context is
        pass
    if value is None and not session:
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


_LOST_TASK = re.compile(
    r"Lost task [\d.]+ in stage [\d.]+ \(TID \d+\) \(([^()\s]+) executor ([^()\s]+)\)"
)
_EXECUTOR_LOST = re.compile(r"ExecutorLostFailure \(executor (\S+?) exited[^)]*\)([^\n]*)")
_WORKER_DIED = (
    "Python worker exited unexpectedly",
    "Python worker failed to connect back",
    "Connection reset",
    "java.io.EOFException",
    "Broken pipe",
)


def lost_task_cause(text: str) -> str | None:
    r"""What a Spark failure says about a lost task (an executor or Python worker that died).

    ``None`` when the text tells of no such loss (the failure is of another
    kind).  Names the executor and its host where Spark does.

    >>> print(lost_task_cause("Lost task 0.0 in stage 3.0 (TID 7) (10.0.0.5 executor 1): "
    ...       "ExecutorLostFailure (executor 1 exited caused by one of the running "
    ...       "tasks) Reason: Command exited with code 137"))
    executor 1 on 10.0.0.5 was lost (exited caused by one of the running tasks;
    Reason: Command exited with code 137)
    >>> print(lost_task_cause("Lost task 1.0 in stage 2.0 (TID 4) (127.0.0.1 executor "
    ...       "driver): SparkException: Python worker exited unexpectedly (crashed)"))
    the Python worker of a task on executor driver (127.0.0.1) died
    (Python worker exited unexpectedly)
    >>> lost_task_cause("Task failed: ValueError: bad record") is None
    True
    """
    where = _LOST_TASK.search(text)
    lost = _EXECUTOR_LOST.search(text)
    if lost is not None:
        executor = lost.group(1)
        host = f" on {where.group(1)}" if where is not None and where.group(2) == executor else ""
        detail = lost.group(0)[len("ExecutorLostFailure (executor ") + len(executor) + 1 :]
        reason = detail.replace(")", ";", 1).strip().rstrip(";").strip()
        return f"executor {executor}{host} was lost ({reason})"
    died = next((marker for marker in _WORKER_DIED if marker in text), None)
    if died is None:
        return None
    if where is not None:
        return (
            f"the Python worker of a task on executor {where.group(2)} ({where.group(1)}) died "
            f"({died})"
        )
    return f"the Python worker of a task died ({died})"
