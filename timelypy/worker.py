"""The worker: builds dataflows and steps them.

A :class:`Worker` is one thread of a computation.  Every worker builds the
same dataflows, in the same order, and runs them on its share of the data;
workers exchange records and progress through their allocator, which any
transport may provide (threads, processes, Spark tasks; see
:mod:`timelypy.execute`).  To the dataflows it builds, a worker is an
:class:`~timelypy.dataflow.as_worker.AsWorker`: they use nothing else of it.

``worker.step()`` does one round of work:

1. turn messages that arrived from other workers into activations of the
   operators (and scopes) that read them;
2. schedule every dataflow with an active operator (each schedules only its
   active operators, in order);
3. send the buffered outgoing messages.

``step_or_park(timeout)`` does the same but, if nothing is active, first
waits up to ``timeout`` seconds for a message.  A worker whose peer failed
raises :class:`~timelypy.errors.WorkerAborted` from its next step, so a
program's ``while probe.less_than(t): worker.step()`` loop ends too.

**Stalls.**  Whoever steps the worker (the program's own loop, or
:func:`~timelypy.execute.run_worker` after the program returned), every
:data:`STALL_SAMPLE_SECONDS` the step looks at what holds the dataflows
(one clock read per step, the look itself once per period): records that
were sent to an operator's input and are still unread two looks in a row
(an operator that never reads its input: its messages hold the frontier
for ever) are logged as a WARNING naming the operator, its input and the
time.  A capability that stays is not reported here: the program's own
input handles hold one while it feeds them;
:func:`~timelypy.execute.run_worker` reports those once the program
returned.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.communication.allocator import Allocator
from timelypy.communication.config import Config
from timelypy.dataflow.as_worker import Closable, Push
from timelypy.dataflow.probe import ProbeHandle
from timelypy.dataflow.scope import Scope, build_dataflow
from timelypy.events import ParkEvent, Registry, ShutdownEvent
from timelypy.progress.explain import Holder, explain, summarize
from timelypy.progress.metrics import frontier_lag, operator_metrics
from timelypy.progress.operate import Operate
from timelypy.progress.subgraph import Subgraph

__all__ = ["Worker"]

R = TypeVar("R")

log = logging.getLogger("timelypy")

#: How many completed dataflows' final metrics a worker keeps (``metrics(completed=True)``).
COMPLETED_KEPT = 16
#: Seconds between a worker's looks at what holds its dataflows (see "Stalls" above).
STALL_SAMPLE_SECONDS = 30.0


class Worker:
    """One worker of a computation; see the module documentation."""

    def __init__(self, allocator: Allocator, config: Config | None = None) -> None:
        self._allocator = allocator
        # Allocators whose receive/release/idle do nothing (the base class's)
        # are not called for them in every step.
        kind = type(allocator)
        self._receive = allocator.receive if kind.receive is not Allocator.receive else None
        self._release = allocator.release if kind.release is not Allocator.release else None
        self._idle = allocator.idle if kind.idle is not Allocator.idle else None
        self.config = config if config is not None else Config()
        self._index = allocator.index
        self._peers = allocator.peers
        self._dataflows: dict[int, Subgraph] = {}
        self._completed_metrics: list[dict[str, Any]] = []
        self._active: set[int] = set()
        self._next_identifier = 0
        self._next_dataflow = 0
        self._channels: dict[int, Operate] = {}
        self._inputs: list[Closable] = []
        self._registry = Registry()
        self._last_activity = time.monotonic()
        # delayed activations: (deadline, sequence, activate), a heap
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_sequence = 0
        self._stall_seconds = STALL_SAMPLE_SECONDS
        self._next_stall_look = self._last_activity + STALL_SAMPLE_SECONDS
        self._unread: list[Holder] = []

    @property
    def index(self) -> int:
        """The worker's index, ``0 <= index < peers``."""
        return self._index

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        return self._peers

    @property
    def allocator(self) -> Allocator:
        """The communication layer this worker uses."""
        return self._allocator

    def log_register(self) -> Registry:
        """The registry of this worker's event streams (see :mod:`timelypy.events`)."""
        return self._registry

    # -- identifiers and channels -------------------------------------------------

    def new_identifier(self) -> int:
        """A worker-unique number; equal across workers that build the same dataflows."""
        self._next_identifier += 1
        return self._next_identifier

    def allocate(self, channel: int, reader: Operate) -> tuple[list[Push], deque[Any]]:
        """Pushers to every worker and this worker's mailbox on ``channel``.

        Messages arriving from other workers activate ``reader``.
        """
        self._channels[channel] = reader
        context = f"operator {reader.name!r} on worker {self._index}"
        return self._allocator.allocate(channel, context)

    def flush_sends(self) -> None:
        """Send now what this worker buffered for other processes (not waiting for the step's end).

        A dataflow calls it once it has broadcast its progress batch, so the
        batch is on its way while this worker applies the batch itself.
        """
        self._allocator.release()

    @property
    def remote_flush(self) -> Callable[[], None] | None:
        """:meth:`flush_sends` where this worker sends to other processes; else None.

        For callers on a hot path that would rather not call a no-op: an
        input handle sends an epoch's records on as soon as it advances.
        """
        return self._release

    def activator_for(self, address: tuple[int, ...]) -> Callable[[], None]:
        """A function scheduling the operator at ``address`` in this worker's next step."""
        subgraph = self._dataflows.get(address[0])
        if subgraph is None:
            raise KeyError(f"no dataflow {address[0]} on worker {self._index}")
        for depth, index in enumerate(address[1:-1], start=2):
            child = subgraph.children[index]
            if not isinstance(child, Subgraph):
                raise KeyError(f"no scope at {address[:depth]} on worker {self._index}")
            subgraph = child
        operator = subgraph.children[address[-1]]
        if operator is None:
            raise KeyError(f"no operator at {address} on worker {self._index}")
        activate: Callable[[], None] = operator.activate
        return activate

    def activate_after(self, activate: Callable[[], None], delay: float) -> None:
        """Call ``activate`` (an operator's activator) once ``delay`` seconds have passed.

        Timely's ``activate_after``: the worker fires it in the first step at
        or after the deadline, and a parked worker wakes up for it.
        """
        self._timer_sequence += 1
        heapq.heappush(
            self._timers, (time.monotonic() + max(0.0, delay), self._timer_sequence, activate)
        )

    def _fire_timers(self) -> float | None:
        """Fire the due delayed activations; return seconds until the next one (if any)."""
        timers = self._timers
        if not timers:
            return None
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            heapq.heappop(timers)[2]()
        return timers[0][0] - now if timers else None

    # -- building -------------------------------------------------------------------

    def dataflow(
        self, build: Callable[[Scope], R], *, name: str | None = None, timestamp_type: Any = int
    ) -> R:
        """Build a dataflow with ``build(scope)`` and install it; return ``build``'s result.

        Every worker must build the same dataflows in the same order.
        """
        return build_dataflow(self, build, name=name, timestamp_type=timestamp_type)

    def dataflow_named(self, name: str, build: Callable[[Scope], R]) -> R:
        """Like :meth:`dataflow`, with a name for logs and errors."""
        return self.dataflow(build, name=name)

    def allocate_dataflow_index(self) -> int:
        """The index of the next dataflow this worker builds."""
        identifier = self._next_dataflow
        self._next_dataflow += 1
        return identifier

    def install_dataflow(self, index: int, dataflow: Subgraph) -> None:
        """Schedule the built dataflow ``dataflow`` (with index ``index``) from now on."""

        def activate(identifier: int = index) -> None:
            self._active.add(identifier)

        dataflow.activate_self = activate
        self._dataflows[index] = dataflow
        self._active.add(index)

    def _log_shutdown(self, address: tuple[int, ...]) -> None:
        logger = self._registry.get("timely")
        if logger is not None:
            logger.log(ShutdownEvent(address))

    def register_input(self, handle: Closable) -> None:
        """Close ``handle`` when the program's function returns, if it is still open."""
        if handle not in self._inputs:
            self._inputs.append(handle)

    def close_inputs(self) -> None:
        """Close the input handles the program left open (Rust drops them at scope end)."""
        for handle in self._inputs:
            if not handle.closed:
                handle.close()
        self._inputs = []

    # -- running --------------------------------------------------------------------

    def step(self) -> bool:
        """Do one round of work without waiting; return whether dataflows remain."""
        return self.step_or_park(0)

    def step_or_park(self, timeout: float | None = None) -> bool:
        """Do one round of work, first waiting up to ``timeout`` s if there is none."""
        allocator = self._allocator
        receive = self._receive
        if receive is not None:
            allocator.check()
            release = self._release
            if release is not None:
                # What the program sent since the last step (an input handle's batch
                # for another process) leaves now, not after this step's work.
                release()
            receive()
        events = allocator.poll()
        if events:
            self._deliver(events)
        if self._timers:
            wait = self._fire_timers()
            if wait is not None and (timeout is None or wait < timeout):
                timeout = wait
        if not self._active and timeout != 0 and self._dataflows:
            logger = self._registry.get("timely")
            if logger is not None:
                logger.log(ParkEvent(True))
            # An allocator that receives from outside the process has received
            # what woke it (a second look now would mostly find nothing).
            allocator.await_events(timeout)
            if logger is not None:
                logger.log(ParkEvent(False))
            allocator.check()
            self._deliver(allocator.take_events())
            if self._timers:
                self._fire_timers()
        active = self._active
        if not active and timeout == 0 and self._idle is not None:
            # Nothing to do and no waiting: the allocator knows who could use the CPU.
            self._idle()
        now = time.monotonic()
        if now >= self._next_stall_look:
            self._look_for_stalls(now)
        if active:
            self._last_activity = now
            if len(active) == 1:
                # Taken out of the set, which stays to gather what this step activates.
                order: tuple[int] | list[int] = (active.pop(),)
            else:
                self._active = set()
                order = sorted(active)
            dataflows = self._dataflows
            for identifier in order:
                subgraph = dataflows.get(identifier)
                if subgraph is not None and not subgraph.schedule():
                    del dataflows[identifier]
                    self._completed(identifier, subgraph)
                    self._log_shutdown(subgraph.path)
        if self._release is not None:
            self._release()
        if self._registry.subscribed:
            self._registry.flush()
        return bool(self._dataflows)

    @property
    def stall_seconds(self) -> float:
        """Seconds between looks at what holds the dataflows (:data:`STALL_SAMPLE_SECONDS`).

        Records unread at an operator's input in two looks in a row are
        logged; setting it starts a new period now.
        """
        return self._stall_seconds

    @stall_seconds.setter
    def stall_seconds(self, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError(f"stall_seconds must be > 0, got {seconds!r}")
        self._stall_seconds = seconds
        self._next_stall_look = time.monotonic() + seconds

    def _look_for_stalls(self, now: float) -> None:
        """Warn about records unread at an operator's input since the last look."""
        self._next_stall_look = now + self._stall_seconds
        if not self._dataflows:
            self._unread = []
            return
        unread = [h for h in self.why_not_complete() if h.kind == "messages" and h.here]
        before = {(h.dataflow, h.address, h.port, h.time) for h in self._unread}
        stuck = [h for h in unread if (h.dataflow, h.address, h.port, h.time) in before]
        if stuck:
            log.warning(
                "worker %d: its dataflows made no progress in %.0f s: %s. An operator that "
                "does not read its input holds the frontier there for ever (read every "
                "input, or drop what it does not need).",
                self._index,
                self._stall_seconds,
                summarize(stuck),
            )
        self._unread = unread

    def _deliver(self, events: list[int]) -> None:
        if events:
            channels = self._channels
            for channel in events:
                reader = channels.get(channel)
                if reader is not None and reader.activate is not None:
                    reader.activate()

    def step_while(self, predicate: Callable[[], bool], timeout: float | None = None) -> None:
        """Step while ``predicate()`` holds (parking up to ``timeout`` s when idle)."""
        while predicate():
            self.step_or_park(timeout if timeout is not None else 0)

    def has_dataflows(self) -> bool:
        """Whether any dataflow is still running."""
        return bool(self._dataflows)

    def installed_dataflows(self) -> list[int]:
        """The identifiers of the dataflows still running."""
        return sorted(self._dataflows)

    def idle_seconds(self) -> float:
        """Seconds since an operator last ran on this worker."""
        return time.monotonic() - self._last_activity

    def why_not_complete(self, time: Any = None) -> list[Holder]:
        """What keeps ``time`` from completing: every pointstamp at or before it, and who holds it.

        One :class:`~timelypy.progress.explain.Holder` per capability or batch of
        unconsumed messages at or before ``time`` in the running dataflows (nested
        scopes included, their times mapped out), with its count over all workers
        and this worker's share; ``str(holder)`` says it in a sentence.  Each worker
        knows its own share: ask every worker (or read every worker's stall
        warning) to name them all.  ``time`` ``None``: every pointstamp, what keeps
        the dataflows running at all.

        >>> import timelypy
        >>> def program(worker):
        ...     handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
        ...     worker.dataflow(lambda scope: scope.input_from(handle).map(str)
        ...                     .probe_with(probe))
        ...     handle.send(7)  # at time 0, which the input still holds
        ...     for _ in range(5):
        ...         worker.step()
        ...     return [str(holder) for holder in worker.why_not_complete(0)]
        >>> timelypy.execute(timelypy.Config.thread(), program)
        [["worker 0: operator 'Input' (address (0, 1)) holds a capability at 0 on output 0"]]
        """
        result: list[Holder] = []
        for identifier, subgraph in sorted(self._dataflows.items()):
            result.extend(explain(subgraph, identifier, time, self._index))
        return result

    def _completed(self, identifier: int, subgraph: Subgraph) -> None:
        """Keep a completed dataflow's final metrics (the last :data:`COMPLETED_KEPT`)."""
        kept = self._completed_metrics
        kept.append(self._dataflow_metrics(identifier, subgraph, complete=True))
        if len(kept) > COMPLETED_KEPT:
            del kept[0]

    def _dataflow_metrics(
        self, identifier: int, subgraph: Subgraph, complete: bool
    ) -> dict[str, Any]:
        operators = operator_metrics(subgraph, identifier, self._index)
        return {
            "dataflow": identifier,
            "name": subgraph.name,
            "complete": complete,
            "frontier_lag": None if complete else frontier_lag(operators),
            "operators": operators,
        }

    def metrics(self, completed: bool = False) -> dict[str, Any]:
        """What every operator did on this worker so far, as plain data.

        ``{"worker": index, "dataflows": [{"dataflow": id, "name": ..., "complete":
        False, "frontier_lag": epochs or None, "operators": [...]}]}``, one entry per
        running dataflow (``completed=True``: first the last :data:`COMPLETED_KEPT`
        completed ones, with their final numbers and ``"complete": True``);
        each operator's dict is :func:`~timelypy.progress.metrics.operator_metrics`'s
        (activations, records in and out, seconds in it once
        :func:`~timelypy.progress.metrics.time_operators` is on, its input frontier).
        Safe to call from another thread (a metrics server) while the worker runs.

        >>> import timelypy
        >>> def program(worker):
        ...     handle = timelypy.InputHandle()
        ...     worker.dataflow(lambda scope: scope.input_from(handle).map(str).probe())
        ...     handle.send_batch([1, 2, 3])
        ...     handle.advance_to(1)
        ...     for _ in range(5):
        ...         worker.step()
        ...     (flow,) = worker.metrics()["dataflows"]
        ...     return {op["name"]: op["records_in"] for op in flow["operators"]}
        >>> timelypy.execute(timelypy.Config.thread(), program)
        [{'Input': 0, 'Map': 3, 'Probe': 3}]
        """
        dataflows = list(self._completed_metrics) if completed else []
        for identifier, subgraph in sorted(list(self._dataflows.items())):
            dataflows.append(self._dataflow_metrics(identifier, subgraph, complete=False))
        return {"worker": self._index, "dataflows": dataflows}

    def watch_probe(self, probe: ProbeHandle, after: float = 30.0, name: str = "probe") -> None:
        """Log a warning, naming what holds it, whenever ``probe`` has not moved for ``after`` s.

        Every ``after`` seconds (a worker timer, nothing per step) the worker
        compares the probe's frontier with the one it saw last time; unchanged
        and not done (so stuck for between ``after`` and twice that), it logs a
        ``timelypy`` WARNING "worker W: probe NAME has not moved from [t] for
        S s" followed by :meth:`why_not_complete` of the
        frontier's first time (this worker's share; every worker watching the
        probe logs its own).  It stops watching once the probe is done.
        """
        if after <= 0:
            raise ValueError(f"watch_probe needs after > 0 seconds, got {after!r}")
        last: list[Any] = [None]

        def check() -> None:
            if probe.done() or not self._dataflows:
                return
            frontier = probe.frontier()
            if frontier == last[0]:
                reasons = self.why_not_complete(frontier[0])
                log.warning(
                    "worker %d: probe %r has not moved from %s for %.0f s: %s",
                    self._index,
                    name,
                    list(frontier),
                    after,
                    summarize(reasons),
                )
            last[0] = frontier
            self.activate_after(check, after)

        self.activate_after(check, after)

    def holders(self) -> list[str]:
        """What keeps the running dataflows from completing (for diagnostics)."""
        result: list[str] = []
        for identifier, subgraph in sorted(self._dataflows.items()):
            result.extend(f"dataflow {identifier}: {line}" for line in subgraph.holders())
        return result

    def __repr__(self) -> str:
        return f"Worker(index={self._index}, peers={self._peers})"
