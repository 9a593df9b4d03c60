"""Property tests of the runtime: random dataflows against plain-Python references.

Three families, each run on 1-4 workers (``Config.process(n)``) with records
sent through :class:`~timelypy.InputHandle` at random epochs (strictly
increasing times, some empty) and random amounts of stepping in between:

* **Pipelines** (strategies in ``tests/strategies.py``): random compositions
  of map, filter, flat_map, exchange, concat of two branches of one stream,
  branch-like splitting with a pair of filters, and bounded feedback loops in
  iterative scopes (nested up to two deep).  The multiset of
  ``(time, record)`` seen by ``inspect_time`` on all workers together must
  equal a plain-Python evaluation of the same description, epoch by epoch.
* **Probes**: the frontier of every probe (at the output, and inside each
  loop, with ``Product`` times) is recorded after every step; each sequence
  must be monotone, and no record may reach the output probe's stream at a
  time the probe had already passed on that worker.
* **Notifications**: a ``unary_notify`` operator requests notifications at
  random times (from ``init``, from data, and from earlier notifications);
  each requested time is delivered exactly once with the number of requests
  merged into it, only once the input frontier has passed it, never before
  data at that time, and in non-decreasing order on each worker.

The checkers are plain functions; ``test_checkers_*`` feed them violations
to show they can fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import timelypy
from tests.strategies import epoch_inputs, pipeline_ops
from timelypy import Config, InputHandle, Pipeline, ProbeHandle, Product
from timelypy.order import less_equal

Epochs = list[tuple[int, list[tuple[int, int]], int]]

workers_counts = st.integers(1, 4)


# -- pipelines: building and reference evaluation ----------------------------------------


def _keep_times(stream: timelypy.Stream, keep: Callable[[Any], bool]) -> timelypy.Stream:
    """Pass on the batches whose time ``keep`` accepts."""

    def constructor(cap: Any, info: Any) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                if keep(cap.time):
                    out.session(cap).give_batch(data)

        return logic

    return stream.unary(Pipeline(), "KeepTimes", constructor)


def build_pipeline(
    stream: timelypy.Stream, ops: Sequence[tuple], probes: list[ProbeHandle] | None
) -> timelypy.Stream:
    """Build the operators ``ops`` describe after ``stream``; return the result.

    Each loop adds a probe (inside its iterative scope) to ``probes``, unless
    ``probes`` is ``None``.
    """
    for op in ops:
        kind = op[0]
        if kind == "map":
            _, a, b = op
            stream = stream.map(lambda x, a=a, b=b: a * x + b)
        elif kind == "filter":
            _, m, r = op
            stream = stream.filter(lambda x, m=m, r=r: x % m == r)
        elif kind == "flat_map":
            _, k = op
            stream = stream.flat_map(lambda x, k=k: [x + i for i in range(k)])
        elif kind == "exchange":
            _, salt = op
            stream = stream.exchange(lambda x, salt=salt: x + salt)
        elif kind == "concat":
            _, left, right = op
            stream = build_pipeline(stream, left, probes).concat(
                build_pipeline(stream, right, probes)
            )
        elif kind == "branch":
            _, m, r, yes, no = op
            taken = build_pipeline(stream.filter(lambda x, m=m, r=r: x % m == r), yes, probes)
            other = build_pipeline(stream.filter(lambda x, m=m, r=r: x % m != r), no, probes)
            stream = taken.concat(other)
        elif kind == "loop":
            stream = _build_loop(stream, op, probes)
        else:
            raise ValueError(f"unknown operation {op!r}")
    return stream


def _build_loop(
    stream: timelypy.Stream, op: tuple, probes: list[ProbeHandle] | None
) -> timelypy.Stream:
    _, rounds, emit_all, body = op

    def loop(inner: timelypy.Scope) -> timelypy.Stream:
        handle, cycle = inner.feedback(1)
        after = build_pipeline(stream.enter(inner).concat(cycle), body, probes)
        _keep_times(after, lambda t: t.inner < rounds - 1).connect_loop(handle)
        leaving = after if emit_all else _keep_times(after, lambda t: t.inner == rounds - 1)
        if probes is None:
            return leaving.leave()
        probe = ProbeHandle()
        probes.append(probe)
        return leaving.probe_with(probe).leave()

    return stream.scope.iterative(loop)


def reference(ops: Sequence[tuple], records: Iterable[int]) -> list[int]:
    """Evaluate the pipeline ``ops`` on ``records`` in plain Python (order ignored)."""
    data = list(records)
    for op in ops:
        kind = op[0]
        if kind == "map":
            data = [op[1] * x + op[2] for x in data]
        elif kind == "filter":
            data = [x for x in data if x % op[1] == op[2]]
        elif kind == "flat_map":
            data = [x + i for x in data for i in range(op[1])]
        elif kind == "exchange":
            pass
        elif kind == "concat":
            data = reference(op[1], data) + reference(op[2], data)
        elif kind == "branch":
            _, m, r, yes, no = op
            data = reference(yes, [x for x in data if x % m == r]) + reference(
                no, [x for x in data if x % m != r]
            )
        elif kind == "loop":
            _, rounds, emit_all, body = op
            result: list[int] = []
            for round_ in range(rounds):
                data = reference(body, data)
                if emit_all or round_ == rounds - 1:
                    result.extend(data)
            data = result
        else:
            raise ValueError(f"unknown operation {op!r}")
    return data


def expected_outputs(ops: Sequence[tuple], epochs: Epochs) -> Counter[tuple[int, int]]:
    """The multiset of ``(time, record)`` the pipeline must produce for ``epochs``."""
    expected: Counter[tuple[int, int]] = Counter()
    for time, records, _ in epochs:
        expected.update((time, y) for y in reference(ops, [x for _, x in records]))
    return expected


# -- running a pipeline -----------------------------------------------------------------


@dataclass
class WorkerRecord:
    """What one worker saw: outputs in arrival order and probe frontiers after each step."""

    outputs: list[tuple[int, int]] = field(default_factory=list)
    #: ``(len(outputs), output probe frontier)`` after every step.
    snapshots: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)
    #: For each loop's probe, its frontier after every step.
    inner_frontiers: list[list[tuple[Any, ...]]] = field(default_factory=list)


#: Steps a worker may take after closing its input before the run counts as hung;
#: the largest pipelines finish in a few hundred.
STEP_BUDGET = 20_000


def feed_and_finish(
    worker: timelypy.Worker,
    handle: InputHandle,
    epochs: Epochs,
    step: Callable[[], Any],
    done: Callable[[], bool],
) -> None:
    """Send this worker's share of ``epochs``, close ``handle``, and step until ``done()``.

    Each epoch's records go to worker ``choice % peers``, followed by that
    epoch's number of steps.  A worker not done within :data:`STEP_BUDGET`
    steps of closing its input fails the run (and so stops the others)
    instead of hanging the test.
    """
    for time, sent, steps in epochs:
        if time != handle.time:
            handle.advance_to(time)
        for choice, x in sent:
            if choice % worker.peers == worker.index:
                handle.send(x)
        for _ in range(steps):
            step()
    handle.close()
    for _ in range(STEP_BUDGET):
        if done():
            return
        step()
    raise AssertionError(
        f"worker {worker.index} not done {STEP_BUDGET} steps after closing its input: "
        f"{worker.holders()}"
    )


def run_pipeline(
    ops: Sequence[tuple],
    epochs: Epochs,
    workers: int,
    progress_mode: str = "eager",
    inner_probes: bool = True,
) -> list[WorkerRecord]:
    """Run the pipeline on ``workers`` workers, feeding ``epochs``; return each worker's record.

    ``inner_probes=False`` builds loops without a probe inside them.
    """
    records = [WorkerRecord() for _ in range(workers)]

    def program(worker: timelypy.Worker) -> None:
        record = records[worker.index]
        handle, probe = InputHandle(), ProbeHandle()
        inner: list[ProbeHandle] = []
        collect = record.outputs.append

        def build(scope: timelypy.Scope) -> None:
            out = build_pipeline(scope.input_from(handle), ops, inner if inner_probes else None)
            out.inspect_time(lambda t, x: collect((t, x))).probe_with(probe)

        worker.dataflow(build)
        record.inner_frontiers = [[] for _ in inner]

        def step() -> None:
            worker.step()
            record.snapshots.append((len(record.outputs), probe.frontier()))
            for frontiers, inner_probe in zip(record.inner_frontiers, inner, strict=True):
                frontiers.append(inner_probe.frontier())

        feed_and_finish(
            worker, handle, epochs, step, lambda: probe.done() and all(p.done() for p in inner)
        )

    timelypy.execute(Config(workers=workers, progress_mode=progress_mode), program)
    return records


def describe(ops: Sequence[tuple], epochs: Epochs, workers: int) -> str:
    """The inputs of a run, for failure messages."""
    return f"\n  ops={ops!r}\n  epochs={epochs!r}\n  workers={workers}"


# -- checkers -----------------------------------------------------------------------------


def multiset_mismatch(
    got: Counter[tuple[int, int]], expected: Counter[tuple[int, int]]
) -> str | None:
    """Describe how ``got`` differs from ``expected``, or ``None`` if they are equal."""
    if got == expected:
        return None
    missing = sorted((expected - got).elements())
    unexpected = sorted((got - expected).elements())
    return f"missing {missing[:20]} and unexpected {unexpected[:20]} (time, record) pairs"


def frontier_regression(frontiers: Sequence[tuple[Any, ...]]) -> str | None:
    """Find a step where a frontier went backwards; ``None`` if the sequence is monotone.

    Monotone: every element of a later frontier is ``>=`` some element of the
    frontier before it (so an empty frontier stays empty).
    """
    for step, (before, after) in enumerate(pairwise(frontiers)):
        for time in after:
            if not any(less_equal(b, time) for b in before):
                return f"step {step + 1}: frontier {before!r} became {after!r}"
    return None


def late_output(record: WorkerRecord) -> str | None:
    """Find an output that arrived at a time the worker's probe had already passed."""
    outputs = record.outputs
    for step, (seen, frontier) in enumerate(record.snapshots):
        for time, x in outputs[seen:]:
            if not any(less_equal(f, time) for f in frontier):
                return (
                    f"after step {step} the probe frontier was {frontier!r}, yet {x!r} "
                    f"arrived later at time {time!r}"
                )
    return None


