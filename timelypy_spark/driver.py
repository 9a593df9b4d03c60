"""Running a timelypy computation as one Spark barrier stage.

:func:`execute` is :func:`timelypy.execute` with the workers inside Spark
executors: ``execute(spark, func, workers=4)`` runs ``func(worker)`` on four
workers, each a Spark task, and returns their results in worker order.

How it runs (see ``docs/spark.md``):

* **Slots first.**  A barrier stage needs a free task slot per worker, and
  Spark would otherwise retry its own check for about ten minutes; the
  driver checks the cluster's slots itself and fails in seconds with a
  clear message.  Dynamic allocation cannot run barrier stages and is
  rejected up front too.
* **One barrier stage** (a :class:`BarrierStage`):
  ``rdd.barrier().mapPartitions(task)``, or for a DataFrame in and out
  ``frame.mapInArrow(task, schema, barrier=True)`` (:mod:`timelypy_spark.arrow`),
  run in a background thread under its own job group, while the driver's
  thread serves the :class:`~timelypy_spark.rendezvous.Rendezvous` and
  watches for errors and the deadline.  Either way the same task function
  (:func:`timelypy_spark.task.barrier_task`) runs in every task.
* **Failure.**  A worker error (sent by its task), a lost task (the stage
  fails), or the ``timeout`` cancels the whole job group (Spark interrupts
  every task) and re-raises the *original* worker exception on the driver.
  No task is left running: the call returns only after the job has ended.
* **A lost task** (its Python worker or executor died) is told apart from
  a worker's error: its peers report only that they lost it, or Spark
  resubmits the barrier stage and new tasks register; either way the
  attempt ends at once with a :class:`TaskLostError` that says so (never
  a connect timeout on a stale rendezvous).
* **Executions.**  Every attempt is a new *execution* with its own number;
  keys and routing are derived from the run id and execution, so a stale
  task of an earlier attempt can neither join nor be mistaken for a peer.
  ``attempts`` extra executions are tried after a failure (default 0).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from timelypy.errors import ClusterError, ConfigError, TimelyError
from timelypy_spark.progress import DriverProgress
from timelypy_spark.rendezvous import Rendezvous
from timelypy_spark.task import StreamProgram, TaskSpec, barrier_task

__all__ = [
    "execute",
    "SparkJobError",
    "TaskLostError",
    "AttemptService",
    "BarrierStage",
    "check_slots",
    "executor_cause",
    "spark_context",
    "driver_host",
]

log = logging.getLogger("timelypy_spark")

#: Seconds the driver waits, after a successful job, for every task's "done" when a
#: service (recovery, iter_flow) needs everything the tasks sent before it.
DONE_WAIT = 5.0

#: Where the driver draws its live progress line (``None``: standard error); drawn only
#: when it is a terminal (:mod:`timelypy_spark.progress`).
PROGRESS_STREAM: Any = None

R = TypeVar("R")

#: Seconds the driver waits for the cancelled job to end before giving up on it.
CANCEL_WAIT = 15.0
#: Seconds to wait for a failed worker's own report after a peer reported its failure.
ROOT_CAUSE_WAIT = 2.0
#: Seconds to wait for a cluster's executors to register before counting its slots.
SLOT_WAIT = 30.0


class SparkJobError(TimelyError, RuntimeError):
    """The Spark job running the workers failed without a worker error to show."""


class TaskLostError(SparkJobError):
    """A Spark task running a worker was lost (its Python worker or executor died)."""


class AttemptService:
    """Driver-side work around each attempt of a barrier run (for example a recovery store).

    :meth:`start` runs before an attempt's Spark job is submitted,
    :meth:`handle` sees every task message the driver itself does not
    handle (and answers requests with ``rendezvous.reply``), :meth:`end`
    runs after the attempt's job has ended (``ok`` says whether it
    succeeded).
    """

    #: The Spark job group of the attempt that runs now (set before :meth:`start`).
    job_group: str = ""

    def start(self, attempt: int) -> None:
        """Prepare for attempt number ``attempt`` (0, 1, ...)."""

    def handle(self, rendezvous: Rendezvous, identity: bytes, message: Any) -> bool:
        """Handle ``message`` if it is for this service; return whether it was."""
        return False

    def end(self, attempt: int, ok: bool) -> None:
        """Attempt ``attempt`` ended."""


@dataclass(frozen=True)
class BarrierStage:
    """The input of one barrier stage, and how the task function runs over it.

    :meth:`of_rdd`: ``rdd.barrier().mapPartitions(task)``, the task reading
    the RDD's records; :meth:`of_frame`: ``frame.mapInArrow(task, schema,
    barrier=True)``, the task reading and yielding ``pyarrow.RecordBatch``es
    of the DataFrame's and ``schema``'s columns.  ``partitions`` is the
    number of tasks (one per worker).
    """

    source: Any
    partitions: int
    #: The output ``StructType`` of a ``mapInArrow`` stage; ``None`` for an RDD stage.
    schema: Any = None
    #: ``encode(records)``: a streaming task's output records as one item of the stage's
    #: output (a ``RecordBatch`` for ``mapInArrow``); ``None`` yields the records themselves.
    encode: Callable[[list[Any]], Any] | None = None

    @classmethod
    def of_rdd(cls, rdd: Any) -> BarrierStage:
        """The barrier stage over ``rdd``'s partitions."""
        return cls(rdd, rdd.getNumPartitions())

    @classmethod
    def of_frame(
        cls, frame: Any, schema: Any, partitions: int, encode: Callable[[list[Any]], Any]
    ) -> BarrierStage:
        """The barrier ``mapInArrow`` stage over ``frame``'s ``partitions`` partitions.

        ``encode`` makes one ``RecordBatch`` of ``schema`` from a list of
        output records (a :class:`timelypy_spark.arrow.BatchWriter`).
        """
        return cls(frame, partitions, schema, encode)

    def apply(self, task: Callable[[Iterable[Any]], Iterator[Any]]) -> Any:
        """The stage's output (an RDD or a DataFrame), with ``task`` run on every partition."""
        if self.schema is None:
            return self.source.barrier().mapPartitions(task)
        return self.source.mapInArrow(task, self.schema, barrier=True)


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

