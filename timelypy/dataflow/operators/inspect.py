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
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.channels import Pipeline

if TYPE_CHECKING:
    from timelypy.dataflow.stream import Stream

__all__ = ["inspect", "inspect_time", "inspect_batch", "inspect_frontier"]

_PIPELINE = Pipeline()


def inspect_batch(stream: Stream, func: Callable[[Any, list[Any]], Any]) -> Stream:
    """Call ``func(time, records)`` for every batch; pass the stream on."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                func(cap.time, data)
                out.session(cap).give_batch(data)

        return logic

    return stream.unary(_PIPELINE, "InspectBatch", constructor)


def inspect(stream: Stream, func: Callable[[Any], Any]) -> Stream:
    """Call ``func(record)`` for every record; pass the stream on."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                for x in data:
                    func(x)
                out.session(cap).give_batch(data)

        return logic

    return stream.unary(_PIPELINE, "Inspect", constructor)


def inspect_time(stream: Stream, func: Callable[[Any, Any], Any]) -> Stream:
    """Call ``func(time, record)`` for every record; pass the stream on."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                time = cap.time
                for x in data:
                    func(time, x)
                out.session(cap).give_batch(data)

        return logic

    return stream.unary(_PIPELINE, "InspectTime", constructor)


def inspect_frontier(stream: Stream, func: Callable[[tuple[Any, ...]], Any]) -> Stream:
    """Call ``func(frontier)`` whenever the frontier changes; pass the stream on."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        last: list[Any] = [None]

        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                out.session(cap).give_batch(data)
            frontier = inp.frontier.frontier()
            if frontier != last[0]:
                last[0] = frontier
                func(frontier)

        return logic

    return stream.unary_frontier(_PIPELINE, "InspectFrontier", constructor)
