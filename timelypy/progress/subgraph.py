"""Subgraphs: a scope's children, its tracker, and its progress protocol.

A :class:`Subgraph` is one scope on one worker: the operators built in it
(its *children*, numbered from 1), the reachability :class:`Tracker` over
them, and a :class:`~timelypy.progress.broadcast.Progcaster` to exchange
progress with the same scope on every other worker.  A dataflow is a root
subgraph; an iterative scope or region is a subgraph that is itself a child
of its parent scope.

``schedule()`` follows Timely's order:

1. **accept frontier** -- changes to the parent's frontier at the scope's
   inputs become pointstamps at node 0's sources (in inner time);
2. **harvest inputs** -- records that entered the scope count as messages
   in flight to the inner operators that read them, and as consumed at the
   scope input;
3. **receive** every worker's progress batches;
4. **propagate** -- apply them to the tracker; changes at node 0 are not
   tracked but reported to the parent (a scope input's count becomes
   *consumed*, a scope output's becomes *produced*); changes to input
   frontiers are pushed to the children, scheduling those that care;
   changes to what the scope outputs may still see become the scope's own
   capabilities, reported to the parent;
5. **schedule** active children in index order; a child activated by a
   lower-numbered one during the pass runs in the same pass, others next
   step; each child's progress is extracted right after it runs;
6. **send** this worker's batch to all workers.

A lone worker's root scope is *direct*: its batch would only come back to
itself, so step 6 is skipped and each child's counts go straight into the
tracker's buffered changes as they are extracted (a message produced and
consumed in the same pass cancels there).  The tracker sees the same changes
at the same point of the pass, so every frontier is the one the batch would
have given; a ``"timely/progress"`` logger, which records the batches, turns
this off.

The scope is complete when no child asks to run again and its tracker holds
nothing.  Children that are nested scopes report progress that every worker
computes identically, so it is applied locally (``final``) rather than
exchanged; ordinary operators' reports are exchanged (``local``).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from time import perf_counter
from typing import Any

from timelypy.errors import CycleError
from timelypy.events import Logger, ScheduleEvent, ShutdownEvent
from timelypy.progress.broadcast import Progcaster
from timelypy.progress.frontier import Antichain, MutableAntichain
from timelypy.progress.location import Location, Source, Target
from timelypy.progress.operate import FrontierInterest, Operate
from timelypy.progress.reachability import Builder, Tracker

__all__ = ["Refinement", "Subgraph"]

_ALWAYS = FrontierInterest.ALWAYS
_IF_CAPABILITY = FrontierInterest.IF_CAPABILITY


class Refinement:
    """How a nested scope's timestamps relate to its parent's.

    ``to_inner`` embeds a parent time, ``to_outer`` projects an inner time,
    ``summarize`` projects an inner path summary.  The identity refinement
    serves regions (same timestamps inside and out); iterative scopes use
    :class:`~timelypy.order.ProductType`'s methods.
    """

    __slots__ = ("summarize", "to_inner", "to_outer")

    def __init__(
        self,
        to_inner: Callable[[Any], Any],
        to_outer: Callable[[Any], Any],
        summarize: Callable[[Any], Any],
    ) -> None:
        self.to_inner = to_inner
        self.to_outer = to_outer
        self.summarize = summarize

    @classmethod
    def identity(cls) -> Refinement:
        """The refinement of a region: times and summaries are unchanged."""

        def same(x: Any) -> Any:
            return x

        return cls(same, same, same)

    @classmethod
    def product(cls, ttype: Any) -> Refinement:
        """The refinement of an iterative scope with ``ProductType`` timestamps."""
        return cls(ttype.to_inner, ttype.to_outer, ttype.summarize)


#: Whether scopes time their children's activations, process-wide (off by default:
#: two clock reads per activation cost a few percent of a one-record epoch); switched
#: by :func:`timelypy.progress.metrics.time_operators`.
TIMING = False


class Subgraph(Operate):
    """One scope on one worker, built incrementally and then finalized."""

    local = False

    def __init__(
        self,
        *,
        name: str,
        path: tuple[int, ...],
        worker_index: int,
        peers: int,
        timestamp_type: Any,
        refinement: Refinement | None,
    ) -> None:
        super().__init__()
        self.name = name
        self.path = path
        self.worker_index = worker_index
        self.peers = peers
        self.timestamp_type = timestamp_type
        self.refinement = refinement
        self.inputs = 0
        self.outputs = 0
        self.children: list[Operate | None] = [None]
        self._edge_stash: list[tuple[int, int, int, int]] = []
        self._input_messages: list[dict[Any, int]] = []
        #: Per scope input, the changes to the parent's frontier there, not yet
        #: accepted; the same lists are this scope's ``frontier_changes``.
        self._input_changes: list[list[tuple[Any, int]]] = []
        #: The "timely" event logger, if someone subscribed before the scope was built.
        self.logger: Logger | None = None
        self.progcaster: Progcaster | None = None
        self.tracker: Tracker | None = None
        self._finalized = False
        # scheduling state
        self._pending: set[int] = set()
        self._active_heap: list[int] = []
        #: Whether the scope is running its children now (a pass of :meth:`schedule`).
        self.scheduling = False
        self._current = 0
        self._marked = False
        self._incomplete: list[bool] = []
        self._incomplete_count = 0
        self._local: dict[tuple[int, int, int, Any], int] = {}
        #: Pairs of locations still to share a frontier (:meth:`share_frontiers`).
        self._share_later: list[tuple[Location, Location]] = []
        #: The nodes of every location :meth:`share_frontiers` was asked to join.
        self._sharing: set[int] = set()
        #: Children whose counts changed outside an activation (:meth:`note_changes`).
        self._reported: set[int] = set()
        #: Fused children (:mod:`timelypy.dataflow.fusion`) that sent along an unfused
        #: edge during the running activation; extracted when it ends.
        self.fused_dirty: list[int] = []
        #: True while an input handle's batch runs through the chain fused after it,
        #: outside the scope's pass (:mod:`timelypy.dataflow.fusion`).
        self.fusing = False
        self._final: dict[tuple[int, int, int, Any], int] = {}
        self._direct = False
        #: A direct scope's per-child extraction plan (:meth:`_extract_direct`).
        self._slots: list[list[_Slot]] = []
        self._child_edges: list[list[list[tuple[int, int]]]] = []
        self._output_capabilities: list[MutableAntichain[Any]] = []
        self._shut_down: list[bool] = []
        self._states: list[Any] = []
        #: Timely's demand progress mode (see :meth:`_demanded`); eager sends every batch.
        self.demand = False
        #: Called to have the parent (or the worker) schedule this subgraph.
        self.activate_self: Callable[[], None] = lambda: None
        #: What others call to schedule this scope (records entered, a message arrived).
        self.activate = self._force_mark

    # -- building ---------------------------------------------------------------

    def allocate_child_index(self) -> int:
        """Reserve the index of the next child."""
        self.children.append(None)
        return len(self.children) - 1

    def add_child(self, child: Operate, index: int) -> None:
        """Install ``child`` at a reserved ``index``."""
        if self._finalized:
            raise RuntimeError(f"scope {self.name!r} is already built; cannot add {child.name!r}")
        child.index = index
        self.children[index] = child

        activate = functools.partial(self.activate_child, index)

        if isinstance(child, Subgraph):
            child.activate_self = activate
        else:
            child.activate = activate

            child.report_changes = functools.partial(self.note_changes, index)

    def connect(self, source: tuple[int, int], target: tuple[int, int]) -> None:
        """Record an edge from ``(node, output)`` to ``(node, input)``."""
        self._edge_stash.append((source[0], source[1], target[0], target[1]))

    def new_input(self) -> tuple[int, dict[Any, int]]:
        """Add a scope input; return its index and its entered-message counter."""
        counts: dict[Any, int] = {}
        self._input_messages.append(counts)
        self.inputs += 1
        return self.inputs - 1, counts

    def new_output(self) -> int:
        """Add a scope output; return its index."""
        self.outputs += 1
        return self.outputs - 1

    def child_edges(self, index: int) -> list[list[tuple[int, int]]]:
        """Per output of child ``index`` (inputs, for 0), the ``(node, port)`` it feeds."""
        return self._child_edges[index]

    def child_name(self, index: int) -> str:
        """The name of child ``index`` (``scope`` for node 0)."""
        if index == 0:
            return f"{self.name} (scope boundary)"
        child = self.children[index]
        return child.name if child is not None else f"<unbuilt child {index}>"

    def finalize(self, progcaster: Progcaster) -> None:
        """Build the tracker, install initial capabilities, and propagate them."""
        missing = [i for i, c in enumerate(self.children) if i and c is None]
        if missing:
            raise RuntimeError(
                f"scope {self.name!r}: operators {missing} were reserved but never built "
                "(a feedback handle that was never passed to connect_loop?)"
            )
        children: list[Operate] = self.children  # type: ignore[assignment]
        builder = Builder(self.timestamp_type)
        builder.add_node(0, self.outputs, self.inputs, [{} for _ in range(self.outputs)])
        for index in range(1, len(children)):
            child = children[index]
            builder.add_node(index, child.inputs, child.outputs, child.connectivity)
        self._child_edges = [
            [[] for _ in range(child.outputs if i else self.inputs)]
            for i, child in enumerate(children)
        ]
        for snode, sport, tnode, tport in self._edge_stash:
            builder.add_edge(Source(snode, sport), Target(tnode, tport))
            self._child_edges[snode][sport].append((tnode, tport))
        try:
            tracker, scope_summary = builder.build()
        except CycleError as err:
            names = ", ".join(f"{n} ({self.child_name(n)!r})" for n in err.nodes)
            raise CycleError(
                f"scope {self.name!r}: a cycle through operators {names} does not advance "
                "timestamps; close loops with scope.feedback(summary) and connect_loop",
                err.nodes,
            ) from err
        self.tracker = tracker
        self.progcaster = progcaster
        #: One worker's root scope with nobody logging progress: its batch "sent to
        #: every worker" would only come straight back, so children's counts go
        #: directly into the tracker's buffered changes (:meth:`_extract_direct`).
        self._direct = self.refinement is None and self.peers == 1 and not progcaster.logging
        if self._direct:
            self.schedule = self._schedule_direct  # type: ignore[method-assign]

        if self.refinement is not None:
            summarize = self.refinement.summarize
            self.connectivity = [
                {
                    output: Antichain(summarize(s) for s in antichain)
                    for output, antichain in port_conn.items()
                }
                for port_conn in scope_summary
            ]
        self.consumeds = [{} for _ in range(self.inputs)]
        self.produceds = [{} for _ in range(self.outputs)]
        self.internals = [{} for _ in range(self.outputs)]
        input_changes: list[list[tuple[Any, int]]] = [[] for _ in range(self.inputs)]
        self._input_changes = input_changes
        self.frontier_changes = list(input_changes)
        # Like Timely: the scope cares about its inputs' frontiers as much as its
        # most interested child does.
        # A child that records its frontier's changes, or reads its live frontier
        # between steps (a probe), needs every one propagated to it, whether or not
        # they schedule it.
        interest = max(
            (
                n
                for child in children[1:]
                for n in (
                    child.notify
                    if child.frontier_changes is None and not child.reads_frontiers
                    else [*child.notify, FrontierInterest.ALWAYS]
                )
            ),
            default=FrontierInterest.NEVER,
        )
        if self.demand:
            # Unlike Timely: in demand mode a batch is held while its decrements
            # are implied by other pointstamps, and the scope's own input
            # pointstamps (its view of the outer frontier) are among them.  A
            # scope that did not run when that frontier moved could hold a
            # batch forever on every worker at once.
            interest = FrontierInterest.ALWAYS
        self.notify = [interest] * self.inputs
        self._output_capabilities = [MutableAntichain() for _ in range(self.outputs)]
        self._incomplete = [False] + [True] * (len(children) - 1)
        self._incomplete_count = len(children) - 1
        self._shut_down = [False] * len(children)

        per_operator = [tracker.node_state(i) for i in range(len(children))]
        self._states = per_operator
        final = self._final
        #: Per child and output, the capabilities it holds on this worker (the tracker
        #: only knows their sum over all workers); not kept by a direct scope, whose
        #: tracker counts only this worker's (read them with :meth:`held_by`).
        self.held: list[list[dict[Any, int]]] = [
            [{} for _ in range(child.outputs)] if child is not None else [] for child in children
        ]
        #: Per child, [unused, records consumed, records produced, seconds in its
        #: schedule() while TIMING] on this worker (fixed-size lists: safe to read from
        #: another thread); activations are the child's own count.
        self.stats: list[list[Any]] = [[0, 0, 0, 0.0] for _ in children]
        #: How often this scope ran (its children count their own activations).
        self.rounds = 0
        if self._direct:
            self._slots = [
                _slots_of(child, index, self._child_edges[index]) if child is not None else []
                for index, child in enumerate(children)
            ]
        for index in range(1, len(children)):
            child = children[index]
            child.set_input_frontiers([port.implications for port in per_operator[index].targets])
            for output, counts in enumerate(child.initial_internals()):
                for time, diff in counts.items():
                    key = (index, 1, output, time)
                    final[key] = final.get(key, 0) + diff
            if not self._direct:
                self.held[index] = child.initial_held()
        self._finalized = True
        tracker.report_only(
            Location.new_target(index, port)
            for index in range(1, len(children))
            for port in range(children[index].inputs)
            if children[index].watches_frontier(port)
        )
        self._propagate_pointstamps()
        # Every child runs once at the start.
        self._pending.update(range(1, len(children)))

    def initial_internals(self) -> list[dict[Any, int]]:
        """The capabilities this scope holds at its outputs (in outer time) at start."""
        initial = [dict(counts) for counts in self.internals]
        for counts in self.internals:
            counts.clear()
        return initial

    # -- activation -------------------------------------------------------------

    def activate_child(self, index: int) -> None:
        """Schedule child ``index``: this pass if it comes later, else next step."""
        if self.scheduling and index > self._current:
            heapq.heappush(self._active_heap, index)
            return
        self._pending.add(index)
        if not self._marked:
            self._marked = True
            self.activate_self()

    def share_frontiers(self, links: list[tuple[Location, Location]]) -> None:
        """Have each ``(earlier, later)`` pair of locations share one frontier from now on.

        For operator fusion (:mod:`timelypy.dataflow.fusion`): ``later`` will
        never hold a pointstamp, so its frontier is always ``earlier``'s and
        one update serves both (:meth:`Tracker.alias`).  A pair that cannot
        be joined yet -- other workers' initial capabilities still counted --
        is joined after a later propagation.
        """
        self._share_later = links
        self._sharing = {location.node for link in links for location in link}
        self._join_frontiers()

    def _join_frontiers(self) -> None:
        tracker: Tracker = self.tracker  # type: ignore[assignment]
        links = self._share_later
        left = tracker.alias(links)
        if len(left) != len(links):
            # Aliased inputs have a new live frontier: hand it to their operators.  Not
            # only this call's: a location joined earlier moves with its group when the
            # group's head joins another.
            for node in sorted(self._sharing):
                child = self.children[node]
                if child is not None:
                    child.set_input_frontiers(
                        [port.implications for port in tracker.node_state(node).targets]
                    )
        self._share_later = left

    def note_changes(self, index: int) -> None:
        """Take child ``index``'s progress counts in the next pass, without running it."""
        self._reported.add(index)
        if not self._marked:
            self._marked = True
            self.activate_self()

    def _force_mark(self) -> None:
        self._marked = True
        self.activate_self()

    # -- scheduling -------------------------------------------------------------

    def schedule(self) -> bool:
        """Run one round of the scope's progress protocol; return whether incomplete."""
        # Activations before the children run are consumed by this very round.
        self._marked = True
        self.rounds += 1
        if self.refinement is not None:
            self._accept_frontier()
            self._harvest_inputs()
        progcaster: Progcaster = self.progcaster  # type: ignore[assignment]
        tracker: Tracker = self.tracker  # type: ignore[assignment]
        root = self.refinement is None
        if root:
            # No boundary to translate: received batches go straight to the tracker.
            progcaster.recv_by_port(tracker.target_changes, tracker.source_changes)
        else:
            progcaster.recv(self._final)
        self._propagate_pointstamps()
        self._run_children()
        if self._local:
            if self.peers == 1:
                # Broadcasting to every worker means delivering to this one.
                progcaster.deliver_to_self(self._local, self._final)
                self._local = {}
            else:
                if self.demand and self._final:
                    # What nested scopes reported may be what makes the batch demanded.
                    self._propagate_pointstamps()
                if not self.demand or self._demanded():
                    # The batch goes to every other worker, and this one applies it
                    # now rather than receiving it through its own mailbox next step.
                    if root:
                        progcaster.send_by_port(
                            self._local, tracker.target_changes, tracker.source_changes
                        )
                    else:
                        progcaster.send(self._local, self._final)
                    self._local = {}
                # else keep accumulating: nothing in the batch can advance a frontier yet
        if self._final or tracker.target_changes or tracker.source_changes:
            # Children this activates have the scope scheduled again (activate_child).
            self._propagate_pointstamps()
        # Children activated by the last propagation (say, by their inputs'
        # frontiers becoming empty) must still run before the scope is done.
        if self._incomplete_count > 0 or self._pending:
            return True
        return self.tracker.tracking_anything()  # type: ignore[union-attr]

    def _schedule_direct(self) -> bool:
        """:meth:`schedule` of a direct scope, which has no batch to receive or send.

        Its children's counts went straight into the tracker's buffers as
        they were extracted, so one propagation at the end of the pass
        applies them all (and leaves the buffers empty).
        """
        self.rounds += 1
        self._run_children()
        tracker: Tracker = self.tracker  # type: ignore[assignment]
        if tracker.target_changes or tracker.source_changes:
            # Children this activates have the scope scheduled again (activate_child).
            self._propagate_pointstamps()
        if self._incomplete_count > 0 or self._pending:
            return True
        # (A pointstamp held is the common case: no call for it.)
        return tracker.total_counts > 0 or tracker.tracking_anything()

    def _run_children(self) -> None:
        """Take the counts of the children that reported, then run the activated ones in order."""
        # Activations before the children run are consumed by this very pass.
        self._marked = True
        reported = self._reported
        if reported:
            # A reader this activates waits in ``_pending``, and runs below.
            if len(reported) == 1 and self._direct:
                # The common small step: the set stays, empty, for later reports.
                self._extract_direct(reported.pop())
            else:
                self._reported = set()
                for index in sorted(reported):
                    if self._direct:
                        self._extract_direct(index)
                    else:
                        child: Operate = self.children[index]  # type: ignore[assignment]
                        self._extract(child, index, self._local if child.local else self._final)
        pending = self._pending
        if not pending:
            # Only counts to take (an input handle's, between steps): no pass to set up.
            self._marked = False
            return
        heap = self._active_heap  # empty outside a pass
        if len(pending) == 1:
            heap.append(pending.pop())  # the set stays, empty, for what the pass activates
        else:
            self._pending = set()
            heap.extend(pending)
            heapq.heapify(heap)
        self._marked = False
        previous = 0
        self.scheduling = True
        try:
            while heap:
                index = heapq.heappop(heap)
                if index > previous:
                    self._current = index
                    self._activate_child(index)
                    previous = index
        finally:
            self.scheduling = False
            self._current = 0
            heap.clear()

    def _activate_child(self, index: int) -> None:
        child: Operate = self.children[index]  # type: ignore[assignment]
        logger = self.logger
        if logger is not None:
            logger.log(ScheduleEvent((*self.path, index), True))
        if TIMING:
            started = perf_counter()
            try:
                incomplete = child.schedule()
            except Exception as exc:
                self.locate(exc, child, index)
                raise
            self.stats[index][3] += perf_counter() - started
        else:
            try:
                incomplete = child.schedule()
            except Exception as exc:
                self.locate(exc, child, index)
                raise
        if logger is not None:
            logger.log(ScheduleEvent((*self.path, index), False))
        if incomplete != self._incomplete[index]:
            self._incomplete_count += 1 if incomplete else -1
            self._incomplete[index] = incomplete
        if not incomplete and not self._shut_down[index]:
            state = self._states[index]
            if state.cap_counts == 0 and _all_empty(state.targets):
                if _all_pointstamps_empty(state.sources):
                    self._shut_down[index] = True
                    child.shut_down()
                    if logger is not None:
                        logger.log(ShutdownEvent((*self.path, index)))
        # Then the fused operators that ran inside this activation (timelypy.dataflow.fusion).
        dirty = self.fused_dirty
        if self._direct:
            self._extract_direct(index)
            for member in dirty:
                self._extract_direct(member)
        else:
            children = self.children
            into = self._local if child.local else self._final
            self._extract(child, index, into)
            for member in dirty:
                self._extract(children[member], member, into)  # type: ignore[arg-type]
        dirty.clear()

    def _demanded(self) -> bool:
        """Demand mode: whether the batch holds a change that may advance some frontier.

        That is a decrement at a pointstamp no other one implies, or any change
        at the scope's boundary (node 0).  Holding the rest back is safe: a
        batch is held whole, so no increment travels without the decrements
        that justify it.
        """
        states = self._states
        for (node, kind, port, time), diff in self._local.items():
            if node == 0:
                return True
            if diff < 0:
                state = states[node]
                info = state.targets[port] if kind == 0 else state.sources[port]
                if info.is_global(time):
                    return True
        return False

    def locate(self, exc: Exception, child: Operate, index: int) -> None:
        """Note on ``exc`` which operator and worker raised it (once, innermost wins)."""
        if getattr(exc, "timelypy_operator", None) is not None:
            return
        try:
            exc.timelypy_operator = child.name  # type: ignore[attr-defined]
            exc.timelypy_worker = self.worker_index  # type: ignore[attr-defined]
        except AttributeError:
            pass
        exc.add_note(
            f"raised in operator {child.name!r} (address {(*self.path, index)}) "
            f"on worker {self.worker_index}"
        )

    def _extract(
        self, child: Operate, index: int, into: dict[tuple[int, int, int, Any], int]
    ) -> None:
        get = into.get
        for port, counts in enumerate(child.consumeds):
            if counts:
                total = 0
                for time, n in counts.items():
                    key = (index, 0, port, time)
                    into[key] = get(key, 0) - n
                    total += n
                self.stats[index][1] += total
                counts.clear()
        for port, counts in enumerate(child.internals):
            if counts:
                for time, n in counts.items():
                    key = (index, 1, port, time)
                    into[key] = get(key, 0) + n
                _keep_held(self.held[index][port], counts)
                counts.clear()
        edges = self._child_edges[index]
        for port, counts in enumerate(child.produceds):
            if counts:
                targets = edges[port]
                total = 0
                for time, n in counts.items():
                    total += n
                    for tnode, tport in targets:
                        key = (tnode, 0, tport, time)
                        into[key] = get(key, 0) + n
                self.stats[index][2] += total
                counts.clear()
                # Readers of what was produced run later in this pass (or next step).
                for tnode, _ in targets:
                    if tnode:
                        self.activate_child(tnode)

    def _extract_direct(self, index: int) -> None:
        """:meth:`_extract` for a direct scope: the counts go into the tracker's buffers.

        The same changes :meth:`_extract` puts in the batch, which a lone
        worker would deliver to itself and apply before propagating; here
        they skip the batch.  Node 0 never appears: a root scope has no
        inputs or outputs.  Each of the child's count dicts is one
        :data:`_Slot`, made when the scope was built.  A time whose change
        comes to nothing (a message produced and consumed in one pass) is
        dropped, and so is a port left with none.
        """
        tracker: Tracker = self.tracker  # type: ignore[assignment]
        stats = self.stats[index]
        for counts, kind, keys, sign, stat, readers in self._slots[index]:
            if not counts:
                continue
            into = tracker.source_changes if kind else tracker.target_changes
            for key in keys:
                buffered = into.get(key)
                if buffered is None:
                    into[key] = counts.copy() if sign > 0 else {t: -n for t, n in counts.items()}
                    continue
                for time, n in counts.items():
                    total = buffered.get(time, 0) + sign * n
                    if total:
                        buffered[time] = total
                    else:
                        buffered.pop(time, None)
                if not buffered:
                    del into[key]
            if stat:
                stats[stat] += sum(counts.values())
            counts.clear()
            # Readers of what was produced run later in this pass (or next step).
            for tnode in readers:
                self.activate_child(tnode)

    def _accept_frontier(self) -> None:
        to_inner = self.refinement.to_inner  # type: ignore[union-attr]
        update = self.tracker.buffer_source  # type: ignore[union-attr]
        for port, changes in enumerate(self._input_changes):
            if changes:
                for time, diff in changes:
                    update(0, port, to_inner(time), diff)
                changes.clear()

    def _harvest_inputs(self) -> None:
        local = self._local
        get = local.get
        edges = self._child_edges[0]
        for port, counts in enumerate(self._input_messages):
            if counts:
                targets = edges[port]
                for time, n in counts.items():
                    for tnode, tport in targets:
                        key = (tnode, 0, tport, time)
                        local[key] = get(key, 0) + n
                    key = (0, 1, port, time)
                    local[key] = get(key, 0) - n
                counts.clear()

    def _propagate_pointstamps(self) -> None:
        tracker: Tracker = self.tracker  # type: ignore[assignment]
        if not self._final and not tracker.target_changes and not tracker.source_changes:
            return
        if self._final:
            final = self._final
            self._final = {}
            to_outer = self.refinement.to_outer if self.refinement is not None else None
            update_target = tracker.buffer_target
            update_source = tracker.buffer_source
            for (node, kind, port, time), diff in final.items():
                if not diff:
                    continue
                if node == 0:
                    if to_outer is None:
                        continue  # a root scope has no inputs or outputs
                    if kind == 1:
                        counts = self.consumeds[port]
                        outer = to_outer(time)
                        counts[outer] = counts.get(outer, 0) - diff
                    else:
                        counts = self.produceds[port]
                        outer = to_outer(time)
                        counts[outer] = counts.get(outer, 0) + diff
                elif kind == 0:
                    update_target(node, port, time, diff)
                else:
                    update_source(node, port, time, diff)
        tracker.propagate_all()
        if self._share_later:
            self._join_frontiers()

        pushed = tracker.drain_pushed() if tracker.pushed_changes else None
        if pushed:
            children = self.children
            for (node, _, port, time), diff in pushed:
                # Only the inputs of children that watch their frontiers are reported.
                child: Operate = children[node]  # type: ignore[assignment]
                interest = child.notify[port]
                if interest == _ALWAYS or (
                    interest == _IF_CAPABILITY and tracker.node_state(node).cap_counts > 0
                ):
                    self.activate_child(node)
                sinks = child.frontier_changes
                if sinks is not None:
                    sinks[port].append((time, diff))
        emptied = tracker.drain_emptied() if tracker.emptied else None
        if emptied:
            # A child whose inputs closed and which holds nothing runs once more, to shut down.
            for node in set(emptied):
                if node:
                    state = tracker.node_state(node)
                    if state.cap_counts == 0 and _all_empty(state.targets):
                        self.activate_child(node)

        if self.outputs:
            to_outer = self.refinement.to_outer  # type: ignore[union-attr]
            for output in range(self.outputs):
                changes = tracker.drain_output(output)
                if changes:
                    in_outer: dict[Any, int] = {}
                    for time, diff in changes:
                        t = to_outer(time)
                        in_outer[t] = in_outer.get(t, 0) + diff
                    reported = self._output_capabilities[output].update_iter(in_outer.items())
                    internal = self.internals[output]
                    for time, diff in reported:
                        internal[time] = internal.get(time, 0) + diff

    def shut_down(self) -> None:
        """Shut down every child that has not been."""
        for index, child in enumerate(self.children):
            if index and child is not None and not self._shut_down[index]:
                self._shut_down[index] = True
                child.shut_down()

    # -- introspection ----------------------------------------------------------

    def held_by(self, index: int) -> list[dict[Any, int]]:
        """Per output, the capabilities child ``index`` holds on this worker, by time.

        What :mod:`~timelypy.progress.explain` names as this worker's share.  A
        direct scope's tracker counts this worker's capabilities only, so they
        are read there rather than kept a second time.
        """
        if self._direct and self.tracker is not None:
            return [
                dict(info.pointstamps.updates()) for info in self.tracker.node_state(index).sources
            ]
        return self.held[index]

    def holders(self) -> list[str]:
        """Describe what keeps this scope from completing (for stall diagnostics)."""
        tracker = self.tracker
        if tracker is None:
            return []
        result = []
        for index in range(1, len(self.children)):
            state = tracker.node_state(index)
            for port, info in enumerate(state.sources):
                times = info.pointstamps.frontier()
                if times:
                    result.append(
                        f"{self.child_name(index)!r} holds capabilities at {list(times)} "
                        f"on output {port}"
                    )
            for port, info in enumerate(state.targets):
                times = info.pointstamps.frontier()
                if times:
                    result.append(
                        f"messages at {list(times)} are in flight to "
                        f"{self.child_name(index)!r} input {port}"
                    )
            child = self.children[index]
            if isinstance(child, Subgraph):
                result.extend(child.holders())
        return result


