"""Generic operators: write your own logic, as Timely's ``Operator`` trait does.

Each takes a *constructor* called once when the operator is built, with the
operator's initial capability and an :class:`~timelypy.dataflow.operator.OperatorInfo`;
it returns the *logic*, called at each activation with the input and output
handles.  The initial capability is borrowed: it is released when the
constructor returns unless you ``retain()`` it.

* ``unary(pact, name, constructor)`` -- logic ``(input, output)``; runs when
  data arrives.
* ``unary_frontier`` -- the same, also run when the input frontier changes;
  read it as ``input.frontier``.
* ``unary_notify(pact, name, init, logic)`` -- ``logic(input, output,
  notificator)`` with a :class:`~timelypy.dataflow.notificator.Notificator`;
  ``init`` times are notified without any input.
* ``binary``, ``binary_frontier``, ``binary_notify`` -- two inputs.
* ``sink(pact, name, logic)`` -- ``logic(input)``, no output.
* ``source(scope, name, constructor)`` -- no input; logic ``(output)``.

>>> import timelypy
>>> from timelypy.dataflow import Pipeline
>>> def build(scope):
...     def constructor(cap, info):
...         def logic(input, output):
...             for cap, data in input:
...                 output.session(cap).give_batch([x * 5 for x in data])
...         return logic
...     return scope.to_stream(range(4)).unary(Pipeline(), "Multiply", constructor).capture()
>>> timelypy.example(build).extract()
[(0, [0, 5, 10, 15])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pact, Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import (
    Frontier,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    batchwise_logic,
)
from timelypy.dataflow.notificator import FrontierNotificator, Notificator
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest

__all__ = [
    "unary",
    "unary_frontier",
    "unary_notify",
    "binary",
    "binary_frontier",
    "binary_notify",
    "sink",
    "source",
]

T = TypeVar("T")
T2 = TypeVar("T2")
U = TypeVar("U")

_PIPELINE = Pipeline()

#: ``logic(input, output)`` of a one-input operator.
UnaryLogic = Callable[[OperatorInput[T], OperatorOutput[U]], Any]
#: ``logic(input1, input2, output)`` of a two-input operator.
BinaryLogic = Callable[[OperatorInput[T], OperatorInput[T2], OperatorOutput[U]], Any]


def _one_output(
    scope: Scope,
    name: str,
    inputs: Sequence[tuple[Stream[Any], Pact]],
    constructor: Callable[[Capability, OperatorInfo], Callable[..., Any]] | None,
    interest: FrontierInterest,
    fuse: Callable[[Any, list[Any]], Any] | None = None,
) -> Stream[Any]:
    """An operator with ``inputs`` and one output; its logic gets every input, then the output.

    Either ``constructor`` makes the logic, or (``None``) the operator has
    one input and its work is ``fuse``, applied to each batch on its own
    (see :mod:`timelypy.dataflow.fusion`).
    """
    builder = OperatorBuilder(name, scope)
    info = builder.info
    handles: list[Any] = [
        builder.new_input(stream, pact, interest=interest) for stream, pact in inputs
    ]
    out, result = builder.new_output()
    handles.append(out)

    def build(caps: list[Capability]) -> Callable[[list[Frontier]], Any]:
        if constructor is None:
            assert fuse is not None
            return batchwise_logic(handles[0], out, fuse)
        logic = constructor(caps[0], info)

        def run(frontiers: list[Frontier]) -> None:
            logic(*handles)

        return run

    builder.build(build)
    if fuse is not None:
        builder.set_fuse(fuse)
    return result


def fusible_unary(
    stream: Stream[T],
    name: str,
    fuse: Callable[[Any, list[T]], list[U] | None],
) -> Stream[U]:
    """A ``Pipeline``-input operator that treats each batch on its own, fusible with its producer.

    ``fuse(time, records)`` is all it does: it gets each batch with its time
    and returns the records to send on at that time (for built-in
    record-at-a-time operators: ``map``, ``filter``, ``inspect``).  Fused, it
    runs inside its producer's send; on its own, each activation puts every
    waiting batch through it (:func:`~timelypy.dataflow.handles.batchwise_logic`).
    """
    return _one_output(
        stream.scope, name, [(stream, _PIPELINE)], None, FrontierInterest.NEVER, fuse
    )


def _with_notificator(
    inputs: Sequence[tuple[Stream[Any], Pact]],
    name: str,
    init: Iterable[Any],
    logic: Callable[..., Any],
) -> Stream[Any]:
    """Like :func:`_one_output` run on every frontier change, with a notificator over all inputs."""
    notificator = FrontierNotificator()
    times = list(init)

    def constructor(cap: Capability, info: OperatorInfo) -> Callable[..., Any]:
        for time in times:
            notificator.notify_at(cap.delayed(time))

        def run(*handles: Any) -> None:
            frontiers = tuple(handle.frontier for handle in handles[:-1])
            logic(*handles, Notificator(frontiers, notificator))

        return run

    return _one_output(inputs[0][0].scope, name, inputs, constructor, FrontierInterest.ALWAYS)


@stream_method
def unary(
    stream: Stream[T],
    pact: Pact,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], UnaryLogic[T, U]],
) -> Stream[U]:
    """One input, one output; ``logic(input, output)`` runs when data arrives."""
    return _one_output(stream.scope, name, [(stream, pact)], constructor, FrontierInterest.NEVER)


@stream_method
def unary_frontier(
    stream: Stream[T],
    pact: Pact,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], UnaryLogic[T, U]],
) -> Stream[U]:
    """Like :func:`unary`, also run when the input frontier changes (``input.frontier``)."""
    return _one_output(stream.scope, name, [(stream, pact)], constructor, FrontierInterest.ALWAYS)


@stream_method
def unary_notify(
    stream: Stream[T],
    pact: Pact,
    name: str,
    init: Iterable[Any],
    logic: Callable[[OperatorInput[T], OperatorOutput[U], Notificator], Any],
) -> Stream[U]:
    """One input, one output, and a notificator; ``init`` times are notified up front."""
    return _with_notificator([(stream, pact)], name, init, logic)


@stream_method
def binary(
    first: Stream[T],
    second: Stream[T2],
    pact1: Pact,
    pact2: Pact,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], BinaryLogic[T, T2, U]],
) -> Stream[U]:
    """Two inputs, one output; ``logic(input1, input2, output)`` runs when data arrives."""
    inputs: list[tuple[Stream[Any], Pact]] = [(first, pact1), (second, pact2)]
    return _one_output(first.scope, name, inputs, constructor, FrontierInterest.NEVER)


@stream_method
def binary_frontier(
    first: Stream[T],
    second: Stream[T2],
    pact1: Pact,
    pact2: Pact,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], BinaryLogic[T, T2, U]],
) -> Stream[U]:
    """Like :func:`binary`, also run when either input frontier changes."""
    inputs: list[tuple[Stream[Any], Pact]] = [(first, pact1), (second, pact2)]
    return _one_output(first.scope, name, inputs, constructor, FrontierInterest.ALWAYS)


@stream_method
def binary_notify(
    first: Stream[T],
    second: Stream[T2],
    pact1: Pact,
    pact2: Pact,
    name: str,
    init: Iterable[Any],
    logic: Callable[[OperatorInput[T], OperatorInput[T2], OperatorOutput[U], Notificator], Any],
) -> Stream[U]:
    """Two inputs, one output, and a notificator over both input frontiers."""
    return _with_notificator([(first, pact1), (second, pact2)], name, init, logic)


@stream_method
def sink(
    stream: Stream[T], pact: Pact, name: str, logic: Callable[[OperatorInput[T]], Any]
) -> None:
    """One input, no output; ``logic(input)`` runs on data and frontier changes."""
    builder = OperatorBuilder(name, stream.scope)
    inp = builder.new_input(stream, pact, interest=FrontierInterest.ALWAYS)

    def build(caps: list[Capability]) -> Callable[[list[Frontier]], Any]:
        def run(frontiers: list[Frontier]) -> None:
            logic(inp)

        return run

    builder.build(build)


def source(
    scope: Scope,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput[U]], Any]],
) -> Stream[U]:
    """No input, one output: ``constructor(cap, info)`` returns ``logic(output)``.

    Keep the capability with ``cap.retain()`` to send later, and reschedule
    with ``info.activate()`` while there is more to send.
    """
    return _one_output(scope, name, [], constructor, FrontierInterest.NEVER)
