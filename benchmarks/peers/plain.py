"""Plain-Python peers: the workloads with no framework at all.

These are the limit a pure-Python engine can approach (DESIGN.md section 3):
each does nothing but call the user's functions once per record, in the
fastest natural plain-Python form. Every other peer, and timelypy, is quoted
as a ratio to these.

Which form, and why (measured on the benchmark inputs, CPython 3.11):

- ``map_filter`` is a list comprehension over ``map(f, ints)`` with ``if
  g(y)``. With Python functions (lambdas) for ``f`` and ``g`` it was the
  fastest of the three natural forms, slightly ahead of
  ``list(filter(g, map(f, ints)))`` and of an explicit ``for`` loop with
  ``append``.
- ``wordcount`` feeds ``collections.Counter`` a generator over
  ``line.split()``; ``Counter`` counts in C. Calling ``Counter.update`` once
  per line was clearly slower; ``chain.from_iterable(map(str.split, lines))``
  was on par.
- ``epoch_round_trip`` is a loop that applies ``f`` to one record per epoch.
  A single-threaded program needs no progress tracking, so this is the cost
  of the map alone: what an engine's per-epoch overhead is added to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["map_filter", "wordcount", "epoch_round_trip", "triple", "is_even", "add_one"]

X = TypeVar("X")
Y = TypeVar("Y")


def map_filter(ints: Iterable[X], f: Callable[[X], Y], g: Callable[[Y], object]) -> list[Y]:
    """Apply ``f`` to every item, keep the results for which ``g`` is true.

    >>> map_filter(range(6), lambda x: x * 3, lambda y: y % 2 == 0)
    [0, 6, 12]
    """
    return [y for y in map(f, ints) if g(y)]


def wordcount(lines: Iterable[str]) -> dict[str, int]:
    """Count the whitespace-separated words of ``lines``.

    Returns a ``collections.Counter`` (a ``dict`` subclass, equal to the plain
    ``dict`` of the same counts).

    >>> sorted(wordcount(["a b", "b c b"]).items())
    [('a', 1), ('b', 3), ('c', 1)]
    """
    return Counter(word for line in lines for word in line.split())


def triple(x: int) -> int:
    """Return ``x * 3``: the map of the map_filter workload."""
    return x * 3


def is_even(y: int) -> bool:
    """Return ``y % 2 == 0``: the filter of the map_filter workload."""
    return y % 2 == 0


def add_one(x: int) -> int:
    """Return ``x + 1``: the map of the epoch round trip."""
    return x + 1


def epoch_round_trip(n: int, f: Callable[[int], Y] = add_one) -> list[Y]:
    """Send records ``0..n-1`` one per epoch through ``f``; return the outputs in order.

    >>> epoch_round_trip(3)
    [1, 2, 3]
    """
    out: list[Y] = []
    append = out.append
    for epoch in range(n):
        append(f(epoch))
    return out
