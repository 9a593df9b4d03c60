"""``inspect``, ``inspect_time``, ``inspect_batch``: look at records as they pass.

The stream passes through unchanged.  ``inspect(f)`` calls ``f(record)``,
``inspect_time(f)`` calls ``f(time, record)``, ``inspect_batch(f)`` calls
``f(time, records)`` once per batch (the cheapest), and
``inspect_frontier(f)`` calls ``f(frontier)`` whenever the input frontier
changes.

>>> import timelypy
>>> seen = []
>>> _ = timelypy.example(lambda scope: scope.to_stream("ab").inspect_time(
...     lambda t, x: seen.append((t, x))))
>>> seen
[(0, 'a'), (0, 'b')]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.operators.generic import UnaryLogic, fusible_unary, unary_frontier
from timelypy.dataflow.stream import Stream

__all__ = ["inspect", "inspect_time", "inspect_batch", "inspect_frontier"]

T = TypeVar("T")

_PIPELINE = Pipeline()


@stream_method
def inspect_batch(stream: Stream[T], func: Callable[[Any, list[T]], Any]) -> Stream[T]:
    """Call ``func(time, records)`` for every batch; pass the stream on."""

    def fuse(time: Any, data: list[T]) -> list[T]:
        func(time, data)
        return data

    return fusible_unary(stream, "InspectBatch", fuse)


@stream_method
def inspect(stream: Stream[T], func: Callable[[T], Any]) -> Stream[T]:
    """Call ``func(record)`` for every record; pass the stream on."""

    def fuse(time: Any, data: list[T]) -> list[T]:
        for x in data:
            func(x)
        return data

    return fusible_unary(stream, "Inspect", fuse)


@stream_method
def inspect_time(stream: Stream[T], func: Callable[[Any, T], Any]) -> Stream[T]:
    """Call ``func(time, record)`` for every record; pass the stream on."""

    def fuse(time: Any, data: list[T]) -> list[T]:
        for x in data:
            func(time, x)
        return data

    return fusible_unary(stream, "InspectTime", fuse)


@stream_method
def inspect_frontier(stream: Stream[T], func: Callable[[tuple[Any, ...]], Any]) -> Stream[T]:
    """Call ``func(frontier)`` whenever the frontier changes; pass the stream on."""

    def constructor(initial: Capability, info: OperatorInfo) -> UnaryLogic[T, T]:
        last: list[Any] = [None]

        def logic(inp: OperatorInput[T], out: OperatorOutput[T]) -> None:
            out.forward(inp)
            frontier = inp.frontier.frontier()
            if frontier != last[0]:
                last[0] = frontier
                func(frontier)

        return logic

    return unary_frontier(stream, _PIPELINE, "InspectFrontier", constructor)
