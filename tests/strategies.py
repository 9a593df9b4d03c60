"""Hypothesis strategies shared by the whole test suite."""

from __future__ import annotations

from hypothesis import strategies as st

from timelypy.order import Product, ProductType

#: Small int times, so that random updates collide often.
int_times = st.integers(min_value=0, max_value=12)

#: Product times over small ints.
product_times = st.builds(Product, st.integers(0, 4), st.integers(0, 4))

#: Product times nested one level: Product(Product(a, b), c).
nested_product_times = st.builds(Product, product_times, st.integers(0, 3))

#: Per timestamp type: (type, times, summaries, increment summary).
TIME_KINDS = {
    "int": (int, int_times, st.integers(0, 2), 1),
    "product": (
        ProductType(int, int),
        product_times,
        st.builds(Product, st.integers(0, 1), st.integers(0, 2)),
        Product(0, 1),
    ),
}

diffs = st.integers(min_value=-3, max_value=3)


def updates(times: st.SearchStrategy, max_size: int = 40) -> st.SearchStrategy:
    """Lists of ``(time, diff)`` updates."""
    return st.lists(st.tuples(times, diffs), max_size=max_size)


def batches(items: list, draw_split: st.DataObject) -> list[list]:
    """Split ``items`` into consecutive non-empty batches at random points."""
    cuts = sorted(
        draw_split.draw(st.sets(st.integers(1, max(1, len(items) - 1)), max_size=len(items)))
    )
    result, start = [], 0
    for cut in cuts:
        if start < cut < len(items):
            result.append(items[start:cut])
            start = cut
    result.append(items[start:])
    return [b for b in result if b] or [[]]
