"""The interface between a scope and the operators (children) inside it.

A :class:`~timelypy.progress.subgraph.Subgraph` schedules children and
collects their progress.  Everything it needs from a child is on
:class:`Operate`:

* its shape (``inputs``, ``outputs``) and *connectivity* (for each input,
  the path summaries to each output), which become a node of the scope's
  reachability graph;
* ``local``: whether its reports are this worker's own (ordinary operators,
  exchanged with every worker) or already global (nested scopes, whose
  counts every worker derives identically);
* ``notify``: per input, when a frontier change should schedule it
  (:class:`FrontierInterest`);
* its progress since the last extraction, as three lists of
  ``{time: count}`` dicts: messages ``consumeds`` per input, capability
  changes ``internals`` per output, messages ``produceds`` per output
  (the scope empties them in place and may keep them: the same dicts for
  the child's lifetime);
* ``initial_internals``: the capabilities it holds when the dataflow starts
  (an ordinary operator holds one per output *per worker*, counted without
  communication; each worker's release is then exchanged);
* ``schedule()``, which runs it and returns whether it must be scheduled
  again for its own sake, and ``shut_down()``, which drops its logic once it
  can never run again.

Children that want the *changes* to their input frontiers (probes, nested
scopes) set ``frontier_changes`` to one :class:`ChangeSink` per input: a
list, or any object with an ``append((time, diff))`` method; the scope
appends ``(time, diff)`` pairs there as it propagates.  Others read their
frontiers from the live implications the scope hands them with
:meth:`Operate.set_input_frontiers`; a child that reads them from outside
its activations (a probe, read between worker steps) sets
``reads_frontiers``, so that enclosing scopes keep them current without
the scope reporting each change to it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Protocol

from timelypy.progress.frontier import MutableAntichain
from timelypy.progress.reachability import Connectivity

__all__ = ["FrontierInterest"]


class FrontierInterest(IntEnum):
    """When a change to an input's frontier schedules the operator."""

    NEVER = 0
    """Never: the operator only reacts to data (``map``, ``filter``)."""
    IF_CAPABILITY = 1
    """Only while the operator holds a capability."""
    ALWAYS = 2
    """On every change (notificators, probes, frontier-aware operators)."""


class ChangeSink(Protocol):
    """Where a scope puts the changes to one input's frontier: a list will do.

    The scope calls ``append((time, diff))`` for every change, in order.
    """

    def append(self, change: tuple[Any, int], /) -> None:
        """Receive one change ``(time, diff)`` to the input's frontier."""
        ...


class Operate:
    """Base class of everything a scope can hold as a child.

    Subclasses fill in the attributes in ``__init__`` and implement
    :meth:`schedule`.
    """

    name: str = "Operator"
    inputs: int = 0
    outputs: int = 0
    local: bool = True

    def __init__(self) -> None:
        self.notify: list[FrontierInterest] = []
        self.connectivity: Connectivity = []
        self.consumeds: list[dict[Any, int]] = []
        self.internals: list[dict[Any, int]] = []
        self.produceds: list[dict[Any, int]] = []
        #: Per input, where the scope appends the changes to its frontier; ``None``
        #: (the default) if the operator does not want them.
        self.frontier_changes: list[ChangeSink] | None = None
        #: Whether something reads the live input frontiers between steps (a probe's
        #: handle): the scope's own input frontiers then matter on every change.
        self.reads_frontiers = False
        #: Index of this child in its scope, and the activation callback; set by the scope.
        self.index = -1
        self.activate: Any = None
        #: Called instead of ``activate`` by a child whose logic has nothing to do
        #: when its progress changes from outside (an input handle's operator): the
        #: scope takes its counts in its next pass without running it.  Set by the scope.
        self.report_changes: Any = None

    def initial_internals(self) -> list[dict[Any, int]]:
        """Capability counts per output when the dataflow starts."""
        return [{} for _ in range(self.outputs)]

    def initial_held(self) -> list[dict[Any, int]]:
        """The worker's own share of :meth:`initial_internals` (diagnostics; ``{}``: unknown)."""
        return [{} for _ in range(self.outputs)]

    def set_input_frontiers(self, frontiers: list[MutableAntichain[Any]]) -> None:
        """Receive the live frontier of each input (the scope's implications)."""

    def watches_frontier(self, port: int) -> bool:
        """Whether a change of input ``port``'s frontier matters to this child.

        True if it schedules the child (``notify``) or goes to its
        ``frontier_changes``; the scope reports no other input's changes.
        """
        if self.notify[port] != FrontierInterest.NEVER:
            return True
        return self.frontier_changes is not None

    def schedule(self) -> bool:
        """Run once; return whether to be scheduled again regardless of events."""
        raise NotImplementedError

    def unread(self, port: int) -> dict[Any, int]:
        """Records waiting unread at input ``port`` on this worker, per time (diagnostics)."""
        return {}

    def shut_down(self) -> None:
        """Drop the logic: inputs are closed and no capability is held."""
