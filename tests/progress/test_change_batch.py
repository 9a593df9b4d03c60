"""ChangeBatch: unit tests and equivalence with plain dict accumulation."""

from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import int_times, product_times, updates
from timelypy.progress import ChangeBatch


def test_zero_totals_vanish():
    batch = ChangeBatch([(1, 2), (1, -2), (3, 1)])
    assert list(batch) == [(3, 1)]
    assert len(batch) == 1
    batch.update(3, -1)
    assert batch.is_empty() and not batch
    assert batch.drain() == []


def test_drain_empties():
    batch = ChangeBatch.from_elem("a", 5)
    assert batch.drain() == [("a", 5)]
    assert batch.is_empty()
    assert ChangeBatch.from_elem("a", 0).is_empty()


def test_equality_ignores_zero_entries():
    a = ChangeBatch([(1, 1), (2, 0)])
    b = ChangeBatch([(1, 1)])
    assert a == b


@given(st.data())
def test_matches_dict_accumulation(data):
    times = data.draw(st.sampled_from([int_times, product_times]))
    ups = data.draw(updates(times, max_size=60))
    batch = ChangeBatch()
    reference: dict = {}
    for i, (key, diff) in enumerate(ups):
        if i % 3 == 0:
            batch.extend([(key, diff)])
        else:
            batch.update(key, diff)
        reference[key] = reference.get(key, 0) + diff
    expected = {k: d for k, d in reference.items() if d}
    assert dict(batch) == expected
    assert len(batch) == len(expected)
    assert batch.as_dict() == expected
    assert dict(batch.drain()) == expected
    assert batch.is_empty()
