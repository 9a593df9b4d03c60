"""``enter`` and ``leave``: move a stream into a nested scope and back out.

``stream.enter(inner)`` brings a stream of a scope into a scope nested
directly in it; records get the inner scope's timestamps (in an iterative
scope, ``Product(outer, 0)``).  Entering counts the records as consumed by
the nested scope (so the parent knows they arrived) and activates it.

``stream.leave()`` takes a stream of a nested scope out to its parent;
records get the parent's timestamps back, passing straight to the parent's
readers while the nested scope reports them as produced.

>>> import timelypy
>>> def build(scope):
...     def inner(region):
...         return scope.to_stream([1, 2]).enter(region).map(lambda x: x * 10).leave()
...     return scope.region(inner).capture()
>>> timelypy.example(build).extract()
[(0, [10, 20])]
"""

from __future__ import annotations

from typing import Any, TypeVar

from timelypy.dataflow.channels import Tee
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import PortError

__all__ = ["enter", "leave"]

T = TypeVar("T")


@stream_method
def enter(stream: Stream[T], scope: Scope) -> Stream[T]:
    """Bring ``stream`` (of ``scope``'s parent) into the nested ``scope``."""
    if scope.parent is None or stream.scope is not scope.parent:
        raise PortError(
            f"cannot enter scope {scope.name!r} from scope {stream.scope.name!r}: "
            "enter() takes a stream of the immediately enclosing scope"
        )
    subgraph = scope.subgraph
    refinement = subgraph.refinement
    assert refinement is not None  # a nested scope always has one
    port, counts = subgraph.new_input()
    to_inner = refinement.to_inner
    tee = Tee()

    def push(time: Any, records: list[Any]) -> None:
        inner_time = to_inner(time)
        counts[inner_time] = counts.get(inner_time, 0) + len(records)
        tee.push(inner_time, records)
        subgraph.activate()

    stream.connect_to((subgraph.index, port), push)
    return Stream(scope, (0, port), tee)


@stream_method
def leave(stream: Stream[T]) -> Stream[T]:
    """Take ``stream`` (of a nested scope) out to the enclosing scope."""
    scope = stream.scope
    parent = scope.parent
    if parent is None:
        raise PortError(f"scope {scope.name!r} is a dataflow's root; there is nothing to leave to")
    subgraph = scope.subgraph
    refinement = subgraph.refinement
    assert refinement is not None  # a nested scope always has one
    port = subgraph.new_output()
    to_outer = refinement.to_outer
    tee = Tee()

    def push(time: Any, records: list[Any]) -> None:
        tee.push(to_outer(time), records)

    stream.connect_to((0, port), push)
    return Stream(parent, (subgraph.index, port), tee)
