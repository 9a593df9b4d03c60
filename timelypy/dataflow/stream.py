"""``Stream``: a stream of timestamped record batches, and its operators.

A :class:`Stream` is the output of an operator in some scope.  Its methods
build new operators reading it, the way Timely's extension traits do; each
method's implementation lives in the module named after the operator in
:mod:`timelypy.dataflow.operators` and is written with the same public
building blocks (``unary``, ``binary``, ``OperatorBuilder``) a user would use
for their own operators.

A user's operator is a function taking a stream:

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

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from timelypy.dataflow.channels import Push, Tee
from timelypy.dataflow.operators import accumulate as _accumulate
from timelypy.dataflow.operators import branch as _branch
from timelypy.dataflow.operators import broadcast as _broadcast
from timelypy.dataflow.operators import capture as _capture
from timelypy.dataflow.operators import concat as _concat
from timelypy.dataflow.operators import delay as _delay
from timelypy.dataflow.operators import exchange as _exchange
from timelypy.dataflow.operators import feedback as _feedback
from timelypy.dataflow.operators import filter as _filter
from timelypy.dataflow.operators import generic as _generic
from timelypy.dataflow.operators import inspect as _inspect
from timelypy.dataflow.operators import map as _map
from timelypy.dataflow.operators import ok_err as _ok_err
from timelypy.dataflow.operators import partition as _partition
from timelypy.dataflow.operators import reclock as _reclock
from timelypy.dataflow.probe import ProbeHandle, probe, probe_with

if TYPE_CHECKING:
    from timelypy.dataflow.channels import Pact
    from timelypy.dataflow.notificator import Notificator
    from timelypy.dataflow.operator import OperatorInfo, OperatorInput, OperatorOutput
    from timelypy.dataflow.operators.feedback import LoopHandle
    from timelypy.dataflow.scope import Scope

__all__ = ["Stream"]


class Stream:
    """The records one operator output produces, in one scope."""

    __slots__ = ("_tee", "scope", "source")

    def __init__(self, scope: Scope, source: tuple[int, int], tee: Tee) -> None:
        self.scope = scope
        self.source = source
        self._tee = tee

    def _connect(self, target: tuple[int, int], push: Push) -> None:
        """Add a reader at ``target`` (``(node, input)``) receiving batches through ``push``."""
        self.scope.subgraph.connect(self.source, target)
        self._tee.add(push)
        self.scope.worker._log_channel(self.scope.path, self.source, target)

    def __repr__(self) -> str:
        return f"Stream(scope={self.scope.name!r}, source={self.source})"

    # -- generic operators --------------------------------------------------------

    def unary(
        self,
        pact: Pact,
        name: str,
        constructor: Callable[[Any, OperatorInfo], Callable[[OperatorInput, OperatorOutput], Any]],
    ) -> Stream:
        """A one-input operator; see :mod:`timelypy.dataflow.operators.generic`."""
        return _generic.unary(self, pact, name, constructor)

    def unary_frontier(
        self,
        pact: Pact,
        name: str,
        constructor: Callable[[Any, OperatorInfo], Callable[[OperatorInput, OperatorOutput], Any]],
    ) -> Stream:
        """A one-input operator also run on frontier changes."""
        return _generic.unary_frontier(self, pact, name, constructor)

    def unary_notify(
        self,
        pact: Pact,
        name: str,
        init: Iterable[Any],
        logic: Callable[[OperatorInput, OperatorOutput, Notificator], Any],
    ) -> Stream:
        """A one-input operator with a notificator."""
        return _generic.unary_notify(self, pact, name, init, logic)

    def binary(
        self,
        other: Stream,
        pact1: Pact,
        pact2: Pact,
        name: str,
        constructor: Callable[[Any, OperatorInfo], Callable[..., Any]],
    ) -> Stream:
        """A two-input operator."""
        return _generic.binary(self, other, pact1, pact2, name, constructor)

    def binary_frontier(
        self,
        other: Stream,
        pact1: Pact,
        pact2: Pact,
        name: str,
        constructor: Callable[[Any, OperatorInfo], Callable[..., Any]],
    ) -> Stream:
        """A two-input operator also run on frontier changes."""
        return _generic.binary_frontier(self, other, pact1, pact2, name, constructor)

    def binary_notify(
        self,
        other: Stream,
        pact1: Pact,
        pact2: Pact,
        name: str,
        init: Iterable[Any],
        logic: Callable[..., Any],
    ) -> Stream:
        """A two-input operator with a notificator over both inputs."""
        return _generic.binary_notify(self, other, pact1, pact2, name, init, logic)

    def sink(self, pact: Pact, name: str, logic: Callable[[OperatorInput], Any]) -> None:
        """A one-input operator with no output."""
        _generic.sink(self, pact, name, logic)

    # -- record-wise operators ----------------------------------------------------

    def map(self, func: Callable[[Any], Any]) -> Stream:
        """Apply ``func`` to every record."""
        return _map.map(self, func)

    def flat_map(self, func: Callable[[Any], Iterable[Any]]) -> Stream:
        """Replace each record by the items ``func`` returns for it."""
        return _map.flat_map(self, func)

    def map_in_place(self, func: Callable[[Any], Any]) -> Stream:
        """Apply ``func`` to every record, reusing each batch's list."""
        return _map.map_in_place(self, func)

    def filter(self, predicate: Callable[[Any], bool]) -> Stream:
        """Keep the records ``predicate`` accepts."""
        return _filter.filter(self, predicate)

    def inspect(self, func: Callable[[Any], Any]) -> Stream:
        """Call ``func(record)`` on every record."""
        return _inspect.inspect(self, func)

    def inspect_time(self, func: Callable[[Any, Any], Any]) -> Stream:
        """Call ``func(time, record)`` on every record."""
        return _inspect.inspect_time(self, func)

    def inspect_batch(self, func: Callable[[Any, list[Any]], Any]) -> Stream:
        """Call ``func(time, records)`` on every batch."""
        return _inspect.inspect_batch(self, func)

    def inspect_frontier(self, func: Callable[[tuple[Any, ...]], Any]) -> Stream:
        """Call ``func(frontier)`` whenever the frontier changes."""
        return _inspect.inspect_frontier(self, func)

    # -- routing ------------------------------------------------------------------

    def exchange(self, key: Callable[[Any], int]) -> Stream:
        """Send each record to worker ``key(record) % peers``."""
        return _exchange.exchange(self, key)

    def concat(self, other: Stream) -> Stream:
        """Merge with ``other``."""
        return _concat.concat(self, other)

    def concatenate(self, others: Sequence[Stream]) -> Stream:
        """Merge with every stream of ``others``."""
        return _concat.concatenate(self.scope, [self, *others])

    # -- scopes and loops ---------------------------------------------------------

    def enter(self, scope: Scope) -> Stream:
        """Bring this stream into the nested ``scope``."""
        return scope._enter(self)

    def leave(self) -> Stream:
        """Take this stream out of its nested scope."""
        return self.scope._leave(self)

    def connect_loop(self, handle: LoopHandle) -> None:
        """Feed this stream into the loop of ``handle`` (from ``scope.feedback``)."""
        _feedback.connect_loop(self, handle)

    # -- observation --------------------------------------------------------------

    def probe(self) -> ProbeHandle:
        """A new probe handle watching this stream's frontier."""
        return probe(self)

    def probe_with(self, handle: ProbeHandle) -> Stream:
        """Make ``handle`` watch this stream too; return this stream."""
        return probe_with(self, handle)

    def capture(self) -> _capture.CaptureQueue:
        """Record this stream's events into a new :class:`CaptureQueue`."""
        return _capture.capture(self)

    def capture_into(self, sink: Any) -> None:
        """Record this stream's events into ``sink`` (callable, list or CaptureQueue)."""
        _capture.capture_into(self, sink)

    # -- splitting, time, aggregation, results, broadcast -------------------------
    # (partition.py, branch.py, delay.py, accumulate.py, reclock.py, ok_err.py,
    # broadcast.py)

    def partition(self, parts: int, route: Callable[[Any], tuple[int, Any]]) -> list[Stream]:
        """``parts`` streams; ``route(record) -> (part, new_record)`` picks the stream."""
        return _partition.partition(self, parts, route)

    def branch(self, condition: Callable[[Any, Any], bool]) -> tuple[Stream, Stream]:
        """``(false_stream, true_stream)`` by ``condition(time, record)``."""
        return _branch.branch(self, condition)

    def branch_when(self, condition: Callable[[Any], bool]) -> tuple[Stream, Stream]:
        """``(false_stream, true_stream)`` by ``condition(time)``, whole batches at a time."""
        return _branch.branch_when(self, condition)

    def delay(self, func: Callable[[Any, Any], Any]) -> Stream:
        """Send each record at ``func(record, time)`` (``>= time``) once that time completes."""
        return _delay.delay(self, func)

    def delay_total(self, func: Callable[[Any, Any], Any]) -> Stream:
        """:meth:`delay` for totally ordered timestamps."""
        return _delay.delay_total(self, func)

    def delay_batch(self, func: Callable[[Any], Any]) -> Stream:
        """Send each batch at ``func(time)`` (``>= time``) once that time completes."""
        return _delay.delay_batch(self, func)

    def accumulate(self, default: Any, logic: Callable[[Any, list[Any]], Any]) -> Stream:
        """One record per completed time: ``logic(acc, records)`` folded from ``default``."""
        return _accumulate.accumulate(self, default, logic)

    def count(self) -> Stream:
        """The number of records at each completed time (per worker)."""
        return _accumulate.count(self)

    def reclock(self, clock: Stream) -> Stream:
        """Release records at the complete times of ``clock`` at or after theirs."""
        return _reclock.reclock(self, clock)

    def ok_err(self, func: Callable[[Any], Any]) -> tuple[Stream, Stream]:
        """``(ok_stream, err_stream)``: ``func`` returns ``Ok(x)`` or ``Err(e)`` per record."""
        return _ok_err.ok_err(self, func)

    def ok(self) -> Stream:
        """The payloads of the ``Ok`` records of a stream of ``Ok``/``Err``."""
        return _ok_err.ok(self)

    def err(self) -> Stream:
        """The payloads of the ``Err`` records of a stream of ``Ok``/``Err``."""
        return _ok_err.err(self)

    def map_ok(self, func: Callable[[Any], Any]) -> Stream:
        """``Ok(x)`` becomes ``Ok(func(x))``; ``Err`` records pass unchanged."""
        return _ok_err.map_ok(self, func)

    def map_err(self, func: Callable[[Any], Any]) -> Stream:
        """``Err(e)`` becomes ``Err(func(e))``; ``Ok`` records pass unchanged."""
        return _ok_err.map_err(self, func)

    def and_then(self, func: Callable[[Any], Any]) -> Stream:
        """``Ok(x)`` becomes ``func(x)`` (an ``Ok`` or ``Err``); ``Err`` records pass unchanged."""
        return _ok_err.and_then(self, func)

    def unwrap_or_else(self, func: Callable[[Any], Any]) -> Stream:
        """``Ok(x)`` becomes ``x`` and ``Err(e)`` becomes ``func(e)``."""
        return _ok_err.unwrap_or_else(self, func)

    def broadcast(self) -> Stream:
        """Send every record to every worker."""
        return _broadcast.broadcast(self)
