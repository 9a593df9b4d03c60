"""``filter``: keep the records a predicate accepts.

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(6))
...                  .filter(lambda x: x % 2 == 0).capture()).extract()
[(0, [0, 2, 4])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import fusible_unary
from timelypy.dataflow.stream import Stream

__all__ = ["filter"]

T = TypeVar("T")

_PIPELINE = Pipeline()


@stream_method
def filter(stream: Stream[T], predicate: Callable[[T], bool]) -> Stream[T]:
    """Keep the records for which ``predicate`` is true."""

    def fuse(time: object, data: list[T]) -> list[T]:
        if len(data) == 1:
            # A one-record batch (a small epoch's) without the comprehension's own frame.
            return data if predicate(data[0]) else []
        return [x for x in data if predicate(x)]

    return fusible_unary(stream, "Filter", fuse)
