"""Antichains: the frontiers of progress tracking.

A *frontier* is the set of times that may still appear somewhere.  With
partially ordered times it is not a single time but an **antichain**: a set of
mutually incomparable times.  A time ``t`` is *complete* at a frontier when no
frontier element is ``<=`` ``t``.

* :class:`Antichain` is a plain antichain: inserting a time keeps only the
  minimal elements.
* :class:`MutableAntichain` holds *counts* of times (capabilities, messages in
  flight) and exposes the antichain of minimal times whose accumulated count
  is positive.  Updating it reports how that frontier changed, which is what
  the reachability tracker propagates.  Negative counts are allowed (they
  are transient in the progress protocol) and simply do not contribute.

Both learn the comparison function from the first timestamp they see (see
:func:`timelypy.order.less_equal_fn`); mixing timestamp types raises
:class:`~timelypy.errors.TimestampError` before any state changes.  For
``int`` times the frontier has at most one element and the code takes a
shorter path.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from timelypy.errors import TimestampError
from timelypy.order import less_equal_fn

__all__ = ["Antichain", "MutableAntichain"]

T = TypeVar("T")

_INT_LE = operator.le


def _wrong_kind(expected: type, time: Any) -> TimestampError:
    return TimestampError(
        f"cannot mix timestamp {time!r} ({type(time).__name__}) with {expected.__name__} "
        "timestamps: all timestamps in one frontier must have the same type"
    )


def _cannot_compare(times: Iterable[Any], exc: Exception) -> TimestampError:
    shown = ", ".join(f"{t!r} ({type(t).__name__})" for t in list(times)[:4])
    err = TimestampError(f"cannot compare timestamps {shown}: {exc}")
    err.__cause__ = exc
    return err


class Antichain(Generic[T]):
    """A set of mutually incomparable times, kept minimal under insertion.

    >>> from timelypy.order import Product
    >>> frontier = Antichain([Product(2, 0), Product(0, 2)])
    >>> frontier.insert(Product(3, 3))   # dominated: ignored
    False
    >>> frontier.insert(Product(0, 0))   # dominates both: replaces them
    True
    >>> frontier
    Antichain([(0, 0)])
    >>> frontier.less_equal(Product(0, 5)), frontier.less_than(Product(0, 0))
    (True, False)
    """

    __slots__ = ("_elements", "_kind", "_le")

    def __init__(self, elements: Iterable[T] = ()) -> None:
        self._elements: list[T] = []
        self._le: Callable[[Any, Any], bool] | None = None
        self._kind: type | None = None
        for element in elements:
            self.insert(element)

    @classmethod
    def from_iter(cls, elements: Iterable[T]) -> Antichain[T]:
        """Return the antichain of the minimal elements of ``elements``."""
        return cls(elements)

    @classmethod
    def from_elem(cls, element: T) -> Antichain[T]:
        """Return the antichain holding exactly ``element``."""
        return cls((element,))

    def _comparator(self, time: Any) -> Callable[[Any, Any], bool]:
        le = self._le
        if le is None:
            le = self._le = less_equal_fn(time)
            self._kind = type(time)
        elif type(time) is not self._kind:
            raise _wrong_kind(self._kind, time)  # type: ignore[arg-type]
        return le

    def insert(self, element: T) -> bool:
        """Insert ``element`` unless some element is ``<=`` it; return whether it was added.

        Elements that are ``>=`` the new one are removed.
        """
        le = self._comparator(element)
        elements = self._elements
        try:
            for e in elements:
                if le(e, element):
                    return False
            if elements:
                self._elements = [e for e in elements if not le(element, e)]
        except TypeError as exc:
            raise _cannot_compare([element, *elements], exc) from exc
        self._elements.append(element)
        return True

    def extend(self, elements: Iterable[T]) -> bool:
        """Insert every element; return whether any was added."""
        added = False
        for element in elements:
            added |= self.insert(element)
        return added

    def less_than(self, time: Any) -> bool:
        """Return whether some element is strictly less than ``time``."""
        if not self._elements:
            return False
        le = self._comparator(time)
        return any(le(e, time) and e != time for e in self._elements)

    def less_equal(self, time: Any) -> bool:
        """Return whether some element is ``<=`` ``time`` (``time`` is not yet complete)."""
        if not self._elements:
            return False
        le = self._comparator(time)
        return any(le(e, time) for e in self._elements)

    def dominates(self, other: Antichain[T] | Iterable[T]) -> bool:
        """Return whether every element of ``other`` is ``>=`` some element of ``self``.

        This is the partial order on frontiers: ``a.dominates(b)`` means ``a``
        is no further advanced than ``b``.  The empty antichain is dominated
        by every antichain and dominates only the empty one.
        """
        others = other.elements() if isinstance(other, Antichain) else tuple(other)
        return all(self.less_equal(t) for t in others)

    def elements(self) -> tuple[T, ...]:
        """Return the elements, in insertion order."""
        return tuple(self._elements)

    def is_empty(self) -> bool:
        """Return whether the antichain has no elements (every time is complete)."""
        return not self._elements

    def clear(self) -> None:
        """Remove every element."""
        self._elements = []

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._elements))

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __contains__(self, time: object) -> bool:
        return time in self._elements

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            mine, theirs = self._elements, other._elements
            return len(mine) == len(theirs) and all(t in theirs for t in mine)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        elements: list[Any] = self._elements  # summaries need not be orderable
        try:
            shown = sorted(elements)
        except TypeError:
            shown = list(elements)
        return f"Antichain({shown!r})"


class MutableAntichain(Generic[T]):
    """Counts of times, and the antichain of minimal times with a positive count.

    ``update_iter`` applies ``(time, diff)`` updates and returns the changes to
    the frontier as ``(time, +1)`` for a new element and ``(time, -1)`` for a
    removed one.

    >>> frontier = MutableAntichain.from_elem(1)
    >>> frontier.update_iter([(1, -1), (2, 7)])
    [(1, -1), (2, 1)]
    >>> frontier.frontier(), frontier.count_for(2)
    ((2,), 7)
    """

    __slots__ = ("_counts", "_frontier", "_kind", "_le")

    def __init__(self) -> None:
        self._counts: dict[T, int] = {}
        self._frontier: list[T] = []
        self._le: Callable[[Any, Any], bool] | None = None
        self._kind: type | None = None

    @classmethod
    def from_elem(cls, bottom: T) -> MutableAntichain[T]:
        """Return a MutableAntichain holding one count of ``bottom``."""
        result: MutableAntichain[T] = cls()
        result.update_iter(((bottom, 1),))
        return result

    def frontier(self) -> tuple[T, ...]:
        """Return the minimal times with a positive count."""
        return tuple(self._frontier)

    def antichain(self) -> Antichain[T]:
        """Return the frontier as a new :class:`Antichain`."""
        return Antichain(self._frontier)

    def is_empty(self) -> bool:
        """Return whether no time has a positive count (the frontier is empty)."""
        return not self._frontier

    def less_than(self, time: Any) -> bool:
        """Return whether some frontier element is strictly less than ``time``."""
        le = self._le
        if le is None:
            return False
        return any(le(f, time) and f != time for f in self._frontier)

    def less_equal(self, time: Any) -> bool:
        """Return whether some frontier element is ``<=`` ``time``."""
        le = self._le
        if le is None:
            return False
        return any(le(f, time) for f in self._frontier)

    def count_for(self, time: Any) -> int:
        """Return the accumulated count of exactly ``time``."""
        return self._counts.get(time, 0)

    def updates(self) -> list[tuple[T, int]]:
        """Return every ``(time, count)`` with a non-zero count."""
        return list(self._counts.items())

    def has_counts(self) -> bool:
        """Return whether any time has a non-zero count (negative counts included)."""
        return bool(self._counts)

    def clear(self) -> None:
        """Forget every count."""
        self._counts = {}
        self._frontier = []

    def update_iter(self, updates: Iterable[tuple[T, int]]) -> list[tuple[T, int]]:
        """Apply ``(time, diff)`` updates; return the frontier's changes.

        The frontier is recomputed only when an update could change it: an
        update strictly beyond some frontier element cannot, and neither can a
        decrement at a time no frontier element is ``<=``.
        """
        le = self._le
        if le is None:
            # The first times seen fix the kind; ints take the int methods from now on.
            updates = list(updates)
            if not updates:
                return []
            first = updates[0][0]
            le = self._le = less_equal_fn(first)
            self._kind = type(first)
            if le is _INT_LE:
                self.__class__ = _IntMutableAntichain
                return self.update_iter(updates)
        counts = self._counts
        frontier: list[Any] = self._frontier
        kind = self._kind
        rebuild = False
        for time, diff in updates:
            if type(time) is not kind:
                raise _wrong_kind(kind, time)  # type: ignore[arg-type]
            if not rebuild:
                try:
                    beyond = False
                    before = True
                    for f in frontier:
                        # le was learned from the first time, whose type all share.
                        if le(f, time):
                            before = False
                            if f != time:
                                beyond = True
                                break
                except TypeError as exc:
                    raise _cannot_compare([time, *frontier], exc) from exc
                rebuild = not (beyond or (diff < 0 and before))
            total = counts.get(time, 0) + diff
            if total:
                counts[time] = total
            else:
                counts.pop(time, None)
        if rebuild:
            return self._rebuild()
        return []

    def update(self, time: T, diff: int) -> list[tuple[T, int]]:
        """Apply one update; return the frontier's changes (``update_iter([(time, diff)])``)."""
        return self.update_iter(((time, diff),))

    def _rebuild(self) -> list[tuple[T, int]]:
        old: list[Any] = self._frontier
        counts: dict[Any, int] = self._counts  # times are ordered by ``<`` here
        le = self._le
        try:
            positive = sorted(t for t, c in counts.items() if c > 0)
            new: list[Any] = []
            for t in positive:
                for f in new:
                    if le(f, t):  # type: ignore[misc]
                        break
                else:
                    new.append(t)
        except TypeError as exc:
            raise _cannot_compare(counts, exc) from exc
        self._frontier = new
        if old == new:
            return []
        changes = [(t, -1) for t in old if t not in new]
        changes.extend((t, 1) for t in new if t not in old)
        if len(changes) > 1:
            changes.sort()
        return changes

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self._frontier!r}, counts={self._counts!r})"


