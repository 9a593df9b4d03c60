"""Dataflows for tests/test_visualize.py's command-line tests (``module:attribute`` targets).

``flow`` is a flow-layer Dataflow (an epoch chain), ``graph_flow`` one with
a stream graph; ``build`` builds a runtime dataflow; the others are the
wrong kinds of thing, for the error cases.
"""

from __future__ import annotations

from operator import add
from typing import Any

import timelypy.flow.operators as op
from timelypy.flow import AdvanceTo, Dataflow, Emit, ManualInputConfig
from timelypy.flow.testing import TestingSink, TestingSource


def lines(worker_index: int, worker_count: int, resume_epoch: int) -> Any:
    """Two lines in epoch 0 (worker 0 only)."""
    if worker_index == 0:
        yield AdvanceTo(0)
        yield Emit("to be or not")
        yield Emit("to be")


flow = Dataflow()
flow.input("lines", ManualInputConfig(lines))
flow.flat_map(str.split, step_id="words")
flow.map(lambda word: (word, 1), step_id="pairs")
flow.reduce_epoch(add, step_id="count")
flow.capture()

#: Numbers branched by parity; the odd ones joined with their names.
graph_flow = Dataflow("numbers")
numbers = op.input("numbers", graph_flow, TestingSource([("1", 1), ("2", 2)]))
names = op.input("names", graph_flow, TestingSource([("1", "one")]))
parity = op.branch("odd", numbers, lambda item: item[1] % 2 == 1)
op.output("evens", parity.falses, TestingSink([]))
op.output("named", op.join("name", parity.trues, names), TestingSink([]))


def build(scope: Any) -> None:
    """Numbers, doubled, exchanged by value, into a probe."""
    scope.to_stream(range(10)).map(lambda x: 2 * x).exchange(lambda x: x).probe()


class Holder:
    """Holds a flow, for a dotted attribute path."""

    flow = flow


#: Not a flow and not a function.
number = 42


def no_arguments() -> None:
    """A function that cannot be called as build(scope)."""


def broken(scope: Any) -> None:
    """A build function that fails while building."""
    raise RuntimeError("broken build function")
