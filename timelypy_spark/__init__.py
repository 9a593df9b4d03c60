"""timelypy on Spark: workers as long-lived tasks of one barrier stage.

* :func:`execute` -- ``func(worker)`` on N workers inside Spark executors.
* :func:`run` -- an RDD or DataFrame in, each worker reading its partition as
  its input stream, the output stream back as an RDD or DataFrame (a
  DataFrame in and out travels as Arrow batches, :mod:`timelypy_spark.arrow`;
  ``output="frame"`` without a ``schema`` infers one from a sample).
* :func:`run_flow` -- a :class:`timelypy.flow.Dataflow` (the epoch
  layer) over an RDD, a DataFrame or a partitioned input; its captured
  ``(epoch, item)`` pairs back as an RDD or DataFrame.
* :func:`iter_flow` -- the same, its results yielded on the driver epoch by
  epoch while the flow runs (long and unbounded sources).
* :func:`stream_flow` -- a flow fed by a Structured Streaming query: each
  micro-batch enters one long-lived gang of workers at epoch = batch id, its
  state carried from batch to batch (:mod:`timelypy_spark.streaming`).
* :func:`ship_package` -- make timelypy importable on executors that do not
  have it installed.
* :func:`session` -- a quiet SparkSession with timelypy-friendly settings.

Epochs of RDD and DataFrame records come from the record (``epoch_of``) or
the clock (``epoch_length``), never from a count per worker
(:mod:`timelypy_spark.epochs`).  See ``docs/spark.md``.
"""

from timelypy_spark.cluster import check_slots
from timelypy_spark.driver import SparkJobError, execute
from timelypy_spark.flow import SparkInput, iter_flow, run_flow
from timelypy_spark.io import run
from timelypy_spark.session import session
from timelypy_spark.ship import ship_package
from timelypy_spark.streaming import StreamingFlow, StreamingInput, stream_flow

__all__ = [
    "execute",
    "run",
    "run_flow",
    "SparkInput",
    "iter_flow",
    "stream_flow",
    "StreamingInput",
    "StreamingFlow",
    "session",
    "ship_package",
    "check_slots",
    "SparkJobError",
]