def _call_site(sc: Any, text: str) -> Any:
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
        with _call_site(sc, "timelypy executor check"):
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


def _conf(sc: Any, key: str, given: Any, kind: type, default: Any) -> Any:
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
            f"the Spark setting {key}={value!r} is not a {kind.__name__}: "
            f"{CONF_KEYS[key]}"
        ) from None


def default_workers(sc: Any, workers: int | None) -> int:
    """``workers``, else ``spark.timelypy.workers``, else Spark's default parallelism."""
    resolved: int = _conf(sc, "spark.timelypy.workers", workers, int, None)
    return int(sc.defaultParallelism) if resolved is None else resolved


def execute(
    spark: Any,
    func: Callable[[Any], R],
    workers: int | None = None,
    *,
    timeout: float | None = None,
    attempts: int | None = None,
    serializer: str | None = None,
    connect_timeout: float | None = None,
) -> list[R]:
    """Run ``func(worker)`` on ``workers`` workers, each a Spark task; return their results.

    ``workers`` defaults to Spark's default parallelism.  ``timeout`` bounds
    the whole run (seconds).  A keyword left out is read from the Spark
    configuration (``spark.timelypy.workers``, ``.timeout``, ``.attempts``,
    ``.serializer``, ``.connectTimeout``; :data:`CONF_KEYS`), else its
    default.  See the module documentation for failures and retries.
    """
    sc = spark_context(spark)
    workers = default_workers(sc, workers)

    def program(worker: Any, partition: Iterator[Any]) -> R:
        return func(worker)

    results = run_barrier(
        sc,
        sc.parallelize(range(workers), workers),
        program,
        workers,
        name=getattr(func, "__name__", type(func).__name__),
        flatten=False,
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
        action=lambda rdd: rdd.collect(),
    )
    return [result for _, result in sorted(results, key=lambda pair: pair[0])]


