"""Spark data in and out: ``run(spark, build, source)``.

``source`` is an RDD or a DataFrame.  Each of its partitions is read by one
worker as that worker's input stream; ``build(scope, stream)`` builds the
dataflow and returns the output stream, whose records come back as an RDD,
as a DataFrame (given a ``schema``, or ``output="frame"`` to infer one), or
as a list (``collect=True``).

Epochs (:mod:`timelypy_spark.epochs`): by default a worker's whole partition
is one epoch (time 0), so ``reduce``-style operators see all of it at once.
``epoch_of=f`` uses ``f(record)`` (each partition is sorted by it first,
unless ``presorted=True``); ``epoch_length=s`` starts a new epoch every
``s`` seconds of clock time, the same instants on every worker.  There is no
"every N records" option: a count per worker would make epoch k hold
different data on each worker.

DataFrame rows enter as plain tuples (``tuple(row)``), which travel between
workers with the default codec; ``row_type="dict"`` gives ``row.asDict()``.

**DataFrame in, DataFrame out: Arrow.**  When the source is a DataFrame and
the result is one too, the barrier stage is ``mapInArrow(...,
barrier=True)``: rows reach the tasks as Arrow batches and leave them as
Arrow batches (:mod:`timelypy_spark.arrow`), the same Python values as the
row path's on the way in, the output schema's types on the way out.  Any
other combination reads ``df.rdd`` or the RDD row by row, as before.

**Output schema.**  ``schema=`` (a DDL string, a ``StructType``, or one
atomic type whose records are bare values) is used as given.
``output="frame"`` without it infers one: the first :data:`SAMPLE_ROWS`
rows of the source run through ``build`` on one in-process worker on the
driver, and Spark infers the schema of that output
(``spark.createDataFrame(records).schema``); an empty sample, or values
Spark cannot type, raise a :class:`~timelypy.errors.ConfigError` that says
to pass ``schema=``.  The sample run calls the user's functions on the
driver, once more, over those rows.

Each worker's output records leave its task while it runs (a bounded queue
between the worker and Spark's output, :mod:`timelypy_spark.task`), so no
worker holds its whole output.  The workers run once, in a barrier stage,
before ``run`` returns.  Their output then crosses a shuffle, a batch at
a time, into an ordinary RDD (:func:`materialize`): Spark refuses ``take``,
``first`` or ``show`` on anything that still chains to a barrier stage, and
the shuffle's files keep the output, so later actions never run the
workers again.  Nothing is cached (``persist()`` the result to keep it in
memory).  A DataFrame result of a DataFrame source (Arrow) is cached while
the returned DataFrame lives (:func:`materialize_frame`).  ``collect=True``
skips all that and returns the records in a list, from the same single job.

>>> # result = timelypy_spark.run(spark, lambda scope, lines: lines.flat_map(str.split), rdd)
"""

from __future__ import annotations

import dataclasses
import datetime
import pickle
import threading
import weakref
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from timelypy.errors import ConfigError
from timelypy_spark._compat import java_dataset, run_map_stage, shuffle_pickled_batches
from timelypy_spark.arrow import BatchReader, BatchWriter, infer_schema, output_schema
from timelypy_spark.cluster import spark_context
from timelypy_spark.driver import AttemptService, BarrierStage, run_barrier
from timelypy_spark.epochs import DEFAULT_SORT_MEMORY_MB, Epochs, memory_mb
from timelypy_spark.task import EmitRecords, StreamProgram, TaskContext

__all__ = [
    "run",
    "BATCH",
    "SAMPLE_ROWS",
    "as_rdd",
    "as_frame",
    "is_frame",
    "output_kind",
    "check_workers",
    "row_converter",
    "row_reader",
    "sample_records",
    "materialize",
    "materialize_frame",
    "run_streaming",
    "session_of",
]

#: Records per batch fed into the dataflow.
BATCH = 4096
#: Rows of the source that ``output="frame"`` runs on the driver to infer the schema.
SAMPLE_ROWS = 1000

#: A function from a task's partition iterator to the records its worker reads.
Reader = Callable[[Iterator[Any]], Iterator[Any]]