# -- pipeline properties ------------------------------------------------------------------


@given(ops=pipeline_ops(), epochs=epoch_inputs(), workers=workers_counts)
def test_pipeline_output_matches_reference(ops: list[tuple], epochs: Epochs, workers: int) -> None:
    """At every time, all workers' outputs together are the reference's output."""
    records = run_pipeline(ops, epochs, workers)
    got = Counter(pair for record in records for pair in record.outputs)
    problem = multiset_mismatch(got, expected_outputs(ops, epochs))
    assert problem is None, problem + describe(ops, epochs, workers)


@given(
    ops=pipeline_ops(), epochs=epoch_inputs(), workers=workers_counts, inner_probes=st.booleans()
)
def test_pipeline_output_matches_reference_in_demand_mode(
    ops: list[tuple], epochs: Epochs, workers: int, inner_probes: bool
) -> None:
    """Timely's demand progress mode holds batches back; outputs and probes must not change."""
    records = run_pipeline(ops, epochs, workers, progress_mode="demand", inner_probes=inner_probes)
    got = Counter(pair for record in records for pair in record.outputs)
    problem = multiset_mismatch(got, expected_outputs(ops, epochs))
    assert problem is None, problem + describe(ops, epochs, workers)
    for index, record in enumerate(records):
        frontiers = [f for _, f in record.snapshots]
        problem = frontier_regression(frontiers)
        assert problem is None, f"worker {index}: {problem}" + describe(ops, epochs, workers)
        assert frontiers and frontiers[-1] == (), f"worker {index}: the probe is not done"
        problem = late_output(record)
        assert problem is None, f"worker {index}: {problem}" + describe(ops, epochs, workers)


