r"""A wordcount in the epoch-level API, as a bytewax 0.x program writes it, imports changed.

    python examples/flow_wordcount.py                           # one epoch
    python examples/flow_wordcount.py --per-line                # one epoch per line
    python examples/flow_wordcount.py --per-line --show-epochs  # ... printing the epochs

The original imports ``from bytewax import Dataflow, run`` and ``from
bytewax.inputs import ManualInputConfig``; here they come from
``timelypy.flow``.  Everything below the imports is the program unchanged:
epochs (``reduce_epoch`` counts each epoch's words), steps and state keys
(the words).

It reads ``wordcount.txt`` from the current directory; if there is none, it
runs in a temporary directory holding a sample text (the first five lines
of Hamlet's soliloquy).

* Without flags every line is in epoch 1, so ``reduce_epoch`` counts the
  whole text: ``('to', 4)``, ``('the', 3)``, ... one line per word.
* With ``--per-line`` line ``i`` is in epoch ``i`` and the counts are per
  line: ``to`` appears three times, ``('to', 2)`` then ``('to', 1)`` twice.
* ``--show-epochs`` prints ``epoch item``, to inspect the epochs:
  ``0 ('to', 2)``, ``1 ("'tis", 1)``, ...

Order within an epoch is not guaranteed (nor, across epochs, the order in
which the lines are printed), so compare the output as a multiset.
"""

import os
import re
import sys
import tempfile

from timelypy.flow import Dataflow, run
from timelypy.flow.inputs import ManualInputConfig  # noqa: F401 - the original imports it

#: A sample wordcount.txt.
HAMLET = """\
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them.
"""

PER_LINE = "--per-line" in sys.argv[1:]
SHOW_EPOCHS = "--show-epochs" in sys.argv[1:]
unknown = sorted(set(sys.argv[1:]) - {"--per-line", "--show-epochs"})
if unknown:
    sys.exit(f"usage: {sys.argv[0]} [--per-line] [--show-epochs] (unknown: {' '.join(unknown)})")

if not os.path.exists("wordcount.txt"):
    scratch = tempfile.TemporaryDirectory()
    os.chdir(scratch.name)
    with open("wordcount.txt", "w") as text:
        text.write(HAMLET)


# --- one epoch: the whole text ------------------------------------------------------


def file_input():
    for line in open("wordcount.txt"):
        yield 1, line


def lower(line):
    return line.lower()


def tokenize(line):
    return re.findall(r'[^\s!,.?":;0-9]+', line)


def initial_count(word):
    return word, 1


def add(count1, count2):
    return count1 + count2


flow = Dataflow()
flow.map(lower)
flow.flat_map(tokenize)
flow.map(initial_count)
flow.reduce_epoch(add)
flow.capture()


if not PER_LINE:
    for epoch, item in run(flow, file_input()):  # noqa: B007 - the original's loop
        print(item)

# --- one epoch per line, and inspecting the epochs ------------------------------------

else:

    def file_input():
        for i, line in enumerate(open("wordcount.txt")):  # noqa: UP028 - the original's loop
            yield i, line

    if not SHOW_EPOCHS:
        for epoch, item in run(flow, file_input()):  # noqa: B007 - the original's loop
            print(item)
    else:
        for epoch, item in run(flow, file_input()):
            print(epoch, item)
