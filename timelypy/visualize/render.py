r"""Drawing a :class:`~timelypy.visualize.graph.Graph` as text: Mermaid and Graphviz DOT.

Both renderers write every node inside the clusters of its scopes first,
then every edge, so that an edge never pulls a node into the wrong scope
(Mermaid puts a node in the subgraph where it first appears).  Node keys
are used as identifiers as they are; labels are quoted and escaped.

The shapes say what a node is, the same in both languages:

============================  ==================  ==================
node                          Mermaid             DOT
============================  ==================  ==================
operator, flow step           ``["..."]``         ``box``
stateful flow step            ``[("...")]``       ``cylinder``
flow input step               ``[/"..."/]``       ``invhouse``
flow output step             ``[\"..."\]``       ``house``
nested scope's input/output   ``(("..."))``       ``ellipse``
============================  ==================  ==================

A feedback edge (it closes a loop) is dashed; an edge whose records may
move between workers (an ``Exchange`` pact) is labelled with its pact;
``Pipeline`` edges and those without a pact are plain.  A flow's edges
are labelled where they need telling apart (:attr:`Edge.label`: a
``branch``'s ``trues`` and ``falses``, a ``join``'s sides).  A flow's
composite operators are clusters, as nested scopes are.  Nothing here draws
images: paste the Mermaid into a ``mermaid`` code block of a Markdown file
(GitHub draws those) or give the DOT to Graphviz (``dot -Tsvg``).
"""

from __future__ import annotations

from collections.abc import Iterator

from timelypy.visualize.graph import Cluster, Edge, Graph, Node

__all__ = ["to_mermaid", "to_dot"]

#: Mermaid's character entities (``#name;`` or ``#code;``) for what a quoted
#: label may not hold as it is; ``#`` first, since every entity starts with it.
_MERMAID_ESCAPES = (
    ("#", "#35;"),
    ('"', "#quot;"),
    ("<", "#lt;"),
    (">", "#gt;"),
    ("&", "#amp;"),
    ("`", "#96;"),
    ("\r", " "),
    ("\n", " "),
)

_MERMAID_SHAPES = {
    "operator": ('["', '"]'),
    "step": ('["', '"]'),
    "input": ('[/"', '"/]'),
    "output": ('[\\"', '"\\]'),
    "scope_input": ('(("', '"))'),
    "scope_output": ('(("', '"))'),
}
_MERMAID_STATEFUL = ('[("', '")]')

_DOT_SHAPES = {
    "operator": "box",
    "step": "box",
    "input": "invhouse",
    "output": "house",
    "scope_input": "ellipse",
    "scope_output": "ellipse",
}


def mermaid_text(text: str) -> str:
    """``text`` as the inside of a quoted Mermaid label (entities for what would break it).

    >>> mermaid_text('say "hi" #1 <b>')
    'say #quot;hi#quot; #35;1 #lt;b#gt;'
    """
    for character, entity in _MERMAID_ESCAPES:
        text = text.replace(character, entity)
    return text


def dot_string(text: str) -> str:
    r"""``text`` as a quoted DOT string.

    >>> print(dot_string('a "b" \\ c'))
    "a \"b\" \\ c"
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def _edge_label(edge: Edge) -> str | None:
    """An edge's label: its own, then its pact unless records stay on their worker."""
    parts = [] if edge.label is None else [edge.label]
    if edge.pact is not None and edge.pact != "Pipeline":
        parts.append(edge.pact)
    return ", ".join(parts) or None


def _walk(graph: Graph) -> Iterator[tuple[int, Cluster | None, Node | None]]:
    """Depth-first: ``(depth, cluster, None)`` opens a cluster, ``(depth, None, None)`` closes.

    In between come ``(depth, None, node)`` for the nodes directly inside;
    the top level's nodes come first, at depth 0.
    """
    nodes_in: dict[str | None, list[Node]] = {}
    for node in graph.nodes:
        nodes_in.setdefault(node.parent, []).append(node)
    clusters_in: dict[str | None, list[Cluster]] = {}
    for cluster in graph.clusters:
        clusters_in.setdefault(cluster.parent, []).append(cluster)
    known = {cluster.key for cluster in graph.clusters}
    for parent in (*nodes_in, *clusters_in):
        if parent is not None and parent not in known:
            raise ValueError(f"graph {graph.name!r}: {parent!r} is a parent but not a cluster")

    def visit(parent: str | None, depth: int) -> Iterator[tuple[int, Cluster | None, Node | None]]:
        for node in nodes_in.get(parent, ()):
            yield depth, None, node
        for cluster in clusters_in.get(parent, ()):
            yield depth, cluster, None
            yield from visit(cluster.key, depth + 1)
            yield depth, None, None

    return visit(None, 0)


def to_mermaid(graph: Graph) -> str:
    r"""``graph`` as a Mermaid ``flowchart TD`` (nested scopes as ``subgraph ... end``).

    >>> from timelypy.visualize.graph import flow_graph
    >>> from timelypy.flow import Dataflow
    >>> flow = Dataflow(); flow.map(str.upper); flow.capture()
    >>> print(to_mermaid(flow_graph(flow)))
    flowchart TD
        step_0["map (map)"]
        step_1[\"capture (capture)"\]
        step_0 --> step_1
    """
    lines = ["flowchart TD"]
    for depth, cluster, node in _walk(graph):
        indent = "    " * (depth + 1)
        if cluster is not None:
            lines.append(f'{indent}subgraph {cluster.key}["{mermaid_text(cluster.label)}"]')
        elif node is not None:
            opening, closing = _MERMAID_STATEFUL if node.stateful else _MERMAID_SHAPES[node.kind]
            lines.append(f"{indent}{node.key}{opening}{mermaid_text(node.label)}{closing}")
        else:
            lines.append(f"{indent}end")
    for edge in graph.edges:
        arrow = "-.->" if edge.feedback else "-->"
        label = _edge_label(edge)
        if label is not None:
            arrow += f'|"{mermaid_text(label)}"|'
        lines.append(f"    {edge.source} {arrow} {edge.target}")
    return "\n".join(lines)


def to_dot(graph: Graph) -> str:
    """``graph`` as a Graphviz DOT ``digraph`` (nested scopes as clusters).

    >>> from timelypy.visualize.graph import flow_graph
    >>> from timelypy.flow import Dataflow
    >>> flow = Dataflow(); flow.map(str.upper); flow.capture()
    >>> print(to_dot(flow_graph(flow)))
    digraph "flow" {
        node [shape=box];
        step_0 [label="map (map)", shape=box];
        step_1 [label="capture (capture)", shape=house];
        step_0 -> step_1;
    }
    """
    lines = [f"digraph {dot_string(graph.name)} {{", "    node [shape=box];"]
    for depth, cluster, node in _walk(graph):
        indent = "    " * (depth + 1)
        if cluster is not None:
            lines.append(f"{indent}subgraph cluster_{cluster.key} {{")
            lines.append(f"{indent}    label={dot_string(cluster.label)};")
        elif node is not None:
            shape = "cylinder" if node.stateful else _DOT_SHAPES[node.kind]
            lines.append(f"{indent}{node.key} [label={dot_string(node.label)}, shape={shape}];")
        else:
            lines.append(f"{indent}}}")
    for edge in graph.edges:
        attributes = []
        if edge.feedback:
            attributes.append("style=dashed")
        label = _edge_label(edge)
        if label is not None:
            attributes.append(f"label={dot_string(label)}")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"    {edge.source} -> {edge.target}{suffix};")
    lines.append("}")
    return "\n".join(lines)
