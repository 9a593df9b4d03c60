r"""timelypy.flow (the epoch chain and the stream graph) against bytewax 0.21.1 and plain Python.

    python -m benchmarks.flow_bench [--quick] [--repeat N] [--markdown]
                                    [--no-bytewax] [--no-cluster] [--no-windows]
                                    [--workload NAME ...] [--profile [--top N]]

Every candidate does the same work on the same data in the same run; they are
timed interleaved (one untimed warm-up round, then ``--repeat`` rounds) and
every result is checked against plain Python's before any time is quoted.

Data. The lines are the corpus's own lines (``benchmarks._data``: 200,000
lines of 10 words each, 2,000,000 words), the same list for every peer;
``--quick`` takes the first tenth. The user's functions are those of seed
004's wordcount: ``lower`` (``str.lower``), ``tokenize`` (the seed's
``re.findall(r'[^\s!,.?":;0-9]+', line)``), ``initial_count`` (``word ->
(word, 1)``) and ``operator.add``. Inputs are built before timing. In the
epoch chain's workloads (the stream graph's are described below) timelypy
gets a list of ``(epoch, item)`` pairs, bytewax a list read in slices of
1,000 items (``bytewax_peer.list_source``; its docstring says why), plain
Python the same pairs as timelypy.

The epoch chain's workloads (throughput counts words, items or epochs):

- ``wordcount_1_epoch``: every line in epoch 0; lower -> tokenize -> (word,
  1) -> per-key sum -> output. timelypy: seed 004's flow, ``map(lower)``,
  ``flat_map(tokenize)``, ``map(initial_count)``, ``reduce_epoch(add)``,
  ``capture()``, run with ``run``. bytewax: ``op.map``, ``op.flat_map``,
  ``op.map``, ``op.reduce_final(add)``, ``op.output``. ``reduce_final`` emits
  each key's sum when its input ends, which with a single epoch is exactly
  when ``reduce_epoch`` emits (the epoch closes at the end of the input); it
  is what ``count_final`` uses inside, and it pre-aggregates each batch in a
  dict before its keyed state, as ``reduce_epoch`` combines before its
  exchange, so both sides get their engine's fast path.
- ``wordcount_1000_epochs``: the same flow, the lines split into 1,000
  consecutive epochs by line number (line ``i`` is in epoch ``i // 200``,
  200 lines or 2,000 words per epoch; ``--quick``: 20 lines); the result is
  one ``(word, count)`` per word and epoch (783,422 at full size). bytewax
  0.21 has no user epochs (its epochs are an internal snapshot cadence), so
  its equivalent is a keyed ``op.reduce_final`` whose key is
  ``"epoch:word"``: the same steps on ``(epoch, line)`` items, the epoch
  carried along (``bytewax_epoch_wordcount``), and in bytewax's batch API
  ``op.flat_map_batch`` of ``count_batch`` per epoch's run of lines in each
  batch, then the same ``reduce_final`` (``bytewax_epoch_batch_wordcount``).
  They emit every count at the end of the input where timelypy emits each
  epoch's as it closes; the goal is judged against these keyed rows. For
  scale (not a goal's peer; what this row was compared with before issue
  43), an event-time tumbling window per epoch: each line carries the
  timestamp ``ALIGN + epoch seconds`` (a ``datetime`` made once per epoch,
  before timing), the steps are the same functions wrapped to carry it
  along, and ``fold_window`` (``TumblingWindower(1 s, ALIGN)``, folder
  ``add(acc, 1)``, merger ``add``) keyed by the word gives ``(word,
  (window_id, count))`` with ``window_id`` = the epoch. The ``EventClock``
  takes its "system" time from a constant (``now_getter``), so the watermark
  is exactly the latest epoch seen: a window closes when the first line of
  a later epoch arrives, as an epoch does, and never because the machine was
  slow (with the wall clock a slow run could drop lines as late). It keeps
  the default ``to_system_utc``, so bytewax wakes every key with an open
  window and emits its count as soon as the window closes, not only at the
  end of the input.
- ``stateful_map``: a running count per key over the corpus's words as
  ``(word, 1)`` items (2,000,000), all in epoch 0; one output per item.
  timelypy: ``stateful_map("running", builder, running_count)`` with
  ``builder = key -> 0`` and ``running_count(count, v) -> (count + v, count
  + v)``; bytewax: ``op.stateful_map`` (its mapper gets ``None`` for a new
  key, so the same function starts from ``count or 0``); plain Python: a dict
  of states and the same two functions.
- ``fully_ordered``: 100,000 ints (``--quick``: 10,000), one per epoch
  (``fully_ordered``), through ``map(add_one)`` and ``capture``; throughput
  is epochs (= items) per second. bytewax's equivalent is
  ``bytewax_peer.epoch_round_trip``: one-item batches with
  ``epoch_interval=0``, so that each item is its own bytewax epoch and the
  input reads the next only after the frontier has passed the previous one
  (its docstring has the details). ``(its own epochs)`` is shown for
  scale: the same map and output with bytewax's default cadence (1,000-item
  batches, one epoch per 10 s), i.e. *not* one epoch per item; the goal is
  judged against the one-epoch-per-item candidate.

bytewax's rows. Every bytewax row names its operators and its input batch
size, and runs at each of ``bytewax_peer.BATCH_SIZES`` (1,000, bytewax's
default order, and 10,000), except the two whose batch is the point
(``batch 1``, an epoch per item) or bytewax's default cadence, and the
window row. The wordcounts also run in bytewax's own batch API:
``op.flat_map_batch`` of ``count_pairs`` (``count_batch``'s counts as a
list: one regular-expression pass per batch, the same function as
``timelypy batch``), then ``op.reduce_final(add)``; the running counts in
``op.stateful_batch`` (``bytewax_stateful_batch``: a key's values of a
batch added up in one loop, what ``op.stateful_map`` does inside without
a call per value). ``join_running`` and ``branch_merge`` have no batch
form in bytewax 0.21 (``op.join`` and ``op.branch`` are per item). ``vs bytewax`` is
against the workload's first bytewax row (per-item operators, batch
1,000), ``vs fastest bytewax`` against its fastest bytewax row in this
run; both are named under the table, with a line on what each row that
needs one runs. A goal against bytewax has a row per bytewax row it is
judged against.

Candidates: ``plain`` (the limit: the user's functions called once per
record in a plain loop, the dict fold included), ``timelypy`` (``run``, one
worker), bytewax (one worker, ``bytewax.testing.run_main``), for the two
wordcounts the batch-level flow and its own limit (issue 43):
``timelypy batch`` is ``reduce_epoch(add, pre_aggregate=count_batch)``
alone (``count_batch(lines) = Counter(TOKEN.findall(" ".join(lines)
.lower()))``: the seed's tokenisation, one regular-expression pass per
batch of lines) run with ``run``, and ``plain batch`` is that function
called on the same lines in slices of ``PULL_LIMIT`` per epoch, the
counts added up per epoch in a dict (the limit for the batch-level flow;
its own ratio is quoted in the goals table), and, for
``wordcount_1_epoch`` unless ``--no-cluster``, ``timelypy 2 threads``
(``run_cluster(flow, pairs, 1, 2)``) and ``timelypy 2 procs``
(``run_cluster(flow, pairs, 2, 1)``, helper process start-up included). With
an iterable of pairs only worker 0 reads, lowers and tokenizes; the other
worker only sums its share of the keys, so these show the cost of the
exchange more than a speed-up.

The stream graph's workloads (``benchmarks.flow_graph``; issue 36). Each
flow is one function of an operators module, so timelypy
(``timelypy.flow.operators``) and bytewax (``bytewax.operators``) run the
same steps with the same functions; both run with their
``testing.run_main`` (one worker, the calling thread) into a
``TestingSink``, the flow built inside the timed call. In-memory inputs
reach timelypy through ``timelypy.flow.testing.TestingSource(items,
batch_size=1000)`` and bytewax through ``bytewax_peer.list_source``
(1,000-item slices). timelypy's ``TestingSource`` checks each item for its
markers (three ``isinstance`` per item), a cost bytewax's list slices do
not have and that is charged to timelypy here. ``GRAPH_ITEMS`` is
1,000,000 (``--quick``: 100,000).

- ``wordcount_file``: the corpus's lines, written once (before timing) to
  a temporary file, one per line; lower -> tokenize -> ``count_final``
  keyed by the word -> output, ``(word, count)`` per word; throughput
  counts words. ``timelypy`` and ``bytewax`` read the file with their own
  ``connectors.files.FileSource`` (1,000 lines a batch); ``plain`` reads
  the same file line by line and counts in a dict. The chain and the graph
  are compared from memory, on the same list of lines, with seed 004's
  steps (``initial_count`` and ``add``, as in ``wordcount_1_epoch``):
  ``timelypy chain`` is ``wordcount_flow`` with ``run`` (one epoch; its
  ``capture`` writes to a list, as the graph's sink does, so both forms
  are compared on their engines rather than on ``run`` yielding each item),
  ``timelypy memory`` the same steps as a graph (``map``, ``flat_map``,
  ``map``, ``reduce_final(add)``) from a ``TestingSource``, and ``bytewax
  memory`` that graph in bytewax from ``list_source``. Their "vs plain" is
  against ``plain``'s reading of the file. From the file also: ``timelypy
  batch 10,000`` (its ``FileSource`` at 10,000 lines a batch), ``timelypy
  pre_aggregate`` (``op.reduce_final(add, pre_aggregate=count_batch)`` on
  the lines: the batch-level step), and bytewax's batch API on its
  ``FileSource``; the goal is judged against bytewax's file rows.
- ``join_running``: two keyed streams of ``GRAPH_ITEMS`` items each,
  ``(word, i)`` over the first and the next ``GRAPH_ITEMS`` words of the
  corpus (5,000 distinct keys), joined by ``op.join(...,
  emit_mode="running")`` (``insert_mode="last"``): one row ``(word, (left
  or None, right or None))`` per item of either side; throughput counts the
  items of both sides. ``plain`` is a dict loop over the left side, then
  the right. The rows depend on how the sides interleave, so results are
  compared per key by what does not: the number of rows, and the distinct
  values of each side in them (their count and sum; each item's row
  carries its value).
- ``stateful_map_graph``: ``op.stateful_map("running", items,
  running_count)`` over ``(word, 1)`` for the first ``GRAPH_ITEMS`` words;
  ``timelypy chain`` is ``stateful_map_flow`` with ``run`` on the same
  items as ``(0, item)`` pairs, capturing to a list; ``plain`` is a dict loop calling
  ``running_count(states.get(key), value)`` that emits ``(key, count)`` as the
  graph does (``stateful_map``'s ``plain`` also wraps each in ``(0, ...)``).
- ``branch_merge``: the ints ``0..GRAPH_ITEMS-1``; ``op.branch`` on
  ``is_even``, ``op.map(add_one)`` on the evens, ``op.map(triple)`` on the
  odds, ``op.merge``, output; checked as a multiset (``merge`` promises no
  order). ``plain`` is one comprehension.

The tables are ``runtime_bench``'s: median time, throughput at the median,
**speed vs plain** (plain's median / the candidate's), **vs bytewax**
(the first bytewax candidate's median / the candidate's), the same two by
CPU time of this process (helper processes not counted) and the spread.
The goals of the flow issue follow (``GOALS``): timelypy >= 3x bytewax on
both chain wordcounts, >= bytewax's epochs/s with ``fully_ordered``; the
graph's ``timelypy`` >= 2x ``bytewax`` on each graph workload; the chain
and the graph of the same flow within 10% of each other either way
(``timelypy memory`` vs ``timelypy chain`` in ``wordcount_file``,
``timelypy`` vs ``timelypy chain`` in ``stateful_map_graph``); met or not
by the wall-clock medians.

``--profile`` runs timelypy's candidate of each workload once under
cProfile (after a warm-up) instead of timing, in both threads ``run`` uses:
the worker thread that runs the dataflow and the calling thread that reads
the captured items from its queue; a graph candidate (``run_main``) runs in
the calling thread alone. ``wordcount_file`` profiles ``timelypy`` and
``timelypy memory``. Shares are of each thread's own profiled total; calls
are also quoted per unit (per 1,024-item input pull, per 1,000-item batch
of a graph input, or per epoch). cProfile charges a fixed cost per Python
call, so it overstates code made of many small calls.
"""

