"""A live progress line over a dataflow that runs for a few seconds.

    python examples/live_progress.py           # on a terminal: the line redraws
    python examples/live_progress.py | cat     # stdout piped: the line is still on stderr

Two workers send 200 epochs of 500 numbers each through an exchange and a
map, pausing 10 ms per epoch; ``timelypy.live.show_progress`` redraws one
line on standard error while it runs (only if standard error is a terminal)
and leaves a summary. The program then prints ``sent 100,000 records``.
"""

import time

import timelypy
from timelypy.live import show_progress

EPOCHS, PER_EPOCH = 200, 500


def program(worker: timelypy.Worker) -> int:
    handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
    worker.dataflow(
        lambda scope: scope.input_from(handle).exchange(lambda x: x).map(str).probe_with(probe)
    )
    line = show_progress(worker, probe, every=0.25, name="numbers")
    for epoch in range(EPOCHS):
        handle.send_batch(list(range(worker.index, PER_EPOCH, worker.peers)))
        handle.advance_to(epoch + 1)
        pause = time.monotonic() + 0.01
        while time.monotonic() < pause:
            worker.step()
    handle.close()
    worker.step_while(lambda: not probe.done())
    if worker.index == 0:
        line.finish()
    return PER_EPOCH * EPOCHS // worker.peers


if __name__ == "__main__":
    sent = sum(timelypy.execute(timelypy.Config.process(2), program))
    print(f"sent {sent:,} records")
