"""A lone worker's direct progress path (``Subgraph._extract_direct``) changes nothing observable.

One worker's root scope puts its children's counts straight into the
tracker instead of building a progress batch and delivering it to itself.
A ``"timely/progress"`` logger needs the batches, so with one registered
the scope takes the general path.  Every test runs one program both ways
and compares what a user can observe after every step: the records, probe
frontiers, and each operator's frontier and records in and out -- with
operators that hold capabilities (``delay``, ``count``), nested iterative
scopes (whose own progress is never direct) and operator fusion on and off.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import timelypy
from tests.stepping import observed
from timelypy import Config, InputHandle, ProbeHandle
from timelypy.progress.subgraph import Subgraph

# One step of the dataflow: (kind, parameter).
Op = tuple[str, int]

ops = st.lists(
    st.tuples(
        st.sampled_from(["map", "filter", "exchange", "split", "delay", "count", "loop"]),
        st.integers(1, 4),
    ),
    max_size=5,
)
# Per epoch: records to send, how far to advance, and steps to take after.
epochs = st.lists(
    st.tuples(st.lists(st.integers(0, 30), max_size=5), st.integers(1, 3), st.integers(0, 3)),
    max_size=6,
)


def _loop(stream: timelypy.Stream, k: int) -> timelypy.Stream:
    """Each record goes round an iterative scope, less ``k`` a lap, until it is below ``k``."""

    def body(inner: timelypy.Scope) -> timelypy.Stream:
        handle, cycle = inner.feedback(1)
        stepped = stream.enter(inner).concat(cycle).map(lambda x: x - k)
        stepped.filter(lambda x: x >= k).connect_loop(handle)
        return stepped.filter(lambda x: x < k).leave()

    return stream.scope.iterative(body)


def _apply(stream: timelypy.Stream, op: Op) -> timelypy.Stream:
    kind, k = op
    if kind == "map":
        return stream.map(lambda x: x + k)
    if kind == "filter":
        return stream.filter(lambda x: x % (k + 1) != 0)
    if kind == "split":  # read twice, joined again
        evens = stream.filter(lambda x: x % 2 == 0)
        return evens.concat(stream.filter(lambda x: x % 2 == 1).map(lambda x: x * k))
    if kind == "delay":  # holds a capability per later time
        return stream.delay(lambda x, t: t + x % (k + 1))
    if kind == "count":  # one count per completed time
        return stream.count()
    if kind == "loop":
        return _loop(stream, k)
    return stream.exchange(lambda x: x)


def _observe(
    pipeline: list[Op], schedule: list[tuple[list[int], int, int]], direct: bool, fuse: bool
) -> list[Any]:
    """Run the pipeline on one worker; return everything observable after every step."""

    def program(worker: timelypy.Worker) -> list[Any]:
        if not direct:
            worker.log_register().insert("timely/progress", lambda *batch: None)
        handle = InputHandle()
        probe = ProbeHandle()
        out: list[Any] = []

        def build(scope: timelypy.Scope) -> None:
            stream = scope.input_from(handle)
            for op in pipeline:
                stream = _apply(stream, op)
            stream.inspect_time(lambda t, x: out.append((t, x))).probe_with(probe)

        worker.dataflow(build)
        (root,) = worker._dataflows.values()
        assert root._direct is direct  # the test compares the two paths, not one with itself
        log: list[Any] = []

        def snapshot() -> None:
            log.append(observed(worker, probe, out))

        time = 0
        for records, advance, steps in schedule:
            handle.send_batch(list(records))
            time += advance
            handle.advance_to(time)
            for _ in range(steps):
                worker.step()
                snapshot()
        handle.close()
        for _ in range(1_000):  # a bug must fail the test, not hang it
            if not worker.step_or_park(0):
                break
            snapshot()
        else:
            raise AssertionError("the dataflow did not complete in 1,000 steps")
        snapshot()
        return log

    return timelypy.execute(Config(fuse=fuse), program)[0]  # type: ignore[no-any-return]


@settings(max_examples=60, deadline=None)
@given(pipeline=ops, schedule=epochs, fuse=st.booleans())
@example(
    pipeline=[("map", 1), ("delay", 2), ("count", 1)],
    schedule=[([1, 2, 3], 1, 1), ([4, 5], 2, 0), ([], 1, 2)],
    fuse=True,
)
@example(
    pipeline=[("loop", 2), ("map", 1), ("count", 1)],
    schedule=[([5, 9], 1, 2), ([3], 1, 1)],
    fuse=False,
)
def test_direct_progress_changes_nothing_a_user_can_observe(
    pipeline: list[Op], schedule: list[tuple[list[int], int, int]], fuse: bool
) -> None:
    """Records, frontiers and counts after every step are the general path's."""
    direct = _observe(pipeline, schedule, True, fuse)
    assert direct == _observe(pipeline, schedule, False, fuse)


def test_only_a_lone_workers_root_scope_is_direct() -> None:
    """Two workers exchange batches; a nested scope reports to its parent: neither is direct."""

    def program(worker: timelypy.Worker) -> list[bool]:
        scopes: list[Any] = []

        def build(scope: timelypy.Scope) -> None:
            def body(inner: timelypy.Scope) -> timelypy.Stream:
                scopes.append(inner)
                return scope.to_stream(range(3)).enter(inner).leave()

            scope.iterative(body).probe()

        worker.dataflow(build)
        (root,) = worker._dataflows.values()
        nested = [child for child in root.children if isinstance(child, Subgraph)]
        result = [root._direct, *(child._direct for child in nested)]
        while worker.step_or_park(0):
            pass
        return result

    assert timelypy.execute(Config(), program) == [[True, False]]
    assert timelypy.execute(Config(workers=2), program) == [[False, False], [False, False]]
