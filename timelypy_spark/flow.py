"""A :class:`timelypy.flow.Dataflow` on Spark: ``run_flow(spark, flow, source, workers=N)``.

Epoch-level flows (``map``, ``reduce_epoch``, ``stateful_map``,
``capture``...) run here exactly as :func:`timelypy.flow.run` runs them,
with each worker one long-lived task of a single Spark barrier stage (the
machinery of :func:`timelypy_spark.execute`: slot check, rendezvous on the
driver, ZeroMQ between the tasks, errors back as themselves).  Every task
runs :func:`timelypy.flow.driver.flow_program` on its worker, with
``collect_on=None``: each worker keeps the items its ``capture()`` steps see
(no exchange to one worker) and its task *yields* them as ``(epoch, item)``
while the flow runs, through a bounded queue, so no task holds its whole
output.  Those records are the result: an RDD of ``(epoch, item)``, a
DataFrame (given a ``schema``, or ``output="frame"`` to infer one from a
sample, as :func:`timelypy_spark.run` does), or a list (``collect=True``).

Where the items come from (``source``):

* **an RDD** -- repartitioned to ``workers`` partitions if needed; worker
  ``i`` reads partition ``i``.
* **a DataFrame** -- its rows, as tuples (``row_type="dict"``: dicts).  With
  a DataFrame result too, the rows enter and the result rows leave the
  tasks as Arrow batches (``mapInArrow(..., barrier=True)``,
  :mod:`timelypy_spark.arrow`).  With ``row_type="arrow"`` (and a
  DataFrame result) the flow's items are those Arrow batches themselves,
  ``pyarrow.RecordBatch``es, never rows as Python objects, for the
  Arrow-native steps of :mod:`timelypy.flow.operators.arrow`; the
  record batches the flow captures become the result's batches (columns
  by name, cast to the schema's types, the epoch column added).  Such a
  flow made of stateless steps only (``map_arrow``, ``filter_arrow``,
  ``op.map``...: nothing exchanged, no state) needs no gang: it runs as a
  plain ``mapInArrow`` (no barrier, no rendezvous), each task one worker
  of its own, and its result is a lazy DataFrame like any other
  ``mapInArrow``'s -- not persisted, computed again by each action.
* **an input config** (a :class:`~timelypy.flow.inputs.PartitionedInputConfig`,
  or a :class:`~timelypy.flow.inputs.ManualInputConfig`), or ``None`` for the
  flow's own ``input`` step -- read inside the tasks as
  :func:`timelypy.flow.run_cluster` reads it: every partition by exactly one
  worker, its primary, agreed among the tasks; its readers' ``AdvanceTo``
  give the epochs.  The barrier stage then runs over an empty RDD of
  ``workers`` partitions.

Epochs of RDD and DataFrame records (:mod:`timelypy_spark.epochs`) mean the
same data on every worker: ``epoch_of(record)`` (each partition is sorted by
it in its task first, unless ``presorted=True``), ``epoch_length`` seconds of
clock time, or neither: everything in epoch 0.  Never "every N records".

Captures with an output config (``ManualOutputConfig``,
``PartitionedOutputConfig``...) write from inside the tasks, on the
executors; only captures without one feed the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from timelypy.errors import ClusterError, ConfigError, FlowError
from timelypy.flow import inputs as flow_inputs
from timelypy.flow._graph import StatelessSpec
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.driver import FlowWorker, flow_program
from timelypy.flow.inputs import InputConfig, ManualInputConfig, epochs_from_pairs
from timelypy.flow.sinks import CaptureSink
from timelypy.flow.sources import DynamicSource, StatelessSourcePartition
from timelypy.recovery import AttachedExecution, RecoveryConfig
from timelypy_spark.arrow import (
    BatchReader,
    BatchWriter,
    RecordBatchWriter,
    infer_schema,
    is_record_batch,
    struct_of,
)
from timelypy_spark.cluster import default_workers, spark_context
from timelypy_spark.driver import AttemptService, BarrierStage
from timelypy_spark.epochs import Epochs
from timelypy_spark.io import (
    BATCH,
    Reader,
    as_frame,
    as_rdd,
    check_workers,
    is_frame,
    output_kind,
    row_reader,
    run_streaming,
    sample_records,
    session_of,
    sort_memory_mb,
)
from timelypy_spark.recovery import RemoteStore, StoreService
from timelypy_spark.task import EmitRecords, StreamProgram, TaskCancelled, TaskContext

__all__ = ["run_flow", "iter_flow", "flow_rows", "frame_schema", "SparkInput"]

#: Seconds between a task's checks of its flow's frontier, for :func:`iter_flow`.
FRONTIER_SECONDS = 0.01


def run_flow(
    spark: Any,
    flow: Dataflow,
    source: Any = None,
    workers: int | None = None,
    *,
    epoch_of: Callable[[Any], int] | None = None,
    epoch_length: float | datetime.timedelta | None = None,
    presorted: bool = False,
    schema: Any = None,
    output: str | None = None,
    epoch_column: str | None = "epoch",
    row_type: str = "tuple",
    timeout: float | None = None,
    attempts: int | None = None,
    serializer: str | None = None,
    connect_timeout: float | None = None,
    collect: bool = False,
    recovery_config: RecoveryConfig | None = None,
) -> Any:
    """Run ``flow`` on ``workers`` Spark tasks; return what its ``capture()`` steps see.

    ``source`` is an RDD, a DataFrame, an input config, or ``None`` (the
    flow's own ``input`` step); see the module documentation.  ``workers``
    defaults to the RDD's partition count, or Spark's default parallelism
    for an input config.

    Epochs of RDD and DataFrame records: ``epoch_of(record) -> int`` (each
    partition sorted by it, stably, unless ``presorted=True``), or
    ``epoch_length`` seconds (or a ``timedelta``) of clock time from the
    start of the run, or neither: one epoch, 0.

    The result: an RDD of ``(epoch, item)`` pairs, persisted, so that later
    actions do not run the flow again; with a ``schema`` (the *item's*
    columns: a DDL string or a ``StructType``), a DataFrame whose rows are
    ``(epoch, *item)`` -- a leading ``epoch_column`` (``long``; ``None``
    leaves it out) then the item's fields (a tuple's elements, a dict's
    values by name, or the item itself for one column); with
    ``collect=True`` (or ``output="list"``), a list of the pairs on the
    driver.  ``output="frame"`` without a ``schema`` infers the item's
    columns from the flow's output over a sample of an RDD or DataFrame
    source, on the driver (:mod:`timelypy_spark.io`).  A DataFrame source
    with a DataFrame result runs through Arrow batches
    (:mod:`timelypy_spark.arrow`).

    ``row_type="arrow"`` (a DataFrame source, a DataFrame result) makes
    the flow's items the DataFrame's own ``pyarrow.RecordBatch``es (one
    item per batch; ``epoch_of`` then takes a batch), and its output items
    record batches too, written as the result's batches: no row becomes a
    Python object on either side (``docs/arrow.md``).  A flow of
    stateless steps only then runs as a plain, lazy ``mapInArrow`` (no
    gang, nothing persisted; see the module documentation).

    ``timeout``, ``attempts``, ``serializer`` and ``connect_timeout`` are as
    for :func:`timelypy_spark.execute`.  A user function that raises in any
    task is re-raised here as itself, with notes naming the step and worker;
    a lost task is a :class:`~timelypy_spark.driver.TaskLostError`.

    With a ``recovery_config`` (a store directory on the *driver's*
    machine, :mod:`timelypy_spark.recovery`) every attempt is an execution
    against that store: stateful steps snapshot as epochs close, a retried
    attempt (``attempts``) resumes from the resume epoch, and the result is
    the failure-free one; a later call resumes where the store left off
    and returns the epochs from its resume epoch on.

    >>> # counts = timelypy_spark.run_flow(spark, flow, lines, workers=2).collect()
    """
    if not isinstance(flow, Dataflow):
        raise FlowError(f"run_flow needs a timelypy.flow.Dataflow, got {flow!r}")
    kind = output_kind(output, schema, collect)
    if epoch_column is not None and (not isinstance(epoch_column, str) or not epoch_column):
        raise ConfigError(f"epoch_column must be a column name or None, got {epoch_column!r}")
    sc = spark_context(spark)
    alone = _gangless_input(flow, source, kind, row_type, recovery_config)
    if alone is not None:
        return _gangless_frame(
            spark, flow, source, alone, workers, epoch_of, epoch_length, presorted, schema,
            epoch_column,
        )  # fmt: skip
    rdd, program = _flow_input(
        sc,
        flow,
        source,
        workers,
        epoch_of,
        epoch_length,
        presorted,
        row_type,
        recovery_config,
        deliver=False,
        arrow=kind == "frame",
    )
    output_schema = None
    if kind == "frame":
        if schema is None:
            schema = _sample_schema(
                spark, flow, source, rdd, epoch_of, epoch_length, presorted, row_type
            )
        output_schema = frame_schema(spark, schema, epoch_column)
    if isinstance(rdd, BarrierStage):
        encode: Callable[[list[Any]], Any]
        if row_type == "arrow":
            encode = RecordBatchWriter(output_schema, epoch_column)
        else:
            encode = _FrameEncoder(BatchWriter(output_schema), epoch_column)
        rdd = dataclasses.replace(rdd, schema=output_schema, encode=encode)
    with contextlib.ExitStack() as stack:
        service = None
        if recovery_config is not None:
            partitions = rdd.partitions if isinstance(rdd, BarrierStage) else rdd.getNumPartitions()
            service = stack.enter_context(StoreService(recovery_config, partitions))
        result = run_streaming(
            sc,
            rdd,
            program,
            name=flow_name(flow),
            collect=kind == "list",
            timeout=timeout,
            attempts=attempts,
            serializer=serializer,
            connect_timeout=connect_timeout,
            service=service,
        )
    if output_schema is None or isinstance(rdd, BarrierStage):
        return result
    rows = result.mapPartitions(lambda pairs: flow_rows(pairs, epoch_column))
    return session_of(spark).createDataFrame(rows, output_schema)


class _FrameEncoder:
    """A task's ``(epoch, item)`` pairs as one ``RecordBatch`` of the result's rows."""

    def __init__(self, writer: BatchWriter, epoch_column: str | None) -> None:
        self.writer = writer
        self.epoch_column = epoch_column

    def __call__(self, pairs: list[Any]) -> Any:
        """The batch of ``flow_rows(pairs)``."""
        return self.writer(list(flow_rows(pairs, self.epoch_column)))


def _sample_schema(
    spark: Any,
    flow: Dataflow,
    source: Any,
    prepared: Any,
    epoch_of: Callable[[Any], int] | None,
    epoch_length: float | datetime.timedelta | None,
    presorted: bool,
    row_type: str,
) -> Any:
    """The items' ``StructType``, inferred from the flow's output over a sample of ``source``."""
    if source is None or isinstance(source, InputConfig):
        raise ConfigError(
            "output='frame' without a schema infers it from a sample of an RDD or DataFrame "
            "source; with an input config, pass schema= (the items' columns)"
        )
    # the sample is the first rows of several partitions, one after the other: sorted here
    epochs = Epochs.of(epoch_of, epoch_length, presorted=False)
    if row_type == "arrow":
        reader: Reader | None = None
    elif isinstance(prepared, BarrierStage):
        reader = BatchReader(prepared.source.schema, row_type)
    else:
        reader = row_reader(source, row_type)
    fed = _spark_inputs(flow)
    spark_input = fed[0] if not flow.has_chain and len(fed) == 1 else None
    program = _records_program(
        flow, epochs, reader, None, spark_input=spark_input, arrow=row_type == "arrow"
    )
    pairs = sample_records(program, source)
    items = [item for _, item in pairs]
    if items and all(map(is_record_batch, items)):
        # the flow's record batches: their own Arrow schema, as Spark reads it
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(items[0].schema)
    struct, _ = infer_schema(session_of(spark), items, "run_flow()")
    return struct


#: Stateless graph operators whose side effects must not run again at every action.
_SIDE_EFFECTS = frozenset({"inspect", "inspect_debug", "raises"})


def _gangless_input(
    flow: Dataflow,
    source: Any,
    kind: str,
    row_type: str,
    recovery_config: RecoveryConfig | None,
) -> str | None:
    """The SparkInput step of an Arrow flow that needs no gang, or ``None``.

    That is a stream graph of one SparkInput, stateless steps and
    ``CaptureSink`` outputs only, fed a DataFrame's record batches, with a
    DataFrame result and no recovery: its workers would never exchange a
    record, so each task can run one worker of its own.
    """
    if kind != "frame" or row_type != "arrow" or recovery_config is not None:
        return None
    if not is_frame(source) or flow.has_chain:
        return None
    fed = _spark_inputs(flow)
    if len(fed) != 1:
        return None
    for step in flow.steps:
        if step.operator == "input":
            if step.step_id != fed[0]:
                return None
        elif step.operator == "output":
            if not isinstance(step.config, CaptureSink):
                return None
        elif not isinstance(step.options, StatelessSpec) or step.operator in _SIDE_EFFECTS:
            return None
    return fed[0]


def _gangless_frame(
    spark: Any,
    flow: Dataflow,
    source: Any,
    spark_input: str,
    workers: int | None,
    epoch_of: Callable[[Any], int] | None,
    epoch_length: float | datetime.timedelta | None,
    presorted: bool,
    schema: Any,
    epoch_column: str | None,
) -> Any:
    """``frame.mapInArrow(task, schema)``: each task runs the flow on one worker of its own."""
    frame, _ = as_frame(source, workers)
    memory = sort_memory_mb(spark_context(spark), epoch_of, presorted)
    epochs = Epochs.of(epoch_of, epoch_length, presorted=presorted, sort_memory_mb=memory)
    if schema is None:
        schema = _sample_schema(
            spark, flow, source, None, epoch_of, epoch_length, presorted, "arrow"
        )
    output_schema = frame_schema(spark, schema, epoch_column)
    program = _records_program(flow, epochs, None, None, spark_input=spark_input, arrow=True)
    task = _LocalFlowTask(program, RecordBatchWriter(output_schema, epoch_column))
    return frame.mapInArrow(task, output_schema)


#: Encoded output batches a :class:`_LocalFlowTask` holds before its worker waits.
LOCAL_BATCHES = 8
#: Seconds between a :class:`_LocalFlowTask`'s checks of a stop or its worker's end.
LOCAL_POLL = 0.05


class _LocalFlowTask:
    """A ``mapInArrow`` task running a flow on one worker of its own, its output streamed.

    The worker runs in a thread of the task (reading the task's record
    batches, which is what the barrier tasks do too); each record batch
    it captures is encoded there and handed to the task through a queue of
    :data:`LOCAL_BATCHES`, so the task never holds its whole output.  A
    failure of the worker is raised by the task; a task that stops reading
    (Spark's ``limit``) stops the worker.  Every wait is bounded.
    """

    def __init__(self, program: StreamProgram, encode: Callable[[list[Any]], Any]) -> None:
        self.program = program
        self.encode = encode

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        """The encoded record batches of the flow's output over ``batches``."""
        import timelypy

        out: queue.Queue[Any] = queue.Queue(LOCAL_BATCHES)
        stop = threading.Event()
        end = object()

        def put(item: Any) -> None:
            while True:
                try:
                    out.put(item, timeout=LOCAL_POLL)
                    return
                except queue.Full:
                    if stop.is_set():
                        raise TaskCancelled("the Spark task stopped reading its output") from None

        def emit(pairs: list[Any]) -> None:
            if pairs:
                put(self.encode(pairs))

        def body() -> None:
            try:
                records = iter(batches)
                context = TaskContext(0, stop, None)  # type: ignore[arg-type]
                timelypy.execute(None, lambda worker: self.program(worker, records, emit, context))
                put(end)
            except BaseException as exc:
                with contextlib.suppress(TaskCancelled):
                    put(exc)

        thread = threading.Thread(target=body, name="timelypy-local-flow", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    item = out.get(timeout=LOCAL_POLL)
                except queue.Empty:
                    if not thread.is_alive() and out.empty():
                        raise ClusterError(
                            "the flow's worker thread ended without a word"
                        ) from None
                    continue
                if item is end:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join(CANCEL_JOIN_SECONDS)


def flow_name(flow: Dataflow) -> str:
    """A flow's name in the Spark UI: its first and last step IDs and its length."""
    steps = flow.steps
    if not steps:
        return "flow (empty)"
    if len(steps) == 1:
        return f"flow {steps[0].step_id}"
    return f"flow {steps[0].step_id}..{steps[-1].step_id} ({len(steps)} steps)"


def iter_flow(
    spark: Any,
    flow: Dataflow,
    source: Any = None,
    workers: int | None = None,
    *,
    epoch_of: Callable[[Any], int] | None = None,
    epoch_length: float | datetime.timedelta | None = None,
    presorted: bool = False,
    row_type: str = "tuple",
    timeout: float | None = None,
    serializer: str | None = None,
    connect_timeout: float | None = None,
) -> Iterator[tuple[int, list[Any]]]:
    """Run ``flow`` on Spark; yield ``(epoch, items)`` on the driver as each epoch completes.

    Like :func:`run_flow` (the same ``source`` kinds and keywords), except
    that the items its ``capture()`` steps see travel from the tasks to the
    driver while the flow runs, and each epoch is yielded, in epoch order,
    once every worker's frontier has passed it -- so a long or unbounded
    source (an input config whose readers keep going, epochs by the clock)
    gives results as it goes, not when the Spark job ends.  ``items`` are
    the epoch's items from every worker, in no particular order (an epoch
    with no items is not yielded).  Leaving the loop early cancels the run.
    A failed run raises when the iterator reaches the failure; there are no
    retries (use :func:`run_flow` with ``attempts`` and recovery for those).
    """
    if not isinstance(flow, Dataflow):
        raise FlowError(f"iter_flow needs a timelypy.flow.Dataflow, got {flow!r}")
    if row_type == "arrow":
        raise ConfigError(
            "row_type='arrow' feeds a DataFrame's Arrow batches through run_flow with a "
            "DataFrame result; iter_flow reads rows (row_type 'tuple', 'dict' or 'row')"
        )
    sc = spark_context(spark)
    rdd, program = _flow_input(
        sc,
        flow,
        source,
        workers,
        epoch_of,
        epoch_length,
        presorted,
        row_type,
        None,
        deliver=True,
    )
    collector = EpochCollector(rdd.getNumPartitions())
    outcome: dict[str, Any] = {}

    def job() -> None:
        try:
            run_streaming(
                sc,
                rdd,
                program,
                name=flow_name(flow),
                collect=True,
                timeout=timeout,
                attempts=0,
                serializer=serializer,
                connect_timeout=connect_timeout,
                service=collector,
            )
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            collector.finished()

    thread = threading.Thread(target=job, name="timelypy-spark-iter-flow", daemon=True)
    thread.start()
    finished = False
    try:
        yield from collector.epochs()
        thread.join()
        finished = True
    finally:
        if not finished:  # the caller stopped early, or the run failed
            if collector.job_group:
                sc.cancelJobGroup(collector.job_group)
            thread.join(CANCEL_JOIN_SECONDS)
    if "error" in outcome:
        raise outcome["error"]
    if collector.missing:
        raise ClusterError(
            f"the Spark job of iter_flow ended, but the end of worker(s) {collector.missing} "
            "never reached the driver: their last epochs may be missing"
        )


#: Seconds :func:`iter_flow` waits for its run to end once the caller stopped reading.
CANCEL_JOIN_SECONDS = 30.0


class EpochCollector(AttemptService):
    """The driver's side of :func:`iter_flow`: items and frontiers from the tasks, by epoch.

    The driver's rendezvous loop (another thread) hands it every task
    message; :meth:`epochs` (the caller's thread) yields an epoch once every
    task has reported a frontier past it, or finished.  Each task sends its
    items before the frontier that passes them, on one channel, so an epoch
    is complete when it is yielded.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.missing: list[int] = []
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()

    def handle(self, rendezvous: Any, identity: bytes, message: Any) -> bool:
        """Queue the task's items, frontier or end for :meth:`epochs`."""
        if message.kind == "epoch.items":
            epoch, items = message.body
            self._events.put(("items", message.index, epoch, items))
        elif message.kind == "epoch.frontier":
            self._events.put(("frontier", message.index, message.body))
        elif message.kind == "done":
            self._events.put(("frontier", message.index, None))
        else:
            return False
        return True

    def finished(self) -> None:
        """The run ended (the driver's loop will send nothing more)."""
        self._events.put(("end",))

    def epochs(self) -> Iterator[tuple[int, list[Any]]]:
        """Yield ``(epoch, items)`` as epochs complete; return when the run ends."""
        pending: dict[int, list[Any]] = {}
        frontiers: dict[int, float] = dict.fromkeys(range(self.workers), 0)
        while True:
            event = self._events.get()
            if event[0] == "end":
                break
            if event[0] == "items":
                _, _, epoch, items = event
                pending.setdefault(epoch, []).extend(items)
                continue
            _, index, first = event
            frontiers[index] = float("inf") if first is None else first
            low = min(frontiers.values())
            for epoch in sorted(e for e in pending if e < low):
                yield epoch, pending.pop(epoch)
        missing = sorted(index for index, f in frontiers.items() if f != float("inf"))
        if not missing:
            for epoch in sorted(pending):
                yield epoch, pending.pop(epoch)
        #: The tasks whose end never reached the driver (their last items may be lost).
        self.missing = missing


def _flow_input(
    sc: Any,
    flow: Dataflow,
    source: Any,
    workers: int | None,
    epoch_of: Callable[[Any], int] | None,
    epoch_length: float | datetime.timedelta | None,
    presorted: bool,
    row_type: str,
    recovery_config: RecoveryConfig | None,
    *,
    deliver: bool,
    arrow: bool = False,
) -> tuple[Any, StreamProgram]:
    """The RDD the barrier stage runs over and the tasks' program, for ``source``.

    With ``arrow`` and a DataFrame ``source``, a :class:`BarrierStage` over
    the DataFrame (its output schema still to be set) instead of the RDD.
    """
    if row_type == "arrow" and not (arrow and is_frame(source)):
        raise ConfigError(
            "row_type='arrow' makes the flow's items a DataFrame's Arrow batches and writes "
            "the record batches it outputs as a DataFrame: give run_flow a DataFrame source "
            "and a DataFrame result (schema=... or output='frame')"
        )
    own = flow.input_config
    fed = _spark_inputs(flow)
    if not flow.has_chain and source is None:
        if fed:
            raise FlowError(
                f"input step {fed[0]!r} reads a SparkInput: pass run_flow the RDD or "
                "DataFrame that feeds it (source=...)"
            )
        if epoch_of is not None or epoch_length is not None or presorted:
            raise ConfigError(
                "epoch_of, epoch_length and presorted apply to RDD and DataFrame records; a "
                "stream-graph source's items get the epochs of its epoch_interval"
            )
        workers = check_workers(default_workers(sc, workers))
        return sc.parallelize([], workers), _config_program(flow, None, recovery_config, deliver)
    spark_input = None
    if not flow.has_chain and isinstance(source, dict):
        # several SparkInputs, each fed its own RDD or DataFrame
        if epoch_of is not None or epoch_length is not None or presorted:
            raise ConfigError(
                "epoch_of, epoch_length and presorted apply to one source; with a dict of "
                "sources every record is in epoch 0"
            )
        return _several_inputs(sc, flow, source, fed, workers, row_type, recovery_config, deliver)
    if not flow.has_chain:
        if isinstance(source, InputConfig):
            raise FlowError(
                "an input config feeds an epoch chain; this flow's inputs are op.input steps: "
                "give one of them a SparkInput() to read an RDD or DataFrame"
            )
        if len(fed) != 1:
            raise FlowError(
                "an RDD or DataFrame source feeds the flow's one op.input step whose source is "
                f"SparkInput(); this flow has {len(fed)} ({fed}): pass a dict of sources by "
                "step name to feed several"
            )
        spark_input = fed[0]
    elif fed:
        raise FlowError(
            f"input step {fed[0]!r} reads a SparkInput, but the flow's chain takes run_flow's "
            "source: run one or the other"
        )
    if source is None or isinstance(source, InputConfig):
        if source is None and own is None:
            raise FlowError(
                "the flow has no input: pass a source (an RDD, a DataFrame or an input config) "
                "or start the flow with flow.input(step_id, input_config)"
            )
        if source is not None and own is not None:
            raise FlowError("the flow already has an input step; run it with source=None")
        if epoch_of is not None or epoch_length is not None or presorted:
            raise ConfigError(
                "epoch_of, epoch_length and presorted apply to RDD and DataFrame records; an "
                "input config's readers give their epochs with AdvanceTo"
            )
        config = source if source is not None else own
        assert config is not None
        workers = check_workers(default_workers(sc, workers))
        rdd = sc.parallelize([], workers)
        program = _config_program(flow, config, recovery_config, deliver)
    else:
        if own is not None:
            raise FlowError(
                "the flow already has an input step; run it with source=None, or build it "
                "without flow.input to read an RDD or a DataFrame"
            )
        epochs = Epochs.of(
            epoch_of,
            epoch_length,
            presorted=presorted,
            sort_memory_mb=sort_memory_mb(sc, epoch_of, presorted),
        )
        if arrow and is_frame(source):
            frame, partitions = as_frame(source, workers)
            native = row_type == "arrow"
            reader: Reader | None = None if native else BatchReader(frame.schema, row_type)
            program = _records_program(
                flow, epochs, reader, recovery_config, deliver, spark_input, arrow=native
            )
            return BarrierStage(frame, partitions), program
        reader = row_reader(source, row_type)
        rdd = as_rdd(source, workers, "run_flow()")
        program = _records_program(flow, epochs, reader, recovery_config, deliver, spark_input)
    return rdd, program


def frame_schema(spark: Any, schema: Any, epoch_column: str | None) -> Any:
    """The result DataFrame's ``StructType``: ``epoch_column`` (long), then ``schema``'s fields.

    ``schema`` is a DDL string or a ``StructType`` (an atomic type such as
    ``"string"`` is one column, ``value``).
    """
    from pyspark.sql.types import LongType, StructField, StructType

    if isinstance(schema, StructType):
        struct = schema
    elif isinstance(schema, str):
        struct = struct_of(session_of(spark), schema)
    else:
        struct = session_of(spark).createDataFrame([], schema).schema
    if epoch_column is None:
        return struct
    if epoch_column in struct.fieldNames():
        raise ConfigError(
            f"the schema already has a column {epoch_column!r}: name the epoch column "
            "otherwise (epoch_column=...) or leave it out (epoch_column=None)"
        )
    return StructType([StructField(epoch_column, LongType(), False), *struct.fields])


def flow_rows(pairs: Iterable[tuple[int, Any]], epoch_column: str | None) -> Iterator[Any]:
    """DataFrame rows for ``(epoch, item)`` pairs: ``(epoch, *item)``, or the item alone.

    A tuple or list item gives its elements, a dict item its fields by name,
    anything else one column; ``epoch_column=None`` leaves the epoch out.

    >>> list(flow_rows([(0, ("a", 2)), (1, 7)], "epoch"))
    [(0, 'a', 2), (1, 7)]
    >>> list(flow_rows([(3, {"word": "a"})], "epoch"))
    [{'epoch': 3, 'word': 'a'}]
    >>> list(flow_rows([(3, ("a", 2)), (4, 7)], None))
    [('a', 2), (7,)]
    """
    for epoch, item in pairs:
        if isinstance(item, (tuple, list)):
            yield tuple(item) if epoch_column is None else (epoch, *item)
        elif isinstance(item, dict):
            yield item if epoch_column is None else {epoch_column: epoch, **item}
        else:
            yield (item,) if epoch_column is None else (epoch, item)


def _run_task(
    worker: Any,
    flow: Dataflow,
    config: InputConfig | None,
    emit: EmitRecords,
    task: TaskContext,
    recovery_config: RecoveryConfig | None,
    deliver: bool = False,
    sources: dict[str, Any] | None = None,
) -> None:
    """Run the flow on this task's worker, its captured items emitted as ``(epoch, item)``.

    With recovery, the task joins the execution its driver began: it first
    re-emits what earlier executions of this call captured before the
    resume epoch, and logs what it captures itself.  With ``deliver`` the
    items go to the driver over the task's channel instead, with the flow's
    frontier whenever it moves (:func:`iter_flow`).
    """
    attached = None
    log_output: Callable[[int, list[Any]], None] | None = None
    if recovery_config is not None:
        store = RemoteStore(task.channel, worker.index)
        attached = AttachedExecution(store, store.execution, recovery_config.commit_interval)
        for pairs in store.replay(worker.peers):
            emit(pairs)
        log_output = store.remote_writer.log_output

    def collect(epoch: int, items: list[Any]) -> None:
        if deliver:
            task.channel.send("epoch.items", (epoch, items))
            return
        pairs = [(epoch, item) for item in items]
        if log_output is not None:
            log_output(epoch, pairs)
        if items and is_record_batch(items[0]):
            for pair in pairs:  # each record batch its own piece of the output
                emit([pair])
            return
        emit(pairs)

    def report_frontier(runner: FlowWorker) -> None:
        last: list[Any] = [None]

        def report() -> None:
            frontier = runner.probe.frontier()
            first = min(frontier) if frontier else None
            if first != last[0]:
                last[0] = first
                task.channel.send("epoch.frontier", first)
            if first is not None:
                worker.activate_after(report, FRONTIER_SECONDS)

        report()

    flow_program(
        flow,
        config,
        collect,
        collect_on=None,
        cancelled=task.cancelled,
        recovery_config=attached,
        on_built=report_frontier if deliver else None,
        sources=sources,
    )(worker)


def _config_program(
    flow: Dataflow,
    config: InputConfig | None,
    recovery_config: RecoveryConfig | None,
    deliver: bool = False,
) -> StreamProgram:
    """Each task a worker of the flow, reading ``config`` (primaries agreed among the tasks)."""

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitRecords, task: TaskContext
    ) -> None:
        _run_task(worker, flow, config, emit, task, recovery_config, deliver)

    return program


def _records_program(
    flow: Dataflow,
    epochs: Epochs,
    reader: Reader | None,
    recovery_config: RecoveryConfig | None,
    deliver: bool = False,
    spark_input: str | None = None,
    arrow: bool = False,
) -> StreamProgram:
    """Each task a worker of the flow, reading its own partition at the records' epochs.

    The partition feeds the flow's chain, or the input step ``spark_input``
    of a stream graph.  With ``arrow`` its records are record batches, each
    sent on its own (one batch of the flow per record batch).
    """
    chunk = 1 if arrow else BATCH

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitRecords, task: TaskContext
    ) -> None:
        records = partition if reader is None else reader(partition)

        def input_builder(worker_index: int, worker_count: int, resume_epoch: int) -> Iterator[Any]:
            if epochs.single:
                return _one_epoch(records, resume_epoch, chunk)
            where = f"the partition of worker {worker_index}"
            return epochs_from_pairs(epochs.pairs(records, where), resume_epoch)

        config = ManualInputConfig(input_builder)
        if spark_input is None:
            _run_task(worker, flow, config, emit, task, recovery_config, deliver)
        else:
            _run_task(
                worker, flow, None, emit, task, recovery_config, deliver, {spark_input: config}
            )

    return program


