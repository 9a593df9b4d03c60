"""Why is epoch 0 not complete?  Ask every worker.

    python examples/why_not_complete.py

Two workers build the same dataflow; on worker 1 an operator keeps the
capability it started with, so epoch 0 cannot complete anywhere.  Each worker
asks ``worker.why_not_complete(0)`` and prints what it knows: worker 1 names
itself as the holder, worker 0 knows that one capability is held on another
worker.  Then the operator lets go and the dataflow completes::

    worker 0: a capability at 0 on output 0 of operator 'Holdout' (address (0, 1)):
              0 held on worker 0, 1 on other workers
    worker 1: worker 1: operator 'Holdout' (address (0, 1)) holds a capability at 0
              on output 0
    complete on both workers

(each worker's answer is one line).
"""

import threading
from typing import Any

import timelypy

asked = threading.Barrier(2)


def program(worker: timelypy.Worker) -> str:
    kept: list[timelypy.Capability] = []

    def holdout(cap: timelypy.Capability, info: Any) -> Any:
        if info.worker_index == 1:
            kept.append(cap.retain())  # kept until the program drops it below
        return lambda output: None

    probe = worker.dataflow(lambda scope: timelypy.source(scope, "Holdout", holdout).probe())
    # step until both workers' progress arrived: one capability left, over all workers
    worker.step_while(lambda: [h.count for h in worker.why_not_complete(0)] != [1])
    reasons = "; ".join(str(holder) for holder in worker.why_not_complete(0))
    asked.wait(timeout=30)  # both asked before worker 1 lets go
    for capability in kept:
        capability.drop()
    worker.step_while(lambda: not probe.done())
    return f"worker {worker.index}: {reasons}"


if __name__ == "__main__":
    for line in timelypy.execute(timelypy.Config.process(2), program):
        print(line)
    print("complete on both workers")
