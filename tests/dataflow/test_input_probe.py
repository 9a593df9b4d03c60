"""Input handles and probes: the program's two windows onto a running dataflow.

Ported behaviour: Timely's ``core/input.rs`` handle (send, send_batch,
advance_to that never rewinds, flush, close/drop) and ``core/probe.rs``
(``less_than``, ``less_equal``, ``done``, ``with_frontier``; one handle may
watch several streams and then reports the lower envelope of their
frontiers).  Workers are stepped by hand from the test's thread -- two
workers over a shared in-process allocator included -- so every sequence is
exact and no test waits on a clock.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import timelypy
from tests.dataflow.test_properties import build_pipeline
from tests.stepping import run_to_completion, settle
from tests.strategies import pipeline_ops
from timelypy import (
    Config,
    InputError,
    InputHandle,
    Pipeline,
    ProbeHandle,
    Product,
    ProductType,
    ProgressUpdates,
    TimestampError,
)
from timelypy.communication.allocator import process_allocators
from timelypy.dataflow.input import SEND_BUFFER
from timelypy.dataflow.operator import LeafOperator
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(60)


def batches_of(stream: Any, into: list[tuple[Any, list[Any]]]) -> Any:
    """Record every (time, list) message the stream carries, keeping the list objects."""

    def constructor(cap: Any, info: Any) -> Any:
        def logic(inp: Any, out: Any) -> None:
            for icap, data in inp:
                into.append((icap.time, data))

        return logic

    return stream.unary(Pipeline(), "Batches", constructor)


def one_input(timestamp_type: Any = int) -> tuple[Worker, InputHandle, ProbeHandle, list[Any]]:
    """A worker with ``input -> record batches -> probe``."""
    worker = Worker(process_allocators(1)[0])
    handle = InputHandle()
    seen: list[tuple[Any, list[Any]]] = []
    probe = worker.dataflow(
        lambda scope: batches_of(scope.input_from(handle), seen).probe(),
        timestamp_type=timestamp_type,
    )
    return worker, handle, probe, seen


# -- advancing --------------------------------------------------------------------------


def test_advance_to_backwards_raises_and_changes_nothing():
    worker, handle, probe, seen = one_input()
    handle.advance_to(5)
    handle.advance_to(5)  # the same time: nothing to do
    with pytest.raises(InputError, match="from 5 back to 3"):
        handle.advance_to(3)
    assert handle.time == 5
    handle.send("x")
    handle.advance_to(6)
    settle([worker])
    assert seen == [(5, ["x"])]
    assert probe.frontier() == (6,)
    handle.close()
    run_to_completion([worker])
    assert probe.done()


@pytest.mark.parametrize("bad", ["3", 3.0, None, Product(3, 0), -1, 2**64])
def test_advance_to_a_time_of_the_wrong_type_or_range_raises(bad):
    worker, handle, probe, seen = one_input()
    with pytest.raises(TimestampError):
        handle.advance_to(bad)
    assert handle.time == 0
    handle.send(1)
    handle.advance_to(1)
    settle([worker])
    assert seen == [(0, [1])]
    assert probe.frontier() == (1,)
    handle.close()
    run_to_completion([worker])


def test_product_input_needs_product_times_beyond_the_current_one():
    worker, handle, probe, seen = one_input(ProductType(int, int))
    assert handle.time == Product(0, 0)
    handle.advance_to(Product(1, 2))
    with pytest.raises(TimestampError):
        handle.advance_to(3)
    with pytest.raises(InputError):
        handle.advance_to(Product(2, 1))  # incomparable: not beyond (1, 2)
    handle.send("p")
    handle.advance_to(Product(2, 2))
    settle([worker])
    assert seen == [(Product(1, 2), ["p"])]
    assert probe.frontier() == (Product(2, 2),)
    handle.close()
    run_to_completion([worker])


# -- closing ------------------------------------------------------------------------------


def test_use_after_close_raises_and_close_is_idempotent():
    worker, handle, probe, seen = one_input()
    handle.send("last")
    handle.close()  # flushes
    assert handle.closed
    handle.close()
    for action in (
        lambda: handle.send(1),
        lambda: handle.send_batch([1]),
        lambda: handle.advance_to(4),
    ):
        with pytest.raises(InputError, match="closed"):
            action()
    run_to_completion([worker])
    assert seen == [(0, ["last"])]
    assert probe.done()
    assert "closed" in repr(handle)
    with pytest.raises(InputError, match="closed"):
        Worker(process_allocators(1)[0]).dataflow(lambda scope: scope.input_from(handle))


def test_an_unconnected_handle_refuses_to_send_or_advance():
    handle = InputHandle()
    with pytest.raises(InputError, match="not connected"):
        _ = handle.time
    with pytest.raises(InputError, match="not connected"):
        handle.send(1)
    with pytest.raises(InputError, match="not connected"):
        handle.advance_to(1)
    assert "time=None" in repr(handle)


def test_a_handle_cannot_feed_scopes_of_another_timestamp_type():
    handle = InputHandle()
    worker = Worker(process_allocators(1)[0])
    worker.dataflow(lambda scope: scope.input_from(handle).probe())
    with pytest.raises(InputError, match="timestamps"):
        worker.dataflow(
            lambda scope: scope.input_from(handle), timestamp_type=ProductType(int, int)
        )


# -- sending --------------------------------------------------------------------------------


def test_send_batch_hands_the_list_over_after_the_buffered_records():
    worker, handle, probe, seen = one_input()
    assert probe.frontier() == (0,)
    records = [2, 3]
    handle.send(1)
    handle.send_batch(records)
    handle.send_batch([])  # nothing to send
    settle([worker])
    assert seen == [(0, [1]), (0, [2, 3])]
    assert seen[1][1] is records  # moved by reference, not copied
    handle.close()
    run_to_completion([worker])


def test_flush_pushes_buffered_records_without_advancing():
    worker, handle, probe, seen = one_input()
    handle.send("a")
    handle.send("b")
    handle.flush()
    handle.flush()  # nothing left
    settle([worker])
    assert seen == [(0, ["a", "b"])]
    assert probe.frontier() == (0,)  # the time did not move
    for record in range(SEND_BUFFER):
        handle.send(record)  # a full buffer is pushed by itself
    settle([worker])
    assert sum(len(batch) for _, batch in seen) == 2 + SEND_BUFFER
    handle.close()
    run_to_completion([worker])


def test_one_handle_feeds_two_dataflows():
    worker = Worker(process_allocators(1)[0])
    handle = InputHandle()
    first: list[Any] = []
    second: list[Any] = []
    probe1 = worker.dataflow(lambda scope: batches_of(scope.input_from(handle), first).probe())
    handle.send("early")
    handle.advance_to(3)
    # a dataflow connected later starts at the handle's current time
    probe2 = worker.dataflow(lambda scope: batches_of(scope.input_from(handle), second).probe())
    settle([worker])
    assert probe1.frontier() == (3,) and probe2.frontier() == (3,)
    records = ["both"]
    handle.send_batch(records)
    handle.advance_to(4)
    settle([worker])
    assert first == [(0, ["early"]), (3, ["both"])]
    assert second == [(3, ["both"])]
    assert first[1][1] is not second[0][1]  # each dataflow gets its own list
    assert probe1.frontier() == (4,) and probe2.frontier() == (4,)
    # records buffered until advance_to reach both, each its own list, and each
    # dataflow's frontier waits for its batch (advance_to reports each operator once)
    handle.send("buffered")
    handle.advance_to(5)
    assert probe1.frontier() == (4,) and probe2.frontier() == (4,)  # moved in steps only
    settle([worker])
    assert first[2] == second[1] == (4, ["buffered"]) and first[2][1] is not second[1][1]
    assert probe1.frontier() == (5,) and probe2.frontier() == (5,)
    handle.close()
    run_to_completion([worker])
    assert probe1.done() and probe2.done()


def test_new_input_returns_a_handle_and_its_stream():
    worker = Worker(process_allocators(1)[0])
    seen: list[Any] = []
    handle, probe = worker.dataflow(
        lambda scope: (lambda pair: (pair[0], batches_of(pair[1], seen).probe()))(scope.new_input())
    )
    handle.send(9)
    handle.close()
    run_to_completion([worker])
    assert seen == [(0, [9])] and probe.done()


@pytest.mark.parametrize("workers", [1, 2])
def test_handles_left_open_are_closed_when_the_worker_function_returns(workers):
    def program(worker: Worker) -> Any:
        handle = InputHandle()
        captured = worker.dataflow(lambda scope: scope.input_from(handle).capture())
        handle.send(worker.index)
        handle.advance_to(2)
        handle.send(10 + worker.index)
        return captured  # the handle is still open

    results = timelypy.execute(Config.process(workers), program)
    for index, captured in enumerate(results):
        assert captured.extract() == [(0, [index]), (2, [10 + index])]
        # the captured stream's frontier ended empty: the input was closed
        net: dict[Any, int] = {0: 1}
        for event in captured:
            if isinstance(event, ProgressUpdates):
                for time, diff in event.updates:
                    net[time] = net.get(time, 0) + diff
        assert all(diff == 0 for diff in net.values())


# -- two workers: a time completes when every worker's handle passed it -----------------------


def test_a_time_completes_only_when_every_workers_handle_passed_it():
    workers = [Worker(allocator) for allocator in process_allocators(2)]
    handles = [InputHandle(), InputHandle()]
    probes = [
        worker.dataflow(lambda scope, h=handle: scope.input_from(h).exchange(lambda x: x).probe())
        for worker, handle in zip(workers, handles, strict=True)
    ]
    handles[0].advance_to(5)
    settle(workers)
    assert [p.frontier() for p in probes] == [(0,), (0,)]
    handles[1].advance_to(3)
    settle(workers)
    assert [p.frontier() for p in probes] == [(3,), (3,)]
    handles[1].close()
    settle(workers)
    assert [p.frontier() for p in probes] == [(5,), (5,)]
    handles[0].close()
    run_to_completion(workers)
    assert all(p.done() for p in probes)


# -- probes ---------------------------------------------------------------------------------


def test_probe_reports_the_frontier_over_a_run():
    worker, handle, probe, seen = one_input()
    assert probe.frontier() == (0,)
    for epoch in range(3):
        assert probe.less_equal(epoch) and not probe.less_than(epoch)
        assert probe.less_than(epoch + 1)
        assert probe.with_frontier(list) == [epoch]
        assert not probe.done()
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        settle([worker])
        assert not probe.less_equal(epoch)
        assert not probe.less_than(epoch + 1) and probe.less_equal(epoch + 1)
        assert probe.frontier() == (epoch + 1,)
    assert repr(probe) == "ProbeHandle([3])"
    handle.close()
    run_to_completion([worker])
    assert probe.done()
    assert probe.frontier() == ()
    assert not probe.less_equal(10**9) and not probe.less_than(10**9)
    assert probe.with_frontier(len) == 0
    assert [t for t, _ in seen] == [0, 1, 2]


@pytest.mark.parametrize(
    ("timestamp_type", "steps"),
    [
        (int, [(5, 3, {3}), (5, 7, {5}), (None, 7, {7}), (None, None, set())]),
        (
            ProductType(int, int),
            [
                (Product(1, 0), Product(0, 1), {Product(1, 0), Product(0, 1)}),
                (Product(1, 0), Product(2, 1), {Product(1, 0)}),
                (Product(1, 3), Product(2, 1), {Product(1, 3), Product(2, 1)}),
                (None, Product(2, 1), {Product(2, 1)}),
                (None, None, set()),
            ],
        ),
    ],
)
def test_a_probe_watching_two_streams_has_the_lower_envelope(timestamp_type, steps):
    worker = Worker(process_allocators(1)[0])
    first, second = InputHandle(), InputHandle()
    probe = ProbeHandle()

    def build(scope: Any) -> None:
        scope.input_from(first).probe_with(probe)
        scope.input_from(second).map(lambda x: x).probe_with(probe)

    worker.dataflow(build, timestamp_type=timestamp_type)
    for one, two, expected in steps:
        for handle, time in ((first, one), (second, two)):
            if time is None:
                handle.close()
            else:
                handle.advance_to(time)
        settle([worker])
        assert set(probe.frontier()) == expected
    run_to_completion([worker])
    assert probe.done()


def test_an_unconnected_probe_is_done():
    probe = ProbeHandle()
    assert probe.done()
    assert probe.frontier() == ()
    assert not probe.less_than(0) and not probe.less_equal(0)
    assert probe.with_frontier(tuple) == ()
    assert repr(probe) == "ProbeHandle([])"


@pytest.mark.parametrize("mode", ["eager", "demand"])
@pytest.mark.parametrize("peers", [1, 2])
def test_a_probe_inside_a_loop_follows_the_outer_frontier_without_data(mode, peers):
    """Regression: a loop whose operators ignore frontiers still tells its probe.

    The probe updates its handle as its scope propagates progress; the scope
    must therefore run whenever its input frontier moves, even with no record
    in flight (Timely: a probe is interested in every frontier change).
    """
    config = Config(workers=peers, progress_mode=mode)
    workers = [Worker(allocator, config) for allocator in process_allocators(peers)]
    handles = [InputHandle() for _ in workers]
    inner_probes = [ProbeHandle() for _ in workers]

    for worker, handle, inner in zip(workers, handles, inner_probes, strict=True):

        def build(scope: Any, handle: InputHandle = handle, inner: ProbeHandle = inner) -> Any:
            stream = scope.input_from(handle)
            return scope.iterative(lambda s: stream.enter(s).probe_with(inner).leave()).probe()

        worker.dataflow(build)
    settle(workers)
    assert [p.frontier() for p in inner_probes] == [(Product(0, 0),)] * peers
    for handle in handles:
        handle.advance_to(5)
    settle(workers)
    assert [p.frontier() for p in inner_probes] == [(Product(5, 0),)] * peers
    for handle in handles:
        handle.close()
    run_to_completion(workers)
    assert all(p.done() for p in inner_probes)


@settings(max_examples=40, deadline=None)
@given(
    ops=pipeline_ops(),
    workers=st.integers(1, 3),
    order=st.permutations(range(3)),
    epochs=st.integers(0, 3),
    mode=st.sampled_from(["eager", "demand"]),
)
@example(ops=[("loop", 1, False, [])], workers=3, order=[0, 1, 2], epochs=0, mode="demand")
def test_operators_and_probe_handles_read_the_frontiers_their_scope_keeps(
    ops: list[tuple], workers: int, order: list[int], epochs: int, mode: str
) -> None:
    """After every step, each operator's input frontier and each probe handle's is the live one.

    Workers built and stepped by hand in a chosen order, each one building
    with the others' progress already waiting, join fused frontiers at
    different steps, including a group whose head joins another group later:
    every member's operator, probes included, must then read the new
    group's frontier, or a handle would never see its frontier empty.
    """
    config = Config(workers=workers, progress_mode=mode)
    members = [Worker(allocator, config) for allocator in process_allocators(workers)]
    order = [i for i in order if i < workers]
    runs: list[Any] = [None] * workers

    def check() -> None:
        for subgraph, _, probe in filter(None, runs):
            tracker = subgraph.tracker
            for index, child in enumerate(subgraph.children):
                if not isinstance(child, LeafOperator):
                    continue
                live = [port.implications for port in tracker.node_state(index).targets]
                read = [view._antichain for view in child._frontiers]
                assert all(a is b for a, b in zip(read, live, strict=True)), child.name
                if child.name == "Probe":
                    assert probe._sources[0] is live[0]

    # Build in the chosen order, stepping the workers built so far after each:
    # a worker then builds with others' progress batches already waiting.
    for i in order:
        scopes: list[Any] = []
        handle: InputHandle[int] = InputHandle()
        probe = ProbeHandle()

        def build(
            scope: timelypy.Scope,
            handle: InputHandle[int] = handle,
            probe: ProbeHandle = probe,
            scopes: list[Any] = scopes,
        ) -> None:
            scopes.append(scope.subgraph)
            out = build_pipeline(scope.input_from(handle), ops, None)
            out.inspect_time(lambda t, x: None).probe_with(probe)

        members[i].dataflow(build)
        runs[i] = (scopes[0], handle, probe)
        handle.send(i)
        handle.advance_to(1)
        for j in order:
            if runs[j] is not None:
                members[j].step()
                check()
    for epoch in range(1, epochs + 1):
        for i in order:
            runs[i][1].send(epoch)
            runs[i][1].advance_to(epoch + 1)
            members[i].step()
            check()
    for _, handle, _ in runs:
        handle.close()
    for _ in range(2000):
        busy = False
        for i in order:
            busy |= members[i].step()
            check()
        if not busy:
            break
    assert all(probe.done() for _, _, probe in runs)
