r"""The stream-graph workloads of ``flow_bench``: flows, plain loops and normalizers.

Each flow is written once, as a function ``steps(op, *streams) -> stream``
of an operators module: bytewax 0.21's ``bytewax.operators`` and
``timelypy.flow.operators`` have the same shape, so both engines run the
very same steps, with the same user functions, from the same kind of
source. :func:`timelypy_graph` and :func:`bytewax_graph` add one input per
source, apply the steps, write the result to the engine's ``TestingSink``
and run the flow to its end on one worker (``run_main``, in the calling
thread).

Sources. From a file, both engines' own ``FileSource`` (1,000 lines a
batch, their default). From memory, timelypy reads a
``timelypy.flow.testing.TestingSource(items, batch_size=1000)`` and bytewax
``bytewax_peer.list_source(items)`` (list slices of 1,000 items: bytewax's
own ``TestingSource`` checks every item in Python, which would charge it
for a test helper's loop; timelypy's ``TestingSource`` makes the same
checks, three ``isinstance`` per item, and is *not* spared them here).

The plain loops do the same work with a dict and the same user functions;
the normalizers turn every candidate's output into a ``Counter`` of
tuples whose fingerprint ``flow_bench`` compares with plain Python's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from operator import add
from pathlib import Path
from typing import Any

import timelypy.flow.operators as timelypy_op
from benchmarks.flow_bench import Normalized, initial_count, lower, running_count, tokenize
from benchmarks.peers import bytewax_peer
from benchmarks.peers.plain import add_one, is_even, triple
from timelypy.flow.connectors.files import FileSource
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.testing import TestingSink, TestingSource, run_main

__all__ = [
    "BATCH_SIZE",
    "Steps",
    "wordcount_count_final",
    "wordcount_seed",
    "running_join",
    "running_count_map",
    "branch_merge",
    "timelypy_graph",
    "bytewax_graph",
    "timelypy_memory",
    "bytewax_memory",
    "timelypy_file",
    "bytewax_file",
    "write_corpus",
    "plain_wordcount_file",
    "plain_running_join",
    "plain_running_count",
    "plain_branch_merge",
    "join_sides",
    "from_join_rows",
    "from_items",
]

#: Items per batch of every in-memory source, as ``bytewax_peer.DEFAULT_BATCH_SIZE``.
BATCH_SIZE = bytewax_peer.DEFAULT_BATCH_SIZE

#: A flow written against an operators module: ``steps(op, *inputs) -> output stream``.
Steps = Callable[..., Any]


# -- the flows, for either engine's operators -----------------------------------


def _word(word: str) -> str:
    """``count_final``'s key: the word itself."""
    return word


def wordcount_count_final(op: Any, lines: Any) -> Any:
    """The issue's wordcount: lower, tokenize, ``count_final`` by the word: ``(word, count)``."""
    s = op.map("lower", lines, lower)
    s = op.flat_map("tokenize", s, tokenize)
    return op.count_final("count", s, _word)


def wordcount_seed(op: Any, lines: Any) -> Any:
    """Seed 004's chain as a graph: lower -> tokenize -> ``(word, 1)`` -> ``reduce_final(add)``."""
    s = op.map("lower", lines, lower)
    s = op.flat_map("tokenize", s, tokenize)
    s = op.map("initial_count", s, initial_count)
    return op.reduce_final("count", s, add)


def running_join(op: Any, left: Any, right: Any) -> Any:
    """``op.join`` of two keyed streams, ``emit_mode="running"``: a row per item of either."""
    return op.join("join", left, right, emit_mode="running")


def running_count_map(op: Any, items: Any) -> Any:
    """``op.stateful_map`` with ``running_count``: ``(key, count so far)`` per item."""
    return op.stateful_map("running", items, running_count)


def branch_merge(op: Any, ints: Any) -> Any:
    """``op.branch`` on ``is_even``; ``add_one`` the evens, ``triple`` the odds; ``op.merge``."""
    b = op.branch("even", ints, is_even)
    evens = op.map("add_one", b.trues, add_one)
    odds = op.map("triple", b.falses, triple)
    return op.merge("merge", evens, odds)


# -- running them ---------------------------------------------------------------


def timelypy_graph(name: str, sources: Sequence[Any], steps: Steps) -> list[Any]:
    """``steps`` over one ``op.input`` per source, into a ``TestingSink``; ``run_main``.

    >>> timelypy_graph("doc", [TestingSource([1, 2, 3])], branch_merge)
    [3, 3, 9]
    """
    flow = Dataflow(name)
    inputs = [timelypy_op.input(f"in{i}", flow, src) for i, src in enumerate(sources)]
    out: list[Any] = []
    timelypy_op.output("out", steps(timelypy_op, *inputs), TestingSink(out))
    run_main(flow)
    return out


def bytewax_graph(name: str, sources: Sequence[Any], steps: Steps) -> list[Any]:
    """The same with bytewax 0.21.1: ``bytewax.testing.run_main``, one worker."""
    dataflow = bytewax_peer._bytewax("dataflow")
    op = bytewax_peer._bytewax("operators")
    testing = bytewax_peer._bytewax("testing")
    flow = dataflow.Dataflow(name)
    inputs = [op.input(f"in{i}", flow, src) for i, src in enumerate(sources)]
    out: list[Any] = []
    op.output("out", steps(op, *inputs), testing.TestingSink(out))
    testing.run_main(flow)
    return out


