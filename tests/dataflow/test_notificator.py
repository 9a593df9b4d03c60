"""Notificators: FrontierNotificator, Notificator, unary/binary_notify, EagerNotificator.

Ported behaviour: ``timely/src/dataflow/operators/generic/notificator.rs``
(requests merge into counts, a time is delivered once no frontier element is
``<=`` it, deliveries follow the time order, ``notify_at_frontiered`` makes a
complete time available at once) including its test
``notificator_delivers_notifications_in_topo_order``; and the seed glossary's
*eager notificator* (eager logic as items arrive in the frontier epoch, end
logic as each epoch closes, in epoch order; later epochs wait).

Capabilities handed to a notificator are owned by it; the tests read the
held capabilities back through a probe and run every dataflow to completion,
so a request the notificator forgot to release (or released twice) fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.stepping import run_to_completion, settle
from timelypy import (
    Capability,
    CapabilityError,
    EagerNotificator,
    Exchange,
    FrontierNotificator,
    InputHandle,
    Notificator,
    Pipeline,
    ProbeHandle,
    Product,
    ProductType,
    source,
)
from timelypy.communication.allocator import process_allocators
from timelypy.progress.frontier import MutableAntichain
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(60)

P = Product


class HeldSource:
    """One worker, one source whose constructor capability the test holds, and a probe on it."""

    def __init__(self, timestamp_type: Any = int) -> None:
        self.worker = Worker(process_allocators(1)[0])
        box: list[Capability] = []

        def build(scope: Any) -> ProbeHandle:
            def constructor(cap: Capability, info: Any) -> Callable[[Any], None]:
                box.append(cap.retain())
                return lambda output: None

            return source(scope, "Held", constructor).probe()

        self.probe = self.worker.dataflow(build, timestamp_type=timestamp_type)
        self.root = box[0]

    def held(self) -> set[Any]:
        """The times some capability of the source is held at."""
        settle([self.worker])
        return set(self.probe.frontier())

    def finish(self) -> None:
        """Drop the root capability; the dataflow must then complete."""
        self.root.drop()
        run_to_completion([self.worker])


# -- FrontierNotificator ------------------------------------------------------------------


def test_notificator_delivers_notifications_in_topo_order():
    """Port of Timely's test of the same name (Product times)."""
    rig = HeldSource(ProductType(int, int))
    frontier = MutableAntichain.from_elem(P(0, 0))
    times = [P(3, 5), P(5, 4), P(1, 2), P(1, 1), P(1, 1), P(5, 4), P(6, 0), P(6, 2), P(5, 8)]
    notificator = FrontierNotificator([rig.root.delayed(t) for t in times])
    delivered: list[tuple[Any, int]] = []

    def take(n: Notificator) -> Any:
        found = next(iter(n), None)
        if found is None:
            return None
        cap, count = found
        delivered.append((cap.time, count))
        cap.drop()  # outside an activation a delivered capability is the caller's
        return cap.time

    # the frontier is (0, 0): nothing is deliverable
    assert take(notificator.monotonic([frontier])) is None

    frontier.update_iter([(P(0, 0), -1), (P(5, 7), 1), (P(6, 1), 1)])
    session = notificator.monotonic([frontier])
    assert [take(session) for _ in range(6)] == [P(1, 1), P(1, 2), P(3, 5), P(5, 4), P(6, 0), None]
    assert delivered[0] == (P(1, 1), 2) and delivered[3] == (P(5, 4), 2)

    frontier.update_iter([(P(5, 7), -1), (P(6, 1), -1), (P(6, 10), 1)])
    session = notificator.monotonic([frontier])
    # (5, 8) comes before (6, 2): deliveries follow the total order
    assert take(session) == P(5, 8)
    session.notify_at(rig.root.delayed(P(5, 9)))  # a new request in the middle of a session
    assert [take(session) for _ in range(3)] == [P(5, 9), P(6, 2), None]
    assert len(notificator) == 0
    # every request was delivered or merged and released: only the root is left
    assert rig.held() == {P(0, 0)}
    rig.finish()