class SparkInput(DynamicSource[Any]):
    """The source of an ``op.input`` step that ``run_flow``'s RDD or DataFrame feeds.

    Each Spark task's partition is read by its worker, at the epochs
    ``run_flow``'s ``epoch_of``/``epoch_length`` give (as for an epoch chain).

    >>> # flow = Dataflow("f"); lines = op.input("lines", flow, SparkInput())
    >>> # ...; op.output("out", counts, CaptureSink())
    >>> # run_flow(spark, flow, rdd, workers=2).collect()
    """

    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSourcePartition[Any]:
        """Refused: only ``timelypy_spark.run_flow`` and ``iter_flow`` feed a SparkInput."""
        raise FlowError(
            f"input step {step_id!r} reads a SparkInput, which only timelypy_spark.run_flow "
            "and iter_flow feed (with an RDD or DataFrame)"
        )


def _several_inputs(
    sc: Any,
    flow: Dataflow,
    sources: dict[str, Any],
    fed: list[str],
    workers: int | None,
    row_type: str,
    recovery_config: RecoveryConfig | None,
    deliver: bool,
) -> tuple[Any, StreamProgram]:
    """Several SparkInputs: one RDD of ``(input, record)``, split again in each task.

    ``sources`` maps each SparkInput step's name (or full step ID) to its RDD
    or DataFrame. Their records are tagged with their input's number and
    shuffled into ``workers`` partitions together; a task hands each
    input's records to that input's reader (holding the others' until their
    reader asks), every record in epoch 0.
    """
    by_name = {step_id.rsplit(".", 1)[-1]: step_id for step_id in fed}
    steps: list[str] = []
    tagged = []
    for name, source in sources.items():
        step_id = name if name in fed else by_name.get(name)
        if step_id is None:
            raise FlowError(
                f"run_flow's sources name {name!r}, which is no SparkInput step of the flow "
                f"(those are {fed})"
            )
        rdd = as_rdd(source, None, "run_flow()")
        convert = row_reader(source, row_type)
        if convert is not None:
            rdd = rdd.mapPartitions(convert)
        tagged.append(rdd.map(functools.partial(_tag, len(steps))))
        steps.append(step_id)
    missing = sorted(set(fed) - set(steps))
    if missing:
        raise FlowError(f"no source was given for the SparkInput step(s) {missing}")
    union = sc.union(tagged)
    count = check_workers(default_workers(sc, workers))
    rdd = union.repartition(count)

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitRecords, task: TaskContext
    ) -> None:
        demux = _Demux(partition, len(steps))
        configs = {
            step_id: ManualInputConfig(functools.partial(_demuxed, demux, i))
            for i, step_id in enumerate(steps)
        }
        _run_task(worker, flow, None, emit, task, recovery_config, deliver, configs)

    return rdd, program


