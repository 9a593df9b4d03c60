"""Timely's ``hello``: worker 0 sends the rounds; each is routed to worker ``round % peers``.

    python examples/hello.py -w 2

prints, in round order, ``worker 0: hello 0``, ``worker 1: hello 1``, ... (tab-separated)
"""

import sys

import timelypy


def hello(worker: timelypy.Worker) -> None:
    index = worker.index
    handle = timelypy.InputHandle()
    probe = timelypy.ProbeHandle()

    def build(scope: timelypy.Scope) -> None:
        (
            scope.input_from(handle)
            .exchange(lambda x: x)
            .inspect(lambda x: print(f"worker {index}:\thello {x}", flush=True))
            .probe_with(probe)
        )

    worker.dataflow(build)
    for round_ in range(10):
        if index == 0:
            handle.send(round_)
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, hello)
