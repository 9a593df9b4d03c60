"""Operator fusion (``timelypy.dataflow.fusion``): same records, same frontiers, fewer activations.

Every test runs one program twice, with ``Config(fuse=True)`` (the default)
and ``Config(fuse=False)``, and compares what a user can observe: the
records, every operator's input frontier and records in/out after every
step, probe frontiers, and errors.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import timelypy
from tests.stepping import observed
from timelypy import Config, InputHandle, Pipeline, ProbeHandle
from timelypy.dataflow.fusion import fused_edges
from timelypy.progress.metrics import time_operators

# One pipeline step: (kind, parameter).
Op = tuple[str, int]

ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["map", "filter", "flat_map", "inspect", "inspect_batch", "exchange", "split"]
        ),
        st.integers(1, 4),
    ),
    min_size=0,
    max_size=6,
)
# Per epoch: records to send (spread over workers by the program) and steps to take after.
epochs = st.lists(
    st.tuples(st.lists(st.integers(0, 50), max_size=6), st.integers(0, 3)), max_size=6
)


def _apply(stream: timelypy.Stream, op: Op, seen: list[Any]) -> timelypy.Stream:
    kind, k = op
    if kind == "map":
        return stream.map(lambda x: x + k)
    if kind == "filter":
        return stream.filter(lambda x: x % (k + 1) != 0)
    if kind == "flat_map":
        return stream.flat_map(lambda x: [x] * (k % 3))
    if kind == "inspect":
        return stream.inspect(lambda x: seen.append((k, x)))
    if kind == "inspect_batch":
        return stream.inspect_batch(lambda t, d: seen.append((k, t, len(d))))
    if kind == "split":  # the stream read twice (no fused edge), joined again
        evens = stream.filter(lambda x: x % 2 == 0)
        return evens.concat(stream.filter(lambda x: x % 2 == 1).map(lambda x: x * k))
    return stream.exchange(lambda x: x)


def _observe(
    pipeline: list[Op], schedule: list[tuple[list[int], int]], workers: int, fuse: bool
) -> list[Any]:
    """Run the pipeline; return, per worker, everything observable after every step."""

    def program(worker: timelypy.Worker) -> list[Any]:
        handle = InputHandle()
        probe = ProbeHandle()
        seen: list[Any] = []
        out: list[Any] = []

        def build(scope: timelypy.Scope) -> None:
            stream = scope.input_from(handle)
            for op in pipeline:
                stream = _apply(stream, op, seen)
            stream.inspect_time(lambda t, x: out.append((t, x))).probe_with(probe)

        worker.dataflow(build)
        log: list[Any] = []

        def snapshot() -> None:
            log.append(observed(worker, probe, out))

        for epoch, (records, steps) in enumerate(schedule):
            handle.send_batch([r for i, r in enumerate(records) if i % workers == worker.index])
            handle.advance_to(epoch + 1)
            for _ in range(steps):
                worker.step()
                snapshot()
        handle.close()
        while worker.step_or_park(0):
            snapshot()
        snapshot()
        return [log, sorted(seen, key=repr)]

    return timelypy.execute(Config(workers=workers, fuse=fuse), program)


@settings(max_examples=60, deadline=None)
@given(pipeline=ops, schedule=epochs)
# a fused operator whose output is not fused: the scope must take its count at once
@example(
    pipeline=[("map", 1), ("filter", 1), ("exchange", 1)], schedule=[([1, 2, 3], 1), ([4, 5], 2)]
)
# a fused chain whose last operator's output is read twice
@example(
    pipeline=[("map", 1), ("filter", 1), ("split", 2), ("map", 3)],
    schedule=[([1, 2, 3], 1), ([4, 5], 2)],
)
def test_fusion_changes_nothing_a_user_can_observe(
    pipeline: list[Op], schedule: list[tuple[list[int], int]]
) -> None:
    """One worker: records, frontiers and record counts after every step are the unfused run's."""
    assert _observe(pipeline, schedule, 1, True) == _observe(pipeline, schedule, 1, False)


