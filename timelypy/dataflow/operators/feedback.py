"""Loops: ``scope.feedback(summary)`` and ``stream.connect_loop(handle)``.

``handle, cycle = scope.feedback(summary)`` creates a feedback operator and
the stream ``cycle`` of what it emits; ``stream.connect_loop(handle)``
connects its input.  Every record given to the loop comes back on ``cycle``
with its time advanced by ``summary`` -- and is dropped if the summary
cannot be applied (an ``int`` time would pass ``2**64 - 1``).  Because the
summary advances time, progress tracking can still conclude when each time
is complete, however many rounds the loop runs.

In an iterative scope (``Product`` times), an ``int`` summary ``n`` means
``Product(identity, n)``: ``n`` more iterations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import scope_method, stream_method
from timelypy.dataflow.handles import Frontier, OperatorOutput
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import PortError, SummaryError
from timelypy.order import Product, ProductType, identity_summary, results_in
from timelypy.progress.operate import FrontierInterest

__all__ = ["LoopHandle", "feedback", "connect_loop"]

T = TypeVar("T")


class LoopHandle(Generic[T]):
    """The input end of a feedback loop (of ``T`` records), waiting for :func:`connect_loop`."""

    def __init__(self, builder: OperatorBuilder, summary: Any, output: OperatorOutput[T]) -> None:
        self._builder = builder
        self.summary = summary
        self._output = output
        self.connected = False

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"LoopHandle(summary={self.summary!r}, {state})"


def _normalize(scope: Scope, summary: Any) -> Any:
    ttype = scope.timestamp_type
    if isinstance(ttype, ProductType) and type(summary) is int:
        return Product(identity_summary(ttype.outer), summary)
    if ttype is int and type(summary) is not int:
        raise SummaryError(
            f"scope {scope.name!r} has int timestamps: its feedback summary must be an int, "
            f"not {summary!r}"
        )
    if isinstance(ttype, ProductType) and not isinstance(summary, Product):
        raise SummaryError(
            f"scope {scope.name!r} has {ttype!r} timestamps: its feedback summary must be a "
            f"Product (or an int number of iterations), not {summary!r}"
        )
    return summary


@scope_method
def feedback(scope: Scope, summary: Any) -> tuple[LoopHandle[Any], Stream[Any]]:
    """A loop's ``(handle, stream)`` (``scope.feedback(summary)``); see the module documentation.

    Returns ``(handle, stream)``; close the loop with
    ``stream.connect_loop(handle)``.  In an iterative scope an ``int``
    summary ``n`` means ``Product(identity, n)``: ``n`` more iterations.
    """
    summary = _normalize(scope, summary)
    builder = OperatorBuilder("Feedback", scope)
    output: OperatorOutput[Any]
    output, stream = builder.new_output()
    return LoopHandle(builder, summary, output), stream


@stream_method
def connect_loop(stream: Stream[T], handle: LoopHandle[T]) -> None:
    """Send ``stream``'s records around the loop of ``handle``."""
    if handle.connected:
        raise PortError("this feedback handle is already connected to a stream")
    builder = handle._builder
    if stream.scope is not builder.scope:
        raise PortError(
            f"connect_loop: the stream belongs to scope {stream.scope.name!r} but the loop "
            f"to {builder.scope.name!r}"
        )
    summary = handle.summary
    output = handle._output
    inp = builder.new_input(
        stream, Pipeline(), connection={0: [summary]}, interest=FrontierInterest.NEVER
    )

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        def logic(frontiers: list[Frontier]) -> None:
            for cap, data in inp:
                time = results_in(summary, cap.time)
                if time is not None:
                    output.session(cap.delayed(time)).give_batch(data)

        return logic

    builder.build(constructor)
    handle.connected = True
