"""Ports of Timely Dataflow's own tests of the runtime.

Each test names the Rust original it ports (paths in the timely-dataflow
repository).  The behaviour is Timely's; the assertions are often stronger,
because Python lets us record what happened and check all of it:

* ``timely/tests/barrier.rs`` -- a feedback loop whose only operator is
  driven by notifications: each time is delivered once, in order, at most
  one per activation;
* ``generic/notificator.rs`` (``notificator_delivers_notifications_in_topo_order``)
  -- a ``FrontierNotificator`` over a hand-driven frontier of ``Product``
  times delivers exactly the complete times, in time order;
* ``timely/tests/gh_523.rs`` -- empty batches and sessions that send nothing
  do not leave counts behind that stall frontiers;
* ``core/enterleave.rs`` (``test_nested``, issue #377) -- streams passing
  through nested regions with no operator inside complete on 3 workers;
* ``timely/tests/shape_scaling.rs`` -- very wide operators, many region
  passthroughs and long chains build and run with work linear in their size.
  Time is never asserted: the work is the number of lines of timelypy code
  executed (``sys.settrace``) and the number of operator schedules (the
  ``"timely"`` log's :class:`~timelypy.events.ScheduleEvent`), both exact
  counts;
* ``core/probe.rs`` (``probe``) -- ``less_than``, ``less_equal``, ``done``
  and ``frontier`` over a run.

Every port that runs two workers or more runs in both of Timely's progress
modes, eager and demand, and must see the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

import timelypy
from timelypy import (
    Config,
    FrontierNotificator,
    InputHandle,
    OperatorBuilder,
    Pipeline,
    ProbeHandle,
    Product,
    ProductType,
)
from timelypy.events import ScheduleEvent
from timelypy.progress import MutableAntichain

#: Worker counts with Timely's two progress modes.  Demand mode holds a worker's
#: progress batch back until it could move a frontier; one worker applies its own
#: batches at once in either mode, so only two workers or more tell them apart.
WORKERS_AND_MODES = [(1, "eager"), (2, "eager"), (3, "eager"), (2, "demand"), (3, "demand")]


# -- barrier.rs -----------------------------------------------------------------------

BARRIER_ROUNDS = 100


@pytest.mark.parametrize(("workers", "mode"), WORKERS_AND_MODES)
def test_barrier_sync(workers: int, mode: str) -> None:
    """``barrier_sync_{1,2,3}w``: a notify-driven loop delivers one time per activation."""

    def program(worker: timelypy.Worker) -> tuple[list[int], list[int]]:
        delivered: list[int] = []
        per_activation: list[int] = []

        def barrier(inp: Any, out: Any, notificator: Any) -> None:
            count = 0
            for cap, _count in notificator:
                count += 1
                delivered.append(cap.time)
                later = cap.time + 1
                if later < BARRIER_ROUNDS:
                    notificator.notify_at(cap.delayed(later))
            per_activation.append(count)

        def build(scope: timelypy.Scope) -> None:
            handle, cycle = scope.feedback(1)
            cycle.unary_notify(Pipeline(), "Barrier", [0, 1], barrier).connect_loop(handle)

        worker.dataflow(build)
        # ``execute`` runs the dataflow to completion before it returns these lists.
        return delivered, per_activation

    for index, (delivered, per_activation) in enumerate(
        timelypy.execute(Config(workers=workers, progress_mode=mode), program)
    ):
        assert max(per_activation) <= 1, (
            f"worker {index}: an activation was notified of {max(per_activation)} times"
        )
        assert delivered == list(range(BARRIER_ROUNDS)), f"worker {index}: {delivered}"


# -- notificator.rs -------------------------------------------------------------------


def test_notificator_delivers_notifications_in_topo_order() -> None:
    """A FrontierNotificator over a hand-driven frontier delivers complete times in order."""
    times = [(3, 5), (5, 4), (1, 2), (1, 1), (1, 1), (5, 4), (6, 0), (6, 2), (5, 8)]
    sessions: list[list[tuple[Product, int]]] = []
    before_any: list[Any] = []

    def build(scope: timelypy.Scope) -> None:
        builder = OperatorBuilder("Notified", scope)
        builder.new_output()

        def constructor(caps: list[timelypy.Capability]) -> Callable[[Any], None]:
            root = caps[0]
            frontier = MutableAntichain.from_elem(Product(0, 0))
            notificator = FrontierNotificator([root.delayed(Product(*t)) for t in times])
            # The frontier is still at (0, 0): nothing is complete.
            before_any.append(next(iter(notificator.monotonic([frontier])), None))

            frontier.update_iter([(Product(0, 0), -1), (Product(5, 7), 1), (Product(6, 1), 1)])
            sessions.append([(cap.time, n) for cap, n in notificator.monotonic([frontier])])

            frontier.update_iter([(Product(5, 7), -1), (Product(6, 1), -1), (Product(6, 10), 1)])
            session = notificator.monotonic([frontier])
            delivered = iter(session)
            third = [next(delivered)]
            # A request made in the middle of a session joins it, in time order.
            session.notify_at(root.delayed(Product(5, 9)))
            third.extend(delivered)
            sessions.append([(cap.time, n) for cap, n in third])
            # Delivered capabilities are borrowed: the constructor's end releases them.
            return lambda frontiers: None

        builder.build(constructor)

    # The run completes only if every capability was released.
    timelypy.execute(
        Config.thread(),
        lambda worker: worker.dataflow(build, timestamp_type=ProductType(int, int)),
    )
    assert before_any == [None]
    assert sessions[0] == [
        (Product(1, 1), 2),
        (Product(1, 2), 1),
        (Product(3, 5), 1),
        (Product(5, 4), 2),
        (Product(6, 0), 1),
    ]
    assert sessions[1] == [(Product(5, 8), 1), (Product(5, 9), 1), (Product(6, 2), 1)]


def test_notificator_session_in_a_product_scope() -> None:
    """The same times requested in a running ``Product`` dataflow arrive in time order."""
    times = [Product(*t) for t in [(3, 5), (5, 4), (1, 2), (1, 1), (1, 1), (6, 0), (5, 8)]]
    delivered: list[tuple[Product, int]] = []

    def logic(inp: Any, out: Any, notificator: Any) -> None:
        for cap, count in notificator:
            delivered.append((cap.time, count))

    timelypy.execute(
        Config.thread(),
        lambda worker: worker.dataflow(
            lambda scope: scope.to_stream([]).unary_notify(Pipeline(), "Notified", times, logic),
            timestamp_type=ProductType(int, int),
        ),
    )
    expected = sorted({t: times.count(t) for t in times}.items())
    assert delivered == expected


# -- gh_523.rs ------------------------------------------------------------------------


@pytest.mark.parametrize(("workers", "mode"), WORKERS_AND_MODES)
def test_gh_523_empty_batches_do_not_stall(workers: int, mode: str) -> None:
    """Giving empty batches, empty iterators and opening silent sessions leaves no counts."""

    def program(worker: timelypy.Worker) -> tuple[list[tuple[int, int]], list[Any]]:
        handle = InputHandle()
        seen: list[tuple[int, int]] = []
        frontiers: list[Any] = []

        def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
            def logic(inp: Any, out: Any) -> None:
                def per_time(cap: Any, batches: list[list[int]]) -> None:
                    session = out.session(cap)
                    for data in batches:
                        session.give_batch([])
                        session.give_iterator(iter(()))
                        session.give_batch(data)
                        session.give_batch([])
                    out.session(cap)  # a session that sends nothing

                inp.for_each_time(per_time)

            return logic

        def build(scope: timelypy.Scope) -> ProbeHandle:
            return (
                scope.input_from(handle)
                .unary(Pipeline(), "Test", constructor)
                .exchange(lambda x: x)
                .inspect_time(lambda t, x: seen.append((t, x)))
                .probe()
            )

        probe = worker.dataflow(build)
        for round_ in range(2):
            handle.send(round_)
            handle.send_batch([])
            handle.advance_to(round_ + 1)
            while probe.less_than(handle.time):
                worker.step()
            frontiers.append(probe.frontier())
        handle.send_batch([])
        handle.advance_to(5)  # an epoch with nothing in it at all
        while probe.less_than(handle.time):
            worker.step()
        frontiers.append(probe.frontier())
        handle.close()
        while not probe.done():
            worker.step()
        return sorted(seen), frontiers

    config = Config(workers=workers, progress_mode=mode)
    for index, (seen, frontiers) in enumerate(timelypy.execute(config, program)):
        expected = sorted((r, r) for r in range(2) for _ in range(workers) if r % workers == index)
        assert seen == expected, f"worker {index}"
        assert frontiers == [(1,), (2,), (5,)], f"worker {index}"


# -- enterleave.rs: test_nested (#377) ------------------------------------------------


@pytest.mark.parametrize("mode", ["eager", "demand"])
def test_nested_passthrough_regions_complete(mode: str) -> None:
    """Records pass through two nested regions with no operator inside, on 3 workers."""

    def program(worker: timelypy.Worker) -> list[tuple[int, int]]:
        handle = InputHandle()
        probe = ProbeHandle()
        seen: list[tuple[int, int]] = []

        def build(scope: timelypy.Scope) -> None:
            data = scope.input_from(handle)

            def outer(inner: timelypy.Scope) -> timelypy.Stream:
                entered = data.enter(inner)
                return inner.region(lambda inner2: entered.enter(inner2).leave()).leave()

            scope.region(outer).inspect_time(lambda t, x: seen.append((t, x))).probe_with(probe)

        worker.dataflow(build)
        handle.advance_to(0)
        for round_ in range(10):
            if worker.index == 0:
                handle.send(round_)
            handle.advance_to(round_ + 1)
            while probe.less_than(handle.time):
                worker.step_or_park(None)
        return seen

    results = timelypy.execute(Config(workers=3, progress_mode=mode), program)
    assert results == [[(r, r) for r in range(10)], [], []]


# -- shape_scaling.rs -----------------------------------------------------------------

_PACKAGE = os.path.dirname(timelypy.__file__) + os.sep


class WorkBudgetExceeded(BaseException):
    """Raised inside the traced run once it executed more lines than allowed."""


def count_work(
    run: Callable[[timelypy.Worker], None], budget: int | None = None
) -> tuple[int, int]:
    """Run ``run(worker)`` on one worker in this thread; return ``(lines, schedules)``.

    ``lines`` counts the lines of timelypy's own code executed (building,
    running and draining the dataflow); ``schedules`` counts operator
    activations.  Both are exact and do not depend on the machine's speed.
    Once ``lines`` passes ``budget`` the run is abandoned by raising
    :class:`WorkBudgetExceeded`, so a quadratic blow-up fails fast.
    """
    lines = 0
    limit = sys.maxsize if budget is None else budget
    schedules: list[int] = [0]

    def trace_lines(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
            if lines > limit:
                raise WorkBudgetExceeded(lines)
        return trace_lines

    def trace_calls(frame: FrameType, event: str, arg: Any) -> Any:
        return trace_lines if frame.f_code.co_filename.startswith(_PACKAGE) else None

    def count_schedules(batch: list[tuple[float, Any]]) -> None:
        schedules[0] += sum(1 for _, e in batch if type(e) is ScheduleEvent and e.start)

    def program(worker: timelypy.Worker) -> None:
        worker.log_register().insert("timely", count_schedules)
        run(worker)

    previous = sys.gettrace()
    sys.settrace(trace_calls)
    try:
        timelypy.execute(Config.thread(), program)
    finally:
        sys.settrace(previous)
    return lines, schedules[0]


def _partition(
    stream: timelypy.Stream, parts: int, route: Callable[[int], int]
) -> list[timelypy.Stream]:
    """Timely's ``partition``: one input, ``parts`` outputs, ``route`` picks the output."""
    builder = OperatorBuilder("Partition", stream.scope)
    inp = builder.new_input(stream, Pipeline())
    outputs, streams = zip(*(builder.new_output() for _ in range(parts)), strict=True)

    def constructor(caps: list[Any]) -> Callable[[Any], None]:
        def logic(frontiers: Any) -> None:
            for cap, data in inp:
                buckets: dict[int, list[int]] = {}
                for x in data:
                    buckets.setdefault(route(x), []).append(x)
                for part, records in buckets.items():
                    outputs[part].session(cap).give_batch(records)

        return logic

    builder.build(constructor)
    return list(streams)


