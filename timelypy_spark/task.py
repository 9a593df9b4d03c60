"""What runs inside each Spark task: one long-lived timelypy worker.

A barrier stage starts one task per worker, all at once.  Each task:

1. binds its cluster socket on a free port (on the address that routes to
   the driver) and registers it with the driver's :class:`Rendezvous`;
2. receives the ordered table of every worker's endpoint;
3. runs its worker with :func:`timelypy.execute.initialize_from` on a
   :class:`~timelypy.communication.cluster.ClusterTransport`, as process
   ``partition`` of ``workers`` processes of one worker each -- exactly the
   multi-process cluster, authenticated with the run's secret, so a task of
   an earlier execution cannot join;
4. yields the worker's results as the partition's output, and tells the
   driver ``done``.

A *streaming* program (:attr:`TaskSpec.stream_program`) yields its records
while the worker runs instead: the worker runs in a thread of the task and
hands its records, a batch at a time, to ``emit``; the task's generator
(Spark's thread) yields them from a bounded queue, so Spark writes them out
as they come and the task never holds more than :data:`STREAM_BATCHES`
batches.  A worker that outruns Spark's writing waits in ``emit``.  With an
:attr:`TaskSpec.encode` (a ``mapInArrow`` stage, :mod:`timelypy_spark.arrow`)
each queued piece is encoded in the worker's thread, and the task yields
the encoded pieces (``pyarrow.RecordBatch``es) instead of the records.

A barrier stage with another number of tasks than the run's workers (a
DataFrame whose partitions changed between planning and running) fails at
once with a :class:`~timelypy.errors.ConfigError`, before any worker waits
for peers that will never come.

If anything fails, the task sends the exception to the driver (which
cancels the whole gang and re-raises it) and then fails itself.

Functions and options travel to executors inside :class:`TaskSpec`, pickled
by Spark with the rest of the task.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from timelypy.communication.cluster import ClusterTransport
from timelypy.communication.config import Config
from timelypy.communication.network import ClusterNetwork
from timelypy.errors import ClusterError, ConfigError
from timelypy.execute import initialize_from
from timelypy.progress.metrics import progress_summary
from timelypy_spark.rendezvous import TaskChannel, execution_tag, local_ip_towards

__all__ = [
    "TaskSpec",
    "barrier_task",
    "EmitRecords",
    "StreamProgram",
    "TaskCancelled",
    "TaskContext",
    "STREAM_BATCHES",
    "STREAM_RECORDS",
]

#: Batches a streaming task may hold between its worker and Spark's output.
STREAM_BATCHES = 64
#: The most records one of those batches holds: a larger emitted batch (one input
#: batch through a flat_map that fans out) is queued in pieces, so the queue holds
#: at most STREAM_BATCHES * STREAM_RECORDS records whatever the input's size.
STREAM_RECORDS = 4096
#: Seconds between a worker's progress reports to the driver.
PROGRESS_SECONDS = 1.0
#: Seconds between checks while a queue of a streaming task is full or empty.
POLL = 0.1
#: Seconds a streaming task waits for its worker thread to stop once it is told to.
JOIN_WAIT = 10.0

#: ``emit(records)``: hand a batch of output records to the task's output.
EmitRecords = Callable[[list[Any]], None]
#: ``program(worker, partition_iterator, emit, task)``: emits records as it goes.
StreamProgram = Callable[[Any, Iterator[Any], EmitRecords, "TaskContext"], Any]


@dataclass
class TaskContext:
    """What a streaming program may use of its task besides the worker and its records.

    ``cancelled`` is set once the task stops reading the program's output
    (the program should stop); ``channel`` is the task's authenticated
    channel to the driver, for requests to the driver's services; only the
    worker's thread may use it while the worker runs.
    """

    index: int
    cancelled: threading.Event
    channel: TaskChannel


class TaskCancelled(Exception):
    """Raised in a streaming task's worker when the task stopped reading its output."""


_END = object()


