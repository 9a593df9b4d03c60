"""Keyed steps route whole batches by state key, with a memo of the keys' hashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import StateKeyError
from timelypy.flow import run_cluster, steps
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.steps import partition_by_key, route_by_key
from timelypy.flow.testing import TestingSink, TestingSource

from .graph_helpers import BACKENDS, collect

#: str keys, lone surrogates among them (``surrogatepass`` encodes them)
KEYS = st.text(alphabet=st.characters(codec=None), max_size=6) | st.sampled_from(
    ["\ud800", "a\udfff", ""]
)


def one_by_one(items, peers):
    parts = [[] for _ in range(peers)]
    for item in items:
        parts[route_by_key(item) % peers].append(item)
    return parts


@given(st.lists(st.tuples(KEYS, st.integers()), max_size=60), st.integers(1, 5))
def test_a_batch_goes_where_each_item_would(items, peers):
    assert partition_by_key(items, peers) == one_by_one(items, peers)
    # and again, with the keys remembered now
    assert partition_by_key(items, peers) == one_by_one(items, peers)


@pytest.fixture
def memo(monkeypatch):
    """A fresh memo of 3 keys for the test."""
    monkeypatch.setattr(steps, "ROUTE_MEMO_KEYS", 3)
    monkeypatch.setattr(steps, "_route_memo", steps._RouteMemo())
    return steps._route_memo


def test_the_memo_stops_growing_at_its_limit(memo):
    items = [(f"key{i}", i) for i in range(10)]
    assert partition_by_key(items, 3) == one_by_one(items, 3)
    assert partition_by_key(items, 3) == one_by_one(items, 3)
    assert list(memo.hashes) == ["key0", "key1", "key2"]


def test_long_keys_are_hashed_each_time_not_remembered(memo):
    items = [("k" * (steps.ROUTE_MEMO_KEY_CHARS + 1), 1), ("short", 2)]
    assert partition_by_key(items, 2) == one_by_one(items, 2)
    assert list(memo.hashes) == ["short"]


def test_ever_new_keys_stop_the_lookups_and_a_later_batch_looks_again(memo, monkeypatch):
    monkeypatch.setattr(steps, "ROUTE_MEMO_RESAMPLE", 3)
    fresh = [[(f"new{b}-{i}", i) for i in range(10)] for b in range(8)]
    assert partition_by_key(fresh[0], 2) == one_by_one(fresh[0], 2)
    assert not memo.useful  # full after 3 keys, 7 of 10 could not be kept
    for batch in fresh[1:3]:  # routed without the memo, as the memo would
        assert partition_by_key(batch, 2) == one_by_one(batch, 2)
        assert not memo.useful
    remembered = [(key, 0) for key in memo.hashes] * 4
    assert partition_by_key(remembered, 2) == one_by_one(remembered, 2)  # the third: it looks
    assert memo.useful and memo.skipped == 0


@pytest.mark.parametrize("item", [(1, "x"), (None, 1), (b"k", 1), 5])
def test_an_item_that_is_not_str_keyed_is_refused(item):
    with pytest.raises(TypeError):
        partition_by_key([("ok", 1), item], 2)
    with pytest.raises(StateKeyError, match=r"\(key, value\) 2-tuples with a str state key"):
        route_by_key(item)


def running_sums(flow, items):
    keyed = op.input("inp", flow, TestingSource(items))
    return op.stateful_map("sum", keyed, lambda s, v: ((s or 0) + v, (s or 0) + v))


@pytest.mark.parametrize("backend", BACKENDS)
def test_keyed_steps_on_any_backend_keep_every_key_on_one_worker(backend, tmp_path):
    items = [(str(i % 7), i) for i in range(500)]
    got = collect(backend, tmp_path, lambda flow: running_sums(flow, items))
    expected: dict[str, list[int]] = {}
    totals: dict[str, int] = {}
    for key, value in items:
        totals[key] = totals.get(key, 0) + value
        expected.setdefault(key, []).append(totals[key])
    by_key: dict[str, list[int]] = {}
    for key, total in got:
        by_key.setdefault(key, []).append(total)
    # each key's running sum counts every item of the key once, in order
    assert by_key == expected


@pytest.mark.parametrize(("procs", "workers"), [(1, 2), (2, 1)])
def test_an_int_key_into_a_keyed_step_names_the_step_and_worker(procs, workers):
    flow = Dataflow("sums")
    out: list = []
    op.output("out", running_sums(flow, [("ok", 1), (1, 2), (3, 4)]), TestingSink(out))
    with pytest.raises(StateKeyError) as info:
        run_cluster(flow, proc_count=procs, worker_count_per_proc=workers)
    message = str(info.value) + "\n".join(getattr(info.value, "__notes__", []))
    assert "(1, 2) (a key of type int)" in message, message
    assert "'sums.sum'" in message and "worker" in message, message
