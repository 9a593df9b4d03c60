"""Exchange instances of a user class across processes.

    python custom_record.py TIMELY-ARGS [--serializer pickle] [count=N]

The last worker makes ``Point(i, i * i)`` for ``i`` in ``range(COUNT)`` (5, or
``N``: with 1 the exchange routes a batch of one record) and a
``GatherPoints`` operator (an ``Exchange`` pact keyed by ``0``) brings them all
to worker 0, which prints ``points: [...]``.  With several processes the
points cross a process boundary: the msgpack codec cannot carry a ``Point``
(a :class:`~timelypy.errors.SerializationError` naming the operator and the
type), cloudpickle (``--serializer pickle``) can.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import timelypy
from timelypy.dataflow import Exchange

#: How many points are sent (``count=N`` among the arguments, else 5).
COUNT = next((int(arg[6:]) for arg in sys.argv[1:] if arg.startswith("count=")), 5)


class Point:
    """A user record type that msgpack knows nothing about."""

    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def __repr__(self) -> str:
        return f"Point({self.x}, {self.y})"


def gather(_cap: Any, _info: Any) -> Callable[[Any, Any], None]:
    """The ``GatherPoints`` logic: pass every batch on."""

    def logic(inp: Any, out: Any) -> None:
        for cap, data in inp:
            out.session(cap).give_batch(data)

    return logic


def program(worker: timelypy.Worker) -> None:
    """Send the points from the last worker to worker 0."""
    received: list[Point] = []
    mine = range(COUNT) if worker.index == worker.peers - 1 else range(0)
    worker.dataflow(
        lambda scope: (
            scope.to_stream([Point(i, i * i) for i in mine])
            .unary(Exchange(lambda _point: 0), "GatherPoints", gather)
            .inspect(received.append)
        )
    )
    worker.step_while(worker.has_dataflows, 0.05)
    if worker.index == 0:
        print(f"points: {sorted(received, key=lambda p: p.x)}", flush=True)


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
