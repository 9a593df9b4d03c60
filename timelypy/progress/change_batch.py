"""Change batches: accumulated ``(key, diff)`` updates.

Progress tracking never sends "the count of time ``t`` is now 3"; it sends
*changes*: "the count of ``t`` changed by ``+1``".  A :class:`ChangeBatch`
accumulates such changes, summing the diffs of equal keys; keys whose total
is zero vanish.  Batches are compacted before they are sent, so a batch that
both produced and consumed a message at the same place and time sends
nothing for it.

Timely keeps a vector and sorts it to compact.  Python's ``dict`` does the
summing as updates arrive, so here compaction only drops zero totals, and
iteration order is the order in which keys first appeared (deterministic,
but not sorted).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["ChangeBatch"]

K = TypeVar("K")


class ChangeBatch(Generic[K]):
    """A collection of ``(key, diff)`` updates in which equal keys are summed.

    >>> batch = ChangeBatch()
    >>> batch.update("a", 3)
    >>> batch.extend([("b", 1), ("a", -3)])
    >>> list(batch)
    [('b', 1)]
    >>> batch.drain(), batch.is_empty()
    ([('b', 1)], True)
    """

    __slots__ = ("_updates",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        self._updates: dict[K, int] = {}
        if updates:
            self.extend(updates)

    @classmethod
    def from_elem(cls, key: K, diff: int) -> ChangeBatch[K]:
        """Return a batch holding the single update ``(key, diff)``."""
        batch: ChangeBatch[K] = cls()
        if diff:
            batch._updates[key] = diff
        return batch

    def update(self, key: K, diff: int) -> None:
        """Add ``diff`` to the total of ``key``."""
        updates = self._updates
        updates[key] = updates.get(key, 0) + diff

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        """Add every ``(key, diff)`` of ``updates``."""
        mine = self._updates
        get = mine.get
        for key, diff in updates:
            mine[key] = get(key, 0) + diff

    def compact(self) -> None:
        """Drop the keys whose total is zero."""
        updates = self._updates
        if 0 in updates.values():
            self._updates = {k: d for k, d in updates.items() if d}

    def is_empty(self) -> bool:
        """Return whether every total is zero."""
        self.compact()
        return not self._updates

    def drain(self) -> list[tuple[K, int]]:
        """Return the non-zero ``(key, total)`` pairs and empty the batch."""
        updates = self._updates
        self._updates = {}
        return [(k, d) for k, d in updates.items() if d]

    def clear(self) -> None:
        """Discard every update."""
        self._updates = {}

    def get(self, key: K) -> int:
        """Return the current total of ``key`` (zero if absent)."""
        return self._updates.get(key, 0)

    def as_dict(self) -> dict[K, int]:
        """Return the non-zero totals as a new ``dict``."""
        return {k: d for k, d in self._updates.items() if d}

    def __iter__(self) -> Iterator[tuple[K, int]]:
        self.compact()
        return iter(list(self._updates.items()))

    def __len__(self) -> int:
        self.compact()
        return len(self._updates)

    def __bool__(self) -> bool:
        return not self.is_empty()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeBatch):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self)!r})"

    def __getstate__(self) -> Any:
        return self.as_dict()

    def __setstate__(self, state: Any) -> None:
        self._updates = dict(state)
