"""``OperatorInfo.activate_after``: Timely's delayed activations, with a parking worker."""

from __future__ import annotations

import time

from timelypy import Config, execute
from timelypy.dataflow.builder import OperatorBuilder


def timer_program(delays):
    """An operator that holds a capability until each of its timers fired, in order."""

    def program(worker):
        runs = []

        def build(scope):
            builder = OperatorBuilder("timer", scope)
            info = builder.info
            builder.new_output()
            held = []
            due = []

            def constructor(caps):
                held.append(caps[0].retain())
                start = time.monotonic()
                for delay in delays:
                    due.append(start + delay)
                    info.activate_after(delay)

                def logic(frontiers):
                    now = time.monotonic()
                    runs.append(now)
                    while due and due[0] <= now:
                        due.pop(0)
                    if held and not due:
                        held.pop().drop()

                return logic

            builder.build(constructor)

        # Before building: the constructor sets the timers, and building on several
        # workers may take a while after it ran (it waits for the other workers).
        started = time.monotonic()
        worker.dataflow(build)
        while worker.step_or_park(None):  # parks until something (a timer) is due
            pass
        return [run - started for run in runs]

    return program


def test_a_parked_worker_wakes_for_each_timer_and_not_before():
    (runs,) = execute(Config.thread(), timer_program([0.2, 0.1]))
    # scheduled once when built, then once per timer: no spinning while parked
    assert len(runs) <= 4, runs
    assert runs[-1] >= 0.2, "the operator finished only once its last timer was due"


def test_timers_on_several_worker_threads():
    results = execute(Config.process(2), timer_program([0.05]))
    assert all(runs[-1] >= 0.05 for runs in results)
