"""Stepping workers by hand from the test's thread, shared by the dataflow tests.

Workers built over :func:`~timelypy.communication.allocator.process_allocators`
and stepped round-robin from one thread make every interleaving exact, so no
test waits on a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from timelypy.dataflow.probe import ProbeHandle
from timelypy.worker import Worker


def _as_list(workers: Worker | Sequence[Worker]) -> Sequence[Worker]:
    return [workers] if isinstance(workers, Worker) else workers


def settle(workers: Worker | Sequence[Worker], rounds: int = 10) -> None:
    """Step every worker, round-robin, a fixed number of rounds."""
    workers = _as_list(workers)
    for _ in range(rounds):
        for worker in workers:
            worker.step()


def run_to_completion(workers: Worker | Sequence[Worker], limit: int = 2000) -> None:
    """Step every worker until all dataflows completed; fail naming the holders after ``limit``."""
    workers = _as_list(workers)
    for _ in range(limit):
        if not any([worker.step() for worker in workers]):
            return
    raise AssertionError(f"incomplete after {limit} rounds: {[w.holders() for w in workers]}")


def observed(worker: Worker, probe: ProbeHandle, out: list[Any]) -> tuple[Any, ...]:
    """What a user can see of ``worker``'s one dataflow now, to compare two runs step by step.

    The probe's frontier, the records collected in ``out`` (sorted), and each
    operator's name, input frontier and records in and out.
    """
    (dataflow,) = worker.metrics(completed=True)["dataflows"]
    return (
        probe.frontier(),
        sorted(out),
        [
            (op["name"], op["frontier"], op["records_in"], op["records_out"])
            for op in dataflow["operators"]
        ],
    )