def test_make_available_merges_pending_requests_into_counts():
    rig = HeldSource()
    frontier = MutableAntichain.from_elem(0)
    notificator = FrontierNotificator()
    duplicates = [rig.root.delayed(3), rig.root.delayed(3)]
    for cap in (*duplicates, rig.root.delayed(5), rig.root.delayed(3)):
        notificator.notify_at(cap)
    assert all("held" in repr(cap) for cap in duplicates)  # the notificator holds them
    notificator.make_available([frontier])
    assert sorted((cap.time, count) for cap, count in notificator.pending()) == [(3, 3), (5, 1)]
    assert notificator.pending_times() == [3, 5]
    assert len(notificator) == 2
    assert notificator.next([frontier]) is None
    assert rig.held() == {0}

    rig.root.downgrade(4)
    frontier.update_iter([(0, -1), (4, 1)])
    assert rig.held() == {3}  # the merged request at 3 is the earliest held capability
    found = notificator.next_count([frontier])
    assert found is not None
    cap, count = found
    assert (cap.time, count) == (3, 3)
    assert [(c.time, n) for c, n in notificator.pending()] == [(5, 1)]
    assert notificator.next_count([frontier]) is None
    cap.drop()
    assert rig.held() == {4}

    frontier.update_iter([(4, -1)])
    last = notificator.next([frontier])
    assert last is not None and last.time == 5
    last.drop()
    assert len(notificator) == 0
    rig.finish()


def test_notify_at_frontiered_is_available_at_once_when_complete():
    rig = HeldSource()
    frontier = MutableAntichain.from_elem(4)
    notificator = FrontierNotificator()
    notificator.notify_at_frontiered(rig.root.delayed(6), [frontier])
    notificator.notify_at_frontiered(rig.root.delayed(2), [frontier])
    notificator.notify_at_frontiered(rig.root.delayed(2), [frontier])
    notificator.notify_at_frontiered(rig.root.delayed(4), [frontier])
    assert sorted(c.time for c, _ in notificator.pending()) == [4, 6]
    assert notificator.pending_times() == [2, 4, 6]
    found = notificator.next_count([frontier])
    assert found is not None
    cap, count = found
    assert (cap.time, count) == (2, 2)  # the two available requests merged
    cap.drop()
    assert notificator.next_count([frontier]) is None
    frontier.update_iter([(4, -1), (5, 1)])
    four = notificator.next([frontier])
    assert four is not None and four.time == 4
    four.drop()
    assert notificator.next([frontier]) is None
    frontier.update_iter([(5, -1)])
    six = notificator.next([frontier])
    assert six is not None and six.time == 6
    six.drop()
    rig.finish()


@pytest.mark.parametrize(
    ("frontiered", "expected"),
    [(False, [1, 3, 2]), (True, [1, 2, 3])],
)
def test_for_each_delivers_in_time_order_and_takes_new_requests(frontiered, expected):
    """A request made during ``for_each`` at an earlier complete time.

    As in Timely, a plain ``notify_at`` waits in ``pending`` until the available
    times run out; ``notify_at_frontiered`` joins the available ones at once.
    """
    rig = HeldSource()
    frontier = MutableAntichain.from_elem(10)
    notificator = FrontierNotificator([rig.root.delayed(3), rig.root.delayed(1)])
    order: list[Any] = []

    def logic(cap: Capability, inner: FrontierNotificator) -> None:
        order.append(cap.time)
        if cap.time == 1:
            extra = cap.delayed(2)
            if frontiered:
                inner.notify_at_frontiered(extra, [frontier])
            else:
                inner.notify_at(extra)
        cap.drop()

    notificator.for_each([frontier], logic)
    assert order == expected
    assert len(notificator) == 0
    rig.finish()