from __future__ import annotations

import cProfile
import functools
import logging
import math
import re
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import groupby
from operator import add, itemgetter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _data
from benchmarks._harness import (
    Stats,
    fmt_ratio,
    peer_parser,
    peer_run,
    print_table,
    timed_call,
)
from benchmarks.peers import bytewax_peer
from benchmarks.peers.plain import add_one
from benchmarks.runtime_bench import Workload, machine, print_report
from benchmarks.runtime_profile import CPROFILE_COLUMNS, profile_rows
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.driver import PULL_LIMIT

logger = logging.getLogger("benchmarks.flow_bench")

EPOCHS = 1_000
ORDERED_ITEMS = 100_000
#: Items of ``stateful_map_graph`` and ``branch_merge``, and of each side of ``join_running``.
GRAPH_ITEMS = 1_000_000
#: The epoch chain's workloads, then the stream graph's (``flow_graph``).
CHAIN_WORKLOADS = ("wordcount_1_epoch", "wordcount_1000_epochs", "stateful_map", "fully_ordered")
GRAPH_WORKLOADS = ("wordcount_file", "join_running", "stateful_map_graph", "branch_merge")
WORKLOADS = CHAIN_WORKLOADS + GRAPH_WORKLOADS
#: Where bytewax's event time starts: epoch ``e`` is ``ALIGN + e`` seconds.
ALIGN = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Goal:
    """A goal of the flow issue: ``candidate``'s speed against ``baseline``'s, by median.

    ``baseline`` ``None`` is the workload's bytewax candidate (the first);
    met when the speed ratio is at least ``target``, or with ``within``
    when the two are within ``target`` of each other either way (``1.1``:
    neither is more than 10% faster).
    """

    workload: str
    target: float
    candidate: str = "timelypy"
    baseline: str | None = None
    within: bool = False


#: The goals of the flow issue.
GOALS: list[Goal] = [
    Goal("wordcount_1_epoch", 3.0),
    # issue 43: the per-item path's engine share, and the batch-level path's
    Goal("wordcount_1_epoch", 0.85, "timelypy", "plain"),
    Goal("wordcount_1_epoch", 0.85, "timelypy batch", "plain batch"),
    Goal("wordcount_1000_epochs", 0.85, "timelypy batch", "plain batch"),
    Goal("wordcount_1000_epochs", 3.0),
    Goal("fully_ordered", 1.0),
    Goal("wordcount_file", 2.0),
    Goal("join_running", 2.0),
    Goal("stateful_map_graph", 2.0),
    Goal("branch_merge", 2.0),
    Goal("wordcount_file", 1.1, "timelypy memory", "timelypy chain", within=True),
    Goal("stateful_map_graph", 1.1, "timelypy", "timelypy chain", within=True),
]

