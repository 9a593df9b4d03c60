"""The Collatz loop of Timely's book (``mdbook`` chapter 4.2, "Iteration").

    python examples/collatz.py              # the book's program
    python examples/collatz.py exercise     # the chapter's exercise

**The book's program.**  A loop in the dataflow's own scope: the numbers 1 to 9
enter at time 0 and are concatenated with what comes back around a feedback
edge whose summary is ``1``, so a number's time counts the Collatz steps
taken so far.  Each pass applies one step (``x / 2`` if even, ``3x + 1`` if
odd), prints the result, drops the ones, and sends the rest around again
while the time is below 100 (``branch_when``, written here with an
:class:`~timelypy.OperatorBuilder` of two outputs).  It prints every stepped
value, one per line: first the results of step 1 for the inputs 1 to 9 (``4,
1, 10, 2, 16, 3, 22, 4, 28``), then those of step 2 for the numbers still
above one, and so on; 9 is the last to arrive, at 1 after 19 steps.  Within a
step the values keep the order of their inputs, because each time's records
travel as one batch through a pipeline on one worker.

**The exercise** the chapter ends with: in a nested iterative scope, each
record carries its starting number and its step count; records that reach one
``leave`` the loop instead of being dropped, and the program prints
``n: k steps`` for each starting number, sorted by ``n`` (the records leave at
different iterations, in no order that means anything).  As in the book's
loop a number is stepped before it is tested, so ``1`` counts the three steps
of ``1 -> 4 -> 2 -> 1``; ``9`` takes 19, as the chapter says.

Like the book's ``timely::example``, both run on one worker.
"""

import sys
from collections.abc import Callable
from typing import Any

import timelypy
from timelypy.dataflow import Capability, Frontier, OperatorBuilder, Pipeline


def collatz_step(x: int) -> int:
    return x // 2 if x % 2 == 0 else 3 * x + 1


def branch_when(
    stream: timelypy.Stream, condition: Callable[[Any], bool]
) -> tuple[timelypy.Stream, timelypy.Stream]:
    """Split ``stream`` by time: times where ``condition`` holds go to the second stream."""
    builder = OperatorBuilder("BranchWhen", stream.scope)
    inp = builder.new_input(stream, Pipeline())
    out_false, stream_false = builder.new_output()
    out_true, stream_true = builder.new_output()

    def constructor(_caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        def logic(_frontiers: list[Frontier]) -> None:
            for cap, data in inp:
                output = out_true if condition(cap.time) else out_false
                output.session(cap).give_batch(data)

        return logic

    builder.build(constructor)
    return stream_false, stream_true


def book(scope: timelypy.Scope) -> None:
    """The chapter's first program: a loop in the root scope, one time per step."""
    handle, stream = scope.feedback(1)
    stepped = (
        scope.to_stream(range(1, 10))
        .concat(stream)
        .map(collatz_step)
        .inspect(lambda x: print(x, flush=True))
        .filter(lambda x: x != 1)
    )
    branch_when(stepped, lambda t: t < 100)[1].connect_loop(handle)


def exercise(scope: timelypy.Scope) -> timelypy.CaptureQueue:
    """The chapter's exercise: count each number's steps in an iterative scope."""
    start = scope.to_stream([(n, n, 0) for n in range(1, 10)])  # (progenitor, value, steps)

    def loop(inner: timelypy.Scope) -> timelypy.Stream:
        handle, cycle = inner.feedback(1)
        stepped = (
            start.enter(inner).concat(cycle).map(lambda r: (r[0], collatz_step(r[1]), r[2] + 1))
        )
        stepped.filter(lambda r: r[1] != 1).connect_loop(handle)
        return stepped.filter(lambda r: r[1] == 1).leave()

    return scope.iterative(loop).map(lambda r: (r[0], r[2])).capture()


if __name__ == "__main__":
    if sys.argv[1:] == ["exercise"]:
        captured = timelypy.example(exercise)
        for _time, records in captured.extract():
            for n, steps in records:
                print(f"{n}: {steps} step{'' if steps == 1 else 's'}")
    else:
        timelypy.example(book)
