"""``branch`` and ``branch_when``: split one stream in two by a condition.

Both build one operator with two outputs and return ``(false_stream,
true_stream)``: what the condition rejects goes to the *first* stream, what
it accepts to the *second* -- Timely's order, easy to get backwards.

* ``branch(stream, condition)`` calls ``condition(time, record)`` on every
  record (Timely passes the time too);
* ``branch_when(stream, condition)`` calls ``condition(time)`` once per time
  in each activation and sends whole batches on, without looking at any
  record -- use it when the decision depends only on the time.

Records keep their time and their worker (``Pipeline``).

>>> import timelypy
>>> def build(scope):
...     odd, even = scope.to_stream(range(10)).branch(lambda time, x: x % 2 == 0)
...     return odd.capture(), even.capture()
>>> odd, even = timelypy.example(build)
>>> odd.extract(), even.extract()
([(0, [1, 3, 5, 7, 9])], [(0, [0, 2, 4, 6, 8])])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest

if TYPE_CHECKING:
    from timelypy.dataflow.handles import OperatorInput, OperatorOutput

__all__ = ["branch", "branch_when"]

T = TypeVar("T")


def _two_outputs(
    stream: Stream[Any], name: str
) -> tuple[
    OperatorBuilder,
    OperatorInput[Any],
    OperatorOutput[Any],
    OperatorOutput[Any],
    Stream[Any],
    Stream[Any],
]:
    builder = OperatorBuilder(name, stream.scope)
    inp = builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER)
    false_out, false_stream = builder.new_output()
    true_out, true_stream = builder.new_output()
    return builder, inp, false_out, true_out, false_stream, true_stream


@stream_method
def branch(stream: Stream[T], condition: Callable[[Any, T], bool]) -> tuple[Stream[T], Stream[T]]:
    """``(false_stream, true_stream)``: each record goes where ``condition(time, record)`` says.

    >>> import timelypy
    >>> def build(scope):
    ...     short, long = scope.to_stream(["a", "abc", "ab", "abcd"]).branch(
    ...         lambda time, word: len(word) > 2)
    ...     return short.capture(), long.capture()
    >>> short, long = timelypy.example(build)
    >>> short.extract(), long.extract()
    ([(0, ['a', 'ab'])], [(0, ['abc', 'abcd'])])
    """
    builder, inp, false_out, true_out, false_stream, true_stream = _two_outputs(stream, "Branch")

    def constructor(caps: Any) -> Callable[[Any], None]:
        def logic(frontiers: Any) -> None:
            for cap, data in inp:
                time = cap.time
                accepted: list[Any] = []
                rejected: list[Any] = []
                accept = accepted.append
                reject = rejected.append
                for record in data:
                    if condition(time, record):
                        accept(record)
                    else:
                        reject(record)
                if rejected:
                    false_out.give_batch(cap, rejected)
                if accepted:
                    true_out.give_batch(cap, accepted)

        return logic

    builder.build(constructor)
    return false_stream, true_stream


@stream_method
def branch_when(stream: Stream[T], condition: Callable[[Any], bool]) -> tuple[Stream[T], Stream[T]]:
    """``(false_stream, true_stream)``: whole batches go where ``condition(time)`` says.

    Timely's example: data ``0..10`` delayed to times ``0..10``, split at 5.

    >>> import timelypy
    >>> def build(scope):
    ...     before, after = (scope.to_stream(range(10)).delay(lambda x, t: x)
    ...                      .branch_when(lambda time: time >= 5))
    ...     return before.capture(), after.capture()
    >>> before, after = timelypy.example(build)
    >>> [t for t, _ in before.extract()], [t for t, _ in after.extract()]
    ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    """
    builder, inp, false_out, true_out, false_stream, true_stream = _two_outputs(
        stream, "BranchWhen"
    )

    def constructor(caps: Any) -> Callable[[Any], None]:
        def send(cap: Any, batches: list[list[Any]]) -> None:
            session = (true_out if condition(cap.time) else false_out).session(cap)
            for batch in batches:
                session.give_batch(batch)

        def logic(frontiers: Any) -> None:
            inp.for_each_time(send)

        return logic

    builder.build(constructor)
    return false_stream, true_stream
