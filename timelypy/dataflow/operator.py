"""The operator runtime: an ordinary operator as its scope sees it.

:class:`LeafOperator` is every ordinary operator, built-in or user-written
(:class:`~timelypy.dataflow.builder.OperatorBuilder` makes them; the handles
their logic touches live in :mod:`timelypy.dataflow.handles`).  It keeps the
operator's progress bookkeeping -- messages consumed per input, produced per
output, capability changes per output, the :class:`~timelypy.progress.operate.Operate`
interface -- and runs the user's logic inside an *activation* that:

* opens a borrow scope, so capabilities minted during the activation are
  released at its end unless retained (see
  :mod:`timelypy.dataflow.capability`);
* flushes output buffers at its end, so every record given is sent;
* invalidates the input capabilities it handed out;
* re-activates the operator if it left input messages unread (Timely would
  stall instead).

Its public attributes (``borrowed``, ``activation``, ``running``,
``identity_paths``) are the state capabilities and handles check; nothing
else should touch them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Tee
from timelypy.dataflow.handles import Frontier, OperatorInput, OperatorOutput
from timelypy.order import is_identity_summary
from timelypy.progress.frontier import MutableAntichain
from timelypy.progress.operate import ChangeSink, FrontierInterest, Operate
from timelypy.progress.reachability import Connectivity

__all__ = ["LeafOperator"]

#: ``logic(frontiers)``, run at every activation.
Logic = Callable[[list[Frontier]], Any]


class LeafOperator(Operate):
    """An ordinary operator: inputs, outputs, bookkeeping, and user logic."""

    def __init__(
        self,
        name: str,
        worker_index: int,
        peers: int,
        minimum: Any,
    ) -> None:
        super().__init__()
        self.name = name
        self.worker_index = worker_index
        self.peers = peers
        self.minimum = minimum
        self.logic: Logic | None = None
        self.reschedule = False
        #: Capabilities borrowed by the running constructor or activation (None outside).
        self.borrowed: list[Capability] | None = None
        #: Counts activations (twice each: at start and end); sessions and input
        #: capabilities remember it to know whether they are still good.
        self.activation = 0
        #: Whether the logic is running now.
        self.running = False
        #: Per input, the outputs it reaches without changing the time.
        self.identity_paths: list[set[int]] = []
        #: Outputs that buffer records given one at a time (flushed after each activation).
        self.buffered: list[OperatorOutput[Any]] = []
        #: Whether the operator has no logic to run: its progress only changes from
        #: outside (an input handle's operator), so a change is reported, not scheduled.
        self.passive = False
        #: Per output, the tee its batches go through (set by the builder).
        self.tees: list[Tee] = []
        #: For a fusible operator, ``fuse(time, records)``: what one activation does to
        #: one batch, returning what it sends on (:mod:`timelypy.dataflow.fusion`).
        self.fuse: Callable[[Any, list[Any]], Any] | None = None
        #: Whether the operator's output frontier is always its input's: it has one
        #: input, reaching its one output unchanged, keeps no capability (after its
        #: initial one) and sends only while it runs -- an exchange.  Fusion shares
        #: the two frontiers, as it does a fusible operator's.
        self.passes_through = False
        self._inputs: list[OperatorInput[Any]] = []
        self._queues: list[deque[tuple[Any, list[Any]]]] = []
        self._frontiers: list[Frontier] = []
        #: ``(input, reader)``: each reader gets its input's live frontier whenever it is set.
        self._readers: list[tuple[int, Callable[[MutableAntichain[Any]], None]]] = []

    # -- construction -------------------------------------------------------

    def add_input(
        self, queue: deque[tuple[Any, list[Any]]], interest: FrontierInterest
    ) -> OperatorInput[Any]:
        """Add an input reading from ``queue``."""
        index = self.inputs
        self.inputs += 1
        self.consumeds.append({})
        self.notify.append(interest)
        self.connectivity.append({})
        handle: OperatorInput[Any] = OperatorInput(self, index, queue)
        self._inputs.append(handle)
        self._queues.append(queue)
        if self.frontier_changes is not None:
            self.frontier_changes.append(_IGNORE)
        return handle

    def add_output(self, tee: Tee) -> OperatorOutput[Any]:
        """Add an output sending through ``tee`` to its readers."""
        index = self.outputs
        self.outputs += 1
        self.produceds.append({})
        self.internals.append({})
        self.tees.append(tee)
        handle: OperatorOutput[Any] = OperatorOutput(self, index, tee)
        return handle

    def queue(self, port: int) -> deque[tuple[Any, list[Any]]]:
        """Input ``port``'s queue itself, for fusion to see whether a message waits there."""
        return self._queues[port]

    def unread(self, port: int) -> dict[Any, int]:
        """Records waiting unread in input ``port``'s queue, per time (diagnostics)."""
        waiting: dict[Any, int] = {}
        for time, data in list(self._queues[port]):
            waiting[time] = waiting.get(time, 0) + len(data)
        return waiting

    def watch_frontier(self, input_index: int, sink: ChangeSink) -> None:
        """Append every change of input ``input_index``'s frontier to ``sink`` (as time, diff)."""
        if self.frontier_changes is None:
            self.frontier_changes = [_IGNORE] * self.inputs
        self.frontier_changes[input_index] = sink

    def read_frontier(
        self, input_index: int, reader: Callable[[MutableAntichain[Any]], None]
    ) -> None:
        """Call ``reader`` with input ``input_index``'s live frontier whenever the scope sets it.

        That is when the dataflow is built, and again if fusion has the input
        share an earlier location's frontier.  The reader reads it between
        steps (never changes it); every enclosing scope keeps it current.
        """
        self._readers.append((input_index, reader))
        self.reads_frontiers = True

    def watches_frontier(self, port: int) -> bool:
        """Whether the input is scheduled by, or records, its frontier's changes."""
        if self.notify[port] != FrontierInterest.NEVER:
            return True
        sinks = self.frontier_changes
        return sinks is not None and sinks[port] is not _IGNORE

    def finish_shape(self, connectivity: Connectivity) -> None:
        """Fix the connectivity; compute which input/output paths keep times unchanged."""
        self.connectivity = connectivity
        # Per input, the outputs it reaches without changing the time (sparse: an
        # operator with many inputs and outputs often connects each to few).
        self.identity_paths = [
            {
                output
                for output, summaries in port_conn.items()
                if any(is_identity_summary(s) for s in summaries)
            }
            for port_conn in connectivity
        ]

    def run_constructor(self, constructor: Callable[[list[Capability]], Any]) -> Any:
        """Call ``constructor`` with one borrowed capability per output; return its logic."""
        borrowed: list[Capability] = []
        self.borrowed = borrowed
        caps = [Capability.initial(self, o, self.minimum) for o in range(self.outputs)]
        borrowed.extend(caps)
        try:
            return constructor(caps)
        finally:
            self._end_borrow(borrowed)

    # -- Operate ----------------------------------------------------------------

    def initial_internals(self) -> list[dict[Any, int]]:
        """One capability per output per worker, at the minimum time."""
        return [{self.minimum: self.peers} for _ in range(self.outputs)]

    def initial_held(self) -> list[dict[Any, int]]:
        """The worker's own initial capabilities: one per output."""
        return [{self.minimum: 1} for _ in range(self.outputs)]

    def set_input_frontiers(self, frontiers: list[MutableAntichain[Any]]) -> None:
        """Wrap the scope's live implications as read-only views."""
        self._frontiers = [Frontier(f) for f in frontiers]
        for handle, view in zip(self._inputs, self._frontiers, strict=True):
            handle.frontier = view
        for port, reader in self._readers:
            reader(frontiers[port])

    def schedule(self) -> bool:
        """Run the logic in an activation; return whether it asked to run again."""
        logic = self.logic
        if logic is None:
            return False
        self.activation += 1
        borrowed: list[Capability] = []
        self.borrowed = borrowed
        self.running = True
        try:
            result = logic(self._frontiers)
        finally:
            self.running = False
            buffered = self.buffered
            if buffered:
                for output in buffered:
                    output.flush()
                buffered.clear()
            if borrowed:
                self._end_borrow(borrowed)
            else:
                self.borrowed = None
            self.activation += 1
        for queue in self._queues:
            if queue:
                self.activate()
                break
        if self.reschedule and result:
            # build_reschedule's logic asked to run again: schedule it next step
            # (and keep the scope alive meanwhile, as Timely's incomplete flag does).
            self.activate()
            return True
        return False

    def _end_borrow(self, borrowed: list[Capability]) -> None:
        self.borrowed = None
        for cap in borrowed:
            cap.end_borrow()

    def changed_outside(self) -> None:
        """Progress changed outside an activation: flush, and get scheduled so it is reported.

        A passive operator (no logic to run) only has its counts taken.
        """
        if not self.running:
            buffered = self.buffered
            if buffered:
                for output in buffered:
                    output.flush()
                buffered.clear()
            if self.passive and self.report_changes is not None:
                self.report_changes()
            elif self.activate is not None:
                self.activate()

    def shut_down(self) -> None:
        """Drop the logic and whatever state it holds."""
        self.logic = None

    def __repr__(self) -> str:
        return f"LeafOperator({self.name!r}, index={self.index}, worker={self.worker_index})"


class _Ignore:
    """The frontier changes of an input nobody watches."""

    __slots__ = ()

    def append(self, change: tuple[Any, int]) -> None:
        pass


_IGNORE = _Ignore()