class _Encoded:
    """An encoded piece of a streaming task's output, yielded as one item."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item


@dataclass
class TaskSpec:
    """Everything a task needs, shipped with it by Spark."""

    run: str
    execution: int
    secret: bytes
    driver: str
    workers: int
    serializer: str = "msgpack"
    connect_timeout: float = 60.0
    #: ``program(worker, partition_iterator) -> result``
    program: Callable[[Any, Iterator[Any]], Any] | None = None
    #: Yield the program's result's items (True) or the result itself (False).
    flatten: bool = False
    #: A streaming program, used instead of ``program`` (see the module documentation).
    stream_program: StreamProgram | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: ``encode(records)``: what a streaming task yields for each piece of its output
    #: (``None``: the records themselves; see the module documentation).
    encode: Callable[[list[Any]], Any] | None = None
    #: The least level of the worker's ``timelypy`` log records sent to the driver: the
    #: driver's own effective level for ``timelypy``, so that a user who turns on INFO
    #: there sees the workers' INFO records too.
    log_level: int = logging.WARNING
    #: ``spark.timelypy.metrics.port``: worker ``I`` serves its Prometheus metrics on
    #: ``metrics_port + I`` of its executor's host (0: a free port); ``None``: no endpoint.
    metrics_port: int | None = None


def barrier_task(spec: TaskSpec) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function Spark runs on every partition of the barrier stage.

    The spec travels as cloudpickle bytes that the task itself unpickles:
    a user function whose module the executors lack then fails *inside*
    the task, which tells the driver exactly what failed and waits to be
    cancelled -- one attempt and one clear message, rather than Spark's
    stage retries each failing the same way (:func:`_startup_error`).
    """
    import cloudpickle

    payload = cloudpickle.dumps(spec)
    head = _Head(
        spec.driver, spec.secret, spec.run, spec.execution, spec.workers, spec.connect_timeout
    )
    del spec  # only the bytes travel

    def run_partition(partition: Iterable[Any]) -> Iterator[Any]:
        import pickle

        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        index = context.partitionId()
        attempt = context.taskAttemptId()
        channel = TaskChannel(head.driver, head.secret, head.run, head.execution, index)
        reported: list[BaseException] = []
        infos = context.getTaskInfos()
        tasks = len(infos)
        if tasks != head.workers:
            error = ConfigError(
                f"the barrier stage has {tasks} tasks, but the run has {head.workers} workers "
                f"(one per partition): the input's partitions changed after they were counted "
                f"(adaptive query execution?); repartition it to {head.workers} partitions first"
            )
            try:
                channel.send_error(error, str(error))
            finally:
                channel.close()
            raise error
        try:
            spec: TaskSpec = pickle.loads(payload)
        except BaseException as exc:
            address = infos[index].address if index < tasks else "?"
            _startup_error(head, channel, index, address, exc)
            raise  # not reached: the driver cancels the task first

        def report(error: BaseException) -> None:
            if not reported:
                reported.append(error)
                channel.send_error(error, "".join(traceback.format_exception(error)))

        if spec.stream_program is not None:
            try:
                yield from _streamed(
                    spec, spec.stream_program, index, attempt, channel, partition, report
                )
            finally:
                channel.close()
            return
        try:
            try:
                program = spec.program
                assert program is not None
                records = iter(partition)
                result = _run(
                    spec, index, attempt, channel, lambda worker: program(worker, records), report
                )
            except BaseException as exc:
                report(exc)
                raise
            channel.send("done")
        finally:
            channel.close()
        if spec.flatten:
            yield from result
        else:
            yield (index, result)

    return run_partition


@dataclass(frozen=True)
class _Head:
    """What a task needs before its :class:`TaskSpec` is unpickled: how to reach the driver."""

    driver: str
    secret: bytes
    run: str
    execution: int
    workers: int
    connect_timeout: float


