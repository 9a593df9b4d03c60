"""Operators as the scope sees them, and the handles their logic uses.

:class:`LeafOperator` is every ordinary operator (built-in or user-written;
:class:`~timelypy.dataflow.builder.OperatorBuilder` makes them).  It keeps
the operator's progress bookkeeping -- messages consumed per input, produced
per output, capability changes per output -- and runs the user's logic inside
an *activation* that:

* opens a borrow scope, so capabilities minted during the activation are
  released at its end unless retained (see
  :mod:`timelypy.dataflow.capability`);
* flushes output buffers at its end, so every record given is sent;
* invalidates the input capabilities it handed out;
* re-activates the operator if it left input messages unread (Timely would
  stall instead).

The logic sees its inputs as :class:`OperatorInput` (iterate it for
``(InputCapability, records)`` pairs), its outputs as :class:`OperatorOutput`
(``output.session(cap).give(x)`` / ``.give_batch(records)``), and its input
frontiers as read-only :class:`Frontier` views.

Records travel as lists.  ``give_batch(records)`` hands the list itself to
the next operator without copying: do not modify a list after giving it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from timelypy.dataflow.capability import _BORROWED, _RELEASED, Capability, InputCapability
from timelypy.errors import CapabilityError
from timelypy.order import is_identity_summary
from timelypy.progress.frontier import MutableAntichain
from timelypy.progress.operate import FrontierInterest, Operate
from timelypy.progress.reachability import Connectivity

__all__ = [
    "Frontier",
    "LeafOperator",
    "OperatorInfo",
    "OperatorInput",
    "OperatorOutput",
    "Session",
    "BUFFER_SIZE",
]

#: Records given one at a time are sent in messages of at most this many.
BUFFER_SIZE = 1024


class Frontier:
    """A read-only view of an input's frontier: the times that may still arrive."""

    __slots__ = ("_antichain",)

    def __init__(self, antichain: MutableAntichain[Any]) -> None:
        self._antichain = antichain

    def less_than(self, time: Any) -> bool:
        """Whether some frontier element is strictly less than ``time``."""
        return self._antichain.less_than(time)

    def less_equal(self, time: Any) -> bool:
        """Whether some frontier element is ``<=`` ``time`` (``time`` may still arrive)."""
        return self._antichain.less_equal(time)

    def frontier(self) -> tuple[Any, ...]:
        """The frontier's elements."""
        return self._antichain.frontier()

    elements = frontier

    def is_empty(self) -> bool:
        """Whether no more data can arrive at all."""
        return self._antichain.is_empty()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._antichain.frontier())

    def __bool__(self) -> bool:
        return not self._antichain.is_empty()

    def __repr__(self) -> str:
        return f"Frontier({list(self._antichain.frontier())!r})"


class OperatorInfo:
    """Facts about an operator, passed to constructors."""

    __slots__ = ("_op", "address", "global_id", "index", "name", "peers", "worker_index")

    def __init__(self, op: LeafOperator, address: tuple[int, ...], global_id: int) -> None:
        self._op = op
        self.name = op.name
        self.index = address[-1]
        self.address = address
        self.global_id = global_id
        self.worker_index = op.worker_index
        self.peers = op.peers

    def activator(self) -> Callable[[], None]:
        """Return a function that schedules this operator in the next step (same worker)."""
        op = self._op

        def activate() -> None:
            if op.activate is not None:
                op.activate()

        return activate

    def activate(self) -> None:
        """Schedule this operator in the next step."""
        if self._op.activate is not None:
            self._op.activate()

    def __repr__(self) -> str:
        return f"OperatorInfo({self.name!r}, address={self.address}, worker={self.worker_index})"


class OperatorInput:
    """An operator input: iterate it to receive ``(InputCapability, records)``.

    >>> # for cap, records in input:
    >>> #     output.session(cap).give_batch([f(r) for r in records])
    """

    __slots__ = ("_consumed", "_index", "_op", "_queue", "frontier")

    def __init__(self, op: LeafOperator, index: int, queue: deque[Any]) -> None:
        self._op = op
        self._index = index
        self._queue = queue
        self._consumed = op.consumeds[index]
        #: The input's frontier (set when the dataflow is built).
        self.frontier: Frontier | None = None

    def __iter__(self) -> Iterator[tuple[InputCapability, list[Any]]]:
        queue = self._queue
        consumed = self._consumed
        op = self._op
        index = self._index
        while queue:
            time, data = queue.popleft()
            consumed[time] = consumed.get(time, 0) + len(data)
            yield InputCapability(op, index, time), data

    def next(self) -> tuple[InputCapability, list[Any]] | None:
        """Return the next message, or ``None`` if none is waiting."""
        queue = self._queue
        if not queue:
            return None
        time, data = queue.popleft()
        consumed = self._consumed
        consumed[time] = consumed.get(time, 0) + len(data)
        return InputCapability(self._op, self._index, time), data

    def for_each(self, logic: Callable[[InputCapability, list[Any]], Any]) -> None:
        """Call ``logic(cap, records)`` for every waiting message."""
        for cap, data in self:
            logic(cap, data)

    def for_each_time(self, logic: Callable[[InputCapability, list[list[Any]]], Any]) -> None:
        """Group waiting messages by time and call ``logic(cap, [records, ...])`` once per time."""
        grouped: dict[Any, tuple[InputCapability, list[list[Any]]]] = {}
        for cap, data in self:
            entry = grouped.get(cap.time)
            if entry is None:
                grouped[cap.time] = (cap, [data])
            else:
                entry[1].append(data)
        for cap, batches in grouped.values():
            logic(cap, batches)

    def is_empty(self) -> bool:
        """Whether no message is waiting."""
        return not self._queue

    def __repr__(self) -> str:
        return f"OperatorInput({self._op.name!r}, port={self._index}, waiting={len(self._queue)})"


