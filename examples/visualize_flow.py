"""Print the Mermaid picture of a small flow: a wordcount with a running total.

    python examples/visualize_flow.py              # Mermaid (paste into a ```mermaid block)
    python examples/visualize_flow.py --dot        # Graphviz DOT (pipe into `dot -Tsvg`)

The flow reads lines, splits them into words, pairs each word with 1,
keeps a running count per word across epochs (``stateful_map``, a stateful
step: drawn as a cylinder), and captures the counts.  Nothing runs: the
picture comes from the flow's steps (:func:`timelypy.visualize.flow_graph`).
The same picture comes from the command line with
``python -m timelypy.visualize examples.visualize_flow:flow``.
"""

import sys

from timelypy.flow import AdvanceTo, Dataflow, Emit, ManualInputConfig
from timelypy.visualize import flow_graph, to_dot, to_mermaid


def lines(worker_index, worker_count, resume_epoch):
    """Two lines, one epoch each, read by worker 0."""
    if worker_index == 0:
        for epoch, line in enumerate(["to be or not to be", "that is the question"]):
            if epoch >= resume_epoch:
                yield AdvanceTo(epoch)
                yield Emit(line)


def running_count(count, one):
    return count + one, count + one


flow = Dataflow()
flow.input("lines", ManualInputConfig(lines))
flow.flat_map(str.split, step_id="words")
flow.map(lambda word: (word, 1), step_id="pairs")
flow.stateful_map("running_count", lambda word: 0, running_count)
flow.capture()


if __name__ == "__main__":
    graph = flow_graph(flow, name="wordcount")
    print(to_dot(graph) if sys.argv[1:] == ["--dot"] else to_mermaid(graph))
