"""The state of one stateful step on one worker, where a snapshot can read it.

A stateful step (``reduce``, ``stateful_map``, ``reduce_epoch``) keeps its
state in a :class:`StepState`: ``states`` maps each state key to its value
(absent keys start afresh).  When an epoch ends in the step,
:meth:`StepState.close_epoch` is called with it; listeners added with
:meth:`StepState.on_close` then see the keys touched in that epoch and can
read their state, which is what a recovery snapshot at epoch close needs.
Keys are only tracked while someone listens, so a flow without recovery pays
nothing for it.

>>> state = StepState("count", worker_index=0)
>>> closed = []
>>> state.on_close(lambda epoch, keys: closed.append((epoch, sorted(keys))))
>>> state.states["a"] = 1
>>> state.touch_all(0, [("a", 1), ("b", 2)])
>>> state.close_epoch(0)
>>> closed
[(0, ['a', 'b'])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["StepState", "CloseListener", "NO_ACC"]


class _NoAccumulator:
    """The type of :data:`NO_ACC`; pickles as a reference to the one instance."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ACC"

    def __reduce__(self) -> str:
        return "NO_ACC"


#: A window's accumulator before its first value (windowing steps' ``add(acc, value)``).
NO_ACC: Any = _NoAccumulator()

#: Called with ``(epoch, keys touched in that epoch)`` when an epoch ends in a step.
CloseListener = Callable[[int, set[str]], Any]


class StepState:
    """State per state key of step ``step_id`` on worker ``worker_index``."""

    __slots__ = ("_listeners", "_touched", "late", "states", "step_id", "worker_index")

    def __init__(self, step_id: str, worker_index: int) -> None:
        self.step_id = step_id
        self.worker_index = worker_index
        #: state key -> state
        self.states: dict[str, Any] = {}
        self._listeners: list[CloseListener] = []
        # epoch -> keys touched in it (only while someone listens)
        self._touched: dict[int, set[str]] = {}
        #: values a windowing step found late, on this worker
        self.late = 0

    def on_close(self, listener: CloseListener) -> None:
        """Call ``listener(epoch, touched_keys)`` whenever an epoch ends in this step."""
        self._listeners.append(listener)

    def touch_all(self, epoch: int, items: Iterable[tuple[str, Any]]) -> None:
        """Note that the keys of ``items`` were touched in ``epoch``."""
        if self._listeners:
            keys = self._touched.setdefault(epoch, set())
            keys.update(item[0] for item in items)

    def touch_keys(self, epoch: int, keys: Iterable[str]) -> None:
        """Note that ``keys`` were touched in ``epoch``."""
        if self._listeners:
            self._touched.setdefault(epoch, set()).update(keys)

    def close_epoch(self, epoch: int) -> None:
        """``epoch`` has ended in this step: tell the listeners which keys it touched."""
        if self._listeners:
            keys = self._touched.pop(epoch, set())
            for listener in self._listeners:
                listener(epoch, keys)

    def __repr__(self) -> str:
        return f"StepState({self.step_id!r}, worker={self.worker_index}, keys={len(self.states)})"
