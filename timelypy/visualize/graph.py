"""The picture of a dataflow as data: nodes, edges and nested scopes.

A :class:`Graph` is what the renderers (:mod:`timelypy.visualize.render`)
draw and what tests compare: it is flat, with parent pointers, so that a
renderer groups nodes by :attr:`Node.parent` and a test can look any node
up by its :attr:`Node.key`.

* A :class:`Node` is an operator, a flow step, or one port of a nested
  scope's boundary.  In Timely a scope's node 0 is the scope itself seen
  from inside: its sources are the scope's inputs and its targets the
  scope's outputs.  The graph gives each such port a node of its own
  (``kind`` ``"scope_input"`` / ``"scope_output"``) inside the scope's
  :class:`Cluster`, so that an edge entering a scope and the edge inside it
  that leaves the boundary meet at one visible point.
* An :class:`Edge` joins two nodes, with the ports of Timely's
  ``(node, port)`` pairs, the pact of the input it feeds where that is
  known, and whether it closes a loop (a *feedback* edge: the input it
  feeds advances every timestamp it passes on, which is how
  progress tracking lets a cycle exist).
* A :class:`Cluster` is a nested scope (``scope.iterative``,
  ``scope.region``) or, in a flow, a composite operator's steps; clusters
  nest through :attr:`Cluster.parent`.

Keys are made of letters, digits and ``_`` only, so every renderer can use
them as identifiers as they are.

This module also builds the graph of a :class:`timelypy.flow.Dataflow`
(:func:`flow_graph`), which needs no runtime: a flow's steps say which
streams each reads and writes, whether they form an epoch chain or a
stream graph with branches and joins.
The graph of a runtime dataflow is built by running its ``build`` function
on a worker (:mod:`timelypy.visualize.runtime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from timelypy.flow._graph import KeyedSpec
from timelypy.flow.dataflow import STATEFUL, Dataflow, Step

__all__ = ["Graph", "Node", "Edge", "Cluster", "NodeKind", "flow_graph"]

#: What a node stands for: an operator of a runtime dataflow, one port of a
#: nested scope's boundary, or a flow's input step, other step, or output
#: (``output``, ``capture``) step.
NodeKind = Literal["operator", "scope_input", "scope_output", "input", "step", "output"]


@dataclass(frozen=True)
class Node:
    """One node of a :class:`Graph`.

    ``key`` identifies the node in its graph (letters, digits and ``_``);
    ``label`` is the text a renderer shows.  Runtime nodes have the
    operator's (or, for a boundary port, the scope's) ``address`` and
    ``name``; boundary ports have their ``port`` number.  Flow nodes have
    the step's ``step_id`` and ``operator`` and say whether the step keeps
    state between items (``stateful``).  ``parent`` is the key of the
    :class:`Cluster` holding the node, ``None`` at the top.
    """

    key: str
    label: str
    kind: NodeKind
    name: str
    address: tuple[int, ...] = ()
    port: int | None = None
    parent: str | None = None
    step_id: str | None = None
    operator: str | None = None
    stateful: bool = False


@dataclass(frozen=True)
class Edge:
    """An edge from output ``source_port`` of ``source`` to input ``target_port`` of ``target``.

    ``source`` and ``target`` are node keys.  ``scope`` is the key of the
    :class:`Cluster` of the scope the edge was connected in (``None`` for a
    dataflow's root scope).  ``pact`` is how the target input receives the
    records -- ``"Exchange"`` (through a channel between workers) or
    ``"Pipeline"`` (on the worker that produced them) -- or ``None`` where
    no pact applies (the edge enters or leaves a nested scope) or none is
    known (flows).  ``feedback`` says that the target input advances the
    time of every record it passes on: the edge closes a loop.

    Flow edges name the ``stream`` they carry (its stream ID) and may have
    a ``label`` telling them apart from their neighbours: the output of a
    step that writes several (a ``branch``'s ``trues``/``falses``), the
    side of a ``join`` they feed.  Runtime edges have neither.
    """

    source: str
    target: str
    source_port: int = 0
    target_port: int = 0
    scope: str | None = None
    pact: str | None = None
    feedback: bool = False
    stream: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class Cluster:
    """A nested scope: its ``key``, ``label``, scope ``name`` and ``address``.

    ``parent`` is the key of the enclosing cluster (``None`` when the scope
    is a child of the dataflow's root); ``iterative`` says whether its
    timestamps differ from its parent's (``scope.iterative``) rather than
    being the same (``scope.region``).  In a flow's graph a cluster is a
    composite operator: ``label`` and ``name`` are its step ID, ``address``
    is empty.
    """

    key: str
    label: str
    name: str
    address: tuple[int, ...]
    parent: str | None = None
    iterative: bool = False


@dataclass(frozen=True)
class Graph:
    """A dataflow's picture: its ``nodes``, ``edges`` and nested scopes (``clusters``).

    Nodes and clusters are in the order they were built (steps in flow
    order), edges in the order they were connected (a flow's: in the order
    of the steps that read them).
    """

    name: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...] = ()

    def node(self, key: str) -> Node:
        """The node with ``key``.

        >>> flow = Dataflow(); flow.map(str.upper); flow.capture()
        >>> flow_graph(flow).node("step_1").label
        'capture (capture)'
        """
        for node in self.nodes:
            if node.key == key:
                return node
        raise KeyError(f"graph {self.name!r} has no node {key!r}")

    def cluster(self, key: str) -> Cluster:
        """The cluster with ``key``."""
        for cluster in self.clusters:
            if cluster.key == key:
                return cluster
        raise KeyError(f"graph {self.name!r} has no cluster {key!r}")


def flow_graph(flow: Dataflow, name: str = "flow") -> Graph:
    """The steps of ``flow`` as nodes, joined by the streams they read, in flow order.

    Node ``step_<i>`` is the flow's ``i``-th step, labelled ``step_id
    (operator)``.  An ``input`` step has kind ``"input"``, an ``output``
    or ``capture`` step ``"output"`` (a capture also passes its items on
    to the next step), any other ``"step"``; steps that keep state between
    items (their step ID labels recovery data) are ``stateful``.

    Each stream a step reads is an edge from the step that writes it (a
    stream read by two steps is two edges, a stream no step reads is
    none), in the order of the reading steps and, for each, of the streams
    it reads.  An epoch chain's steps
    each read the one before, so a chain is drawn as a chain; a chain that
    starts at the input ``run`` is given has no edge into its first step.
    An edge has the ports of the stream in the writer's outputs and the
    reader's inputs, the stream's ID, and a label where one is needed to
    tell edges apart: the output's name where the writer writes several
    streams (a ``branch``'s ``trues`` and ``falses``), ``side <n>`` where
    the reader's inputs differ by position (a ``join``'s sides; a
    ``merge``'s inputs need none).  Edges carry no pact: the flow says
    what each step computes, not how the runtime spreads it over workers
    (draw the runtime dataflow for that).

    The steps of a composite operator (:func:`timelypy.flow.dataflow.operator`:
    step IDs nested as ``flow_id.composite.step``) are drawn in a
    :class:`Cluster` ``composite_<i>`` labelled with the composite's step
    ID; composites within composites nest.

    >>> flow = Dataflow()
    >>> flow.map(str.split, step_id="words")
    >>> flow.reduce_epoch(lambda a, b: a + b, step_id="count")
    >>> flow.capture()
    >>> graph = flow_graph(flow)
    >>> for node in graph.nodes:
    ...     print(node.key, node.label, node.kind, node.stateful)
    step_0 words (map) step False
    step_1 count (reduce_epoch) step True
    step_2 capture (capture) output False
    >>> [(edge.source, edge.target) for edge in graph.edges]
    [('step_0', 'step_1'), ('step_1', 'step_2')]

    A stream graph branches and merges:

    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSink, TestingSource
    >>> flow = Dataflow("doc")
    >>> numbers = op.input("numbers", flow, TestingSource([1, 2, 3]))
    >>> parity = op.branch("even", numbers, lambda n: n % 2 == 0)
    >>> both = op.merge("both", op.map("half", parity.trues, lambda n: n // 2), parity.falses)
    >>> op.output("out", both, TestingSink([]))
    >>> for edge in flow_graph(flow).edges:
    ...     print(edge.source, edge.target, edge.label, edge.stream)
    step_0 step_1 None doc.numbers.down
    step_1 step_2 trues doc.even.trues
    step_2 step_3 None doc.half.down
    step_1 step_3 falses doc.even.falses
    step_3 step_4 None doc.both.down
    """
    if not isinstance(flow, Dataflow):
        raise TypeError(f"flow_graph needs a timelypy.flow.Dataflow, got {flow!r}")
    steps = flow.steps
    keys = [f"step_{index}" for index in range(len(steps))]
    clusters: dict[str, Cluster] = {}  # by the composite's step ID
    nodes: list[Node] = []
    for key, step in zip(keys, steps, strict=True):
        nodes.append(
            Node(
                key=key,
                label=f"{step.step_id} ({step.operator})",
                kind=_KINDS.get(step.operator, "step"),
                name=step.step_id,
                parent=_composite_cluster(flow, step, clusters),
                step_id=step.step_id,
                operator=step.operator,
                stateful=step.operator in STATEFUL or isinstance(step.options, KeyedSpec),
            )
        )
    # which step writes each stream, and as which of its outputs
    writers: dict[str, tuple[int, int]] = {}
    for index, step in enumerate(steps):
        for port, stream in enumerate(step.outs):
            writers[stream] = (index, port)
    edges: list[Edge] = []
    for index, step in enumerate(steps):
        for target_port, stream in enumerate(step.ups):
            if stream not in writers:
                continue  # the chain's input, which the runner feeds
            source, source_port = writers[stream]
            edges.append(
                Edge(
                    keys[source],
                    keys[index],
                    source_port=source_port,
                    target_port=target_port,
                    stream=stream,
                    label=_stream_label(steps[source], source_port, step, target_port),
                )
            )
    return Graph(name, tuple(nodes), tuple(edges), tuple(clusters.values()))


#: The node kinds of the steps that are not plain ``"step"`` s.
_KINDS: dict[str, NodeKind] = {"input": "input", "capture": "output", "output": "output"}

#: Operators whose inputs are told apart by position (a ``join``'s values come in its
#: sides' order), so the edges into them say which input they feed.
_SIDED = frozenset({"join"})


def _composite_cluster(flow: Dataflow, step: Step, clusters: dict[str, Cluster]) -> str | None:
    """The key of the cluster of ``step``'s innermost composite (made as needed), or ``None``.

    A stream-graph step's ID is the flow ID (if any), the composites'
    names, then its own; an epoch-chain step's is only its own.
    """
    if step.form != "graph":
        return None
    parts = step.step_id.split(".")
    first = 0 if flow.flow_id is None else 1
    parent: str | None = None
    for end in range(first + 1, len(parts)):
        composite = ".".join(parts[:end])
        cluster = clusters.get(composite)
        if cluster is None:
            cluster = Cluster(
                key=f"composite_{len(clusters)}",
                label=composite,
                name=composite,
                address=(),
                parent=parent,
            )
            clusters[composite] = cluster
        parent = cluster.key
    return parent


def _stream_label(source: Step, source_port: int, target: Step, target_port: int) -> str | None:
    """What tells an edge apart: the writer's output name, the reader's side, or both."""
    parts = []
    if len(source.outs) > 1:
        parts.append(source.outs[source_port].removeprefix(f"{source.step_id}."))
    if target.operator in _SIDED and len(target.ups) > 1:
        parts.append(f"side {target_port}")
    return ", ".join(parts) or None