def run(
    spark: Any,
    build: Callable[[Any, Any], Any],
    source: Any,
    *,
    workers: int | None = None,
    schema: Any = None,
    output: str | None = None,
    epoch_of: Callable[[Any], int] | None = None,
    epoch_length: float | datetime.timedelta | None = None,
    presorted: bool = False,
    row_type: str = "tuple",
    timeout: float | None = None,
    attempts: int | None = None,
    serializer: str | None = None,
    connect_timeout: float | None = None,
    collect: bool = False,
    epoch_size: object = None,
) -> Any:
    """Run ``build`` over ``source``'s partitions; return the output as an RDD or DataFrame.

    ``workers`` defaults to the number of partitions of ``source`` (it is
    repartitioned when they differ).  Epochs come from ``epoch_of(record)``
    or from the clock (``epoch_length`` seconds), or the whole input is
    epoch 0 (:mod:`timelypy_spark.epochs`); ``epoch_size``, which counted
    records per worker, was removed and raises :class:`ConfigError`.

    The result (``output``): ``"rdd"`` (the default without a ``schema``),
    ``"frame"`` (the default with one; without one the schema is inferred
    from a sample, see the module documentation) or ``"list"`` (the same as
    ``collect=True``: the records on the driver, from the same single Spark
    job).  A DataFrame source with a DataFrame result runs through Arrow
    batches.  ``timeout``, ``attempts``, ``serializer`` and
    ``connect_timeout`` are as for :func:`timelypy_spark.execute` (read
    from ``spark.timelypy.*`` when left out).
    """
    sc = spark_context(spark)
    epochs = Epochs.of(
        epoch_of,
        epoch_length,
        presorted=presorted,
        sort_memory_mb=sort_memory_mb(sc, epoch_of, presorted),
        epoch_size=epoch_size,
    )
    kind = output_kind(output, schema, collect)
    name = getattr(build, "__name__", type(build).__name__)
    options: dict[str, Any] = dict(
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
        name=name,
    )
    if kind == "frame" and is_frame(source):
        session = session_of(spark)
        frame, partitions = as_frame(source, workers)
        reader: Reader = BatchReader(frame.schema, row_type)
        program = _program(build, epochs, reader)
        if schema is None:
            struct, atomic = infer_schema(session, sample_records(program, source))
        else:
            struct, atomic = output_schema(session, schema)
        stage = BarrierStage.of_frame(frame, struct, partitions, BatchWriter(struct, atomic))
        return run_streaming(sc, stage, program, collect=False, **options)
    row_read = row_reader(source, row_type)
    rdd = as_rdd(source, workers)
    program = _program(build, epochs, row_read)
    if kind == "frame" and schema is None:
        struct, atomic = infer_schema(session_of(spark), sample_records(program, source))
        schema = struct.fields[0].dataType if atomic else struct  # bare values: one column
    result = run_streaming(sc, rdd, program, collect=kind == "list", **options)
    if kind != "frame":
        return result
    return session_of(spark).createDataFrame(result, schema)


def sort_memory_mb(sc: Any, epoch_of: Any, presorted: bool) -> int:
    """The memory a task may sort its partition in: read only when a sort will happen.

    ``sc.getConf()`` copies the whole configuration through py4j, one call
    per entry (about 0.1 s, more on a busy machine), so it is read only
    when records have an ``epoch_of`` and are not ``presorted``.
    """
    if epoch_of is None or presorted:
        return DEFAULT_SORT_MEMORY_MB
    return memory_mb(sc.getConf())


def output_kind(output: str | None, schema: Any, collect: bool) -> str:
    """``"rdd"``, ``"frame"`` or ``"list"``: what ``output``, ``schema`` and ``collect`` ask for.

    >>> output_kind(None, None, False), output_kind(None, "a int", False)
    ('rdd', 'frame')
    >>> output_kind("frame", None, False), output_kind(None, None, True)
    ('frame', 'list')
    """
    if output not in (None, "rdd", "frame", "list"):
        raise ConfigError(f"output must be 'rdd', 'frame' or 'list', not {output!r}")
    if collect and output not in (None, "list"):
        raise ConfigError(f"collect=True returns a list; it cannot also make output={output!r}")
    if collect or output == "list":
        if schema is not None:
            raise ConfigError("collect=True returns a list; it cannot also make a DataFrame")
        return "list"
    if output == "rdd" and schema is not None:
        raise ConfigError("a schema makes a DataFrame: pass output='frame' (or no output)")
    if output is None:
        return "rdd" if schema is None else "frame"
    return output


def sample_records(program: StreamProgram, source: Any) -> list[Any]:
    """The output of ``program`` over the first :data:`SAMPLE_ROWS` rows of ``source``.

    One in-process timelypy worker on the driver (:func:`timelypy.execute`)
    runs the same program the tasks run, over a DataFrame's first rows as
    Arrow batches (``limit().toArrow()``) or an RDD's (``take``): pass the
    source as given, not repartitioned, so that only those rows are read.
    """
    import timelypy

    if is_frame(source):
        partition: list[Any] = source.limit(SAMPLE_ROWS).toArrow().to_batches()
    else:
        partition = source.take(SAMPLE_ROWS)
    records: list[Any] = []
    stop = threading.Event()

    def sample(worker: Any) -> None:
        program(worker, iter(partition), records.extend, TaskContext(0, stop, None))  # type: ignore[arg-type]

    timelypy.execute(None, sample)
    return records