def test_notificator_session_api():
    rig = HeldSource()
    first = MutableAntichain.from_elem(2)
    second = MutableAntichain.from_elem(4)
    inner = FrontierNotificator([rig.root.delayed(1), rig.root.delayed(5), rig.root.delayed(1)])
    session = Notificator([first, second], inner)
    assert session.frontier(0) is first and session.frontier(1) is second
    assert "Notificator" in repr(session)
    seen: list[tuple[Any, int]] = []

    def logic(cap: Capability, count: int, n: Notificator) -> None:
        seen.append((cap.time, count))
        if len(seen) == 1:
            n.notify_at(cap.delayed(1))  # complete: delivered in this very session
        cap.drop()

    session.for_each(logic)
    assert seen == [(1, 2), (1, 1)]
    assert inner.pending_times() == [5]  # 5 waits for both frontiers (2 <= 5, 4 <= 5)
    first.update_iter([(2, -1), (8, 1)])
    assert list(Notificator([first, second], inner)) == []  # the second still has 4 <= 5
    second.update_iter([(4, -1)])
    delivered = list(Notificator([first, second], inner))
    assert [(c.time, n) for c, n in delivered] == [(5, 1)]
    for cap, _ in delivered:
        cap.drop()
    rig.finish()


# -- unary_notify / binary_notify in dataflows ---------------------------------------------


def test_unary_notify_delivers_each_complete_time_once_in_order():
    worker = Worker(process_allocators(1)[0])
    handle = InputHandle()
    stash: dict[int, list[Any]] = {}
    deliveries: list[tuple[int, int, tuple[Any, ...]]] = []

    def logic(inp: Any, out: Any, notificator: Notificator) -> None:
        for icap, data in inp:
            stash.setdefault(icap.time, []).extend(data)
            notificator.notify_at(icap.retain())
        for cap, count in notificator:
            assert not cap.is_retained  # borrowed by this activation
            deliveries.append((cap.time, count, notificator.frontier(0).frontier()))
            out.session(cap).give((cap.time, count, sorted(stash.pop(cap.time, []))))

    def build(scope: Any) -> tuple[Any, ProbeHandle]:
        stream = scope.input_from(handle).unary_notify(Pipeline(), "Notify", [2, 5], logic)
        return stream.capture(), stream.probe()

    captured, probe = worker.dataflow(build)
    handle.send("a")
    handle.advance_to(1)
    settle([worker])
    assert [d[0] for d in deliveries] == [0]
    handle.advance_to(2)
    handle.send_batch(["b"])
    handle.send_batch(["c"])  # a second message at 2: a second request
    settle([worker])
    assert [d[0] for d in deliveries] == [0]  # 2 is not complete yet
    assert probe.frontier() == (2,)
    handle.advance_to(3)
    settle([worker])
    assert [d[0] for d in deliveries] == [0, 2]
    assert probe.frontier() == (3,)
    handle.close()
    run_to_completion([worker])

    assert [(t, n) for t, n, _ in deliveries] == [(0, 1), (2, 3), (5, 1)]
    # delivered only once no frontier element was <= the time
    assert all(all(f > t for f in front) for t, _, front in deliveries)
    assert captured.extract() == [
        (0, [(0, 1, ["a"])]),
        (2, [(2, 3, ["b", "c"])]),
        (5, [(5, 1, [])]),
    ]


def test_binary_notify_waits_for_both_frontiers():
    worker = Worker(process_allocators(1)[0])
    left, right = InputHandle(), InputHandle()
    deliveries: list[tuple[int, tuple[Any, ...], tuple[Any, ...]]] = []

    def logic(in1: Any, in2: Any, out: Any, notificator: Notificator) -> None:
        for inp in (in1, in2):
            for icap, data in inp:
                out.session(icap).give_batch(list(data))
                notificator.notify_at(icap.retain())
        for cap, _ in notificator:
            deliveries.append(
                (cap.time, notificator.frontier(0).frontier(), notificator.frontier(1).frontier())
            )

    def build(scope: Any) -> ProbeHandle:
        a, b = scope.input_from(left), scope.input_from(right)
        return a.binary_notify(b, Pipeline(), Pipeline(), "Both", [3], logic).probe()

    probe = worker.dataflow(build)
    left.send("x")
    left.advance_to(10)
    settle([worker])
    assert deliveries == []
    right.advance_to(3)
    settle([worker])
    assert deliveries == [(0, (10,), (3,))]
    right.advance_to(4)
    settle([worker])
    assert deliveries == [(0, (10,), (3,)), (3, (10,), (4,))]
    assert probe.frontier() == (4,)
    left.close()
    right.close()
    run_to_completion([worker])
    assert probe.done()


