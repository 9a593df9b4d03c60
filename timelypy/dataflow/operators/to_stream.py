"""``to_stream``: a stream from a Python iterable.

Every worker emits *all* of the iterable's items at the minimum time (as in
Timely: ``(0..10).to_stream(scope)`` on two workers yields each number
twice).  Items are sent in batches of :data:`CHUNK`; the operator reschedules
itself between batches, so a huge iterable does not block the worker.

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream("abc").capture()).extract()
[(0, ['a', 'b', 'c'])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.operators.generic import source

if TYPE_CHECKING:
    from timelypy.dataflow.capability import Capability
    from timelypy.dataflow.operator import OperatorInfo, OperatorOutput
    from timelypy.dataflow.scope import Scope
    from timelypy.dataflow.stream import Stream

__all__ = ["to_stream", "CHUNK"]

#: Items per batch (and per activation).  Measured: 2,048 keeps the per-batch
#: overhead negligible and batches small enough to stay in the CPU caches.
CHUNK = 2048


def to_stream(iterable: Iterable[Any], scope: Scope) -> Stream:
    """A stream of ``iterable``'s items at the scope's minimum time."""

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        held: list[Capability | None] = [cap.retain()]
        activate = info.activator()
        if isinstance(iterable, list | tuple | range):
            # Sequences are sliced, which is faster than pulling items one by one.
            position = [0]

            def take() -> list[Any]:
                start = position[0]
                position[0] = start + CHUNK
                return list(iterable[start : start + CHUNK])  # type: ignore[index]
        else:
            items = iter(iterable)

            def take() -> list[Any]:
                return list(islice(items, CHUNK))

        def logic(output: OperatorOutput) -> None:
            cap = held[0]
            if cap is None:
                return
            chunk = take()
            if chunk:
                output.session(cap).give_batch(chunk)
            if len(chunk) == CHUNK:
                activate()
            else:
                cap.drop()
                held[0] = None

        return logic

    return source(scope, "ToStream", constructor)