class _IntMutableAntichain(MutableAntichain[Any]):
    """A :class:`MutableAntichain` of ``int`` times, whose frontier is their least positive time.

    A :class:`MutableAntichain` becomes one when the first time it sees is an
    ``int``, so the hot paths of the progress tracker (almost always over
    integer epochs) run these methods without dispatching on the kind.
    """

    __slots__ = ()

    def update_iter(self, updates: Iterable[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """Apply ``(time, diff)`` updates; return the changes of the least positive time."""
        counts: dict[Any, int] = self._counts
        frontier: list[Any] = self._frontier
        old = new = frontier[0] if frontier else None  # new: the least positive time so far
        lost = False  # whether ``new`` lost its positive count (then the counts are scanned)
        for time, diff in updates:
            if type(time) is not int:
                raise _wrong_kind(int, time)
            total = counts.get(time, 0) + diff
            if total:
                counts[time] = total
                if total > 0:
                    if new is None or time < new:
                        new = time
                        lost = False
                    continue
            else:
                counts.pop(time, None)
            if time == new:
                lost = True
        if lost:
            new = None
            for time, count in counts.items():
                if count > 0 and (new is None or time < new):
                    new = time
        if new == old:
            return []
        if new is None:
            frontier.clear()
            return [(old, -1)]
        if old is None:
            frontier.append(new)
            return [(new, 1)]
        frontier[0] = new
        return [(old, -1), (new, 1)] if old < new else [(new, 1), (old, -1)]

    def update(self, time: T, diff: int) -> list[tuple[T, int]]:
        """Apply one update; return the frontier's changes.

        Equivalent to ``update_iter([(time, diff)])``, deciding every case
        without scanning the counts, except when the last count of the
        frontier element goes away.
        """
        if type(time) is not int:
            raise _wrong_kind(int, time)
        counts = self._counts
        total = counts.get(time, 0) + diff
        if total:
            counts[time] = total
        else:
            counts.pop(time, None)
        frontier: list[Any] = self._frontier
        if not frontier:
            if total > 0:  # no positive count existed, so this is the minimum
                frontier.append(time)
                return [(time, 1)]
            return []
        f = frontier[0]
        if f < time:
            return []
        if time < f:
            if diff > 0 and total > 0:
                frontier[0] = time
                return [(time, 1), (f, -1)]
            return []
        if total > 0:  # the frontier element keeps a positive count
            return []
        return self._rebuild()

    def _rebuild(self) -> list[tuple[Any, int]]:
        old: list[Any] = self._frontier
        new_min: Any = None
        for t, c in self._counts.items():
            if c > 0 and (new_min is None or t < new_min):
                new_min = t
        new = [] if new_min is None else [new_min]
        if old == new:
            return []
        self._frontier = new
        if not old:
            return [(new_min, 1)]
        if not new:
            return [(old[0], -1)]
        if old[0] < new_min:
            return [(old[0], -1), (new_min, 1)]
        return [(new_min, 1), (old[0], -1)]

    def less_than(self, time: Any) -> bool:
        """Return whether some frontier element is strictly less than ``time``."""
        f = self._frontier
        return bool(f) and f[0] < time

    def less_equal(self, time: Any) -> bool:
        """Return whether some frontier element is ``<=`` ``time``."""
        f = self._frontier
        return bool(f) and f[0] <= time
