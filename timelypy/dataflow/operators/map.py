"""``map``, ``flat_map`` and ``map_in_place``: transform each record.

The function is applied to every record of a batch inside one list
comprehension; the framework's own work is per batch.

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(3))
...                  .flat_map(lambda x: [x] * x).map(str).capture()).extract()
[(0, ['1', '2', '2'])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.operators.generic import UnaryLogic, fusible_unary, unary
from timelypy.dataflow.stream import Stream

__all__ = ["map", "flat_map", "map_in_place"]

T = TypeVar("T")
U = TypeVar("U")

_PIPELINE = Pipeline()


@stream_method
def map(stream: Stream[T], func: Callable[[T], U]) -> Stream[U]:
    """Apply ``func`` to every record."""

    def fuse(time: object, data: list[T]) -> list[U]:
        if len(data) == 1:
            # A one-record batch (a small epoch's) without the comprehension's own frame.
            return [func(data[0])]
        return [func(x) for x in data]

    return fusible_unary(stream, "Map", fuse)


@stream_method
def flat_map(stream: Stream[T], func: Callable[[T], Iterable[U]]) -> Stream[U]:
    """Replace every record by the items of the iterable ``func`` returns for it."""

    def fuse(time: object, data: list[T]) -> list[U]:
        return [y for x in data for y in func(x)]

    return fusible_unary(stream, "FlatMap", fuse)


@stream_method
def map_in_place(stream: Stream[T], func: Callable[[T], T]) -> Stream[T]:
    """Apply ``func`` to every record, reusing the batch's list."""

    def constructor(initial: Capability, info: OperatorInfo) -> UnaryLogic[T, T]:
        def logic(inp: OperatorInput[T], out: OperatorOutput[T]) -> None:
            for cap, data in inp:
                data[:] = [func(x) for x in data]
                out.give_batch(cap, data)

        return logic

    return unary(stream, _PIPELINE, "MapInPlace", constructor)