Normalized = Counter[tuple[Any, ...]]

# -- the user's functions (seed 004's wordcount, a running count) --------------

_TOKEN = re.compile(r'[^\s!,.?":;0-9]+')


def lower(line: str) -> str:
    """Seed 004's ``lower``."""
    return line.lower()


def tokenize(line: str) -> list[str]:
    """Seed 004's ``tokenize``.

    >>> tokenize('To be, or not: "to be"?')
    ['To', 'be', 'or', 'not', 'to', 'be']
    """
    return _TOKEN.findall(line)


def initial_count(word: str) -> tuple[str, int]:
    """Seed 004's ``initial_count``."""
    return word, 1


def builder(key: str) -> int:
    """The running count's initial state."""
    return 0


def running_count(count: int | None, value: int) -> tuple[int, int]:
    """Add ``value`` to the key's count; emit the new count (``None``: a new key, bytewax)."""
    count = (count or 0) + value
    return count, count


# -- plain Python: the limit ----------------------------------------------------

_MISSING: Any = object()


def plain_wordcount(pairs: Iterable[tuple[int, str]]) -> list[tuple[int, tuple[str, int]]]:
    """Seed 004's flow as a loop: ``(epoch, (word, count))`` per word and epoch.

    ``pairs`` are ``(epoch, line)`` in epoch order.

    >>> plain_wordcount([(0, "A b a"), (1, "b")])
    [(0, ('a', 2)), (0, ('b', 1)), (1, ('b', 1))]
    """
    out: list[tuple[int, tuple[str, int]]] = []
    acc: dict[str, int] = {}
    current: int | None = None
    for epoch, line in pairs:
        if epoch != current:
            out += [(current, kv) for kv in acc.items()]
            acc = {}
            current = epoch
        get = acc.get
        for word in tokenize(lower(line)):
            key, value = initial_count(word)
            old = get(key, _MISSING)
            acc[key] = value if old is _MISSING else add(old, value)
    out += [(current, kv) for kv in acc.items()]
    return out


def count_batch(lines: Sequence[str]) -> Counter[str]:
    """A batch of lines' word counts: the seed's ``lower`` and ``tokenize`` over them all at once.

    >>> sorted(count_batch(["A b,", "a"]).items())
    [('a', 2), ('b', 1)]
    """
    return Counter(_TOKEN.findall(" ".join(lines).lower()))


def plain_batch_wordcount(
    pairs: Sequence[tuple[int, str]], batch: int = PULL_LIMIT
) -> list[tuple[int, tuple[str, int]]]:
    """``count_batch`` over slices of ``batch`` lines of each epoch, added up per epoch.

    ``pairs`` are ``(epoch, line)`` in epoch order.

    >>> plain_batch_wordcount([(0, "A b a"), (1, "b")])
    [(0, ('a', 2)), (0, ('b', 1)), (1, ('b', 1))]
    """
    out: list[tuple[int, tuple[str, int]]] = []
    start = 0
    while start < len(pairs):
        epoch = pairs[start][0]
        end = start
        while end < len(pairs) and pairs[end][0] == epoch:
            end += 1
        acc: dict[str, int] = {}
        for at in range(start, end, batch):
            for word, n in count_batch(
                [line for _, line in pairs[at : min(at + batch, end)]]
            ).items():
                acc[word] = acc[word] + n if word in acc else n
        out += [(epoch, kv) for kv in acc.items()]
        start = end
    return out


def plain_stateful_map(pairs: Iterable[tuple[int, tuple[str, int]]]) -> list[Any]:
    """``stateful_map(builder, running_count)`` as a loop: ``(epoch, (key, output))``.

    >>> plain_stateful_map([(0, ("a", 1)), (0, ("b", 1)), (0, ("a", 1))])
    [(0, ('a', 1)), (0, ('b', 1)), (0, ('a', 2))]
    """
    states: dict[str, Any] = {}
    get = states.get
    out: list[Any] = []
    append = out.append
    for epoch, (key, value) in pairs:
        state = get(key, _MISSING)
        if state is _MISSING:
            state = builder(key)
        new, output = running_count(state, value)
        states[key] = new
        append((epoch, (key, output)))
    return out


