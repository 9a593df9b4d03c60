"""Pictures of dataflows: Mermaid and Graphviz DOT text for a runtime dataflow or a flow.

Two ways in, one graph model, two renderers:

* :func:`runtime_graph` builds a runtime dataflow -- the ``build(scope)``
  function a program passes to ``worker.dataflow`` -- on one worker,
  without running it, and reads its operators, edges, pacts, nested scopes
  and loops (:mod:`timelypy.visualize.runtime`);
* :func:`flow_graph` reads a :class:`timelypy.flow.Dataflow`'s steps
  (:mod:`timelypy.visualize.graph`, which also holds the model:
  :class:`Graph`, :class:`Node`, :class:`Edge`, :class:`Cluster`);
* :func:`to_mermaid` and :func:`to_dot` draw either as text
  (:mod:`timelypy.visualize.render`); nothing here makes images, so
  nothing beyond the standard library is needed.

From the command line, ``python -m timelypy.visualize module:attribute``
prints the Mermaid (``--format dot`` for DOT) of a flow or of a build
function (:mod:`timelypy.visualize.__main__`).  ``docs/visualize.md`` shows
both.

>>> import timelypy.visualize as viz
>>> print(viz.to_mermaid(viz.runtime_graph(
...     lambda scope: scope.to_stream(range(3)).exchange(lambda x: x).probe())))
flowchart TD
    n0_1["ToStream [0, 1]"]
    n0_2["Exchange [0, 2]"]
    n0_3["Probe [0, 3]"]
    n0_1 -->|"Exchange"| n0_2
    n0_2 --> n0_3
"""

from timelypy.visualize.graph import Cluster, Edge, Graph, Node, NodeKind, flow_graph
from timelypy.visualize.render import to_dot, to_mermaid
from timelypy.visualize.runtime import runtime_graph

__all__ = [
    "runtime_graph",
    "flow_graph",
    "to_mermaid",
    "to_dot",
    "Graph",
    "Node",
    "Edge",
    "Cluster",
    "NodeKind",
]