def _startup_error(
    head: _Head, channel: TaskChannel, index: int, address: str, exc: BaseException
) -> None:
    """Report a task that cannot start (its program does not unpickle), then wait to be cancelled.

    Such an error is the same on every attempt: the driver raises it once and
    cancels the run; the task does not fail by itself (Spark would retry the
    stage), but waits, at most ``connect_timeout`` seconds, for that cancel.
    """
    import socket
    import sys

    hint = ""
    if isinstance(exc, ModuleNotFoundError):
        hint = (
            f": module {exc.name!r} is importable on the driver but not on the executors; "
            "install it there, or ship it (SparkContext.addPyFile, spark.submit.pyFiles, "
            "--py-files), or define the function in the driver's script"
        )
    error = ConfigError(
        f"worker {index}'s Spark task (executor at {address}, host {socket.gethostname()}, "
        f"Python {sys.executable}) cannot load the program it runs: "
        f"{type(exc).__name__}: {exc}{hint}"
    )
    try:
        channel.send_error(error, "".join(traceback.format_exception(exc)))
        deadline = time.monotonic() + head.connect_timeout
        while time.monotonic() < deadline:
            time.sleep(POLL)
    finally:
        channel.close()
    raise error from exc


def _streamed(
    spec: TaskSpec,
    program: StreamProgram,
    index: int,
    attempt: int,
    channel: TaskChannel,
    partition: Iterable[Any],
    report: Callable[[BaseException], Any],
) -> Iterator[Any]:
    """Run the worker in a thread; yield the records it emits as they come.

    Every wait is bounded: the worker's ``emit`` gives up (``TaskCancelled``)
    once the generator stops, and the generator watches the thread.
    """
    batches: queue.Queue[Any] = queue.Queue(STREAM_BATCHES)
    stop = threading.Event()
    encode = spec.encode

    def put(message: Any) -> None:
        if type(message) is list:
            if len(message) > STREAM_RECORDS:
                for start in range(0, len(message), STREAM_RECORDS):
                    put(message[start : start + STREAM_RECORDS])
                return
            if encode is not None:
                if not message:
                    return
                message = _Encoded(encode(message))
        while True:
            try:
                batches.put(message, timeout=POLL)
                return
            except queue.Full:
                if stop.is_set():
                    raise TaskCancelled(
                        f"worker {index}: the Spark task stopped reading its output"
                    ) from None

    def report_unless_stopped(error: BaseException) -> None:
        # Once the generator stopped, the task is ending for a reason of its own;
        # the worker's resulting TaskCancelled is not worth the driver's attention.
        if not stop.is_set():
            report(error)

    def body() -> None:
        try:
            records = iter(partition)
            task = TaskContext(index, stop, channel)
            _run(
                spec,
                index,
                attempt,
                channel,
                lambda worker: program(worker, records, put, task),
                report_unless_stopped,
            )
            # Only this thread uses the channel until it ends (ZeroMQ sockets are
            # not thread-safe); "done" is sent here, before the end is queued.
            channel.send("done")
            put(_END)
        except BaseException as exc:  # handed to the task's thread
            report_unless_stopped(exc)
            try:
                put(exc)
            except TaskCancelled:
                pass

    thread = threading.Thread(target=body, name=f"timelypy-spark-worker-{index}", daemon=True)
    thread.start()
    try:
        while True:
            try:
                message = batches.get(timeout=POLL)
            except queue.Empty:
                if not thread.is_alive() and batches.empty():
                    error = ClusterError(f"worker {index}: the worker thread ended without a word")
                    report(error)  # the thread is gone: the channel is this thread's now
                    raise error from None
                continue
            if message is _END:
                break
            if isinstance(message, BaseException):
                raise message
            if type(message) is _Encoded:
                yield message.item
            else:
                yield from message
    finally:
        stop.set()
        thread.join(JOIN_WAIT)