#: A case CI found: four workers in demand mode, a loop whose records cross
#: workers twice a round.  Every worker held back its inner progress, each
#: batch's decrements implied by the loop's stale view of the input frontier,
#: which the loop (all of whose operators ignore frontiers) never ran to update.
DEMAND_LOOP_CASE = (
    [
        (
            "loop",
            3,
            True,
            [("exchange", 4), ("filter", 2, 0), ("exchange", 1), ("exchange", 4), ("filter", 2, 1)],
        )
    ],
    [
        (0, [], 3),
        (2, [(2, -6)], 3),
        (5, [(2, 30), (0, -9)], 3),
        (7, [(1, 23), (1, -2), (1, 14), (0, 27)], 3),
        (10, [], 3),
        (11, [(1, 30)], 1),
    ],
)


@pytest.mark.parametrize("inner_probes", [False, True])
def test_demand_mode_loops_finish_when_every_worker_holds_progress(inner_probes: bool) -> None:
    """Regression: repeated runs of :data:`DEMAND_LOOP_CASE` all finish with the right output.

    Whether every worker holds at once depends on how the threads interleave,
    so the case runs many times; before the fix about one run in a few dozen
    stalled.
    """
    ops, epochs = DEMAND_LOOP_CASE
    expected = expected_outputs(ops, epochs)
    for _ in range(60):
        records = run_pipeline(ops, epochs, 4, progress_mode="demand", inner_probes=inner_probes)
        got = Counter(pair for record in records for pair in record.outputs)
        problem = multiset_mismatch(got, expected)
        assert problem is None, problem


