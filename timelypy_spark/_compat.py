"""The internals of PySpark and msgpack that timelypy relies on, checked with a clear error.

Two things timelypy uses are not public API, so a new release could change
them without notice.  Both are reached only through this module, which
checks them first and says what to do when they changed:

* **py4j's JVM context** (``SparkContext._jsc``): the count of free task
  slots (``SparkContext.maxNumConcurrentTasks``), which PySpark does not
  expose.  Only classic sessions have it: a Spark Connect session has no
  ``sparkContext``, and timelypy's workers cannot run as its tasks.
* **the JVM side of an RDD and a DataFrame** (``RDD._jrdd``,
  ``DataFrame._jdf``): a count that runs in the JVM only (no Python worker
  reads the records), and a DataFrame's JVM Dataset, to drop its cache
  when the Python object goes.
* **PySpark's own shuffle of pickled batches** (what ``RDD.partitionBy``
  does inside: ``PairwiseRDD``, ``PythonPartitioner``,
  ``PythonRDD.valueOfPair``, a Python RDD whose output bypasses its
  serializer): :func:`shuffle_pickled_batches` hands the JVM each task's
  output as the pickled batches the task made, and the RDD it returns reads
  them back with PySpark's batched deserializer, with no Python step of its
  own.  Without those internals it falls back to ``partitionBy`` and an
  unpickling ``mapPartitions`` (the same records, one Python pass more).
* **msgpack's pure-Python packer** (``msgpack.fallback.Packer._pack``),
  which ``timelypy.communication.codec`` extends to carry ``bytearray`` and
  ``memoryview`` values exactly.

:data:`PYSPARK_RANGE` and :data:`MSGPACK_RANGE` are the release ranges
these were checked against; a version outside them still runs if the
internals are there (a warning says it is untested), and fails at once,
naming the versions, if they are not.
"""

from __future__ import annotations

import inspect
import logging
import sys
from typing import Any

from timelypy.errors import ConfigError

__all__ = [
    "MSGPACK_RANGE",
    "PYSPARK_RANGE",
    "check_msgpack",
    "java_context",
    "java_dataset",
    "jvm_count",
    "run_map_stage",
    "shuffle_pickled_batches",
    "max_concurrent_tasks",
]

log = logging.getLogger("timelypy_spark")

#: PySpark releases whose ``SparkContext._jsc`` timelypy was checked against: [low, high).
PYSPARK_RANGE = ((3, 5), (5, 0))
#: msgpack releases whose ``fallback.Packer._pack`` timelypy was checked against: [low, high).
MSGPACK_RANGE = ((1, 0), (2, 0))

