"""Event streams about what the runtime does, for users to subscribe to.

Like Timely's logging, each worker has a :class:`Registry` of named event
streams (``worker.log_register()``).  Subscribing with
``registry.insert(name, action)`` makes the worker record events of that
stream and call ``action(batch)`` with lists of ``(seconds, event)`` pairs,
``seconds`` counted from the worker's start.  Batches are delivered when
they fill up and at the end of every worker step.

Streams:

``"timely"``
    :class:`OperatesEvent` (an operator or scope was built),
    :class:`ChannelsEvent` (an edge was connected),
    :class:`ScheduleEvent` (an operator started or stopped running),
    :class:`MessagesEvent` (a batch was sent on an exchange channel),
    :class:`ShutdownEvent` (an operator was shut down),
    :class:`ParkEvent` (the worker parked or unparked);
``"timely/progress"``
    :class:`ProgressEvent` (a progress batch was sent or received).

Subscribe before building the dataflows you want to observe: operators look
their loggers up when they are built (removing a subscription stops them).
Nothing is recorded for a stream nobody subscribed to, so logging costs
nothing when unused.

>>> import timelypy
>>> seen = []
>>> def program(worker):
...     worker.log_register().insert("timely", seen.extend)
...     worker.dataflow(lambda scope: scope.to_stream(range(3)).map(str))
>>> _ = timelypy.execute(timelypy.Config.thread(), program)
>>> sorted({type(event).__name__ for _, event in seen})
['ChannelsEvent', 'OperatesEvent', 'ScheduleEvent', 'ShutdownEvent']
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Registry",
    "Logger",
    "OperatesEvent",
    "ChannelsEvent",
    "ScheduleEvent",
    "MessagesEvent",
    "ProgressEvent",
    "ShutdownEvent",
    "ParkEvent",
]

Action = Callable[[list[tuple[float, Any]]], Any]


@dataclass(frozen=True)
class OperatesEvent:
    """An operator (or scope) with worker-unique ``id`` was built at ``addr``."""

    id: int
    addr: tuple[int, ...]
    name: str


@dataclass(frozen=True)
class ChannelsEvent:
    """An edge in scope ``scope_addr`` from ``source`` to ``target`` (``(node, port)``)."""

    id: int
    scope_addr: tuple[int, ...]
    source: tuple[int, int]
    target: tuple[int, int]


@dataclass(frozen=True)
class ScheduleEvent:
    """The operator at ``addr`` started (``start=True``) or stopped running."""

    addr: tuple[int, ...]
    start: bool


@dataclass(frozen=True)
class MessagesEvent:
    """A batch of ``length`` records was sent on exchange ``channel`` to worker ``target``."""

    is_send: bool
    channel: int
    source: int
    target: int
    length: int


@dataclass(frozen=True)
class ProgressEvent:
    """A progress batch was sent or received on a scope's progress ``channel``."""

    is_send: bool
    source: int
    channel: int
    seq_no: int
    updates: tuple[tuple[tuple[int, int, int, Any], int], ...]


@dataclass(frozen=True)
class ShutdownEvent:
    """The operator at ``addr`` will never run again."""

    addr: tuple[int, ...]


@dataclass(frozen=True)
class ParkEvent:
    """The worker parked (``parked=True``) waiting for messages, or woke up."""

    parked: bool


class Logger:
    """Buffers events of one stream and hands them to the subscriber in batches."""

    __slots__ = ("_action", "_buffer", "_start", "closed")

    def __init__(self, action: Action, start: float) -> None:
        self._action = action
        self._buffer: list[tuple[float, Any]] = []
        self._start = start
        #: Set when the subscription is removed; operators built earlier stop logging.
        self.closed = False

    def log(self, event: Any) -> None:
        """Record ``event`` now (nothing, once the subscription was removed)."""
        if self.closed:
            return
        buffer = self._buffer
        buffer.append((time.perf_counter() - self._start, event))
        if len(buffer) >= 1024:
            self.flush()

    def flush(self) -> None:
        """Deliver the buffered events."""
        if self._buffer:
            batch = self._buffer
            self._buffer = []
            self._action(batch)


class Registry:
    """A worker's named event streams."""

    def __init__(self, start: float | None = None) -> None:
        self._start = time.perf_counter() if start is None else start
        #: The subscribed loggers by stream name (read-only to others: a worker's
        #: step tests it without a call).
        self.subscribed: dict[str, Logger] = {}

    def insert(self, name: str, action: Action) -> Logger:
        """Subscribe ``action`` to stream ``name`` (replacing any previous subscriber)."""
        old = self.subscribed.get(name)
        if old is not None:
            old.flush()
            old.closed = True
        logger = self.subscribed[name] = Logger(action, self._start)
        return logger

    def remove(self, name: str) -> Logger | None:
        """Unsubscribe from stream ``name``; return its logger (flushed), if any."""
        logger = self.subscribed.pop(name, None)
        if logger is not None:
            logger.flush()
            logger.closed = True
        return logger

    def get(self, name: str) -> Logger | None:
        """The logger of stream ``name``, or ``None`` if nobody subscribed."""
        return self.subscribed.get(name)

    def __bool__(self) -> bool:
        """Whether any stream has a subscriber."""
        return bool(self.subscribed)

    def flush(self) -> None:
        """Deliver every buffered event."""
        for logger in self.subscribed.values():
            logger.flush()
