"""Standard output: :class:`StdOutSink` prints every item, a line each, on its worker.

At-least-once: after a resume, the items of the epochs that were being
written when the flow stopped are printed again.
"""

from __future__ import annotations

import sys
from typing import Any

from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition

__all__ = ["StdOutSink"]


class StdOutSink(DynamicSink[Any]):
    """Print each item (``str(item)``) on standard output, flushed after every batch.

    >>> from timelypy.flow.dataflow import Dataflow
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource, run_main
    >>> flow = Dataflow("hello")
    >>> op.output("out", op.input("inp", flow, TestingSource(["hello", "world"])), StdOutSink())
    >>> run_main(flow)
    hello
    world
    """

    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSinkPartition[Any]:
        """The printer of worker ``worker_index``."""
        return _Print()


class _Print(StatelessSinkPartition[Any]):
    def write_batch(self, items: list[Any]) -> None:
        out = sys.stdout
        out.write("".join([f"{item}\n" for item in items]))
        out.flush()