#: Records sent (one per round) by every scaling run.
SCALING_ROUNDS = 3


def _feed(worker: timelypy.Worker, handle: InputHandle, probe: ProbeHandle) -> None:
    for round_ in range(SCALING_ROUNDS):
        handle.send(round_)
        handle.advance_to(round_ + 1)
    handle.close()
    while not probe.done():
        worker.step()


def operator_scaling(scale: int) -> Callable[[timelypy.Worker], None]:
    """``operator_scaling``: one operator with ``scale`` inputs, input ``i`` to output ``i``."""

    def run(worker: timelypy.Worker) -> None:
        handle = InputHandle()
        probe = ProbeHandle()
        forwarded: list[int] = []

        def build(scope: timelypy.Scope) -> None:
            parts = _partition(scope.input_from(handle), scale, lambda x: x % scale)
            builder = OperatorBuilder("OpScaling", scope)
            pairs = []
            for index, part in enumerate(parts):
                output, stream = builder.new_output(connection={})
                pairs.append((builder.new_input(part, Pipeline(), connection={index: 0}), output))
                if index == 0:
                    stream.probe_with(probe)

            def constructor(caps: list[Any]) -> Callable[[Any], None]:
                def logic(frontiers: Any) -> None:
                    for inp, output in pairs:
                        for cap, data in inp:
                            forwarded.extend(data)
                            output.session(cap).give_batch(data)

                return logic

            builder.build(constructor)

        worker.dataflow(build)
        _feed(worker, handle, probe)
        assert sorted(forwarded) == list(range(SCALING_ROUNDS))

    return run


