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
from typing import TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import attach, stream_method
from timelypy.dataflow.handles import Frontier, OperatorInput, OperatorOutput
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest

__all__ = ["concat", "concatenate", "concatenate_with"]

T = TypeVar("T")


def concatenate(scope: Scope, streams: Sequence[Stream[T]]) -> Stream[T]:
    """One stream with the records of every stream in ``streams`` (all of ``scope``)."""
    builder = OperatorBuilder("Concatenate", scope)
    inputs: list[OperatorInput[T]] = [
        builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER) for stream in streams
    ]
    out: OperatorOutput[T]
    out, result = builder.new_output()

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        def logic(frontiers: list[Frontier]) -> None:
            for inp in inputs:
                out.forward(inp)

        return logic

    builder.build(constructor)
    return result


@stream_method
def concat(stream: Stream[T], other: Stream[T]) -> Stream[T]:
    """The records of ``stream`` and ``other``."""
    return concatenate(stream.scope, [stream, other])


def concatenate_with(stream: Stream[T], others: Sequence[Stream[T]]) -> Stream[T]:
    """The records of ``stream`` and of every stream of ``others`` (``stream.concatenate``)."""
    return concatenate(stream.scope, [stream, *others])


attach(Stream, "concatenate", concatenate_with)
