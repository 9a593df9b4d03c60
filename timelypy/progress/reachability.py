"""Reachability: which times can still arrive where.

A scope's progress state is a multiset of *pointstamps* ``(location, time)``:
capabilities held at operator outputs (sources) and messages in flight to
operator inputs (targets).  A pointstamp at ``l`` with time ``t`` *could
result in* time ``s(t)`` at every location ``l'`` reachable from ``l`` along
a path with summary ``s``.  The **implications** at a location are the
minimal times that some pointstamp could result in there; at an operator
input they are exactly that input's frontier.

:class:`Builder` describes the graph: nodes with their internal
*connectivity* (for each input, the summaries to each output) and edges from
outputs to inputs.  :meth:`Builder.build` checks that every cycle advances
time, computes how each port reaches the scope's outputs, and returns a
:class:`Tracker`.

:class:`Tracker` maintains the implications incrementally.  Updates to
pointstamp counts are buffered (``update_source`` / ``update_target``) and
applied by :meth:`Tracker.propagate_all`:

1. each port's buffered updates go through its ``pointstamps``
   :class:`~timelypy.progress.MutableAntichain`; only changes to that
   frontier continue, and they also update the scope outputs' summaries;
2. a worklist ordered by ``(time, location)`` carries frontier changes:
   at a target through the node's connectivity to its sources, at a source
   along the edges to targets, each step filtered through that location's
   ``implications`` MutableAntichain.  Equal ``(time, location)`` entries are
   summed first, so changes that cancel never travel.  The order by *time*
   first matters: when a pointstamp on a cycle is retracted, the cycle's own
   implications would otherwise keep supporting one another, one time later
   on every lap; processed in time order, the retraction and the phantom
   meet at the same ``(time, location)`` and cancel within one lap.  Graphs
   without any cycle cannot have that problem; for them the tracker visits
   each location once, in topological order, applying every change waiting
   there in one update (a capability moving from ``t`` to ``t + 1`` then
   travels as one update per location instead of two waves).

Every change to an implications frontier is recorded in :meth:`Tracker.pushed`,
which is how operators learn their new input frontiers.  The cost is
proportional to the number of frontier *changes* times the path length, not
to the number of records: the runtime reports counts per batch.

Node 0 is the scope seen from inside (see :mod:`timelypy.progress.location`):
its targets are the scope's outputs and its sources its inputs.  The summary
from each scope input to each scope output, which an enclosing scope uses as
the connectivity of the nested one, is the second result of
:meth:`Builder.build`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from timelypy.errors import CycleError, PortError, SummaryError, TimelyError, TimestampError
from timelypy.order import (
    U64_MAX,
    Product,
    ProductType,
    followed_by,
    identity_summary,
    is_identity_summary,
)
from timelypy.progress.change_batch import ChangeBatch
from timelypy.progress.frontier import Antichain, MutableAntichain
from timelypy.progress.location import Location, Port, PortKind, Source, Target

__all__ = [
    "Builder",
    "Tracker",
    "PortInformation",
]

#: For one input: output index -> antichain of path summaries to that output.
PortConnectivity = dict[int, Antichain[Any]]
#: For each input of a node, its :data:`PortConnectivity`.
Connectivity = list[PortConnectivity]

_TARGET = PortKind.TARGET
_SOURCE = PortKind.SOURCE
#: The two kinds of port, targets (0) then sources (1), as ``_pointstamp_changes`` visits them.
_KINDS = (0, 1)


def _apply(summary: Any, time: Any) -> Any | None:
    """``results_in`` with the ``int`` case inlined (it is on the hot path)."""
    if type(summary) is int:
        result = time + summary
        return result if result <= U64_MAX else None
    return summary.results_in(time)


def _fused_pointstamp(kind: int, node: int, port: int) -> TimelyError:
    return TimelyError(
        f"a pointstamp at {'input' if kind == 0 else 'output'} {port} of node "
        f"{node}, whose frontier is shared with the location before it (operator "
        "fusion): a fused operator must never hold a capability"
    )


def _wait(
    pending: dict[int, dict[Any, int]],
    heap: list[int],
    location: int,
    changes: list[tuple[Any, int]],
) -> None:
    """Add ``changes`` to what ``location`` waits to apply; queue it if it waited for nothing."""
    waiting = pending.get(location)
    if waiting is None:
        waiting = pending[location] = {}
        heapq.heappush(heap, location)
    for time, diff in changes:
        waiting[time] = waiting.get(time, 0) + diff


def _as_antichain(value: Any, where: str) -> Antichain[Any]:
    if isinstance(value, Antichain):
        return value
    if value is None:
        return Antichain()
    if type(value) is int or isinstance(value, Product):
        return Antichain((value,))
    try:
        return Antichain(value)
    except TypeError as exc:
        if isinstance(exc, TimestampError):
            raise SummaryError(f"{where}: {exc}") from exc
        raise SummaryError(
            f"{where}: expected an Antichain or a list of path summaries, got {value!r}"
        ) from exc


def _check_summary(summary: Any, ttype: Any, where: str) -> None:
    if ttype is int:
        if type(summary) is not int or summary < 0:
            raise SummaryError(
                f"{where}: summary {summary!r} ({type(summary).__name__}) does not fit int "
                "timestamps: use a non-negative int"
            )
    elif isinstance(ttype, ProductType):
        if type(summary) is not Product:
            raise SummaryError(
                f"{where}: summary {summary!r} ({type(summary).__name__}) does not fit "
                f"{ttype!r} timestamps: use a Product of summaries"
            )
        _check_summary(summary[0], ttype.outer, where)
        _check_summary(summary[1], ttype.inner, where)


def normalize_connectivity(
    summaries: Sequence[Any], inputs: int, outputs: int, node: int, ttype: Any = None
) -> Connectivity:
    """Return ``summaries`` as a :data:`Connectivity`, validating ports and types.

    Each input's entry may be a mapping ``{output: summaries}`` or a sequence
    indexed by output; ``summaries`` is an :class:`Antichain`, a list of
    summaries, a single ``int``/``Product`` summary, or ``None``/empty for
    "not connected".
    """
    if len(summaries) != inputs:
        raise PortError(
            f"node {node}: connectivity lists {len(summaries)} inputs, but the node has "
            f"{inputs}; give one entry per input"
        )
    result: Connectivity = []
    for input_index, per_input in enumerate(summaries):
        items: Iterable[tuple[int, Any]]
        if isinstance(per_input, Mapping):
            items = per_input.items()
        elif per_input is None:
            items = ()
        else:
            items = enumerate(per_input)
        port_conn: PortConnectivity = {}
        for output, value in items:
            where = f"node {node}, input {input_index} -> output {output}"
            if not isinstance(output, int) or not 0 <= output < outputs:
                raise PortError(
                    f"node {node}: input {input_index} names output {output!r}, but the node "
                    f"has {outputs} output(s)"
                )
            antichain = _as_antichain(value, where)
            if ttype is not None:
                for summary in antichain:
                    _check_summary(summary, ttype, where)
            if antichain:
                port_conn[output] = antichain
        result.append(port_conn)
    return result


class Builder:
    """Describes a scope's graph: nodes, their connectivity, and edges.

    >>> builder = Builder(int)
    >>> builder.add_node(0, 1, 1, [{0: [0]}])
    >>> builder.add_node(1, 1, 1, [{0: [0]}])
    >>> builder.add_node(2, 1, 1, [{0: [1]}])     # the feedback: +1
    >>> builder.add_edge(Source(0, 0), Target(1, 0))
    >>> builder.add_edge(Source(1, 0), Target(2, 0))
    >>> builder.add_edge(Source(2, 0), Target(0, 0))
    >>> tracker, _ = builder.build()
    >>> tracker.update_source(Source(0, 0), 17, 1)
    >>> tracker.propagate_all()
    >>> sorted((loc.node, t) for (loc, t), d in tracker.pushed() if loc.is_target)
    [(0, 18), (1, 17), (2, 17)]
    """

    def __init__(self, timestamp_type: Any = int) -> None:
        self.timestamp_type = timestamp_type
        self.nodes: list[Connectivity] = []
        self.edges: list[list[list[Target]]] = []
        self.shape: list[tuple[int, int]] = []

    def add_node(self, index: int, inputs: int, outputs: int, summaries: Sequence[Any]) -> None:
        """Declare node ``index`` with ``inputs`` inputs, ``outputs`` outputs and connectivity.

        ``summaries[i]`` gives, for input ``i``, the path summaries to each
        output (see :func:`normalize_connectivity`).  A missing output means
        the input cannot reach it.
        """
        if not isinstance(index, int) or index < 0:
            raise PortError(f"node index must be a non-negative int, got {index!r}")
        if inputs < 0 or outputs < 0:
            raise PortError(f"node {index}: negative port count ({inputs} in, {outputs} out)")
        connectivity = normalize_connectivity(
            summaries, inputs, outputs, index, self.timestamp_type
        )
        while len(self.nodes) <= index:
            self.nodes.append([])
            self.edges.append([])
            self.shape.append((0, 0))
        self.nodes[index] = connectivity
        if len(self.edges[index]) != outputs:
            self.edges[index] = [[] for _ in range(outputs)]
        self.shape[index] = (inputs, outputs)

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect output ``source`` to input ``target``."""
        self._check_source(source)
        self._check_target(target)
        self.edges[source.node][source.port].append(target)

    def _check_source(self, source: Source) -> None:
        if not isinstance(source, Source):
            raise PortError(f"expected a Source(node, port), got {source!r}")
        if source.node >= len(self.shape) or not 0 <= source.port < self.shape[source.node][1]:
            outputs = self.shape[source.node][1] if source.node < len(self.shape) else 0
            raise PortError(
                f"{source!r} does not exist: node {source.node} has {outputs} output(s); "
                "add the node before its edges"
            )

    def _check_target(self, target: Target) -> None:
        if not isinstance(target, Target):
            raise PortError(f"expected a Target(node, port), got {target!r}")
        if target.node >= len(self.shape) or not 0 <= target.port < self.shape[target.node][0]:
            inputs = self.shape[target.node][0] if target.node < len(self.shape) else 0
            raise PortError(
                f"{target!r} does not exist: node {target.node} has {inputs} input(s); "
                "add the node before its edges"
            )

    # -- cycles ---------------------------------------------------------------

    def _identity_graph(self) -> dict[Location, list[Location]]:
        """Successors along edges and along identity (non-advancing) summaries."""
        succ: dict[Location, list[Location]] = {}
        for node, outputs in enumerate(self.edges):
            for output, targets in enumerate(outputs):
                succ.setdefault(Location.new_source(node, output), []).extend(
                    Location.from_target(t) for t in targets
                )
        for node, connectivity in enumerate(self.nodes):
            for input_index, port_conn in enumerate(connectivity):
                target = succ.setdefault(Location.new_target(node, input_index), [])
                for output, antichain in port_conn.items():
                    for summary in antichain:
                        if is_identity_summary(summary):
                            target.append(Location.new_source(node, output))
        return succ

    def find_cycle(self) -> list[Location] | None:
        """Return the locations of a cycle along which time does not advance, if any."""
        succ = self._identity_graph()
        in_degree: dict[Location, int] = dict.fromkeys(succ, 0)
        for targets in succ.values():
            for loc in targets:
                in_degree[loc] = in_degree.get(loc, 0) + 1
        ready = [loc for loc, degree in in_degree.items() if degree == 0]
        while ready:
            loc = ready.pop()
            del in_degree[loc]
            for nxt in succ.get(loc, ()):
                in_degree[nxt] -= 1
                if in_degree[nxt] == 0:
                    ready.append(nxt)
        if not in_degree:
            return None
        # Every remaining location has a remaining predecessor: walk backwards.
        pred: dict[Location, Location] = {}
        for loc in in_degree:
            for nxt in succ.get(loc, ()):
                if nxt in in_degree:
                    pred.setdefault(nxt, loc)
        start = min(in_degree)
        seen: dict[Location, int] = {}
        walk: list[Location] = []
        loc = start
        while loc not in seen:
            seen[loc] = len(walk)
            walk.append(loc)
            loc = pred[loc]
        cycle = walk[seen[loc] :]
        cycle.reverse()
        return cycle

    def is_acyclic(self) -> bool:
        """Return whether every cycle in the graph strictly advances time."""
        return self.find_cycle() is None

    def build(self) -> tuple[Tracker, Connectivity]:
        """Check the graph and return ``(tracker, scope_summary)``.

        ``scope_summary[i]`` maps each scope output to the summaries of the
        paths from scope input ``i`` (node 0's source ``i``) to it.

        Raises :class:`~timelypy.errors.CycleError` naming the nodes of a
        cycle along which timestamps would not advance.
        """
        for node, outputs in enumerate(self.edges):
            for output, targets in enumerate(outputs):
                for target in targets:
                    self._check_source(Source(node, output))
                    self._check_target(target)
        cycle = self.find_cycle()
        if cycle is not None:
            nodes: list[int] = []
            for loc in cycle:
                if loc.node not in nodes:
                    nodes.append(loc.node)
            path = " -> ".join(
                f"{'Target' if loc.is_target else 'Source'}({loc.node}, {loc.port.index})"
                for loc in [*cycle, cycle[0]]
            )
            raise CycleError(
                f"cycle without a timestamp increment through nodes {nodes}: {path}. "
                "Every cycle must pass through a feedback edge whose summary advances time "
                "(e.g. scope.feedback(1) or Product(0, 1) in an iterative scope)",
                nodes,
            )
        if not self.shape:
            raise PortError("a scope needs at least node 0 (the scope itself)")
        tracker = Tracker(self)
        return tracker, tracker.scope_summary