def subgraph_scaling(scale: int) -> Callable[[timelypy.Worker], None]:
    """``subgraph_scaling``: ``scale`` streams enter a region and leave it untouched."""

    def run(worker: timelypy.Worker) -> None:
        handle = InputHandle()
        probe = ProbeHandle()
        seen: list[int] = []

        def build(scope: timelypy.Scope) -> None:
            parts = _partition(scope.input_from(handle), scale, lambda x: x % scale)
            left = scope.region(lambda inner: [part.enter(inner).leave() for part in parts])
            for stream in left[: SCALING_ROUNDS + 1]:
                stream.inspect(seen.append).probe_with(probe)

        worker.dataflow(build)
        _feed(worker, handle, probe)
        assert sorted(seen) == list(range(SCALING_ROUNDS))

    return run


def chain_scaling(scale: int) -> Callable[[timelypy.Worker], None]:
    """``scale`` passthrough operators one after the other."""

    def run(worker: timelypy.Worker) -> None:
        handle = InputHandle()
        seen: list[int] = []

        def build(scope: timelypy.Scope) -> ProbeHandle:
            stream = scope.input_from(handle)
            for _ in range(scale):
                stream = stream.map(lambda x: x)
            return stream.inspect(seen.append).probe()

        probe = worker.dataflow(build)
        _feed(worker, handle, probe)
        assert seen == list(range(SCALING_ROUNDS))

    return run


