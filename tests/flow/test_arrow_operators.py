"""Arrow-native steps (timelypy.flow.operators.arrow) on one worker, threads and processes."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StepError
from timelypy.flow._graph import StatelessSpec
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.inputs import AdvanceTo, EmitBatch, ManualInputConfig
from timelypy.flow.testing import TestingSource, run_main, run_to_list

from .graph_helpers import BACKENDS, collect

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
arrow = pytest.importorskip("timelypy.flow.operators.arrow")

#: The tokens of a line, as the Arrow wordcount finds them (lower case, then the regex).
SEPARATORS = r'[\s!,.?":;0-9]+'
LINES = [
    "To be, or not to be: that is the question.",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
    "",
    "1 2 3 and 4 more: To BE!",
]


def words_of(batch: Any) -> list[Any]:
    """A batch of lines -> a batch of its words (lower case, split on the separators)."""
    tokens = pc.list_flatten(pc.split_pattern_regex(pc.utf8_lower(batch.column(0)), SEPARATORS))
    words = pc.filter(tokens, pc.not_equal(tokens, ""))
    return [pa.record_batch({"word": words})]


def epoch_lines(lines: list[str], epochs: int, size: int = 2) -> ManualInputConfig:
    """Each worker reads every ``peers``-th chunk of ``lines``, epoch ``chunk % epochs``.

    Chunks are read in epoch order, so every worker's epochs only grow.
    """

    def build(worker: int, peers: int, resume: int) -> Any:
        chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
        mine = [(n % epochs, chunk) for n, chunk in enumerate(chunks) if n % peers == worker]
        for epoch, chunk in sorted(mine, key=lambda pair: pair[0]):
            yield AdvanceTo(epoch)
            yield EmitBatch([pa.record_batch({"line": chunk})])

    return ManualInputConfig(build)


def with_epochs(name: str, up: Stream[Any]) -> Stream[Any]:
    """Each item as ``(epoch, item)``: the epoch the step sees it in (a test-only step)."""
    spec = StatelessSpec(lambda worker, step_id: lambda e, items: [(e, x) for x in items], name)
    return up.flow.add_step("with_epochs", name, [up], options=spec)[0]


def rows(name: str, up: Stream[Any]) -> Stream[Any]:
    """``(epoch, row tuple)`` for every row of every record batch."""
    return op.flat_map(
        name,
        with_epochs(f"{name}_epochs", up),
        lambda pair: [(pair[0], tuple(row.values())) for row in pair[1].to_pylist()],
    )


def expected_counts(lines: list[str], epochs: int, size: int = 2) -> Counter[tuple[int, str]]:
    counts: Counter[tuple[int, str]] = Counter()
    for n, start in enumerate(range(0, len(lines), size)):
        for line in lines[start : start + size]:
            for word in re.findall(r'[^\s!,.?":;0-9]+', line.lower()):
                counts[(n % epochs, word)] += 1
    return counts


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_arrow_wordcount_gives_each_epochs_totals_once(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        lines = op.input("lines", flow, epoch_lines(LINES * 3, 3))
        words = arrow.flat_map_arrow("words", lines, words_of)
        counts = arrow.aggregate_arrow("count", words, "word", [([], "count_all")])
        upper = arrow.map_arrow(
            "upper", words, lambda b: pa.record_batch({"word": pc.utf8_upper(b["word"])})
        )
        long = arrow.filter_arrow("long", words, lambda b: pc.greater(pc.utf8_length(b[0]), 5))
        return {
            "counts": rows("counts_rows", counts),
            "upper": rows("u", upper),
            "long": rows("l", long),
        }

    out = collect(backend, tmp_path, build)
    expected = expected_counts(LINES * 3, 3)
    assert sorted(out["counts"]) == sorted((e, (w, n)) for (e, w), n in expected.items())
    assert Counter(out["upper"]) == Counter(
        {(e, (w.upper(),)): n for (e, w), n in expected.items()}
    )
    assert Counter(out["long"]) == Counter(
        {(e, (w,)): n for (e, w), n in expected.items() if len(w) > 5}
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_aggregate_arrow_combines_sums_minima_maxima_and_two_keys(backend, tmp_path):
    data = [("a", "x", 1), ("b", "x", 5), ("a", "y", -2), ("a", "x", 7), ("c", "y", 0)] * 7

    def source(worker: int, peers: int, resume: int) -> Any:
        yield AdvanceTo(0)
        for n in range(worker, len(data), peers):
            k1, k2, v = data[n]
            yield EmitBatch([pa.record_batch({"k1": [k1], "k2": [k2], "v": [v]})])

    def build(flow: Dataflow) -> Stream[Any]:
        batches = op.input("in", flow, ManualInputConfig(source))
        aggs = [("v", "sum"), ("v", "min"), ("v", "max"), ("v", "count"), ([], "count_all")]
        return rows("rows", arrow.aggregate_arrow("agg", batches, ["k1", "k2"], aggs))

    out = collect(backend, tmp_path, build)
    groups: dict[tuple[str, str], list[int]] = {}
    for k1, k2, v in data:
        groups.setdefault((k1, k2), []).append(v)
    expected = [
        (0, (k1, k2, sum(vs), min(vs), max(vs), len(vs), len(vs)))
        for (k1, k2), vs in groups.items()
    ]
    assert sorted(out) == sorted(expected)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(-50, 50)), max_size=8),
        max_size=12,
    ),
    st.integers(1, 4),
)
def test_aggregate_arrow_equals_a_python_group_by(batches, epochs):
    """Any batches (empty ones too), any epochs: the totals of each epoch, once per key."""

    def source(worker: int, peers: int, resume: int) -> Any:
        for n, batch in sorted(enumerate(batches), key=lambda p: p[0] % epochs):
            yield AdvanceTo(n % epochs)
            keys = [k for k, _ in batch]
            values = pa.array([v for _, v in batch], pa.int64())
            yield EmitBatch([pa.record_batch({"k": pa.array(keys, pa.string()), "v": values})])

    flow = Dataflow("prop")
    inp = op.input("in", flow, ManualInputConfig(source))
    out = run_to_list(rows("rows", arrow.aggregate_arrow("agg", inp, "k", [("v", "sum")])))
    expected: dict[tuple[int, str], int] = {}
    for n, batch in enumerate(batches):
        for k, v in batch:
            expected[(n % epochs, k)] = expected.get((n % epochs, k), 0) + v
    assert sorted(out) == sorted((e, (k, v)) for (e, k), v in expected.items())


def test_many_batches_of_distinct_keys_are_combined_as_they_grow(monkeypatch):
    monkeypatch.setattr(arrow, "COMPACT_ROWS", 10)
    keys = [f"k{n % 97}" for n in range(2000)]
    batches = [pa.record_batch({"k": keys[i : i + 50]}) for i in range(0, 2000, 50)]
    flow = Dataflow("many")
    inp = op.input("in", flow, TestingSource(batches))
    out = run_to_list(arrow.aggregate_arrow("agg", inp, "k", [([], "count_all")]))
    counted = {row["k"]: row["count_all"] for batch in out for row in batch.to_pylist()}
    assert counted == dict(Counter(keys))


def test_an_item_that_is_not_a_record_batch_names_the_step_and_worker():
    flow = Dataflow("bad")
    inp = op.input("in", flow, TestingSource([pa.table({"x": [1]})]))
    op.output("out", arrow.map_arrow("m", inp, lambda b: b), op_sink([]))
    with pytest.raises(StepError, match=r"'bad\.m'.*worker 0.*Table.*to_batches"):
        run_main(flow)


@pytest.mark.parametrize(
    "make",
    [
        lambda inp: arrow.map_arrow("m", inp, lambda b: pa.table(b)),
        lambda inp: arrow.flat_map_arrow("m", inp, lambda b: [b.to_pydict()]),
        lambda inp: arrow.filter_arrow("m", inp, lambda b: [True]),
        lambda inp: arrow.aggregate_arrow("m", inp, "nope", [([], "count_all")]),
    ],
)
def test_a_function_returning_the_wrong_type_is_a_step_error(make):
    flow = Dataflow("bad")
    inp = op.input("in", flow, TestingSource([pa.record_batch({"x": [1]})]))
    out: list[Any] = []
    op.output("out", make(inp), op_sink(out))
    with pytest.raises(StepError, match=r"'bad\.m' on worker 0, epoch 0"):
        run_main(flow)


def op_sink(out: list[Any]) -> Any:
    from timelypy.flow.testing import TestingSink

    return TestingSink(out)


def test_aggregations_that_do_not_combine_are_refused_when_the_flow_is_built():
    flow = Dataflow("bad")
    inp = op.input("in", flow, TestingSource([]))
    with pytest.raises(FlowError, match="'mean' cannot be combined"):
        arrow.aggregate_arrow("a", inp, "k", [("v", "mean")])
    with pytest.raises(FlowError, match="count_all counts rows"):
        arrow.aggregate_arrow("b", inp, "k", [("v", "count_all")])
    with pytest.raises(FlowError, match="column names"):
        arrow.aggregate_arrow("c", inp, [], [("v", "sum")])
    with pytest.raises(FlowError, match="callable"):
        arrow.map_arrow("d", inp, "not a function")  # type: ignore[arg-type]


def test_a_missing_pyarrow_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("No module named 'pyarrow'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    flow = Dataflow("no")
    inp = op.input("in", flow, TestingSource([]))
    with pytest.raises(ImportError, match=r"timelypy\[arrow\]"):
        arrow.map_arrow("m", inp, lambda b: b)
