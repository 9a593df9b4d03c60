"""Why is time t not complete: ``Worker.why_not_complete`` and ``Worker.watch_probe``.

Workers are stepped by hand from the test's thread (two over one in-process
allocator where a test needs several), so each dataflow is exactly as stuck
as the test makes it; the cross-process case runs real processes.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import timelypy
from tests.stepping import settle
from timelypy import InputHandle, Pipeline, ProbeHandle, source
from timelypy.communication.allocator import process_allocators
from timelypy.order import Product
from timelypy.progress.explain import Holder, summarize
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def workers_of(peers: int) -> list[Worker]:
    return [Worker(allocator) for allocator in process_allocators(peers)]


def keeper(only_on: int | None = None, at: int = 0):
    """A source constructor that keeps a capability at ``at`` (on worker ``only_on``)."""

    def constructor(cap: Any, info: Any) -> Any:
        kept = []
        if only_on is None or info.worker_index == only_on:
            kept.append(cap.retain())  # kept beyond the constructor: retained
            if at != cap.time:
                kept[0].downgrade(at)

        def logic(out: Any) -> None:
            assert kept is not None  # the logic keeps the capability alive

        return logic

    return constructor


def test_an_input_holds_its_time_on_every_worker():
    workers = workers_of(2)
    handles = []
    for worker in workers:
        handle = InputHandle()
        handles.append(handle)
        worker.dataflow(lambda scope, h=handle: scope.input_from(h).map(str).probe())
    handles[0].send(1)
    for handle in handles:
        handle.advance_to(3)
    settle(workers)
    for worker in workers:
        (holder,) = worker.why_not_complete(3)
        about = (holder.operator, holder.kind, holder.port, holder.time)
        assert about == ("Input", "capability", 0, 3)
        assert (holder.count, holder.here, holder.worker) == (2, 1, worker.index)
        assert worker.why_not_complete(2) == []  # 2 is complete: nothing holds it
    assert "1 held on worker 0, 1 on other workers" in str(workers[0].why_not_complete(3)[0])
    for handle in handles:
        handle.close()
    settle(workers)
    assert [w.why_not_complete() for w in workers] == [[], []]


def test_a_lone_worker_holds_every_pointstamp_it_names():
    """One worker: its root scope does not keep its share apart; every share is the count."""
    (worker,) = workers_of(1)
    handle = InputHandle()
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle).concat(source(scope, "Keeper", keeper(at=4))).map(str).probe()
        )
    )
    for epoch in range(1, 4):
        handle.send(epoch)
        handle.advance_to(epoch)
        settle(worker)
    named = [(h.operator, h.kind, h.time, h.count, h.here) for h in worker.why_not_complete(4)]
    assert sorted(named) == [("Input", "capability", 3, 1, 1), ("Keeper", "capability", 4, 1, 1)]
    handle.close()
    settle(worker)
    assert [(h.operator, h.here) for h in worker.why_not_complete()] == [("Keeper", 1)]


def test_a_capability_kept_on_one_worker_is_named_by_that_worker_only():
    workers = workers_of(2)
    for worker in workers:
        worker.dataflow(
            lambda scope: source(scope, "Keeper", keeper(only_on=1, at=4)).map(str).probe()
        )
    settle(workers)
    mine = workers[1].why_not_complete(4)
    theirs = workers[0].why_not_complete(4)
    assert [(h.operator, h.time, h.count, h.here) for h in mine] == [("Keeper", 4, 1, 1)]
    assert [(h.operator, h.time, h.count, h.here) for h in theirs] == [("Keeper", 4, 1, 0)]
    assert str(mine[0]).startswith(
        "worker 1: operator 'Keeper' (address (0, 1)) holds a capability at 4"
    )
    assert "0 held on worker 0, 1 on other workers" in str(theirs[0])
    assert workers[0].why_not_complete(3) == []  # 4 holds 4 and later, not 3


def test_unread_messages_are_counted_where_they_wait():
    workers = workers_of(2)

    def deaf(cap: Any, info: Any) -> Any:
        return lambda inp, out: None  # never reads: records wait in its queue

    for worker in workers:
        handle = InputHandle()
        worker.dataflow(
            lambda scope, h=handle: (
                scope.input_from(h).exchange(lambda x: x).unary(Pipeline(), "Deaf", deaf).probe()
            )
        )
        if worker.index == 0:
            handle.send_batch([0, 1, 3])  # 0 goes to worker 0, 1 and 3 to worker 1
        handle.close()
    settle(workers)
    for worker, waiting in zip(workers, (1, 2), strict=True):
        (holder,) = worker.why_not_complete(0)
        about = (holder.operator, holder.kind, holder.port, holder.time)
        assert about == ("Deaf", "messages", 0, 0)
        assert (holder.count, holder.here) == (3, waiting)
    text = str(workers[1].why_not_complete(0)[0])
    assert "3 records at 0 sent to input 0 of operator 'Deaf'" in text
    assert "2 waiting unread on worker 1, 1 unread on other workers" in text


def test_a_capability_inside_a_loop_is_named_with_its_inner_time():
    (worker,) = workers_of(1)

    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        kept = source(inner, "Kept", keeper(at=Product(0, 2)))
        kept.concat(cycle).filter(lambda x: False).connect_loop(handle)
        return kept.leave()

    worker.dataflow(lambda scope: scope.iterative(loop).probe())
    settle(worker)
    (holder,) = worker.why_not_complete(0)
    assert (holder.operator, holder.kind, holder.time, holder.here) == (
        "Kept",
        "capability",
        Product(0, 2),
        1,
    )
    assert len(holder.address) == 3  # inside the iterative scope
    assert worker.why_not_complete(0) == worker.why_not_complete()


def test_summarize_lists_at_most_its_limit():
    holders = [Holder(0, 0, f"op{i}", (0, i), "capability", 0, i, 1, 1) for i in range(12)]
    text = summarize(holders, limit=3)
    assert text.count("holds a capability") == 3 and text.endswith("; and 9 more")
    assert "other workers" in summarize([])


def test_watch_probe_logs_what_holds_a_stuck_probe(caplog):
    def program(worker: Worker) -> None:
        handle, probe = InputHandle(), ProbeHandle()
        worker.dataflow(lambda scope: scope.input_from(handle).map(str).probe_with(probe))
        worker.watch_probe(probe, after=0.05, name="output")
        handle.advance_to(2)
        deadline = __import__("time").monotonic() + 5
        while not any("has not moved" in r.getMessage() for r in caplog.records):
            assert __import__("time").monotonic() < deadline, "no warning within 5 s"
            worker.step_or_park(0.01)
        handle.close()

    with caplog.at_level(logging.WARNING, logger="timelypy"):
        timelypy.execute(timelypy.Config.thread(), program)
    message = next(r.getMessage() for r in caplog.records if "has not moved" in r.getMessage())
    assert message.startswith("worker 0: probe 'output' has not moved from [2] for 0 s: ")
    assert "operator 'Input' (address (0, 1)) holds a capability at 2 on output 0" in message


def test_watch_probe_rejects_a_non_positive_interval():
    (worker,) = workers_of(1)
    with pytest.raises(ValueError, match="after > 0"):
        worker.watch_probe(ProbeHandle(), after=0)


STUCK = textwrap.dedent(
    """
    import logging, sys, time
    import timelypy

    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    def program(worker):
        handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()

        def keep_on_worker_1(cap, info):
            kept = [cap.retain()] if info.worker_index == 1 else []
            return lambda out: kept

        def build(scope):
            held = timelypy.source(scope, "Holdout", keep_on_worker_1)
            held.concat(scope.input_from(handle)).probe_with(probe)

        worker.dataflow(build)
        worker.watch_probe(probe, after=0.2, name="out")
        handle.close()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            worker.step_or_park(0.05)
        print(f"worker {worker.index} done", flush=True)
        sys.stdout.flush()
        import os
        os._exit(0)  # the kept capability never goes: leave without completing

    timelypy.execute_from_args(sys.argv, program)
    """
)


def test_each_process_names_its_own_share(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TIMELYPY_SECRET": "k3Vq9ZtR7mWx2LpN8cYb5HdJ4fGs6AeU",
    }
    result = subprocess.run(
        [sys.executable, "-m", "timelypy.launch", "-n", "2", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    lines = result.stderr.splitlines()
    mine = [line for line in lines if "has not moved" in line and line.startswith("[1]")]
    theirs = [line for line in lines if "has not moved" in line and line.startswith("[0]")]
    assert mine and theirs, result.stdout + result.stderr
    assert "worker 1: operator 'Holdout' (address (0, 1)) holds a capability at 0" in mine[0]
    assert "0 held on worker 0, 1 on other workers" in theirs[0]