#: A loop in a loop, four workers, demand mode.  The outer loop's batch is held
#: while the inner loop's report (its boundary counts) waits to be applied; the
#: report is what makes the batch's decrements demanded, so the batch must be
#: checked again once it is applied, in the same pass.
NESTED_DEMAND_CASE = (
    [("loop", 2, True, [("loop", 2, True, [("map", -1, 0)])])],
    [(0, [(0, 1)], 1)],
)


def test_demand_mode_rechecks_a_held_batch_after_a_nested_scope_reports() -> None:
    """Regression: :data:`NESTED_DEMAND_CASE` finishes with the right output, every run."""
    ops, epochs = NESTED_DEMAND_CASE
    expected = expected_outputs(ops, epochs)
    for _ in range(10):
        records = run_pipeline(ops, epochs, 4, progress_mode="demand")
        got = Counter(pair for record in records for pair in record.outputs)
        problem = multiset_mismatch(got, expected)
        assert problem is None, problem
        assert all(record.snapshots[-1][1] == () for record in records)


@given(ops=pipeline_ops(), epochs=epoch_inputs(), workers=workers_counts)
def test_probe_frontiers_never_regress(ops: list[tuple], epochs: Epochs, workers: int) -> None:
    """Probe frontiers only advance, and end empty; no output comes after its time passed."""
    for index, record in enumerate(run_pipeline(ops, epochs, workers)):
        sequences = [[f for _, f in record.snapshots], *record.inner_frontiers]
        for which, frontiers in enumerate(sequences):
            name = "output probe" if which == 0 else f"loop probe {which - 1}"
            problem = frontier_regression(frontiers)
            assert problem is None, f"worker {index}, {name}: {problem}" + describe(
                ops, epochs, workers
            )
            assert frontiers and frontiers[-1] == (), f"worker {index}, {name} is not done"
        problem = late_output(record)
        assert problem is None, f"worker {index}: {problem}" + describe(ops, epochs, workers)


# -- notifications ------------------------------------------------------------------------


def run_notify(
    epochs: Epochs,
    workers: int,
    init: list[int],
    follow_ups: dict[int, int],
    exchange: bool,
) -> list[list[tuple]]:
    """Run a ``unary_notify`` operator; return each worker's event log.

    Events: ``("request", t)``, ``("data", t)``, ``("notify", t, count, frontier)``.
    Every record ``x`` at time ``t`` requests a notification at ``t + x % 3``;
    a notification at ``t`` requests one at ``t + follow_ups[t]`` if present.
    """
    logs: list[list[tuple]] = [[] for _ in range(workers)]

    def program(worker: timelypy.Worker) -> None:
        log = logs[worker.index]
        handle = InputHandle()
        log.extend(("request", t) for t in init)

        def logic(inp: Any, out: Any, notificator: Any) -> None:
            for cap, data in inp:
                log.append(("data", cap.time))
                for x in data:
                    log.append(("request", cap.time + x % 3))
                    notificator.notify_at(cap.delayed(cap.time + x % 3))
            for cap, count in notificator:
                log.append(("notify", cap.time, count, inp.frontier.frontier()))
                out.session(cap).give(cap.time)
                extra = follow_ups.get(cap.time)
                if extra:
                    log.append(("request", cap.time + extra))
                    notificator.notify_at(cap.delayed(cap.time + extra))

        def build(scope: timelypy.Scope) -> ProbeHandle:
            stream = scope.input_from(handle)
            if exchange:
                stream = stream.exchange(lambda x: x)
            return stream.unary_notify(Pipeline(), "Notify", init, logic).probe()

        probe = worker.dataflow(build)
        feed_and_finish(worker, handle, epochs, worker.step, probe.done)

    timelypy.execute(Config.process(workers), program)
    return logs


