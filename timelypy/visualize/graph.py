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
  ``scope.region``); clusters nest through :attr:`Cluster.parent`.

Keys are made of letters, digits and ``_`` only, so every renderer can use
them as identifiers as they are.

This module also builds the graph of a :class:`timelypy.flow.Dataflow`
(:func:`flow_graph`), which needs no runtime: a flow is a chain of steps.
The graph of a runtime dataflow is built by running its ``build`` function
on a worker (:mod:`timelypy.visualize.runtime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from timelypy.flow.dataflow import STATEFUL, Dataflow

__all__ = ["Graph", "Node", "Edge", "Cluster", "NodeKind", "flow_graph"]

#: What a node stands for: an operator of a runtime dataflow, one port of a
#: nested scope's boundary, or a flow's input step, other step, or output
#: (``capture``) step.
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
    """

    source: str
    target: str
    source_port: int = 0
    target_port: int = 0
    scope: str | None = None
    pact: str | None = None
    feedback: bool = False


@dataclass(frozen=True)
class Cluster:
    """A nested scope: its ``key``, ``label``, scope ``name`` and ``address``.

    ``parent`` is the key of the enclosing cluster (``None`` when the scope
    is a child of the dataflow's root); ``iterative`` says whether its
    timestamps differ from its parent's (``scope.iterative``) rather than
    being the same (``scope.region``).
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
    order), edges in the order they were connected.
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
    """The steps of ``flow`` as a chain of nodes, in order.

    Each node is labelled ``step_id (operator)``.  An ``input`` step has
    kind ``"input"``, a ``capture`` step ``"output"`` (a capture also
    passes its items on to the next step), any other ``"step"``; steps that
    keep state between items are ``stateful``.  The edges carry no pact:
    the flow says what each step computes, not how the runtime spreads it
    over workers (draw the runtime dataflow for that).

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
    """
    if not isinstance(flow, Dataflow):
        raise TypeError(f"flow_graph needs a timelypy.flow.Dataflow, got {flow!r}")
    nodes: list[Node] = []
    for index, step in enumerate(flow.steps):
        kind: NodeKind
        if step.operator == "input":
            kind = "input"
        elif step.operator == "capture":
            kind = "output"
        else:
            kind = "step"
        nodes.append(
            Node(
                key=f"step_{index}",
                label=f"{step.step_id} ({step.operator})",
                kind=kind,
                name=step.step_id,
                step_id=step.step_id,
                operator=step.operator,
                stateful=step.operator in STATEFUL,
            )
        )
    edges = tuple(Edge(a.key, b.key) for a, b in pairwise(nodes))
    return Graph(name, tuple(nodes), edges)