@settings(max_examples=30, deadline=None)
@given(pipeline=ops, schedule=epochs, workers=st.integers(2, 3))
def test_fusion_on_several_workers_gives_the_same_results(
    pipeline: list[Op], schedule: list[tuple[list[int], int]], workers: int
) -> None:
    """Several workers (whose steps interleave by chance): the same records and final counts.

    Every frontier a worker saw moved forward only, in both runs.
    """
    fused = _observe(pipeline, schedule, workers, True)
    unfused = _observe(pipeline, schedule, workers, False)
    for run in (fused, unfused):
        for log, _ in run:
            frontiers = [probe for probe, _, _ in log]
            assert all(not b or (a and a[0] <= b[0]) for a, b in pairwise(frontiers))
    assert [(log[-1], seen) for log, seen in fused] == [(log[-1], seen) for log, seen in unfused]


def _edges(build: Callable[[timelypy.Scope], Any], fuse: bool = True) -> list[tuple[str, str]]:
    def program(worker: timelypy.Worker) -> list[tuple[str, str]]:
        scopes: list[Any] = []

        def keep(scope: timelypy.Scope) -> None:
            scopes.append(scope.subgraph)
            build(scope)

        worker.dataflow(keep)
        (dataflow,) = scopes
        names = [child.name if child is not None else "" for child in dataflow.children]
        return [(names[p], names[c]) for p, _, c in fused_edges(dataflow)]

    return timelypy.execute(Config(fuse=fuse), program)[0]


def test_which_edges_fuse() -> None:
    """A chain fuses; a stream read twice, an exchange pact and a notificator do not."""

    def build(scope: timelypy.Scope) -> None:
        numbers = scope.to_stream(range(10))
        chain = numbers.map(str).filter(bool).inspect(lambda x: None)
        chain.probe()
        twice = chain.map(len)  # the inspect's output has two readers: neither edge fuses
        twice.exchange(lambda x: x).map(abs).probe()
        twice.unary_notify(timelypy.Pipeline(), "Notify", [], lambda i, o, n: i.discard())
        scope.input_from(InputHandle()).map(abs).probe()  # an input handle's operator too

    # the Exchange operator's own output feeds map(abs) by Pipeline: that edge fuses
    assert _edges(build) == [
        ("ToStream", "Map"),
        ("Map", "Filter"),
        ("Filter", "Inspect"),
        ("Exchange", "Map"),
        ("Map", "Probe"),
        ("Input", "Map"),
        ("Map", "Probe"),
    ]
    assert _edges(build, fuse=False) == _edges(build)  # fused_edges reports what could fuse


def test_fused_chain_runs_in_one_activation() -> None:
    """``map`` -> ``filter`` -> ``inspect`` after an input: no activation per epoch."""

    def program(worker: timelypy.Worker) -> dict[str, int]:
        handle = InputHandle()
        seen: list[int] = []
        probe = worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(lambda x: x * 3)
                .filter(lambda x: x % 2 == 0)
                .inspect(seen.append)
                .probe()
            )
        )
        for epoch in range(5):
            handle.send_batch(list(range(epoch * 4, epoch * 4 + 4)))
            handle.advance_to(epoch + 1)
            while probe.less_than(handle.time):
                worker.step()
        assert seen == [x * 3 for x in range(20) if x * 3 % 2 == 0]
        (dataflow,) = worker.metrics()["dataflows"]
        return {
            op["name"]: (op["activations"], op["records_in"], op["records_out"])
            for op in dataflow["operators"]
        }

    fused = timelypy.execute(Config(), program)[0]
    unfused = timelypy.execute(Config(fuse=False), program)[0]
    # every operator runs once when the dataflow starts; fused members never again, and
    # neither does the map: it is fused after the input, whose flushes run the chain
    assert fused["Map"][0] == 1 and fused["Filter"][0] == 1 and fused["Inspect"][0] == 1
    assert unfused["Filter"][0] >= 5 and unfused["Inspect"][0] >= 5
    # records in and out are counted all the same
    assert {k: v[1:] for k, v in fused.items()} == {k: v[1:] for k, v in unfused.items()}
    assert fused["Filter"][1:] == (20, 10)


