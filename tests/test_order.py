"""Timestamps, Product and path summaries: unit tests and order-law properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import nested_product_times, product_times
from timelypy.errors import SummaryError, TimestampError
from timelypy.order import (
    U64_MAX,
    Product,
    ProductType,
    check_timestamp,
    followed_by,
    identity_summary,
    is_identity_summary,
    less_equal,
    less_than,
    minimum,
    results_in,
    timestamp_type_of,
)


def test_product_basics():
    p = Product(1, 2)
    assert (p.outer, p.inner) == (1, 2)
    assert repr(p) == "(1, 2)"
    assert repr(Product(Product(1, 2), 3)) == "((1, 2), 3)"
    assert hash(p) == hash(Product(1, 2))
    with pytest.raises(AttributeError):
        p.outer = 3  # type: ignore[misc]
    assert {p: "x"}[Product(1, 2)] == "x"


def test_product_partial_order_is_not_total():
    a, b = Product(1, 0), Product(0, 1)
    assert not a.less_equal(b) and not b.less_equal(a)
    assert b < a  # the lexicographic total order still sorts them


def test_int_summaries_saturate_to_none():
    assert results_in(3, 4) == 7
    assert results_in(1, U64_MAX) is None
    assert results_in(0, U64_MAX) == U64_MAX
    assert followed_by(U64_MAX, 1) is None
    assert followed_by(2, 3) == 5


def test_product_summaries_drop_when_any_coordinate_overflows():
    assert Product(0, 1).results_in(Product(5, U64_MAX)) is None
    assert Product(1, 0).followed_by(Product(U64_MAX, 0)) is None
    assert Product(0, 1).followed_by(Product(2, 3)) == Product(2, 4)


def test_minimum_and_identity():
    nested = ProductType(ProductType(int, int), int)
    assert minimum(int) == 0
    assert minimum(nested) == Product(Product(0, 0), 0)
    assert identity_summary(nested) == Product(Product(0, 0), 0)
    assert is_identity_summary(identity_summary(nested))
    assert not is_identity_summary(Product(Product(0, 1), 0))
    assert timestamp_type_of(Product(Product(3, 1), 2)) == nested


def test_mixed_types_are_rejected_clearly():
    with pytest.raises(TimestampError, match="cannot compare timestamps"):
        less_equal(1, Product(0, 0))
    with pytest.raises(TimestampError, match="cannot compare timestamps"):
        Product(0, 0).less_equal(1)
    with pytest.raises(TimestampError, match="not a timestamp"):
        less_equal(1.5, 2.0)
    with pytest.raises(SummaryError, match="int summary"):
        results_in(1, Product(0, 0))
    with pytest.raises(SummaryError, match="Product summary"):
        results_in(Product(0, 1), 3)
    with pytest.raises(TypeError):  # the errors are TypeErrors too
        results_in("x", 3)


def test_check_timestamp():
    assert check_timestamp(3, int) == 3
    with pytest.raises(TimestampError, match="negative"):
        check_timestamp(-1, int)
    with pytest.raises(TimestampError, match="too large"):
        check_timestamp(U64_MAX + 1, int)
    with pytest.raises(TimestampError, match="wrong type"):
        check_timestamp((1, 2), ProductType(int, int))
    assert check_timestamp(Product(1, 2), ProductType(int, int)) == Product(1, 2)


class Lattice:
    """A user-defined timestamp: pairs under the product order (like Product)."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b

    def less_equal(self, other: Lattice) -> bool:
        return self.a <= other.a and self.b <= other.b

    def __lt__(self, other: Lattice) -> bool:
        return (self.a, self.b) < (other.a, other.b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lattice) and (self.a, self.b) == (other.a, other.b)

    def __hash__(self) -> int:
        return hash((self.a, self.b))

    @classmethod
    def minimum(cls) -> Lattice:
        return cls(0, 0)


def test_user_timestamp_type():
    assert less_equal(Lattice(1, 1), Lattice(1, 2))
    assert less_than(Lattice(1, 1), Lattice(1, 2))
    assert not less_than(Lattice(1, 1), Lattice(1, 1))
    assert minimum(Lattice) == Lattice(0, 0)


# -- properties -----------------------------------------------------------------

any_products = st.one_of(product_times, nested_product_times)


@given(st.data())
def test_product_order_laws(data):
    kind = data.draw(st.sampled_from([product_times, nested_product_times]))
    a, b, c = data.draw(kind), data.draw(kind), data.draw(kind)
    assert a.less_equal(a)  # reflexive
    if a.less_equal(b) and b.less_equal(a):  # antisymmetric
        assert a == b
    if a.less_equal(b) and b.less_equal(c):  # transitive
        assert a.less_equal(c)
    assert a.less_than(b) == (a.less_equal(b) and a != b)
    if a.less_equal(b):  # the total order extends the partial order
        assert a <= b
    assert (a < b) == (tuple(a) < tuple(b))


summary_ints = st.integers(0, 2**64 - 1) | st.integers(0, 5)
time_ints = st.integers(0, 2**64 - 1) | st.integers(0, 5)


@given(summary_ints, summary_ints, time_ints, time_ints)
def test_int_summaries_monotone_and_compose(s1, s2, t1, t2):
    lo, hi = min(t1, t2), max(t1, t2)
    r_lo, r_hi = results_in(s1, lo), results_in(s1, hi)
    if r_lo is not None and r_hi is not None:
        assert r_lo <= r_hi
    if r_lo is None:  # a smaller time dropping implies every larger one drops
        assert r_hi is None
    composed = followed_by(s1, s2)
    step = results_in(s1, t1)
    both = None if step is None else results_in(s2, step)
    assert (None if composed is None else results_in(composed, t1)) == both


product_summaries = st.builds(Product, summary_ints, summary_ints)
big_product_times = st.builds(Product, time_ints, time_ints)


@given(product_summaries, product_summaries, big_product_times, big_product_times)
def test_product_summaries_monotone_and_compose(s1, s2, t1, t2):
    if t1.less_equal(t2):
        r1, r2 = s1.results_in(t1), s1.results_in(t2)
        if r1 is not None and r2 is not None:
            assert r1.less_equal(r2)
        if r1 is None:
            assert r2 is None
    composed = s1.followed_by(s2)
    step = s1.results_in(t1)
    both = None if step is None else s2.results_in(step)
    assert (None if composed is None else composed.results_in(t1)) == both
    assert identity_summary(ProductType(int, int)).results_in(t1) == t1


@pytest.mark.parametrize(
    ("outer", "inner", "message"),
    [
        ("a", 1, "must be a timestamp"),
        (-1, 0, "must be >= 0"),
        (0, -3, "inner coordinate must be >= 0"),
        (True, 0, "must be a timestamp"),
        (1.5, 0, "must be a timestamp"),
        ((1, 2), 0, "must be a timestamp"),
    ],
)
def test_product_coordinates_are_validated_like_int_timestamps(outer, inner, message):
    with pytest.raises(TimestampError, match=message):
        Product(outer, inner)


def test_product_comparison_operators_are_the_sort_order_not_the_product_order():
    a, b = Product(1, 9), Product(2, 0)
    assert a < b  # lexicographic: what sorting uses
    assert not a.less_equal(b) and not b.less_equal(a)  # incomparable in the product order
    assert Product(Product(0, 1), 2).less_equal(Product(Product(0, 2), 2))
