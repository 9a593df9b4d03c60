"""Spark data in and out: ``run(spark, build, source)``.

``source`` is an RDD or a DataFrame.  Each of its partitions is read by one
worker as that worker's input stream; ``build(scope, stream)`` builds the
dataflow and returns the output stream, whose records come back as an RDD
(or as a DataFrame, given a ``schema``).

Epochs: by default a worker's whole partition is one epoch (time 0), so
``reduce``-style operators see all of it at once.  ``epoch_size=k`` starts a
new epoch every ``k`` records; ``epoch_of=f`` uses ``f(record)`` (records of
a partition must come in non-decreasing epoch order).

DataFrame rows enter as plain tuples (``tuple(row)``), which travel between
workers with the default codec; ``row_type="dict"`` gives ``row.asDict()``.

The workers run once, in a barrier stage, before ``run`` returns.  Their
output then crosses a shuffle into an ordinary, persisted RDD (memory and
disk): Spark refuses ``take``, ``first`` or ``show`` on anything that still
chains to a barrier stage, and the shuffle files keep the output, so later
actions never run the workers again.  ``collect=True`` skips all that and
returns the records in a list, from the same single job.

>>> # result = timelypy_spark.run(spark, lambda scope, lines: lines.flat_map(str.split), rdd)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from timelypy.errors import ConfigError, InputError
from timelypy_spark.driver import run_barrier, spark_context

__all__ = ["run", "BATCH"]

#: Records per batch fed into the dataflow.
BATCH = 4096


def run(
    spark: Any,
    build: Callable[[Any, Any], Any],
    source: Any,
    *,
    workers: int | None = None,
    schema: Any = None,
    epoch_size: int | None = None,
    epoch_of: Callable[[Any], int] | None = None,
    row_type: str = "tuple",
    timeout: float | None = None,
    attempts: int = 0,
    serializer: str = "msgpack",
    connect_timeout: float = 60.0,
    collect: bool = False,
) -> Any:
    """Run ``build`` over ``source``'s partitions; return the output as an RDD or DataFrame.

    ``workers`` defaults to the number of partitions of ``source`` (it is
    repartitioned when they differ).  With ``collect=True`` the output
    records come back to the driver as a list, in the same single Spark job
    (no persisted RDD, no second job).  See the module documentation.
    """
    from pyspark import StorageLevel

    sc = spark_context(spark)
    if epoch_size is not None and epoch_of is not None:
        raise ConfigError("give epoch_size or epoch_of, not both")
    if epoch_size is not None and (not isinstance(epoch_size, int) or epoch_size < 1):
        raise ConfigError(f"epoch_size must be a positive int, got {epoch_size!r}")
    if row_type not in ("tuple", "dict", "row"):
        raise ConfigError(f"row_type must be 'tuple', 'dict' or 'row', not {row_type!r}")
    rdd, is_frame = _as_rdd(source)
    if workers is None:
        workers = rdd.getNumPartitions()
    if rdd.getNumPartitions() != workers:
        rdd = rdd.repartition(workers)
    convert: Callable[[Any], Any] | None = None
    if is_frame and row_type == "tuple":
        convert = tuple
    elif is_frame and row_type == "dict":
        convert = _row_as_dict

    program = _program(build, epoch_size, epoch_of, convert)

    def materialize(barrier_rdd: Any) -> Any:
        # Spark refuses partial jobs (take, first, show) on a chain that holds a
        # barrier stage, so the output crosses a shuffle: the RDD returned is an
        # ordinary one, and the shuffle files keep the workers' output, so later
        # actions do not run the workers again.
        keyed = barrier_rdd.mapPartitionsWithIndex(
            lambda index, records: ((index, record) for record in records)
        )
        output = keyed.partitionBy(workers, _same_partition).values()
        output.persist(StorageLevel.MEMORY_AND_DISK)
        output.count()
        return output

    if collect and schema is not None:
        raise ConfigError("collect=True returns a list; it cannot also make a DataFrame")

    output = run_barrier(
        sc,
        rdd,
        program,
        workers,
        flatten=True,
        timeout=timeout,
        attempts=attempts,
        serializer=serializer,
        connect_timeout=connect_timeout,
        action=(lambda barrier_rdd: barrier_rdd.collect()) if collect else materialize,
    )
    if schema is None:
        return output
    session = spark if hasattr(spark, "createDataFrame") else _session(sc)
    return session.createDataFrame(output, schema)


def _same_partition(index: int) -> int:
    """Keep each worker's output in the partition of the same number."""
    return index


def _as_rdd(source: Any) -> tuple[Any, bool]:
    if hasattr(source, "rdd") and hasattr(source, "schema"):
        return source.rdd, True
    if hasattr(source, "mapPartitions") and hasattr(source, "getNumPartitions"):
        return source, False
    raise ConfigError(
        f"run() needs an RDD or a DataFrame as its source, not {type(source).__name__}"
    )


def _session(sc: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def _row_as_dict(row: Any) -> Any:
    """A DataFrame ``Row`` as a ``dict`` of its fields."""
    return row.asDict()


def _program(
    build: Callable[[Any, Any], Any],
    epoch_size: int | None,
    epoch_of: Callable[[Any], int] | None,
    convert: Callable[[Any], Any] | None,
) -> Callable[[Any, Iterator[Any]], list[Any]]:
    """The per-worker program: feed the partition, collect the output stream."""

    def program(worker: Any, partition: Iterator[Any]) -> list[Any]:
        from timelypy import InputHandle, ProbeHandle

        handle: InputHandle[Any] = InputHandle()
        probe = ProbeHandle()
        out: list[Any] = []

        def dataflow(scope: Any) -> None:
            result = build(scope, scope.input_from(handle))
            if result is None:
                raise ConfigError(
                    "the build function must return the output stream (its records become "
                    "the result); return stream.filter(lambda _: False) for no output"
                )
            result.inspect_batch(lambda time, records: out.extend(records)).probe_with(probe)

        worker.dataflow(dataflow)
        records = partition if convert is None else map(convert, partition)
        if epoch_of is not None:
            _feed_by_key(worker, handle, probe, records, epoch_of)
        else:
            epoch = 0
            in_epoch = 0
            while True:
                take = BATCH if epoch_size is None else min(BATCH, epoch_size - in_epoch)
                batch = list(islice(records, take))
                if not batch:
                    break
                handle.send_batch(batch)
                worker.step()
                if epoch_size is not None:
                    in_epoch += len(batch)
                    if in_epoch == epoch_size:
                        epoch += 1
                        in_epoch = 0
                        handle.advance_to(epoch)
        handle.close()
        while not probe.done():
            worker.step_or_park(0.01)
        return out

    return program


def _feed_by_key(
    worker: Any, handle: Any, probe: Any, records: Any, epoch_of: Callable[[Any], int]
) -> None:
    batch: list[Any] = []
    current = 0
    for record in records:
        epoch = epoch_of(record)
        if epoch != current:
            if epoch < current:
                raise InputError(
                    f"worker {worker.index}: epoch_of gave {epoch} after {current}; within a "
                    "partition, records must come in non-decreasing epoch order"
                )
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
