"""Capture and replay: a stream as a sequence of events, and back.

``stream.capture_into(sink)`` records what a stream carries on this worker
as :class:`Messages` events (``time, records``) and :class:`ProgressUpdates`
events (changes to the stream's frontier, as ``(time, diff)`` pairs; Timely
calls them ``Event::Progress``, renamed here so that no class shares a name
with the :mod:`timelypy.progress` package).  The first ProgressUpdates event
retracts an implicit ``(minimum, +1)``: a capture starts out claiming that
anything may still come.

``stream.capture()`` captures into a new :class:`CaptureQueue` (thread safe,
so workers may share one); ``queue.extract()`` gathers the messages into a
sorted ``[(time, sorted records)]`` list, as Timely's ``extract``.

``replay_into(event_streams, scope)`` turns captured event sequences back
into a stream: records come back at their times, and the replayed stream's
frontier follows the recorded progress, so downstream operators see exactly
when each time completed.  Every worker replays the sequences it is given
(give each worker its share).

>>> import timelypy
>>> captured = timelypy.example(lambda scope: scope.to_stream([3, 1, 2]).capture())
>>> captured.extract()
[(0, [1, 2, 3])]
>>> events = list(captured)
>>> timelypy.example(lambda scope: timelypy.replay_into([events], scope)
...                  .map(lambda x: x * 10).capture()).extract()
[(0, [10, 20, 30])]
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import Frontier, OperatorOutput
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.errors import CapabilityError
from timelypy.order import less_equal
from timelypy.progress.operate import FrontierInterest

__all__ = [
    "ProgressUpdates",
    "Messages",
    "CaptureQueue",
    "capture_into",
    "capture",
    "extract",
    "replay_into",
]

T = TypeVar("T")


class ProgressUpdates(NamedTuple):
    """Frontier changes of a captured stream: ``[(time, diff), ...]``."""

    updates: list[tuple[Any, int]]


class Messages(NamedTuple):
    """Records of a captured stream at ``time``."""

    time: Any
    records: list[Any]


Event = ProgressUpdates | Messages


class CaptureQueue(Generic[T]):
    """A thread-safe sequence of the captured events of a stream of ``T`` records."""

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        self._lock = threading.Lock()

    def push(self, event: Event) -> None:
        """Append an event."""
        with self._lock:
            self._events.append(event)

    def next(self) -> Event | None:
        """Remove and return the oldest event, or ``None`` if there is none now."""
        with self._lock:
            return self._events.popleft() if self._events else None

    def __iter__(self) -> Iterator[Event]:
        with self._lock:
            return iter(list(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def extract(self) -> list[tuple[Any, list[T]]]:
        """The captured records grouped by time: ``[(time, sorted records)]``, sorted."""
        return extract(self)

    def __repr__(self) -> str:
        return f"CaptureQueue({len(self._events)} events)"


def extract(events: Iterable[Event]) -> list[tuple[Any, list[Any]]]:
    """Group the Messages of ``events`` by time; sort times and records; drop empty times."""
    staged: dict[Any, list[Any]] = {}
    for event in events:
        if isinstance(event, Messages):
            staged.setdefault(event.time, []).extend(event.records)
    return [(time, sorted(staged[time])) for time in sorted(staged) if staged[time]]


@stream_method
def capture_into(
    stream: Stream[T], sink: Callable[[Event], Any] | CaptureQueue[T] | list[Event]
) -> None:
    """Send ``stream``'s events to ``sink`` (a callable, a CaptureQueue, or a list)."""
    push: Callable[[Event], Any]
    if isinstance(sink, CaptureQueue):
        push = sink.push
    elif isinstance(sink, list):
        push = sink.append
    else:
        push = sink
    scope = stream.scope
    builder = OperatorBuilder("Capture", scope)
    changes: list[tuple[Any, int]] = []
    inp = builder.new_input(stream, interest=FrontierInterest.ALWAYS, frontier_changes=changes)
    minimum = scope.minimum

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        started = [False]

        def logic(frontiers: list[Frontier]) -> None:
            if not started[0]:
                started[0] = True
                changes.insert(0, (minimum, -1))
            if changes:
                merged: dict[Any, int] = {}
                for time, diff in changes:
                    merged[time] = merged.get(time, 0) + diff
                changes.clear()
                updates = [(t, d) for t, d in merged.items() if d]
                if updates:
                    push(ProgressUpdates(updates))
            for cap, data in inp:
                push(Messages(cap.time, data))

        return logic

    builder.build(constructor)