SHAPES: dict[str, Callable[[int], Callable[[timelypy.Worker], None]]] = {
    "wide-operator": operator_scaling,
    "region-passthroughs": subgraph_scaling,
    "chain": chain_scaling,
}


@pytest.mark.parametrize("scale", [1, 10, 100])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_scaling_runs(shape: str, scale: int) -> None:
    """Every shape builds, forwards its records and completes."""
    timelypy.execute(Config.thread(), SHAPES[shape](scale))


def assert_linear_work(shape: str, small: int) -> None:
    """Work at ``10 * small`` is at most 12 times the work at ``small``."""
    make = SHAPES[shape]
    lines_small, schedules_small = count_work(make(small))
    big = 10 * small
    try:
        lines_big, schedules_big = count_work(make(big), budget=12 * lines_small)
    except WorkBudgetExceeded as exc:
        pytest.fail(
            f"{shape}: {small} operators executed {lines_small} lines of timelypy, but "
            f"{big} operators passed {exc.args[0]} lines (more than 12x): not linear"
        )
    assert schedules_big <= 12 * schedules_small, (
        f"{shape}: {schedules_small} schedules at {small} operators, {schedules_big} at {big}"
    )
    # The count is live: the bigger dataflow does more work.
    assert lines_big > 5 * lines_small


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_scaling_linear_1000(shape: str) -> None:
    """From 100 to 1,000 operators the work grows about tenfold, not a hundredfold."""
    assert_linear_work(shape, 100)


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_scaling_linear_10000(shape: str) -> None:
    """From 1,000 to 10,000 operators the work grows about tenfold, not a hundredfold."""
    assert_linear_work(shape, 1000)


