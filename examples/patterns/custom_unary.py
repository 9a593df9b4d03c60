"""A Timely pattern: a custom unary operator, ``Multiply``.

    python examples/patterns/custom_unary.py [-w N]

A user's operator is a function of a stream built on the generic ``unary``
operator, exactly as built-in operators are: its constructor receives the
initial capability (unused here, so it is released when the constructor
returns) and returns the logic, which multiplies each batch it receives and
sends the result at the batch's own time.

Every worker turns ``0..9`` into a stream, multiplies it by 5 and prints
``Result: 0``, ``Result: 5``, ... ``Result: 45``, in order; with ``-w N``
each worker prints the ten lines (the records never leave their worker), and
the workers' lines interleave.

In Rust this is an extension trait on a stream with a ``()`` timestamp;
here the dataflow has the default ``int`` timestamps, which change nothing.
"""

import sys
from collections.abc import Callable

import timelypy
from timelypy.dataflow import Capability, OperatorInfo, OperatorInput, OperatorOutput, Pipeline


def multiply(stream: timelypy.Stream, factor: int) -> timelypy.Stream:
    """Multiply every record of ``stream`` by ``factor``."""

    def constructor(
        _cap: Capability, _info: OperatorInfo
    ) -> Callable[[OperatorInput, OperatorOutput], None]:
        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for cap, data in input:
                output.session(cap).give_batch([datum * factor for datum in data])

        return logic

    return stream.unary(Pipeline(), "Multiply", constructor)


def program(worker: timelypy.Worker) -> None:
    def build(scope: timelypy.Scope) -> None:
        # One write per line: print() writes the text and its newline separately, and
        # another worker's thread could write in between.
        multiply(scope.to_stream(range(10)), 5).inspect(
            lambda x: print(f"Result: {x}\n", end="", flush=True)
        )

    worker.dataflow(build)


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
