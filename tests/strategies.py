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


# -- dataflow pipelines and epoch inputs (tests/dataflow/test_properties.py) ------------
#
# A pipeline is a list of operations on a stream of ints, as plain tuples so that
# hypothesis prints (and shrinks) them readably:
#
# ("map", a, b)            x -> a * x + b
# ("filter", m, r)         keep x with x % m == r
# ("flat_map", k)          x -> x, x + 1, ..., x + k - 1   (k == 0 drops x)
# ("exchange", salt)       route x to worker (x + salt) % peers
# ("concat", left, right)  both sub-pipelines applied to the stream, merged
# ("branch", m, r, yes, no)  x % m == r goes through ``yes``, the rest through ``no``
# ("loop", k, emit_all, body)  an iterative scope: ``body`` is applied k times in a
#                          feedback loop; every round's records leave (emit_all) or
#                          only the last round's; loops nest up to two deep
#
# An epoch input is a list of ``(time, [(worker choice, record), ...], steps)``
# with strictly increasing times; a record is sent by worker ``choice % peers``
# and each worker steps ``steps`` times after sending an epoch.

_SIMPLE_OPS = ("map", "filter", "flat_map", "exchange")
_COMPOUND_OPS = ("concat", "branch", "loop")


def pipeline_size(ops: list[tuple]) -> int:
    """The number of operations in a pipeline description, nested ones included."""
    size = 0
    for op in ops:
        if op[0] == "concat":
            size += 1 + pipeline_size(op[1]) + pipeline_size(op[2])
        elif op[0] == "branch":
            size += 1 + pipeline_size(op[3]) + pipeline_size(op[4])
        elif op[0] == "loop":
            size += 1 + pipeline_size(op[3])
        else:
            size += 1
    return size


@st.composite
def pipeline_ops(
    draw: st.DrawFn,
    budget: int = 6,
    kinds: tuple[str, ...] = _SIMPLE_OPS + _COMPOUND_OPS,
    loops_around: int = 0,
) -> list[tuple]:
    """A pipeline description (see above) of at most ``budget`` operations.

    Loop bodies (``loops_around > 0``) hold no ``flat_map`` or ``concat``, and
    loops nest at most two deep, so that record counts stay small.
    """
    ops: list[tuple] = []
    while budget > 0 and draw(st.integers(0, 3)):
        allowed = [k for k in kinds if k in _SIMPLE_OPS or budget >= 2]
        kind = draw(st.sampled_from(allowed))
        simple = tuple(k for k in kinds if k in _SIMPLE_OPS)
        op: tuple
        if kind == "map":
            op = ("map", draw(st.integers(1, 3)), draw(st.integers(-5, 5)))
        elif kind == "filter":
            m = draw(st.integers(2, 3))
            op = ("filter", m, draw(st.integers(0, m - 1)))
        elif kind == "flat_map":
            op = ("flat_map", draw(st.integers(0, 2)))
        elif kind == "exchange":
            op = ("exchange", draw(st.integers(0, 7)))
        elif kind == "concat":
            left = draw(pipeline_ops(budget - 1, simple, loops_around))
            right = draw(pipeline_ops(budget - 1 - pipeline_size(left), simple, loops_around))
            op = ("concat", left, right)
        elif kind == "branch":
            m = draw(st.integers(2, 3))
            r = draw(st.integers(0, m - 1))
            yes = draw(pipeline_ops(budget - 1, simple, loops_around))
            no = draw(pipeline_ops(budget - 1 - pipeline_size(yes), simple, loops_around))
            op = ("branch", m, r, yes, no)
        else:
            body_kinds = ("map", "filter", "exchange", "branch")
            if loops_around == 0:
                body_kinds += ("loop",)
            body = draw(pipeline_ops(budget - 1, body_kinds, loops_around + 1))
            op = ("loop", draw(st.integers(1, 3)), draw(st.booleans()), body)
        ops.append(op)
        budget -= pipeline_size([op])
    return ops


@st.composite
def epoch_inputs(
    draw: st.DrawFn, max_epochs: int = 6, max_records: int = 40
) -> list[tuple[int, list[tuple[int, int]], int]]:
    """Epochs ``(time, [(worker choice, record)], steps)`` at strictly increasing times."""
    count = draw(st.integers(1, max_epochs))
    time = draw(st.integers(0, 2))
    left = max_records
    epochs = []
    for _ in range(count):
        records = draw(
            st.lists(
                st.tuples(st.integers(0, 3), st.integers(-10, 30)),
                max_size=min(left, max_records // 2),
            )
        )
        left -= len(records)
        epochs.append((time, records, draw(st.integers(0, 3))))
        time += draw(st.integers(1, 3))
    return epochs


# -- timelypy.flow ---------------------------------------------------------------

#: One step of a random keyed flow: (operator, parameter).  Every step keeps
#: items as (str key, int value) pairs, so keyed steps can follow any step.
FLOW_STEP_KINDS = (
    "map",
    "filter",
    "flat_map",
    "filter_map",
    "reduce_epoch",
    "stateful_count",
    "reduce_count",
    "inspect_epoch",
)

flow_steps = st.lists(
    st.tuples(st.sampled_from(FLOW_STEP_KINDS), st.integers(1, 3)), min_size=0, max_size=6
)

#: (epoch, (key, value)) pairs with non-decreasing epochs, as worker 0 reads them.
flow_inputs = st.lists(
    st.tuples(st.integers(0, 3), st.tuples(st.sampled_from("abcd"), st.integers(0, 9))),
    max_size=40,
).map(lambda pairs: sorted(pairs, key=lambda pair: pair[0]))
