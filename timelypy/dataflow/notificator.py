"""Notificators: act when a time is complete.

An operator that aggregates per time (a count, a window, a join) must know
when it has seen every record of a time.  It asks to be *notified* at that
time by handing a capability to a notificator; the notificator gives the
capability back once no input frontier element is ``<=`` the time, so the
operator can send its result at that time and then release it.

* :class:`FrontierNotificator` -- the state an operator keeps: pending
  requests and the times that became available.  Deliveries come in time
  order (the total order, which extends the partial order), each requested
  time once, with the number of requests that were merged.
* :class:`Notificator` -- what ``unary_notify``/``binary_notify`` hand their
  logic at each activation: a :class:`FrontierNotificator` bound to the
  operator's current input frontiers.
* :class:`EagerNotificator` -- the Timely model's *eager notificator*:
  processing logic runs as items arrive while their epoch is the frontier
  epoch, and end-of-epoch logic runs as each epoch closes, in epoch order.
  Items of later epochs wait until every earlier epoch has closed, so state
  sees items in epoch order; this is what stateful steps and snapshots are
  built on.

Capabilities given to a notificator are owned by it.  Capabilities it
delivers are borrowed by the running activation (released when it ends,
unless retained) -- see :mod:`timelypy.dataflow.capability`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from timelypy.dataflow.capability import Capability

__all__ = ["FrontierNotificator", "Notificator", "EagerNotificator"]


class _FrontierLike(Protocol):
    def less_equal(self, time: Any) -> bool: ...

    def less_than(self, time: Any) -> bool: ...


def _complete(frontiers: Sequence[_FrontierLike], time: Any) -> bool:
    """Whether no frontier element is ``<=`` ``time``."""
    for frontier in frontiers:
        if frontier.less_equal(time):
            return False
    return True


class FrontierNotificator:
    """Pending notification requests and the times that became available."""

    __slots__ = ("_available", "_pending", "_seq")

    def __init__(self, capabilities: Sequence[Capability] = ()) -> None:
        self._pending: list[list[Any]] = []  # [capability, count]
        self._available: list[tuple[Any, int, Capability, int]] = []
        self._seq = itertools.count()
        for cap in capabilities:
            self.notify_at(cap)

    def notify_at(self, cap: Capability) -> None:
        """Request a notification at ``cap.time``; the notificator takes ``cap``."""
        cap.hold("notify at")
        self._pending.append([cap, 1])

    def notify_at_frontiered(self, cap: Capability, frontiers: Sequence[_FrontierLike]) -> None:
        """Like :meth:`notify_at`, but available at once if ``cap.time`` is already complete."""
        cap.hold("notify at")
        if _complete(frontiers, cap.time):
            heapq.heappush(self._available, (cap.time, next(self._seq), cap, 1))
        else:
            self._pending.append([cap, 1])

    def make_available(self, frontiers: Sequence[_FrontierLike]) -> None:
        """Move every pending request whose time is complete to the available ones."""
        pending = self._pending
        if not pending:
            return
        merged: dict[Any, list[Any]] = {}
        for entry in pending:
            cap, count = entry
            if not cap.is_valid:
                continue  # the user dropped it: nothing to deliver
            existing = merged.get(cap.time)
            if existing is None:
                merged[cap.time] = entry
            else:
                existing[1] += count
                cap.release_held()
        still: list[list[Any]] = []
        for time, entry in merged.items():
            if _complete(frontiers, time):
                heapq.heappush(self._available, (time, next(self._seq), entry[0], entry[1]))
            else:
                still.append(entry)
        self._pending = still

    def next_count(self, frontiers: Sequence[_FrontierLike]) -> tuple[Capability, int] | None:
        """Return the earliest available ``(capability, count)``, or ``None``."""
        available = self._available
        if not available:
            self.make_available(frontiers)
            if not available:
                return None
        time, _, cap, count = heapq.heappop(available)
        while available and available[0][0] == time:
            _, _, extra, more = heapq.heappop(available)
            count += more
            extra.release_held()
        return cap.lend(), count

    def next(self, frontiers: Sequence[_FrontierLike]) -> Capability | None:
        """Return the earliest available capability, or ``None``."""
        found = self.next_count(frontiers)
        return None if found is None else found[0]

    def for_each(
        self,
        frontiers: Sequence[_FrontierLike],
        logic: Callable[[Capability, FrontierNotificator], Any],
    ) -> None:
        """Call ``logic(cap, self)`` for every available time, in time order."""
        self.make_available(frontiers)
        while (cap := self.next(frontiers)) is not None:
            logic(cap, self)

    def monotonic(self, frontiers: Sequence[_FrontierLike]) -> Notificator:
        """Bind to ``frontiers`` as a :class:`Notificator`."""
        return Notificator(frontiers, self)

    def pending(self) -> list[tuple[Capability, int]]:
        """The requests not yet available, as ``(capability, count)``."""
        return [(cap, count) for cap, count in self._pending]

    def pending_times(self) -> list[Any]:
        """The times of pending and available requests, sorted."""
        return sorted({cap.time for cap, _ in self._pending} | {e[0] for e in self._available})

    def __len__(self) -> int:
        return len(self._pending) + len(self._available)


class Notificator:
    """A :class:`FrontierNotificator` bound to an operator's current input frontiers.

    Iterating yields ``(capability, count)`` for every complete time, in
    time order.
    """

    __slots__ = ("_frontiers", "_inner")

    def __init__(self, frontiers: Sequence[_FrontierLike], inner: FrontierNotificator) -> None:
        self._frontiers = frontiers
        self._inner = inner
        inner.make_available(frontiers)

    def notify_at(self, cap: Capability) -> None:
        """Request a notification at ``cap.time`` (taking ``cap``)."""
        self._inner.notify_at_frontiered(cap, self._frontiers)

    def for_each(self, logic: Callable[[Capability, int, Notificator], Any]) -> None:
        """Call ``logic(cap, count, self)`` for every complete time, in time order."""
        while (found := self._inner.next_count(self._frontiers)) is not None:
            logic(found[0], found[1], self)

    def frontier(self, input_index: int) -> _FrontierLike:
        """The frontier of input ``input_index``."""
        return self._frontiers[input_index]

    def __iter__(self) -> Iterator[tuple[Capability, int]]:
        while (found := self._inner.next_count(self._frontiers)) is not None:
            yield found

    def __repr__(self) -> str:
        return f"Notificator(pending={self._inner.pending_times()!r})"


class EagerNotificator:
    """Run logic as items arrive in the frontier epoch, and end logic as epochs close.

    Items are queued per epoch with :meth:`notify_at`.  :meth:`for_each`
    then, in epoch order:

    * for a *closed* epoch (no input frontier element is ``<=`` it): runs
      ``eager_logic(cap, items)`` on its queued items, then
      ``close_logic(cap)``; the capability is then released when the
      activation ends, unless ``close_logic`` retains it;
    * for the *frontier* epoch (no frontier element is strictly less than
      it, and every earlier queued epoch has closed): runs
      ``eager_logic(cap, items)`` on the items queued so far and keeps the
      capability for when the epoch closes (``eager_logic`` may send with
      ``cap`` but must not drop it: the notificator owns it);
    * stops at the first epoch that is neither: its items, and those of
      every later epoch, wait.

    >>> # in an operator's logic:
    >>> # for cap, items in input:
    >>> #     eager.notify_at(cap.retain(), items)
    >>> # eager.for_each([input.frontier], apply_items, snapshot_and_emit)
    """

    __slots__ = ("_epochs",)

    def __init__(self) -> None:
        # time -> [capability, queued items]
        self._epochs: dict[Any, list[Any]] = {}

    def notify_at(self, cap: Capability, items: Sequence[Any] = ()) -> None:
        """Queue ``items`` for ``cap.time`` and ask for its close; takes ``cap``."""
        cap.hold("notify at")
        entry = self._epochs.get(cap.time)
        if entry is None:
            self._epochs[cap.time] = [cap, list(items)]
        else:
            cap.release_held()
            entry[1].extend(items)

    def for_each(
        self,
        frontiers: Sequence[_FrontierLike],
        eager_logic: Callable[[Capability, list[Any]], Any],
        close_logic: Callable[[Capability], Any],
    ) -> None:
        """Run eager and close logic as described in the class documentation."""
        epochs = self._epochs
        if not epochs:
            return
        for time in sorted(epochs):
            entry = epochs[time]
            cap, items = entry
            if _complete(frontiers, time):
                if items:
                    entry[1] = []
                    eager_logic(cap, items)
                del epochs[time]
                close_logic(cap.lend())
            elif not any(f.less_than(time) for f in frontiers):
                if items:
                    entry[1] = []
                    eager_logic(cap, items)
                break
            else:
                break

    def pending(self) -> list[Any]:
        """The epochs with a pending close, in order."""
        return sorted(self._epochs)

    def __len__(self) -> int:
        return len(self._epochs)
