"""Mistakes ``mypy --strict`` must catch: each line ends in the ignore for its error.

test_typing.py runs mypy with ``--warn-unused-ignores``: a mistake that
mypy lets through leaves its ignore unused, which fails the test.
"""

from __future__ import annotations

import timelypy.flow.operators as op
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.operators import KeyedStream
from timelypy.flow.testing import TestingSink, TestingSource

flow = Dataflow("bad")
numbers: Stream[int] = op.input("numbers", flow, TestingSource([1, 2]))

# a str function over ints
op.map("upper", numbers, str.upper)  # type: ignore[arg-type]
# a map's result is not the declared stream type
texts: Stream[str] = op.map("double", numbers, lambda x: x * 2)  # type: ignore[arg-type, return-value]
# a keyed operator over a stream that is not keyed
op.stateful_map("sum", numbers, lambda s, v: (s, v))  # type: ignore[arg-type]
# a key function that does not return a str
op.key_on("key", numbers, lambda x: x)  # type: ignore[arg-type, return-value]
# a predicate that takes the wrong type
op.filter("short", numbers, lambda s: len(s) > 2)  # type: ignore[arg-type]
# a sink of another item type
sink: list[str] = []
op.output("out", numbers, TestingSink(sink))  # type: ignore[misc]
# a step ID that is not a str
op.map(3, numbers, str)  # type: ignore[arg-type]
# the values of a keyed stream are ints, not strs
keyed: KeyedStream[int] = op.key_on("k", numbers, str)
op.map_value("strip", keyed, str.strip)  # type: ignore[arg-type]