@pytest.mark.parametrize("fuse", [True, False])
def test_an_inputs_chain_runs_as_the_handle_flushes(fuse: bool) -> None:
    """Fused after an input, the chain runs in the handle's call; frontiers move in a step.

    What the chain leaves for an operator it is not fused with (the
    ``unary_frontier`` here) is counted in the same step as the input's
    downgrade: that operator sees the batch before its frontier passes it.
    """

    def program(worker: timelypy.Worker) -> list[Any]:
        handle = InputHandle()
        log: list[Any] = []
        chain: list[Any] = []

        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                log.append(("batch", cap.time, list(data)))
            log.append(("frontier", inp.frontier.frontier()))

        probe = worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(lambda x: x * 2)
                .inspect_time(lambda t, x: chain.append((t, x)))
                .unary_frontier(timelypy.Pipeline(), "Later", lambda cap, info: logic)
                .probe()
            )
        )
        for epoch in range(3):
            handle.send_batch([epoch, epoch + 10])
            handle.advance_to(epoch + 1)
            ran = list(chain)  # before any step
            frontier = probe.frontier()
            while probe.less_than(handle.time):
                worker.step()
            log.append(("epoch", epoch, ran, frontier, list(chain)))
            chain.clear()
        return log

    log = timelypy.execute(Config(fuse=fuse), program)[0]
    epochs = [entry for entry in log if entry[0] == "epoch"]
    for epoch, ran, frontier, seen in (entry[1:] for entry in epochs):
        assert seen == [(epoch, epoch * 2), (epoch, epoch * 2 + 20)]
        assert ran == (seen if fuse else [])  # fused: already in send_batch
        assert frontier == (epoch,)  # no frontier moved before the step
    batches = [entry for entry in log if entry[0] == "batch"]
    assert batches == [("batch", e, [2 * e, 2 * e + 20]) for e in range(3)]
    # every batch reached the unfused operator before its frontier passed the batch's time
    for e in range(3):
        at = log.index(("batch", e, [2 * e, 2 * e + 20]))
        assert all(entry[1] != (e + 1,) for entry in log[:at] if entry[0] == "frontier")


@pytest.mark.parametrize("fuse", [True, False])
def test_an_unread_batch_from_an_inputs_chain_holds_the_frontier(fuse: bool) -> None:
    """A batch the chain leaves for an operator that does not read it yet is counted.

    The ``Hold`` operator reads its input only once the program lets it, so
    its first batch (at 0) keeps its frontier, and the probe after it, at 0.
    """

    def program(worker: timelypy.Worker) -> tuple[Any, Any]:
        handle = InputHandle()
        read: list[Any] = []
        let: list[bool] = []

        def logic(inp: Any, out: Any) -> None:
            if let:  # scheduled again when the input closes
                for cap, data in inp:
                    read.append((cap.time, list(data)))

        probe = worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(lambda x: x + 1)
                .unary_frontier(timelypy.Pipeline(), "Hold", lambda cap, info: logic)
                .probe()
            )
        )
        for _ in range(3):
            worker.step()  # every operator's first activation, before any record
        for epoch in range(3):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            for _ in range(3):
                worker.step()
        held = probe.frontier()
        let.append(True)
        handle.close()
        while worker.step_or_park(0):
            pass
        return held, read

    held, read = timelypy.execute(Config(fuse=fuse), program)[0]
    assert held == (0,)
    assert read == [(0, [1]), (1, [2]), (2, [3])]


@pytest.mark.parametrize("fuse", [True, False])
def test_an_inputs_batches_reach_the_chain_in_order(fuse: bool) -> None:
    """A batch queued before the chain was fused (sent while building) is not overtaken."""

    def program(worker: timelypy.Worker) -> list[int]:
        handle = InputHandle()
        seen: list[int] = []

        def build(scope: timelypy.Scope) -> ProbeHandle:
            probe = scope.input_from(handle).map(lambda x: seen.append(x) or x).probe()
            handle.send_batch([1])  # the dataflow is not built yet: this batch is queued
            return probe

        probe = worker.dataflow(build)
        handle.send_batch([2])
        handle.send_batch([3])
        handle.advance_to(1)
        while probe.less_than(1):
            worker.step()
        return seen

    assert timelypy.execute(Config(fuse=fuse), program)[0] == [1, 2, 3]


