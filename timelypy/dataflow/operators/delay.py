"""``delay``, ``delay_total``, ``delay_batch``: move records to later times.

A delay operator gives records a new, later time.  It may only move time
forward -- the new time must be ``>=`` the record's time -- because the
capability it sends with is minted from the record's input capability.
Moving backward raises a :class:`~timelypy.errors.CapabilityError` naming
the operator, the worker, the times and a record.

The operator holds the records, with a capability at each new time, until
that time is *complete* on its input (a notificator tells it), and then
sends them all at once at the new time.  So downstream sees each new time's
records together, and only once nothing more can arrive for it.

* ``delay(stream, func)`` -- ``func(record, time) -> new_time`` per record.
  Each batch is grouped by new time in one dict (a batch whose records all
  go to the same time is not split at all).
* ``delay_total(stream, func)`` -- the same, for totally ordered times; in
  Timely it is a specialisation with identical results, and here it is
  :func:`delay` (it refuses ``Product`` timestamps, which are only partially
  ordered).
* ``delay_batch(stream, func)`` -- ``func(time) -> new_time`` once per batch;
  the batches are sent on unchanged.

Timely's example: ``0..10`` at time 0, each element ``i`` delayed to ``i``.

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(10))
...                  .delay(lambda x, time: x).capture()).extract()[:3]
[(0, [0]), (1, [1]), (2, [2])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import unary_notify
from timelypy.dataflow.stream import Stream
from timelypy.errors import CapabilityError, TimestampError
from timelypy.order import ProductType, check_timestamp, less_equal

if TYPE_CHECKING:
    from timelypy.dataflow.capability import InputCapability
    from timelypy.dataflow.handles import OperatorInput, OperatorOutput
    from timelypy.dataflow.notificator import Notificator

__all__ = ["delay", "delay_total", "delay_batch"]

T = TypeVar("T")

_PIPELINE = Pipeline()


class _Held:
    """Records waiting for their new time to complete, and the checks on new times."""

    __slots__ = ("elements", "name", "ttype", "worker")

    def __init__(self, stream: Stream[Any], name: str) -> None:
        self.name = name
        self.worker = stream.scope.index
        self.ttype = stream.scope.timestamp_type
        # new time -> records (or batches of records, for delay_batch)
        self.elements: dict[Any, list[Any]] = {}

    def check(self, time: Any, new_time: Any, example: Any) -> None:
        """Raise unless ``new_time`` is a timestamp ``>=`` ``time``."""
        where = f"operator {self.name!r} (worker {self.worker})"
        try:
            check_timestamp(new_time, self.ttype, "new time")
            later = less_equal(time, new_time)
        except TimestampError as exc:
            raise TimestampError(f"{where}: {exc} ({example})") from None
        if not later:
            raise CapabilityError(
                f"{where}: cannot delay from time {time!r} to the earlier time "
                f"{new_time!r} ({example}); a delay must return a time >= the record's time"
            )

    def hold(
        self, cap: InputCapability, new_time: Any, records: list[Any], notificator: Notificator
    ) -> None:
        """Keep ``records`` for ``new_time``, asking to be notified at it the first time."""
        elements = self.elements
        held = elements.get(new_time)
        if held is None:
            elements[new_time] = records
            notificator.notify_at(cap.delayed(new_time))
        else:
            held.extend(records)


@stream_method
def delay(stream: Stream[T], func: Callable[[T, Any], Any]) -> Stream[T]:
    """Send each record at ``func(record, time)``, once that time is complete.

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream(range(6))
    ...                  .delay(lambda x, time: time + x % 3).capture()).extract()
    [(0, [0, 3]), (1, [1, 4]), (2, [2, 5])]
    """
    return _delay(stream, func, "Delay")


@stream_method
def delay_total(stream: Stream[T], func: Callable[[T, Any], Any]) -> Stream[T]:
    """:func:`delay` for totally ordered timestamps (Timely's specialisation).

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream(range(4))
    ...                  .delay_total(lambda x, time: 10 - x).capture()).extract()
    [(7, [3]), (8, [2]), (9, [1]), (10, [0])]
    """
    ttype = stream.scope.timestamp_type
    if isinstance(ttype, ProductType):
        raise TypeError(
            f"delay_total needs totally ordered timestamps, but scope {stream.scope.name!r} "
            f"has {ttype!r} timestamps (partially ordered); use delay instead"
        )
    return _delay(stream, func, "DelayTotal")


def _delay(stream: Stream[T], func: Callable[[T, Any], Any], name: str) -> Stream[T]:
    held = _Held(stream, name)
    elements = held.elements

    def logic(inp: OperatorInput[Any], out: OperatorOutput[Any], notificator: Notificator) -> None:
        for cap, data in inp:
            if not data:
                continue
            time = cap.time
            new_times = [func(record, time) for record in data]
            first = new_times[0]
            if new_times.count(first) == len(new_times):
                groups = {first: data}
            else:
                groups = {}
                for new_time, record in zip(new_times, data, strict=True):
                    group = groups.get(new_time)
                    if group is None:
                        groups[new_time] = [record]
                    else:
                        group.append(record)
            for new_time, records in groups.items():
                held.check(time, new_time, f"record {records[0]!r}")
                held.hold(cap, new_time, records, notificator)
        for done, _count in notificator:
            ready = elements.pop(done.time, None)
            if ready:
                out.session(done).give_batch(ready)

    return unary_notify(stream, _PIPELINE, name, (), logic)


@stream_method
def delay_batch(stream: Stream[T], func: Callable[[Any], Any]) -> Stream[T]:
    """Send each batch at ``func(time)``, once that time is complete.

    Timely's example: ``0..10`` at time 0, delayed to time 1.

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream(range(10))
    ...                  .delay_batch(lambda time: time + 1).capture()).extract()
    [(1, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])]
    """
    held = _Held(stream, "DelayBatch")
    elements = held.elements

    def logic(inp: OperatorInput[Any], out: OperatorOutput[Any], notificator: Notificator) -> None:
        for cap, data in inp:
            time = cap.time
            new_time = func(time)
            held.check(time, new_time, f"a batch of {len(data)} record(s)")
            held.hold(cap, new_time, [data], notificator)
        for done, _count in notificator:
            batches = elements.pop(done.time, None)
            if batches:
                session = out.session(done)
                for batch in batches:
                    session.give_batch(batch)

    return unary_notify(stream, _PIPELINE, "DelayBatch", (), logic)
