"""A Timely pattern: an iterative computation on a feedback loop.

    python examples/patterns/feedback_loop.py [-w N]

As in the Rust sketch this example ports, the loop lives in the dataflow's
own scope, whose timestamps are plain ``int``: ``scope.feedback(1)``
returns a handle and a stream, and every record given to the handle comes
back on the stream one time later.
The values 1 to 5 enter at time 0 as ``(value, iteration)`` pairs, are
printed, and go around again doubled, with the iteration counter increased,
while ``value < 100`` and ``iteration < 10``.  Because the feedback edge
advances the time, progress tracking still knows when each time -- here,
each iteration -- is complete, and when the loop has drained.

With one worker it prints, iteration by iteration (records of one time
travel as one batch, so they keep the order of the inputs)::

    Iteration 0: value = 1
    ...
    Iteration 0: value = 5
    Iteration 1: value = 2
    ...
    Iteration 7: value = 128

The value 1 is the last to stop: ``64 < 100`` goes around once more and
``128`` is printed at iteration 7; the ``iteration < 10`` bound never binds.
With ``-w N`` every worker runs the same loop on its own copy of the inputs
(nothing is exchanged), so each line is printed ``N`` times and the workers'
lines interleave.

Notes on that Rust sketch: its comment gives the summary's type as ``Product<u64,
u32>``, but in a ``u64`` scope the summary of ``feedback(1)`` is the integer
``1`` (``Product`` summaries belong to nested iterative scopes); and it uses
``concat`` without importing ``Concat``.
"""

import sys

import timelypy


def show(record: tuple[int, int]) -> None:
    value, iteration = record
    # One write per line: print() writes the text and its newline separately, and
    # another worker's thread could write in between.
    print(f"Iteration {iteration}: value = {value}\n", end="", flush=True)


def build(scope: timelypy.Scope) -> None:
    handle, cycle = scope.feedback(1)
    (
        scope.to_stream([1, 2, 3, 4, 5])
        .map(lambda x: (x, 0))
        .concat(cycle)
        .inspect(show)
        .filter(lambda r: r[0] < 100 and r[1] < 10)
        .map(lambda r: (r[0] * 2, r[1] + 1))
        .connect_loop(handle)
    )


def program(worker: timelypy.Worker) -> None:
    worker.dataflow(build)


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