@stream_method
def capture(stream: Stream[T]) -> CaptureQueue[T]:
    """Capture ``stream`` into a new :class:`CaptureQueue`."""
    queue: CaptureQueue[T] = CaptureQueue()
    capture_into(stream, queue)
    return queue


def replay_into(
    event_streams: Sequence[Iterable[Event] | CaptureQueue[Any]], scope: Scope
) -> Stream[Any]:
    """A stream replaying ``event_streams`` (each a recorded sequence of events).

    A :class:`CaptureQueue` that is still being filled is polled at every
    activation until its recorded frontier is empty.

    The replay operator holds, per replayed sequence, a capability at each
    element of that sequence's recorded frontier (starting from the
    minimum, as the capture did), minted and dropped as the recorded
    progress says, and sends each recorded batch with one of them.  A
    sequence that claims a time before everything it holds, or sends at
    such a time, is not a capture: that raises
    :class:`~timelypy.errors.CapabilityError` naming it.
    """
    builder = OperatorBuilder("Replay", scope)
    info = builder.info
    output: OperatorOutput[Any]
    output, stream = builder.new_output()
    sources: list[CaptureQueue[Any] | Iterator[Event]] = [
        events if isinstance(events, CaptureQueue) else iter(list(events))
        for events in event_streams
    ]

    def constructor(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        # Each source starts out holding the minimum, as its capture did.
        held: list[list[Capability]] = [[caps[0].delayed(caps[0].time).retain()] for _ in sources]
        activate = info.activator()

        def covering(index: int, time: Any) -> Capability:
            for cap in held[index]:
                if less_equal(cap.time, time):
                    return cap
            raise CapabilityError(
                f"operator 'Replay' (worker {info.worker_index}): replayed sequence {index} "
                f"reaches time {time!r}, but its recorded frontier is "
                f"{[c.time for c in held[index]]!r}; it is not a captured stream"
            )

        def apply(index: int, updates: list[tuple[Any, int]]) -> None:
            mine = held[index]
            # Mint first (from what is held before this event), then release.
            for time, diff in updates:
                if diff > 0:
                    cap = covering(index, time)
                    mine.extend(cap.delayed(time).retain() for _ in range(diff))
            for time, diff in updates:
                for _ in range(-diff):
                    position = next((i for i, c in enumerate(mine) if c.time == time), None)
                    if position is None:
                        raise CapabilityError(
                            f"operator 'Replay' (worker {info.worker_index}): replayed sequence "
                            f"{index} retracts time {time!r}, which its recorded frontier "
                            f"{[c.time for c in mine]!r} does not hold; it is not a captured stream"
                        )
                    mine.pop(position).drop()

        def logic(frontiers: list[Frontier]) -> None:
            waiting = False
            for index, source in enumerate(sources):
                while True:
                    if isinstance(source, CaptureQueue):
                        event = source.next()
                    else:
                        event = next(source, None)
                    if event is None:
                        break
                    if isinstance(event, ProgressUpdates):
                        apply(index, event.updates)
                    elif event.records:
                        output.give_batch(covering(index, event.time), list(event.records))
                if isinstance(source, CaptureQueue) and held[index]:
                    waiting = True
            if waiting:
                activate()

        return logic

    builder.build(constructor)
    return stream
