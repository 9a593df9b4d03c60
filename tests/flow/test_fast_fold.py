"""The fast paths of ``reduce_epoch``'s fold and of the keyed-item check.

``_fold`` writes ``old + value`` itself when the reducer is ``operator.add``,
``keyed_check`` counts types in C and ``checked_fold`` checks as it folds; all
must behave exactly as the plain per-item versions below do: the same
values *and types* (a key seen once with ``True`` stays ``True``), the same
exceptions with the same notes, the same ``StateKeyError`` for the same bad
item.
"""

from __future__ import annotations

from collections import namedtuple
from operator import add
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from timelypy.errors import StateKeyError
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow._folds import _fold, checked_fold, keyed_check

_MISSING = object()


def plus(a: Any, b: Any) -> Any:
    """``a + b`` as a user's own reducer: not ``operator.add``, so the generic fold."""
    return a + b


def reference_fold(epoch: int, acc: dict, items: list, reducer: Any) -> None:
    """The fold as the docs define it: the first value as it is, then ``reducer(old, value)``."""
    key = None
    try:
        for key, value in items:
            old = acc.get(key, _MISSING)
            acc[key] = value if old is _MISSING else reducer(old, value)
    except Exception as exc:
        exc.add_note(
            f"in step 'sum' (reduce_epoch): the reducer raised on key {key!r} at epoch {epoch}"
        )
        raise


def typed(acc: dict) -> list[tuple[str, str, str]]:
    """Keys, value types and reprs, in order (``repr`` tells ``-0.0`` from ``0.0``)."""
    return [(key, type(value).__name__, repr(value)) for key, value in acc.items()]


def outcome(fold: Any, batches: list[list]) -> tuple[Any, ...]:
    """Fold ``batches`` into one accumulator; what came out, or what was raised."""
    acc: dict = {}
    try:
        for epoch, items in enumerate(batches):
            fold(epoch, acc, items)
    except Exception as exc:
        return ("raised", type(exc), str(exc), getattr(exc, "__notes__", []), typed(acc))
    return ("ok", typed(acc))


def sum_step(reducer: Any = add) -> Any:
    flow = Dataflow()
    flow.reduce_epoch(reducer, step_id="sum")
    return flow.steps[-1]


keys = st.sampled_from(["a", "b", "c", "dd", "é"])
numbers = st.one_of(
    st.just(1),
    st.just(1),
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=False),
)
values = st.one_of(numbers, st.text(max_size=2))
ones_batch = st.lists(st.tuples(keys, st.just(1)), max_size=30)


def batches_of(value_strategy: st.SearchStrategy) -> st.SearchStrategy:
    mixed = st.lists(st.tuples(keys, value_strategy), max_size=30)
    return st.lists(st.one_of(ones_batch, mixed), max_size=6)


@settings(max_examples=400, deadline=None)
@given(batches=batches_of(values))
def test_add_fold_matches_the_generic_fold_values_types_and_errors(batches):
    expected = outcome(lambda e, acc, items: reference_fold(e, acc, items, add), batches)
    assert outcome(_fold(sum_step(add), add), batches) == expected
    assert outcome(_fold(sum_step(plus), plus), batches) == expected


@settings(max_examples=200, deadline=None)
@given(batches=batches_of(numbers))
def test_add_fold_matches_on_numbers_only(batches):
    expected = outcome(lambda e, acc, items: reference_fold(e, acc, items, add), batches)
    assert expected[0] == "ok"
    assert outcome(_fold(sum_step(add), add), batches) == expected


@pytest.mark.parametrize(
    "reducer", [max, min, lambda a, b: a * b, lambda a, b: (a, b), lambda a, b: b - a]
)
@given(batches=batches_of(st.integers(-5, 5) | st.booleans()))
@settings(max_examples=60, deadline=None)
def test_other_reducers_keep_the_generic_fold(reducer, batches):
    expected = outcome(lambda e, acc, items: reference_fold(e, acc, items, reducer), batches)
    assert outcome(_fold(sum_step(reducer), reducer), batches) == expected


def test_a_key_seen_once_keeps_its_value_and_type():
    fold = _fold(sum_step(add), add)
    acc: dict = {}
    fold(0, acc, [("t", True), ("one", 1), ("f", 1.0), ("n", 1), ("n", 1)])
    fold(0, acc, [("t2", True), ("t2", True), ("s", "x"), ("s", "y")])
    assert typed(acc) == [
        ("t", "bool", "True"),
        ("one", "int", "1"),
        ("f", "float", "1.0"),
        ("n", "int", "2"),
        ("t2", "int", "2"),
        ("s", "str", "'xy'"),
    ]


def test_add_raising_names_the_step_key_and_epoch():
    fold = _fold(sum_step(add), add)
    acc = {"a": 1}
    with pytest.raises(TypeError, match="unsupported operand") as info:
        fold(7, acc, [("b", 2), ("a", "x"), ("c", 3)])
    assert info.value.__notes__ == [
        "in step 'sum' (reduce_epoch): the reducer raised on key 'a' at epoch 7"
    ]
    assert acc == {"a": 1, "b": 2}


def test_add_raising_in_a_flow_names_the_step_key_and_epoch():
    flow = Dataflow()
    flow.reduce_epoch(add, step_id="sum")
    flow.capture()
    with pytest.raises(TypeError) as info:
        list(run(flow, [(3, ("a", "x")), (3, ("b", 1)), (3, ("a", 1))]))
    notes = "\n".join(info.value.__notes__)
    assert "in step 'sum' (reduce_epoch): the reducer raised on key 'a' at epoch 3" in notes


