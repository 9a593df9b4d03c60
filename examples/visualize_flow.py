"""Print the Mermaid picture of a small flow: a wordcount, as an epoch chain or a stream graph.

    python examples/visualize_flow.py              # Mermaid (paste into a ```mermaid block)
    python examples/visualize_flow.py --dot        # Graphviz DOT (pipe into `dot -Tsvg`)
    python examples/visualize_flow.py --graph      # the stream graph (add --dot for DOT)

``flow``, the epoch chain, reads lines, splits them into words, pairs each
word with 1, keeps a running count per word across epochs
(``stateful_map``, a stateful step: drawn as a cylinder), and captures the
counts.  ``graph_flow``, the stream graph, splits its lines into words,
branches the short words off to an output of their own, and counts the
others with a composite operator (``count_words``: its two steps are drawn
as a subgraph).  Nothing runs: the picture comes from the flow's steps
(:func:`timelypy.visualize.flow_graph`).  The same pictures come from the
command line with ``python -m timelypy.visualize
examples.visualize_flow:flow`` (or ``:graph_flow``).
"""

import sys

import timelypy.flow.operators as op
from timelypy.flow import AdvanceTo, Dataflow, Emit, ManualInputConfig
from timelypy.flow.dataflow import operator
from timelypy.flow.testing import TestingSink, TestingSource
from timelypy.visualize import flow_graph, to_dot, to_mermaid

LINES = ["to be or not to be", "that is the question"]


def lines(worker_index, worker_count, resume_epoch):
    """Two lines, one epoch each, read by worker 0."""
    if worker_index == 0:
        for epoch, line in enumerate(LINES):
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


@operator
def count_words(step_id, words):
    """Count each word, whatever its case: a composite operator of two steps."""
    lower = op.map("lower", words, str.lower)
    return op.count_final("count", lower, lambda word: word)


graph_flow = Dataflow("wordcount")
words = op.flat_map("words", op.input("lines", graph_flow, TestingSource(LINES)), str.split)
short = op.branch("short", words, lambda word: len(word) <= 2)
op.output("short_words", short.trues, TestingSink([]))
op.output("counts", count_words("count_words", short.falses), TestingSink([]))


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--graph" in args:
        graph = flow_graph(graph_flow, name="wordcount")
    else:
        graph = flow_graph(flow, name="wordcount")
    print(to_dot(graph) if "--dot" in args else to_mermaid(graph))