def timelypy_memory(name: str, steps: Steps, *inputs: Sequence[Any]) -> list[Any]:
    """:func:`timelypy_graph` reading each list through ``TestingSource(items, BATCH_SIZE)``."""
    sources = [TestingSource(items, batch_size=BATCH_SIZE) for items in inputs]
    return timelypy_graph(name, sources, steps)


def bytewax_memory(name: str, steps: Steps, *inputs: Sequence[Any]) -> list[Any]:
    """:func:`bytewax_graph` reading each list through ``bytewax_peer.list_source``."""
    sources = [bytewax_peer.list_source(items, BATCH_SIZE) for items in inputs]
    return bytewax_graph(name, sources, steps)


def timelypy_file(name: str, steps: Steps, path: Path) -> list[Any]:
    """:func:`timelypy_graph` reading ``path`` with timelypy's ``connectors.files.FileSource``."""
    return timelypy_graph(name, [FileSource(path)], steps)


def bytewax_file(name: str, steps: Steps, path: Path) -> list[Any]:
    """:func:`bytewax_graph` reading ``path`` with ``bytewax.connectors.files.FileSource``."""
    files = bytewax_peer._bytewax("connectors.files")
    return bytewax_graph(name, [files.FileSource(path)], steps)


def write_corpus(lines: Iterable[str]) -> tuple[Path, Callable[[], None]]:
    """Write ``lines`` (one per line) to a new temporary file: its path and its remover."""
    directory = tempfile.mkdtemp(prefix="flow_bench_")
    path = Path(directory) / "corpus.txt"
    with path.open("w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path, lambda: shutil.rmtree(directory, ignore_errors=True)


# -- plain Python ---------------------------------------------------------------


def plain_wordcount_file(path: Path) -> list[tuple[str, int]]:
    """Read ``path`` line by line; count ``tokenize(lower(line))`` in a dict."""
    counts: dict[str, int] = {}
    get = counts.get
    with path.open(encoding="utf-8") as f:
        for line in f:
            for word in tokenize(lower(line.rstrip("\n"))):
                counts[word] = get(word, 0) + 1
    return list(counts.items())


def plain_running_join(
    left: Iterable[tuple[str, Any]], right: Iterable[tuple[str, Any]]
) -> list[tuple[str, tuple[Any, Any]]]:
    """A running join as a loop: every left item, then every right one (values are not ``None``).

    >>> plain_running_join([("a", 1), ("b", 2)], [("a", 3)])
    [('a', (1, None)), ('b', (2, None)), ('a', (1, 3))]
    """
    states: dict[str, list[Any]] = {}
    get = states.get
    out: list[tuple[str, tuple[Any, Any]]] = []
    append = out.append
    for side, items in ((0, left), (1, right)):
        for key, value in items:
            state = get(key)
            if state is None:
                state = states[key] = [None, None]
            state[side] = value
            append((key, (state[0], state[1])))
    return out


def plain_running_count(items: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """``op.stateful_map(running_count)`` as a loop: a dict of states, ``(key, count)`` per item.

    >>> plain_running_count([("a", 1), ("b", 1), ("a", 1)])
    [('a', 1), ('b', 1), ('a', 2)]
    """
    states: dict[str, int] = {}
    get = states.get
    out: list[tuple[str, int]] = []
    append = out.append
    for key, value in items:
        state, emit = running_count(get(key), value)
        states[key] = state
        append((key, emit))
    return out


def plain_branch_merge(ints: Iterable[int]) -> list[int]:
    """``add_one`` the evens, ``triple`` the odds, in one comprehension."""
    return [add_one(x) if is_even(x) else triple(x) for x in ints]


# -- inputs and normalizers -----------------------------------------------------


def join_sides(words: Sequence[str], n: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """``(word, i)`` for the first ``n`` words and ``(word, i)`` for the next ``n``.

    >>> join_sides(["a", "b", "a", "c"], 2)
    ([('a', 0), ('b', 1)], [('a', 0), ('c', 1)])
    """
    return list(zip(words[:n], range(n), strict=True)), list(
        zip(words[n : 2 * n], range(n), strict=True)
    )


def from_join_rows(out: Iterable[tuple[str, tuple[Any, Any]]]) -> Normalized:
    """Rows of a running join of two sides, order-free: a tuple per key.

    The rows of a running join depend on how its two sides interleave, but
    per key these do not: how many rows there are (one per item of either
    side), and which values of each side appear in them (every value of
    that side, since the row its item causes carries it; the values of a
    side are distinct). A key becomes ``(0, key, rows, n_left, sum_left,
    n_right, sum_right)`` over its distinct non-``None`` values.

    >>> from_join_rows([("a", (1, None)), ("a", (1, 3)), ("a", (2, 3))])
    Counter({(0, 'a', 3, 2, 3, 1, 3): 1})
    >>> from_join_rows([("a", (None, 3)), ("a", (1, 3)), ("a", (2, 3))])
    Counter({(0, 'a', 3, 2, 3, 1, 3): 1})
    """
    rows: Counter[str] = Counter()
    seen: defaultdict[str, tuple[set[Any], set[Any]]] = defaultdict(lambda: (set(), set()))
    for key, (left, right) in out:
        rows[key] += 1
        lefts, rights = seen[key]
        lefts.add(left)
        rights.add(right)
    normalized: Normalized = Counter()
    for key, n in rows.items():
        lefts, rights = (values - {None} for values in seen[key])
        normalized[(0, key, n, len(lefts), sum(lefts), len(rights), sum(rights))] += 1
    return normalized


def from_items(out: Iterable[Any]) -> Normalized:
    """Unkeyed items in any order, all in epoch 0: their multiset."""
    return Counter((0, item) for item in out)
