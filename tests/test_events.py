"""Event streams: what the "timely" and "timely/progress" loggers report.

Ported behaviour: Timely's ``logging.rs`` events (Operates, Channels,
Schedule, Shutdown, Park, Messages; progress batches on their own stream)
and the ``log_register().insert(name, action)`` protocol.  The workers are
stepped by hand from the test's thread -- two workers over a shared
in-process allocator included -- so every event sequence is exact.

The progress stream is checked as a protocol: every batch a worker sends is
received by every worker exactly once and in order, and all batches
together retract exactly the initial capabilities (one per output per
worker).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.stepping import run_to_completion
from timelypy import InputHandle, OperatorBuilder
from timelypy.communication.allocator import process_allocators
from timelypy.events import (
    ChannelsEvent,
    MessagesEvent,
    OperatesEvent,
    ParkEvent,
    ProgressEvent,
    Registry,
    ScheduleEvent,
    ShutdownEvent,
)
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(60)


def workers_of(peers: int) -> list[Worker]:
    """``peers`` workers sharing one in-process allocator, stepped from this thread."""
    return [Worker(allocator) for allocator in process_allocators(peers)]


def subscribe(worker: Worker, *names: str) -> dict[str, list[tuple[float, Any]]]:
    """Subscribe to each stream in ``names``; return the lists the batches land in."""
    logs: dict[str, list[tuple[float, Any]]] = {}
    for name in names:
        logs[name] = []
        worker.log_register().insert(name, logs[name].extend)
    return logs


def events(log: list[tuple[float, Any]], kind: type) -> list[Any]:
    """The events of one type, in order."""
    return [event for _, event in log if type(event) is kind]


def flat_dataflow(scope: Any) -> Any:
    """``ToStream, ToStream -> Map -> Concatenate -> Custom -> Probe``."""
    a = scope.to_stream(range(3))
    b = scope.to_stream([7])
    merged = a.map(lambda x: x).concat(b)
    builder = OperatorBuilder("Custom", scope)
    inp = builder.new_input(merged)
    out, stream = builder.new_output()

    def constructor(caps: Any) -> Any:
        def logic(frontiers: Any) -> None:
            for cap, data in inp:
                out.session(cap).give_batch(list(data))

        return logic

    builder.build(constructor)
    return stream.probe()


# -- the "timely" stream ---------------------------------------------------------------


def test_operates_and_channels_events_describe_the_graph():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")
    worker.dataflow(flat_dataflow, name="Graph")
    run_to_completion([worker])
    log = logs["timely"]

    operates = events(log, OperatesEvent)
    assert [(e.addr, e.name) for e in operates] == [
        ((0,), "Graph"),
        ((0, 1), "ToStream"),
        ((0, 2), "ToStream"),
        ((0, 3), "Map"),
        ((0, 4), "Concatenate"),
        ((0, 5), "Custom"),
        ((0, 6), "Probe"),
    ]
    channels = events(log, ChannelsEvent)
    assert [(e.scope_addr, e.source, e.target) for e in channels] == [
        ((0,), (1, 0), (3, 0)),
        ((0,), (3, 0), (4, 0)),
        ((0,), (2, 0), (4, 1)),
        ((0,), (4, 0), (5, 0)),
        ((0,), (5, 0), (6, 0)),
    ]
    ids = [e.id for e in (*operates, *channels)]
    assert len(set(ids)) == len(ids)  # identifiers are worker-unique
    times = [t for t, _ in log]
    assert times == sorted(times) and all(isinstance(t, float) for t in times)


def test_nested_scopes_log_their_channels_in_their_own_address():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")

    def build(scope: Any) -> Any:
        start = scope.to_stream([1, 2])
        return scope.region(lambda inner: start.enter(inner).map(lambda x: x).leave()).probe()

    worker.dataflow(build)
    run_to_completion([worker])
    log = logs["timely"]
    assert ((0, 2, 1), "Map") in [(e.addr, e.name) for e in events(log, OperatesEvent)]
    channels = {(e.scope_addr, e.source, e.target) for e in events(log, ChannelsEvent)}
    assert channels == {
        ((0,), (1, 0), (2, 0)),  # into the region
        ((0, 2), (0, 0), (1, 0)),  # region input -> Map
        ((0, 2), (1, 0), (0, 0)),  # Map -> region output
        ((0,), (2, 0), (3, 0)),  # out of the region
    }


def test_a_nested_scope_has_an_operates_event():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")

    def build(scope: Any) -> Any:
        start = scope.to_stream([1])
        inner = scope.region(lambda r: start.enter(r).leave(), name="Inner")
        return inner.probe()

    worker.dataflow(build)
    run_to_completion([worker])
    assert ((0, 2), "Inner") in [(e.addr, e.name) for e in events(logs["timely"], OperatesEvent)]


def test_schedule_events_pair_up_and_shutdown_follows_each_operator():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")

    def build(scope: Any) -> Any:
        start = scope.to_stream(range(5))
        left = scope.region(lambda inner: start.enter(inner).map(lambda x: x + 1).leave())
        return left.filter(lambda x: x > 2).probe()

    worker.dataflow(build)
    run_to_completion([worker])
    log = [event for _, event in logs["timely"]]

    stack: list[tuple[int, ...]] = []
    scheduled: set[tuple[int, ...]] = set()
    for event in log:
        if type(event) is ScheduleEvent:
            if event.start:
                if stack:  # only a scope runs its children
                    assert event.addr[:-1] == stack[-1]
                stack.append(event.addr)
                scheduled.add(event.addr)
            else:
                assert stack and stack.pop() == event.addr
    assert stack == []
    assert scheduled == {(0, 1), (0, 2), (0, 2, 1), (0, 3), (0, 4)}

    shutdowns = [event.addr for event in log if type(event) is ShutdownEvent]
    assert sorted(shutdowns) == sorted([*scheduled, (0,)])
    assert shutdowns[-1] == (0,)
    for addr in scheduled:  # never scheduled after its shutdown
        gone = log.index(ShutdownEvent(addr))
        assert ScheduleEvent(addr, True) not in log[gone:]


def test_park_events_when_an_idle_worker_waits():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")
    handle = InputHandle()
    worker.dataflow(lambda scope: scope.input_from(handle).probe())
    for _ in range(5):
        worker.step()
    before = len(events(logs["timely"], ParkEvent))
    assert before == 0  # step() never parks
    worker.step_or_park(0.001)  # nothing to do: parks (for at most 1 ms) and wakes
    parks = events(logs["timely"], ParkEvent)
    assert parks == [ParkEvent(True), ParkEvent(False)]
    handle.close()
    run_to_completion([worker])


def test_exchanged_batches_are_logged_as_messages_events():
    """As in Timely, every batch an exchange pushes is logged, to itself included."""
    workers = workers_of(2)
    logs = [subscribe(worker, "timely") for worker in workers]
    for worker in workers:
        worker.dataflow(lambda scope: scope.to_stream(range(4)).exchange(lambda x: x).probe())
    run_to_completion(workers)
    sent = [e for log in logs for e in events(log["timely"], MessagesEvent) if e.is_send]
    assert sum(e.length for e in sent) == 8


# -- the "timely/progress" stream ----------------------------------------------------------


def progress_dataflow(handle: InputHandle) -> Any:
    """``Input -> Exchange -> Map -> Probe``: three operators with one output each."""
    return lambda scope: scope.input_from(handle).exchange(lambda x: x).map(str).probe()


@pytest.mark.parametrize("peers", [1, 2, 3])
def test_progress_batches_reach_every_worker_once_in_order_and_balance(peers):
    workers = workers_of(peers)
    logs = [subscribe(worker, "timely", "timely/progress") for worker in workers]
    handles = [InputHandle() for _ in workers]
    for worker, handle in zip(workers, handles, strict=True):
        worker.dataflow(progress_dataflow(handle))
    for epoch in range(3):
        for index, handle in enumerate(handles):
            handle.send_batch([epoch * 10 + index, epoch * 10 + index + 1])
            handle.advance_to(epoch + 1)
        for _ in range(5):
            for worker in workers:
                worker.step()
    for handle in handles:
        handle.close()
    run_to_completion(workers)

    progress = [events(log["timely/progress"], ProgressEvent) for log in logs]
    assert all(progress), "no progress was logged"
    assert not any(events(log["timely"], ProgressEvent) for log in logs)
    channels = {event.channel for per_worker in progress for event in per_worker}
    assert len(channels) == 1  # the dataflow's progress channel, the same on every worker

    sent: dict[int, list[ProgressEvent]] = {}
    for index, per_worker in enumerate(progress):
        sent[index] = [e for e in per_worker if e.is_send]
        assert all(e.source == index for e in sent[index])
        assert [e.seq_no for e in sent[index]] == list(range(len(sent[index])))
    for per_worker in progress:
        received = [e for e in per_worker if not e.is_send]
        for source in range(peers):
            from_source = [(e.seq_no, e.updates) for e in received if e.source == source]
            assert from_source == [(e.seq_no, e.updates) for e in sent[source]]

    # all batches together retract the initial capabilities: one per output per worker
    net: dict[Any, int] = {}
    for per_source in sent.values():
        for event in per_source:
            for location, diff in event.updates:
                net[location] = net.get(location, 0) + diff
    net = {location: diff for location, diff in net.items() if diff}
    outputs = {e.source for e in events(logs[0]["timely"], ChannelsEvent)}
    assert net == {(node, 1, port, 0): -peers for node, port in outputs}


# -- subscribing and unsubscribing -----------------------------------------------------------


def test_streams_nobody_subscribed_to_record_nothing():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely/progress")
    assert worker.log_register().get("timely") is None
    handle = InputHandle()
    worker.dataflow(progress_dataflow(handle))
    handle.send(1)
    handle.close()
    run_to_completion([worker])
    kinds = {type(event) for _, event in logs["timely/progress"]}
    assert kinds == {ProgressEvent}

    (other,) = workers_of(1)
    only_timely = subscribe(other, "timely")
    assert other.log_register().get("timely/progress") is None
    other.dataflow(lambda scope: scope.to_stream([1]).probe())
    run_to_completion([other])
    assert only_timely["timely"]
    assert not events(only_timely["timely"], ProgressEvent)


def test_a_late_subscriber_sees_nothing_of_dataflows_built_before():
    (worker,) = workers_of(1)
    handle = InputHandle()
    worker.dataflow(progress_dataflow(handle))
    logs = subscribe(worker, "timely", "timely/progress")
    handle.send(1)
    handle.close()
    run_to_completion([worker])
    kinds = {type(event) for _, event in logs["timely"]}
    assert not kinds & {OperatesEvent, ChannelsEvent, ScheduleEvent}
    assert logs["timely/progress"] == []


def test_remove_flushes_and_unsubscribes():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")
    registry = worker.log_register()
    worker.dataflow(lambda scope: scope.to_stream([1]).probe())
    assert logs["timely"] == []  # buffered until the end of a step ...
    logger = registry.remove("timely")
    assert logger is not None
    assert len(events(logs["timely"], OperatesEvent)) == 3  # ... or until removed
    assert registry.get("timely") is None
    assert registry.remove("timely") is None
    count = len(logs["timely"])
    worker.dataflow(lambda scope: scope.to_stream([2]).map(str).probe())
    run_to_completion([worker])
    assert len(logs["timely"]) == count  # nothing about the new dataflow


def test_remove_stops_events_of_dataflows_built_before():
    (worker,) = workers_of(1)
    logs = subscribe(worker, "timely")
    handle = InputHandle()
    probe = worker.dataflow(lambda scope: scope.input_from(handle).map(str).probe())
    worker.step()
    worker.log_register().remove("timely")
    count = len(logs["timely"])
    for epoch in range(300):  # about 1200 schedule events
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        for _ in range(20):
            if not probe.less_than(epoch + 1):
                break
            worker.step()
    handle.close()
    run_to_completion([worker])
    assert len(logs["timely"]) == count


def test_insert_replaces_and_flushes_the_previous_subscriber():
    registry = Registry()
    first: list[Any] = []
    second: list[Any] = []
    registry.insert("s", first.extend).log("a")
    assert first == []  # buffered
    registry.insert("s", second.extend).log("b")
    assert [event for _, event in first] == ["a"]
    registry.flush()
    assert [event for _, event in second] == ["b"]
    assert [event for _, event in first] == ["a"]


def test_a_logger_delivers_full_batches_without_waiting_for_a_flush():
    delivered: list[list[Any]] = []
    logger = Registry(start=0.0).insert("s", delivered.append)
    for event in range(1024):
        logger.log(event)
    assert len(delivered) == 1 and len(delivered[0]) == 1024
    assert [event for _, event in delivered[0]] == list(range(1024))


def test_logging_on_one_worker_only_does_not_change_the_computation():
    workers = workers_of(2)
    subscribe(workers[0], "timely")  # e.g. only worker 0 logs
    seen: list[list[int]] = [[], []]
    for worker in workers:
        worker.dataflow(
            lambda scope, index=worker.index: (
                scope.to_stream(range(4))
                .map(lambda x: x)
                .exchange(lambda x: x)
                .inspect(seen[index].append)
                .probe()
            )
        )
    for _ in range(300):
        if not any([worker.step() for worker in workers]):
            break
    assert sorted(seen[0]) == [0, 0, 2, 2]
    assert sorted(seen[1]) == [1, 1, 3, 3]
    assert not any(worker.has_dataflows() for worker in workers)
