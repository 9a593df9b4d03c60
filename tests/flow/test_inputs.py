"""Input helpers and readers: epochs from the item or the clock, never per-worker counts."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.errors import FlowError
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.inputs import (
    AdvanceTo,
    Emit,
    EmitBatch,
    ManualInputConfig,
    epochs_from_pairs,
    fully_ordered,
    single_batch,
    tumbling_epoch,
)


def test_single_batch_and_fully_ordered():
    assert list(single_batch(["a", "b"])) == [(0, "a"), (0, "b")]
    assert list(fully_ordered(["a", "b", "c"])) == [(0, "a"), (1, "b"), (2, "c")]


def test_tumbling_epoch_is_the_same_on_every_worker():
    # Two workers see different items at the same clock times: same epochs.
    times = [1000.0, 1000.9, 1001.0, 1003.5]
    first = list(tumbling_epoch(["a", "b", "c", "d"], 1.0, time_getter=lambda _: times.pop(0)))
    times = [1000.0, 1000.9, 1001.0, 1003.5]
    second = list(tumbling_epoch(["w", "x", "y", "z"], 1.0, time_getter=lambda _: times.pop(0)))
    assert [e for e, _ in first] == [e for e, _ in second] == [1000, 1000, 1001, 1003]


def test_tumbling_epoch_takes_timedeltas_datetimes_and_never_goes_back():
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    stamps = [start, start + datetime.timedelta(seconds=61), start + datetime.timedelta(seconds=5)]
    items = list(
        tumbling_epoch(stamps, datetime.timedelta(minutes=1), time_getter=lambda t: t, anchor=start)
    )
    assert [epoch for epoch, _ in items] == [0, 1, 1]


def test_tumbling_epoch_uses_the_wall_clock_by_default():
    epochs = [epoch for epoch, _ in tumbling_epoch(range(3), 3600.0)]
    assert len(set(epochs)) <= 2 and epochs == sorted(epochs)


def test_tumbling_epoch_rejects_a_non_positive_length():
    with pytest.raises(FlowError, match="positive epoch_length"):
        list(tumbling_epoch([1], 0))


def test_epochs_from_pairs_skips_before_resume():
    assert list(epochs_from_pairs([(0, "a"), (1, "b"), (1, "c")], resume_epoch=1)) == [
        AdvanceTo(1),
        Emit("b"),
        Emit("c"),
    ]


def test_input_builder_gets_worker_index_count_and_resume_epoch():
    calls = []

    def builder(worker_index, worker_count, resume_epoch):
        calls.append((worker_index, worker_count, resume_epoch))
        yield AdvanceTo(worker_index)
        yield Emit(worker_index)

    flow = Dataflow()
    flow.capture()
    assert sorted(run_cluster(flow, ManualInputConfig(builder), 1, 3)) == [(0, 0), (1, 1), (2, 2)]
    assert sorted(calls) == [(0, 3, 0), (1, 3, 0), (2, 3, 0)]


# Events per worker: each an ("advance", step) or ("emit", item) or ("batch", items, kind).
events_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.integers(0, 2)),
        st.tuples(st.just("emit"), st.integers()),
        st.tuples(
            st.just("batch"),
            st.lists(st.integers(), max_size=2000),
            st.sampled_from(["list", "tuple", "generator"]),
        ),
    ),
    max_size=12,
)


def _builder(plans, batched):
    """An input builder playing ``plans[worker]``; ``batched``: EmitBatch as one event."""

    def builder(worker_index, worker_count, resume_epoch):
        epoch = 0
        yield AdvanceTo(epoch)
        for event in plans[worker_index]:
            if event[0] == "advance":
                epoch += event[1]
                yield AdvanceTo(epoch)
            elif event[0] == "emit":
                yield Emit(event[1])
            elif batched:
                items, kind = event[1], event[2]
                yield EmitBatch(
                    items if kind == "list" else tuple(items) if kind == "tuple" else iter(items)
                )
            else:
                yield from (Emit(item) for item in event[1])

    return builder


@settings(max_examples=40, deadline=None)
@given(plans=st.lists(events_strategy, min_size=1, max_size=2))
def test_emit_batch_is_an_emit_per_item(plans):
    flow = Dataflow()
    flow.map(lambda x: (str(x % 7), x))
    flow.reduce_epoch(lambda a, b: a + b)
    flow.capture()
    workers = len(plans)
    batched = run_cluster(flow, ManualInputConfig(_builder(plans, True)), 1, workers)
    one_by_one = run_cluster(flow, ManualInputConfig(_builder(plans, False)), 1, workers)
    assert sorted(batched) == sorted(one_by_one)


def test_a_large_epoch_streams_through_in_batches():
    flow = Dataflow()
    flow.filter(lambda x: x % 1000 == 0)
    flow.capture()
    out = list(run(flow, single_batch(range(100_000))))
    assert sorted(out) == [(0, x) for x in range(0, 100_000, 1000)]


def test_results_stream_before_the_input_ends():
    # run() yields epoch 0's results while the input is still open.
    produced = []

    def items():
        for epoch in range(100_000):
            produced.append(epoch)
            yield epoch, epoch

    flow = Dataflow()
    flow.capture()
    for _pair in run(flow, items()):
        assert len(produced) < 100_000
        break


def test_a_slow_source_streams_each_item_without_waiting_for_a_full_batch():
    # No timed assertion: the source is slow (each of its first items takes
    # longer than the reader's pull deadline, more so under load), then holds
    # back its third item until the caller has epoch 0's result, which can only
    # happen if the reader hands on what it has instead of waiting for more.
    # The wait is a bound: under any load it ends as soon as the result arrives.
    import threading
    import time
    from operator import add

    from timelypy.flow._chain_reader import PULL_SECONDS

    first_result_out = threading.Event()
    released: list[bool] = []

    def slow():
        time.sleep(5 * PULL_SECONDS)
        yield 0, ("a", 1)
        time.sleep(5 * PULL_SECONDS)
        yield 1, ("a", 1)  # epoch 0 is complete once epoch 1 starts
        released.append(first_result_out.wait(60))
        yield 2, ("a", 1)
        yield 3, ("a", 1)

    flow = Dataflow()
    flow.reduce_epoch(add)
    flow.capture()
    results = []
    for pair in run(flow, slow()):
        results.append(pair)
        first_result_out.set()
    assert released == [True], "epoch 0's result waited for the rest of the input"
    assert results[0] == (0, ("a", 1))
    assert sorted(results) == [(epoch, ("a", 1)) for epoch in range(4)]
