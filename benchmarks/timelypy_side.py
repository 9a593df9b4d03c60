"""timelypy's side of the runtime benchmarks: the workloads as a Timely user writes them.

Each function builds one dataflow on one worker (``Config.thread()``), runs
it to completion and returns what it produced, so ``runtime_bench`` can
check it against the plain-Python peer (``benchmarks/peers/plain.py``)
before quoting any time.

- ``map_filter``: ``scope.to_stream(ints).map(f).filter(g)``, collected with
  ``inspect_batch(lambda t, d: out.extend(d))``.
- ``wordcount``: lines -> ``flat_map(str.split)`` -> ``count_words``: a
  ``unary_frontier`` operator whose input pact is ``Exchange(stable_hash)``
  (what ``.exchange(stable_hash)`` does, without the extra operator, as in
  Timely's own ``examples/wordcount.rs``). It keeps one ``Counter`` per open
  time, updates it with each whole batch (``Counter.update`` counts in C) and
  gives ``(word, count)`` pairs when the input frontier passes the time. All
  lines are at one epoch, the natural structure of a fixed corpus.
- ``epoch_round_trip``: one record per epoch through ``map`` to a probe:
  ``handle.send(x); handle.advance_to(e + 1); while
  probe.less_than(handle.time): worker.step()``.

Input batches. ``scope.to_stream`` cuts its iterable into batches of
``timelypy.dataflow.operators.to_stream.CHUNK`` records. ``batch_size``
feeds the same records through :func:`batched_source` instead, in slices of
that many records, so timelypy can also be compared with bytewax's
``ListSource`` at the same batch size (``bytewax_peer.DEFAULT_BATCH_SIZE``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import timelypy
from benchmarks.peers.plain import add_one
from timelypy.dataflow import Exchange

if TYPE_CHECKING:
    from timelypy import Capability, Scope, Stream, Worker
    from timelypy.dataflow.handles import OperatorInfo, OperatorInput, OperatorOutput

__all__ = [
    "batched_source",
    "feed",
    "count_words",
    "map_filter",
    "wordcount",
    "epoch_round_trip",
]

X = TypeVar("X")
Y = TypeVar("Y")


def batched_source(scope: Scope, items: Sequence[Any], batch_size: int) -> Stream:
    """A stream of ``items`` at the minimum time, given in slices of ``batch_size``.

    Like ``scope.to_stream(items)`` but with a chosen batch size; one slice
    per activation, the operator rescheduling itself until the last one.

    >>> timelypy.example(lambda s: batched_source(s, range(5), 2).capture()).extract()
    [(0, [0, 1, 2, 3, 4])]
    """
    if batch_size < 1:
        raise ValueError(f"batched_source needs batch_size >= 1, got {batch_size}")

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        held: list[Capability | None] = [cap.retain()]
        position = [0]
        activate = info.activator()

        def logic(output: OperatorOutput) -> None:
            cap = held[0]
            if cap is None:
                return
            start = position[0]
            end = start + batch_size
            chunk = list(items[start:end])
            if chunk:
                output.session(cap).give_batch(chunk)
            position[0] = end
            if end < len(items):
                activate()
            else:
                cap.drop()
                held[0] = None

        return logic

    return timelypy.source(scope, "BatchedSource", constructor)


def feed(scope: Scope, items: Sequence[Any], batch_size: int | None = None) -> Stream:
    """``scope.to_stream(items)``, or :func:`batched_source` when ``batch_size`` is given."""
    if batch_size is None:
        return scope.to_stream(items)
    return batched_source(scope, items, batch_size)


def map_filter(
    ints: Sequence[X],
    f: Callable[[X], Y],
    g: Callable[[Y], object],
    *,
    batch_size: int | None = None,
) -> list[Y]:
    """``to_stream(ints).map(f).filter(g)``; return the outputs in order.

    >>> map_filter(range(6), lambda x: x * 3, lambda y: y % 2 == 0)
    [0, 6, 12]
    """
    out: list[Y] = []

    def build(scope: Scope) -> None:
        stream = feed(scope, ints, batch_size).map(f).filter(g)
        stream.inspect_batch(lambda t, d: out.extend(d))

    timelypy.example(build)
    return out


def count_words(words: Stream) -> Stream:
    """Count each word per time; give ``(word, count)`` pairs once the time completes.

    Records are routed by ``Exchange(timelypy.stable_hash)``, so on several
    workers each word is counted on exactly one. The operator keeps one
    ``Counter`` per open time and feeds it whole batches.

    >>> timelypy.example(lambda s: count_words(s.to_stream("abab")).capture()).extract()
    [(0, [('a', 2), ('b', 2)])]
    """

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., None]:
        counts: dict[Any, tuple[Capability, Counter[Any]]] = {}

        def logic(inp: OperatorInput, out: OperatorOutput) -> None:
            for cap, data in inp:
                entry = counts.get(cap.time)
                if entry is None:
                    entry = counts[cap.time] = (cap.retain(), Counter())
                entry[1].update(data)
            if counts:
                frontier = inp.frontier
                for time in sorted(t for t in counts if not frontier.less_equal(t)):
                    done, counter = counts.pop(time)
                    out.session(done).give_batch(list(counter.items()))
                    done.drop()

        return logic

    return words.unary_frontier(Exchange(timelypy.stable_hash), "CountWords", constructor)


def wordcount(lines: Sequence[str], *, batch_size: int | None = None) -> dict[str, int]:
    """Count the whitespace-separated words of ``lines``; return ``{word: count}``.

    >>> sorted(wordcount(["a b", "b c b"]).items())
    [('a', 1), ('b', 3), ('c', 1)]
    """
    counts: dict[str, int] = {}

    def build(scope: Scope) -> None:
        words = feed(scope, lines, batch_size).flat_map(str.split)
        count_words(words).inspect_batch(lambda t, d: counts.update(d))

    timelypy.example(build)
    return counts


def epoch_round_trip(n: int, f: Callable[[int], Y] = add_one) -> list[Y]:
    """Send ``0..n-1`` one record per epoch through ``map(f)``; return the outputs.

    After each record the input advances to the next epoch and the worker
    steps until the probe has passed it, so every epoch makes the full round
    trip: input, map, collector, progress tracking, probe.

    >>> epoch_round_trip(3)
    [1, 2, 3]
    """

    def program(worker: Worker) -> list[Y]:
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        out: list[Y] = []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(f)
                .inspect_batch(lambda t, d: out.extend(d))
                .probe_with(probe)
            )
        )
        for epoch in range(n):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            while probe.less_than(handle.time):
                worker.step()
        return out

    return timelypy.execute(timelypy.Config.thread(), program)[0]
