"""Capabilities inside real operators: minting, misuse, ownership, CapabilitySet.

Ported behaviour: ``timely/src/dataflow/operators/capability.rs`` (delayed and
downgrade only move forward, input capabilities mint only through the
operator's path summaries, ``CapabilitySet`` keeps a minimal set) and the
ownership protocol of :mod:`timelypy.dataflow.capability` (borrowed
capabilities end with their activation, ``retain`` keeps one, ``drop``
releases one).

Every misuse must raise :class:`~timelypy.CapabilityError` *before* any count
changes: several tests catch the error inside the operator's logic and then
check that the dataflow still completes with the right output, and others
read the held capabilities back through a probe's frontier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.stepping import run_to_completion, settle
from timelypy import (
    Capability,
    CapabilityError,
    CapabilitySet,
    FrontierNotificator,
    InputHandle,
    OperatorBuilder,
    Pipeline,
    ProbeHandle,
    Product,
    ProductType,
    TimestampError,
    source,
)
from timelypy.communication.allocator import process_allocators
from timelypy.progress.frontier import MutableAntichain
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(60)

PRODUCT = ProductType(int, int)


def new_worker() -> Worker:
    """A single worker driven by hand from the test's thread."""
    return Worker(process_allocators(1)[0])


def feed_epochs(
    worker: Worker, handle: InputHandle, probe: ProbeHandle, epochs: dict[int, list[Any]]
) -> None:
    """Send each epoch's records, advance past it, and step until the probe passed it."""
    for epoch in sorted(epochs):
        handle.advance_to(epoch)
        for record in epochs[epoch]:
            handle.send(record)
        handle.advance_to(epoch + 1)
        for _ in range(200):
            if not probe.less_than(epoch + 1):
                break
            worker.step()
        assert not probe.less_than(epoch + 1), f"epoch {epoch} never completed"


def finish(worker: Worker, handle: InputHandle) -> None:
    """Close ``handle`` and run the worker's dataflows to completion."""
    handle.close()
    run_to_completion(worker)


class HeldSource:
    """A worker whose only operator is a source; the test holds its constructor capability.

    The probe on the source's output reads back exactly the capabilities the
    test holds, which is how these tests check counts.
    """

    def __init__(self, timestamp_type: Any = int, name: str = "Held") -> None:
        self.worker = new_worker()
        box: list[Capability] = []

        def build(scope: Any) -> ProbeHandle:
            def constructor(cap: Capability, info: Any) -> Callable[[Any], None]:
                box.append(cap.retain())
                return lambda output: None

            return source(scope, name, constructor).probe()

        self.probe = self.worker.dataflow(build, timestamp_type=timestamp_type)
        self.root = box[0]

    def frontier(self) -> set[Any]:
        """The times held (the probe's frontier) once the worker settled."""
        settle(self.worker)
        return set(self.probe.frontier())


