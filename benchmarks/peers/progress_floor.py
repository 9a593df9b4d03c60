"""The least an epoch round trip with progress tracking costs in Python: a floor, not an engine.

``runtime_bench``'s ``epoch_round_trip`` sends one record per epoch through
``map`` to a probe and waits until the probe has passed the epoch.
:func:`epoch_round_trip` does the same bookkeeping any progress-tracking
engine must do for that, written out for this one graph (input -> map ->
output -> probe, integer times, one worker) with no engine around it:

- the input keeps a buffer and a capability; ``advance_to`` moves the buffer
  into the map's channel, counts the message at the map's input, and
  downgrades the capability (a release at the old time, a hold at the new);
- a step runs the map if it was activated: it pops the batch, applies the
  function to the batch, hands the result on, and counts the message consumed;
- the step then consolidates the step's changes, applies them to the
  pointstamp counts of the two locations (the input's output and the map's
  input), and when a location's frontier moves, moves its contribution to
  the implications at the probe's location;
- the probe asks whether that frontier is still below the epoch.

What it leaves out is what a general engine adds for generality: operator
and handle objects, sessions and capabilities as values, a scheduler, a
reachability tracker over an arbitrary graph with path summaries, partial
orders, logging, several workers.  ``runtime_bench`` quotes it as the
*python floor*: a timelypy that did only this would run at its speed.

>>> epoch_round_trip(3)
[1, 2, 3]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TypeVar

from benchmarks.peers.plain import add_one

Y = TypeVar("Y")


class _Counts:
    """Pointstamp counts at one location: ``time -> count``, and their least time."""

    __slots__ = ("counts", "frontier")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.frontier: int | None = None

    def update(self, time: int, diff: int) -> bool:
        """Add ``diff`` at ``time``; return whether the least time changed."""
        counts = self.counts
        total = counts.get(time, 0) + diff
        if total:
            counts[time] = total
        else:
            del counts[time]
        least = min(counts) if counts else None
        if least != self.frontier:
            self.frontier = least
            return True
        return False


def epoch_round_trip(n: int, f: Callable[[int], Y] = add_one) -> list[Y]:
    """Send ``0..n-1`` one record per epoch through ``f``, tracking progress; return the outputs.

    After each record the input advances and the loop steps until the
    probe's frontier has passed the epoch, as ``runtime_bench`` does with
    timelypy.  Raises ``AssertionError`` if the probe ever passes an epoch
    before its record arrived.
    """
    out: list[Y] = []
    capability, messages = _Counts(), _Counts()  # the input's output; the map's input
    at_probe = _Counts()  # implications of both at the probe's input
    capability.update(0, 1)
    at_probe.update(0, 1)
    buffer: list[int] = []
    channel: deque[tuple[int, list[int]]] = deque()
    changes: dict[tuple[int, int], int] = {}
    state = {"time": 0, "active": False}

    def advance_to(time: int) -> None:
        held = state["time"]
        if buffer:
            channel.append((held, buffer[:]))
            key = (1, held)
            changes[key] = changes.get(key, 0) + len(buffer)
            buffer.clear()
            state["active"] = True
        key = (0, held)
        changes[key] = changes.get(key, 0) - 1
        key = (0, time)
        changes[key] = changes.get(key, 0) + 1
        state["time"] = time

    def step() -> None:
        if state["active"]:
            state["active"] = False
            while channel:
                time, batch = channel.popleft()
                out.extend([f(x) for x in batch])
                key = (1, time)
                changes[key] = changes.get(key, 0) - len(batch)
        if changes:
            batch_changes = [(key, diff) for key, diff in changes.items() if diff]
            changes.clear()
            locations = (capability, messages)
            for (location, time), diff in batch_changes:
                counts = locations[location]
                before = counts.frontier
                if counts.update(time, diff):
                    if before is not None:
                        at_probe.update(before, -1)
                    if counts.frontier is not None:
                        at_probe.update(counts.frontier, 1)

    for epoch in range(n):
        buffer.append(epoch)
        advance_to(epoch + 1)
        while at_probe.frontier is not None and at_probe.frontier < epoch + 1:
            step()
        if len(out) != epoch + 1:
            raise AssertionError(f"the probe passed epoch {epoch} before its record arrived")
    return out
