"""``accumulate`` and ``count``: one result per completed time.

``accumulate(stream, default, logic)`` keeps, for every time at which
records arrived, an accumulator that starts as a copy of ``default`` and is
replaced by ``logic(acc, records)`` for each batch of records at that time.
When the time is complete on the input (a notificator tells it), the
operator sends the accumulator as the single record at that time and
forgets it.  Times at which no record arrived produce nothing.

``count(stream)`` is ``accumulate(stream, 0, lambda n, records: n +
len(records))``: the number of records per time.

As in Timely, both are *per worker*: records are not exchanged (``Pipeline``),
so each worker sends its own result for each time at which it received
records.  Exchange upstream, or accumulate the per-worker results again
after an exchange, for a global result.

Timely's examples:

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(10))
...                  .accumulate(0, lambda total, xs: total + sum(xs)).capture()).extract()
[(0, [45])]
>>> timelypy.example(lambda scope: scope.to_stream(range(10)).count().capture()).extract()
[(0, [10])]
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import unary_notify
from timelypy.dataflow.stream import Stream

if TYPE_CHECKING:
    from timelypy.dataflow.handles import OperatorInput, OperatorOutput
    from timelypy.dataflow.notificator import Notificator

__all__ = ["accumulate", "count"]

T = TypeVar("T")
A = TypeVar("A")

_PIPELINE = Pipeline()


def _accumulate(
    stream: Stream[T], default: A, logic: Callable[[A, list[T]], A], name: str
) -> Stream[A]:
    # time -> accumulator, for the times that had input and are not yet complete
    accums: dict[Any, Any] = {}

    def run(inp: OperatorInput[Any], out: OperatorOutput[Any], notificator: Notificator) -> None:
        for cap, data in inp:
            time = cap.time
            if time in accums:
                accums[time] = logic(accums[time], data)
            else:
                # Rust clones the default; a deep copy keeps mutable defaults apart.
                accums[time] = logic(copy.deepcopy(default), data)
                notificator.notify_at(cap.retain())
        for done, _count in notificator:
            if done.time in accums:
                out.session(done).give_batch([accums.pop(done.time)])

    return unary_notify(stream, _PIPELINE, name, (), run)


@stream_method
def accumulate(stream: Stream[T], default: A, logic: Callable[[A, list[T]], A]) -> Stream[A]:
    """One record per completed time: ``logic`` folded over its batches from ``default``.

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream("abc").delay(lambda x, t: ord(x) % 2)
    ...                  .accumulate("", lambda acc, xs: acc + "".join(xs))
    ...                  .capture()).extract()
    [(0, ['b']), (1, ['ac'])]
    """
    return _accumulate(stream, default, logic, "Accumulate")


@stream_method
def count(stream: Stream[Any]) -> Stream[int]:
    """The number of records at each completed time (per worker).

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream(range(7))
    ...                  .delay(lambda x, t: x % 2).count().capture()).extract()
    [(0, [4]), (1, [3])]
    """
    return _accumulate(stream, 0, _add_len, "Count")


def _add_len(total: int, records: list[Any]) -> int:
    return total + len(records)