# -- delayed / downgrade ----------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp_type", "time", "bad"),
    [
        (int, 5, 3),
        (PRODUCT, Product(1, 2), Product(0, 2)),  # earlier
        (PRODUCT, Product(1, 2), Product(2, 1)),  # incomparable
        (PRODUCT, Product(1, 2), Product(0, 5)),  # incomparable
    ],
)
def test_delayed_and_downgrade_to_a_time_not_beyond_raise(timestamp_type, time, bad):
    worker = new_worker()
    handle = InputHandle()
    errors: list[CapabilityError] = []
    out: list[tuple[Any, Any]] = []

    def build(scope):
        def constructor(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    owned = icap.retain()
                    for misuse in (owned.delayed, owned.downgrade):
                        try:
                            misuse(bad)
                        except CapabilityError as exc:
                            errors.append(exc)
                    assert owned.try_delayed(bad) is None
                    assert owned.time == icap.time  # the failed downgrade changed nothing
                    output.session(owned).give_batch(list(data))
                    owned.drop()

            return logic

        stream = scope.input_from(handle).unary(Pipeline(), "Early", constructor)
        return stream.inspect_time(lambda t, x: out.append((t, x))).probe()

    probe = worker.dataflow(build, timestamp_type=timestamp_type)
    handle.advance_to(time)
    handle.send("x")
    handle.close()
    run_to_completion(worker)

    assert out == [(time, "x")]
    assert probe.done()
    assert len(errors) == 2
    for exc, verb in zip(errors, ("delay", "downgrade"), strict=True):
        text = str(exc)
        assert "'Early'" in text and "worker 0" in text
        assert verb in text
        assert repr(time) in text and repr(bad) in text


def test_delayed_to_a_time_of_another_type_raises_capability_error():
    rig = HeldSource()
    for bad in (1.5, "1", Product(1, 1), None, True):
        with pytest.raises(CapabilityError, match=r"'Held' \(worker 0\)"):
            rig.root.delayed(bad)
        assert rig.root.try_delayed(bad) is None
        with pytest.raises(CapabilityError):
            rig.root.downgrade(bad)
    assert rig.frontier() == {0}
    rig.root.drop()
    run_to_completion(rig.worker)


def test_delayed_mints_and_downgrade_moves_in_place():
    rig = HeldSource()
    later = rig.root.delayed(4)
    assert (later.time, later.output, later.is_valid, later.is_retained) == (4, 0, True, True)
    same = rig.root.delayed(0)  # delaying to the capability's own time is allowed
    assert rig.frontier() == {0}
    rig.root.drop()
    same.drop()
    assert rig.frontier() == {4}
    later.downgrade(4)  # no-op
    later.downgrade(9)
    assert later.time == 9
    assert rig.frontier() == {9}
    later.release()  # alias of drop
    assert not later.is_valid
    assert "released" in repr(later)
    run_to_completion(rig.worker)
    assert rig.probe.done()


# -- borrowed capabilities end with their activation --------------------------------


def test_borrowed_capability_used_in_a_later_activation_raises():
    worker = new_worker()
    handle = InputHandle()
    stash: dict[str, Any] = {}
    errors: list[tuple[str, CapabilityError]] = []
    out: list[tuple[Any, Any]] = []

    def build(scope):
        def constructor(cap, info):
            stash["constructor"] = cap  # not retained: released when the constructor returns

            def logic(inp, output):
                for icap, data in inp:
                    for name, old in list(stash.items()):
                        attempts = {
                            "delayed": lambda c=old, t=icap.time: c.delayed(t),
                            "downgrade": lambda c=old, t=icap.time: c.downgrade(t),
                            "retain": lambda c=old: c.retain(),
                            "drop": lambda c=old: c.drop(),
                            "session": lambda c=old: output.session(c),
                        }
                        for what, attempt in attempts.items():
                            try:
                                attempt()
                            except CapabilityError as exc:
                                errors.append((f"{name}.{what}", exc))
                    stash["borrowed"] = icap.delayed(icap.time)  # borrowed, never retained
                    output.session(stash["borrowed"]).give_batch(list(data))

            return logic

        stream = scope.input_from(handle).unary(Pipeline(), "Stale", constructor)
        return stream.inspect_time(lambda t, x: out.append((t, x))).probe()

    probe = worker.dataflow(build)
    assert not stash["constructor"].is_valid
    feed_epochs(worker, handle, probe, {0: ["a"], 1: ["b"], 2: ["c"]})
    finish(worker, handle)

    assert out == [(0, "a"), (1, "b"), (2, "c")]
    # activation 0 misuses the constructor capability; 1 and 2 also the previous borrowed one
    assert len(errors) == 5 * 3 + 5 * 2
    for what, exc in errors:
        assert "'Stale'" in str(exc) and "worker 0" in str(exc), what
        assert "released" in str(exc), what


def test_input_capability_outside_its_activation_raises():
    worker = new_worker()
    handle = InputHandle()
    kept: list[Any] = []
    errors: list[CapabilityError] = []
    out: list[tuple[Any, Any]] = []

    def build(scope):
        def constructor(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    for old in kept:
                        for attempt in (
                            lambda o=old, t=icap.time: o.delayed(t),
                            lambda o=old: o.retain(),
                            lambda o=old: output.session(o),
                        ):
                            try:
                                attempt()
                            except CapabilityError as exc:
                                errors.append(exc)
                    kept.append(icap)
                    output.session(icap).give_batch(list(data))

            return logic

        stream = scope.input_from(handle).unary(Pipeline(), "Keeper", constructor)
        return stream.inspect_time(lambda t, x: out.append((t, x))).probe()

    probe = worker.dataflow(build)
    feed_epochs(worker, handle, probe, {0: [1], 3: [2]})
    finish(worker, handle)
    assert out == [(0, 1), (3, 2)]
    assert len(errors) == 3
    for exc in errors:
        assert "'Keeper'" in str(exc) and "worker 0" in str(exc)
        assert "activation" in str(exc)
    # and from the program, after the dataflow is gone
    with pytest.raises(CapabilityError, match="outside the activation"):
        kept[-1].retain()
    with pytest.raises(CapabilityError, match="outside the activation"):
        kept[-1].delayed(7)


# -- sessions -------------------------------------------------------------------------


def test_session_on_the_wrong_output_raises():
    worker = new_worker()
    errors: list[CapabilityError] = []

    def build(scope):
        builder = OperatorBuilder("TwoOutputs", scope)
        first, stream0 = builder.new_output()
        second, stream1 = builder.new_output()

        def constructor(caps):
            held = [caps[0].retain(), caps[1].retain()]

            def logic(frontiers):
                if not held:
                    return
                for wrong_output, cap in ((second, held[0]), (first, held[1])):
                    try:
                        wrong_output.session(cap)
                    except CapabilityError as exc:
                        errors.append(exc)
                first.session(held[0]).give("zero")
                second.session(held[1]).give("one")
                for cap in held:
                    cap.drop()
                held.clear()

            return logic

        builder.build(constructor)
        return stream0.capture(), stream1.capture()

    cap0, cap1 = worker.dataflow(build)
    run_to_completion(worker)
    assert cap0.extract() == [(0, ["zero"])]
    assert cap1.extract() == [(0, ["one"])]
    assert len(errors) == 2
    assert "output 1" in str(errors[0]) and "for output 0" in str(errors[0])
    assert "output 0" in str(errors[1]) and "for output 1" in str(errors[1])
    assert all("'TwoOutputs'" in str(e) and "worker 0" in str(e) for e in errors)


def test_session_with_another_operators_capability_or_a_bare_time_raises():
    worker = new_worker()
    handle = InputHandle()
    foreign: list[Capability] = []
    errors: list[CapabilityError] = []

    def build(scope):
        def owner(cap, info):
            foreign.append(cap.retain())
            return lambda output: None

        source(scope, "Owner", owner)

        def thief(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    for bad in (foreign[0], icap.time):
                        try:
                            output.session(bad)
                        except CapabilityError as exc:
                            errors.append(exc)
                    output.session(icap).give_batch(list(data))

            return logic

        return scope.input_from(handle).unary(Pipeline(), "Thief", thief).capture()

    captured = worker.dataflow(build)
    handle.send(5)
    handle.close()
    settle(worker)
    foreign[0].drop()
    run_to_completion(worker)
    assert captured.extract() == [(0, [5])]
    assert len(errors) == 2
    assert "belongs to operator 'Owner'" in str(errors[0]) and "'Thief'" in str(errors[0])
    assert "bare time" in str(errors[1])


def test_a_session_kept_past_its_capability_cannot_send():
    """A session opened in one activation must not send in a later one.

    Otherwise records arrive at a time downstream has already passed: here the
    probe reads 10 when a record at time 0 shows up.
    """
    worker = new_worker()
    state: dict[str, Any] = {}
    seen: list[tuple[Any, Any, tuple[Any, ...]]] = []

    def build(scope):
        def constructor(cap, info):
            state["activate"] = info.activator()
            state["later"] = cap.delayed(10).retain()  # keeps the dataflow running
            now = cap.retain()

            def logic(output):
                if "session" not in state:
                    state["session"] = output.session(now)
                    now.drop()
                    return
                try:
                    state["session"].give("late")
                except CapabilityError as exc:
                    state["error"] = exc

            return logic

        stream = source(scope, "Sessions", constructor)
        probe = ProbeHandle()
        stream.inspect_time(lambda t, x: seen.append((t, x, probe.frontier())))
        stream.probe_with(probe)
        return probe

    probe = worker.dataflow(build)
    settle(worker)
    assert probe.frontier() == (10,)
    state["activate"]()
    settle(worker)
    state["later"].drop()
    run_to_completion(worker)
    assert seen == []
    assert isinstance(state.get("error"), CapabilityError)


# -- input capabilities and path summaries ------------------------------------------


def test_input_capability_mints_only_through_the_operators_summary():
    worker = new_worker()
    handle = InputHandle()
    errors: dict[str, CapabilityError] = {}
    checks: list[bool] = []
    shifted: Any = None

    def attempts_for(icap: Any) -> dict[str, Callable[[], Any]]:
        t = icap.time
        return {
            "below": lambda: icap.delayed(t + 1, 0),
            "same": lambda: icap.delayed(t, 0),
            "retain": lambda: icap.retain(0),
            "session": lambda: shifted.session(icap),
            "disconnected": lambda: icap.delayed(t + 5, 1),
            "missing": lambda: icap.delayed(t + 2, 7),
        }

    def build(scope):
        nonlocal shifted
        stream = scope.input_from(handle)
        builder = OperatorBuilder("Summary", scope)
        shifted, out0 = builder.new_output()
        _, out1 = builder.new_output()
        # outputs first: this input reaches output 0 adding 2, and not output 1
        inp = builder.new_input(stream, connection={0: [2]})

        def constructor(caps):
            def logic(frontiers):
                for icap, data in inp:
                    t = icap.time
                    for name, attempt in attempts_for(icap).items():
                        try:
                            attempt()
                        except CapabilityError as exc:
                            errors[name] = exc
                    checks.append(icap.valid_for_output(0) or icap.valid_for_output(1))
                    shifted.session(icap.delayed(t + 2, 0)).give_batch(list(data))
                    shifted.session(icap.delayed(t + 3)).give_batch([-x for x in data])

            return logic

        builder.build(constructor)
        return out0.capture(), out1.probe()

    captured, probe1 = worker.dataflow(build)
    handle.send(1)
    handle.advance_to(4)
    handle.send(2)
    handle.close()
    run_to_completion(worker)

    assert captured.extract() == [(2, [1]), (3, [-1]), (6, [2]), (7, [-2])]
    assert probe1.done()
    assert checks == [False, False]
    assert set(errors) == {"below", "same", "retain", "session", "disconnected", "missing"}
    for name in ("below", "same", "retain"):
        assert "summary" in str(errors[name]), name
    assert "at 4 to 5" in str(errors["below"]) and "'Summary'" in str(errors["below"])
    assert "does not reach this output" in str(errors["session"])
    assert "not connected to output 1" in str(errors["disconnected"])
    assert "output 7 does not exist" in str(errors["missing"])


def test_an_input_connection_to_an_output_not_built_yet_is_not_lost():
    """A summary an input declares for a later output survives ``new_output()``."""
    minted_below_summary: list[bool] = []

    def build(scope):
        builder = OperatorBuilder("Early", scope)
        inp = builder.new_input(scope.to_stream([1]), connection={0: [2]})
        out, stream = builder.new_output()

        def constructor(caps):
            def logic(frontiers):
                for icap, data in inp:
                    try:
                        out.session(icap.delayed(icap.time + 1)).give_batch(list(data))
                        minted_below_summary.append(True)
                    except CapabilityError:
                        minted_below_summary.append(False)

            return logic

        builder.build(constructor)
        return stream.probe()

    worker = new_worker()
    worker.dataflow(build)
    run_to_completion(worker)
    assert minted_below_summary == [False]


# -- ownership: retain, drop, release at the end ---------------------------------------


def test_retain_keeps_a_capability_across_activations_until_drop():
    worker = new_worker()
    commands: list[str] = []
    errors: list[CapabilityError] = []
    state: dict[str, Any] = {}

    def build(scope):
        def constructor(cap, info):
            state["activate"] = info.activator()
            held = cap.retain()
            assert held is cap and held.is_retained

            def logic(output):
                while commands:
                    command = commands.pop(0)
                    if command == "send":
                        output.session(held).give(held.time)
                        held.downgrade(held.time + 3)
                    elif command == "drop":
                        held.drop()
                        try:
                            held.drop()
                        except CapabilityError as exc:
                            errors.append(exc)

            return logic

        stream = source(scope, "Ticker", constructor)
        return stream.capture(), stream.probe()

    captured, probe = worker.dataflow(build)
    for expected in (0, 3, 6):
        settle(worker)
        assert probe.frontier() == (expected,)
        assert worker.has_dataflows()
        commands.append("send")
        state["activate"]()
    settle(worker)
    assert probe.frontier() == (9,)
    assert worker.has_dataflows()
    commands.append("drop")
    state["activate"]()
    run_to_completion(worker)
    assert probe.done()
    assert captured.extract() == [(0, [0]), (3, [3]), (6, [6])]
    assert len(errors) == 1 and "already released" in str(errors[0])


def test_double_drop_raises_and_counts_stay_right():
    rig = HeldSource()
    extra = rig.root.delayed(2)
    extra.drop()
    with pytest.raises(CapabilityError, match="already released"):
        extra.drop()
    with pytest.raises(CapabilityError, match="already released"):
        extra.delayed(3)
    assert rig.frontier() == {0}
    rig.root.downgrade(5)
    assert rig.frontier() == {5}
    rig.root.drop()
    run_to_completion(rig.worker)


@pytest.mark.parametrize("kind", ["source", "unary", "builder"])
def test_an_unretained_constructor_capability_is_released(kind):
    out: list[Any] = []

    def build(scope):
        if kind == "source":
            stream = source(scope, "Ignores", lambda cap, info: lambda output: None)
        elif kind == "unary":

            def constructor(cap, info):
                def logic(inp, output):
                    for icap, data in inp:
                        output.session(icap).give_batch(list(data))

                return logic

            stream = scope.to_stream([1, 2]).unary(Pipeline(), "Ignores", constructor)
        else:
            builder = OperatorBuilder("Ignores", scope)
            _, stream = builder.new_output()
            builder.new_output()
            builder.build(lambda caps: lambda frontiers: None)
        return stream.inspect(out.append).probe()

    worker = new_worker()
    probe = worker.dataflow(build)
    run_to_completion(worker)
    assert probe.done()
    assert out == ([1, 2] if kind == "unary" else [])


def test_a_borrowed_capability_dropped_in_its_activation_is_released_once():
    worker = new_worker()
    handle = InputHandle()
    out: list[tuple[Any, Any]] = []

    def build(scope):
        def constructor(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    later = icap.delayed(icap.time + 1)
                    output.session(later).give_batch(list(data))
                    later.drop()  # borrowed, dropped early: the activation's end must skip it

            return logic

        stream = scope.input_from(handle).unary(Pipeline(), "Early", constructor)
        return stream.inspect_time(lambda t, x: out.append((t, x))).probe()

    probe = worker.dataflow(build)
    feed_epochs(worker, handle, probe, {0: ["a"], 2: ["b"]})
    finish(worker, handle)
    assert out == [(1, "a"), (3, "b")]


# -- misuse caught by the user's logic never corrupts counts -----------------------------

Misuse = Callable[[Any, Any, dict[str, Any]], Any]

MISUSES: dict[str, Misuse] = {
    "delayed-earlier": lambda icap, out, st: st["retained"].delayed(icap.time - 1),
    "downgrade-earlier": lambda icap, out, st: st["retained"].downgrade(icap.time - 1),
    "stale-borrowed": lambda icap, out, st: st["borrowed"].delayed(icap.time),
    "stale-borrowed-retain": lambda icap, out, st: st["borrowed"].retain(),
    "stale-borrowed-session": lambda icap, out, st: out.session(st["borrowed"]),
    "stale-input-capability": lambda icap, out, st: st["icap"].retain(),
    "stale-input-session": lambda icap, out, st: out.session(st["icap"]),
    "double-drop": lambda icap, out, st: st["dropped"].drop(),
    "foreign-session": lambda icap, out, st: out.session(st["foreign"][0]),
    "bare-time-session": lambda icap, out, st: out.session(icap.time),
    "input-delayed-earlier": lambda icap, out, st: icap.delayed(icap.time - 1),
    "input-missing-output": lambda icap, out, st: icap.delayed(icap.time, 3),
    "set-delayed-below": lambda icap, out, st: st["set"].delayed(icap.time - 1),
    "set-downgrade-below": lambda icap, out, st: st["set"].downgrade([icap.time - 1]),
    "drop-a-set-member": lambda icap, out, st: st["set"].first().drop(),
    "retain-a-set-member": lambda icap, out, st: st["set"].first().retain(),
    "downgrade-a-set-member": lambda icap, out, st: st["set"].first().downgrade(icap.time + 1),
    "stale-session": lambda icap, out, st: st["session"].give_batch(["late"]),
}


@pytest.mark.parametrize("name", sorted(MISUSES))
def test_misuse_caught_in_logic_does_not_corrupt_counts(name):
    """Each misuse raises inside the logic, which catches it and carries on.

    The output must still be exactly the input, every record must arrive
    while the probe still allows its time, and the dataflow must complete
    once the input closes and the other operator's capability is dropped.
    """
    misuse = MISUSES[name]
    worker = new_worker()
    handle = InputHandle()
    errors: list[CapabilityError] = []
    stash: dict[str, Any] = {"foreign": []}
    seen_at: list[tuple[int, tuple[Any, ...]]] = []
    probe = ProbeHandle()

    def build(scope):
        def owner(cap, info):
            stash["foreign"].append(cap.retain())
            return lambda output: None

        source(scope, "Owner", owner)

        def constructor(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    retained = icap.retain()
                    stash["retained"] = retained
                    stash["set"] = CapabilitySet([icap.retain()])
                    if "icap" in stash:
                        try:
                            misuse(icap, output, stash)
                        except CapabilityError as exc:
                            errors.append(exc)
                    output.session(retained).give_batch([(icap.time, x) for x in data])
                    retained.drop()
                    stash["set"].clear()
                    stash["icap"] = icap
                    stash["borrowed"] = icap.delayed(icap.time)
                    dropped = icap.retain()
                    dropped.drop()
                    stash["dropped"] = dropped
                    stash["session"] = output.session(icap)

            return logic

        result = scope.input_from(handle).unary(Pipeline(), "Misuser", constructor)
        result.inspect_time(lambda t, x: seen_at.append((t, probe.frontier())))
        result.probe_with(probe)
        return result.capture()

    captured = worker.dataflow(build)
    epochs = {1: ["a", "b"], 2: ["c"], 4: ["d"], 5: ["e"]}
    feed_epochs(worker, handle, probe, epochs)
    handle.close()
    settle(worker)
    assert probe.done()
    stash["foreign"][0].drop()
    run_to_completion(worker)

    assert captured.extract() == [(t, sorted((t, x) for x in xs)) for t, xs in epochs.items()]
    # every record arrived while the probe still allowed its time
    assert [t for t, _ in seen_at] == [1, 1, 2, 4, 5]
    assert all(any(f <= t for f in front) for t, front in seen_at)
    assert len(errors) == len(epochs) - 1
    assert all("'Misuser' (worker 0)" in str(exc) for exc in errors)


def test_capability_set_downgrade_error_names_the_operator():
    rig = HeldSource()
    caps = CapabilitySet([rig.root.delayed(3)])
    with pytest.raises(CapabilityError) as info:
        caps.downgrade([1])
    assert "'Held'" in str(info.value) and "worker 0" in str(info.value)


def test_an_uncaught_capability_error_reaches_execute_with_worker_and_operator():
    import timelypy

    def program(worker):
        def constructor(cap, info):
            def logic(inp, output):
                for icap, data in inp:
                    if worker.index == 1:
                        icap.retain().downgrade(icap.time - 1)
                    output.session(icap).give_batch(list(data))

            return logic

        handle = InputHandle()
        worker.dataflow(
            lambda scope: scope.input_from(handle).unary(Pipeline(), "Rewind", constructor)
        )
        handle.advance_to(3)
        handle.send(1)

    with pytest.raises(CapabilityError) as info:
        timelypy.execute(timelypy.Config.process(2), program)
    text = str(info.value)
    assert "'Rewind' (worker 1)" in text and "3" in text and "2" in text
    assert any("'Rewind'" in note for note in info.value.__notes__)


# -- CapabilitySet ---------------------------------------------------------------------


def test_capability_set_insert_keeps_the_set_minimal():
    rig = HeldSource(PRODUCT)
    root = rig.root
    caps = CapabilitySet()
    assert caps.is_empty() and caps.first() is None and len(caps) == 0
    a, b = root.delayed(Product(1, 2)), root.delayed(Product(2, 1))
    caps.insert(a)
    caps.insert(b)
    assert set(caps.times()) == {Product(1, 2), Product(2, 1)}
    for covered_time in (Product(2, 2), Product(1, 2), Product(5, 1)):
        covered = root.delayed(covered_time)
        caps.insert(covered)  # some element is <= it: it is released
        assert not covered.is_valid, covered_time
    c = root.delayed(Product(0, 5))  # incomparable to both
    caps.insert(c)
    assert len(caps) == 3 and set(caps) == {a, b, c}
    assert all(cap.is_valid for cap in caps)
    root.drop()
    assert rig.frontier() == {Product(1, 2), Product(2, 1), Product(0, 5)}
    assert "CapabilitySet" in repr(caps)
    caps.clear()
    assert caps.is_empty() and not any(cap.is_valid for cap in (a, b, c))
    run_to_completion(rig.worker)
    assert rig.probe.done()


def test_capability_set_insert_of_a_dominating_capability_releases_the_covered_ones():
    rig = HeldSource(PRODUCT)
    caps = CapabilitySet([rig.root.delayed(Product(1, 2)), rig.root.delayed(Product(2, 1))])
    covered = list(caps)
    low = rig.root.delayed(Product(1, 1))
    caps.insert(low)
    assert caps.times() == [Product(1, 1)]
    assert caps.first() is low
    assert not any(c.is_valid for c in covered)
    rig.root.drop()
    assert rig.frontier() == {Product(1, 1)}
    caps.clear()
    run_to_completion(rig.worker)


def test_capability_set_delayed_uses_an_element_less_or_equal():
    rig = HeldSource(PRODUCT)
    caps = CapabilitySet([rig.root.delayed(Product(1, 2)), rig.root.delayed(Product(2, 1))])
    rig.root.drop()
    minted = caps.delayed(Product(2, 5))
    assert minted.time == Product(2, 5)
    tried = caps.try_delayed(Product(5, 1))
    assert tried is not None and tried.time == Product(5, 1)
    with pytest.raises(CapabilityError, match="failed to create a delayed capability"):
        caps.delayed(Product(0, 9))
    assert caps.try_delayed(Product(1, 1)) is None
    with pytest.raises(CapabilityError, match="no element of the set"):
        CapabilitySet().delayed(Product(0, 0))
    assert CapabilitySet().try_delayed(Product(0, 0)) is None
    # minted capabilities are counted until dropped; the set's are released by clear()
    assert rig.frontier() == {Product(1, 2), Product(2, 1)}
    caps.clear()
    assert rig.frontier() == {Product(2, 5), Product(5, 1)}
    minted.drop()
    assert rig.frontier() == {Product(5, 1)}
    tried.drop()
    run_to_completion(rig.worker)


def test_capability_set_downgrade():
    rig = HeldSource(PRODUCT)
    caps = CapabilitySet([rig.root.delayed(Product(1, 2)), rig.root.delayed(Product(2, 1))])
    rig.root.drop()
    old = list(caps)
    caps.downgrade([Product(1, 3), Product(3, 1), Product(4, 4)])  # (4, 4) is redundant
    assert set(caps.times()) == {Product(1, 3), Product(3, 1)}
    assert not any(c.is_valid for c in old)
    assert rig.frontier() == {Product(1, 3), Product(3, 1)}
    with pytest.raises(CapabilityError, match=r"'Held' \(worker 0\): cannot downgrade"):
        caps.downgrade([Product(2, 2), Product(0, 0)])
    # a failed downgrade changes nothing
    assert set(caps.times()) == {Product(1, 3), Product(3, 1)}
    assert rig.frontier() == {Product(1, 3), Product(3, 1)}
    caps.downgrade([Product(2, 3)])
    assert caps.times() == [Product(2, 3)]
    assert rig.frontier() == {Product(2, 3)}
    caps.downgrade([])
    assert caps.is_empty()
    run_to_completion(rig.worker)
    assert rig.probe.done()


def test_capability_set_follows_the_input_frontier_in_an_operator():
    """Port of the ``CapabilitySet::from_elem`` example: hold what the frontier allows."""
    worker = new_worker()
    handle = InputHandle()
    probe = ProbeHandle()
    sent: list[tuple[Any, tuple[Any, ...]]] = []

    def build(scope):
        def constructor(cap, info):
            caps = CapabilitySet([cap])

            def logic(inp, output):
                caps.downgrade(inp.frontier.frontier())
                for _ in inp:
                    pass
                first = caps.first()
                if first is not None:
                    output.session(first).give(first.time)

            return logic

        stream = scope.input_from(handle).unary_frontier(Pipeline(), "Follower", constructor)
        stream.inspect_time(lambda t, x: sent.append((t, probe.frontier())))
        return stream.probe_with(probe).capture()

    captured = worker.dataflow(build)
    for epoch in (2, 5, 7):
        handle.advance_to(epoch)
        handle.send("x")
        settle(worker)
        assert probe.frontier() == (epoch,)
    handle.close()
    run_to_completion(worker)
    assert probe.done()
    times = [t for t, _ in captured.extract()]
    assert {2, 5, 7} <= set(times)
    assert all(front and front[0] <= t for t, front in sent)


def test_inserting_the_same_capability_twice_keeps_it_held():
    rig = HeldSource()
    held = rig.root.delayed(5)
    caps = CapabilitySet()
    caps.insert(held)
    caps.insert(held)  # already there: nothing to do (releasing it would lose time 5)
    rig.root.downgrade(10)
    assert caps.times() == [5]
    assert rig.frontier() == {5}
    caps.clear()
    rig.root.drop()
    run_to_completion(rig.worker)


def test_a_capability_held_by_a_set_is_released_only_by_the_set():
    rig = HeldSource()
    given = rig.root.delayed(5)
    caps = CapabilitySet([given])
    assert "held" in repr(given) and given.is_valid and not given.is_retained
    for misuse in (given.drop, given.retain, lambda: given.downgrade(6)):
        with pytest.raises(CapabilityError, match=r"'Held' \(worker 0\).*holds it"):
            misuse()
    minted = given.delayed(7)  # minting from a held capability is fine
    minted.drop()
    assert rig.frontier() == {0}
    caps.clear()
    kept = rig.root.delayed(5)
    rig.root.drop()
    assert rig.frontier() == {5}  # `kept` is held at 5
    kept.drop()
    run_to_completion(rig.worker)


def test_a_capability_held_by_a_notificator_is_released_only_by_it():
    rig = HeldSource()
    first, second = rig.root.delayed(5), rig.root.delayed(5)
    notificator = FrontierNotificator()
    notificator.notify_at(first)
    notificator.notify_at(second)
    with pytest.raises(CapabilityError, match="holds it"):
        second.drop()
    with pytest.raises(CapabilityError, match="holds it"):
        FrontierNotificator().notify_at(second)  # one holder at a time
    notificator.make_available([MutableAntichain.from_elem(0)])
    rig.root.drop()
    assert [(c.time, n) for c, n in notificator.pending()] == [(5, 2)]
    assert rig.frontier() == {5}  # the pending request still holds time 5
    delivered = notificator.next([MutableAntichain()])
    assert delivered is first and delivered.is_retained  # given back to the caller
    delivered.drop()
    run_to_completion(rig.worker)


def test_negative_int_time_is_rejected():
    rig = HeldSource()
    with pytest.raises((CapabilityError, TimestampError)):
        rig.root.delayed(-1)
    rig.root.drop()
    run_to_completion(rig.worker)


# -- forward -------------------------------------------------------------------------


def test_forward_sends_every_waiting_batch_on_at_its_time():
    """``output.forward(input)`` is ``for cap, data in input: output.give_batch(cap, data)``."""

    def run(forward: bool) -> list[Any]:
        worker = new_worker()
        handle: InputHandle[int] = InputHandle()

        def build(scope):
            builder = OperatorBuilder("Forward", scope)
            inp = builder.new_input(scope.input_from(handle), Pipeline())
            out, stream = builder.new_output()

            def constructor(caps):
                def logic(frontiers):
                    if forward:
                        out.forward(inp)
                    else:
                        for cap, data in inp:
                            out.give_batch(cap, data)

                return logic

            builder.build(constructor)
            return stream.capture(), stream.probe()

        captured, probe = worker.dataflow(build)
        feed_epochs(worker, handle, probe, {0: [1, 2], 1: [], 2: [3], 5: [4, 5, 6]})
        finish(worker, handle)
        return captured.extract()

    assert run(True) == run(False) == [(0, [1, 2]), (2, [3]), (5, [4, 5, 6])]


def test_forward_outside_the_activation_or_across_a_summary_raises():
    worker = new_worker()
    handle: InputHandle[int] = InputHandle()
    errors: list[CapabilityError] = []
    kept: list[Any] = []

    def build(scope):
        stream = scope.input_from(handle)
        builder = OperatorBuilder("Delayed", scope)
        inp = builder.new_input(stream, Pipeline(), connection={0: 1})  # time + 1 to the output
        out, result = builder.new_output()
        other = OperatorBuilder("Other", scope)
        foreign = other.new_input(stream, Pipeline())
        other.new_output()
        other.build(lambda caps: lambda frontiers: foreign.discard())

        def constructor(caps):
            def logic(frontiers):
                for attempt in (inp, foreign):
                    try:
                        out.forward(attempt)
                    except CapabilityError as exc:
                        errors.append(exc)
                kept.append((out, inp))
                inp.discard()

            return logic

        builder.build(constructor)
        return result.probe()

    probe = worker.dataflow(build)
    feed_epochs(worker, handle, probe, {0: [1]})
    output, inp = kept[0]
    with pytest.raises(CapabilityError, match="only forwarded while the operator runs"):
        output.forward(inp)
    finish(worker, handle)
    assert len(errors) >= 2  # two in each activation
    assert "'Delayed' (worker 0), output 0: cannot forward input 0" in str(errors[0])
    assert "does not reach this output without changing the time" in str(errors[0])
    assert "the input belongs to operator 'Other'" in str(errors[1])