class PortInformation:
    """Progress state of one port: its own pointstamps and their implications.

    At a location nothing else reaches (the output of an operator without
    inputs, or a scope's input inside the scope, in an acyclic scope) the
    implications are exactly the pointstamps' frontier, one count each.
    There the tracker makes ``implications`` the ``pointstamps`` object
    itself (``mirrored``), so one update maintains both: read only its
    frontier as the implications, not its counts.  A location that shares
    such a location's frontier (:meth:`Tracker.alias`) shares that antichain
    and is ``mirrored`` too.
    """

    __slots__ = ("implications", "mirrored", "pointstamps")

    def __init__(self) -> None:
        self.pointstamps: MutableAntichain[Any] = MutableAntichain()
        self.implications: MutableAntichain[Any] = MutableAntichain()
        #: Whether ``implications`` is ``pointstamps`` (see the class docstring).
        self.mirrored = False

    def mirror(self) -> None:
        """Let ``implications`` be ``pointstamps``: nothing but them reaches this location."""
        if self.pointstamps.has_counts() or self.implications.has_counts():
            raise ValueError("a location is mirrored before it holds anything")
        self.implications = self.pointstamps
        self.mirrored = True

    def implication_counts(self) -> dict[Any, int]:
        """The implications' counts by time (one per frontier element where mirrored)."""
        if self.mirrored:
            return dict.fromkeys(self.implications.frontier(), 1)
        return dict(self.implications.updates())

    def is_global(self, time: Any) -> bool:
        """Whether a pointstamp at ``time`` here is not implied by another one.

        True when no implication is strictly less than ``time`` and at most one
        pointstamp accounts for ``time`` itself; decrementing such a pointstamp
        may advance a frontier.
        """
        if self.mirrored:  # each frontier element is implied once, by itself
            return not self.implications.less_than(time)
        return not self.implications.less_than(time) and self.implications.count_for(time) <= 1


