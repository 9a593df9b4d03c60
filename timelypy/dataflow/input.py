"""Feeding a dataflow from the outside: ``InputHandle``.

The program that drives a dataflow owns an :class:`InputHandle`.  It sends
records at the handle's current time and advances the time; advancing
promises that no more records at earlier times will come, which is what
lets downstream operators and probes conclude that a time is complete.

Each worker has its own handle for the same input: a time is complete only
when *every* worker's handle has advanced past it (or closed).  Records sent
through one worker's handle start on that worker.

Records given to ``send`` are buffered and pushed into the dataflows in
batches, when the handle flushes (``flush``, ``advance_to``, ``close``, or a
full buffer); ``send_batch`` pushes its list at once.  ``Pipeline``
operators fused right after the input (``map``, ``filter``, ``flat_map``,
the ``inspect`` family, probes: see :mod:`timelypy.dataflow.fusion`) run on
a batch in the call that pushes it, so an error they raise comes from that
call, naming the operator; the other operators run in the worker's next
step, and the worker's frontiers move only in its steps, as without fusion.

>>> import timelypy
>>> def program(worker):
...     handle = timelypy.InputHandle()
...     probe = timelypy.ProbeHandle()
...     out = []
...     worker.dataflow(lambda scope: scope.input_from(handle)
...                     .inspect_time(lambda t, x: out.append((t, x))).probe_with(probe))
...     for epoch in range(3):
...         handle.send(epoch * 10)
...         handle.advance_to(epoch + 1)
...         while probe.less_than(handle.time):
...             worker.step()
...     return out
>>> timelypy.execute(timelypy.Config.thread(), program)
[[(0, 0), (1, 10), (2, 20)]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.extension import scope_method
from timelypy.dataflow.handles import owner_send
from timelypy.dataflow.scope import Scope
from timelypy.errors import InputError
from timelypy.order import U64_MAX, check_timestamp, less_equal

if TYPE_CHECKING:
    from timelypy.dataflow.capability import Capability
    from timelypy.dataflow.handles import OperatorOutput
    from timelypy.dataflow.stream import Stream

__all__ = ["InputHandle", "input_from", "new_input"]

T = TypeVar("T")

#: Records sent one at a time are pushed in batches of this many.
SEND_BUFFER = 1024


class InputHandle(Generic[T]):
    """Sends records (of type ``T``) into dataflows at a current time that only moves forward.

    It is an ordinary source operator: it holds a retained capability per
    stream it feeds, sends with ``output.give_batch(cap, records)`` from
    outside the dataflow, and downgrades (or drops) the capability as the
    program advances (or closes) it.
    """

    def __init__(self) -> None:
        self._time: Any = None
        self._timestamp_type: Any = None
        self._buffer: list[T] = []
        # the retained capability per stream this handle feeds
        self._caps: list[Capability] = []
        # each stream's output's send, which the handle's capability always allows
        self._senders: list[Callable[[Any, list[T]], None]] = []
        # the same sends, leaving the report to the capability's downgrade (advance_to)
        self._unreported: list[Callable[[Any, list[T]], None]] = []
        self._closed = False
        #: Sends what the worker buffered for other processes, where it has any.
        self._flush_sends: Callable[[], None] | None = None

    @property
    def time(self) -> Any:
        """The current time: records sent now carry it."""
        if self._time is None:
            raise InputError(
                "this input handle is not connected to a dataflow yet: "
                "use scope.input_from(handle) first"
            )
        return self._time

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def to_stream(self, scope: Scope) -> Stream[T]:
        """Connect the handle to ``scope``; return the stream of its records."""
        if self._closed:
            raise InputError("cannot connect a closed input handle")
        if self._timestamp_type is not None and scope.timestamp_type != self._timestamp_type:
            raise InputError(
                f"this input handle has {self._timestamp_type!r} timestamps; it cannot feed "
                f"scope {scope.name!r} with {scope.timestamp_type!r} timestamps"
            )
        builder = OperatorBuilder("Input", scope)
        output: OperatorOutput[T]
        output, stream = builder.new_output()
        held: list[Capability] = []

        def constructor(caps: list[Capability]) -> None:
            held.append(caps[0].retain())

        builder.build_passive(constructor)
        cap = held[0]
        if self._time is None:
            self._time = scope.minimum
            self._timestamp_type = scope.timestamp_type
        elif self._time != cap.time:
            cap.downgrade(self._time)
        self._caps.append(cap)
        self._senders.append(owner_send(output))
        self._unreported.append(owner_send(output, report=False))
        scope.worker.register_input(self)
        self._flush_sends = scope.worker.remote_flush
        return stream

    def _check_open(self, action: str) -> None:
        if self._closed:
            raise InputError(f"cannot {action}: the input handle is closed")
        if not self._caps:
            raise InputError(
                f"cannot {action}: the input handle is not connected to a dataflow "
                "(use scope.input_from(handle))"
            )

    def send(self, record: T) -> None:
        """Send one record at the current time (buffered)."""
        if self._closed or not self._caps:
            self._check_open("send")
        buffer = self._buffer
        buffer.append(record)
        if len(buffer) >= SEND_BUFFER:
            self.flush()

    def send_batch(self, records: Iterable[T]) -> None:
        """Send a list of records at the current time; the list is handed over.

        Operators take batches as lists: any other iterable (a tuple, a
        generator) is copied into one first.
        """
        self._check_open("send")
        if self._buffer:
            self.flush()
        if type(records) is not list:
            records = list(records)
        if records:
            self._push(records, self._senders)

    def flush(self) -> None:
        """Push the buffered records into the dataflows now."""
        if self._buffer:
            records = self._buffer
            self._buffer = []
            self._push(records, self._senders)

    def _push(self, records: list[T], senders: list[Callable[[Any, list[T]], None]]) -> None:
        # Straight to each output: the handle's own retained capabilities, all at
        # ``self._time`` and released only by close(), always allow the send.
        time = self._time
        if len(senders) == 1:
            senders[0](time, records)
            return
        last = len(senders) - 1
        for i, send in enumerate(senders):
            send(time, records if i == last else list(records))

    def advance_to(self, time: Any) -> None:
        """Move to ``time``: no more records at earlier times will be sent."""
        if self._closed or not self._caps:
            self._check_open("advance")
        current = self._time
        if type(time) is int and type(current) is int:
            if time == current:
                return
            if time < current or time > U64_MAX:
                check_timestamp(time, self._timestamp_type, "advance_to time")
                raise InputError(
                    f"cannot advance the input handle from {current!r} back to {time!r}: "
                    "an input's time only moves forward"
                )
        else:
            check_timestamp(time, self._timestamp_type, "advance_to time")
            if time == current:
                return
            if not less_equal(current, time):
                raise InputError(
                    f"cannot advance the input handle from {self._time!r} back to {time!r}: "
                    "an input's time only moves forward"
                )
        records = self._buffer
        if records:
            # Each downgrade below reports its operator's changes, these sends' too.
            self._buffer = []
            unreported = self._unreported
            if len(unreported) == 1:
                unreported[0](current, records)
            else:
                self._push(records, unreported)
            if self._flush_sends is not None:
                # The epoch's records for other processes leave now, as Timely's
                # communication thread sends them, not when the next step starts.
                self._flush_sends()
        for cap in self._caps:
            cap.downgrade(time)
        self._time = time

    def close(self) -> None:
        """Flush and release the input: the dataflows will see no more records from it."""
        if self._closed:
            return
        self.flush()
        for cap in self._caps:
            cap.drop()
        self._closed = True

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"time={self._time!r}"
        return f"InputHandle({state}, streams={len(self._caps)})"


@scope_method
def input_from(scope: Scope, handle: InputHandle[T]) -> Stream[T]:
    """A stream of the records sent through ``handle`` (``scope.input_from(handle)``)."""
    return handle.to_stream(scope)


@scope_method
def new_input(scope: Scope) -> tuple[InputHandle[Any], Stream[Any]]:
    """A new input handle and the stream of its records (``scope.new_input()``)."""
    handle: InputHandle[Any] = InputHandle()
    return handle, handle.to_stream(scope)
