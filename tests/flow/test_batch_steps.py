"""Batch-level steps and the fused per-item path, on both forms of a flow.

``map_batch``, ``flat_map_batch`` and keyed aggregations with a
``pre_aggregate`` give what the per-item steps give, on one worker,
threads and processes; their refusals and errors name the step; a run of
per-item steps compiled into one comprehension (or one loop into
``reduce_epoch``'s fold) gives what the steps applied one by one give, and
an error in it names the step that raised.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from operator import add
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StateKeyError, StepError
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow._fused import FusedRun, PerItem, per_item
from timelypy.flow.dataflow import Step
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.flow.recovery import RecoveryConfig, init_db_dir
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from .graph_helpers import BACKENDS, ZERO, collect

WORD = re.compile(r'[^\s!,.?":;0-9]+')
LINES = [
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
    "And by opposing end them.",
] * 7


def count_words(lines: list[str]) -> Counter[str]:
    return Counter(WORD.findall(" ".join(lines).lower()))


def reference_counts(pairs: list[tuple[int, str]]) -> Counter[tuple[int, str, int]]:
    """``(epoch, word, count)`` computed in plain Python, per epoch."""
    per: dict[int, Counter[str]] = {}
    for epoch, line in pairs:
        per.setdefault(epoch, Counter()).update(WORD.findall(line.lower()))
    return Counter((e, w, n) for e, counts in per.items() for w, n in counts.items())


def chain_result(flow: Dataflow, pairs: list[Any], backend: str) -> list[Any]:
    if backend == "one":
        return list(run(flow, pairs))
    if backend == "threads":
        return run_cluster(flow, pairs, 1, 3)
    return run_cluster(flow, pairs, 2, 2)


# -- the epoch chain ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_chain_batch_wordcount_equals_the_per_word_one(backend):
    pairs = [(i // 4, line) for i, line in enumerate(LINES)]
    flow = Dataflow()
    flow.reduce_epoch(add, pre_aggregate=count_words)
    flow.capture()
    got = chain_result(flow, pairs, backend)
    assert Counter((e, w, n) for e, (w, n) in got) == reference_counts(pairs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chain_map_batch_and_flat_map_batch_keep_epochs_and_exact_types(backend):
    pairs = [(i // 3, i) for i in range(20)]
    flow = Dataflow()
    flow.map_batch(lambda batch: [(x, (x % 3, [x])) for x in batch])
    flow.flat_map_batch(lambda batch: [item for item in batch for _ in range(item[0] % 2 + 1)])
    flow.capture()
    got = chain_result(flow, pairs, backend)
    expected = [(i // 3, (i, (i % 3, [i]))) for i in range(20) for _ in range(i % 2 + 1)]
    assert sorted(map(repr, got)) == sorted(map(repr, expected))
    for _, item in got:  # tuples stay tuples, lists lists, across processes too
        assert type(item) is tuple and type(item[1]) is tuple and type(item[1][1]) is list


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_epoch_local_with_a_pre_aggregate(backend):
    pairs = [(0, line) for line in LINES]
    flow = Dataflow()
    flow.reduce_epoch_local(add, pre_aggregate=count_words)
    flow.capture()
    got = chain_result(flow, pairs, backend)
    totals: Counter[str] = Counter()
    for _, (word, count) in got:
        totals[word] += count
    assert totals == count_words(LINES)


def test_a_pre_aggregate_may_return_pairs_and_follow_other_steps():
    pairs = [(e, f"{e} {x}") for e in range(3) for x in range(5)]
    flow = Dataflow()
    flow.map(str.split)
    flow.reduce_epoch(max, pre_aggregate=lambda batch: [(k, int(v)) for k, v in batch])
    flow.capture()
    assert sorted(run(flow, pairs)) == [(0, ("0", 4)), (1, ("1", 4)), (2, ("2", 4))]


def _chain_error(flow: Dataflow, pairs: list[Any] | None = None) -> BaseException:
    with pytest.raises(Exception) as info:
        list(run(flow, pairs or [(0, 1), (0, 2), (1, 3)]))
    return info.value


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda flow: flow.map_batch(lambda batch: tuple(batch), step_id="tup"),
            r"step 'tup' \(map_batch\) on worker 0, epoch 0: the mapper of a map_batch step "
            r"must return a list \(one output per item\), got a tuple",
        ),
        (
            lambda flow: flow.map_batch(lambda batch: batch[:1], step_id="short"),
            r"step 'short' \(map_batch\) on worker 0, epoch 0: .* one output per item: it "
            r"returned 1 for a batch of 2; use flat_map_batch",
        ),
        (
            lambda flow: flow.flat_map_batch(lambda batch: "ab", step_id="text"),
            r"step 'text' \(flat_map_batch\) .* must return a list of items, got a str",
        ),
        (
            lambda flow: flow.flat_map_batch(lambda batch: {"a": 1}, step_id="dict"),
            r"got a dict .* \(return list\(d.items\(\)\) for its pairs\)",
        ),
        (
            lambda flow: flow.flat_map_batch(lambda batch: 7, step_id="int"),
            r"step 'int' \(flat_map_batch\) .* must return a list of items, got a int",
        ),
    ],
    ids=["map_batch-tuple", "map_batch-length", "flat-str", "flat-dict", "flat-int"],
)
def test_a_batch_function_returning_the_wrong_thing_names_the_step(build, message):
    flow = Dataflow()
    build(flow)
    flow.capture()
    error = _chain_error(flow)
    assert isinstance(error, FlowError)
    assert re.search(message, str(error)), str(error)


def test_a_raising_batch_function_keeps_its_error_with_a_note_naming_the_step():
    def boom(batch: list[Any]) -> list[Any]:
        raise ZeroDivisionError("no")

    flow = Dataflow()
    flow.map_batch(boom, step_id="boom")
    flow.capture()
    error = _chain_error(flow)
    assert isinstance(error, ZeroDivisionError)
    assert any("in step 'boom' (map_batch)" in note for note in error.__notes__)


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        (
            lambda batch: {1: 2},
            r"step 'sum' \(reduce_epoch\): its pre_aggregate must give .* "
            r"but gave \(1, 2\) \(a key of type int\) at epoch 0",
        ),
        (lambda batch: [("a", 1, 2)], r"but gave \('a', 1, 2\) \(a tuple"),
        (lambda batch: [["a", 1]], r"but gave \['a', 1\] \(a list"),
    ],
)
def test_a_pre_aggregate_with_bad_keys_is_a_state_key_error(aggregate, message):
    flow = Dataflow()
    flow.reduce_epoch(add, step_id="sum", pre_aggregate=aggregate)
    flow.capture()
    error = _chain_error(flow)
    assert isinstance(error, StateKeyError)
    assert re.search(message, str(error)), str(error)


# -- the stream graph -----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_batch_steps_and_a_pre_aggregated_reduce_final(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Any]:
        lines = op.input("lines", flow, TestingSource(LINES, batch_size=4))
        words = op.flat_map_batch("words", lines, lambda b: WORD.findall(" ".join(b).lower()))
        return {
            "count": op.reduce_final("count", lines, add, pre_aggregate=count_words),
            "lens": op.map_batch("lens", words, lambda batch: [(w, len(w)) for w in batch]),
        }

    out = collect(backend, tmp_path, build)
    assert sorted(out["count"]) == sorted(count_words(LINES).items())
    words = WORD.findall(" ".join(LINES).lower())
    assert sorted(out["lens"]) == sorted((w, len(w)) for w in words)


def test_graph_batch_errors_name_the_step_worker_and_epoch():
    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([1, 2, 3]))
    op.output("out", op.map_batch("bad", s, lambda batch: None), TestingSink([]))
    with pytest.raises(FlowError, match=r"step 'g.bad' \(map_batch\) on worker 0, epoch 0: "):
        run_main(flow)

    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource(["a"]))
    counts = op.reduce_final("count", s, add, pre_aggregate=lambda batch: 1 / 0)
    op.output("out", counts, TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.count' on worker 0, epoch 0: the pre_aggregate "):
        run_main(flow)


def test_a_pre_aggregated_reduce_final_resumes_after_an_abort(tmp_path):
    lines = ["a b", "b c", TestingSource.ABORT(), "c d", "a", TestingSource.ABORT(), "d d"]
    clean_lines = [line for line in lines if isinstance(line, str)]

    def flow_of(items: list[Any], out: list[Any]) -> Dataflow:
        flow = Dataflow("resume")
        text = op.input("lines", flow, TestingSource(items, batch_size=1))
        counts = op.reduce_final("count", text, add, pre_aggregate=count_words)
        op.output("out", counts, TestingSink(out))
        return flow

    init_db_dir(tmp_path / "db", 1)
    config = RecoveryConfig(tmp_path / "db")
    got: list[Any] = []
    for _ in range(3):
        run_main(flow_of(lines, got), epoch_interval=ZERO, recovery_config=config)
    assert sorted(got) == sorted(count_words(clean_lines).items())


# -- the fused per-item path ----------------------------------------------------------


def _fail_on(bad: int, result: Any = None) -> Any:
    def func(x: Any) -> Any:
        if x == bad:
            raise ValueError(f"bad {x}")
        return x if result is None else result(x)

    return func


@pytest.mark.parametrize("failing", ["first", "split", "pair", "second_split"])
def test_an_error_in_a_fused_chain_names_the_step_that_raised(failing):
    # map -> flat_map -> flat_map -> map -> reduce_epoch: a loop into the fold
    steps = {
        "first": lambda x: -1 if x == 3 else x,
        "split": lambda x: [x, x],
        "second_split": lambda x: [x],
        "pair": lambda x: (str(x), 1),
    }

    def raising(x: Any) -> Any:
        raise KeyError("raised here")

    steps[failing] = raising
    flow = Dataflow()
    flow.map(steps["first"], step_id="first")
    flow.flat_map(steps["split"], step_id="split")
    flow.flat_map(steps["second_split"], step_id="second_split")
    flow.map(steps["pair"], step_id="pair")
    flow.reduce_epoch(add, step_id="count")
    flow.capture()
    error = _chain_error(flow)
    assert isinstance(error, KeyError)
    notes = error.__notes__
    assert any(f"in step {failing!r}" in note for note in notes), notes


@pytest.mark.parametrize("failing", ["a", "b", "c"])
def test_an_error_in_a_fused_graph_comprehension_is_a_step_error_naming_it(failing):
    def ok(x: Any) -> Any:
        return x

    funcs = {"a": ok, "b": lambda x: [x], "c": lambda x: True}
    shape = {"a": None, "b": lambda x: [x], "c": lambda x: True}[failing]
    funcs[failing] = _fail_on(2, shape)
    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([1, 2, 3]))
    s = op.map("a", s, funcs["a"])
    s = op.flat_map("b", s, funcs["b"])
    s = op.filter("c", s, funcs["c"])
    op.output("out", s, TestingSink([]))
    with pytest.raises(StepError, match=rf"step 'g.{failing}' on worker 0, epoch 0") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, ValueError)


def test_a_flat_map_returning_no_iterable_is_named_in_a_comprehension():
    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([1, 2]))
    s = op.map("a", s, lambda x: x)
    s = op.flat_map("b", s, lambda x: x)  # an int: not iterable
    s = op.map("c", s, lambda x: x)
    op.output("out", s, TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.b' .* not iterable"):
        run_main(flow)


def test_a_graph_filter_fused_refuses_a_non_bool():
    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([1, 2]))
    s = op.map("a", s, lambda x: x)
    s = op.filter("keep", s, lambda x: x)  # an int, not a bool
    op.output("out", s, TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.keep' .* must return a bool, got int 1"):
        run_main(flow)


def test_a_bad_item_into_a_fused_fold_is_the_keyed_refusal():
    flow = Dataflow()
    flow.map(lambda x: x)
    flow.map(lambda x: (x, 1) if x != 2 else [x, 1])
    flow.reduce_epoch(add, step_id="count")
    flow.capture()
    error = _chain_error(flow, [(0, "1"), (0, 2)])
    assert isinstance(error, StateKeyError)
    assert "but got [2, 1] (a list) at epoch 0" in str(error)


KINDS = ["map", "flat_map", "filter", "filter_map", "filter_bool"]
FUNCS = {
    "map": [lambda x: x + 1, lambda x: x * 2, lambda x: -x],
    "flat_map": [lambda x: [x, x + 1], lambda x: [] if x % 3 == 0 else [x], lambda x: range(x % 3)],
    "filter": [lambda x: x % 2, lambda x: x > 2],
    "filter_map": [lambda x: None if x % 4 == 0 else x - 1],
    "filter_bool": [lambda x: x % 3 != 1],
}


def _member(kind: str, index: int) -> PerItem:
    func = FUNCS[kind][index % len(FUNCS[kind])]
    if kind != "filter_bool":
        return per_item(kind, func)

    def batch(epoch: int, items: list[Any]) -> list[Any]:
        return [x for x in items if func(x)]

    return PerItem(kind, func, batch, lambda b: None)


@settings(max_examples=150, deadline=None)
@given(
    chain=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2)), min_size=1, max_size=6),
    items=st.lists(st.integers(-5, 20), max_size=30),
)
def test_a_fused_run_gives_what_its_steps_give_one_by_one(chain, items):
    members = [(Step(kind, f"s{i}"), _member(kind, n)) for i, (kind, n) in enumerate(chain)]
    expected = items
    for _, member in members:
        expected = member(0, expected)
    fused = FusedRun(members, "test")
    assert fused.fn(0, list(items)) == expected
    # into a fold: the same pairs, folded
    keyed = [*members, (Step("map", "pair"), per_item("map", lambda x: (str(x % 5), x)))]
    acc: dict[str, Any] = {}
    FusedRun(keyed, "test", fold=(Step("reduce_epoch", "r"), add, _no_refusal)).fn(0, acc, items)
    want: dict[str, Any] = {}
    for x in expected:
        want[str(x % 5)] = want.get(str(x % 5), 0) + x
    assert acc == want


def _no_refusal(epoch: int, item: Any) -> None:
    raise AssertionError(item)


# -- reading input: the clock -----------------------------------------------------------


def test_the_events_reader_does_not_read_the_clock_per_event(monkeypatch):
    from timelypy.flow import _chain_reader

    reads = [0]
    real = _chain_reader.time.monotonic

    class Clock:
        @staticmethod
        def monotonic() -> float:
            reads[0] += 1
            return real()

    monkeypatch.setattr(_chain_reader, "time", Clock)

    def events(worker: int, peers: int, resume: int) -> Any:
        if worker == 0:
            yield AdvanceTo(0)
            for i in range(50_000):
                yield Emit(i)

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(events))
    flow.reduce_epoch(add, pre_aggregate=lambda batch: {"n": len(batch)})
    flow.capture()
    assert list(run(flow)) == [(0, ("n", 50_000))]
    assert reads[0] < 50_000 // 20, reads[0]


# -- the example -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args", [(), ("--lines-per-epoch", "2", "--processes", "2", "--threads", "2"), ("--graph",)]
)
def test_the_batch_wordcount_example(tmp_path, args):
    from tests.test_examples import ROOT

    text = tmp_path / "text.txt"
    text.write_text("\n".join(LINES) + "\n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "flow_batch_wordcount.py"), str(text), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    if "--graph" in args:
        assert printed == [f"{w} {n}" for w, n in sorted(count_words(LINES).items())]
        return
    per = 2 if args else len(LINES)
    pairs = [(i // per, line) for i, line in enumerate(LINES)]
    expected = sorted(reference_counts(pairs))
    assert printed == [f"{e} {w} {n}" for e, w, n in expected]


# -- the stream graph's per-epoch combine, one worker too -----------------------------------


@pytest.mark.parametrize("threads", [1, 2])
def test_a_graph_reducer_raising_in_the_combine_is_a_step_error(threads):
    from timelypy.flow.testing import cluster_main

    def boom(a: int, b: int) -> int:
        raise ArithmeticError("no sums")

    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([("a", 1), ("a", 2)], batch_size=2))
    op.output("out", op.reduce_final("sum", s, boom), TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.sum' on worker \d, epoch 0: the reducer") as info:
        cluster_main(flow, [], 0, worker_count_per_proc=threads, epoch_interval=ZERO)
    assert isinstance(info.value.__cause__, ArithmeticError)


@pytest.mark.parametrize("item", [(1, 2), ("a", 1, 2), ["a", 1]])
def test_a_graph_combine_with_steps_before_it_refuses_a_bad_item(item):
    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([("b", 1), item]))
    s = op.map("same", s, lambda x: x)
    s = op.filter("all", s, lambda x: True)
    op.output("out", op.count_final("count", s, lambda kv: kv), TestingSink([]))
    op.output("out2", op.reduce_final("sum", s, add), TestingSink([]))
    with pytest.raises((StateKeyError, StepError)):
        run_main(flow, epoch_interval=ZERO)

    flow = Dataflow("g")
    s = op.input("inp", flow, TestingSource([("b", 1), item]))
    s = op.map("same", s, lambda x: x)
    op.output("out", op.reduce_final("sum", s, add), TestingSink([]))
    with pytest.raises(
        StateKeyError, match=rf"step 'g.sum' \(reduce_final\) .* {re.escape(repr(item))}"
    ):
        run_main(flow, epoch_interval=ZERO)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_finals_after_fused_steps_on_every_backend(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Any]:
        lines = op.input("lines", flow, TestingSource(LINES, batch_size=3))
        words = op.flat_map("split", op.map("lower", lines, str.lower), WORD.findall)
        pairs = op.map("pair", op.filter("long", words, lambda w: len(w) > 2), lambda w: (w, 1))
        return {
            "sum": op.reduce_final("sum", pairs, add),
            "max": op.max_final("max", op.map_value("len", pairs, lambda one: one)),
            "count": op.count_final("count", words, lambda w: w),
        }

    out = collect(backend, tmp_path, build)
    words = WORD.findall(" ".join(LINES).lower())
    long_words = Counter(w for w in words if len(w) > 2)
    assert sorted(out["sum"]) == sorted(long_words.items())
    assert sorted(out["max"]) == sorted((w, 1) for w in long_words)
    assert sorted(out["count"]) == sorted(Counter(words).items())
