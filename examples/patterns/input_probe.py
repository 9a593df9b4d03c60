"""A Timely pattern: drive a dataflow from outside, pacing it with a probe.

    python examples/patterns/input_probe.py [-w N]

The program owns an :class:`~timelypy.InputHandle`.  In each of ten rounds
every worker sends the round number, advances its input to the next round
(promising it will send nothing earlier), and steps the worker until the
probe at the end of the dataflow shows that the round is complete
everywhere.  That is how a driver keeps the dataflow within one round of its
input instead of piling up work.

With one worker it prints ``Saw: 0`` ... ``Saw: 9``.  With ``-w N`` every
worker sends (and, with no exchange, prints) each round, so each line appears
``N`` times -- and the rounds still come out in order, because no worker
sends round ``r + 1`` before the probe says every worker has finished round
``r``, and a record is printed before its round can finish.
"""

import sys

import timelypy


def program(worker: timelypy.Worker) -> None:
    handle = timelypy.InputHandle()

    def build(scope: timelypy.Scope) -> timelypy.ProbeHandle:
        # One write per line: print() writes the text and its newline separately, and
        # another worker's thread could write in between.
        return (
            scope.input_from(handle)
            .inspect(lambda x: print(f"Saw: {x}\n", end="", flush=True))
            .probe()
        )

    probe = worker.dataflow(build)
    for round_ in range(10):
        handle.send(round_)
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
