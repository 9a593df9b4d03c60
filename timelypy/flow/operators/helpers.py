"""Small helpers for writing operators' functions.

>>> update = map_dict_value("count", lambda n: n + 1)
>>> update({"name": "a", "count": 1})
{'name': 'a', 'count': 2}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["map_dict_value"]

K = TypeVar("K")
V = TypeVar("V")


def map_dict_value(key: K, mapper: Callable[[V], V]) -> Callable[[dict[K, V]], dict[K, V]]:
    """A function that replaces ``d[key]`` with ``mapper(d[key])`` in place and returns ``d``.

    For ``op.map`` over dict items: ``op.map("inc", up, map_dict_value("n", inc))``.
    """

    def shim(obj: dict[K, V]) -> dict[K, V]:
        obj[key] = mapper(obj[key])
        return obj

    return shim
