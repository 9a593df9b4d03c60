"""Stepping workers by hand from the test's thread, shared by the dataflow tests.

Workers built over :func:`~timelypy.communication.allocator.process_allocators`
and stepped round-robin from one thread make every interleaving exact, so no
test waits on a clock.
"""

from __future__ import annotations

from collections.abc import Sequence

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