# -- EagerNotificator ---------------------------------------------------------------------

Event = tuple[Any, ...]


def eager_operator(stream: Any, log: list[Event], name: str = "Eager") -> Any:
    """An operator that queues every message with an EagerNotificator and logs its calls.

    Eager logic sends each item at its epoch; close logic sends an end marker.
    """

    def constructor(cap: Capability, info: Any) -> Callable[[Any, Any], None]:
        eager = EagerNotificator()

        def logic(inp: Any, out: Any) -> None:
            def on_items(epoch_cap: Capability, items: list[Any]) -> None:
                log.append(("eager", epoch_cap.time, list(items)))
                out.session(epoch_cap).give_batch(list(items))

            def on_close(epoch_cap: Capability) -> None:
                log.append(("close", epoch_cap.time))
                out.session(epoch_cap).give(f"end{epoch_cap.time}")

            for icap, data in inp:
                eager.notify_at(icap.retain(), data)
            eager.for_each([inp.frontier], on_items, on_close)

        return logic

    return stream.unary_frontier(Pipeline(), name, constructor)


def test_eager_notificator_runs_items_eagerly_and_closes_epochs_in_order():
    worker = Worker(process_allocators(1)[0])
    early, late = InputHandle(), InputHandle()
    log: list[Event] = []

    def build(scope: Any) -> Any:
        merged = scope.input_from(early).concat(scope.input_from(late))
        out = eager_operator(merged, log)
        return out.capture(), out.probe()

    captured, probe = worker.dataflow(build)

    def now(*sends: tuple[InputHandle, Any]) -> list[Event]:
        before = len(log)
        for handle, item in sends:
            handle.send(item)
            handle.flush()
        settle([worker])
        return log[before:]

    assert now((early, "a0")) == [("eager", 0, ["a0"])]
    late.advance_to(2)
    assert now((late, "b2")) == []  # epoch 2 arrived early: it waits
    assert now((early, "a0+")) == [("eager", 0, ["a0+"])]
    early.advance_to(1)
    assert now() == [("close", 0)]
    assert now((early, "a1")) == [("eager", 1, ["a1"])]
    assert probe.frontier() == (1,)
    early.advance_to(3)
    # epoch 1 closes; epoch 2 is now the frontier epoch and its waiting item runs
    assert now() == [("close", 1), ("eager", 2, ["b2"])]
    assert now((late, "b2+")) == [("eager", 2, ["b2+"])]
    late.advance_to(5)
    assert now() == [("close", 2)]
    assert probe.frontier() == (3,)
    early.close()
    late.close()
    run_to_completion([worker])
    assert captured.extract() == [
        (0, ["a0", "a0+", "end0"]),
        (1, ["a1", "end1"]),
        (2, ["b2", "b2+", "end2"]),
    ]


def test_eager_notificator_waits_for_every_earlier_epoch():
    """Items of epochs 1 and 2 queued while epoch 0 is open run only as epochs close."""
    worker = Worker(process_allocators(1)[0])
    slow, fast = InputHandle(), InputHandle()
    log: list[Event] = []

    def build(scope: Any) -> None:
        eager_operator(scope.input_from(slow).concat(scope.input_from(fast)), log)

    worker.dataflow(build)
    fast.advance_to(1)
    fast.send("f1")
    fast.advance_to(2)
    fast.send("f2")
    fast.flush()
    settle([worker])
    assert log == []
    slow.advance_to(2)  # epochs 0 and 1 close (0 was never queued), 2 is the frontier
    settle([worker])
    assert log == [("eager", 1, ["f1"]), ("close", 1), ("eager", 2, ["f2"])]
    slow.close()
    fast.close()
    run_to_completion([worker])
    assert log[-1] == ("close", 2)