_warned: set[str] = set()


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _untested(name: str, version: str, span: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    low, high = span
    if not low <= _version(version) < high and name not in _warned:
        _warned.add(name)
        log.warning(
            "timelypy was checked against %s %s to before %s; this is %s",
            name,
            ".".join(map(str, low)),
            ".".join(map(str, high)),
            version,
        )


def java_context(sc: Any) -> Any:
    """The JVM ``SparkContext`` behind PySpark's ``sc`` (``sc._jsc.sc()``), checked."""
    import pyspark

    _untested("PySpark", pyspark.__version__, PYSPARK_RANGE)
    jsc = getattr(sc, "_jsc", None)
    if jsc is None or not hasattr(jsc, "sc"):
        raise ConfigError(
            f"timelypy_spark needs a classic SparkSession whose SparkContext reaches the JVM "
            f"through py4j (SparkContext._jsc); this PySpark {pyspark.__version__} context has "
            "none (a Spark Connect session, a stopped context, or a PySpark that changed it): "
            "build the session with SparkSession.builder.master(...), not .remote(...)"
        )
    return jsc.sc()


def jvm_count(rdd: Any) -> int:
    """Count ``rdd``'s items in the JVM (``rdd._jrdd.count()``): no Python worker runs."""
    jrdd = getattr(rdd, "_jrdd", None)
    if jrdd is None or not hasattr(jrdd, "count"):
        import pyspark

        raise ConfigError(
            f"timelypy_spark counts a shuffle's blocks through RDD._jrdd, which this PySpark "
            f"{pyspark.__version__} RDD lacks; timelypy was checked against PySpark "
            f"{_span(PYSPARK_RANGE)}"
        )
    return int(jrdd.count())


def shuffle_pickled_batches(rdd: Any, partitions: int) -> Any:
    """Records from ``rdd``'s pickled batches, task ``i``'s in partition ``i``, through a shuffle.

    Each item of ``rdd`` is ``pickle.dumps(list_of_records)``.  The RDD
    returned is an ordinary (non-barrier) RDD of the records: its partition
    ``i`` holds partition ``i``'s batches of ``rdd``, read with no Python
    step of its own.
    """
    try:
        return _jvm_shuffle(rdd, partitions)
    except (AttributeError, TypeError) as exc:  # py4j: the JVM classes or methods changed
        import pyspark

        log.warning(
            "PySpark %s: its shuffle of pickled batches is not there as timelypy knows it "
            "(%s); results go through partitionBy and one more Python pass",
            pyspark.__version__,
            exc,
        )
    keyed = rdd.mapPartitionsWithIndex(_keyed, preservesPartitioning=True)
    return keyed.partitionBy(partitions, _same).mapPartitions(_unpickled, True)


def _jvm_shuffle(rdd: Any, partitions: int) -> Any:
    from pyspark.rdd import RDD
    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    sc = rdd.context
    jvm = sc._jvm
    keyed = rdd.mapPartitionsWithIndex(_packed, preservesPartitioning=True)
    keyed._bypass_serializer = True  # its items are the bytes the JVM pairs up
    pairs = jvm.PairwiseRDD(keyed._jrdd.rdd()).asJavaPairRDD()
    partitioner = jvm.PythonPartitioner(partitions, id(_same))
    shuffled = pairs.partitionBy(partitioner)
    jrdd = jvm.PythonRDD.valueOfPair(shuffled)
    result = RDD(jrdd, sc, BatchedSerializer(CPickleSerializer()))  # type: ignore[no-untyped-call]
    result._timelypy_shuffled = shuffled  # for run_map_stage
    return result


def run_map_stage(rdd: Any) -> None:
    """Compute the shuffle ``rdd`` reads (:func:`shuffle_pickled_batches`), and nothing else.

    Spark's ``submitMapStage`` runs the stages that write the shuffle's
    files, not the stage that would read them back; where that is not
    there, a count in the JVM (:func:`jvm_count`) reads them once.
    """
    shuffled = getattr(rdd, "_timelypy_shuffled", None)
    if shuffled is not None:
        try:
            dependency = shuffled.rdd().dependencies().head()
            future = rdd.context._jsc.sc().submitMapStage(dependency)
        except (AttributeError, TypeError):  # py4j: not there in this Spark
            pass
        else:
            future.get()  # raises the job's failure, as an action would
            return
    jvm_count(rdd)


def _packed(index: int, batches: Any) -> Any:
    """``pack_long(index)``, batch, ``pack_long(index)``, batch...: PairwiseRDD's input."""
    from pyspark.serializers import pack_long

    key = pack_long(index)  # type: ignore[no-untyped-call]
    for batch in batches:
        yield key
        yield batch


def _keyed(index: int, batches: Any) -> Any:
    return ((index, batch) for batch in batches)


def _same(index: int) -> int:
    return index


def _unpickled(pairs: Any) -> Any:
    import pickle
    from itertools import chain

    return chain.from_iterable(pickle.loads(batch) for _, batch in pairs)


def java_dataset(frame: Any) -> Any:
    """The JVM Dataset behind a classic DataFrame (``frame._jdf``), checked."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None or not hasattr(jdf, "unpersist"):
        import pyspark

        raise ConfigError(
            f"timelypy_spark needs a classic DataFrame (DataFrame._jdf), which this PySpark "
            f"{pyspark.__version__} DataFrame lacks (Spark Connect?); timelypy was checked "
            f"against PySpark {_span(PYSPARK_RANGE)}"
        )
    return jdf


def max_concurrent_tasks(sc: Any) -> int:
    """The task slots the cluster has now for the default resource profile."""
    jvm = java_context(sc)
    try:
        profile = jvm.resourceProfileManager().defaultResourceProfile()
        return int(jvm.maxNumConcurrentTasks(profile))
    except Exception as exc:  # py4j's errors when the JVM method changed
        import pyspark

        raise ConfigError(
            f"timelypy_spark counts free task slots with the JVM's "
            f"SparkContext.maxNumConcurrentTasks, which failed on PySpark "
            f"{pyspark.__version__} ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
            f"timelypy was checked against PySpark {_span(PYSPARK_RANGE)}"
        ) from None


def check_msgpack() -> str:
    """Fail clearly unless msgpack's packer has the ``_pack`` hook the codec extends.

    The msgpack looked at is the one ``timelypy.communication.codec``
    imported (this layer does not import msgpack itself).  Returns its
    version.
    """
    import timelypy.communication.codec  # noqa: F401  (imports msgpack and its fallback)

    msgpack = sys.modules["msgpack"]
    version = ".".join(map(str, msgpack.version))
    _untested("msgpack", version, MSGPACK_RANGE)
    fallback = sys.modules.get("msgpack.fallback")
    packer = getattr(fallback, "Packer", None)
    if packer is None:
        raise ConfigError(
            f"msgpack {version} has no msgpack.fallback.Packer; timelypy's codec extends it and "
            f"was checked against msgpack {_span(MSGPACK_RANGE)}: install one of those"
        )
    hook = getattr(packer, "_pack", None)
    if hook is None or "obj" not in inspect.signature(hook).parameters:
        raise ConfigError(
            f"msgpack {version}'s fallback Packer has no _pack(obj, ...) method; timelypy's "
            f"codec extends it and was checked against msgpack {_span(MSGPACK_RANGE)}: "
            "install one of those"
        )
    return version


def _span(span: tuple[tuple[int, ...], tuple[int, ...]]) -> str:
    low, high = span
    return f"{'.'.join(map(str, low))} to before {'.'.join(map(str, high))}"