# -- the whole flow -------------------------------------------------------------------

pairs_of = st.lists(st.tuples(st.integers(0, 3), st.tuples(keys, values)), max_size=60).map(
    lambda pairs: sorted(pairs, key=lambda pair: pair[0])
)


def flow_result(reducer: Any, pairs: list, workers: int = 1) -> tuple[Any, ...]:
    flow = Dataflow()
    flow.reduce_epoch(reducer, step_id="sum")
    flow.capture()
    try:
        if workers == 1:
            out = list(run(flow, pairs))
        else:
            out = run_cluster(flow, pairs, 1, workers)
    except Exception as exc:
        return ("raised", type(exc))
    return (
        "ok",
        sorted((epoch, key, type(value).__name__, repr(value)) for epoch, (key, value) in out),
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=pairs_of)
def test_reduce_epoch_add_gives_what_a_users_plus_gives(pairs):
    assert flow_result(add, pairs) == flow_result(plus, pairs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=st.lists(
        st.tuples(st.integers(0, 3), st.tuples(keys, st.integers(-3, 3) | st.booleans())),
        max_size=60,
    ).map(lambda pairs: sorted(pairs, key=lambda pair: pair[0]))
)
def test_reduce_epoch_add_on_two_workers_gives_what_a_users_plus_gives(pairs):
    # ints and bools only: their sums do not depend on the order the workers fold in
    assert flow_result(add, pairs, 2) == flow_result(plus, pairs, 2)


# -- the keyed-item check ---------------------------------------------------------------

Pair = namedtuple("Pair", "key value")


class Key(str):
    """A str subclass: not a state key (the check wants ``type(key) is str``)."""


good_items = st.tuples(keys, values)
bad_items = st.one_of(
    st.text(max_size=3),
    st.integers(),
    st.just(None),
    st.lists(st.integers(), max_size=3),
    st.tuples(),
    st.tuples(keys),
    st.tuples(keys, st.integers(), st.integers()),
    st.tuples(st.integers(), st.integers()),
    st.tuples(st.none(), st.integers()),
    st.builds(lambda k, v: (Key(k), v), keys, st.integers()),
    st.builds(Pair, keys, st.integers()),
    st.builds(lambda k, v: [k, v], keys, st.integers()),
)


def reference_bad(items: list) -> Any:
    for item in items:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            return item
    return _MISSING


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.one_of(good_items, good_items, good_items, bad_items), max_size=20),
    epoch=st.integers(0, 5),
)
def test_keyed_check_refuses_exactly_the_bad_items(items, epoch):
    step = sum_step(add)
    check = keyed_check(step)
    bad = reference_bad(items)
    if bad is _MISSING:
        assert check(epoch, items) is items
        return
    with pytest.raises(StateKeyError) as info:
        check(epoch, items)
    message = str(info.value)
    assert message.startswith(
        f"step 'sum' (reduce_epoch) takes (key, value) 2-tuples with a str state key, but got "
        f"{bad!r} ("
    )
    assert message.endswith(f") at epoch {epoch}; map items to (str(key), value) before this step")
    name = type(bad).__name__
    kind = (
        f"a key of type {type(bad[0]).__name__}"
        if type(bad) is tuple and len(bad) == 2
        else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
    )
    assert f"({kind})" in message


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.one_of(good_items, good_items, good_items, bad_items), max_size=20),
    epoch=st.integers(0, 5),
    reducer=st.sampled_from([add, plus]),
)
@example(items=[("a", 1), ("a", ""), ""], epoch=0, reducer=add)  # 1 + "" before the bad ""
def test_the_checked_fold_refuses_what_keyed_check_refuses(items, epoch, reducer):
    # reduce_epoch's first fold checks each item as it folds it (the length found
    # by the fold's own unpacking): the same StateKeyError, naming
    # the same item, as keyed_check before the fold, unless folding the items before
    # it already fails; otherwise the same fold.
    step = sum_step(reducer)
    checked = checked_fold(step, reducer)
    try:
        keyed_check(step)(epoch, items)
        expected = None
    except StateKeyError as exc:
        expected = str(exc)
    if expected is not None:
        first_bad = next(i for i, item in enumerate(items) if reference_bad([item]) is not _MISSING)
        before = outcome(
            lambda e, acc, batch: _fold(step, reducer)(epoch, acc, batch), [items[:first_bad]]
        )
        if before[0] == "raised":
            # the reducer fails on the good items before the bad one (say 1 + ""): the
            # check-as-you-fold meets that error first, as the plain fold of them does
            assert outcome(lambda e, acc, batch: checked(epoch, acc, batch), [items]) == before
            return
        with pytest.raises(StateKeyError) as info:
            checked(epoch, {}, items)
        assert str(info.value) == expected
        # not chained to the fold's unpacking error
        assert info.value.__context__ is None or info.value.__suppress_context__
        return
    assert outcome(lambda e, acc, batch: checked(epoch, acc, batch), [items]) == outcome(
        lambda e, acc, batch: _fold(step, reducer)(epoch, acc, batch), [items]
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_reduce_epoch_names_the_bad_item_on_any_number_of_workers(workers):
    def items():
        yield 0, ("a", 1)
        yield 0, ("b", 2, 3)

    flow = Dataflow()
    flow.reduce_epoch(add, step_id="sum")
    flow.capture()
    with pytest.raises(StateKeyError, match=r"but got \('b', 2, 3\) \(a tuple\) at epoch 0"):
        list(run_cluster(flow, items(), 1, workers))
