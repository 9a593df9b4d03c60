"""A flow that moves records holding buffers (``bytearray``, ``memoryview``) between workers.

Shared by the backends' tests (threads, processes, Spark): each record is
made on the worker that reads its number, routed by key to another worker,
and described (type, format, shape, writability, bytes, at every level) after
it arrived, so a record that changed type on the way shows in the result.
"""

from __future__ import annotations

import array
from typing import Any

from timelypy.flow import Dataflow


def make(n: int) -> tuple[str, Any]:
    """Record ``n``: ``(key, value)``, the key spreading records over the workers."""
    value: Any
    kind = n % 5
    if kind == 0:
        value = bytearray(f"ba{n}".encode())
    elif kind == 1:
        value = memoryview(array.array("i", [n, -n]))
    elif kind == 2:
        value = memoryview(f"view{n:04}".encode()).cast("B", [2, 4])  # read-only, 2-D
    elif kind == 3:
        value = {"nested": [bytearray(b"x" * (n % 3)), (b"bytes", n)]}
    else:
        value = (memoryview(bytearray(b"w")), f"plain{n}")
    return f"k{n % 7}", value


def describe(value: Any) -> Any:
    """``value`` as plain, comparable data that names every type in it."""
    kind = type(value).__name__
    if isinstance(value, memoryview):
        return (kind, value.format, value.shape, value.readonly, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (kind, [describe(item) for item in value])
    if isinstance(value, dict):
        return (kind, sorted((repr(k), describe(v)) for k, v in value.items()))
    return (kind, repr(value))


def _keep(state: Any, value: Any) -> tuple[Any, Any]:
    return None, value


def buffer_flow(describe_after: bool = True) -> Dataflow:
    """Numbers in; records made, exchanged by key (``stateful_map``), then described."""
    flow = Dataflow()
    flow.map(make)
    flow.stateful_map("route", lambda key: None, _keep)
    if describe_after:
        flow.map(lambda item: (item[0], describe(item[1])))
    flow.capture()
    return flow


def expected(numbers: list[int]) -> list[Any]:
    """What every backend must give: each record described as it was made."""
    return sorted(repr((key, describe(value))) for key, value in map(make, numbers))