class PerOperator:
    """Progress state of one node: per input and per output port information."""

    __slots__ = ("cap_counts", "sources", "targets")

    def __init__(self, inputs: int, outputs: int) -> None:
        self.targets = [PortInformation() for _ in range(inputs)]
        self.sources = [PortInformation() for _ in range(outputs)]
        #: Number of elements in the pointstamp frontiers of this node's outputs.
        self.cap_counts = 0


def summarize_outputs(
    nodes: Sequence[Connectivity], edges: Sequence[Sequence[Sequence[Target]]], identity: Any
) -> dict[Location, PortConnectivity]:
    """For every port that can reach a scope output, the summaries to each one.

    Walks backwards from the scope outputs (node 0's targets), composing
    operator summaries with :func:`~timelypy.order.followed_by` and keeping
    only minimal summaries per ``(port, output)``.
    """
    reverse: dict[Location, list[Location]] = {}
    for node, outputs in enumerate(edges):
        for output, targets in enumerate(outputs):
            for target in targets:
                reverse.setdefault(Location.from_target(target), []).append(
                    Location.new_source(node, output)
                )
    reverse_internal: dict[Location, list[tuple[int, Antichain[Any]]]] = {}
    for node, connectivity in enumerate(nodes):
        for input_index, port_conn in enumerate(connectivity):
            for output, antichain in port_conn.items():
                reverse_internal.setdefault(Location.new_source(node, output), []).append(
                    (input_index, antichain)
                )

    results: dict[Location, PortConnectivity] = {}
    worklist: deque[tuple[Location, int, Any]] = deque()
    for outputs in edges:
        for targets in outputs:
            for target in targets:
                if target.node == 0:
                    worklist.append((Location.from_target(target), target.port, identity))

    def record(location: Location, output: int, summary: Any) -> bool:
        per_output = results.setdefault(location, {})
        antichain = per_output.get(output)
        if antichain is None:
            antichain = per_output[output] = Antichain()
        return antichain.insert(summary)

    while worklist:
        location, output, summary = worklist.popleft()
        if location.is_source:
            for input_index, antichain in reverse_internal.get(location, ()):
                new_location = Location.new_target(location.node, input_index)
                for op_summary in antichain:
                    combined = followed_by(op_summary, summary)
                    if combined is not None and record(new_location, output, combined):
                        worklist.append((new_location, output, combined))
        else:
            for source in reverse.get(location, ()):
                if record(source, output, summary):
                    worklist.append((source, output, summary))
    return results


