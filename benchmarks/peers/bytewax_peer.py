"""bytewax 0.21.1 peers: the workloads as idiomatic bytewax dataflows, one worker.

Every flow runs in the calling thread with ``bytewax.testing.run_main`` (one
worker, no recovery) and writes to a ``bytewax.testing.TestingSink`` list.

Input. ``bytewax.testing.TestingSource`` walks its iterable in Python with an
``isinstance`` check per item, which would charge bytewax for a test helper's
loop. The peers read through ``ListSource`` instead: a ``DynamicSource`` whose
``next_batch`` returns list slices of ``batch_size`` items, about as cheap as a
Python source can be. ``DEFAULT_BATCH_SIZE`` is 1,000 records, the order of
Timely's default buffer. ``map_filter`` gains nothing from larger batches, but
``wordcount`` does, because ``count_final`` pre-aggregates one dict per batch
and so sends fewer keyed items on (``peers_bench --batch-size`` shows it).
Compare timelypy at the same batch size.

Workloads:

- ``map_filter``: ``op.map`` then ``op.filter``. Both are thin shims over
  ``flat_map_batch``, so each batch crosses into Python once per operator.
- ``wordcount``: ``op.flat_map(str.split)`` then ``op.count_final`` keyed by
  the word itself. ``count_final`` is ``map((w, 1))`` + ``reduce_final``, and
  ``reduce_final`` pre-aggregates each batch in a dict before its keyed
  ``fold_final``, so this is both the idiomatic and the fast way in 0.21.
- ``map_filter_batch`` and ``wordcount_batch``: the same work written with
  bytewax's own batch API, ``op.flat_map_batch`` (one Python call per batch
  of the input, a list comprehension or a ``Counter`` inside it), then
  ``op.reduce_final`` of the per-batch counts: what a bytewax user who
  wants speed writes, the peer of timelypy's batch-level steps.
- ``epoch_round_trip``: see its docstring. bytewax has no user-driven epochs
  or probes, but its input operator gives the same round trip when every epoch
  holds exactly one record.

bytewax is imported lazily, so this module imports without it; calling a peer
without it raises an ``ImportError`` that says how to install it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import ModuleType
from typing import Any, TypeVar

from benchmarks.peers.plain import add_one

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "BATCH_SIZES",
    "map_filter",
    "map_filter_batch",
    "wordcount",
    "wordcount_batch",
    "epoch_round_trip",
    "list_source",
]

X = TypeVar("X")
Y = TypeVar("Y")

DEFAULT_BATCH_SIZE = 1000
#: The batch sizes every bytewax figure is quoted at: bytewax's default order, and ten times it.
BATCH_SIZES = (1_000, 10_000)

_INSTALL_HINT = (
    "the bytewax peers need bytewax 0.21.1, which is not installed in this Python "
    "({error}); install the benchmark extras with `pip install -e '.[bench]'`"
)


def _bytewax(name: str) -> ModuleType:
    """Import ``bytewax.<name>``, or say how to install bytewax."""
    try:
        return importlib.import_module(f"bytewax.{name}")
    except ImportError as e:
        raise ImportError(_INSTALL_HINT.format(error=e)) from e


def list_source(items: Sequence[X], batch_size: int = DEFAULT_BATCH_SIZE) -> Any:
    """Return a bytewax ``DynamicSource`` that emits ``items`` in slices of ``batch_size``.

    Worker 0 emits everything; other workers emit nothing. The slices are the
    batches bytewax hands to its operators.
    """
    if batch_size < 1:
        raise ValueError(f"list_source needs batch_size >= 1, got {batch_size}")
    inputs = _bytewax("inputs")

    class _ListPartition(inputs.StatelessSourcePartition):
        def __init__(self, mine: Sequence[X]) -> None:
            self._items = mine
            self._pos = 0

        def next_batch(self) -> Sequence[X]:
            pos = self._pos
            if pos >= len(self._items):
                raise StopIteration
            self._pos = pos + batch_size
            return self._items[pos : pos + batch_size]

    class _ListSource(inputs.DynamicSource):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _ListPartition:
            return _ListPartition(items if worker_index == 0 else ())

    return _ListSource()


def _run(
    build: Callable[[Any, Any, Any], None], name: str, epoch_interval: timedelta | None = None
) -> list[Any]:
    """Build a flow with ``build(flow, op, sink)``, run it on one worker, return the sink."""
    dataflow, op, testing = _bytewax("dataflow"), _bytewax("operators"), _bytewax("testing")
    out: list[Any] = []
    flow = dataflow.Dataflow(name)
    build(flow, op, testing.TestingSink(out))
    testing.run_main(flow, epoch_interval=epoch_interval)
    return out


def map_filter(
    ints: Sequence[X],
    f: Callable[[X], Y],
    g: Callable[[Y], object],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> list[Y]:
    """``op.map(f)`` then ``op.filter(g)``; return the outputs in order.

    >>> map_filter(range(6), lambda x: x * 3, lambda y: y % 2 == 0)
    [0, 6, 12]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, list_source(ints, batch_size))
        s = op.map("map", s, f)
        s = op.filter("filter", s, g)
        op.output("out", s, sink)

    return _run(build, "map_filter")