def run_streaming(
    sc: Any,
    rdd: Any,
    program: StreamProgram,
    *,
    collect: bool,
    timeout: float | None,
    attempts: int | None,
    serializer: str | None,
    connect_timeout: float | None,
    service: AttemptService | None = None,
    name: str = "program",
) -> Any:
    """Run ``program`` as one barrier task per partition of ``rdd``; its output records.

    ``rdd`` is an RDD or a :class:`~timelypy_spark.driver.BarrierStage`
    (a ``mapInArrow`` stage makes a DataFrame).  The tasks stream their
    output records back as they are emitted; the result is the driver's
    list (``collect``), or an RDD (never cached: :func:`materialize`) or
    DataFrame (:func:`materialize_frame`) of them.  A ``service`` serves
    the tasks from the driver (see :func:`run_barrier`).
    """
    stage = rdd if isinstance(rdd, BarrierStage) else BarrierStage.of_rdd(rdd)
    if collect:
        action: Callable[[Any], Any] = _collect
    elif stage.schema is None:
        # each task yields its output a pickled batch at a time: the shuffle then
        # handles one item per batch, never one per record, in Python
        stage = dataclasses.replace(stage, encode=_pickled_batch)
        action = materialize
    else:

        def action(frame: Any) -> Any:
            return materialize_frame(frame, stage.partitions)

    return run_barrier(
        sc,
        stage,
        None,
        stage.partitions,
        flatten=True,
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
        action=action,
        stream_program=program,
        service=service,
        name=name,
    )


def _collect(output: Any) -> Any:
    return output.collect()


