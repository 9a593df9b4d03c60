"""Epochs for Spark records: from the record or from the clock, never from a count.

An epoch must mean the same data on every worker (the Timely model; see
``docs/flow_epochs.md``, "Epochs"): epoch 3 is "the records whose time is 3",
whichever partition they are in.  A count of records per partition ("a new epoch every k
records") breaks that, because every partition is a different size, so
epoch 3 of one worker and epoch 3 of another hold unrelated records.  The
Spark functions (:func:`timelypy_spark.run`, :func:`timelypy_spark.run_flow`)
therefore offer only these two ways, chosen on the driver with
:meth:`Epochs.of` and applied in every task with :meth:`Epochs.pairs`:

* ``epoch_of=f`` -- ``f(record)`` is the record's epoch, an ``int >= 0``
  (an event time bucket, a batch number stored in the record, ...).  An
  input's epoch only moves forward, so each partition is **sorted by
  epoch** in its task before it is fed (a stable sort: records of one epoch
  keep their order).  The sort is Spark's own external sorter, which spills
  to disk beyond ``spark.python.worker.memory``, but the first record enters
  only once the whole partition has been read.  Pass ``presorted=True`` when
  the partitions already come in epoch order (``sortWithinPartitions``, or a
  time-ordered source): records then stream in without the sort, and one
  whose epoch is lower than the one before it is an error.
* ``epoch_length=s`` -- processing time: a record's epoch is the number of
  whole ``s``-second periods between the run's start (one instant chosen on
  the driver and shipped to every task) and the moment its task reads it,
  as :func:`timelypy.flow.inputs.tumbling_epoch` counts them.  Every worker
  agrees on where epochs begin and end (up to the machines' clock skew).
* neither -- every record in epoch 0: each epoch-closing step sees the whole
  input at once.

>>> Epochs.of(None, None).describe()
'one epoch (0)'
>>> list(Epochs.of(lambda word: len(word), None).pairs(["ccc", "a", "bb", "b"]))
[(1, 'a'), (1, 'b'), (2, 'bb'), (3, 'ccc')]
>>> Epochs.of(None, None, epoch_size=5)
Traceback (most recent call last):
...
timelypy.errors.ConfigError: epoch_size was removed: ...
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Iterable, Iterator
from operator import index, itemgetter
from typing import Any

from timelypy.errors import ConfigError, InputError
from timelypy.flow.inputs import tumbling_epoch

__all__ = ["Epochs", "memory_mb"]

#: Memory (MiB) the in-task sort may use before it spills, when Spark's setting is unknown.
DEFAULT_SORT_MEMORY_MB = 512


def memory_mb(conf: Any) -> int:
    """``spark.python.worker.memory`` of a ``SparkConf`` in MiB (``"512m"``, ``"2g"``...).

    >>> memory_mb({"spark.python.worker.memory": "2g"})
    2048
    """
    text = str(conf.get("spark.python.worker.memory", "512m") or "512m").strip().lower()
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    try:
        if text and text[-1] == "b":
            text = text[:-1]
        if text and text[-1] in units:
            return max(1, int(float(text[:-1]) * units[text[-1]]))
        return max(1, int(float(text) / (1024 * 1024)))
    except ValueError:
        return DEFAULT_SORT_MEMORY_MB


@dataclasses.dataclass(frozen=True)
class Epochs:
    """How the records of a Spark partition get their epochs (shipped to every task).

    Build it on the driver with :meth:`of`, which checks the options; every
    task calls :meth:`pairs` on its partition.
    """

    #: ``epoch_of(record) -> int``, or ``None``.
    epoch_of: Callable[[Any], int] | None = None
    #: Seconds of clock time per epoch, or ``None``.
    epoch_length: float | None = None
    #: The instant (Unix seconds) epoch 0 starts at, for ``epoch_length``.
    anchor: float = 0.0
    #: Whether partitions already come in epoch order (no sort).
    presorted: bool = False
    #: MiB the sort may hold before it spills to disk.
    sort_memory_mb: int = DEFAULT_SORT_MEMORY_MB

    @classmethod
    def of(
        cls,
        epoch_of: Callable[[Any], int] | None,
        epoch_length: float | datetime.timedelta | None,
        *,
        presorted: bool = False,
        sort_memory_mb: int = DEFAULT_SORT_MEMORY_MB,
        epoch_size: object = None,
    ) -> Epochs:
        """Check the options and fix the clock's anchor (now) for ``epoch_length``.

        ``epoch_size`` is accepted only to explain that it was removed.
        """
        if epoch_size is not None:
            raise ConfigError(
                "epoch_size was removed: an epoch of every N records per worker means different "
                "data on each worker; give each record its epoch with epoch_of=f (f(record) -> "
                "int), or use the clock with epoch_length=seconds"
            )
        if epoch_of is not None and epoch_length is not None:
            raise ConfigError(
                "give epoch_of (epochs from the record) or epoch_length (epochs from the "
                "clock), not both"
            )
        if epoch_of is not None and not callable(epoch_of):
            raise ConfigError(f"epoch_of must be a function of the record, got {epoch_of!r}")
        length: float | None = None
        if epoch_length is not None:
            if isinstance(epoch_length, datetime.timedelta):
                length = epoch_length.total_seconds()
            elif isinstance(epoch_length, (int, float)) and not isinstance(epoch_length, bool):
                length = float(epoch_length)
            if length is None or not length > 0:
                raise ConfigError(
                    f"epoch_length must be a positive number of seconds (or a timedelta), got "
                    f"{epoch_length!r}"
                )
        return cls(
            epoch_of=epoch_of,
            epoch_length=length,
            anchor=time.time(),
            presorted=bool(presorted),
            sort_memory_mb=sort_memory_mb,
        )

    def describe(self) -> str:
        """A few words on how epochs are chosen (for messages)."""
        if self.epoch_of is not None:
            return "epoch_of(record)"
        if self.epoch_length is not None:
            return f"{self.epoch_length:g} s of clock time per epoch"
        return "one epoch (0)"

    @property
    def single(self) -> bool:
        """Whether every record is in epoch 0 (neither ``epoch_of`` nor ``epoch_length``).

        Readers may then take a partition in slices, with no per-record epoch.
        """
        return self.epoch_of is None and self.epoch_length is None

    def pairs(
        self, records: Iterable[Any], where: str = "a partition"
    ) -> Iterator[tuple[int, Any]]:
        """``(epoch, record)`` for each record, in non-decreasing epoch order."""
        if self.epoch_of is not None:
            keyed = _keyed(records, self.epoch_of, where)
            if self.presorted:
                return _checked(keyed, where)
            return _sorted(keyed, self.sort_memory_mb)
        if self.epoch_length is not None:
            return tumbling_epoch(records, self.epoch_length, anchor=self.anchor)
        return ((0, record) for record in records)


def _keyed(
    records: Iterable[Any], epoch_of: Callable[[Any], int], where: str
) -> Iterator[tuple[int, Any]]:
    for record in records:
        epoch = epoch_of(record)
        if type(epoch) is not int:
            try:
                if isinstance(epoch, bool):
                    raise TypeError
                epoch = index(epoch)  # numpy integers and the like
            except TypeError:
                raise InputError(
                    f"{where}: epoch_of must return an int >= 0, got {epoch!r} for the record "
                    f"{record!r}"
                ) from None
        if epoch < 0:
            raise InputError(
                f"{where}: epoch_of must return an int >= 0, got {epoch} for the record {record!r}"
            )
        yield epoch, record


def _checked(pairs: Iterator[tuple[int, Any]], where: str) -> Iterator[tuple[int, Any]]:
    current = 0
    for epoch, record in pairs:
        if epoch < current:
            raise InputError(
                f"{where}: epoch_of gave {epoch} after {current}, but presorted=True promised "
                "records in non-decreasing epoch order; sort the partitions (or leave "
                "presorted=False to let each task sort its partition)"
            )
        current = epoch
        yield epoch, record


def _sorted(pairs: Iterator[tuple[int, Any]], memory: int) -> Iterator[tuple[int, Any]]:
    """A stable sort by epoch that spills to disk beyond ``memory`` MiB (Spark's sorter)."""
    try:
        from pyspark.shuffle import ExternalSorter
    except ImportError:  # pragma: no cover - pyspark is there wherever a task runs
        return iter(sorted(pairs, key=itemgetter(0)))
    sorter: Any = ExternalSorter(memory * 0.9)
    return iter(sorter.sorted(pairs, key=itemgetter(0)))
