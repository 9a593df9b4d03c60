"""``exchange``: move each record to the worker its key chooses.

``exchange(key)`` sends a record to worker ``key(record) % peers`` (a bit
mask for power-of-two worker counts, as Timely does).  ``key`` must return
an ``int``; for strings use :func:`timelypy.stable_hash`, which is the same
in every process, unlike Python's ``hash``.

>>> import timelypy
>>> def program(worker):
...     seen = []
...     worker.dataflow(lambda scope: scope.to_stream(range(4))
...                     .exchange(lambda x: x).inspect(seen.append))
...     worker.step_while(worker.has_dataflows)
...     return sorted(seen)
>>> timelypy.execute(timelypy.Config.process(2), program)
[[0, 0, 2, 2], [1, 1, 3, 3]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Exchange
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import Frontier
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest

__all__ = ["exchange"]

T = TypeVar("T")


@stream_method
def exchange(stream: Stream[T], key: Callable[[T], int]) -> Stream[T]:
    """Route each record to worker ``key(record) % peers``.

    The operator only sends each batch on at its own time, so its output's
    frontier is its input's (:meth:`OperatorBuilder.set_passes_through`).
    """
    builder = OperatorBuilder("Exchange", stream.scope)
    inp = builder.new_input(stream, Exchange(key), interest=FrontierInterest.NEVER)
    out, result = builder.new_output()

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        def logic(frontiers: list[Frontier]) -> None:
            out.forward(inp)

        return logic

    builder.build(constructor)
    builder.set_passes_through()
    return result
