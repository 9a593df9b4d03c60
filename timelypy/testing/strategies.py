"""Hypothesis strategies for property-testing your operators and flows.

This is the one module of :mod:`timelypy.testing` that imports
`hypothesis <https://hypothesis.readthedocs.io>`_ (``pip install
hypothesis``); the rest of the kit works without it.

* :func:`epoch_batches` -- one input: ``(epoch, records)`` batches with
  epochs that never decrease, as :func:`~timelypy.testing.simulate` takes;
* :func:`worker_counts` -- how many workers to simulate;
* :func:`schedules` -- which worker feeds and steps next
  (:class:`~timelypy.testing.simulation.Turn`), an interleaving of the
  workers' steps; shrinking makes it shorter, and the empty schedule is a
  plain round-robin run;
* :func:`flow_pairs` -- ``(epoch, item)`` pairs for a flow's
  :class:`~timelypy.testing.flow.TestingSource` or ``run(flow, pairs)``.

Together they make a property test of an operator against a plain-Python
model a few lines long::

    @given(epoch_batches(st.integers(0, 9)), worker_counts(), schedules())
    def test_sum(batches, workers, schedule):
        run = simulate(sum_per_epoch, batches, workers=workers, schedule=schedule)
        run.assert_output([(e, [sum(r)]) for e, r in records_by_epoch(batches).items()])

:func:`simulate` is deterministic, so the example hypothesis reports when
the property fails (inputs, worker count, schedule) replays the failing run
exactly.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st

from timelypy.testing.simulation import Turn

__all__ = ["epoch_batches", "worker_counts", "schedules", "flow_pairs"]

T = TypeVar("T")


def _positive(value: object, name: str, caller: str, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{caller}: {name} must be an int >= {minimum}, got {value!r}")
    return value


def _sorted_by_epoch(batches: list[tuple[int, T]]) -> list[tuple[int, T]]:
    return sorted(batches, key=lambda batch: batch[0])


def epoch_batches(
    records: st.SearchStrategy[T] | None = None,
    *,
    epochs: int = 4,
    max_batches: int = 8,
    max_records: int = 4,
) -> st.SearchStrategy[list[tuple[int, list[T]]]]:
    """Lists of ``(epoch, records)`` batches, epochs in ``0..epochs-1``, never decreasing.

    ``records`` draws one record (small ints by default).  Batches may
    share an epoch and may be empty (an empty batch only advances the
    input); there are at most ``max_batches`` of at most ``max_records``
    records each.  Shrinking removes batches and records and lowers epochs.

    >>> from hypothesis import find
    >>> find(epoch_batches(), lambda batches: len(batches) >= 2)
    [(0, []), (0, [])]
    >>> find(epoch_batches(), lambda batches: len({e for e, r in batches if r}) >= 2)
    [(0, [0]), (1, [0])]
    """
    _positive(epochs, "epochs", "epoch_batches")
    _positive(max_batches, "max_batches", "epoch_batches", 0)
    _positive(max_records, "max_records", "epoch_batches", 0)
    drawn: st.SearchStrategy[Any] = records if records is not None else st.integers(0, 9)
    batch = st.tuples(st.integers(0, epochs - 1), st.lists(drawn, max_size=max_records))
    return st.lists(batch, max_size=max_batches).map(_sorted_by_epoch)


def worker_counts(max_workers: int = 4) -> st.SearchStrategy[int]:
    """Worker counts ``1..max_workers`` (shrinking towards one worker).

    >>> from hypothesis import find
    >>> find(worker_counts(), lambda n: n > 2)
    3
    """
    return st.integers(1, _positive(max_workers, "max_workers", "worker_counts"))


def schedules(
    max_turns: int = 40, *, max_worker: int = 7, max_feeds: int = 2
) -> st.SearchStrategy[list[Turn]]:
    """Interleavings of worker steps: lists of :class:`Turn` for :func:`simulate`.

    A turn's worker is drawn from ``0..max_worker`` and taken modulo the
    number of workers when the schedule runs, so a schedule can be drawn
    independently of the worker count.  Each turn feeds ``0..max_feeds``
    times before its step: zero steps without feeding (the worker only
    catches up), more sends several batches between two steps.

    >>> from hypothesis import find
    >>> find(schedules(), lambda turns: any(turn.feeds == 0 for turn in turns))
    [Turn(worker=0, feeds=0)]
    """
    _positive(max_turns, "max_turns", "schedules", 0)
    _positive(max_worker, "max_worker", "schedules", 0)
    _positive(max_feeds, "max_feeds", "schedules", 0)
    turn = st.builds(Turn, st.integers(0, max_worker), st.integers(0, max_feeds))
    return st.lists(turn, max_size=max_turns)


def flow_pairs(
    items: st.SearchStrategy[T] | None = None, *, epochs: int = 4, max_size: int = 30
) -> st.SearchStrategy[list[tuple[int, T]]]:
    """``(epoch, item)`` pairs with epochs in ``0..epochs-1`` that never decrease.

    ``items`` draws one item (``(key, value)`` pairs with keys ``"a"``..
    ``"d"`` and small int values by default, as keyed steps take them).

    >>> from hypothesis import find
    >>> find(flow_pairs(), lambda pairs: len(pairs) > 1)
    [(0, ('a', 0)), (0, ('a', 0))]
    """
    _positive(epochs, "epochs", "flow_pairs")
    _positive(max_size, "max_size", "flow_pairs", 0)
    drawn: st.SearchStrategy[Any] = (
        items if items is not None else st.tuples(st.sampled_from("abcd"), st.integers(0, 9))
    )
    pair = st.tuples(st.integers(0, epochs - 1), drawn)
    return st.lists(pair, max_size=max_size).map(_sorted_by_epoch)