def plain_map(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``map(add_one)`` as a comprehension: ``(epoch, add_one(x))``."""
    return [(epoch, add_one(x)) for epoch, x in pairs]


# -- timelypy.flow --------------------------------------------------------------


def wordcount_flow() -> Dataflow:
    """Seed 004's flow."""
    flow = Dataflow()
    flow.map(lower)
    flow.flat_map(tokenize)
    flow.map(initial_count)
    flow.reduce_epoch(add)
    flow.capture()
    return flow


def batch_wordcount_flow() -> Dataflow:
    """The batch-level wordcount: ``reduce_epoch(add, pre_aggregate=count_batch)``."""
    flow = Dataflow()
    flow.reduce_epoch(add, pre_aggregate=count_batch)
    flow.capture()
    return flow


def stateful_map_flow() -> Dataflow:
    """A running count per key."""
    flow = Dataflow()
    flow.stateful_map("running", builder, running_count)
    flow.capture()
    return flow


def map_flow() -> Dataflow:
    """``map(add_one)`` then ``capture``."""
    flow = Dataflow()
    flow.map(add_one)
    flow.capture()
    return flow


def timelypy_run(make: Callable[[], Dataflow], pairs: Sequence[Any]) -> list[Any]:
    """``list(run(flow, pairs))`` on one worker."""
    return list(run(make(), pairs))


def timelypy_chain_sink(make: Callable[[], Dataflow], pairs: Sequence[Any]) -> list[Any]:
    """The chain ``make()`` builds, its ``capture()`` writing to a list (as the graph's sink does).

    ``run``'s caller then reads nothing: the chain and the graph are
    compared on their engines, not on ``run`` handing over each item.
    """
    from timelypy.flow.outputs import TestingOutputConfig

    flow = make()
    sink: list[Any] = []
    steps = flow.steps
    assert steps[-1].operator == "capture"
    chain = Dataflow()
    for step in steps[:-1]:
        getattr(chain, step.operator)(*_chain_args(step))
    chain.capture(TestingOutputConfig(sink))
    run(chain, pairs).wait()
    return sink


def _chain_args(step: Any) -> tuple[Any, ...]:
    """The arguments that rebuild a chain step (``map(f)``, ``stateful_map(id, b, m)``...)."""
    if step.operator in ("stateful_map", "reduce"):
        return (step.step_id, *step.logic)
    return step.logic


def timelypy_cluster(
    make: Callable[[], Dataflow], pairs: Sequence[Any], procs: int, threads: int
) -> list[Any]:
    """``run_cluster(flow, pairs, procs, threads)``."""
    return run_cluster(make(), pairs, procs, threads)


# -- bytewax 0.21.1 -------------------------------------------------------------


def _bytewax_run(build: Callable[[Any, Any, Any], None], name: str, **kwargs: Any) -> list[Any]:
    """Build a flow with ``build(flow, op, sink)``, run it on one worker, return the sink."""
    dataflow = bytewax_peer._bytewax("dataflow")
    op = bytewax_peer._bytewax("operators")
    testing = bytewax_peer._bytewax("testing")
    out: list[Any] = []
    flow = dataflow.Dataflow(name)
    build(flow, op, testing.TestingSink(out))
    testing.run_main(flow, **kwargs)
    return out


def bytewax_wordcount(
    lines: Sequence[str], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """map(lower) -> flat_map(tokenize) -> map(initial_count) -> reduce_final(add).

    >>> sorted(bytewax_wordcount(["A b a"]))
    [('a', 2), ('b', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(lines, batch_size))
        s = op.map("lower", s, lower)
        s = op.flat_map("tokenize", s, tokenize)
        s = op.map("initial_count", s, initial_count)
        s = op.reduce_final("count", s, add)
        op.output("out", s, sink)

    return _bytewax_run(build, "wordcount_1_epoch")


def count_pairs(lines: list[str]) -> list[tuple[str, int]]:
    """A batch of lines -> its ``(word, count)`` list: ``count_batch`` for bytewax's batch API.

    >>> sorted(count_pairs(["A b,", "a"]))
    [('a', 2), ('b', 1)]
    """
    return list(count_batch(lines).items())


def bytewax_batch_wordcount(
    lines: Sequence[str], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """In bytewax's batch API: ``op.flat_map_batch(count_pairs)``, then ``op.reduce_final(add)``.

    The peer of ``timelypy batch``: the same ``count_batch`` per input batch.

    >>> sorted(bytewax_batch_wordcount(["A b a", "b"], batch_size=1))
    [('a', 2), ('b', 2)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(lines, batch_size))
        s = op.flat_map_batch("count_batch", s, count_pairs)
        op.output("out", op.reduce_final("count", s, add), sink)

    return _bytewax_run(build, "wordcount_1_epoch_batch")


def _lower_in_epoch(pair: tuple[int, str]) -> tuple[int, str]:
    return pair[0], lower(pair[1])


def _tokenize_in_epoch(pair: tuple[int, str]) -> list[tuple[int, str]]:
    epoch = pair[0]
    return [(epoch, word) for word in tokenize(pair[1])]


def _initial_count_in_epoch(pair: tuple[int, str]) -> tuple[str, int]:
    key, value = initial_count(pair[1])
    return f"{pair[0]}:{key}", value


def bytewax_epoch_wordcount(
    pairs: Sequence[tuple[int, str]], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """The per-epoch wordcount as a keyed ``op.reduce_final``: ``("epoch:word", count)``.

    The same steps on ``(epoch, line)`` items, the epoch carried along and
    made part of the key (words never hold ``:``, the tokenizer splits on
    it), so one ``reduce_final`` gives every word's count per epoch, at the
    end of the input.

    >>> sorted(bytewax_epoch_wordcount([(0, "A b a"), (1, "b")]))
    [('0:a', 2), ('0:b', 1), ('1:b', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(pairs, batch_size))
        s = op.map("lower", s, _lower_in_epoch)
        s = op.flat_map("tokenize", s, _tokenize_in_epoch)
        s = op.map("initial_count", s, _initial_count_in_epoch)
        op.output("out", op.reduce_final("count", s, add), sink)

    return _bytewax_run(build, "wordcount_1000_epochs_keyed")


def count_pairs_in_epochs(pairs: list[tuple[int, str]]) -> list[tuple[str, int]]:
    """A batch of ``(epoch, line)`` -> ``("epoch:word", count)``: ``count_batch`` per epoch's run.

    >>> count_pairs_in_epochs([(0, "a A"), (0, "b"), (1, "a")])
    [('0:a', 2), ('0:b', 1), ('1:a', 1)]
    """
    out: list[tuple[str, int]] = []
    for epoch, same in groupby(pairs, key=itemgetter(0)):
        out += [(f"{epoch}:{w}", n) for w, n in count_batch([line for _, line in same]).items()]
    return out


def bytewax_epoch_batch_wordcount(
    pairs: Sequence[tuple[int, str]], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """Per epoch, bytewax's batch API: ``flat_map_batch(count_pairs_in_epochs)``, ``reduce_final``.

    >>> sorted(bytewax_epoch_batch_wordcount([(0, "A b a"), (1, "b")], batch_size=1))
    [('0:a', 2), ('0:b', 1), ('1:b', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(pairs, batch_size))
        s = op.flat_map_batch("count_batch", s, count_pairs_in_epochs)
        op.output("out", op.reduce_final("count", s, add), sink)

    return _bytewax_run(build, "wordcount_1000_epochs_batch")


def _stamp(line: tuple[datetime, str]) -> datetime:
    return line[0]


def _value_stamp(value: tuple[datetime, int]) -> datetime:
    return value[0]


def _now() -> datetime:
    return ALIGN


def _lower_stamped(line: tuple[datetime, str]) -> tuple[datetime, str]:
    return line[0], lower(line[1])


def _tokenize_stamped(line: tuple[datetime, str]) -> list[tuple[datetime, str]]:
    at = line[0]
    return [(at, word) for word in tokenize(line[1])]


def _initial_count_stamped(word: tuple[datetime, str]) -> tuple[str, tuple[datetime, int]]:
    key, value = initial_count(word[1])
    return key, (word[0], value)


def _fold_count(acc: int, value: tuple[datetime, int]) -> int:
    return add(acc, value[1])


def bytewax_wordcount_windowed(
    stamped: Sequence[tuple[datetime, str]],
) -> list[tuple[str, tuple[int, int]]]:
    """The wordcount per event-time window of 1 s: ``(word, (window_id, count))``.

    >>> sorted(bytewax_wordcount_windowed([(ALIGN, "a A"), (ALIGN + timedelta(seconds=1), "a")]))
    [('a', (0, 2)), ('a', (1, 1))]
    """
    windowing = bytewax_peer._bytewax("operators.windowing")

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(stamped))
        s = op.map("lower", s, _lower_stamped)
        s = op.flat_map("tokenize", s, _tokenize_stamped)
        s = op.map("initial_count", s, _initial_count_stamped)
        clock = windowing.EventClock(
            _value_stamp, wait_for_system_duration=timedelta(0), now_getter=_now
        )
        windower = windowing.TumblingWindower(length=timedelta(seconds=1), align_to=ALIGN)
        counts = windowing.fold_window(
            "count", s, clock, windower, int, _fold_count, add, ordered=False
        )
        op.output("out", counts.down, sink)

    return _bytewax_run(build, "wordcount_1000_epochs")


def bytewax_stateful_map(
    items: Sequence[tuple[str, int]], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """``op.stateful_map("running", items, running_count)``.

    >>> sorted(bytewax_stateful_map([("a", 1), ("b", 1), ("a", 1)]))
    [('a', 1), ('a', 2), ('b', 1)]
    """

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(items, batch_size))
        s = op.stateful_map("running", s, running_count)
        op.output("out", s, sink)

    return _bytewax_run(build, "stateful_map")


def bytewax_stateful_batch(
    items: Sequence[tuple[str, int]], batch_size: int = bytewax_peer.DEFAULT_BATCH_SIZE
) -> list[tuple[str, int]]:
    """The running count in bytewax's batch API: ``op.stateful_batch``, a loop per key's batch.

    What ``op.stateful_map`` runs inside, without its call per value: each
    key's logic gets the key's values of a batch as a list and adds them up
    in one loop, emitting every running count.

    >>> sorted(bytewax_stateful_batch([("a", 1), ("b", 1), ("a", 1)]))
    [('a', 1), ('a', 2), ('b', 1)]
    """
    operators = bytewax_peer._bytewax("operators")

    class RunningCount(operators.StatefulBatchLogic):  # type: ignore[misc]
        def __init__(self, count: int | None) -> None:
            self.count = count or 0

        def on_batch(self, values: list[int]) -> tuple[list[int], bool]:
            count, out = self.count, []
            append = out.append
            for value in values:
                count += value
                append(count)
            self.count = count
            return out, False

        def snapshot(self) -> int:
            return self.count

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(items, batch_size))
        op.output("out", op.stateful_batch("running", s, RunningCount), sink)

    return _bytewax_run(build, "stateful_batch")


def bytewax_map_own_epochs(n: int) -> list[int]:
    """``0..n-1`` through ``op.map(add_one)`` at bytewax's own cadence (1,000-item batches)."""

    def build(flow: Any, op: Any, sink: Any) -> None:
        s = op.input("inp", flow, bytewax_peer.list_source(range(n)))
        s = op.map("map", s, add_one)
        op.output("out", s, sink)

    return _bytewax_run(build, "map_own_epochs")


# -- normalizing results: a multiset of (epoch, key, value) ---------------------


def from_pairs(out: Iterable[tuple[int, tuple[Any, Any]]]) -> Normalized:
    """``(epoch, (key, value))`` items, as ``run`` and the plain loops return them."""
    return Counter((epoch, key, value) for epoch, (key, value) in out)


def from_epoch_items(out: Iterable[tuple[int, Any]]) -> Normalized:
    """``(epoch, item)`` items."""
    return Counter(out)


def from_keyed(epoch: int) -> Callable[[Iterable[tuple[Any, Any]]], Normalized]:
    """``(key, value)`` items, all in ``epoch`` (bytewax's ``reduce_final``, ``stateful_map``)."""
    return lambda out: Counter((epoch, key, value) for key, value in out)


def from_epoch_keys(out: Iterable[tuple[str, int]]) -> Normalized:
    """Items ``("epoch:word", count)`` of the keyed ``reduce_final``: the epoch is the prefix."""
    normalized: Normalized = Counter()
    for key, value in out:
        epoch, word = key.split(":", 1)
        normalized[(int(epoch), word, value)] += 1
    return normalized


def from_windows(out: Iterable[tuple[str, tuple[int, int]]]) -> Normalized:
    """Items ``(key, (window_id, value))`` of a bytewax window: the window is the epoch."""
    return Counter((window, key, value) for key, (window, value) in out)


def from_ordered(out: Sequence[Any]) -> Normalized:
    """Outputs of bytewax in order, item ``i`` being in epoch ``i``."""
    return Counter(enumerate(out))


#: Fingerprints are sums of hashes modulo 2**64.
_MASK = (1 << 64) - 1


def fingerprint(normalized: Normalized) -> tuple[int, int]:
    """An order-free fingerprint of a multiset: its size and the sum of its elements' hashes.

    >>> fingerprint(Counter([(0, "a", 1), (0, "b", 2)])) == fingerprint(
    ...     Counter([(0, "b", 2), (0, "a", 1)]))
    True
    >>> fingerprint(Counter([(0, "a", 1)])) == fingerprint(Counter([(0, "a", 2)]))
    False
    """
    size = sum(normalized.values())
    return size, sum(hash(item) * n for item, n in normalized.items()) & _MASK


def check_result(
    workload: str, candidate: str, got: tuple[int, int], expected: tuple[int, int]
) -> None:
    """Raise unless ``candidate``'s result fingerprint equals plain Python's."""
    if got != expected:
        raise AssertionError(
            f"{workload}: {candidate!r} returned a different result from plain Python "
            f"({got[0]:,} outputs, plain Python {expected[0]:,}, or the same number "
            "with different contents); fix it before quoting its time"
        )


@dataclass
class FlowWorkload(Workload):
    """A ``runtime_bench`` workload that keeps no candidate's result on the heap.

    A candidate's output (up to 2,000,000 tuples) left alive while the next
    candidate runs would make every full garbage collection of that run
    traverse it, charging one candidate for another's data (it made plain
    Python's ``stateful_map`` ten times slower in a first version). So
    :meth:`measure` fingerprints the results of the warm-up round and of the
    last timed round (untimed, normalized to a multiset of ``(epoch, ...)``
    tuples) and drops every result as soon as its call returns; :meth:`check`
    compares the fingerprints with plain Python's.
    """

    #: candidate -> its result as a multiset of ``(epoch, ...)`` tuples
    normalize: dict[str, Callable[[Any], Normalized]] = field(default_factory=dict)
    #: candidate -> fingerprints of its checked results (warm-up, last timed run)
    fingerprints: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: the candidates ``--profile`` profiles
    profiled: tuple[str, ...] = ("timelypy",)
    #: called by :meth:`release` (each at most once): removing temporary files
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    #: the bytewax rows a goal against "bytewax" is judged against (empty: every bytewax row)
    judged: tuple[str, ...] = ()
    #: candidate -> what it runs, printed under the table (what each row compares)
    describe: dict[str, str] = field(default_factory=dict)

    def measure(self, repeat: int, warmup: int = 1) -> None:
        """Time the candidates interleaved (A, B, C, A, B, C, ...), wall and CPU time.

        As ``measure_interleaved`` does: ``warmup`` untimed rounds, then
        ``repeat`` timed ones, ``gc.collect()`` before each call.
        """
        if repeat < 1:
            raise ValueError(f"measure needs repeat >= 1, got {repeat}")
        self.stats = {name: Stats() for name in self.candidates}
        self.cpu = {name: Stats() for name in self.candidates}
        self.fingerprints = {name: [] for name in self.candidates}
        rounds = warmup + repeat
        for r in range(rounds):
            for name, fn in self.candidates.items():
                elapsed, cpu, result = timed_call(fn)
                if r >= warmup:
                    self.stats[name].times.append(elapsed)
                    self.cpu[name].times.append(cpu)
                if r in (warmup - 1, rounds - 1):
                    self.fingerprints[name].append(fingerprint(self.normalize[name](result)))
                result = None

    def check(self) -> None:
        """Raise if any checked result of any candidate differs from plain Python's."""
        (expected, *_) = self.fingerprints["plain"]
        for name, prints in self.fingerprints.items():
            for got in prints:
                check_result(self.name, name, got, expected)

    def goal_peers(self) -> list[str]:
        """The bytewax rows a goal against bytewax is judged against, one goal row each."""
        names = self.bytewax_names()
        return [n for n in names if n in self.judged] if self.judged else names

    def legend_lines(self) -> list[str]:
        """What the ``vs bytewax`` columns are against, and what each described row runs."""
        lines = [line] if (line := self.legend()) else []
        lines += [f"{self.name}, {name}: {text}" for name, text in self.describe.items()]
        return lines

    def release(self) -> None:
        """Drop the candidates, and with them their inputs; remove their temporary files."""
        self.candidates = {}
        for remove in self.cleanup:
            remove()
        self.cleanup = []


def bytewax_label(operators: str, batch_size: int, note: str = "") -> str:
    """A bytewax row's name: its operators and its input batch size (``runtime_bench``'s form).

    >>> bytewax_label("op.stateful_map", 10_000)
    'bytewax op.stateful_map, batch 10,000'
    """
    return f"bytewax {operators}, batch {batch_size:,}{note}"


#: The per-item wordcount's operators in bytewax (seed 004's steps), and its batch API's.
PER_ITEM_OPS = "op.map/flat_map/map+op.reduce_final"
BATCH_API_OPS = "op.flat_map_batch+op.reduce_final"


def build_workloads(
    lines: Sequence[str],
    *,
    epochs: int = EPOCHS,
    ordered: int = ORDERED_ITEMS,
    bytewax: bool = True,
    cluster: bool = True,
    only: Sequence[str] = WORKLOADS,
    graph_items: int = GRAPH_ITEMS,
    batch_sizes: Sequence[int] = bytewax_peer.BATCH_SIZES,
    windows: bool = True,
) -> list[FlowWorkload]:
    """Bind every candidate to its input, built from ``lines`` (``epochs`` at most one per line).

    ``graph_items``: the size of ``stateful_map_graph`` and ``branch_merge`` and of
    each side of ``join_running`` (at most half the words of ``lines``).
    ``batch_sizes``: bytewax's input batch sizes; each bytewax row runs at every one,
    the per-item operators' rows first. ``windows=False`` leaves out the
    ``fold_window`` row of ``wordcount_1000_epochs`` (shown for scale only).
    """
    workloads: list[FlowWorkload] = []
    n_words = sum(len(tokenize(line)) for line in lines)
    pulls = max(1, math.ceil(len(lines) / PULL_LIMIT))
    if "wordcount_1_epoch" in only:
        pairs = [(0, line) for line in lines]
        cands: dict[str, Callable[[], Any]] = {
            "plain": lambda: plain_wordcount(pairs),
            "timelypy": lambda: timelypy_run(wordcount_flow, pairs),
            "plain batch": lambda: plain_batch_wordcount(pairs),
            "timelypy batch": lambda: timelypy_run(batch_wordcount_flow, pairs),
        }
        norm = dict.fromkeys(cands, from_pairs)
        if cluster:
            cands["timelypy 2 threads"] = lambda: timelypy_cluster(wordcount_flow, pairs, 1, 2)
            cands["timelypy 2 procs"] = lambda: timelypy_cluster(wordcount_flow, pairs, 2, 1)
            norm["timelypy 2 threads"] = norm["timelypy 2 procs"] = from_pairs
        describe = {
            "timelypy": "map(lower), flat_map(tokenize), map(initial_count), reduce_epoch(add)",
            "timelypy batch": "reduce_epoch(add, pre_aggregate=count_batch), batches of up to "
            f"{PULL_LIMIT:,} lines",
        }
        if bytewax:
            for operators, peer in (
                (PER_ITEM_OPS, bytewax_wordcount),
                (BATCH_API_OPS, bytewax_batch_wordcount),
            ):
                for size in batch_sizes:
                    name = bytewax_label(operators, size)
                    cands[name] = functools.partial(peer, lines, size)
                    norm[name] = from_keyed(0)
            describe[bytewax_label(BATCH_API_OPS, batch_sizes[0])] = (
                "count_batch per input batch (timelypy batch's function), partial counts "
                "summed by a keyed reduce_final"
            )
        workloads.append(
            FlowWorkload(
                "wordcount_1_epoch",
                n_words,
                "words",
                cands,
                (pulls, "pull"),
                normalize=norm,
                describe=describe,
            )
        )
    if "wordcount_1000_epochs" in only:
        per = max(1, len(lines) // epochs)
        epoch_pairs = [(i // per, line) for i, line in enumerate(lines)]
        stamps = [ALIGN + timedelta(seconds=e) for e in range(epoch_pairs[-1][0] + 1)]
        stamped = [(stamps[e], line) for e, line in epoch_pairs]
        cands = {
            "plain": lambda: plain_wordcount(epoch_pairs),
            "timelypy": lambda: timelypy_run(wordcount_flow, epoch_pairs),
            "plain batch": lambda: plain_batch_wordcount(epoch_pairs),
            "timelypy batch": lambda: timelypy_run(batch_wordcount_flow, epoch_pairs),
        }
        norm = dict.fromkeys(cands, from_pairs)
        describe = {
            "timelypy": "reduce_epoch(add): each epoch's (word, count) when the epoch closes",
        }
        judged: tuple[str, ...] = ()
        if bytewax:
            for operators, peer in (
                (f"{PER_ITEM_OPS} keyed epoch:word", bytewax_epoch_wordcount),
                (f"{BATCH_API_OPS} keyed epoch:word", bytewax_epoch_batch_wordcount),
            ):
                for size in batch_sizes:
                    name = bytewax_label(operators, size)
                    cands[name] = functools.partial(peer, epoch_pairs, size)
                    norm[name] = from_epoch_keys
            judged = tuple(n for n in cands if n.startswith("bytewax"))
            keyed = bytewax_label(f"{PER_ITEM_OPS} keyed epoch:word", batch_sizes[0])
            describe[keyed] = (
                "the same steps on (epoch, line) items, one keyed reduce_final per "
                "'epoch:word' key: the same counts, emitted at the end of the input (bytewax "
                "has no user epochs); the goal's bytewax rows are these keyed ones"
            )
            if windows:
                window = bytewax_label(
                    "op.map/flat_map/map+fold_window", bytewax_peer.DEFAULT_BATCH_SIZE, " (windows)"
                )
                cands[window] = lambda: bytewax_wordcount_windowed(stamped)
                norm[window] = from_windows
                describe[window] = (
                    "a 1 s event-time tumbling window per epoch (fold_window, a wake-up per key "
                    "and window): shown for scale, not a goal's peer"
                )
        workloads.append(
            FlowWorkload(
                "wordcount_1000_epochs",
                n_words,
                "words",
                cands,
                (pulls, "pull"),
                normalize=norm,
                judged=judged,
                describe=describe,
            )
        )
    if "stateful_map" in only:
        items = [(word, 1) for line in lines for word in line.split()]
        item_pairs = [(0, item) for item in items]
        cands = {
            "plain": lambda: plain_stateful_map(item_pairs),
            "timelypy": lambda: timelypy_run(stateful_map_flow, item_pairs),
        }
        norm = {"plain": from_pairs, "timelypy": from_pairs}
        if bytewax:
            for operators, peer in (
                ("op.stateful_map", bytewax_stateful_map),
                ("op.stateful_batch", bytewax_stateful_batch),
            ):
                for size in batch_sizes:
                    name = bytewax_label(operators, size)
                    cands[name] = functools.partial(peer, items, size)
                    norm[name] = from_keyed(0)
        per_pull = (max(1, math.ceil(len(items) / PULL_LIMIT)), "pull")
        workloads.append(
            FlowWorkload("stateful_map", len(items), "items", cands, per_pull, normalize=norm)
        )
    if "fully_ordered" in only:
        ordered_pairs = list(enumerate(range(ordered)))  # = fully_ordered(range(ordered))
        cands = {
            "plain": lambda: plain_map(ordered_pairs),
            "timelypy": lambda: timelypy_run(map_flow, ordered_pairs),
        }
        norm = {"plain": from_epoch_items, "timelypy": from_epoch_items}
        judged = ()
        if bytewax:
            one = "bytewax op.map, batch 1 (an epoch per item)"
            own = bytewax_label("op.map", bytewax_peer.DEFAULT_BATCH_SIZE, " (its own epochs)")
            cands[one] = lambda: bytewax_peer.epoch_round_trip(ordered)
            cands[own] = lambda: bytewax_map_own_epochs(ordered)
            norm[one] = norm[own] = from_ordered
            judged = (one,)
        workloads.append(
            FlowWorkload(
                "fully_ordered",
                ordered,
                "epochs",
                cands,
                (ordered, "epoch"),
                normalize=norm,
                judged=judged,
            )
        )
    if any(name in only for name in GRAPH_WORKLOADS):
        workloads += graph_workloads(
            lines, bytewax=bytewax, only=only, items=graph_items, batch_sizes=batch_sizes
        )
    return workloads


def bytewax_file_at(name: str, steps: Any, path: Path, batch_size: int) -> list[Any]:
    """``flow_graph.bytewax_file`` with bytewax's ``FileSource`` at ``batch_size`` lines."""
    files = bytewax_peer._bytewax("connectors.files")
    return fg_module().bytewax_graph(name, [files.FileSource(path, batch_size=batch_size)], steps)


def timelypy_file_at(name: str, steps: Any, path: Path, batch_size: int) -> list[Any]:
    """``flow_graph.timelypy_file`` with timelypy's ``FileSource`` at ``batch_size`` lines."""
    from timelypy.flow.connectors.files import FileSource

    return fg_module().timelypy_graph(name, [FileSource(path, batch_size=batch_size)], steps)


def bytewax_memory_at(name: str, steps: Any, batch_size: int, *inputs: Sequence[Any]) -> list[Any]:
    """``flow_graph.bytewax_memory`` with ``list_source`` slices of ``batch_size`` items."""
    sources = [bytewax_peer.list_source(items, batch_size) for items in inputs]
    return fg_module().bytewax_graph(name, sources, steps)


def wordcount_batch_api(op: Any, lines: Any) -> Any:
    """The file wordcount in a batch API: ``op.flat_map_batch(count_pairs)``, ``reduce_final``."""
    return op.reduce_final("count", op.flat_map_batch("count_batch", lines, count_pairs), add)


def wordcount_pre_aggregate(op: Any, lines: Any) -> Any:
    """The batch-level step: ``op.reduce_final(add, pre_aggregate=count_batch)`` (timelypy only)."""
    return op.reduce_final("count", lines, add, pre_aggregate=count_batch)


def fg_module() -> Any:
    """``benchmarks.flow_graph`` (imported late: it imports this module's user functions)."""
    from benchmarks import flow_graph

    return flow_graph


def graph_workloads(
    lines: Sequence[str],
    *,
    bytewax: bool,
    only: Sequence[str],
    items: int,
    batch_sizes: Sequence[int] = bytewax_peer.BATCH_SIZES,
) -> list[FlowWorkload]:
    """The stream graph's workloads (``build_workloads``'s arguments; ``flow_graph``'s flows)."""
    fg = fg_module()

    workloads: list[FlowWorkload] = []
    batches = math.ceil(max(1, len(lines)) / fg.BATCH_SIZE)
    words = [word for line in lines for word in line.split()]
    n = min(items, len(words) // 2)
    per_batch = (max(1, math.ceil(n / fg.BATCH_SIZE)), "batch")
    if "wordcount_file" in only:
        n_words = sum(len(tokenize(line)) for line in lines)
        path, remove = fg.write_corpus(lines)
        pairs = [(0, line) for line in lines]
        seed, by_word = fg.wordcount_seed, fg.wordcount_count_final
        cands: dict[str, Callable[[], Any]] = {
            "plain": lambda: fg.plain_wordcount_file(path),
            "timelypy": lambda: fg.timelypy_file("wordcount_file", by_word, path),
        }
        for size in batch_sizes[1:]:
            cands[f"timelypy batch {size:,}"] = functools.partial(
                timelypy_file_at, "wordcount_file", by_word, path, size
            )
        cands["timelypy pre_aggregate"] = lambda: fg.timelypy_file(
            "wordcount_file_batch", wordcount_pre_aggregate, path
        )
        cands["timelypy memory"] = lambda: fg.timelypy_memory("wordcount_memory", seed, lines)
        cands["timelypy chain"] = lambda: timelypy_chain_sink(wordcount_flow, pairs)
        norm = dict.fromkeys(cands, from_keyed(0))
        norm["timelypy chain"] = from_pairs
        describe = {
            "timelypy": f"FileSource ({fg.BATCH_SIZE:,} lines a batch), op.map(lower), "
            "op.flat_map(tokenize), op.count_final",
            "timelypy pre_aggregate": "FileSource, op.reduce_final(add, "
            "pre_aggregate=count_batch): timelypy's batch-level step",
        }
        judged: tuple[str, ...] = ()
        if bytewax:
            file_rows: list[str] = []
            for operators, steps in (
                ("FileSource+op.map/flat_map+op.count_final", by_word),
                (f"FileSource+{BATCH_API_OPS}", wordcount_batch_api),
            ):
                for size in batch_sizes:
                    name = bytewax_label(operators, size)
                    file_rows.append(name)
                    cands[name] = functools.partial(
                        bytewax_file_at, "wordcount_file", steps, path, size
                    )
            for size in batch_sizes:
                name = bytewax_label(f"memory {PER_ITEM_OPS}", size)
                cands[name] = functools.partial(
                    bytewax_memory_at, "wordcount_memory", seed, size, lines
                )
            for name in cands:
                norm.setdefault(name, from_keyed(0))
            judged = tuple(file_rows)
            describe[file_rows[-1]] = (
                "count_pairs (count_batch) per batch of lines, partial counts summed by a "
                "keyed reduce_final"
            )
        w = FlowWorkload(
            "wordcount_file",
            n_words,
            "words",
            cands,
            (batches, "batch"),
            normalize=norm,
            profiled=("timelypy", "timelypy memory"),
            judged=judged,
            describe=describe,
        )
        w.cleanup.append(weakref.finalize(w, remove))
        workloads.append(w)
    if "join_running" in only:
        left, right = fg.join_sides(words, n)
        join = fg.running_join
        cands = {
            "plain": lambda: fg.plain_running_join(left, right),
            "timelypy": lambda: fg.timelypy_memory("join_running", join, left, right),
        }
        if bytewax:
            for size in batch_sizes:
                cands[bytewax_label("op.join (running)", size)] = functools.partial(
                    bytewax_memory_at, "join_running", join, size, left, right
                )
        workloads.append(
            FlowWorkload(
                "join_running",
                2 * n,
                "items",
                cands,
                (2 * per_batch[0], "batch"),
                normalize=dict.fromkeys(cands, fg.from_join_rows),
            )
        )
    if "stateful_map_graph" in only:
        keyed = [(word, 1) for word in words[:n]]
        keyed_pairs = [(0, item) for item in keyed]
        running = fg.running_count_map
        cands = {
            "plain": lambda: fg.plain_running_count(keyed),
            "timelypy": lambda: fg.timelypy_memory("stateful_map", running, keyed),
            "timelypy chain": lambda: timelypy_chain_sink(stateful_map_flow, keyed_pairs),
        }
        norm = {"plain": from_keyed(0), "timelypy": from_keyed(0), "timelypy chain": from_pairs}
        if bytewax:
            for size in batch_sizes:
                name = bytewax_label("op.stateful_map", size)
                cands[name] = functools.partial(
                    bytewax_memory_at, "stateful_map", running, size, keyed
                )
                norm[name] = from_keyed(0)
            for size in batch_sizes:
                name = bytewax_label("op.stateful_batch", size)
                cands[name] = functools.partial(bytewax_stateful_batch, keyed, size)
                norm[name] = from_keyed(0)
        workloads.append(
            FlowWorkload("stateful_map_graph", n, "items", cands, per_batch, normalize=norm)
        )
    if "branch_merge" in only:
        ints = list(range(n))
        steps = fg.branch_merge
        cands = {
            "plain": lambda: fg.plain_branch_merge(ints),
            "timelypy": lambda: fg.timelypy_memory("branch_merge", steps, ints),
        }
        if bytewax:
            for size in batch_sizes:
                cands[bytewax_label("op.branch+op.map+op.merge", size)] = functools.partial(
                    bytewax_memory_at, "branch_merge", steps, size, ints
                )
        workloads.append(
            FlowWorkload(
                "branch_merge",
                n,
                "items",
                cands,
                per_batch,
                normalize=dict.fromkeys(cands, fg.from_items),
            )
        )
    return workloads


def goal_rows(workloads: Sequence[Workload]) -> list[list[str]]:
    """Each goal of the flow issue next to its measured figure (medians).

    A goal against bytewax (``baseline`` ``None``) gets one row per bytewax
    row it is judged against (``FlowWorkload.goal_peers``), each named.
    """
    by_name = {w.name: w for w in workloads}
    rows = []
    for g in GOALS:
        w = by_name.get(g.workload)
        if w is None:
            continue
        if g.baseline is not None:
            baselines: list[str | None] = [g.baseline]
        elif isinstance(w, FlowWorkload):
            baselines = [*w.goal_peers()] or [None]
        else:
            baselines = [w.bytewax_name()]
        for baseline in baselines:
            if g.within:
                goal = f"{g.candidate} within {g.target - 1:.0%} of {baseline}"
            else:
                goal = f"{g.candidate} >= {fmt_ratio(g.target)} {baseline or 'bytewax'}'s speed"
            if baseline is None or baseline not in w.stats or g.candidate not in w.stats:
                rows.append([g.workload, goal, f"{baseline or 'bytewax'} not run", "n/a", "n/a"])
                continue
            measured = w.speed_vs(g.candidate, baseline)
            by_cpu = fmt_ratio(w.speed_vs(g.candidate, baseline, cpu=True))
            if g.within:
                met = 1 / g.target <= measured <= g.target
            else:
                met = measured >= g.target
            rows.append(
                [g.workload, goal, fmt_ratio(measured), by_cpu, "met" if met else "NOT met"]
            )
    return rows


# -- profiling ------------------------------------------------------------------


def profile_threads(fn: Callable[[], Any]) -> tuple[cProfile.Profile, list[cProfile.Profile]]:
    """Run ``fn()`` under cProfile in this thread and in every thread it starts.

    ``threading.setprofile`` installs a hook that each new thread calls on its
    first event; the hook starts that thread's own profiler, which replaces
    it. Returns this thread's profiler and the others'.
    """
    started: list[cProfile.Profile] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        profiler = cProfile.Profile()
        started.append(profiler)
        profiler.enable()

    main = cProfile.Profile()
    threading.setprofile(hook)
    try:
        main.enable()
        try:
            fn()
        finally:
            main.disable()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    return main, started


def print_profiles(workloads: Sequence[FlowWorkload], top: int, markdown: bool) -> None:
    """Profile each workload's ``profiled`` candidates once each, after an untimed warm-up.

    The calling thread gets 8 rows at most when the run has worker threads
    of its own (``run``), all ``top`` when it is the worker (``run_main``).
    """
    for w in workloads:
        for name in w.profiled:
            fn = w.candidates[name]
            label = w.name if name == "timelypy" else f"{w.name} ({name})"
            logger.info("profiling %s on %s", name, w.name)
            fn()
            main, others = profile_threads(fn)
            per, unit = w.per
            for title, profiler, count in [("worker thread", p, top) for p in others] + [
                ("calling thread", main, min(top, 8) if others else top)
            ]:
                rows, calls, total = profile_rows(profiler, per, count)
                print()
                print(
                    f"{label}, {title}: top {count} by own time, shares of its {total:.2f} s "
                    f"profiled; {calls:,} calls, {calls / per:,.1f} per {unit} ({per:,} {unit}s)"
                )
                print()
                print_table(rows, CPROFILE_COLUMNS, markdown=markdown)


# -- command line ---------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the flow benchmark (or profile it) and print its tables."""
    parser = peer_parser(
        "benchmarks.flow_bench",
        __doc__,
        "10x smaller inputs, 3 repeats",
        "workload",
        WORKLOADS,
        "profile timelypy's candidates instead of timing",
    )
    parser.add_argument(
        "--no-cluster", action="store_true", help="skip 'timelypy 2 threads' and '2 procs'"
    )
    parser.add_argument(
        "--no-windows",
        action="store_true",
        help="skip bytewax's fold_window row of wordcount_1000_epochs (for scale only; slow)",
    )
    args = parser.parse_args(argv)
    settings = peer_run(parser, args, logger)
    bytewax, scale, repeat, size = (
        settings.bytewax,
        settings.scale,
        settings.repeat,
        settings.size,
    )
    lines = _data.load_lines()
    lines = lines[: len(lines) // scale]
    epochs = min(EPOCHS, len(lines))

    def build(name: str) -> FlowWorkload:
        (workload,) = build_workloads(
            lines,
            epochs=epochs,
            ordered=ORDERED_ITEMS // scale,
            bytewax=bytewax,
            cluster=not args.no_cluster and not args.profile,
            windows=not args.no_windows,
            only=[name],
            graph_items=GRAPH_ITEMS // scale,
        )
        return workload

    names = [name for name in WORKLOADS if name in (args.workload or WORKLOADS)]
    if args.profile:
        print(f"timelypy.flow profiles (cProfile), {size}, 1 worker, {machine()}")
        for name in names:
            w = build(name)
            print_profiles([w], args.top, args.markdown)
            w.release()
        return 0

    # One workload at a time, its inputs built just before and its results dropped
    # after the check: a large live heap would slow the garbage collector in the
    # workloads measured after it.
    rows: list[list[str]] = []
    workloads: list[FlowWorkload] = []
    for name in names:
        w = build(name)
        logger.info("measuring %s: %s", w.name, ", ".join(w.candidates))
        w.measure(repeat=repeat, warmup=1)
        w.check()
        w.release()
        rows += w.rows()
        workloads.append(w)

    print_report(
        f"timelypy.flow, {size} ({len(lines):,} lines, {epochs:,} epochs of "
        f"{max(1, len(lines) // epochs):,} lines in wordcount_1000_epochs, "
        f"{GRAPH_ITEMS // scale:,} items in the graph's join sides, stateful_map_graph and "
        f"branch_merge), median of {repeat} interleaved runs, {machine()}"
        + ("" if bytewax else "; bytewax not run"),
        rows,
        goal_rows(workloads),
        markdown=args.markdown,
        legend=[line for w in workloads for line in w.legend_lines()],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
