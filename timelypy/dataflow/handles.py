"""Operator handles: what an operator's logic touches.

Timely keeps these (``generic/handles.rs``) apart from the operator runtime
(:mod:`timelypy.dataflow.operator`), and so does timelypy: a built-in
operator and a user's operator see exactly these classes.

* :class:`OperatorInput` -- iterate it for ``(InputCapability, records)``
  pairs; reading a message counts it as consumed.  ``input.frontier`` is
  its :class:`Frontier`.
* :class:`OperatorOutput` -- ``output.session(cap)`` opens a
  :class:`Session` at a capability's time; ``give(x)`` buffers a record,
  ``give_batch(records)`` hands a whole list over.
* :class:`Frontier` -- a read-only view of an input's frontier.
* :class:`OperatorInfo` -- facts about the operator (name, address,
  worker) and its activator, passed to constructors.

Records travel as lists.  ``give_batch(records)`` hands the list itself to
the next operator without copying: do not modify a list after giving it.

Sessions are normally opened during an activation (the operator's logic
running).  A session opened *outside* one, with a capability the program
holds (``cap.retain()``), is how records enter a dataflow from outside
(:class:`~timelypy.dataflow.input.InputHandle` does exactly this): it is
good until the operator next runs, and what it sends schedules the operator
so that the sent records are reported to progress tracking.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from timelypy.dataflow.capability import Capability, InputCapability
from timelypy.errors import CapabilityError

if TYPE_CHECKING:
    from timelypy.dataflow.as_worker import AsWorker
    from timelypy.dataflow.channels import Tee
    from timelypy.dataflow.operator import LeafOperator
    from timelypy.progress.frontier import MutableAntichain

__all__ = [
    "Frontier",
    "OperatorInfo",
    "OperatorInput",
    "OperatorOutput",
    "Session",
]

T = TypeVar("T")

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

    __slots__ = (
        "_op",
        "_worker",
        "address",
        "global_id",
        "index",
        "name",
        "peers",
        "worker_index",
    )

    def __init__(
        self,
        op: LeafOperator,
        address: tuple[int, ...],
        global_id: int,
        worker: AsWorker | None = None,
    ) -> None:
        self._op = op
        self._worker = worker
        #: The operator's name.
        self.name = op.name
        #: Its index in its scope.
        self.index = address[-1]
        #: Its address: dataflow index, then child indices.
        self.address = address
        #: A worker-unique identifier (the same on every worker).
        self.global_id = global_id
        #: The index of the worker running this instance.
        self.worker_index = op.worker_index
        #: The number of workers.
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

    def activate_after(self, delay: float) -> None:
        """Schedule this operator once ``delay`` seconds have passed (Timely's ``activate_after``).

        A worker with nothing else to do parks until then, instead of
        spinning: what an operator that acts on the clock (a window closing
        at a system time) needs.
        """
        if self._worker is None:
            raise RuntimeError(f"operator {self.name!r}: no worker to schedule it on")
        self._worker.activate_after(self.activate, delay)

    def __repr__(self) -> str:
        return f"OperatorInfo({self.name!r}, address={self.address}, worker={self.worker_index})"


class OperatorInput(Generic[T]):
    """An operator input: iterate it to receive ``(InputCapability, records)``.

    >>> # for cap, records in input:
    >>> #     output.session(cap).give_batch([f(r) for r in records])
    """

    __slots__ = ("_consumed", "_index", "_op", "_queue", "frontier")

    def __init__(self, op: LeafOperator, index: int, queue: deque[tuple[Any, list[T]]]) -> None:
        self._op = op
        self._index = index
        self._queue = queue
        self._consumed = op.consumeds[index]
        #: The input's frontier (set when the dataflow is built).
        self.frontier: Frontier = _UNBUILT

    @property
    def index(self) -> int:
        """The input's port number."""
        return self._index

    def __iter__(self) -> Iterator[tuple[InputCapability, list[T]]]:
        queue = self._queue
        consumed = self._consumed
        op = self._op
        index = self._index
        while queue:
            time, data = queue.popleft()
            consumed[time] = consumed.get(time, 0) + len(data)
            yield InputCapability(op, index, time), data

    def next(self) -> tuple[InputCapability, list[T]] | None:
        """Return the next message, or ``None`` if none is waiting."""
        queue = self._queue
        if not queue:
            return None
        time, data = queue.popleft()
        consumed = self._consumed
        consumed[time] = consumed.get(time, 0) + len(data)
        return InputCapability(self._op, self._index, time), data

    def for_each(self, logic: Callable[[InputCapability, list[T]], Any]) -> None:
        """Call ``logic(cap, records)`` for every waiting message."""
        for cap, data in self:
            logic(cap, data)

    def for_each_time(self, logic: Callable[[InputCapability, list[list[T]]], Any]) -> None:
        """Group waiting messages by time and call ``logic(cap, [records, ...])`` once per time."""
        grouped: dict[Any, tuple[InputCapability, list[list[T]]]] = {}
        for cap, data in self:
            entry = grouped.get(cap.time)
            if entry is None:
                grouped[cap.time] = (cap, [data])
            else:
                entry[1].append(data)
        for cap, batches in grouped.values():
            logic(cap, batches)

    def discard(self) -> None:
        """Consume every waiting message without looking at it (a probe's input does)."""
        queue = self._queue
        consumed = self._consumed
        while queue:
            time, data = queue.popleft()
            consumed[time] = consumed.get(time, 0) + len(data)

    def is_empty(self) -> bool:
        """Whether no message is waiting."""
        return not self._queue

    def __repr__(self) -> str:
        return f"OperatorInput({self._op.name!r}, port={self._index}, waiting={len(self._queue)})"


class Session(Generic[T]):
    """Sends records at one time on one output (from ``output.session(cap)``).

    A session is only good while its capability is: during the activation
    that opened it (or, opened outside an activation with a retained
    capability, until the operator next runs), and, for a
    :class:`Capability`, until it is released.
    """

    __slots__ = ("_activation", "_cap", "_output", "_time")

    def __init__(self, output: OperatorOutput[T], cap: Capability | InputCapability) -> None:
        self._output = output
        self._time = cap.time
        self._cap = cap if type(cap) is Capability else None
        self._activation = output._op.activation

    def _check(self) -> None:
        output = self._output
        op = output._op
        cap = self._cap
        if self._activation != op.activation or (op.borrowed is None and cap is None):
            raise CapabilityError(
                f"operator {op.name!r} (worker {op.worker_index}), output {output._index}: a "
                f"session at time {self._time!r} was used outside the activation that opened "
                "it; open a new session with a capability you hold"
            )
        if cap is not None and not cap.is_valid:
            raise CapabilityError(
                f"operator {op.name!r} (worker {op.worker_index}), output {output._index}: the "
                f"capability of this session (time {self._time!r}) was released; a session "
                "cannot send without one"
            )

    @property
    def time(self) -> Any:
        """The time of the records sent through this session."""
        return self._time

    def give(self, record: T) -> None:
        """Send one record (buffered; sent in batches)."""
        output = self._output
        if output._buffer_time != self._time:
            self._check()
            output._switch(self._time)
        buffer = output._buffer
        buffer.append(record)
        if len(buffer) >= BUFFER_SIZE:
            output.flush()

    def give_batch(self, records: Iterable[T]) -> None:
        """Send a batch of records: a list is handed over, not copied; another iterable is."""
        if type(records) is not list:
            records = list(records)
        if records:
            self._check()
            self._output._send(self._time, records)

    give_vec = give_batch
    give_container = give_batch
    give_iterator = give_batch

    def __enter__(self) -> Session[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._output.flush()


class OperatorOutput(Generic[T]):
    """An operator output; open a :class:`Session` with a capability to send."""

    __slots__ = ("_buffer", "_buffer_time", "_index", "_op", "_produced", "_tee")

    def __init__(self, op: LeafOperator, index: int, tee: Tee) -> None:
        self._op = op
        self._index = index
        self._produced = op.produceds[index]
        # The tee's push is looked up at each send: readers are added after the output.
        self._tee = tee
        self._buffer: list[T] = []
        self._buffer_time: Any = _NO_TIME

    @property
    def index(self) -> int:
        """The output's port number."""
        return self._index

    def session(self, cap: Capability | InputCapability) -> Session[T]:
        """Open a session at ``cap``'s time, checking that ``cap`` allows it."""
        # The checks are inline (not a shared helper): this runs once per batch.
        kind = type(cap)
        if kind is InputCapability:
            if not cap.reaches(self._op, self._index):  # type: ignore[union-attr]
                self._reject(cap)
        elif kind is Capability:
            if not cap.allows(self._op, self._index):  # type: ignore[union-attr]
                self._reject(cap)
        else:
            self._not_a_capability(cap)
        return Session(self, cap)

    def give_batch(self, cap: Capability | InputCapability, records: Iterable[T]) -> None:
        """Send ``records`` at ``cap``'s time: ``session(cap).give_batch(records)``, faster.

        The list is handed over; any other iterable is copied into a list.
        """
        kind = type(cap)
        if kind is Capability:
            if not cap.allows(self._op, self._index):  # type: ignore[union-attr]
                self._reject(cap)
        elif kind is InputCapability:
            if not cap.reaches(self._op, self._index):  # type: ignore[union-attr]
                self._reject(cap)
        else:
            self._not_a_capability(cap)
        if type(records) is not list:
            records = list(records)
        if records:
            self._send(cap.time, records)

    def forward(self, inp: OperatorInput[T]) -> None:
        """Send every batch waiting at ``inp`` on unchanged, each at its own time.

        What ``for cap, data in inp: output.give_batch(cap, data)`` does (an
        exchange's or a concatenation's whole logic), without an input
        capability and its check per batch.  Only while the operator runs,
        and only from one of its inputs that reaches this output without a
        change of time.
        """
        op = self._op
        if inp._op is not op or not op.running or self._index not in op.identity_paths[inp._index]:
            self._cannot_forward(inp)
        queue = inp._queue
        if not queue:
            return
        if self._buffer:
            self.flush()
        consumed = inp._consumed
        produced = self._produced
        push = self._tee.push
        while queue:
            time, data = queue.popleft()
            n = len(data)
            consumed[time] = consumed.get(time, 0) + n
            if n:
                produced[time] = produced.get(time, 0) + n
                push(time, data)

    def _cannot_forward(self, inp: OperatorInput[T]) -> NoReturn:
        op = self._op
        where = f"operator {op.name!r} (worker {op.worker_index}), output {self._index}"
        if inp._op is not op:
            why = f"the input belongs to operator {inp._op.name!r}"
        elif not op.running:
            why = "an input is only forwarded while the operator runs"
        else:
            why = f"input {inp._index} does not reach this output without changing the time"
        raise CapabilityError(f"{where}: cannot forward input {inp._index}: {why}")

    def _not_a_capability(self, cap: object) -> NoReturn:
        op = self._op
        raise CapabilityError(
            f"operator {op.name!r} (worker {op.worker_index}): session() needs a Capability "
            f"or an InputCapability, not {cap!r} ({type(cap).__name__}); a bare time "
            "does not give the right to send"
        )

    def _reject(self, cap: Capability | InputCapability) -> None:
        op = self._op
        where = f"operator {op.name!r} (worker {op.worker_index}), output {self._index}"
        raise CapabilityError(f"{where}: cannot send with {cap!r}: {cap.why_not(op, self._index)}")

    def _send(self, time: Any, records: list[T]) -> None:
        if self._buffer:
            self.flush()
        produced = self._produced
        produced[time] = produced.get(time, 0) + len(records)
        self._tee.push(time, records)
        op = self._op
        if not op.running:
            # Sent from outside an activation: have the operator report it.
            op.changed_outside()

    def _send_unreported(self, time: Any, records: list[T]) -> None:
        # :meth:`_send` for an owner that reports the counts itself, right after.
        if self._buffer:
            self.flush()
        produced = self._produced
        produced[time] = produced.get(time, 0) + len(records)
        self._tee.push(time, records)

    def _switch(self, time: Any) -> None:
        op = self._op
        if not op.running:
            op.changed_outside()  # flushes what is buffered; its next activation flushes the rest
        elif self._buffer:
            self.flush()
        self._buffer_time = time
        op.buffered.append(self)

    def flush(self) -> None:
        """Send the records given one at a time and still buffered."""
        buffer = self._buffer
        if buffer:
            time = self._buffer_time
            self._buffer = []
            produced = self._produced
            produced[time] = produced.get(time, 0) + len(buffer)
            self._tee.push(time, buffer)
        self._buffer_time = _NO_TIME

    def __repr__(self) -> str:
        return f"OperatorOutput({self._op.name!r}, port={self._index})"


def owner_send(output: OperatorOutput[T], report: bool = True) -> Callable[[Any, list[T]], None]:
    """``output``'s send without a capability check: ``send(time, records)``.

    For a source that holds its own capability for good and keeps the time
    it sends at equal to the capability's (an
    :class:`~timelypy.dataflow.input.InputHandle`): checking on every batch
    would ask what the holder already knows.  Records sent outside an
    activation are reported to the scope as by :meth:`OperatorOutput.give_batch`;
    with ``report=False`` they are not, and the owner must have its operator
    report them before the scope's next pass (a capability's ``downgrade``
    outside an activation does).
    """
    return output._send if report else output._send_unreported


def batchwise_logic(
    inp: OperatorInput[T], out: OperatorOutput[Any], fuse: Callable[[Any, list[T]], Any]
) -> Callable[[list[Frontier]], None]:
    """The logic of a fusible operator that runs on its own: every waiting batch through ``fuse``.

    What ``for cap, data in inp: out.give_batch(cap, fuse(cap.time, data))``
    does, without an input capability per batch: ``fuse`` treats each batch
    on its own at its own time, which the operator's input may always send
    at (its summary to the output is the identity).  Used for a
    :func:`~timelypy.dataflow.operators.generic.fusible_unary` operator whose
    producer it is not fused with (an exchange's, or any with fusion off).
    """
    queue = inp._queue
    consumed = inp._consumed
    send = out._send

    def logic(frontiers: list[Frontier]) -> None:
        while queue:
            time, data = queue.popleft()
            consumed[time] = consumed.get(time, 0) + len(data)
            result = fuse(time, data)
            if result:
                send(time, result)

    return logic


class _NoTime:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no time>"


_NO_TIME: Any = _NoTime()


class _Unbuilt(Frontier):
    """The frontier of an input whose dataflow is not built yet: reading it is an error."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def _fail(self, *args: Any) -> Any:
        raise RuntimeError(
            "this input's frontier is not available until its dataflow is built "
            "(read it in the operator's logic, not in its constructor)"
        )

    less_than = less_equal = frontier = elements = is_empty = _fail  # type: ignore[assignment]
    __iter__ = __bool__ = _fail

    def __repr__(self) -> str:
        return "Frontier(<not built>)"


_UNBUILT: Frontier = _Unbuilt()
