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
from typing import TYPE_CHECKING, Any, NamedTuple

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.progress.operate import FrontierInterest

if TYPE_CHECKING:
    from timelypy.dataflow.scope import Scope
    from timelypy.dataflow.stream import Stream

__all__ = [
    "ProgressUpdates",
    "Messages",
    "CaptureQueue",
    "capture_into",
    "capture",
    "extract",
    "replay_into",
]


class ProgressUpdates(NamedTuple):
    """Frontier changes of a captured stream: ``[(time, diff), ...]``."""

    updates: list[tuple[Any, int]]


class Messages(NamedTuple):
    """Records of a captured stream at ``time``."""

    time: Any
    records: list[Any]


Event = ProgressUpdates | Messages


class CaptureQueue:
    """A thread-safe sequence of captured events."""

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

    def extract(self) -> list[tuple[Any, list[Any]]]:
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


def capture_into(stream: Stream, sink: Callable[[Event], Any] | CaptureQueue | list[Any]) -> None:
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
    inp = builder.new_input(stream, interest=FrontierInterest.ALWAYS)
    op = builder._op
    changes_list: list[list[tuple[Any, int]]] = [[]]
    op.frontier_changes = changes_list
    minimum = scope.minimum

    def constructor(caps: Any) -> Callable[[Any], None]:
        started = [False]
        changes = changes_list[0]

        def logic(frontiers: Any) -> None:
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


def capture(stream: Stream) -> CaptureQueue:
    """Capture ``stream`` into a new :class:`CaptureQueue`."""
    queue = CaptureQueue()
    capture_into(stream, queue)
    return queue


def replay_into(event_streams: Sequence[Iterable[Event] | CaptureQueue], scope: Scope) -> Stream:
    """A stream replaying ``event_streams`` (each a recorded sequence of events).

    A :class:`CaptureQueue` that is still being filled is polled at every
    activation until its recorded frontier is empty.
    """
    builder = OperatorBuilder("Replay", scope)
    info = builder.info
    output, stream = builder.new_output()
    op = builder._op
    minimum = scope.minimum
    sources: list[Any] = []
    for events in event_streams:
        sources.append(events if isinstance(events, CaptureQueue) else iter(list(events)))
    count = len(sources)

    def constructor(caps: Any) -> Callable[[Any], None]:
        started = [False]
        # Each source starts out holding the minimum, as its capture did.
        held: list[dict[Any, int]] = [{minimum: 1} for _ in sources]
        activate = info.activator()
        internal = op.internals[0]

        def logic(frontiers: Any) -> None:
            if not started[0]:
                started[0] = True
                # This worker's share of the initial capabilities was released when
                # the constructor returned (it was not retained); it now holds one
                # per replayed source, each of which starts at the minimum.
                internal[minimum] = internal.get(minimum, 0) + count
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
                        mine = held[index]
                        for time, diff in event.updates:
                            internal[time] = internal.get(time, 0) + diff
                            total = mine.get(time, 0) + diff
                            if total:
                                mine[time] = total
                            else:
                                mine.pop(time, None)
                    else:
                        if event.records:
                            output._send(event.time, list(event.records))
                if isinstance(source, CaptureQueue) and held[index]:
                    waiting = True
            if waiting:
                activate()

        return logic

    builder.build(constructor)
    return stream