#: One count dict of a child, as a direct scope extracts it: ``(counts, kind, keys,
#: sign, stat, readers)`` -- the tracker buffer it goes to (0: targets, 1:
#: sources) at each of ``keys`` times ``sign``, the ``stats`` entry counting its
#: records (0: none) and the children that read what it counts as produced.
_Slot = tuple[dict[Any, int], int, tuple[tuple[int, int], ...], int, int, tuple[int, ...]]


def _slots_of(child: Operate, index: int, edges: list[list[tuple[int, int]]]) -> list[_Slot]:
    """The :data:`_Slot` of each of ``child``'s count dicts: consumed, held, then produced."""
    slots: list[_Slot] = [
        (counts, 0, ((index, port),), -1, 1, ()) for port, counts in enumerate(child.consumeds)
    ]
    slots.extend(
        (counts, 1, ((index, port),), 1, 0, ()) for port, counts in enumerate(child.internals)
    )
    slots.extend(
        (counts, 0, tuple(edges[port]), 1, 2, tuple(tnode for tnode, _ in edges[port]))
        for port, counts in enumerate(child.produceds)
    )
    return slots


def _keep_held(held: dict[Any, int], changes: dict[Any, int]) -> None:
    """Add a child's capability ``changes`` to this worker's own share of them, ``held``."""
    for time, n in changes.items():
        total = held.get(time, 0) + n
        if total:
            held[time] = total
        else:
            held.pop(time, None)  # n may be 0: a change undone within the step


def _all_empty(ports: list[Any]) -> bool:
    for port in ports:
        if not port.implications.is_empty():
            return False
    return True


def _all_pointstamps_empty(ports: list[Any]) -> bool:
    for port in ports:
        if not port.pointstamps.is_empty():
            return False
    return True