class Session:
    """Sends records at one time on one output (from ``output.session(cap)``).

    A session is only good while its capability is: during the activation
    that opened it, and (for a :class:`Capability`) until it is released.
    """

    __slots__ = ("_activation", "_cap", "_output", "_time")

    def __init__(self, output: OperatorOutput, cap: Capability | InputCapability) -> None:
        self._output = output
        self._time = cap.time
        self._cap = cap if type(cap) is Capability else None
        self._activation = output._op._activation

    def _check(self) -> None:
        output = self._output
        op = output._op
        cap = self._cap
        if self._activation != op._activation or op._borrowed is None:
            raise CapabilityError(
                f"operator {op.name!r} (worker {op.worker_index}), output {output._index}: a "
                f"session at time {self._time!r} was used outside the activation that opened "
                "it; open a new session with a capability you hold"
            )
        if cap is not None and cap._state == _RELEASED:
            raise CapabilityError(
                f"operator {op.name!r} (worker {op.worker_index}), output {output._index}: the "
                f"capability of this session (time {self._time!r}) was released; a session "
                "cannot send without one"
            )

    @property
    def time(self) -> Any:
        """The time of the records sent through this session."""
        return self._time

    def give(self, record: Any) -> None:
        """Send one record (buffered; sent in batches)."""
        output = self._output
        if output._buffer_time != self._time:
            self._check()
            output._switch(self._time)
        buffer = output._buffer
        buffer.append(record)
        if len(buffer) >= BUFFER_SIZE:
            output._flush()

    def give_batch(self, records: list[Any]) -> None:
        """Send a list of records; the list is handed over, not copied."""
        if records:
            self._check()
            self._output._send(self._time, records)

    give_vec = give_batch
    give_container = give_batch

    def give_iterator(self, records: Iterable[Any]) -> None:
        """Send every record of an iterable."""
        batch = records if type(records) is list else list(records)
        if batch:
            self._check()
            self._output._send(self._time, batch)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self._output._flush()


class OperatorOutput:
    """An operator output; open a :class:`Session` with a capability to send."""

    __slots__ = ("_buffer", "_buffer_time", "_index", "_op", "_produced", "_push")

    def __init__(
        self, op: LeafOperator, index: int, push: Callable[[Any, list[Any]], None]
    ) -> None:
        self._op = op
        self._index = index
        self._produced = op.produceds[index]
        self._push = push
        self._buffer: list[Any] = []
        self._buffer_time: Any = _NO_TIME

    @property
    def index(self) -> int:
        """The output's port number."""
        return self._index

    def session(self, cap: Capability | InputCapability) -> Session:
        """Open a session at ``cap``'s time, checking that ``cap`` allows it."""
        op = self._op
        kind = type(cap)
        if kind is Capability:
            if cap._state == _RELEASED or cap._op is not op or cap._output != self._index:  # type: ignore[union-attr]
                self._reject(cap)
        elif kind is InputCapability:
            if (
                cap._activation != op._activation  # type: ignore[union-attr]
                or op._borrowed is None
                or self._index not in op._identity_path[cap._input]  # type: ignore[union-attr]
            ):
                self._reject(cap)
        else:
            raise CapabilityError(
                f"operator {op.name!r} (worker {op.worker_index}): session() needs a Capability "
                f"or an InputCapability, not {cap!r} ({type(cap).__name__}); a bare time "
                "does not give the right to send"
            )
        return Session(self, cap)

    def give_batch(self, cap: Capability | InputCapability, records: list[Any]) -> None:
        """Shorthand for ``session(cap).give_batch(records)``."""
        self.session(cap).give_batch(records)

    def _reject(self, cap: Any) -> None:
        op = self._op
        where = f"operator {op.name!r} (worker {op.worker_index}), output {self._index}"
        if type(cap) is Capability:
            if cap._state == _RELEASED:
                why = "it was released (borrowed capabilities end with their activation)"
            elif cap._op is not op:
                why = f"it belongs to operator {cap._op.name!r}"
            else:
                why = f"it is for output {cap._output}"
        elif cap._activation != op._activation or op._borrowed is None:
            why = "input capabilities are only valid during the activation that received them"
        else:
            why = (
                f"input {cap._input} does not reach this output without changing the time; "
                "use cap.delayed(time, output) to mint a capability"
            )
        raise CapabilityError(f"{where}: cannot send with {cap!r}: {why}")

    def _send(self, time: Any, records: list[Any]) -> None:
        if self._buffer:
            self._flush()
        produced = self._produced
        produced[time] = produced.get(time, 0) + len(records)
        self._push(time, records)

    def _switch(self, time: Any) -> None:
        if self._buffer:
            self._flush()
        self._buffer_time = time

    def _flush(self) -> None:
        buffer = self._buffer
        if buffer:
            time = self._buffer_time
            self._buffer = []
            produced = self._produced
            produced[time] = produced.get(time, 0) + len(buffer)
            self._push(time, buffer)
        self._buffer_time = _NO_TIME

    def __repr__(self) -> str:
        return f"OperatorOutput({self._op.name!r}, port={self._index})"