def run_barrier(
    sc: Any,
    source: Any,
    program: Callable[[Any, Iterator[Any]], Any] | None,
    workers: int,
    *,
    flatten: bool,
    timeout: float | None,
    attempts: int | None,
    serializer: str | None,
    connect_timeout: float | None,
    action: Callable[[Any], Any],
    stream_program: StreamProgram | None = None,
    service: AttemptService | None = None,
    name: str = "program",
) -> Any:
    """Run ``program`` as a barrier stage over ``source``; return ``action``'s value.

    ``source`` is an RDD (one task per partition) or a :class:`BarrierStage`.

    ``timeout``, ``attempts``, ``serializer`` and ``connect_timeout`` left
    ``None`` come from the Spark configuration (:data:`CONF_KEYS`) or their
    defaults.  ``name`` (the program's or the dataflow's) names the Spark
    jobs and stages in the UI.

    ``action(output)`` is the Spark action that runs the stage on its output
    (an RDD, or a ``mapInArrow`` stage's DataFrame): a ``collect``, or a
    ``count`` of a persisted RDD or DataFrame.  With a
    ``stream_program`` instead of a ``program``, each task yields the
    records its worker emits while it runs (see :mod:`timelypy_spark.task`).
    A ``service`` is told of each attempt and answers the tasks' requests.
    """
    if (program is None) == (stream_program is None):
        raise ConfigError("run_barrier needs a program or a stream_program (exactly one)")
    stage = source if isinstance(source, BarrierStage) else BarrierStage.of_rdd(source)
    if stage.partitions != workers:
        raise ConfigError(
            f"the input has {stage.partitions} partitions but {workers} workers were "
            "asked for; every worker reads one partition"
        )
    timeout = _conf(sc, "spark.timelypy.timeout", timeout, float, None)
    attempts = _conf(sc, "spark.timelypy.attempts", attempts, int, 0)
    serializer = _conf(sc, "spark.timelypy.serializer", serializer, str, "msgpack")
    connect_timeout = _conf(sc, "spark.timelypy.connectTimeout", connect_timeout, float, 60.0)
    assert attempts is not None and serializer is not None and connect_timeout is not None
    check_slots(sc, workers)
    check_executors(sc, workers)
    if attempts < 0:
        raise ConfigError(f"attempts must be >= 0, got {attempts}")
    run = uuid.uuid4().hex[:12]
    secret = secrets.token_bytes(32)
    last_error: BaseException | None = None
    for execution in range(attempts + 1):
        if service is not None:
            service.job_group = f"timelypy-{run}-{execution}"
            service.start(execution)
        try:
            value = _run_execution(
                sc, stage, program, workers, run, execution, secret,
                flatten=flatten, timeout=timeout, serializer=serializer,
                connect_timeout=connect_timeout, action=action, stream_program=stream_program,
                service=service, name=name,
            )
        except BaseException as exc:
            if service is not None:
                service.end(execution, False)
            if isinstance(exc, KeyboardInterrupt) or execution == attempts:
                raise
            last_error = exc
            log.warning(
                "execution %d of run %s failed (%s: %s); starting execution %d",
                execution, run, type(exc).__name__, exc, execution + 1,
            )
        else:
            if service is not None:
                service.end(execution, True)
            return value
    raise AssertionError(last_error)  # unreachable: the last attempt re-raises