def test_an_inputs_chain_that_sends_into_another_input_stays_fused() -> None:
    """A fused function after input ``a`` sends into input ``b``: ``a``'s chain goes on fused.

    Every count is taken: once the probe has passed, no operator has one
    left unextracted and no operator input holds a pointstamp.
    """

    def program(worker: timelypy.Worker) -> tuple[Any, ...]:
        a: InputHandle[int] = InputHandle()
        b: InputHandle[int] = InputHandle()
        mapped: list[int] = []
        scopes: list[Any] = []

        def build(scope: timelypy.Scope) -> ProbeHandle:
            scopes.append(scope.subgraph)
            left = (
                scope.input_from(a)
                .inspect(lambda x: b.send_batch([x + 100]))
                .map(lambda x: mapped.append(x) or x)
            )
            return left.concat(scope.input_from(b).map(lambda x: x)).probe()

        probe = worker.dataflow(build)
        for _ in range(3):
            worker.step()  # every operator's first activation
        a.send_batch([1])
        a.advance_to(1)
        b.advance_to(1)
        in_call = list(mapped)
        while probe.less_than(1):
            worker.step()
        (dataflow,) = scopes
        left = [dict(counts) for child in dataflow.children[1:] for counts in child.produceds]
        held = [
            list(port.pointstamps.updates())
            for node in range(1, len(dataflow.children))
            for port in dataflow.tracker.node_state(node).targets
        ]
        a.close()
        b.close()
        while worker.step_or_park(0):
            pass
        (metrics,) = worker.metrics(completed=True)["dataflows"]
        counted = [(op["records_in"], op["records_out"]) for op in metrics["operators"]]
        return in_call, left, held, counted

    fused = timelypy.execute(Config(), program)[0]
    unfused = timelypy.execute(Config(fuse=False), program)[0]
    assert fused[0] == [1] and unfused[0] == []
    assert fused[3] == unfused[3]  # records in and out per operator, at the end
    assert all(not counts for counts in fused[1]) and all(not held for held in fused[2])


