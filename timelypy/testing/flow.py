"""A list in, a list out: testing sources and sinks for :mod:`timelypy.flow`.

As bytewax's ``bytewax.testing`` does for its flows:

* :class:`TestingSource` feeds a flow from a list of ``(epoch, item)``
  pairs (stamp bare items with :func:`~timelypy.flow.inputs.single_batch`
  or :func:`~timelypy.flow.inputs.fully_ordered`).  It is a
  :class:`~timelypy.flow.inputs.PartitionedInputConfig`: with ``parts=N``
  the pairs are dealt round-robin over ``N`` partitions, which the
  workers share out (each read by one worker), so a multi-worker run
  reads on several workers, as a real partitioned source would.  It skips
  the epochs before a resumed execution's resume epoch, so it works with
  recovery too.
* :class:`TestingSink` collects every item a ``capture`` step sees into a
  list (with ``epochs=True``, ``(epoch, item)`` pairs, as
  :class:`~timelypy.flow.outputs.TestingOutputConfig` does).  Workers that
  are threads of this process share the list; it cannot collect from
  other processes and says so.
* :func:`items_by_epoch` groups ``(epoch, item)`` pairs (a flow's output,
  or its input for a model) by epoch, since the order of items within an
  epoch is not fixed on several workers.

>>> from timelypy.flow import Dataflow, run_cluster
>>> out = []
>>> flow = Dataflow()
>>> flow.input("numbers", TestingSource([(0, 1), (0, 2), (1, 3)], parts=2))
>>> flow.map(lambda x: x * 10)
>>> flow.capture(TestingSink(out))
>>> run_cluster(flow, worker_count_per_proc=2)
[]
>>> sorted(out)
[10, 20, 30]
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from timelypy.errors import FlowError
from timelypy.flow.inputs import InputItem, PartitionedInputConfig, epochs_from_pairs
from timelypy.flow.outputs import ManualOutputConfig, OutputWriter

__all__ = ["TestingSource", "TestingSink", "items_by_epoch"]


def _check_pairs(pairs: object, what: str) -> list[tuple[int, Any]]:
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise FlowError(f"{what} takes an iterable of (epoch, item) pairs, got {pairs!r}")
    checked: list[tuple[int, Any]] = []
    previous = 0
    for position, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise FlowError(
                f"{what}: element {position} must be an (epoch, item) pair, got {pair!r}; stamp "
                "bare items with single_batch or fully_ordered (timelypy.flow)"
            )
        epoch = pair[0]
        if type(epoch) is not int or epoch < 0:
            raise FlowError(f"{what}: element {position} has epoch {epoch!r}; epochs are ints >= 0")
        if epoch < previous:
            raise FlowError(
                f"{what}: element {position} is at epoch {epoch}, after an element at epoch "
                f"{previous}; epochs must not decrease"
            )
        previous = epoch
        checked.append(pair)
    return checked


class TestingSource(PartitionedInputConfig):
    """A flow input from a list of ``(epoch, item)`` pairs, over ``parts`` partitions.

    Pair ``i`` goes to partition ``i % parts``; every worker can read every
    partition, and each partition is read by exactly one worker.  Epochs
    must be ints ``>= 0`` that never decrease.

    >>> source = TestingSource([(0, "a"), (1, "b"), (1, "c")], parts=2)
    >>> list(source.list_parts(0, 1))
    ['part-0', 'part-1']
    >>> list(source.build_part("part-1", resume_epoch=0))
    [AdvanceTo(epoch=1), Emit(item='b')]
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, pairs: Iterable[tuple[int, Any]], parts: int = 1) -> None:
        if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise FlowError(f"TestingSource needs parts >= 1, got {parts!r}")
        self.pairs = _check_pairs(pairs, "TestingSource")
        self.parts = parts

    def list_parts(self, worker_index: int, worker_count: int) -> list[str]:
        """Every partition: any worker can read any of them."""
        return [f"part-{index}" for index in range(self.parts)]

    def all_parts(self) -> list[str]:
        """Every partition must be read."""
        return self.list_parts(0, 1)

    def build_part(
        self, part: str, resume_epoch: int, resume_state: Any = None
    ) -> Iterator[InputItem]:
        """The reader of ``part``: its pairs as ``AdvanceTo``/``Emit``, from ``resume_epoch`` on."""
        names = self.list_parts(0, 1)
        if part not in names:
            raise FlowError(f"TestingSource has no partition {part!r}; it has {names}")
        return self._read(names.index(part), resume_epoch)

    def _read(self, index: int, resume_epoch: int) -> Iterator[InputItem]:
        return epochs_from_pairs(self.pairs[index :: self.parts], resume_epoch)

    def __repr__(self) -> str:
        return f"TestingSource({len(self.pairs)} pairs, parts={self.parts})"


class TestingSink(ManualOutputConfig):
    """A flow output that appends every captured item to ``items`` (a list).

    With ``epochs=True`` it appends ``(epoch, item)`` pairs instead.  The
    workers must be threads of the process that made the sink (``run``,
    ``run_cluster`` with one process); another process would fill a copy
    of the list, so it raises instead.

    >>> from timelypy.flow import Dataflow, run
    >>> out = []
    >>> flow = Dataflow()
    >>> flow.filter(lambda x: x % 2 == 0)
    >>> flow.capture(TestingSink(out, epochs=True))
    >>> list(run(flow, [(0, 1), (0, 2), (3, 4)]))
    []
    >>> out
    [(0, 2), (3, 4)]
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, items: list[Any], *, epochs: bool = False) -> None:
        if not isinstance(items, list):
            raise FlowError(f"TestingSink appends to a list, got {items!r}")
        self.items = items
        self.epochs = epochs
        self._pid = os.getpid()
        self._lock = threading.Lock()
        super().__init__(self._writer)

    def _writer(self, worker_index: int, worker_count: int) -> OutputWriter:
        if os.getpid() != self._pid:
            raise FlowError(
                f"TestingSink collects into a list of the process that made it, but worker "
                f"{worker_index} runs in another process; capture without an output config "
                "(run_cluster returns the items) or write with ManualOutputConfig"
            )
        items, lock = self.items, self._lock

        if self.epochs:

            def write_pair(epoch: int, item: Any) -> None:
                with lock:
                    items.append((epoch, item))

            return write_pair

        def write(epoch: int, item: Any) -> None:
            with lock:
                items.append(item)

        return write

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = None  # locks do not pickle; a copy in another process only raises
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TestingSink({len(self.items)} items, epochs={self.epochs})"


def items_by_epoch(pairs: Iterable[tuple[int, Any]]) -> dict[int, list[Any]]:
    """``(epoch, item)`` pairs grouped by epoch, epochs in order, items sorted.

    Items that do not compare are sorted by their ``repr``.

    >>> items_by_epoch([(1, "b"), (0, "z"), (1, "a")])
    {0: ['z'], 1: ['a', 'b']}
    """
    grouped: dict[int, list[Any]] = {}
    for pair in pairs:
        try:
            epoch, item = pair
        except (TypeError, ValueError):
            raise FlowError(f"items_by_epoch takes (epoch, item) pairs, got {pair!r}") from None
        grouped.setdefault(epoch, []).append(item)
    result: dict[int, list[Any]] = {}
    for epoch in sorted(grouped):
        try:
            result[epoch] = sorted(grouped[epoch])
        except TypeError:
            result[epoch] = sorted(grouped[epoch], key=repr)
    return result