def test_work_counter_detects_quadratic_work() -> None:
    """The counter is not blind: a dataflow whose build is quadratic exceeds the budget."""

    def quadratic(scale: int) -> Callable[[timelypy.Worker], None]:
        def run(worker: timelypy.Worker) -> None:
            def build(scope: timelypy.Scope) -> None:
                scope.to_stream([]).probe()
                # Quadratic in timelypy code: i fresh probe handles asked at step i.
                for i in range(scale):
                    for _ in range(i):
                        ProbeHandle().less_than(0)

            worker.dataflow(build)

        return run

    small, _ = count_work(quadratic(20))
    with pytest.raises(WorkBudgetExceeded):
        count_work(quadratic(200), budget=12 * small)


# -- probe.rs -------------------------------------------------------------------------


def test_probe() -> None:
    """``probe``: the frontier follows the input's time, then empties when it closes."""

    def program(worker: timelypy.Worker) -> None:
        handle, probe = worker.dataflow(
            lambda scope: (lambda pair: (pair[0], pair[1].probe()))(scope.new_input())
        )
        for round_ in range(10):
            assert not probe.done()
            assert probe.less_equal(round_)
            assert probe.less_than(round_ + 1)
            handle.advance_to(round_ + 1)
            worker.step()
            while probe.less_than(round_ + 1):
                worker.step()
            assert probe.frontier() == (round_ + 1,)
            assert probe.with_frontier(list) == [round_ + 1]
            assert not probe.less_equal(round_) and not probe.less_than(round_ + 1)
            assert probe.less_equal(round_ + 1) and probe.less_than(round_ + 2)
        handle.close()
        for _ in range(4):
            worker.step()
        assert probe.done()
        assert probe.frontier() == ()
        assert not probe.less_equal(10**6) and not probe.less_than(10**6)

    timelypy.execute(Config.thread(), program)


def test_probe_with_watches_the_lower_envelope() -> None:
    """One handle on two streams sees the earlier of their frontiers."""

    def program(worker: timelypy.Worker) -> list[tuple[int, ...]]:
        first, second = InputHandle(), InputHandle()
        probe = ProbeHandle()
        worker.dataflow(
            lambda scope: (
                scope.input_from(first).probe_with(probe),
                scope.input_from(second).map(lambda x: x).probe_with(probe),
            )
        )
        seen = []

        def settle() -> None:
            for _ in range(5):
                worker.step()
            seen.append(probe.frontier())

        first.advance_to(5)
        settle()
        second.advance_to(3)
        settle()
        second.advance_to(9)
        settle()
        first.close()
        settle()
        second.close()
        settle()
        return seen

    (seen,) = timelypy.execute(Config.thread(), program)
    assert seen == [(0,), (3,), (5,), (9,), ()]


@pytest.mark.parametrize("mode", ["eager", "demand"])
@pytest.mark.parametrize("workers", [2, 3])
def test_probe_waits_for_every_worker(workers: int, mode: str) -> None:
    """A time is complete at a probe only once every worker's input has passed it."""

    def program(worker: timelypy.Worker) -> list[tuple[int, list[int]]]:
        handle = InputHandle()
        seen: list[int] = []
        probe = worker.dataflow(
            lambda scope: (
                scope.input_from(handle).exchange(lambda x: x).inspect(seen.append).probe()
            )
        )
        checks = []
        for round_ in range(6):
            handle.send(round_ * workers + worker.index)
            handle.advance_to(round_ + 1)
            while probe.less_than(handle.time):
                worker.step()
            # Every worker sent one record per round: all of this round's arrived here.
            checks.append((probe.frontier()[0], sorted(seen)))
        return checks

    config = Config(workers=workers, progress_mode=mode)
    for index, checks in enumerate(timelypy.execute(config, program)):
        for round_, (frontier, seen) in enumerate(checks):
            assert frontier >= round_ + 1
            expected = [x for x in range((round_ + 1) * workers) if x % workers == index]
            assert seen[: len(expected)] == expected, f"worker {index}, round {round_}"
