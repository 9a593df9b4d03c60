"""Antichain and MutableAntichain: ports of Timely's tests and brute-force properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import int_times, nested_product_times, product_times, updates
from timelypy.errors import TimestampError
from timelypy.order import Product, less_equal
from timelypy.progress import Antichain, MutableAntichain

TIME_STRATEGIES = [int_times, product_times, nested_product_times]


def minimal(times):
    """The minimal elements of a set of times, by brute force."""
    times = set(times)
    return {t for t in times if not any(less_equal(u, t) and u != t for u in times)}


# -- Antichain ------------------------------------------------------------------


def test_antichain_insert_keeps_minimal_elements():
    a = Antichain()
    assert a.insert(Product(2, 0))
    assert a.insert(Product(0, 2))
    assert not a.insert(Product(2, 2))
    assert set(a.elements()) == {Product(2, 0), Product(0, 2)}
    assert a.insert(Product(0, 0))
    assert a.elements() == (Product(0, 0),)


def test_antichain_queries():
    a = Antichain([3])
    assert a.less_equal(3) and not a.less_than(3) and a.less_than(4)
    assert not a.less_equal(2)
    assert not Antichain().less_equal(0)
    assert Antichain([1]).dominates(Antichain([2])) and not Antichain([2]).dominates([1])
    assert Antichain().dominates(Antichain()) and not Antichain().dominates([0])
    assert Antichain([0]).dominates(Antichain())


def test_antichain_set_equality():
    assert Antichain([Product(1, 0), Product(0, 1)]) == Antichain([Product(0, 1), Product(1, 0)])
    assert Antichain([1]) != Antichain([2])
    assert Antichain.from_iter([5, 3, 4]) == Antichain.from_elem(3)


def test_antichain_rejects_mixed_types():
    with pytest.raises(TimestampError, match="cannot mix"):
        Antichain([1, Product(0, 0)])


@given(st.data())
def test_antichain_stays_minimal_and_dominating(data):
    times = data.draw(st.sampled_from(TIME_STRATEGIES))
    inserted = data.draw(st.lists(times, max_size=30))
    a = Antichain()
    for t in inserted:
        a.insert(t)
        elements = a.elements()
        for x in elements:  # an antichain: pairwise incomparable
            for y in elements:
                if x != y:
                    assert not less_equal(x, y)
        # every inserted element is dominated by some element
        assert all(a.less_equal(u) for u in inserted[: inserted.index(t) + 1])
    assert set(a.elements()) == minimal(inserted)


# -- MutableAntichain -----------------------------------------------------------


def test_mutable_antichain_doctest_port():
    frontier = MutableAntichain.from_elem(1)
    changes = frontier.update_iter([(1, -1), (2, 7)])
    assert changes == [(1, -1), (2, 1)]
    assert frontier.frontier() == (2,)


def test_mutable_antichain_ignores_negative_counts():
    m = MutableAntichain()
    assert m.update_iter([(3, -1)]) == []
    assert m.is_empty()
    assert m.update_iter([(5, 1)]) == [(5, 1)]
    assert m.update_iter([(3, 2)]) == [(3, 1), (5, -1)]  # count at 3 is now +1
    assert m.frontier() == (3,)


def test_mutable_compaction():
    # Port of Timely's `mutable_compaction`: many updates at few times keep the
    # internal state small.
    m = MutableAntichain()
    for _ in range(1000):
        m.update_iter([(7, 1), (8, 1)])
        m.update_iter([(7, -1), (8, -1)])
    m.update_iter([(9, 1)])
    assert len(m.updates()) <= 32
    assert m.updates() == [(9, 1)]


def test_mutable_antichain_product_incomparable():
    m = MutableAntichain()
    m.update_iter([(Product(1, 0), 1), (Product(0, 1), 1)])
    assert set(m.frontier()) == {Product(1, 0), Product(0, 1)}
    assert m.less_equal(Product(1, 1)) and m.less_than(Product(1, 1))
    assert not m.less_equal(Product(0, 0))
    changes = m.update_iter([(Product(0, 1), -1)])
    assert changes == [(Product(0, 1), -1)]


def test_mutable_antichain_rejects_mixed_types_without_changing_state():
    m = MutableAntichain.from_elem(1)
    with pytest.raises(TimestampError):
        m.update_iter([(Product(0, 0), 1)])
    with pytest.raises(TimestampError):
        m.update(Product(0, 0), 1)
    with pytest.raises(TimestampError):
        m.update("1", 1)
    assert m.frontier() == (1,) and m.count_for(1) == 1


@given(st.data())
def test_mutable_antichain_matches_reference(data):
    times = data.draw(st.sampled_from(TIME_STRATEGIES))
    batches = data.draw(st.lists(updates(times, max_size=8), max_size=12))
    m = MutableAntichain()
    counts: dict = {}
    replay: dict = {}
    for batch in batches:
        changes = m.update_iter(batch)
        for t, d in batch:
            counts[t] = counts.get(t, 0) + d
        expected = minimal(t for t, c in counts.items() if c > 0)
        assert set(m.frontier()) == expected
        assert len(m.frontier()) == len(expected)
        # the reported changes replay to the frontier
        assert len({t for t, _ in changes}) == len(changes)
        for t, d in changes:
            assert d in (-1, 1)
            replay[t] = replay.get(t, 0) + d
        assert {t for t, c in replay.items() if c} == expected
        assert all(c in (0, 1) for c in replay.values())
        for t in set(counts):
            assert m.count_for(t) == counts[t]
        for t in list(counts)[:5]:
            assert m.less_equal(t) == any(less_equal(f, t) for f in expected)
            assert m.less_than(t) == any(less_equal(f, t) and f != t for f in expected)


@given(st.data())
def test_single_update_matches_update_iter(data):
    times = data.draw(st.sampled_from(TIME_STRATEGIES))
    ups = data.draw(updates(times, max_size=40))
    one, many = MutableAntichain(), MutableAntichain()
    for t, d in ups:
        assert sorted(one.update(t, d)) == sorted(many.update_iter([(t, d)]))
        assert one.frontier() == many.frontier()