def test_eager_notificator_across_two_workers_with_an_exchange():
    """Worker 0 sends worker 1 an item of epoch 1 while worker 1 is still in epoch 0.

    Both workers are stepped by hand from this thread, so the order is exact.
    """
    allocators = process_allocators(2)
    workers = [Worker(allocator) for allocator in allocators]
    handles = [InputHandle(), InputHandle()]
    logs: list[list[Event]] = [[], []]

    for worker, handle, log in zip(workers, handles, logs, strict=True):

        def build(scope: Any, handle: InputHandle = handle, log: list[Event] = log) -> Any:
            routed = scope.input_from(handle).unary(
                Exchange(lambda item: item[0]), "Route", _pass_through
            )
            return eager_operator(routed, log).probe()

        worker.dataflow(build)

    h0, h1 = handles
    h0.advance_to(1)
    h0.send((1, "from0@1"))
    h0.flush()
    settle(workers)
    assert logs == [[], []]  # worker 1 holds the item: epoch 0 is still open
    h1.send((1, "from1@0"))
    h1.send((0, "from1@0"))
    h1.flush()
    settle(workers)
    assert logs[0] == [("eager", 0, [(0, "from1@0")])]
    assert logs[1] == [("eager", 0, [(1, "from1@0")])]
    h1.advance_to(1)
    settle(workers)
    assert logs[0] == [("eager", 0, [(0, "from1@0")]), ("close", 0)]
    assert logs[1] == [
        ("eager", 0, [(1, "from1@0")]),
        ("close", 0),
        ("eager", 1, [(1, "from0@1")]),
    ]
    h0.close()
    h1.close()
    run_to_completion(workers)
    assert logs[1][-1] == ("close", 1)
    assert logs[0][-1] == ("close", 0)


def test_eager_notificator_bookkeeping():
    rig = HeldSource()
    eager = EagerNotificator()
    eager.notify_at(rig.root.delayed(4), ["a"])
    eager.notify_at(rig.root.delayed(4), ["b"])  # merged: the second capability is released
    eager.notify_at(rig.root.delayed(2))
    assert eager.pending() == [2, 4] and len(eager) == 2
    rig.root.drop()
    assert rig.held() == {2}
    frontier = MutableAntichain.from_elem(4)
    calls: list[Event] = []
    closed: list[Capability] = []

    def on_close(cap: Capability) -> None:
        calls.append(("close", cap.time))
        closed.append(cap)

    def on_items(cap: Capability, items: list[Any]) -> None:
        calls.append(("eager", cap.time, items))
        with pytest.raises(CapabilityError, match="holds it"):
            cap.drop()  # the notificator keeps it until the epoch closes

    eager.for_each([frontier], on_items, on_close)
    assert calls == [("close", 2), ("eager", 4, ["a", "b"])]
    assert eager.pending() == [4]
    closed.pop().drop()
    assert rig.held() == {4}  # the notificator still holds epoch 4
    frontier.update_iter([(4, -1)])
    eager.for_each([frontier], lambda c, items: calls.append(("eager", c.time, items)), on_close)
    assert calls[-1] == ("close", 4) and len(eager) == 0
    # outside an activation the closed capabilities are the caller's to drop
    for cap in closed:
        cap.drop()
    run_to_completion([rig.worker])


def _pass_through(cap: Capability, info: Any) -> Callable[[Any, Any], None]:
    def logic(inp: Any, out: Any) -> None:
        for icap, data in inp:
            out.session(icap).give_batch(list(data))

    return logic
