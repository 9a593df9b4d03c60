"""Where a flow's captured items go: output configs.

``flow.capture(output_config)`` sends every item that reaches it, with its
epoch, to an output.  Without a config, ``run``/``run_cluster`` return the
items to the caller; with one:

* :class:`ManualOutputConfig` -- ``output_builder(worker_index,
  worker_count)`` is called once per worker and returns a callable of
  ``(epoch, item)`` that the worker calls for each item it captures;
* :class:`StdOutputConfig` -- print each item on standard output;
* :class:`PartitionedOutputConfig` -- items are ``(key, value)``; each goes
  to one partition, written only by that partition's primary worker.

>>> out = []
>>> def output_builder(worker_index, worker_count):
...     return lambda epoch, item: out.append(item)
>>> config = ManualOutputConfig(output_builder)
>>> config.output_builder(0, 1)(0, "x"); out
['x']
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from timelypy.errors import FlowError
from timelypy.flow.sinks import (
    CaptureSink,
    DynamicSink,
    FixedPartitionedSink,
    Sink,
    StatefulSinkPartition,
    StatelessSinkPartition,
)
from timelypy.hashing import stable_hash

__all__ = [
    "Sink",
    "CaptureSink",
    "FixedPartitionedSink",
    "StatefulSinkPartition",
    "DynamicSink",
    "StatelessSinkPartition",
    "OutputConfig",
    "ManualOutputConfig",
    "StdOutputConfig",
    "PartitionedOutputConfig",
    "TestingOutputConfig",
    "OutputWriter",
]

#: What an output writes with: called with ``(epoch, item)``.
OutputWriter = Callable[[int, Any], Any]


class OutputConfig:
    """Base class of the places a ``capture`` step can write to."""


class ManualOutputConfig(OutputConfig):
    """Output through ``output_builder(worker_index, worker_count) -> writer(epoch, item)``."""

    def __init__(self, output_builder: Callable[[int, int], OutputWriter]) -> None:
        if not callable(output_builder):
            raise FlowError(
                "ManualOutputConfig needs a callable output_builder(worker_index, worker_count) "
                f"returning a callable of (epoch, item), got {output_builder!r}"
            )
        self.output_builder = output_builder

    def __repr__(self) -> str:
        return (
            f"ManualOutputConfig({getattr(self.output_builder, '__name__', self.output_builder)})"
        )


class StdOutputConfig(OutputConfig):
    """Print each captured item (as ``print(item)`` would) on standard output.

    Items are written a batch at a time, one line each, and flushed after
    every batch.
    """

    def __repr__(self) -> str:
        return "StdOutputConfig()"


class TestingOutputConfig(OutputConfig):
    """Append every captured ``(epoch, item)`` to ``sink`` (a list): for tests of your flows.

    Works with threads (the list is shared); with several processes each
    process appends to its own copy.
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, sink: list[tuple[int, Any]]) -> None:
        self.sink = sink

    def __repr__(self) -> str:
        return f"TestingOutputConfig({len(self.sink)} items)"


class PartitionedOutputConfig(OutputConfig):
    """An output made of partitions, each written by exactly one worker (its primary).

    Captured items must be ``(key, value)`` pairs.  Implement:

    * :meth:`list_parts` -- the partitions *this* worker can write;
    * :meth:`build_part` -- a writer ``(epoch, item)`` for one partition,
      called on its primary only;
    * optionally :meth:`part_for` -- which partition a key goes to (default:
      the stable hash of the key, modulo the number of partitions, in
      sorted name order, so it is the same in every process).
    """

    def list_parts(self, worker_index: int, worker_count: int) -> Iterable[str]:
        """The names of the partitions worker ``worker_index`` can write."""
        raise NotImplementedError(f"{type(self).__name__} must implement list_parts")

    def build_part(self, part: str) -> OutputWriter:
        """A writer of ``(epoch, item)`` for partition ``part``."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_part")

    def part_for(self, key: Any, parts: list[str]) -> str:
        """The partition (one of the sorted ``parts``) that items with ``key`` go to."""
        return parts[stable_hash(key) % len(parts)]

    def all_parts(self) -> Iterable[str] | None:
        """Every partition that must be writable, or ``None`` to take what the workers list."""
        return None


def print_batch(epoch: int, items: list[Any]) -> None:
    """Write ``items`` to standard output, one per line (the :class:`StdOutputConfig` writer)."""
    out = sys.stdout
    out.write("".join([f"{item}\n" for item in items]))
    out.flush()
