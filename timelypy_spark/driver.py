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
from timelypy_spark.cluster import (
    call_site,
    check_executors,
    check_slots,
    conf_value,
    default_workers,
    driver_host,
    first_line,
    lost_task_cause,
    spark_context,
)
from timelypy_spark.progress import DriverProgress
from timelypy_spark.rendezvous import Rendezvous
from timelypy_spark.task import StreamProgram, TaskSpec, barrier_task

__all__ = [
    "execute",
    "SparkJobError",
    "TaskLostError",
    "AttemptService",
    "BarrierStage",
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
    ``.serializer``, ``.connectTimeout``; :data:`~timelypy_spark.cluster.CONF_KEYS`), else its
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
    ``None`` come from the Spark configuration (:data:`~timelypy_spark.cluster.CONF_KEYS`) or their
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
    timeout = conf_value(sc, "spark.timelypy.timeout", timeout, float, None)
    attempts = conf_value(sc, "spark.timelypy.attempts", attempts, int, 0)
    serializer = conf_value(sc, "spark.timelypy.serializer", serializer, str, "msgpack")
    connect_timeout = conf_value(sc, "spark.timelypy.connectTimeout", connect_timeout, float, 60.0)
    metrics_port = conf_value(sc, "spark.timelypy.metrics.port", None, int, None)
    if metrics_port is not None and not 0 <= metrics_port <= 65535 - workers:
        raise ConfigError(
            f"spark.timelypy.metrics.port={metrics_port} leaves no port for each of the "
            f"{workers} workers (port + worker index must be at most 65535)"
        )
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
                sc,
                stage,
                program,
                workers,
                run,
                execution,
                secret,
                flatten=flatten,
                timeout=timeout,
                serializer=serializer,
                connect_timeout=connect_timeout,
                action=action,
                stream_program=stream_program,
                service=service,
                name=name,
                metrics_port=metrics_port,
            )
        except BaseException as exc:
            if service is not None:
                service.end(execution, False)
            if isinstance(exc, KeyboardInterrupt) or execution == attempts:
                raise
            last_error = exc
            log.warning(
                "execution %d of run %s failed (%s: %s); starting execution %d",
                execution,
                run,
                type(exc).__name__,
                exc,
                execution + 1,
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
    metrics_port: int | None = None,
) -> Any:
    rendezvous = Rendezvous(driver_host(sc), secret, run, execution)
    spec = TaskSpec(
        run=run,
        execution=execution,
        secret=secret,
        driver=rendezvous.endpoint,
        workers=workers,
        serializer=serializer,
        connect_timeout=connect_timeout,
        program=program,
        flatten=flatten,
        stream_program=stream_program,
        encode=stage.encode,
        log_level=min(logging.WARNING, logging.getLogger("timelypy").getEffectiveLevel()),
        metrics_port=metrics_port,
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
            with call_site(sc, f"timelypy {name}"):
                outcome["value"] = action(output)
        except BaseException as exc:
            outcome["error"] = exc

    from pyspark import InheritableThread

    thread = InheritableThread(target=job, name=f"timelypy-spark-{run}-{execution}", daemon=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    registered: dict[int, str] = {}
    executors: dict[int, str] = {}  # worker -> the address of the executor running its task
    tasks: dict[int, int] = {}
    lost: str | None = None
    worker_error: tuple[int, Any] | None = None
    root_found = False
    secondary_since: float | None = None
    cancelled = False
    # Spark's own console progress bar draws on the same terminal: draw ours only without it
    progress = DriverProgress(
        workers,
        name,
        PROGRESS_STREAM,
        enabled=sc.getConf().get("spark.ui.showConsoleProgress", "false").lower() != "true",
    )
    finished: set[int] = set()  # the tasks whose "done" arrived

    def report(identity: bytes, message: Any) -> None:
        """A task's message other than its registration or an error, in either loop."""
        if message.kind == "log":
            # a worker's record (a stall, a probe that stopped moving), forwarded
            log.log(
                message.body["level"],
                "[task %d] %s",
                message.index,
                message.body["text"],
                extra={"timelypy_worker": message.index},
            )
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
                    executors[message.index] = str(message.body.get("executor", "?"))
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
    spark_text = _failure_text(outcome.get("error"))
    spark_cause = lost_task_cause(spark_text) if spark_text else None
    if spark_cause and "executor" not in spark_cause:
        spark_cause += _task_where(executors, spark_text)
    if worker_error is not None and (root_found or lost is None):
        error = _original(*worker_error)
        if root_found:
            error.add_note(f"timelypy run {run}, execution {execution}: Spark job group {group}")
            raise error
        # Only peers' "lost process N" reports: that worker's task died without a word.
        raise TaskLostError(
            f"a Spark task of timelypy run {run} (execution {execution}) was lost: "
            + (
                f"{spark_cause}; "
                if spark_cause
                else "its worker stopped without reporting an error (its Python worker or "
                f"executor died?{_lost_where(executors, first_line(error))}); "
            )
            + f"worker {worker_error[0]} reported: {first_line(error)}"
        ) from error
    if lost is not None:
        raise TaskLostError(
            f"a Spark task of timelypy run {run} (execution {execution}) was lost: {lost}; "
            f"the attempt's Spark job group {group!r} was cancelled (the gang ran on "
            f"{_executors_text(executors)})"
        )
    if outcome.get("timeout"):
        raise ClusterError(
            f"timelypy run {run} (execution {execution}) did not finish within {timeout:g} s; "
            f"its Spark job group {group!r} was cancelled"
        )
    if "error" in outcome:
        error = outcome["error"]
        if spark_cause:
            raise TaskLostError(
                f"a Spark task of timelypy run {run} (execution {execution}) was lost: "
                f"{spark_cause}"
            ) from error
        raise SparkJobError(
            f"the Spark job of timelypy run {run} (execution {execution}) failed: "
            f"{first_line(error)}"
        ) from error
    return outcome["value"]


def _executors_text(executors: dict[int, str]) -> str:
    """``executor at A (worker 0), executor at B (workers 1, 2)``."""
    by_address: dict[str, list[int]] = {}
    for worker, address in sorted(executors.items()):
        by_address.setdefault(address, []).append(worker)
    return (
        ", ".join(
            f"executor at {address} (worker{'s' if len(ws) > 1 else ''} {', '.join(map(str, ws))})"
            for address, ws in by_address.items()
        )
        or "executors not known yet"
    )


def _task_where(executors: dict[int, str], text: str) -> str:
    """Where the barrier task Spark names (``ResultTask(stage, partition)``) ran."""
    found = re.search(r"(?:Result|ShuffleMap)Task\(\d+, (\d+)\)", text)
    if found is not None and int(found.group(1)) in executors:
        worker = int(found.group(1))
        return f": worker {worker}'s task, on the executor at {executors[worker]}"
    return f"; the gang ran on {_executors_text(executors)}"


def _lost_where(executors: dict[int, str], report: str) -> str:
    """Where the lost worker ran, from a peer's ``lost process N`` report."""
    found = re.search(r"lost process (\d+)", report)
    if found is not None and int(found.group(1)) in executors:
        worker = int(found.group(1))
        return f" worker {worker} ran on the executor at {executors[worker]}"
    return f" the gang ran on {_executors_text(executors)}"


def _failure_text(error: BaseException | None) -> str:
    """All Spark says of a failed job: the Python message and the Java exception's text."""
    if error is None:
        return ""
    text = str(error)
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            text += "\n" + str(java.toString())
        except Exception:  # the JVM may be gone already
            pass
    return text


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
