r"""A wordcount with a batch-level step: your function runs once per batch, not per word.

    python examples/flow_batch_wordcount.py [FILE] [--lines-per-epoch N]
                                            [--processes P] [--threads T] [--graph]

It counts the words of ``FILE`` (by default a sample text: the first five
lines of Hamlet's soliloquy) with the tokenisation of the per-word
wordcount (``examples/flow_wordcount.py``: lower case, then the regular
expression ``[^\s!,.?":;0-9]+``), and prints one ``epoch word count`` line
per word and epoch, sorted.

The whole flow is three lines::

    flow = Dataflow()
    flow.reduce_epoch(add, pre_aggregate=count_words)
    flow.capture()

``count_words(lines)`` gets a batch of lines (all of one epoch) and
returns their word counts, a ``Counter``: one ``join``, one ``lower`` and
one regular-expression pass over the whole batch, in C, where the
per-word flow calls three Python functions per word.  ``reduce_epoch``
adds up each worker's batch counts per epoch before they cross to the
word's worker (its state key), which adds those and emits ``(word,
count)`` when the epoch closes.

* ``--lines-per-epoch N`` puts line ``i`` in epoch ``i // N`` (default:
  every line in epoch 0), so counts are per group of ``N`` lines.
* ``--processes P --threads T`` runs on ``P`` processes of ``T`` worker
  threads each (default one worker); the output is the same.
* ``--graph`` writes the same wordcount as a stream graph instead
  (``op.reduce_final(..., pre_aggregate=count_words)``): one total per
  word at the end of the input, printed as ``word count``.
"""

import argparse
import re
import sys
from collections import Counter
from operator import add

import timelypy.flow.operators as op
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.sinks import CaptureSink
from timelypy.flow.testing import TestingSource

#: The sample text read when no file is given.
HAMLET = """\
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them.
"""

WORD = re.compile(r'[^\s!,.?":;0-9]+')


def count_words(lines):
    """The word counts of a batch of lines: one pass of the regular expression over them all."""
    return Counter(WORD.findall(" ".join(lines).lower()))


def chain_flow():
    """The epoch chain: every epoch's counts."""
    flow = Dataflow()
    flow.reduce_epoch(add, pre_aggregate=count_words)
    flow.capture()
    return flow


def graph_flow(lines):
    """The stream graph: one total per word at the end of ``lines``."""
    flow = Dataflow("wordcount")
    text = op.input("lines", flow, TestingSource(lines, batch_size=1000))
    counts = op.reduce_final("count", text, add, pre_aggregate=count_words)
    op.output("out", counts, CaptureSink())  # what run and run_cluster return
    return flow


def main(argv=None):
    """Count, print ``epoch word count`` lines."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", nargs="?", help="a text file (default: a sample text)")
    parser.add_argument("--lines-per-epoch", type=int, default=0, metavar="N")
    parser.add_argument("--processes", type=int, default=1, metavar="P")
    parser.add_argument("--threads", type=int, default=1, metavar="T")
    parser.add_argument("--graph", action="store_true", help="write it as a stream graph")
    args = parser.parse_args(argv)
    if args.file:
        with open(args.file, encoding="utf-8") as text:
            lines = text.read().splitlines()
    else:
        lines = HAMLET.splitlines()
    per = args.lines_per_epoch
    if args.graph:
        flow = graph_flow(lines)
        pairs = None
    else:
        flow = chain_flow()
        pairs = [(i // per if per > 0 else 0, line) for i, line in enumerate(lines)]
    if args.processes == 1 and args.threads == 1:
        out = list(run(flow, pairs)) if pairs is not None else list(run(flow))
    else:
        out = run_cluster(flow, pairs, args.processes, args.threads)
    if args.graph:  # one total per word, at the epoch the input ended in
        for word, count in sorted(item for _, item in out):
            print(word, count)
        return 0
    for epoch, (word, count) in sorted(out):
        print(epoch, word, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
