"""Records keep their type on every backend: buffers between threads and processes (issue 13)."""

from __future__ import annotations

import pytest

from tests.flow.record_types import buffer_flow, describe, expected
from timelypy.flow import run, run_cluster

NUMBERS = list(range(40))
PAIRS = [(n // 10, n) for n in NUMBERS]


def described(output: list[tuple[int, tuple[str, object]]]) -> list[str]:
    return sorted(repr(item) for _, item in output)


@pytest.mark.parametrize(
    ("processes", "workers"), [(1, 1), (1, 3), (2, 1), (2, 2)], ids=lambda n: str(n)
)
def test_buffers_arrive_as_they_were_sent(processes: int, workers: int) -> None:
    # with 2 processes the records cross a process boundary twice: at the exchange
    # and when worker 0 gathers the captured output
    output = run_cluster(buffer_flow(), PAIRS, processes, workers)
    assert described(output) == expected(NUMBERS)


def test_captured_buffers_are_the_objects_themselves_across_processes() -> None:
    # no describing inside the flow: what capture returns keeps the types too
    output = run_cluster(buffer_flow(describe_after=False), PAIRS, 2, 1)
    got = sorted(repr((key, describe(value))) for _, (key, value) in output)
    assert got == expected(NUMBERS)
    assert {type(value).__name__ for _, (_, value) in output} >= {"bytearray", "memoryview"}


def test_one_worker_agrees() -> None:
    assert described(run(buffer_flow(), PAIRS)) == expected(NUMBERS)