def _tag(index: int, record: Any) -> tuple[int, Any]:
    return index, record


class _Demux:
    """One partition of ``(input, record)``, read as one stream of records per input."""

    def __init__(self, records: Iterator[Any], inputs: int) -> None:
        self._records = iter(records)
        self._held: list[deque[Any]] = [deque() for _ in range(inputs)]
        self._ended = False

    def stream(self, index: int) -> Iterator[Any]:
        """Input ``index``'s records, in the partition's order."""
        held = self._held[index]
        while True:
            while held:
                yield held.popleft()
            if self._ended:
                return
            entry = next(self._records, None)
            if entry is None:
                self._ended = True
                continue
            tag, record = entry
            if tag == index:
                yield record
            else:
                self._held[tag].append(record)


def _demuxed(demux: _Demux, index: int, worker_index: int, worker_count: int, resume: int) -> Any:
    return _one_epoch(demux.stream(index), resume)


def _spark_inputs(flow: Dataflow) -> list[str]:
    """The step IDs of the flow's input steps whose source is a :class:`SparkInput`."""
    return [
        step.step_id
        for step in flow.steps
        if step.form == "graph" and step.operator == "input" and isinstance(step.config, SparkInput)
    ]


def _one_epoch(records: Iterator[Any], resume_epoch: int, size: int = BATCH) -> Iterator[Any]:
    """Every record at epoch 0, read in ``EmitBatch`` chunks (nothing if resuming past 0).

    One event per ``size`` (:data:`~timelypy_spark.io.BATCH`) records,
    sliced in C, rather than an ``(epoch, record)`` pair and an ``Emit``
    per record.
    """
    if resume_epoch > 0:
        return
    yield flow_inputs.AdvanceTo(0)
    while chunk := list(islice(records, size)):
        yield flow_inputs.EmitBatch(chunk)