def test_an_error_in_an_inputs_chain_comes_from_advance_to() -> None:
    """The map fused after an input raises in ``advance_to``, named with its worker."""

    def program(worker: timelypy.Worker) -> None:
        handle = InputHandle()
        worker.dataflow(lambda scope: scope.input_from(handle).map(lambda x: 1 // x).probe())
        handle.send(1)
        handle.advance_to(1)
        handle.send(0)
        try:
            handle.advance_to(2)
        except ZeroDivisionError as exc:
            exc.add_note("from advance_to")
            raise

    with pytest.raises(ZeroDivisionError) as info:
        timelypy.execute(Config(), program)
    assert info.value.timelypy_operator == "Map"  # type: ignore[attr-defined]
    assert info.value.timelypy_worker == 0  # type: ignore[attr-defined]
    assert "from advance_to" in info.value.__notes__


def test_error_in_a_fused_operator_names_it() -> None:
    """The operator whose function raised is named, with its worker, as without fusion."""

    def boom(x: int) -> int:
        if x == 3:
            raise ValueError("bad record 3")
        return x

    def build(scope: timelypy.Scope) -> None:
        scope.to_stream(range(5)).map(lambda x: x).filter(lambda x: True).map(boom).probe()

    notes = []
    for fuse in (True, False):
        with pytest.raises(ValueError, match="bad record 3") as info:
            timelypy.execute(Config(fuse=fuse), lambda worker: worker.dataflow(build))
        assert info.value.timelypy_operator == "Map"  # type: ignore[attr-defined]
        assert info.value.timelypy_worker == 0  # type: ignore[attr-defined]
        assert any("raised in operator 'Map'" in note for note in info.value.__notes__)
        notes.append([note for note in info.value.__notes__ if "raised in operator" in note])
    # the same Map, in the middle of the chain (its address names it), either way
    assert notes[0] == notes[1] and "(0, 4)" in notes[0][0]


def test_a_logger_turns_fusion_off() -> None:
    """With a "timely" logger every operator is scheduled on its own (and logged)."""

    def program(worker: timelypy.Worker) -> list[int]:
        worker.log_register().insert("timely", lambda *batch: None)
        worker.dataflow(lambda scope: scope.to_stream(range(3)).map(str).filter(bool).probe())
        while worker.step_or_park(0):
            pass
        (dataflow,) = worker.metrics(completed=True)["dataflows"]
        return [op["activations"] for op in dataflow["operators"]]

    activations = timelypy.execute(Config(), program)[0]
    assert all(n > 0 for n in activations), activations


@pytest.mark.parametrize("fuse", [True, False])
def test_exchange_after_a_fused_chain(fuse: bool) -> None:
    """A fused chain feeding an exchange on three workers loses and duplicates nothing."""

    def program(worker: timelypy.Worker) -> list[int]:
        out: list[int] = []
        worker.dataflow(
            lambda scope: (
                scope.to_stream(range(worker.index, 300, worker.peers))
                .map(lambda x: x + 1)
                .filter(lambda x: x % 3 != 0)
                .exchange(lambda x: x)
                .inspect(out.append)
                .probe()
            )
        )
        return out

    results = timelypy.execute(Config(workers=3, fuse=fuse), program)
    assert sorted(x for part in results for x in part) == [
        x + 1 for x in range(300) if (x + 1) % 3 != 0
    ]
    assert all(x % 3 == worker for worker, part in enumerate(results) for x in part)


@pytest.mark.parametrize("promise", ["fuse", "passes_through"])
def test_an_operator_that_breaks_its_promise_and_keeps_a_capability_is_refused(
    promise: str,
) -> None:
    """``set_fuse`` and ``set_passes_through`` promise no capability is kept: breaking it raises."""

    def program(worker: timelypy.Worker) -> None:
        handle = InputHandle()
        kept: list[Any] = []

        def build(scope: timelypy.Scope) -> ProbeHandle:
            builder = timelypy.OperatorBuilder("Keeper", scope)
            pact = timelypy.Pipeline() if promise == "fuse" else timelypy.Exchange(lambda x: x)
            inp = builder.new_input(scope.input_from(handle), pact)
            out, stream = builder.new_output()

            def constructor(caps: list[Any]) -> Callable[[Any], None]:
                def logic(frontiers: Any) -> None:
                    for cap, data in inp:
                        kept.append(cap.retain())  # breaks the promise
                        out.session(cap).give_batch(data)

                return logic

            builder.build(constructor)
            if promise == "fuse":
                builder.set_fuse(lambda time, records: records)
            else:
                builder.set_passes_through()
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step()  # the initial capabilities go; the frontiers are joined
        handle.send(1)
        handle.advance_to(1)
        for _ in range(100):  # the kept capability would hold the probe forever
            if not probe.less_than(1):
                break
            worker.step()

    with pytest.raises(timelypy.errors.TimelyError, match="never hold a capability"):
        timelypy.execute(Config(), program)


def test_only_a_one_input_one_output_operator_passes_its_frontier_through() -> None:
    def program(worker: timelypy.Worker) -> None:
        def build(scope: timelypy.Scope) -> None:
            builder = timelypy.OperatorBuilder("Two", scope)
            builder.new_input(scope.to_stream([1]))
            builder.new_input(scope.to_stream([2]))
            builder.new_output()
            builder.set_passes_through()

        worker.dataflow(build)

    with pytest.raises(timelypy.errors.PortError, match="'Two': only an operator with one input"):
        timelypy.execute(Config(), program)


#: Per head of a fused chain: the aliases the tracker keeps, as
#: ``(kind, operator, port) -> (operator, kind of the group's head)``.
_SHARED = {
    # The exchange passes its input's frontier through: its output and the chain
    # after it join its input, where the records in flight between workers are counted.
    "exchange": {
        (1, "Exchange", 0): ("Exchange", 0),
        (0, "Inspect", 0): ("Exchange", 0),
        (1, "Inspect", 0): ("Exchange", 0),
        (0, "Probe", 0): ("Exchange", 0),
    },
    # The input's output is mirrored (nothing reaches it): the chain fused after
    # it shares the antichain of the input's own capabilities.
    "map": {
        (0, "Map", 0): ("Input", 1),
        (1, "Map", 0): ("Input", 1),
        (0, "Inspect", 0): ("Input", 1),
        (1, "Inspect", 0): ("Input", 1),
        (0, "Probe", 0): ("Input", 1),
    },
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("head", ["exchange", "map"])
def test_a_fused_chain_shares_the_frontier_before_it(head: str, fuse: bool, workers: int) -> None:
    """Fused, a chain is one frontier: its exchange's input's, or its input's own.

    ``input -> exchange -> inspect -> probe`` and ``input -> map -> inspect
    -> probe`` each keep one frontier from the chain's head: after an
    exchange, the exchange's input's; after the map, the input's own (a
    downgrade updates one antichain for the whole chain).  A batch queued
    while the dataflow was built, and batches queued while operators are
    timed, are counted and taken in one pass: the probe passes every epoch,
    and every record arrives once.
    """

    def program(worker: timelypy.Worker) -> tuple[dict[Any, Any], bool, list[int], list[int]]:
        handle = InputHandle()
        probe = ProbeHandle()
        scopes: list[Any] = []
        seen: list[int] = []

        def build(scope: timelypy.Scope) -> None:
            scopes.append(scope.subgraph)
            stream = scope.input_from(handle)
            stream = stream.exchange(lambda x: x) if head == "exchange" else stream.map(abs)
            stream.inspect(seen.append).probe_with(probe)
            handle.send_batch([-1])  # queued: the chain is not fused yet

        worker.dataflow(build)
        passed: list[int] = []
        try:
            for epoch in range(12):
                time_operators(4 <= epoch < 8)
                handle.send(epoch)
                handle.advance_to(epoch + 1)
                while probe.less_than(epoch + 1):
                    worker.step()
                passed.append(epoch)
        finally:
            time_operators(False)
        (dataflow,) = scopes
        names = [child.name if child is not None else "" for child in dataflow.children]
        tracker = dataflow.tracker
        front = (
            tracker.node_state(1).sources[0]
            if head == "map"
            else (tracker.node_state(2).targets[0])
        )
        shared = tracker.node_state(4).targets[0].implications is front.implications
        handle.close()
        while worker.step_or_park(0):
            pass
        aliases = {
            (kind, names[node], port): (names[to[1]], to[0])
            for (kind, node, port), to in dataflow.tracker._aliases.items()
        }
        return aliases, shared, passed, seen

    results = timelypy.execute(Config(workers=workers, fuse=fuse), program)
    for aliases, shared, passed, _ in results:
        assert aliases == (_SHARED[head] if fuse else {})
        assert shared is fuse
        assert passed == list(range(12))
    records = sorted(x for *_, seen in results for x in seen)
    expected = [-1, *range(12)] if head == "exchange" else [1, *range(12)]
    assert records == sorted(expected * workers)


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize("sender_first", [True, False])
def test_an_operator_sending_into_an_input_sees_the_same_frontiers_fused(
    sender_first: bool, timed: bool
) -> None:
    """An operator's logic sends into input ``b`` mid-pass: fused or not, the same frontiers.

    Under operator timing the batch waits in the queue of the map after
    ``b`` (counted with ``b``'s changes in the next pass, which the map runs
    too); the map's input shares ``b``'s frontier, which ``b``'s capability
    holds at the batch's time meanwhile.  Whether the sender comes before
    the map in the scope's order or after it, the probes show what the
    unfused run shows after every step (the records may reach the map a
    step sooner fused, as any fused chain's do).
    """

    def program(worker: timelypy.Worker) -> tuple[list[Any], list[Any]]:
        a: InputHandle[int] = InputHandle()
        b: InputHandle[int] = InputHandle()
        mapped: list[Any] = []
        probes: list[ProbeHandle] = []

        def build(scope: timelypy.Scope) -> None:
            def b_chain() -> None:
                stream = scope.input_from(b).map(lambda x: x + 1)
                probes.append(stream.inspect_time(lambda t, x: mapped.append((t, x))).probe())

            if not sender_first:
                b_chain()
            probes.append(scope.input_from(a).inspect(lambda x: b.send_batch([x * 10])).probe())
            if sender_first:
                b_chain()

        worker.dataflow(build)
        log: list[Any] = []
        time_operators(timed)
        try:
            for epoch in range(5):
                a.send_batch([epoch])
                a.advance_to(epoch + 1)
                for _ in range(2):
                    worker.step()
                    log.append([p.frontier() for p in probes])
                b.advance_to(epoch + 1)
                for _ in range(2):
                    worker.step()
                    log.append([p.frontier() for p in probes])
            a.close()
            b.close()
            while worker.step_or_park(0):
                log.append([p.frontier() for p in probes])
        finally:
            time_operators(False)
        return log, mapped

    fused = timelypy.execute(Config(), program)[0]
    unfused = timelypy.execute(Config(fuse=False), program)[0]
    assert fused[0] == unfused[0]
    assert fused[1] == unfused[1] == [(e, e * 10 + 1) for e in range(5)]


@pytest.mark.parametrize("fuse", [True, False])
def test_map_and_filter_treat_one_record_batches_as_any_batch(fuse: bool) -> None:
    """A one-record batch (the small-epoch path) gives what a longer batch gives, record by record.

    The predicate returns truthy and falsy non-bools, and a kept one-record
    batch must still hold the record itself, not the predicate's value.
    """
    batches = [[3], [0, 1, 2, 5], [4], [7], [], [6, 8], [9]]

    def program(worker: timelypy.Worker) -> list[tuple[int, list[Any]]]:
        handle = InputHandle()
        seen: list[tuple[int, list[Any]]] = []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(lambda x: (x, x % 3))
                .filter(lambda pair: pair[1])  # 0 drops, 1 and 2 keep
                .inspect_batch(lambda t, d: seen.append((t, list(d))))
                .probe()
            )
        )
        for epoch, batch in enumerate(batches):
            handle.send_batch(list(batch))
            handle.advance_to(epoch + 1)
            worker.step()
        return seen

    seen = timelypy.execute(Config(fuse=fuse), program)[0]
    expected = [(t, [(x, x % 3) for x in batch if x % 3]) for t, batch in enumerate(batches)]
    assert [(t, d) for t, d in seen if d] == [(t, d) for t, d in expected if d]


@pytest.mark.parametrize("fuse", [True, False])
def test_batches_that_are_not_lists_become_lists(fuse: bool) -> None:
    """``send_batch`` and ``give_batch`` given a tuple, a generator or a set pass on a list.

    Operators index and hand on their batches as lists (``map`` on a
    one-record batch takes ``data[0]``), so any other iterable is copied
    into one where it enters: the input handle and an operator's outputs.
    """

    def program(worker: timelypy.Worker) -> list[tuple[str, list[Any]]]:
        handle = InputHandle()
        seen: list[tuple[str, list[Any]]] = []

        def build(scope: timelypy.Scope) -> None:
            def constructor(cap: Any, info: Any) -> Any:
                def logic(inp: Any, output: Any) -> None:
                    for icap, data in inp:
                        output.session(icap).give_batch(tuple(x * 10 for x in data))
                        output.give_batch(icap, (x * 100 for x in data))

                return logic

            (
                scope.input_from(handle)
                .map(lambda x: x + 1)
                .filter(lambda x: True)
                .unary(Pipeline(), "Tuples", constructor)
                .inspect_batch(lambda t, d: seen.append((type(d).__name__, list(d))))
                .probe()
            )

        worker.dataflow(build)
        for epoch, batch in enumerate([(5,), (x for x in [6]), {7}, (8, 9)]):
            handle.send_batch(batch)
            handle.advance_to(epoch + 1)
            worker.step()
        return seen

    seen = timelypy.execute(Config(fuse=fuse), program)[0]
    assert {kind for kind, _ in seen} == {"list"}
    assert sorted(x for _, batch in seen for x in batch) == sorted(
        [60, 600, 70, 700, 80, 800, 90, 100, 900, 1000]
    )
