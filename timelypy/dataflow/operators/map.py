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
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.channels import Pipeline

if TYPE_CHECKING:
    from timelypy.dataflow.stream import Stream

__all__ = ["map", "flat_map", "map_in_place"]

_PIPELINE = Pipeline()


def map(stream: Stream, func: Callable[[Any], Any]) -> Stream:
    """Apply ``func`` to every record."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                out.session(cap).give_batch([func(x) for x in data])

        return logic

    return stream.unary(_PIPELINE, "Map", constructor)


def flat_map(stream: Stream, func: Callable[[Any], Iterable[Any]]) -> Stream:
    """Replace every record by the items of the iterable ``func`` returns for it."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                out.session(cap).give_batch([y for x in data for y in func(x)])

        return logic

    return stream.unary(_PIPELINE, "FlatMap", constructor)


def map_in_place(stream: Stream, func: Callable[[Any], Any]) -> Stream:
    """Apply ``func`` to every record, reusing the batch's list."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                data[:] = [func(x) for x in data]
                out.session(cap).give_batch(data)

        return logic

    return stream.unary(_PIPELINE, "MapInPlace", constructor)