def _run_execution(
    sc: Any,
    stage: BarrierStage,
    program: Callable[[Any, Iterator[Any]], Any] | None,
    workers: int,
    run: str,
    execution: int,
    secret: bytes,
    *,
    flatten: bool,
    timeout: float | None,
    serializer: str,
    connect_timeout: float,
    action: Callable[[Any], Any],
    stream_program: StreamProgram | None,
    service: AttemptService | None,
    name: str,
) -> Any:
    rendezvous = Rendezvous(driver_host(sc), secret, run, execution)
    spec = TaskSpec(
        run=run, execution=execution, secret=secret, driver=rendezvous.endpoint,
        workers=workers, serializer=serializer, connect_timeout=connect_timeout,
        program=program, flatten=flatten, stream_program=stream_program, encode=stage.encode,
    )
    group = f"timelypy-{run}-{execution}"
    outcome: dict[str, Any] = {}
    output = stage.apply(barrier_task(spec))

    def job() -> None:
        # The Spark UI names jobs by their description and stages by their call site:
        # name both after the program, not after this thread's start.
        description = (
            f"timelypy {name}: {workers} worker{'s' if workers != 1 else ''} "
            f"(run {run}, attempt {execution + 1})"
        )
        sc.setJobGroup(group, description, interruptOnCancel=True)
        try:
            with _call_site(sc, f"timelypy {name}"):
                outcome["value"] = action(output)
        except BaseException as exc:
            outcome["error"] = exc

    from pyspark import InheritableThread

    thread = InheritableThread(target=job, name=f"timelypy-spark-{run}-{execution}", daemon=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    registered: dict[int, str] = {}
    tasks: dict[int, int] = {}
    lost: str | None = None
    worker_error: tuple[int, Any] | None = None
    root_found = False
    secondary_since: float | None = None
    cancelled = False
    # Spark's own console progress bar draws on the same terminal: draw ours only without it
    progress = DriverProgress(
        workers, name, PROGRESS_STREAM,
        enabled=sc.getConf().get("spark.ui.showConsoleProgress", "false").lower() != "true",
    )
    finished: set[int] = set()  # the tasks whose "done" arrived

    def report(identity: bytes, message: Any) -> None:
        """A task's message other than its registration or an error, in either loop."""
        if message.kind == "log":
            # a worker's warning (a stall, a probe that stopped moving), forwarded
            log.log(message.body["level"], "[task %d] %s", message.index, message.body["text"])
        elif message.kind == "progress":
            progress.report(message.index, message.body)
        elif message.kind not in ("register", "error"):
            if message.kind == "done":
                finished.add(message.index)
            if service is not None:
                service.handle(rendezvous, identity, message)

    thread.start()
    try:
        while thread.is_alive():
            for identity, message in rendezvous.poll(0.05):
                if message.kind == "register":
                    task = message.body["task"]
                    known = tasks.setdefault(message.index, task)
                    if known != task:
                        # Spark resubmitted the barrier stage: a task of this gang died.
                        lost = lost or (
                            f"Spark resubmitted the barrier stage after a task failed (worker "
                            f"{message.index} registered again, as task {task} after {known})"
                        )
                        continue
                    registered[message.index] = message.body["endpoint"]
                    if len(registered) == workers:
                        rendezvous.send_table([registered[i] for i in range(workers)])
                elif message.kind == "error" and _better(worker_error, message):
                    worker_error = (message.index, message.body)
                    if not _secondary(message.body):
                        root_found = True
                else:
                    report(identity, message)
            if lost is not None and not cancelled:
                sc.cancelJobGroup(group)
                cancelled = True
            if worker_error is not None and not cancelled:
                if not root_found and time.monotonic() - (secondary_since or 0) < ROOT_CAUSE_WAIT:
                    # Only "peer X failed" so far: give X's own report a moment to arrive.
                    secondary_since = secondary_since or time.monotonic()
                    continue
                sc.cancelJobGroup(group)
                cancelled = True
            if deadline is not None and not cancelled and time.monotonic() > deadline:
                sc.cancelJobGroup(group)
                cancelled = True
                outcome["timeout"] = True
        # Errors sent just before a failed job ended may still be in the socket
        # (a task reports before it fails, so a successful job has none to wait for).
        # A service also gets every task's "done", and what each task sent before it:
        # after a successful job every task sent one, so wait (bounded) for them all.
        drain_until = time.monotonic() + (
            DONE_WAIT if service is not None and "error" not in outcome else 0.0
        )
        wait = 0.2 if "error" in outcome else 0.0
        while True:
            for identity, message in rendezvous.poll(wait):
                if message.kind == "error" and _better(worker_error, message):
                    worker_error = (message.index, message.body)
                else:
                    report(identity, message)
            if len(finished) >= workers or time.monotonic() >= drain_until:
                break
            wait = 0.05
    except BaseException:
        if not cancelled:
            sc.cancelJobGroup(group)
        thread.join(CANCEL_WAIT)
        raise
    finally:
        progress.finish()
        rendezvous.close()
    thread.join(CANCEL_WAIT)
    if worker_error is not None and (root_found or lost is None):
        error = _original(*worker_error)
        if root_found:
            raise error
        # Only peers' "lost process N" reports: that worker's task died without a word.
        raise TaskLostError(
            f"a Spark task of timelypy run {run} (execution {execution}) was lost: its worker "
            f"stopped without reporting an error (its Python worker or executor died?); "
            f"worker {worker_error[0]} reported: {_first_line(error)}"
        ) from error
    if lost is not None:
        raise TaskLostError(
            f"a Spark task of timelypy run {run} (execution {execution}) was lost: {lost}; "
            f"the attempt's Spark job group {group!r} was cancelled"
        )
    if outcome.get("timeout"):
        raise ClusterError(
            f"timelypy run {run} (execution {execution}) did not finish within {timeout:g} s; "
            f"its Spark job group {group!r} was cancelled"
        )
    if "error" in outcome:
        error = outcome["error"]
        raise SparkJobError(
            f"the Spark job of timelypy run {run} (execution {execution}) failed: "
            f"{_first_line(error)}"
        ) from error
    return outcome["value"]


def _secondary(body: Any) -> bool:
    """Whether an error report only says that some *other* worker failed."""
    return isinstance(body, dict) and body.get("type") in ("ClusterError", "WorkerAborted")


def _better(current: tuple[int, Any] | None, message: Any) -> bool:
    """Whether ``message``'s error should replace the one kept so far (root causes win)."""
    if current is None:
        return True
    return _secondary(current[1]) and not _secondary(message.body)


def _original(index: int, body: Any) -> BaseException:
    """The exception a worker sent, with a note saying where it came from."""
    error: BaseException | None = None
    if isinstance(body, dict) and body.get("exception") is not None:
        try:
            error = pickle.loads(body["exception"])
        except Exception:
            error = None
    if not isinstance(error, BaseException):
        text = body.get("text", body) if isinstance(body, dict) else body
        error = SparkJobError(f"worker {index} failed:\n{text}")
    elif isinstance(body, dict):
        error.add_note(f"raised on timelypy worker {index} (a Spark barrier task)")
        text = body.get("text")
        if text:
            error.add_note("worker traceback:\n" + text.rstrip())
    return error


def _first_line(error: BaseException) -> str:
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
