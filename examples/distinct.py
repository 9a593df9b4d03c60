"""Timely's ``distinct``: each worker reports the first sighting of every value it owns.

    python examples/distinct.py [-w N]

Worker 0 sends ``0, 1, 2, 2, 2, 3, 3, 4`` and worker 1 (if there is one)
sends ``0, 0, 3, 4, 4, 5, 7, 7``, all at time 0.  Values are exchanged by
themselves (value ``v`` goes to worker ``v % peers``), and a ``Distinct``
operator -- a plain ``unary`` operator -- keeps, per time, how often it has
seen each value and sends a value only the first time.  Each worker then
prints ``worker i:<TAB>value v``.

With one worker::

    worker 0:	value 0
    worker 0:	value 1
    worker 0:	value 2
    worker 0:	value 3
    worker 0:	value 4

With ``-w 2`` worker 0 prints the even values 0, 2, 4 and worker 1 the odd
values 1, 3, 5, 7.  The order *within* a worker depends on whose batch
arrives first (worker 0 may see worker 1's ``0, 0, 4, 4`` before its own
``0, 2, 2, 2, 4``), exactly as in Timely; only the sets are fixed.
"""

import sys
from collections.abc import Callable
from typing import Any

import timelypy
from timelypy.dataflow import Capability, Exchange, OperatorInfo, OperatorInput, OperatorOutput

#: What each worker sends, by worker index (as in Timely's example).
DATA = {0: [0, 1, 2, 2, 2, 3, 3, 4], 1: [0, 0, 3, 4, 4, 5, 7, 7]}


def distinct(
    _cap: Capability, _info: OperatorInfo
) -> Callable[[OperatorInput, OperatorOutput], None]:
    """The ``Distinct`` operator's constructor: returns its logic."""
    counts_by_time: dict[Any, dict[int, int]] = {}

    def logic(input: OperatorInput, output: OperatorOutput) -> None:
        for cap, data in input:
            counts = counts_by_time.setdefault(cap.time, {})
            fresh = []
            for datum in data:
                count = counts.get(datum, 0)
                if count == 0:
                    fresh.append(datum)
                counts[datum] = count + 1
            output.session(cap).give_batch(fresh)

    return logic


def program(worker: timelypy.Worker) -> None:
    index = worker.index
    handle = timelypy.InputHandle()
    probe = timelypy.ProbeHandle()

    def build(scope: timelypy.Scope) -> None:
        (
            scope.input_from(handle)
            .unary(Exchange(lambda x: x), "Distinct", distinct)
            # One write per line: print() writes the text and its newline separately, and
            # another worker's thread could write in between.
            .inspect(lambda x: print(f"worker {index}:\tvalue {x}\n", end="", flush=True))
            .probe_with(probe)
        )

    worker.dataflow(build)
    for round_ in range(1):
        for x in DATA.get(index, []):
            handle.send(x)
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
