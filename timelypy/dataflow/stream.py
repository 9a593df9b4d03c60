"""``Stream[T]``: a stream of timestamped batches of ``T`` records.

A :class:`Stream` is the output of an operator in some scope.  Readers
connect to it with :meth:`Stream.connect_to` (that is all an operator
builder needs); every batch the output produces is pushed to each reader.

Operators are not defined here.  Each lives in the module named after it in
:mod:`timelypy.dataflow.operators` and attaches itself to ``Stream`` as a
method (:mod:`timelypy.dataflow.extension`), written with the same public
building blocks (``unary``, ``binary``, ``OperatorBuilder``) a user has for
their own operators.  A user's operator is simply a function taking a
stream:

>>> import timelypy
>>> from timelypy.dataflow import Pipeline
>>> def multiply(stream, factor):
...     def constructor(cap, info):
...         def logic(input, output):
...             for cap, data in input:
...                 output.session(cap).give_batch([x * factor for x in data])
...         return logic
...     return stream.unary(Pipeline(), "Multiply", constructor)
>>> timelypy.example(lambda scope: multiply(scope.to_stream(range(3)), 5).capture()).extract()
[(0, [0, 5, 10])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from timelypy.events import ChannelsEvent

if TYPE_CHECKING:
    from timelypy.dataflow import probe as _probe
    from timelypy.dataflow.channels import Tee
    from timelypy.dataflow.operators import accumulate as _accumulate
    from timelypy.dataflow.operators import branch as _branch
    from timelypy.dataflow.operators import broadcast as _broadcast
    from timelypy.dataflow.operators import capture as _capture
    from timelypy.dataflow.operators import concat as _concat
    from timelypy.dataflow.operators import delay as _delay
    from timelypy.dataflow.operators import enterleave as _enterleave
    from timelypy.dataflow.operators import exchange as _exchange
    from timelypy.dataflow.operators import feedback as _feedback
    from timelypy.dataflow.operators import filter as _filter
    from timelypy.dataflow.operators import generic as _generic
    from timelypy.dataflow.operators import inspect as _inspect
    from timelypy.dataflow.operators import map as _map
    from timelypy.dataflow.operators import ok_err as _ok_err
    from timelypy.dataflow.operators import partition as _partition
    from timelypy.dataflow.operators import reclock as _reclock
    from timelypy.dataflow.scope import Scope

__all__ = ["Stream"]

T = TypeVar("T")

#: ``push(time, records)``: how a reader receives a batch.
BatchPush = Callable[[Any, list[Any]], None]


class Stream(Generic[T]):
    """The records (of type ``T``) one operator output produces, in one scope."""

    __slots__ = ("_tee", "scope", "source")

    def __init__(self, scope: Scope, source: tuple[int, int], tee: Tee) -> None:
        #: The scope the stream belongs to.
        self.scope = scope
        #: ``(operator index, output port)`` in the scope.
        self.source = source
        self._tee = tee

    def connect_to(self, target: tuple[int, int], push: BatchPush) -> None:
        """Add a reader at ``target`` (``(operator index, input port)``) receiving via ``push``.

        The edge is added to the scope's progress graph, and the batches the
        output produces are pushed to ``push(time, records)``.  Every reader
        but the last receives a copy of each batch, so a reader may modify
        what it receives.
        """
        scope = self.scope
        scope.subgraph.connect(self.source, target)
        self._tee.add(push)
        # Every edge gets an identifier whether or not anyone logs: drawing one only
        # while logging would make workers that log differently disagree on channels.
        identifier = scope.worker.new_identifier()
        logger = scope.worker.log_register().get("timely")
        if logger is not None:
            logger.log(ChannelsEvent(identifier, scope.path, self.source, target))

    def __repr__(self) -> str:
        return f"Stream(scope={self.scope.name!r}, source={self.source})"

    if TYPE_CHECKING:
        # The operators, attached by their own modules (see the module documentation).
        # generic.py
        unary = _generic.unary
        unary_frontier = _generic.unary_frontier
        unary_notify = _generic.unary_notify
        binary = _generic.binary
        binary_frontier = _generic.binary_frontier
        binary_notify = _generic.binary_notify
        sink = _generic.sink
        # map.py, filter.py, inspect.py
        map = _map.map
        flat_map = _map.flat_map
        map_in_place = _map.map_in_place
        filter = _filter.filter
        inspect = _inspect.inspect
        inspect_time = _inspect.inspect_time
        inspect_batch = _inspect.inspect_batch
        inspect_frontier = _inspect.inspect_frontier
        # exchange.py, concat.py, broadcast.py, partition.py, branch.py
        exchange = _exchange.exchange
        concat = _concat.concat
        concatenate = _concat.concatenate_with
        broadcast = _broadcast.broadcast
        partition = _partition.partition
        branch = _branch.branch
        branch_when = _branch.branch_when
        # enterleave.py, feedback.py
        enter = _enterleave.enter
        leave = _enterleave.leave
        connect_loop = _feedback.connect_loop
        # probe.py, capture.py
        probe = _probe.probe
        probe_with = _probe.probe_with
        capture = _capture.capture
        capture_into = _capture.capture_into
        # delay.py, accumulate.py, reclock.py
        delay = _delay.delay
        delay_total = _delay.delay_total
        delay_batch = _delay.delay_batch
        accumulate = _accumulate.accumulate
        count = _accumulate.count
        reclock = _reclock.reclock
        # ok_err.py
        ok_err = _ok_err.ok_err
        ok = _ok_err.ok
        err = _ok_err.err
        map_ok = _ok_err.map_ok
        map_err = _ok_err.map_err
        and_then = _ok_err.and_then
        unwrap_or_else = _ok_err.unwrap_or_else
