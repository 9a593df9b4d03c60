"""``broadcast``: every record to every worker.

Timely broadcasts by turning each record ``x`` into ``peers`` records
``(i, x)``, exchanging them by ``i`` and dropping the ``i``.  That costs a
record per worker per record.  Here the unit is the batch instead, with the
same progress accounting -- which only requires that, per time, the records
an output produces equal the records its readers consume:

1. ``BroadcastFanOut`` (``Pipeline``) turns each input batch into ``peers``
   records ``(destination, batch)``, one per worker.  It consumes
   ``len(batch)`` records and *produces* ``peers`` records: progress counts
   each ``(destination, batch)`` pair as one record.  Each destination gets
   its own list (this worker keeps the original, the others get copies), so
   no two workers ever share a mutable list.
2. ``Broadcast`` reads them through ``Exchange(lambda r: r[0])``, so pair
   ``(i, batch)`` reaches worker ``i``.  It *consumes* one record per pair --
   exactly what the fan-out produced for that time, so the counts meet -- and
   produces the ``len(batch)`` records inside, at the same time.

Downstream of ``Broadcast`` each worker holds, per time, every record that
any worker had upstream, exactly once.

Timely's example on one worker, and on two:

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(3)).broadcast().capture()).extract()
[(0, [0, 1, 2])]
>>> def program(worker):
...     seen = []
...     worker.dataflow(lambda scope: scope.to_stream([worker.index * 10])
...                     .broadcast().inspect(seen.append))
...     worker.step_while(worker.has_dataflows)
...     return sorted(seen)
>>> timelypy.execute(timelypy.Config.process(2), program)
[[0, 10], [0, 10]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Exchange, Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import UnaryLogic, unary
from timelypy.dataflow.stream import Stream

if TYPE_CHECKING:
    from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput

__all__ = ["broadcast"]

T = TypeVar("T")


def _destination(pair: tuple[int, list[Any]]) -> int:
    return pair[0]


@stream_method
def broadcast(stream: Stream[T]) -> Stream[T]:
    """Send every record to every worker (each worker gets one copy per record)."""
    peers = stream.scope.peers
    me = stream.scope.index

    def fan_out(cap: Any, info: OperatorInfo) -> UnaryLogic[Any, Any]:
        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, data in inp:
                if data:
                    out.give_batch(
                        cap, [(i, data if i == me else list(data)) for i in range(peers)]
                    )

        return logic

    def unpack(cap: Any, info: OperatorInfo) -> UnaryLogic[Any, Any]:
        def logic(inp: OperatorInput[Any], out: OperatorOutput[Any]) -> None:
            for cap, pairs in inp:
                if len(pairs) == 1:
                    records = pairs[0][1]
                else:
                    records = []
                    for _, batch in pairs:
                        records.extend(batch)
                out.give_batch(cap, records)

        return logic

    pairs = unary(stream, Pipeline(), "BroadcastFanOut", fan_out)
    return pairs.unary(Exchange(_destination), "Broadcast", unpack)
