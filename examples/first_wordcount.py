r"""A first program: count the words of a text file.

It shows the shape of every stream-graph flow: a source (``FileSource``, the
file's lines), steps that each take a stream and return one (lower-case and
split each line into words, then ``count_final``, which emits one
``(word, count)`` per word when the input ends), and a sink (``StdOutSink``,
one printed line per item).  ``wordcount(path)`` builds the flow; ``flow``
is the one over ``wordcount.txt`` in the current directory.

Run it on one worker::

    python examples/first_wordcount.py hamlet.txt

or through the command line, on several workers or processes (a factory
call with literal arguments picks the file; a missing file counts nothing,
with a warning)::

    python -m timelypy.flow examples/first_wordcount.py:flow              # wordcount.txt
    python -m timelypy.flow "examples/first_wordcount.py:wordcount('hamlet.txt')" -w 2
    python -m timelypy.flow "examples/first_wordcount.py:wordcount('hamlet.txt')" --processes 2

It prints ``('to', 4)``, ``('be', 2)``, ... one line per word, in no
particular order.  The same program runs on bytewax 0.21 with ``timelypy.flow``
renamed ``bytewax`` in its imports.
"""

import re
import sys

import timelypy.flow.operators as op
from timelypy.flow.connectors.files import FileSource
from timelypy.flow.connectors.stdio import StdOutSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.testing import run_main


def wordcount(path="wordcount.txt"):
    flow = Dataflow("wordcount")
    lines = op.input("lines", flow, FileSource(path))
    words = op.flat_map("words", lines, lambda line: re.findall(r"[\w']+", line.lower()))
    counts = op.count_final("count", words, lambda word: word)
    op.output("out", counts, StdOutSink())
    return flow


flow = wordcount()

if __name__ == "__main__":
    run_main(wordcount(*sys.argv[1:]))
