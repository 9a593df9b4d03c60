"""timelypy.testing, used the way a user would: test an operator and a flow of one's own.

The operator under test is ``sum_by_key``, a ``unary_frontier`` operator that
sums ``(key, value)`` records per key and epoch and emits ``(key, total)``
once the epoch is complete at its input.  It is property-tested against a
few lines of plain Python under random inputs, 1-4 workers and random
interleavings of the workers' steps; buggy variants of it must be *caught*
(hypothesis finds a counterexample, and the property test fails).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from operator import add

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import timelypy
from timelypy import Exchange, Pipeline, stable_hash
from timelypy.errors import ClusterError, FlowError
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.recovery import RecoveryConfig
from timelypy.testing import (
    EpochFeed,
    Simulation,
    TestingSink,
    TestingSource,
    Turn,
    describe_holders,
    feed,
    items_by_epoch,
    records_by_epoch,
    run_to_completion,
    settle,
    simulate,
    stepped_workers,
)
from timelypy.testing.strategies import epoch_batches, flow_pairs, schedules, worker_counts

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

keyed_records = st.tuples(st.sampled_from("abc"), st.integers(0, 9))


# -- the user's operator, its model, and its bugs -------------------------------------


def sum_by_key(stream, *, emit_early=False, pact=None):
    """Per epoch and key, the sum of the values: ``(key, total)`` once the epoch is complete.

    ``emit_early`` is a bug: emit a running total with every batch instead of
    waiting for the epoch to complete.  ``pact=Pipeline()`` is another: sum on
    each worker without routing a key to one worker.
    """

    def constructor(cap, info):
        pending = {}  # time -> [capability, {key: total}]

        def logic(input, output):
            for cap, records in input:
                if cap.time not in pending:
                    pending[cap.time] = [cap.retain(), {}]
                totals = pending[cap.time][1]
                for key, value in records:
                    totals[key] = totals.get(key, 0) + value
                if emit_early:
                    output.session(cap).give_batch(sorted(totals.items()))
            for time in sorted(pending):
                if input.frontier.less_equal(time):
                    continue  # the epoch may still receive records
                held, totals = pending.pop(time)
                if not emit_early:
                    output.session(held).give_batch(sorted(totals.items()))
                held.drop()

        return logic

    if pact is None:
        pact = Exchange(lambda record: stable_hash(record[0]))
    return stream.unary_frontier(pact, "SumByKey", constructor)


def model(batches):
    """What sum_by_key must output, in plain Python."""
    expected = []
    for epoch, records in records_by_epoch(batches).items():
        totals = Counter()
        for key, value in records:
            totals[key] += value
        expected.append((epoch, sorted(totals.items())))
    return expected


def matches_model(build, batches, workers, schedule):
    try:
        simulate(build, batches, workers=workers, schedule=schedule).assert_output(model(batches))
    except AssertionError:
        return False
    return True


scenarios = st.tuples(epoch_batches(keyed_records), worker_counts(), schedules())


# -- property tests of the operator ----------------------------------------------------


@FAST
@given(epoch_batches(keyed_records), worker_counts(), schedules())
def test_sum_by_key_matches_its_model(batches, workers, schedule):
    run = simulate(sum_by_key, batches, workers=workers, schedule=schedule)
    run.assert_output(model(batches))
    # Each key is summed on exactly one worker: the one its hash routes it to.
    for index, captured in enumerate(run.by_worker()):
        for _, totals in captured:
            assert all(stable_hash(key) % workers == index for key, _ in totals)


def test_an_early_emitting_operator_is_caught():
    def early(stream):
        return sum_by_key(stream, emit_early=True)

    batches, workers, schedule = find(
        scenarios,
        lambda s: not matches_model(early, *s),
        settings=settings(max_examples=500, deadline=None, database=None, derandomize=True),
    )
    # The smallest counterexample: two batches of one key in one epoch, so a
    # running total goes out before the epoch is complete.
    assert len(batches) == 2
    assert batches[0][0] == batches[1][0]
    with pytest.raises(AssertionError, match=r"differs from the expected records"):
        simulate(early, batches, workers=workers, schedule=schedule).assert_output(model(batches))


def test_the_property_test_fails_for_the_early_emitting_operator():
    @settings(max_examples=200, deadline=None, database=None)
    @given(epoch_batches(keyed_records), worker_counts(), schedules())
    def property_of_the_buggy_operator(batches, workers, schedule):
        run = simulate(
            lambda s: sum_by_key(s, emit_early=True), batches, workers=workers, schedule=schedule
        )
        run.assert_output(model(batches))

    with pytest.raises(AssertionError, match=r"reproduce with: simulate\(build, \["):
        property_of_the_buggy_operator()


def test_an_operator_that_forgets_to_exchange_is_caught_only_on_several_workers():
    def local(stream):
        return sum_by_key(stream, pact=Pipeline())

    # Correct on one worker, whatever the input and interleaving...
    single = st.tuples(epoch_batches(keyed_records), st.just(1), schedules())
    with pytest.raises(NoSuchExample):
        find(
            single,
            lambda s: not matches_model(local, *s),
            settings=settings(max_examples=60, deadline=None, database=None),
        )
    # ...but wrong as soon as two workers hold records of one key and epoch.
    batches, workers, _ = find(
        scenarios,
        lambda s: not matches_model(local, *s),
        settings=settings(max_examples=500, deadline=None, database=None, derandomize=True),
    )
    assert workers == 2
    assert len(batches) == 2


@FAST
@given(epoch_batches(), epoch_batches(), worker_counts(), schedules())
def test_two_inputs_reach_a_binary_operator(left, right, workers, schedule):
    def merge(first, second):
        return first.concat(second.map(lambda x: -x))

    run = simulate(merge, left, right, workers=workers, schedule=schedule)
    expected = records_by_epoch(left, [(e, [-x for x in r]) for e, r in right])
    run.assert_output(list(expected.items()))


# -- the simulation itself ----------------------------------------------------------------


def event_log(run: Simulation) -> list:
    return [list(queue) for queues in run.queues for queue in queues]


@settings(max_examples=25, deadline=None)
@given(epoch_batches(keyed_records), worker_counts(), schedules())
def test_a_simulation_is_reproducible_from_its_arguments(batches, workers, schedule):
    first = simulate(sum_by_key, batches, workers=workers, schedule=schedule)
    second = simulate(sum_by_key, batches, workers=workers, schedule=schedule)
    # The same run event for event, progress updates included, on every worker.
    assert event_log(first) == event_log(second)
    # The reproduction it prints is a call that repeats it.
    again = eval(
        first.reproduction("sum_by_key"),
        {"simulate": simulate, "sum_by_key": sum_by_key, "Turn": Turn},
    )
    assert event_log(again) == event_log(first)


def test_the_schedule_decides_who_feeds_and_steps():
    batches = [(0, [1]), (0, [2]), (1, [3]), (1, [4])]
    seen = []

    def watch(stream):
        return stream.inspect_batch(lambda time, records: seen.append((time, list(records))))

    # Worker 1 sends (and steps) both its batches before worker 0 sends anything.
    simulate(watch, batches, workers=2, schedule=[Turn(1, 2), Turn(0, 0), Turn(0, 2)])
    assert seen[:2] == [(0, [2]), (1, [4])]
    seen.clear()
    # Round-robin: worker 0 first, one batch each.
    simulate(watch, batches, workers=2)
    assert seen[:2] == [(0, [1]), (0, [2])]


def test_inputs_are_dealt_round_robin_and_advanced_lazily():
    observed = []

    def frontiers(stream):
        def constructor(cap, info):
            def logic(input, output):
                times = []
                for cap, records in input:
                    times.append(cap.time)
                    output.session(cap).give_batch(records)
                observed.append((info.worker_index, times, input.frontier.frontier()))

            return logic

        return stream.unary_frontier(Pipeline(), "Watch", constructor)

    run = simulate(
        frontiers, [(0, ["a"]), (0, ["b"]), (3, ["c"]), (5, [])], workers=2, schedule=[0, 0]
    )
    assert run.by_worker() == [[(0, ["a"]), (3, ["c"])], [(0, ["b"])]]
    # Worker 0 received (3, c) while epoch 0 was still open: worker 1 had not sent yet.
    assert (0, [3], (0,)) in observed
    # Worker 1's empty batch at epoch 5 only advanced its input, then it closed.
    assert observed[-1][2] == ()
    assert run.extract() == [(0, ["a", "b"]), (3, ["c"])]


def test_an_operator_that_raises_names_the_worker_and_turn():
    def explode(stream):
        def fail(x):
            if x == 13:
                raise ValueError("unlucky")
            return x

        return stream.map(fail)

    with pytest.raises(ValueError, match="unlucky") as info:
        simulate(explode, [(0, [1]), (0, [13])], workers=2, schedule=[1])
    # the map is fused after the input: it runs as worker 1 feeds its batch
    assert any("feeding worker 1 of 2 (schedule turn 0" in note for note in info.value.__notes__)
    assert info.value.timelypy_operator == "Map"

    def explode_later(stream):  # an exchange first: the map runs in worker 0's step
        return explode(stream.exchange(lambda x: 0))

    with pytest.raises(ValueError, match="unlucky") as info:
        simulate(explode_later, [(0, [1]), (0, [13])], workers=2, schedule=[1, 0])
    assert any("stepping worker 0 of 2 (schedule turn 1" in note for note in info.value.__notes__)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"input 0: batch 1 is at epoch 0, after .* epoch 2"):
        simulate(sum_by_key, [(2, []), (0, [])])
    with pytest.raises(TypeError, match="input 1: batch 0 at epoch 0 must carry a list"):
        simulate(lambda a, b: a, [], [(0, 5)])
    with pytest.raises(TypeError, match="input 0: batch 0 must be an \\(epoch, records\\) pair"):
        simulate(sum_by_key, [[0, [1]]])
    with pytest.raises(TypeError, match="at least one input"):
        simulate(sum_by_key)
    with pytest.raises(ValueError, match="workers must be an int >= 1, got 0"):
        simulate(sum_by_key, [], workers=0)
    with pytest.raises(ValueError, match="schedule entry 1: feeds must be an int >= 0"):
        simulate(sum_by_key, [], schedule=[0, Turn(1, -1)])
    with pytest.raises(TypeError, match="schedule entry 0 must be a Turn"):
        simulate(sum_by_key, [], schedule=["w0"])
    with pytest.raises(TypeError, match="must return the Stream to capture"):
        simulate(lambda s: 42, [])
    with pytest.raises(IndexError, match="output 1 does not exist"):
        simulate(sum_by_key, []).extract(1)
    with pytest.raises(ValueError, match="peers must be an int >= 1"):
        stepped_workers(0)
    with pytest.raises(TypeError, match="a Worker or a list of Workers"):
        settle("worker 0")


# -- stepping: run to completion, and what holds a stuck dataflow ------------------------------


def keeper(stream):
    """An operator that keeps its initial capability forever: the dataflow never completes."""

    def constructor(cap, info):
        kept = cap.retain()

        def logic(input, output):
            for _cap, records in input:
                output.session(kept).give_batch(records)

        return logic

    return stream.unary(Pipeline(), "Keeper", constructor)


def test_run_to_completion_names_the_operator_that_keeps_its_capability():
    workers = stepped_workers(2)
    handles = [timelypy.InputHandle() for _ in workers]
    for worker, handle in zip(workers, handles, strict=True):
        worker.dataflow(lambda scope, h=handle: keeper(scope.input_from(h)).probe())
        feed(handle, [(0, [1]), (4, [2])])
    with pytest.raises(AssertionError) as info:
        run_to_completion(workers, limit=50)
    message = str(info.value)
    assert "still running after 50 rounds of stepping 2 workers" in message
    assert "worker 0: dataflow 0: 'Keeper' holds capabilities at [0] on output 0" in message
    assert "worker 1: dataflow 0: 'Keeper' holds capabilities at [0] on output 0" in message
    assert "Input" not in message  # the inputs were closed: only the keeper holds it


def test_simulate_fails_naming_the_holder():
    with pytest.raises(AssertionError, match="'Keeper' holds capabilities at \\[0\\]") as info:
        simulate(keeper, [(0, [1])], workers=3, schedule=[2], limit=20)
    assert any(
        "after the schedule [Turn(worker=2, feeds=1)]" in note for note in info.value.__notes__
    )


def test_an_input_left_open_is_named_and_settle_leaves_it_open():
    worker = stepped_workers(1)[0]
    handle = timelypy.InputHandle()
    queue = worker.dataflow(lambda scope: scope.input_from(handle).capture())
    feed(handle, [(0, ["x"]), (2, ["y"])], close=False)
    settle(worker, 5)
    assert queue.extract() == [(0, ["x"]), (2, ["y"])]
    assert describe_holders(worker) == (
        "worker 0: dataflow 0: 'Input' holds capabilities at [2] on output 0"
    )
    with pytest.raises(AssertionError, match="'Input' holds capabilities at \\[2\\]"):
        run_to_completion(worker, limit=5)
    handle.close()
    run_to_completion(worker)
    assert describe_holders(worker) == "(nothing holds them)"


def test_epoch_feed_one_action_at_a_time():
    worker = stepped_workers(1)[0]
    handle = timelypy.InputHandle()
    probe = worker.dataflow(lambda scope: scope.input_from(handle).probe())
    epoch_feed = EpochFeed(handle, [(1, [10]), (1, []), (3, [30])])
    assert epoch_feed.pending == 4
    times = []
    while epoch_feed.feed_next():
        settle(worker, 2)
        times.append(probe.frontier())
    assert times == [(1,), (1,), (3,), ()]
    assert epoch_feed.done and not epoch_feed.feed_next()


# -- strategies ------------------------------------------------------------------------------


@FAST
@given(
    epoch_batches(epochs=3, max_batches=5, max_records=2),
    schedules(max_turns=10),
    flow_pairs(epochs=2),
)
def test_strategies_draw_what_they_promise(batches, schedule, pairs):
    epochs = [epoch for epoch, _ in batches]
    assert epochs == sorted(epochs) and all(0 <= e < 3 for e in epochs)
    assert len(batches) <= 5 and all(len(records) <= 2 for _, records in batches)
    assert len(schedule) <= 10
    assert all(isinstance(t, Turn) and 0 <= t.worker <= 7 and 0 <= t.feeds <= 2 for t in schedule)
    assert [e for e, _ in pairs] == sorted(e for e, _ in pairs)
    assert all(0 <= e < 2 and isinstance(item[0], str) for e, item in pairs)


def test_the_kit_imports_without_hypothesis():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["hypothesis"] = None          # as if it were not installed
        import timelypy.testing as kit
        run = kit.simulate(lambda s: s.map(abs), [(0, [-1]), (1, [2])], workers=2)
        assert run.extract() == [(0, [1]), (1, [2])]
        try:
            import timelypy.testing.strategies
        except ImportError:
            print("strategies need hypothesis")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "strategies need hypothesis"


# -- the flow layer: a list in, a list out -----------------------------------------------------


def wordcount_flow(source, sink):
    flow = Dataflow()
    flow.input("words", source)
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.capture(sink)
    return flow


@settings(max_examples=30, deadline=None)
@given(
    flow_pairs(st.sampled_from(["to", "be", "or"]), max_size=20),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_flow_source_and_sink_round_trip(pairs, parts, workers):
    out = []
    flow = wordcount_flow(TestingSource(pairs, parts=parts), TestingSink(out, epochs=True))
    assert run_cluster(flow, worker_count_per_proc=workers) == []
    expected = {
        epoch: sorted(Counter(words).items()) for epoch, words in items_by_epoch(pairs).items()
    }
    assert items_by_epoch(out) == expected


def test_a_testing_source_spreads_its_partitions_over_the_workers():
    readers = []
    flow = Dataflow()
    flow.input("numbers", TestingSource([(0, n) for n in range(8)], parts=4))
    flow.inspect(lambda n: readers.append(n))
    flow.capture()
    items = run_cluster(flow, worker_count_per_proc=2)
    assert sorted(items) == [(0, n) for n in range(8)]
    source = TestingSource([(0, n) for n in range(8)], parts=4)
    assert [list(source.build_part(p, 0)) for p in source.list_parts(0, 2)][1] == [
        timelypy.flow.AdvanceTo(0),
        timelypy.flow.Emit(1),
        timelypy.flow.Emit(5),
    ]


def test_a_testing_sink_collects_items_and_run_returns_nothing_else():
    out = []
    flow = Dataflow()
    flow.map(str.upper)
    flow.capture(TestingSink(out))
    assert list(run(flow, TestingSource([(0, "a"), (2, "b")]))) == []
    assert out == ["A", "B"]


def test_a_testing_sink_refuses_to_collect_in_another_process():
    out = []
    flow = Dataflow()
    flow.input("numbers", TestingSource([(0, 1), (1, 2)], parts=2))
    flow.capture(TestingSink(out))
    with pytest.raises(ClusterError, match="TestingSink collects into a list of the process"):
        run_cluster(flow, proc_count=2)


def test_a_testing_source_resumes_after_a_recovered_execution(tmp_path):
    def running_total(total, value):
        return total + value, total + value

    out = []
    flow = Dataflow()
    flow.input("values", TestingSource([(0, ("k", 1)), (1, ("k", 2))]))
    flow.stateful_map("total", lambda key: 0, running_total)
    flow.capture(TestingSink(out, epochs=True))
    store = RecoveryConfig(str(tmp_path / "store"))
    list(run(flow, recovery_config=store))
    assert sorted(out) == [(0, ("k", 1)), (1, ("k", 3))]

    out.clear()
    flow = Dataflow()
    flow.input("values", TestingSource([(0, ("k", 1)), (1, ("k", 2)), (2, ("k", 10))]))
    flow.stateful_map("total", lambda key: 0, running_total)
    flow.capture(TestingSink(out, epochs=True))
    list(run(flow, recovery_config=store))
    assert out == [(2, ("k", 13))]  # epochs 0 and 1 skipped by the source, state reloaded


def test_flow_kit_errors_are_named():
    with pytest.raises(FlowError, match="element 1 is at epoch 0, after an element at epoch 3"):
        TestingSource([(3, "a"), (0, "b")])
    with pytest.raises(FlowError, match="element 0 must be an \\(epoch, item\\) pair"):
        TestingSource(["a"])
    with pytest.raises(FlowError, match="epochs are ints >= 0"):
        TestingSource([(-1, "a")])
    with pytest.raises(FlowError, match="parts >= 1"):
        TestingSource([], parts=0)
    with pytest.raises(FlowError, match="no partition 'part-9'"):
        TestingSource([], parts=2).build_part("part-9", 0)
    with pytest.raises(FlowError, match="appends to a list"):
        TestingSink(set())
    with pytest.raises(FlowError, match="takes \\(epoch, item\\) pairs"):
        items_by_epoch([1, 2])