class Tracker:
    """Maintains pointstamp counts and their implications at every location.

    Build one with :meth:`Builder.build`.  Updates are buffered until
    :meth:`propagate_all`; the changes it makes to implication frontiers are
    available from :meth:`pushed`, and changes to what the scope's outputs
    may still see from :meth:`pushed_output`.

    A scope reads and fills these attributes directly, on its hot path (an
    attribute test costs less than a call); nothing else should:

    * ``target_changes``, ``source_changes`` -- the buffered changes, per
      ``(node, port)`` a ``{time: diff}``; a scope adds to them in bulk (a
      progress batch received, a child's counts), keeping no ``{}`` for a
      port.  :meth:`propagate_all` replaces both dicts: read them again
      after it.
    * ``pushed_changes`` -- non-empty when :meth:`drain_pushed` has changes.
    * ``emptied`` -- non-empty when :meth:`drain_emptied` has nodes.
    * ``total_counts`` -- how many pointstamps are held (read only).
    """

    def __init__(self, builder: Builder) -> None:
        self.timestamp_type = builder.timestamp_type
        shape = list(builder.shape)
        self._shape = shape
        self._per_operator = [PerOperator(i, o) for i, o in shape]
        # node -> input -> [(output, summary)]
        self._node_summaries: list[list[list[tuple[int, Any]]]] = [
            [
                [(output, s) for output, antichain in port_conn.items() for s in antichain]
                for port_conn in connectivity
            ]
            for connectivity in builder.nodes
        ]
        # node -> output -> [(target node, target port)]
        self._edges: list[list[list[tuple[int, int]]]] = [
            [[(t.node, t.port) for t in targets] for targets in outputs]
            for outputs in builder.edges
        ]
        identity = identity_summary(builder.timestamp_type)
        output_summaries = summarize_outputs(builder.nodes, builder.edges, identity)
        scope_inputs = shape[0][1]
        scope_outputs = shape[0][0]
        self.scope_summary: Connectivity = [{} for _ in range(scope_inputs)]
        # Per node and port, its summaries to the scope's outputs (read into _port_table).
        target_summaries: list[list[list[tuple[int, Any]]]] = [
            [[] for _ in range(i)] for i, _ in shape
        ]
        source_summaries: list[list[list[tuple[int, Any]]]] = [
            [[] for _ in range(o)] for _, o in shape
        ]
        for location, port_conn in output_summaries.items():
            flat = [(output, s) for output, antichain in port_conn.items() for s in antichain]
            index = location.port.index
            if location.node == 0:
                if location.is_source:
                    self.scope_summary[index] = port_conn
            elif location.is_target:
                target_summaries[location.node][index] = flat
            else:
                source_summaries[location.node][index] = flat

        # Per port, what propagation needs: the implications, their update method
        # and where changes go next (summaries to outputs, or edges to targets).
        self._target_info: list[list[tuple[Any, list[tuple[int, Any]], Any]]] = [
            [
                (
                    state.targets[port].implications.update,
                    self._node_summaries[node][port],
                    state.targets[port].implications,
                )
                for port in range(len(state.targets))
            ]
            for node, state in enumerate(self._per_operator)
        ]
        self._source_info: list[list[tuple[Any, list[tuple[int, int]], Any]]] = [
            [
                (
                    state.sources[port].implications.update,
                    self._edges[node][port],
                    state.sources[port].implications,
                )
                for port in range(len(state.sources))
            ]
            for node, state in enumerate(self._per_operator)
        ]
        self.target_changes: dict[tuple[int, int], dict[Any, int]] = {}
        self.source_changes: dict[tuple[int, int], dict[Any, int]] = {}
        self._worklist: list[tuple[Any, int, int, int, int]] = []
        #: Which locations' implication changes :meth:`pushed` reports: ``None`` for
        #: every location, or per ``(kind, node, port)`` (see :meth:`report_only`).
        self._watched: set[tuple[int, int, int]] | None = None
        #: The same per kind, node and port, for the cyclic worklist (``None``: all).
        self._watched_ports: tuple[list[list[bool]], list[list[bool]]] | None = None
        #: Location -> the location whose frontier it shares (see :meth:`alias`).
        self._aliases: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        #: Per alias group's first location, the locations that share its frontier.
        self._members: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
        self._build_dag_order()
        # (node, kind, port, time) -> diff
        self.pushed_changes: dict[tuple[int, int, int, Any], int] = {}
        #: Nodes one of whose implication frontiers became empty (see :meth:`drain_emptied`).
        self.emptied: list[int] = []
        self._output_changes: list[dict[Any, int]] = [{} for _ in range(scope_outputs)]
        self.total_counts = 0
        #: Per kind (0: targets, 1: sources), per ``(node, port)``: the port's pointstamps
        #: and its summaries to the scope's outputs (what :meth:`_pointstamp_changes` reads).
        self._port_table: tuple[dict[tuple[int, int], tuple[MutableAntichain[Any], Any]], ...] = (
            {
                (node, port): (info.pointstamps, target_summaries[node][port])
                for node, state in enumerate(self._per_operator)
                for port, info in enumerate(state.targets)
            },
            {
                (node, port): (info.pointstamps, source_summaries[node][port])
                for node, state in enumerate(self._per_operator)
                for port, info in enumerate(state.sources)
            },
        )

    def _build_dag_order(self) -> None:
        """If the location graph has no cycle at all, number locations topologically.

        Then propagation can visit each location once, after all of its
        predecessors, applying every change waiting there in one update.  With
        a cycle (a loop, whose summary advances time) that shortcut would let a
        retracted pointstamp's implications support themselves lap after lap,
        so cyclic graphs keep the ``(time, location)`` worklist.
        """
        keys: list[tuple[int, int, int]] = []  # (kind, node, port)
        successors: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
        for node, (ins, outs) in enumerate(self._shape):
            for port in range(ins):
                key = (0, node, port)
                keys.append(key)
                successors[key] = [(1, node, o) for o, _ in self._node_summaries[node][port]]
            for port in range(outs):
                key = (1, node, port)
                keys.append(key)
                successors[key] = [(0, tn, tp) for tn, tp in self._edges[node][port]]
        in_degree = dict.fromkeys(keys, 0)
        for key in keys:
            for nxt in successors[key]:
                in_degree[nxt] += 1
        in_degree_total = dict(in_degree)
        ready = [key for key in keys if in_degree[key] == 0]
        order: list[tuple[int, int, int]] = []
        while ready:
            key = ready.pop()
            order.append(key)
            for nxt in successors[key]:
                in_degree[nxt] -= 1
                if in_degree[nxt] == 0:
                    ready.append(nxt)
        self._acyclic = len(order) == len(keys)
        if not self._acyclic:
            return
        self._order = order
        self._successors = successors
        self._in_degree = in_degree_total
        # A source nothing reaches: its implications are its pointstamps' frontier, so
        # propagation takes their changes as the implications' (see PortInformation).
        for kind, node, port in keys:
            if kind == 1 and in_degree_total[(kind, node, port)] == 0:
                self._per_operator[node].sources[port].mirror()
        self._index_dag()

    def _chain_successor(self, key: tuple[int, int, int]) -> tuple[int, int, int] | None:
        """The chain successor of location ``key`` (see :meth:`_index_dag`), or ``None``."""
        kind, node, port = key
        if kind == 0:
            summaries = self._node_summaries[node][port]
            if len(summaries) != 1 or not is_identity_summary(summaries[0][1]):
                return None
            successor = (1, node, summaries[0][0])
        else:
            edges = self._edges[node][port]
            if len(edges) != 1:
                return None
            successor = (0, *edges[0])
        return successor if self._in_degree[successor] == 1 else None

    def _index_dag(self) -> None:
        """Build the per-location table propagation walks, members of alias groups left out."""
        aliases = self._aliases
        position = {key: i for i, key in enumerate(self._order)}
        order = [key for key in self._order if key not in aliases]
        index = {key: i for i, key in enumerate(order)}
        members = self._members
        watched = self._watched
        #: Per location (in topological order): kind (of its group's last member),
        #: node, port, implications, successors -- (location, summary) after a
        #: target, locations after a source --,
        #: its *chain* successor or -1, the ``(node, kind, port)`` whose changes
        #: :meth:`pushed` reports, the nodes it stands for, and whether it is mirrored
        #: (its implications are its pointstamps, updated already).  A chain successor is
        #: the only successor, reached without changing the time, and has no other
        #: predecessor: its changes are exactly this location's, so propagation walks
        #: on to it directly instead of through the heap (a pipeline of operators is
        #: one chain).  An alias group (:meth:`alias`) is one location here, with its
        #: last member's successors.
        self._dag: list[
            tuple[
                int,
                int,
                int,
                MutableAntichain[Any],
                list[Any],
                int,
                tuple[Any, ...],
                tuple[int, ...],
                bool,
            ]
        ] = []
        for key in order:
            _, node, port = key
            group = [key, *sorted(members.get(key, ()), key=position.__getitem__)]
            last = group[-1]
            lkind, lnode, lport = last
            info = self._port_info(key)
            implications = info.implications
            if lkind == 0:
                nexts: list[Any] = [
                    (index[(1, lnode, output)], summary)
                    for output, summary in self._node_summaries[lnode][lport]
                ]
            else:
                nexts = [index[(0, tn, tp)] for tn, tp in self._edges[lnode][lport]]
            successor = self._chain_successor(last)
            chain = index[successor] if successor is not None else -1
            report = tuple(
                (n, k, p) for k, n, p in group if watched is None or (k, n, p) in watched
            )
            nodes = tuple(dict.fromkeys(n for _, n, _ in group))
            # The kind that matters to propagation is the last member's: its successors.
            self._dag.append(
                (lkind, node, port, implications, nexts, chain, report, nodes, info.mirrored)
            )
        #: Per location: whether it is mirrored, with no successor and nothing
        #: reported (a fused pipeline ending in a probe): propagating its
        #: changes, applied already, has nothing left to do.
        self._dag_ends = [
            mirror and not nexts and chain < 0 and not report
            for _, _, _, _, nexts, chain, report, _, mirror in self._dag
        ]
        self._dag_target = [
            [index.get((0, node, port), -1) for port in range(ins)]
            for node, (ins, _) in enumerate(self._shape)
        ]
        self._dag_source = [
            [index.get((1, node, port), -1) for port in range(outs)]
            for node, (_, outs) in enumerate(self._shape)
        ]

    def alias(self, links: Iterable[tuple[Location, Location]]) -> list[tuple[Location, Location]]:
        """Let each ``(earlier, later)`` pair of locations share one frontier.

        ``later`` must be ``earlier``'s chain successor (its only successor,
        reached without changing the time, with no other predecessor), and
        the caller promises that no pointstamp will ever be held at
        ``later``: then its implications are always ``earlier``'s, and
        propagation updates one frontier for both (operator fusion links an
        operator's input to its output, and a fused edge's two ends).  A link
        that is not a chain link is skipped; one whose ``later`` holds a
        pointstamp now, or whose frontiers differ now (say, while the initial
        capabilities of other workers are still counted), is returned, to be
        tried again later.  Only for acyclic scopes (a cyclic one skips every
        link).  Afterwards a pointstamp at an aliased location raises.
        """
        if not self._acyclic:
            return []
        aliases = self._aliases
        later_links: list[tuple[Location, Location]] = []
        done = 0
        for earlier, later in links:
            a = (earlier.port.kind.value, earlier.node, earlier.port.index)
            b = (later.port.kind.value, later.node, later.port.index)
            if b in aliases or self._chain_successor(a) != b:
                continue
            info = self._port_info(b)
            head = aliases.get(a, a)
            head_info = self._port_info(head)
            if (
                info.pointstamps.has_counts()
                or self._buffered(b)
                or info.implication_counts() != head_info.implication_counts()
            ):
                later_links.append((earlier, later))
                continue
            # ``b`` joins ``head``'s group, with the group it led (if it was joined to first).
            moved = [b, *self._members.pop(b, ())]
            for member in moved:
                aliases[member] = head
                member_info = self._port_info(member)
                member_info.implications = head_info.implications
                # Behind a mirrored head, the shared antichain's counts are pointstamps'.
                member_info.mirrored = head_info.mirrored
            self._members.setdefault(head, []).extend(moved)
            done += 1
        if done:
            self._index_dag()
        return later_links

    def _port_info(self, key: tuple[int, int, int]) -> PortInformation:
        kind, node, port = key
        state = self._per_operator[node]
        return state.targets[port] if kind == 0 else state.sources[port]

    def _buffered(self, key: tuple[int, int, int]) -> bool:
        kind, node, port = key
        buffered = self.target_changes if kind == 0 else self.source_changes
        return bool(buffered.get((node, port)))

    # -- shape ------------------------------------------------------------------

    @property
    def nodes(self) -> int:
        """The number of nodes (including node 0, the scope)."""
        return len(self._shape)

    def shape(self, node: int) -> tuple[int, int]:
        """Return ``(inputs, outputs)`` of ``node``."""
        return self._shape[node]

    def _port_error(self, kind: str, node: Any, port: Any) -> PortError:
        if isinstance(node, int) and 0 <= node < len(self._shape):
            ins, outs = self._shape[node]
            have = f"node {node} has {ins} input(s) and {outs} output(s)"
        else:
            have = f"the scope has nodes 0..{len(self._shape) - 1}"
        return PortError(f"{kind}({node}, {port}) does not exist: {have}")

    # -- updates ----------------------------------------------------------------

    def update_target(self, target: Target, time: Any, diff: int) -> None:
        """Buffer a change of ``diff`` messages in flight to ``target`` at ``time``."""
        node, port = target.node, target.port
        shape = self._shape
        if not (0 <= node < len(shape) and 0 <= port < shape[node][0]):
            raise self._port_error("Target", node, port)
        self.buffer_target(node, port, time, diff)

    def update_source(self, source: Source, time: Any, diff: int) -> None:
        """Buffer a change of ``diff`` capabilities at output ``source`` at ``time``."""
        node, port = source.node, source.port
        shape = self._shape
        if not (0 <= node < len(shape) and 0 <= port < shape[node][1]):
            raise self._port_error("Source", node, port)
        self.buffer_source(node, port, time, diff)

    def update(self, location: Location, time: Any, diff: int) -> None:
        """Buffer a pointstamp change at either kind of location."""
        if location.port.kind == _TARGET:
            self.update_target(Target(location.node, location.port.index), time, diff)
        else:
            self.update_source(Source(location.node, location.port.index), time, diff)

    def tracking_anything(self) -> bool:
        """Whether any pointstamp is held or any update is still buffered."""
        return bool(self.source_changes or self.target_changes or self.total_counts > 0)

    # -- the scope's interface ----------------------------------------------------
    #
    # A scope (:class:`~timelypy.progress.subgraph.Subgraph`) drives its tracker on
    # the runtime's hot path: it adds whole batches of counts at once and takes
    # results only when there are some, testing the attributes the class
    # docstring lists before it calls.  buffer_target, buffer_source,
    # drain_pushed, drain_emptied and drain_output are that contract with them;
    # none checks its arguments (the scope built the graph, so its node and port
    # numbers are valid).

    def buffer_target(self, node: int, port: int, time: Any, diff: int) -> None:
        """:meth:`update_target` without the check that the port exists."""
        changes = self.target_changes.get((node, port))
        if changes is None:
            self.target_changes[(node, port)] = {time: diff}
        else:
            changes[time] = changes.get(time, 0) + diff

    def buffer_source(self, node: int, port: int, time: Any, diff: int) -> None:
        """:meth:`update_source` without the check that the port exists."""
        changes = self.source_changes.get((node, port))
        if changes is None:
            self.source_changes[(node, port)] = {time: diff}
        else:
            changes[time] = changes.get(time, 0) + diff

    def drain_pushed(self) -> list[tuple[tuple[int, int, int, Any], int]]:
        """Return and clear the implication changes, as ``((node, kind, port, time), diff)``.

        ``kind`` is 0 for an input (target), 1 for an output (source); what
        :meth:`pushed` returns, without building a ``Location`` for each.
        """
        pushed = self.pushed_changes
        if not pushed:
            return []
        self.pushed_changes = {}
        return [(k, d) for k, d in pushed.items() if d]

    def drain_output(self, output: int) -> list[tuple[Any, int]]:
        """Return and clear the changes to what the scope's ``output`` may still see."""
        changes = self._output_changes[output]
        if not changes:
            return []
        self._output_changes[output] = {}
        return [(t, d) for t, d in changes.items() if d]

    # -- propagation ----------------------------------------------------------

    def propagate_all(self) -> None:
        """Apply buffered updates and propagate their consequences to every location."""
        try:
            if self._acyclic:
                self._propagate_dag()
            else:
                self._propagate_all()
        except TypeError as exc:
            if isinstance(exc, TimestampError | SummaryError):
                raise
            raise TimestampError(
                f"progress propagation failed comparing timestamps or applying a summary: "
                f"{exc}; all timestamps and summaries in a scope must have one type "
                f"(this scope's is {self.timestamp_type!r})"
            ) from exc

    def _pointstamp_changes(self) -> list[tuple[int, int, int, list[tuple[Any, int]]]]:
        """Apply the buffered updates to each port's pointstamps; return the frontier changes.

        Returns ``(kind, node, port, changes)`` for every port whose pointstamp
        frontier changed, after accounting them in the totals, the capability
        counts, and what the scope's outputs may still see.
        """
        result: list[tuple[int, int, int, list[tuple[Any, int]]]] = []
        total = 0
        for kind in _KINDS:
            buffered = self.source_changes if kind else self.target_changes
            if not buffered:
                continue
            if kind == 0:
                self.target_changes = {}
            else:
                self.source_changes = {}
            table = self._port_table[kind]
            for key, updates in buffered.items():
                pointstamps, summaries = table[key]
                changes = pointstamps.update_iter(updates.items())
                if not changes:
                    continue
                if len(changes) == 2:  # one element for another, or two come or go
                    net = changes[0][1] + changes[1][1]
                else:
                    net = 0
                    for _, diff in changes:
                        net += diff
                if net:  # (a frontier element moving, a downgrade, changes no count)
                    total += net
                    if kind == 1:
                        self._per_operator[key[0]].cap_counts += net
                if summaries:
                    output_changes = self._output_changes
                    for time, diff in changes:
                        for output, summary in summaries:
                            out = _apply(summary, time)
                            if out is not None:
                                oc = output_changes[output]
                                oc[out] = oc.get(out, 0) + diff
                result.append((kind, key[0], key[1], changes))
        if total:
            self.total_counts += total
        return result

    def _propagate_dag(self) -> None:
        """Propagation for acyclic graphs: each location once, in topological order."""
        moved = self._pointstamp_changes()
        if not moved:
            return
        updates: list[tuple[Any, int]]
        if len(moved) == 1:
            # One location moved (a lone capability's downgrade, the common small
            # step): start there without the heap; its changes are consolidated.
            kind, node, port, updates = moved[0]
            location = (self._dag_source if kind else self._dag_target)[node][port]
            if location < 0:
                raise _fused_pointstamp(kind, node, port)
            if self._dag_ends[location]:
                # The loop below would only ask whether its frontier emptied.
                end = self._dag[location]
                if end[3].is_empty():
                    self.emptied.extend(end[7])
                return
        pending: dict[int, dict[Any, int]] = {}
        heap: list[int] = []
        if len(moved) > 1:
            dag_index = (self._dag_target, self._dag_source)
            for kind, node, port, changes in moved:
                location = dag_index[kind][node][port]
                if location < 0:
                    raise _fused_pointstamp(kind, node, port)
                _wait(pending, heap, location, changes)
            location = -1  # the first comes from the heap
        pushed = self.pushed_changes
        dag = self._dag
        while True:
            if location < 0:
                if not heap:
                    return
                location = heapq.heappop(heap)
                waiting = pending.pop(location, None)
                if waiting is None:
                    location = -1
                    continue  # reached along a chain already
                updates = list(waiting.items())
            kind, node, port, implications, nexts, chain, report, nodes, mirror = dag[location]
            location = -1
            if mirror:
                changes = updates  # the pointstamps' changes, applied already
            elif len(updates) == 1:
                time, diff = updates[0]
                changes = implications.update(time, diff) if diff else []
            else:
                changes = implications.update_iter(updates)
            if not changes:
                continue
            for reported in report:
                for t, d in changes:
                    key = (*reported, t)
                    pushed[key] = pushed.get(key, 0) + d
            if implications.is_empty():
                self.emptied.extend(nodes)
            if chain >= 0:
                # The only successor, with no other predecessor: go on directly.
                location = chain
                waiting = pending.pop(location, None)
                if waiting is None:
                    updates = changes
                else:
                    for t, d in changes:
                        waiting[t] = waiting.get(t, 0) + d
                    updates = list(waiting.items())
            elif kind == 0:
                for successor, summary in nexts:
                    waiting = pending.get(successor)
                    if waiting is None:
                        waiting = pending[successor] = {}
                        heapq.heappush(heap, successor)
                    for t, d in changes:
                        if type(summary) is int:
                            out = t + summary
                            if out > U64_MAX:
                                continue
                        else:
                            out = summary.results_in(t)
                            if out is None:
                                continue
                        waiting[out] = waiting.get(out, 0) + d
            else:
                for successor in nexts:
                    _wait(pending, heap, successor, changes)

    def _propagate_all(self) -> None:
        heappush = heapq.heappush
        heappop = heapq.heappop
        worklist = self._worklist
        for kind, node, port, changes in self._pointstamp_changes():
            for time, diff in changes:
                heappush(worklist, (time, node, kind, port, diff))

        if not worklist:
            return
        pushed = self.pushed_changes
        watched = self._watched_ports
        emptied = self.emptied
        target_info = self._target_info
        source_info = self._source_info
        u64_max = U64_MAX
        while worklist:
            time, node, kind, port, diff = heappop(worklist)
            while worklist:
                head = worklist[0]
                if head[1] == node and head[2] == kind and head[3] == port and head[0] == time:
                    diff += heappop(worklist)[4]
                else:
                    break
            if not diff:
                continue
            report = watched is None or watched[kind][node][port]
            if kind == 0:
                update, summaries, implications = target_info[node][port]
                changes = update(time, diff)
                for t, d in changes:
                    for output, summary in summaries:
                        if type(summary) is int:
                            out = t + summary
                            if out > u64_max:
                                continue
                        else:
                            out = summary.results_in(t)
                            if out is None:
                                continue
                        heappush(worklist, (out, node, 1, output, d))
                    if report:
                        key = (node, 0, port, t)
                        pushed[key] = pushed.get(key, 0) + d
            else:
                update, targets, implications = source_info[node][port]
                changes = update(time, diff)
                for t, d in changes:
                    for target_node, target_port in targets:
                        heappush(worklist, (t, target_node, 0, target_port, d))
                    if report:
                        key = (node, 1, port, t)
                        pushed[key] = pushed.get(key, 0) + d
            if changes and implications.is_empty():
                emptied.append(node)

    def report_only(self, locations: Iterable[Location]) -> None:
        """Have :meth:`pushed` report the changes at ``locations`` only.

        A scope reads the changes at the inputs of its children that watch
        their frontiers; recording every other location's changes, only to
        drop them, is most of the cost of a small step.  The implications
        themselves are maintained everywhere, as before.
        """
        watched = {
            (location.port.kind.value, location.node, location.port.index) for location in locations
        }
        self._watched = watched
        self._watched_ports = tuple(
            [
                [(kind, node, port) in watched for port in range(shape[kind])]
                for node, shape in enumerate(self._shape)
            ]
            for kind in (0, 1)
        )  # type: ignore[assignment]
        if self._acyclic:
            self._index_dag()

    def drain_emptied(self) -> list[int]:
        """Return and clear the nodes one of whose implication frontiers became empty.

        Reported for every location, watched or not: a scope schedules such a
        node once more, so it can shut down when it holds nothing and its
        inputs are closed.
        """
        emptied = self.emptied
        if not emptied:
            return emptied
        self.emptied = []
        return emptied

    # -- results ----------------------------------------------------------------

    def pushed(self) -> ChangeBatch[tuple[Location, Any]]:
        """Return and clear the implication changes since the last call.

        Keys are ``(Location, time)``; a positive diff means ``time`` joined
        that location's implications frontier, a negative one that it left.
        """
        result: ChangeBatch[tuple[Location, Any]] = ChangeBatch()
        for (node, kind, port, time), diff in self.drain_pushed():
            result.update((Location(node, Port(PortKind(kind), port)), time), diff)
        return result

    def pushed_output(self) -> list[ChangeBatch[Any]]:
        """Return and clear, per scope output, changes to the times it may still see."""
        result = []
        for index, changes in enumerate(self._output_changes):
            result.append(ChangeBatch((t, d) for t, d in changes.items() if d))
            self._output_changes[index] = {}
        return result

    def node_state(self, node: int) -> PerOperator:
        """Return the progress state of ``node``'s ports."""
        return self._per_operator[node]

    def target_implications(self, target: Target) -> MutableAntichain[Any]:
        """Return the live implications (the input frontier) of ``target``."""
        try:
            return self._per_operator[target.node].targets[target.port].implications
        except IndexError:
            raise self._port_error("Target", target.node, target.port) from None

    def source_implications(self, source: Source) -> MutableAntichain[Any]:
        """Return the live implications of output ``source``.

        Where nothing reaches ``source`` in an acyclic scope this is its
        pointstamps' antichain itself (:class:`PortInformation`): its frontier
        is the implications', its counts are the pointstamps'.
        """
        try:
            return self._per_operator[source.node].sources[source.port].implications
        except IndexError:
            raise self._port_error("Source", source.node, source.port) from None

    def is_global(self, location: Location, time: Any) -> bool:
        """Whether the pointstamp ``(location, time)`` is implied by no other pointstamp."""
        state = self._per_operator[location.node]
        ports = state.targets if location.port.kind == _TARGET else state.sources
        return ports[location.port.index].is_global(time)
