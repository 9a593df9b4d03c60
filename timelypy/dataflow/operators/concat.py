"""``concat`` and ``concatenate``: merge streams.

>>> import timelypy
>>> def build(scope):
...     evens = scope.to_stream([0, 2])
...     odds = scope.to_stream([1, 3])
...     return evens.concat(odds).capture()
>>> [sorted(data) for _, data in timelypy.example(build).extract()]
[[0, 1, 2, 3]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.channels import Pipeline
from timelypy.progress.operate import FrontierInterest

if TYPE_CHECKING:
    from timelypy.dataflow.scope import Scope
    from timelypy.dataflow.stream import Stream

__all__ = ["concat", "concatenate"]


def concatenate(scope: Scope, streams: Sequence[Stream]) -> Stream:
    """One stream with the records of every stream in ``streams``."""
    builder = OperatorBuilder("Concatenate", scope)
    inputs = [
        builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER)
        for stream in streams
    ]
    out, result = builder.new_output()

    def constructor(caps: Any) -> Callable[[Any], None]:
        def logic(frontiers: Any) -> None:
            for inp in inputs:
                for cap, data in inp:
                    out.session(cap).give_batch(data)

        return logic

    builder.build(constructor)
    return result


def concat(stream: Stream, other: Stream) -> Stream:
    """The records of ``stream`` and ``other``."""
    return concatenate(stream.scope, [stream, other])