def check_workers(workers: object) -> int:
    """``workers`` if it is a positive int, else a :class:`ConfigError`."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"workers must be a positive int, got {workers!r}")
    return workers


def as_rdd(source: Any, workers: int | None, what: str = "run()") -> Any:
    """``source`` (an RDD, or a DataFrame's rows) with ``workers`` partitions.

    ``workers`` defaults to ``source``'s partition count; with another
    number it is repartitioned.
    """
    if is_frame(source):
        rdd = source.rdd
    elif hasattr(source, "mapPartitions") and hasattr(source, "getNumPartitions"):
        rdd = source
    else:
        raise ConfigError(
            f"{what} needs an RDD or a DataFrame as its source, not {type(source).__name__}"
        )
    workers = check_workers(rdd.getNumPartitions() if workers is None else workers)
    if rdd.getNumPartitions() != workers:
        rdd = rdd.repartition(workers)
    return rdd


def as_frame(source: Any, workers: int | None) -> tuple[Any, int]:
    """A DataFrame ``source`` with ``workers`` partitions, and that number.

    ``workers`` defaults to ``source``'s partition count; with another
    number it is repartitioned.
    """
    partitions = source.rdd.getNumPartitions()
    workers = check_workers(partitions if workers is None else workers)
    if partitions != workers:
        source = source.repartition(workers)
    return source, workers


def is_frame(source: Any) -> bool:
    """Whether ``source`` is a DataFrame (rather than an RDD)."""
    return hasattr(source, "rdd") and hasattr(source, "schema")


def row_converter(source: Any, row_type: str) -> Callable[[Any], Any] | None:
    """How a DataFrame's rows enter the dataflow (``None``: as they are)."""
    if row_type not in ("tuple", "dict", "row"):
        raise ConfigError(f"row_type must be 'tuple', 'dict' or 'row', not {row_type!r}")
    if not is_frame(source) or row_type == "row":
        return None
    return tuple if row_type == "tuple" else _row_as_dict


def row_reader(source: Any, row_type: str) -> Reader | None:
    """The records a task reads from its RDD partition (``None``: the partition's own)."""
    convert = row_converter(source, row_type)
    if convert is None:
        return None
    return lambda partition: map(convert, partition)


def materialize_frame(frame: Any, partitions: int) -> Any:
    """A ``mapInArrow`` stage's DataFrame, computed once, cached while the result lives.

    A shuffle takes the output off the barrier stage (so ``show`` and
    ``take`` work), keeping each worker's output in the partition of the
    same number (``repartitionById`` by ``spark_partition_id()``, PySpark
    4.1 and later; before, a round-robin ``repartition``).  A DataFrame
    re-plans its shuffle at every action, so the result is cached
    (memory and disk) to keep later actions from running the workers again:
    the cache goes when the returned DataFrame is garbage collected, or
    ``unpersist()`` drops it earlier.  A failed run caches nothing.
    """
    if hasattr(frame, "repartitionById"):
        from pyspark.sql.functions import spark_partition_id

        output = frame.repartitionById(partitions, spark_partition_id())
    else:  # pragma: no cover - PySpark 3.5 and 4.0
        output = frame.repartition(partitions)
    from pyspark import StorageLevel

    output.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        _fill_cache(output)
    except BaseException:
        output.unpersist(blocking=False)
        raise
    # The JVM Dataset, not the Python DataFrame: the finalizer must not keep it alive.
    weakref.finalize(output, _unpersist, java_dataset(output))
    return output


def _fill_cache(frame: Any) -> None:
    """Compute a persisted DataFrame once, filling its cache: a write that writes nothing.

    ``frame.count()`` plans another query over the cache (a count per
    partition, an exchange, a final count: under adaptive execution a job
    more than the cache needs); Spark's ``noop`` sink runs ``frame``'s own
    plan to the end, scanning (and so building) the cache, with the
    session's settings like any action.
    """
    frame.write.format("noop").mode("overwrite").save()


def _unpersist(dataset: Any) -> None:
    try:
        dataset.unpersist(False)
    except Exception:  # the session has stopped: its cache went with it
        pass


def materialize(barrier_rdd: Any) -> Any:
    """The barrier stage's output as an ordinary RDD, its workers run once, nothing cached.

    ``barrier_rdd`` yields each task's output as pickled batches
    (:func:`_pickled_batch`, made in the worker's thread).  Spark refuses
    partial jobs (``take``, ``first``, ``show``) on a chain that holds a
    barrier stage, so the batches cross a shuffle, each kept in the
    partition of its worker's number
    (:func:`~timelypy_spark._compat.shuffle_pickled_batches`): the RDD
    returned reads the shuffle's files, an ordinary RDD whose later actions
    skip the barrier stage (Spark keeps a shuffle's files while an RDD that
    reads them is alive).  The workers run now, in one job that only writes
    the shuffle (Spark's ``submitMapStage``); the records are unpickled
    once, by whatever action the caller runs.  Nothing is cached:
    ``persist()`` it if you want it in memory.
    """
    result = shuffle_pickled_batches(barrier_rdd, barrier_rdd.getNumPartitions())
    run_map_stage(result)
    return result


def _pickled_batch(records: list[Any]) -> bytes:
    """A task's output batch as one pickled item (see :func:`materialize`)."""
    return pickle.dumps(records, pickle.HIGHEST_PROTOCOL)


def _same_partition(index: int) -> int:
    """Keep each worker's output in the partition of the same number."""
    return index


def session_of(spark: Any) -> Any:
    """The SparkSession of ``spark`` (a session, or a context whose session is made)."""
    if hasattr(spark, "createDataFrame"):
        return spark
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def _row_as_dict(row: Any) -> Any:
    """A DataFrame ``Row`` as a ``dict`` of its fields."""
    return row.asDict()


def _program(
    build: Callable[[Any, Any], Any],
    epochs: Epochs,
    reader: Reader | None,
) -> StreamProgram:
    """The per-worker program: feed the partition, emit the output stream's batches."""

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitRecords, task: TaskContext
    ) -> None:
        from timelypy import InputHandle, ProbeHandle

        handle: InputHandle[Any] = InputHandle()
        probe = ProbeHandle()

        def dataflow(scope: Any) -> None:
            result = build(scope, scope.input_from(handle))
            if result is None:
                raise ConfigError(
                    "the build function must return the output stream (its records become "
                    "the result); return stream.filter(lambda _: False) for no output"
                )
            result.inspect_batch(lambda time, records: emit(list(records))).probe_with(probe)

        worker.dataflow(dataflow)
        records = partition if reader is None else reader(partition)
        if epochs.single:
            while batch := list(islice(records, BATCH)):
                handle.send_batch(batch)
                worker.step()
        else:
            _feed_pairs(worker, handle, epochs.pairs(records, f"worker {worker.index}"))
        handle.close()
        while not probe.done():
            worker.step_or_park(0.01)

    return program


def _feed_pairs(worker: Any, handle: Any, pairs: Iterator[tuple[int, Any]]) -> None:
    """Send ``(epoch, record)`` pairs (epochs non-decreasing), advancing the handle."""
    batch: list[Any] = []
    current = 0
    for epoch, record in pairs:
        if epoch != current:
            if batch:
                handle.send_batch(batch)
                batch = []
            handle.advance_to(epoch)
            current = epoch
            worker.step()
        batch.append(record)
        if len(batch) >= BATCH:
            handle.send_batch(batch)
            batch = []
            worker.step()
    if batch:
        handle.send_batch(batch)
