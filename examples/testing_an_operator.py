"""Property-testing an operator of your own with ``timelypy.testing``.

    python examples/testing_an_operator.py

``sum_by_key`` is a ``unary_frontier`` operator: it routes ``(key, value)``
records by key, sums them per key and epoch, and emits ``(key, total)``
once the epoch is complete at its input.  The program checks it against a
plain-Python model on random inputs, 1 to 4 workers and random
interleavings of the workers' steps (hypothesis draws them; ``simulate``
runs each case deterministically on hand-stepped workers), then shows
that a variant which emits before the epoch is complete is caught, with
the smallest case hypothesis finds.  It prints one line::

    ok: sum_by_key matches its model in 100 simulations; the early-emitting variant \
fails on [(0, [('a', 0)]), (0, [('a', 0)])]

It needs hypothesis (``pip install hypothesis``).
"""

from collections import Counter
from collections.abc import Callable

from hypothesis import find, given, settings
from hypothesis import strategies as st

import timelypy
from timelypy.dataflow import Capability, Exchange, OperatorInfo, OperatorInput, OperatorOutput
from timelypy.testing import records_by_epoch, simulate
from timelypy.testing.strategies import epoch_batches, schedules, worker_counts

Records = list[tuple[int, list[tuple[str, int]]]]


def sum_by_key(stream: timelypy.Stream, emit_early: bool = False) -> timelypy.Stream:
    """``(key, total)`` per key and epoch, once the epoch is complete.

    With ``emit_early`` (the bug) it sends a running total with every batch instead.
    """

    def constructor(
        _cap: Capability, _info: OperatorInfo
    ) -> Callable[[OperatorInput, OperatorOutput], None]:
        pending: dict[int, tuple[Capability, dict[str, int]]] = {}

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for cap, records in input:
                if cap.time not in pending:
                    pending[cap.time] = (cap.retain(), {})
                totals = pending[cap.time][1]
                for key, value in records:
                    totals[key] = totals.get(key, 0) + value
                if emit_early:
                    output.session(cap).give_batch(sorted(totals.items()))
            for time in sorted(pending):
                if input.frontier.less_equal(time):
                    continue
                held, totals = pending.pop(time)
                if not emit_early:
                    output.session(held).give_batch(sorted(totals.items()))
                held.drop()

        return logic

    by_key = Exchange(lambda record: timelypy.stable_hash(record[0]))
    return stream.unary_frontier(by_key, "SumByKey", constructor)


def model(batches: Records) -> list[tuple[int, list[tuple[str, int]]]]:
    """What ``sum_by_key`` must output, in plain Python."""
    expected = []
    for epoch, records in records_by_epoch(batches).items():
        totals: Counter[str] = Counter()
        for key, value in records:
            totals[key] += value
        expected.append((epoch, sorted(totals.items())))
    return expected


records = st.tuples(st.sampled_from("abc"), st.integers(0, 9))
runs = []


@settings(max_examples=100, deadline=None, database=None)
@given(epoch_batches(records), worker_counts(), schedules())
def check_sum_by_key(batches: Records, workers: int, schedule: list) -> None:
    simulate(sum_by_key, batches, workers=workers, schedule=schedule).assert_output(model(batches))
    runs.append(workers)


def early_is_wrong(case: tuple[Records, int, list]) -> bool:
    batches, workers, schedule = case
    run = simulate(
        lambda s: sum_by_key(s, emit_early=True), batches, workers=workers, schedule=schedule
    )
    return run.extract() != model(batches)


if __name__ == "__main__":
    check_sum_by_key()
    bad_batches, _, _ = find(
        st.tuples(epoch_batches(records), worker_counts(), schedules()),
        early_is_wrong,
        settings=settings(database=None, deadline=None, derandomize=True),
    )
    print(
        f"ok: sum_by_key matches its model in {len(runs)} simulations; "
        f"the early-emitting variant fails on {bad_batches}"
    )