def _run(
    spec: TaskSpec,
    index: int,
    attempt: int,
    channel: TaskChannel,
    func: Callable[[Any], Any],
    report: Callable[[BaseException], Any],
) -> Any:
    config = Config.cluster(
        workers=1, processes=spec.workers, process=index, serializer=spec.serializer
    )
    host = local_ip_towards(spec.driver.rpartition(":")[0])
    network = ClusterNetwork(
        config,
        spec.secret,
        run=execution_tag(spec.run, spec.execution),
        connect_timeout=spec.connect_timeout,
        bind=f"{host}:0",
    )
    try:
        # The task's attempt id tells the driver a resubmitted stage from the gang it met.
        channel.send(
            "register",
            {"endpoint": network.endpoint, "task": attempt, "executor": _executor_address(index)},
        )
        deadline = time.monotonic() + spec.connect_timeout
        table = None
        while table is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ClusterError(
                    f"worker {index} got no peer table from the driver at {spec.driver} "
                    f"within {spec.connect_timeout:g} s"
                )
            message = channel.receive(min(remaining, 0.5))
            if message is not None and message.kind == "table":
                table = message.body
        network.connect(table)
    except BaseException:
        network.close()
        raise
    forward = _ForwardWarnings(channel, spec.log_level)
    logger = logging.getLogger("timelypy")
    logger.addHandler(forward)
    previous = logger.level
    if spec.log_level < logger.getEffectiveLevel():
        logger.setLevel(spec.log_level)

    server = None
    if spec.metrics_port is not None:
        from timelypy import metrics

        try:
            server = metrics.start(spec.metrics_port + index if spec.metrics_port else 0, host)
        except BaseException:
            network.close()
            logger.removeHandler(forward)
            logger.setLevel(previous)
            raise
        logger.info("worker %d serves its metrics at %s", index, server.url)

    def with_progress(worker: Any) -> Any:
        worker.activate_after(lambda: _send_progress(worker, channel), PROGRESS_SECONDS)
        if server is not None:
            server.add(worker)
        return func(worker)

    try:
        results = initialize_from(ClusterTransport(network), config, with_progress, report)
    finally:
        if server is not None:
            server.close()
        logger.removeHandler(forward)
        logger.setLevel(previous)
    return results[0]


def _executor_address(index: int) -> str:
    """The address of the executor running barrier task ``index`` (Spark's ``host:port``)."""
    try:
        from pyspark import BarrierTaskContext

        return str(BarrierTaskContext.get().getTaskInfos()[index].address)
    except Exception:  # not in a barrier task (a sample run on the driver)
        return "?"


def _send_progress(worker: Any, channel: TaskChannel) -> None:
    """Tell the driver how far this worker got (a worker timer, every PROGRESS_SECONDS).

    The first epoch not complete at any operator of the worker's dataflows,
    the first its sources may still send, and the records they sent so far;
    the driver shows them as a progress line (:mod:`timelypy_spark.driver`).
    """
    if not worker.has_dataflows():
        return
    try:
        channel.send("progress", progress_summary(worker.metrics()["dataflows"]))
    except Exception:  # the driver is gone: the run is ending anyway
        return
    worker.activate_after(lambda: _send_progress(worker, channel), PROGRESS_SECONDS)


class _ForwardWarnings(logging.Handler):
    """Send the worker's ``timelypy`` log records to the driver, which logs them too.

    A stall warning or a probe that stopped moving (``Worker.watch_probe``)
    is written on the executor, where nobody looks; the driver logs what
    arrives through Python ``logging`` (logger ``timelypy_spark``, the
    record's level).  Records at ``level`` and above are sent (WARNING, or
    lower when the driver's ``timelypy`` logger is set lower).  Only
    records of the worker's own thread are sent: it is the one thread using
    the channel while the worker runs.
    """

    def __init__(self, channel: TaskChannel, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        if not threading.current_thread().name.startswith("timelypy-worker"):
            return
        try:
            self.channel.send("log", {"level": record.levelno, "text": record.getMessage()})
        except Exception:  # the driver is gone: the run is ending anyway
            self.handleError(record)
