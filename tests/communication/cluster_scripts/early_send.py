"""What a program sends leaves its process early: as its input advances, or as a step starts.

    python early_send.py OUT_DIR TIMELY-ARGS        (2 workers in all)

Worker 0 sends one record through an exchange to worker 1 and advances its
input, then pauses :data:`PAUSE_SECONDS` without stepping: the record should
reach worker 1 during the pause, as advancing an input sends its epoch's
records on.  Then it sends a second record with ``send_batch`` (which does
not advance) and takes one step whose work is slow: another operator of the
dataflow sleeps :data:`SLOW_SECONDS` in it.  The second record should reach
worker 1 while worker 0 is still in that step: what was sent leaves when a
step starts, before its work.  Worker 1 steps until both records arrive.
Each process writes ``OUT_DIR/process-P.json``, ``{"worker": {...}}``:
worker 0 the wall-clock times of the pause and the slow step, worker 1 the
times each record reached its operator.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import timelypy

#: How long worker 0's step takes (one operator's activation sleeps this long).
SLOW_SECONDS = 2.0
#: How long worker 0 waits, without stepping, after advancing its input.
PAUSE_SECONDS = 1.0


def program(worker: timelypy.Worker) -> dict[str, Any]:
    """Run the dataflow; return this worker's times (seconds since the epoch)."""
    if worker.peers != 2:
        raise SystemExit("early_send.py runs on exactly 2 workers")
    handle: timelypy.InputHandle[int] = timelypy.InputHandle()
    probe = timelypy.ProbeHandle()
    arrived: dict[int, float] = {}
    # The slow work: one record on worker 0, which sleeps in its first step.  It is in
    # the same dataflow, as the scope sends its progress (and with it what is buffered)
    # only when all of its operators have run.
    slow = [0] if worker.index == 0 else []

    def build(scope: timelypy.Scope) -> None:
        scope.input_from(handle).exchange(lambda x: 1).inspect(
            lambda x: arrived.setdefault(x, time.time())
        ).probe_with(probe)
        scope.to_stream(slow).inspect(lambda x: time.sleep(SLOW_SECONDS))

    worker.dataflow(build)
    result: dict[str, Any] = {}
    if worker.index == 0:
        handle.send(7)
        result["advanced"] = time.time()
        handle.advance_to(1)
        time.sleep(PAUSE_SECONDS)
        result["paused"] = time.time()
        handle.send_batch([8])
        result["step_started"] = time.time()
        worker.step()
        result["step_ended"] = time.time()
    else:
        handle.advance_to(1)
        deadline = time.monotonic() + 30
        while len(arrived) < 2 and time.monotonic() < deadline:
            worker.step_or_park(0.01)
        result["arrived"] = {str(record): at for record, at in arrived.items()}
    handle.close()
    worker.step_while(worker.has_dataflows, 0.05)
    return result


def main(argv: list[str]) -> None:
    """Run on the configuration in ``argv``; write this process's results."""
    config, free = timelypy.Config.from_args(argv)
    out = Path(free[0])
    results = timelypy.execute_from_args(argv, program)
    first = config.process_index * config.workers
    data = {str(first + i): result for i, result in enumerate(results)}
    (out / f"process-{config.process_index}.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv)