class _NoTime:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no time>"


_NO_TIME: Any = _NoTime()


class LeafOperator(Operate):
    """An ordinary operator: inputs, outputs, bookkeeping, and user logic."""

    def __init__(
        self,
        name: str,
        worker_index: int,
        peers: int,
        minimum: Any,
    ) -> None:
        super().__init__()
        self.name = name
        self.worker_index = worker_index
        self.peers = peers
        self.minimum = minimum
        self.logic: Callable[[list[Frontier]], Any] | None = None
        self.reschedule = False
        self._borrowed: list[Capability] | None = None
        self._activation = 0
        self._inputs: list[OperatorInput] = []
        self._outputs: list[OperatorOutput] = []
        self._frontiers: list[Frontier] = []
        self._identity_path: list[set[int]] = []
        self._running = False

    # -- construction -------------------------------------------------------

    def add_input(self, queue: deque[Any], interest: FrontierInterest) -> OperatorInput:
        """Add an input reading from ``queue``."""
        index = self.inputs
        self.inputs += 1
        self.consumeds.append({})
        self.notify.append(interest)
        self.connectivity.append({})
        handle = OperatorInput(self, index, queue)
        self._inputs.append(handle)
        return handle

    def add_output(self, push: Callable[[Any, list[Any]], None]) -> OperatorOutput:
        """Add an output pushing into ``push``."""
        index = self.outputs
        self.outputs += 1
        self.produceds.append({})
        self.internals.append({})
        handle = OperatorOutput(self, index, push)
        self._outputs.append(handle)
        return handle

    def finish_shape(self, connectivity: Connectivity) -> None:
        """Fix the connectivity; compute which input/output paths keep times unchanged."""
        self.connectivity = connectivity
        # Per input, the outputs it reaches without changing the time (sparse: an
        # operator with many inputs and outputs often connects each to few).
        self._identity_path = [
            {
                output
                for output, summaries in port_conn.items()
                if any(is_identity_summary(s) for s in summaries)
            }
            for port_conn in connectivity
        ]

    def run_constructor(self, constructor: Callable[[list[Capability]], Any]) -> Any:
        """Call ``constructor`` with one borrowed capability per output; return its logic."""
        borrowed: list[Capability] = []
        self._borrowed = borrowed
        caps = [Capability(self, o, self.minimum, _BORROWED) for o in range(self.outputs)]
        borrowed.extend(caps)
        try:
            return constructor(caps)
        finally:
            self._end_borrow(borrowed)

    # -- Operate ----------------------------------------------------------------

    def initial_internals(self) -> list[dict[Any, int]]:
        """One capability per output per worker, at the minimum time."""
        return [{self.minimum: self.peers} for _ in range(self.outputs)]

    def set_input_frontiers(self, frontiers: list[MutableAntichain[Any]]) -> None:
        """Wrap the scope's live implications as read-only views."""
        self._frontiers = [Frontier(f) for f in frontiers]
        for handle, view in zip(self._inputs, self._frontiers, strict=True):
            handle.frontier = view

    def schedule(self) -> bool:
        """Run the logic in an activation; return whether it asked to run again."""
        logic = self.logic
        if logic is None:
            return False
        self._activation += 1
        borrowed: list[Capability] = []
        self._borrowed = borrowed
        self._running = True
        try:
            result = logic(self._frontiers)
        finally:
            self._running = False
            for output in self._outputs:
                if output._buffer:
                    output._flush()
            self._end_borrow(borrowed)
            self._activation += 1
        for handle in self._inputs:
            if handle._queue:
                self.activate()
                break
        if self.reschedule and result:
            # build_reschedule's logic asked to run again: schedule it next step
            # (and keep the scope alive meanwhile, as Timely's incomplete flag does).
            self.activate()
            return True
        return False

    def _end_borrow(self, borrowed: list[Capability]) -> None:
        self._borrowed = None
        for cap in borrowed:
            if cap._state == _BORROWED:
                internal = self.internals[cap._output]
                internal[cap._time] = internal.get(cap._time, 0) - 1
                cap._state = _RELEASED

    def _changed_outside(self) -> None:
        """Progress changed outside an activation: get scheduled so it is reported."""
        if not self._running and self.activate is not None:
            self.activate()

    def shut_down(self) -> None:
        """Drop the logic and whatever state it holds."""
        self.logic = None

    def __repr__(self) -> str:
        return f"LeafOperator({self.name!r}, index={self.index}, worker={self.worker_index})"
