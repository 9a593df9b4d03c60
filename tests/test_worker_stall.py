"""A stall inside the program's own stepping loop is reported by the worker (issue 39).

``while not probe.done(): worker.step()`` around an operator that never
reads its input used to spin silently: the stall warning lived only in the
loop that runs after the program returns.  The worker now looks at what
holds its dataflows every ``stall_seconds`` from its own step.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import timelypy
from timelypy import Config
from timelypy.dataflow.channels import Pipeline
from timelypy.worker import Worker


def test_records_never_read_in_the_programs_own_loop_are_reported(caplog):
    def program(worker: Worker) -> list[str]:
        worker.stall_seconds = 0.1
        reported: list[str] = []
        probe = timelypy.ProbeHandle()

        def constructor(cap: Any, info: Any) -> Any:
            def logic(inp: Any, out: Any) -> None:
                if reported:  # reads its input only once the stall was reported
                    for _ in inp:
                        pass

            return logic

        worker.dataflow(
            lambda scope: (
                scope.to_stream([1, 2, 3]).unary(Pipeline(), "Deaf", constructor).probe_with(probe)
            )
        )
        deadline = time.monotonic() + 30
        while not probe.done():  # the program's own loop: execute's drain never runs it
            worker.step()
            reported[:] = [
                r.getMessage() for r in caplog.records if "made no progress" in r.getMessage()
            ]
            if time.monotonic() > deadline:
                break
        return reported

    with caplog.at_level(logging.WARNING, logger="timelypy"):
        (reported,) = timelypy.execute(Config.thread(), program)
    assert reported, "the stall in the program's own loop was never reported"
    assert "3 records at 0 sent to input 0 of operator 'Deaf'" in reported[0]
    assert "waiting unread on worker 0" in reported[0]


def test_a_worker_that_keeps_making_progress_is_not_reported(caplog):
    def program(worker: Worker) -> None:
        worker.stall_seconds = 0.05
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        worker.dataflow(lambda scope: scope.input_from(handle).map(str).probe_with(probe))
        for epoch in range(30):
            handle.send_batch(list(range(10)))
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
            time.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="timelypy"):
        timelypy.execute(Config.thread(), program)
    assert not [r for r in caplog.records if "made no progress" in r.getMessage()]


def test_stall_seconds_must_be_positive():
    def program(worker: Worker) -> None:
        with pytest.raises(ValueError, match="stall_seconds must be > 0"):
            worker.stall_seconds = 0

    timelypy.execute(Config.thread(), program)