def notification_problem(log: Sequence[tuple]) -> str | None:
    """Check one worker's notification log; describe the first violation, or ``None``."""
    requests = Counter(event[1] for event in log if event[0] == "request")
    notified = [(i, event) for i, event in enumerate(log) if event[0] == "notify"]
    delivered = [event[1] for _, event in notified]
    if len(set(delivered)) != len(delivered):
        return f"a time was delivered twice: {delivered}"
    if set(delivered) != set(requests):
        return f"requested {sorted(requests)} but delivered {delivered}"
    if delivered != sorted(delivered):
        return f"deliveries are out of order: {delivered}"
    for position, (_, time, count, frontier) in notified:
        if count != requests[time]:
            return f"time {time} was requested {requests[time]} times but delivered with {count}"
        if any(less_equal(f, time) for f in frontier):
            return f"time {time} was delivered while the input frontier was {frontier!r}"
        late = [e for e in log[position + 1 :] if e[0] == "data" and less_equal(e[1], time)]
        if late:
            return f"data at {late[0][1]} arrived after the notification at {time}"
    return None


@given(
    epochs=epoch_inputs(),
    workers=workers_counts,
    init=st.lists(st.integers(0, 15), max_size=4),
    follow_ups=st.dictionaries(st.integers(0, 20), st.integers(1, 3), max_size=4),
    exchange=st.booleans(),
)
def test_notifications_exactly_once_in_order_after_frontier(
    epochs: Epochs, workers: int, init: list[int], follow_ups: dict[int, int], exchange: bool
) -> None:
    """Each requested time is delivered once, in order, after the frontier passed it."""
    for index, log in enumerate(run_notify(epochs, workers, init, follow_ups, exchange)):
        problem = notification_problem(log)
        assert problem is None, (
            f"worker {index}: {problem}\n  log={log!r}\n  epochs={epochs!r}\n  init={init!r}"
            f"\n  follow_ups={follow_ups!r}\n  exchange={exchange}"
        )


# -- the checkers can fail ------------------------------------------------------------------


def test_checkers_detect_wrong_outputs() -> None:
    """A reference that differs by one record is reported as missing/unexpected."""
    ops = [("map", 2, 1), ("loop", 2, True, [("filter", 2, 1)])]
    epochs: Epochs = [(0, [(0, 3), (1, 4)], 0), (2, [(0, 5)], 1)]
    expected = expected_outputs(ops, epochs)
    assert expected == Counter({(0, 7): 2, (0, 9): 2, (2, 11): 2})
    wrong = expected.copy()
    wrong[(2, 11)] -= 1
    wrong[(2, 12)] += 1
    assert multiset_mismatch(wrong, expected) == (
        "missing [(2, 11)] and unexpected [(2, 12)] (time, record) pairs"
    )
    assert multiset_mismatch(expected.copy(), expected) is None


def test_checkers_detect_regressions_and_late_outputs() -> None:
    """Frontiers that go back, and outputs after their time passed, are reported."""
    assert frontier_regression([(0,), (2,), (2,), ()]) is None
    assert frontier_regression([(2,), (1,)]) is not None
    assert frontier_regression([(), (3,)]) is not None
    assert frontier_regression([(Product(0, 1), Product(1, 0)), (Product(1, 1),)]) is None
    assert frontier_regression([(Product(0, 1),), (Product(1, 0),)]) is not None
    ok = WorkerRecord(outputs=[(0, 1), (3, 2)], snapshots=[(0, (0,)), (1, (3,)), (2, ())])
    assert late_output(ok) is None
    late = WorkerRecord(outputs=[(0, 1), (3, 2)], snapshots=[(0, (0,)), (1, (4,)), (2, ())])
    assert "arrived later at time 3" in (late_output(late) or "")


def test_checkers_detect_notification_violations() -> None:
    """Each way a notificator could misbehave is reported."""
    good = [("request", 1), ("request", 1), ("data", 0), ("notify", 1, 2, (2,))]
    assert notification_problem(good) is None
    bad_logs = {
        "twice": [("request", 1), ("notify", 1, 1, ()), ("notify", 1, 1, ())],
        "missing": [("request", 1), ("request", 2), ("notify", 1, 1, (2,))],
        "order": [("request", 1), ("request", 2), ("notify", 2, 1, ()), ("notify", 1, 1, ())],
        "count": [("request", 1), ("request", 1), ("notify", 1, 1, (2,))],
        "frontier": [("request", 1), ("notify", 1, 1, (1,))],
        "late data": [("request", 1), ("notify", 1, 1, (2,)), ("data", 1)],
    }
    for name, log in bad_logs.items():
        assert notification_problem(log) is not None, name