def map_filter_batch(
    ints: Sequence[X],
    f: Callable[[X], Y],
    g: Callable[[Y], object],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> list[Y]:
    """``map(f)`` then ``filter(g)`` in one ``op.flat_map_batch``; return the outputs in order.

    >>> map_filter_batch(range(6), lambda x: x * 3, lambda y: y % 2 == 0)
    [0, 6, 12]
    """

    def batch(items: list[X]) -> list[Y]:
        return [y for y in map(f, items) if g(y)]

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, list_source(ints, batch_size))
        op.output("out", op.flat_map_batch("map_filter", s, batch), sink)

    return _run(build, "map_filter_batch")


def _batch_counts(lines: list[str]) -> list[tuple[str, int]]:
    from collections import Counter

    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.split())
    return list(counts.items())


def _add(a: int, b: int) -> int:
    return a + b


def wordcount_batch(
    lines: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
) -> dict[str, int]:
    """One ``Counter`` per batch (``op.flat_map_batch``), then ``op.reduce_final(add)``.

    >>> sorted(wordcount_batch(["a b", "b c b"]).items())
    [('a', 1), ('b', 3), ('c', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, list_source(lines, batch_size))
        partial = op.flat_map_batch("count_batch", s, _batch_counts)
        op.output("out", op.reduce_final("sum", partial, _add), sink)

    return dict(_run(build, "wordcount_batch"))


def _identity(word: str) -> str:
    return word


def wordcount(lines: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> dict[str, int]:
    """``op.flat_map(str.split)`` then ``op.count_final``; return ``{word: count}``.

    >>> sorted(wordcount(["a b", "b c b"]).items())
    [('a', 1), ('b', 3), ('c', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, list_source(lines, batch_size))
        words = op.flat_map("split", s, str.split)
        counts = op.count_final("count", words, _identity)
        op.output("out", counts, sink)

    return dict(_run(build, "wordcount"))


def epoch_round_trip(n: int, f: Callable[[int], Y] = add_one) -> list[Y]:
    """Send ``0..n-1`` one record per epoch through ``op.map(f)``; return the outputs.

    This is bytewax's closest analogue of Timely's "send one record, advance
    the input, step until the probe passes" loop. bytewax has no user-driven
    epochs and no user probes, but its input operator (``src/inputs.rs`` in
    0.21.1) does the equivalent itself: a source only reads its next batch
    once the dataflow's probe, attached to every output, has passed the
    current epoch, and after reading it closes the epoch when
    ``epoch_interval`` has elapsed. With a one-item batch and
    ``epoch_interval=timedelta(0)`` every record is its own epoch, and the
    input waits for that record to reach the sink and the frontier to pass it
    before reading the next. ``n / time`` is therefore epochs (= records) per
    second through input, map, sink and probe, with bytewax's full per-epoch
    cost: frontier round trip, capability downgrade, and the Rust-Python
    crossings for each batch. It uses a ``DynamicSource``, so no per-epoch
    snapshot is taken (as with timelypy, which has no recovery here).

    >>> epoch_round_trip(3)
    [1, 2, 3]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, list_source(range(n), batch_size=1))
        s = op.map("map", s, f)
        op.output("out", s, sink)

    return _run(build, "epoch_round_trip", epoch_interval=timedelta(0))
