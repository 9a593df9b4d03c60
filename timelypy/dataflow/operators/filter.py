"""``filter``: keep the records a predicate accepts.

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(6))
...                  .filter(lambda x: x % 2 == 0).capture()).extract()
[(0, [0, 2, 4])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.channels import Pipeline

if TYPE_CHECKING:
    from timelypy.dataflow.stream import Stream

__all__ = ["filter"]

_PIPELINE = Pipeline()


def filter(stream: Stream, predicate: Callable[[Any], bool]) -> Stream:
    """Keep the records for which ``predicate`` is true."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                kept = [x for x in data if predicate(x)]
                if kept:
                    out.session(cap).give_batch(kept)

        return logic

    return stream.unary(_PIPELINE, "Filter", constructor)
