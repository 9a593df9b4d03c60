"""A branch whose sides rejoin in a merge through stateless steps runs as one operator.

``GraphBuilder`` fuses the diamond ``branch -> stateless steps -> merge``
(each stream read once) into one operator per worker: these tests check
that it gives what the unfused operators give, on every backend, that
errors still name the step that raised, and which shapes it fuses.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import StepError
from timelypy.flow._graph import GraphBuilder
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from .graph_helpers import BACKENDS, collect


def _is_mult3(x: int) -> bool:
    return x % 3 == 0


def _diamond(flow: Dataflow, items: list[int], batch_size: int, *, unfused: bool) -> Stream[Any]:
    """branch -> (map, flat_map) | (filter, map) -> merge; ``unfused`` adds a second reader."""
    numbers = op.input("numbers", flow, TestingSource(items, batch_size))
    split = op.branch("mult3", numbers, _is_mult3)
    yes = op.flat_map("twice", op.map("tens", split.trues, lambda x: x * 10), lambda x: [x, -x])
    no = op.map("plus", op.filter("odd", split.falses, lambda x: x % 2 == 1), lambda x: x + 0.5)
    if unfused:  # a second reader of a side: the diamond is built as separate operators
        op.inspect("peek", split.trues, lambda step_id, item: None)
    return op.merge("both", yes, no)


def _expected(items: list[int]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for x in items:
        if _is_mult3(x):
            out.update([x * 10, -x * 10])
        elif x % 2 == 1:
            out[x + 0.5] += 1
    return out


def _run(items: list[int], batch_size: int, *, unfused: bool) -> list[Any]:
    flow = Dataflow("diamond")
    out: list[Any] = []
    op.output("out", _diamond(flow, items, batch_size, unfused=unfused), TestingSink(out))
    run_main(flow)
    return out


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.integers(-50, 50), max_size=60), batch_size=st.integers(1, 8))
def test_the_fused_diamond_gives_what_the_separate_operators_give(items, batch_size):
    fused = _run(items, batch_size, unfused=False)
    separate = _run(items, batch_size, unfused=True)
    assert Counter(fused) == Counter(separate) == _expected(items)
    assert [type(x) for x in sorted(fused, key=repr)] == [
        type(x) for x in sorted(separate, key=repr)
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_fused_diamond_on_every_backend(backend, tmp_path):
    items = list(range(-20, 40))

    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        return {"merged": _diamond(flow, items, 4, unfused=False)}

    out = collect(backend, tmp_path, build)
    assert Counter(out["merged"]) == _expected(items)


def _merge_after_branch(flow: Dataflow) -> GraphBuilder:
    """A builder that has not built anything: only its ``_diamond`` is asked."""
    builder = object.__new__(GraphBuilder)
    builder.flow = flow
    return builder


def _branch_step(flow: Dataflow) -> Any:
    return next(step for step in flow.steps if step.operator == "branch")


def test_which_shapes_are_fused():
    flow = Dataflow("a")
    _diamond(flow, [1], 1, unfused=False)
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)).step_id == "a.both"

    flow = Dataflow("b")  # a side read twice
    _diamond(flow, [1], 1, unfused=True)
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)) is None

    flow = Dataflow("c")  # a merge of three streams
    numbers = op.input("numbers", flow, TestingSource([1]))
    split = op.branch("odd", numbers, lambda x: x % 2 == 1)
    op.merge("all", split.trues, split.falses, op.input("more", flow, TestingSource([2])))
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)) is None

    flow = Dataflow("d")  # a stateful step on a side
    numbers = op.input("numbers", flow, TestingSource([("a", 1)]))
    split = op.branch("odd", numbers, lambda kv: kv[1] % 2 == 1)
    counted = op.count_final("count", split.trues, lambda kv: kv[0])
    op.merge("all", counted, split.falses)
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)) is None

    flow = Dataflow("e")  # both sides straight into the merge
    numbers = op.input("numbers", flow, TestingSource([1, 2, 3]))
    split = op.branch("odd", numbers, lambda x: x % 2 == 1)
    out: list[Any] = []
    op.output("out", op.merge("all", split.falses, split.trues), TestingSink(out))
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)).step_id == "e.all"
    run_main(flow)
    assert sorted(out) == [1, 2, 3]


def test_a_fused_branch_names_the_predicate_that_returned_no_bool():
    flow = Dataflow("g")
    split = op.branch("pick", op.input("inp", flow, TestingSource([1, 2])), lambda x: x)
    op.output("out", op.merge("m", split.trues, split.falses), TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.pick' .* must return a bool, got int 1"):
        run_main(flow)


def test_a_fused_sides_step_that_raises_is_named():
    def boom(x: int) -> int:
        raise ValueError(f"no {x}")

    flow = Dataflow("g")
    split = op.branch("pick", op.input("inp", flow, TestingSource([1, 2])), lambda x: x > 1)
    yes = op.map("fine", split.trues, lambda x: x)
    no = op.map("boom", split.falses, boom)
    op.output("out", op.merge("m", yes, no), TestingSink([]))
    with pytest.raises(StepError, match=r"step 'g.boom'") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, ValueError)


def test_an_unfused_branch_names_the_predicate_that_returned_no_bool():
    flow = Dataflow("g")
    split = op.branch("pick", op.input("inp", flow, TestingSource([1, 2])), lambda x: x)
    op.output("yes", split.trues, TestingSink([]))
    op.output("no", split.falses, TestingSink([]))
    assert _merge_after_branch(flow)._diamond(_branch_step(flow)) is None
    with pytest.raises(StepError, match=r"step 'g.pick' .* must return a bool, got int 1"):
        run_main(flow)
