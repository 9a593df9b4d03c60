"""``reclock``: re-time a stream by the records of a clock stream.

``reclock(stream, clock)`` stashes the records of ``stream`` with their
times.  A record at time ``c`` on ``clock`` (its content is ignored) asks
for a notification at ``c``; once ``c`` is complete on *both* inputs, every
stashed record whose time is ``<= c`` is sent at time ``c`` and leaves the
stash.  Records with no clock time at or after theirs stay stashed.

So the clock's times become the stream's new times: data is batched up to,
and released at, each clock tick.  Both inputs stay on their worker
(``Pipeline``), as in Timely; to have every worker follow the same clock,
``broadcast`` the clock stream first.

Timely's example: data ``0..10`` at times ``0..10``, clock ticks at 3, 5
and 8.

>>> import timelypy
>>> def build(scope):
...     data = scope.to_stream(range(10)).delay(lambda x, t: x)
...     clock = scope.to_stream([3, 5, 8]).delay(lambda x, t: x).map(lambda x: None)
...     return data.reclock(clock).capture()
>>> timelypy.example(build).extract()
[(3, [0, 1, 2, 3]), (5, [4, 5]), (8, [6, 7, 8])]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import binary_notify
from timelypy.dataflow.stream import Stream
from timelypy.order import less_equal

if TYPE_CHECKING:
    from timelypy.dataflow.handles import OperatorInput, OperatorOutput
    from timelypy.dataflow.notificator import Notificator

__all__ = ["reclock"]

T = TypeVar("T")


@stream_method
def reclock(stream: Stream[T], clock: Stream[Any]) -> Stream[T]:
    """The records of ``stream``, sent at the first complete ``clock`` time at or after theirs.

    >>> import timelypy
    >>> def build(scope):
    ...     data = scope.to_stream("abcd").delay(lambda x, t: ord(x) - ord("a"))
    ...     clock = scope.to_stream([1, 3]).delay(lambda x, t: x)
    ...     return data.reclock(clock).capture()
    >>> timelypy.example(build).extract()
    [(1, ['a', 'b']), (3, ['c', 'd'])]
    """
    # (time, records) of data not yet released, in arrival order
    stash: list[tuple[Any, list[Any]]] = []

    def logic(
        data_in: OperatorInput[Any],
        clock_in: OperatorInput[Any],
        out: OperatorOutput[Any],
        notificator: Notificator,
    ) -> None:
        for cap, data in data_in:
            stash.append((cap.time, data))
        for cap, _ticks in clock_in:
            notificator.notify_at(cap.retain())
        for done, _count in notificator:
            time = done.time
            keep: list[tuple[Any, list[Any]]] = []
            session = out.session(done)
            for entry in stash:
                if less_equal(entry[0], time):
                    session.give_batch(entry[1])
                else:
                    keep.append(entry)
            stash[:] = keep

    pipeline = Pipeline()
    return binary_notify(stream, clock, pipeline, pipeline, "Reclock", (), logic)
