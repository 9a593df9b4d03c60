"""Spark data in and out: ``run(spark, build, source)``.

``source`` is an RDD or a DataFrame.  Each of its partitions is read by one
worker as that worker's input stream; ``build(scope, stream)`` builds the
dataflow and returns the output stream, whose records come back as an RDD
(or as a DataFrame, given a ``schema``).

Epochs (:mod:`timelypy_spark.epochs`): by default a worker's whole partition
is one epoch (time 0), so ``reduce``-style operators see all of it at once.
``epoch_of=f`` uses ``f(record)`` (each partition is sorted by it first,
unless ``presorted=True``); ``epoch_length=s`` starts a new epoch every
``s`` seconds of clock time, the same instants on every worker.  There is no
"every N records" option: a count per worker would make epoch k hold
different data on each worker.

DataFrame rows enter as plain tuples (``tuple(row)``), which travel between
workers with the default codec; ``row_type="dict"`` gives ``row.asDict()``.

Each worker's output records leave its task while it runs (a bounded queue
between the worker and Spark's output, :mod:`timelypy_spark.task`), so no
worker holds its whole output.  The workers run once, in a barrier stage,
before ``run`` returns.  Their output then crosses a shuffle into an
ordinary, persisted RDD (memory and disk): Spark refuses ``take``,
``first`` or ``show`` on anything that still chains to a barrier stage, and
the shuffle files keep the output, so later actions never run the workers
again.  ``collect=True`` skips all that and returns the records in a list,
from the same single job.

>>> # result = timelypy_spark.run(spark, lambda scope, lines: lines.flat_map(str.split), rdd)
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from timelypy.errors import ConfigError
from timelypy_spark.driver import AttemptService, run_barrier, spark_context
from timelypy_spark.epochs import Epochs, memory_mb
from timelypy_spark.task import EmitBatch, StreamProgram, TaskContext

__all__ = [
    "run",
    "BATCH",
    "as_rdd",
    "check_workers",
    "row_converter",
    "materialize",
    "run_streaming",
    "session_of",
]

#: Records per batch fed into the dataflow.
BATCH = 4096


def run(
    spark: Any,
    build: Callable[[Any, Any], Any],
    source: Any,
    *,
    workers: int | None = None,
    schema: Any = None,
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
    records per worker, was removed and raises :class:`ConfigError`.  With
    ``collect=True`` the output records come back to the driver as a list,
    in the same single Spark job (no persisted RDD, no second job).
    ``timeout``, ``attempts``, ``serializer`` and ``connect_timeout`` are as
    for :func:`timelypy_spark.execute` (read from ``spark.timelypy.*`` when
    left out).  See the module documentation.
    """
    sc = spark_context(spark)
    epochs = Epochs.of(
        epoch_of, epoch_length, presorted=presorted,
        sort_memory_mb=memory_mb(sc.getConf()), epoch_size=epoch_size,
    )
    convert = row_converter(source, row_type)
    if collect and schema is not None:
        raise ConfigError("collect=True returns a list; it cannot also make a DataFrame")
    rdd = as_rdd(source, workers)
    output = run_streaming(
        sc,
        rdd,
        _program(build, epochs, convert),
        name=getattr(build, "__name__", type(build).__name__),
        collect=collect,
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
    )
    if schema is None:
        return output
    return session_of(spark).createDataFrame(output, schema)


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

    The tasks stream their output records back as they are emitted; the
    result is the driver's list (``collect``) or an RDD of them.  A
    ``service`` serves the tasks from the driver (see :func:`run_barrier`).
    """
    return run_barrier(
        sc,
        rdd,
        None,
        rdd.getNumPartitions(),
        flatten=True,
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
        action=(lambda barrier_rdd: barrier_rdd.collect()) if collect else materialize,
        stream_program=program,
        service=service,
        name=name,
    )


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
    if _is_frame(source):
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


def _is_frame(source: Any) -> bool:
    return hasattr(source, "rdd") and hasattr(source, "schema")


def row_converter(source: Any, row_type: str) -> Callable[[Any], Any] | None:
    """How a DataFrame's rows enter the dataflow (``None``: as they are)."""
    if row_type not in ("tuple", "dict", "row"):
        raise ConfigError(f"row_type must be 'tuple', 'dict' or 'row', not {row_type!r}")
    if not _is_frame(source) or row_type == "row":
        return None
    return tuple if row_type == "tuple" else _row_as_dict


def materialize(barrier_rdd: Any) -> Any:
    """The barrier stage's output as an ordinary, persisted RDD, computed once.

    Spark refuses partial jobs (``take``, ``first``, ``show``) on a chain that
    holds a barrier stage, so the output crosses a shuffle: the RDD returned
    is an ordinary one, and the shuffle files keep the workers' output, so
    later actions do not run the workers again.
    """
    from pyspark import StorageLevel

    workers = barrier_rdd.getNumPartitions()
    keyed = barrier_rdd.mapPartitionsWithIndex(
        lambda index, records: ((index, record) for record in records)
    )
    output = keyed.partitionBy(workers, _same_partition).values()
    output.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        output.count()
    except BaseException:
        output.unpersist(blocking=False)  # a failed run leaves no cached RDD behind
        raise
    return output


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
    convert: Callable[[Any], Any] | None,
) -> StreamProgram:
    """The per-worker program: feed the partition, emit the output stream's batches."""

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitBatch, task: TaskContext
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
        records = partition if convert is None else map(convert, partition)
        if epochs.epoch_of is None and epochs.epoch_length is None:
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
