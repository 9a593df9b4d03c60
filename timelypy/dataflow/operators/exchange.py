"""``exchange``: move each record to the worker its key chooses.

``exchange(key)`` sends a record to worker ``key(record) % peers`` (a bit
mask for power-of-two worker counts, as Timely does).  ``key`` must return
an ``int``; for strings use :func:`timelypy.stable_hash`, which is the same
in every process, unlike Python's ``hash``.

>>> import timelypy
>>> def program(worker):
...     seen = []
...     worker.dataflow(lambda scope: scope.to_stream(range(4))
...                     .exchange(lambda x: x).inspect(seen.append))
...     worker.step_while(worker.has_dataflows)
...     return sorted(seen)
>>> timelypy.execute(timelypy.Config.process(2), program)
[[0, 0, 2, 2], [1, 1, 3, 3]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.channels import Exchange

if TYPE_CHECKING:
    from timelypy.dataflow.stream import Stream

__all__ = ["exchange"]


def exchange(stream: Stream, key: Callable[[Any], int]) -> Stream:
    """Route each record to worker ``key(record) % peers``."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                out.session(cap).give_batch(data)

        return logic

    return stream.unary(Exchange(key), "Exchange", constructor)
