"""End-to-end smoke tests of the runtime: one and several workers, loops, inputs."""

import pytest

import timelypy
from timelypy import Config, InputHandle, ProbeHandle


def test_example_map_filter():
    captured = timelypy.example(
        lambda scope: (
            scope.to_stream(range(10)).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).capture()
        )
    )
    assert captured.extract() == [(0, [0, 6, 12, 18, 24])]


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_hello_routes_rounds(workers):
    def program(worker):
        handle, probe, seen = InputHandle(), ProbeHandle(), []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: x)
                .inspect_time(lambda t, x: seen.append((t, x)))
                .probe_with(probe)
            )
        )
        for round_ in range(10):
            if worker.index == 0:
                handle.send(round_)
            handle.advance_to(round_ + 1)
            while probe.less_than(handle.time):
                worker.step()
        return seen

    results = timelypy.execute(Config.process(workers), program)
    for index, seen in enumerate(results):
        assert seen == [(r, r) for r in range(10) if r % workers == index]


def test_collatz_iterations():
    def build(scope):
        def loop(inner):
            handle, cycle = inner.feedback(1)
            step = (
                scope.to_stream([6, 7])
                .enter(inner)
                .concat(cycle)
                .map(lambda n: n // 2 if n % 2 == 0 else 3 * n + 1)
            )
            step.filter(lambda n: n != 1).connect_loop(handle)
            return step.inspect_time(lambda t, n: None).leave()

        return scope.iterative(loop).capture()

    (result,) = timelypy.example(build).extract()
    assert result[0] == 0
    assert result[1].count(1) == 2  # both sequences reach 1
    assert 52 in result[1]  # 7 -> 22 -> 11 -> 34 -> 17 -> 52


def test_error_names_worker_and_operator():
    def program(worker):
        def boom(x):
            if worker.index == 1 and x == 3:
                raise ValueError("bad record")
            return x

        worker.dataflow(lambda scope: scope.to_stream(range(5)).map(boom))

    with pytest.raises(ValueError, match="bad record") as info:
        timelypy.execute(Config.process(2), program)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "'Map'" in notes and "worker 1" in notes


def test_build_reschedule_runs_again_until_the_logic_says_stop():
    def build(scope):
        builder = timelypy.OperatorBuilder("Countdown", scope)
        output, stream = builder.new_output()
        runs: list[int] = []

        def constructor(caps):
            held = [caps[0].retain()]

            def logic(frontiers):
                runs.append(len(runs))
                if held and len(runs) == 5:
                    output.session(held[0]).give_batch(["done"])
                    held.pop().drop()
                return bool(held)  # run again next step while holding a capability

            return logic

        builder.build_reschedule(constructor)
        return runs, stream.capture()

    runs, captured = timelypy.example(build)
    assert captured.extract() == [(0, ["done"])]
    assert 5 <= len(runs) <= 6  # once more after the drop, to observe the shutdown


def test_notify_at_an_input_capability_explains_what_to_do():
    errors = []

    def build(scope):
        def logic(inp, out, notificator):
            for cap, _ in inp:
                try:
                    notificator.notify_at(cap)
                except timelypy.CapabilityError as error:
                    errors.append(str(error))

        scope.to_stream([1]).unary_notify(timelypy.Pipeline(), "Notify", [], logic)

    timelypy.example(build)
    assert len(errors) == 1 and "retain()" in errors[0]


def test_to_stream_gives_several_batches_per_activation_and_keeps_order():
    from timelypy.dataflow.operators.to_stream import BATCHES_PER_ACTIVATION, CHUNK
    from timelypy.events import OperatesEvent, ScheduleEvent

    per_activation = BATCHES_PER_ACTIVATION * CHUNK
    items = list(range(2 * per_activation + 5))
    addresses: dict[str, tuple[int, ...]] = {}
    starts: list[tuple[int, ...]] = []

    def log(batch):
        for _, event in batch:
            if type(event) is OperatesEvent:
                addresses[event.name] = event.addr
            elif type(event) is ScheduleEvent and event.start:
                starts.append(event.addr)

    def program(worker):
        worker.log_register().insert("timely", log)
        sizes: list[int] = []
        seen: list[int] = []

        def record(time, data):
            sizes.append(len(data))
            seen.extend(data)

        worker.dataflow(lambda scope: scope.to_stream(items).inspect_batch(record))
        while worker.step():
            pass
        return sizes, seen

    ((sizes, seen),) = timelypy.execute(Config.thread(), program)
    assert seen == items
    assert sizes == [CHUNK] * (2 * BATCHES_PER_ACTIVATION) + [5]
    # Two full activations, one that gives the rest and drops the capability,
    # and the run every operator gets once it holds nothing (to shut down).
    assert starts.count(addresses["ToStream"]) == 3 + 1
