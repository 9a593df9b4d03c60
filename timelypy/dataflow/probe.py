"""Probes: watching a stream's frontier from outside the dataflow.

``stream.probe()`` returns a :class:`ProbeHandle` whose frontier is the
stream's: the times that may still appear on it.  The program driving the
dataflow uses it to wait for results (``while probe.less_than(t):
worker.step()``).  One handle can watch several streams
(``stream.probe_with(handle)``); its frontier is then the lower envelope of
theirs.

A handle reads its probes' input frontiers live: they are the scope's own
implications, which it updates as it propagates progress, so the handle is
current as soon as a worker step returns, and no change is copied to it.
A handle watching no stream is ``done()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.fusion import count_only
from timelypy.dataflow.handles import Frontier
from timelypy.dataflow.stream import Stream
from timelypy.progress.frontier import MutableAntichain
from timelypy.progress.operate import FrontierInterest

__all__ = ["ProbeHandle", "probe", "probe_with"]

T = TypeVar("T")


class ProbeHandle:
    """A view of the frontier of one or more streams.

    The handle reads each watched stream's live frontier, which the scope
    keeps current as it propagates progress: no change is copied to it.
    Watching several, its frontier is the least elements of theirs together.

    >>> import timelypy
    >>> handle = timelypy.ProbeHandle()
    >>> handle.done()   # watching nothing yet
    True
    """

    __slots__ = ("_fed", "_frontier", "_sources")

    def __init__(self) -> None:
        #: What :meth:`update_frontier` feeds (a source once fed).
        self._fed: MutableAntichain[Any] = MutableAntichain()
        #: The frontiers watched: each probe's live input frontier, then ``_fed``.
        self._sources: list[MutableAntichain[Any]] = []
        #: The only source, read directly (``_fed``, empty, with none); None with several.
        self._frontier: MutableAntichain[Any] | None = self._fed

    def less_than(self, time: Any) -> bool:
        """Whether some time strictly before ``time`` may still appear."""
        frontier = self._frontier
        if frontier is not None:
            return frontier.less_than(time)
        return any(source.less_than(time) for source in self._sources)

    def less_equal(self, time: Any) -> bool:
        """Whether ``time`` or an earlier time may still appear."""
        frontier = self._frontier
        if frontier is not None:
            return frontier.less_equal(time)
        return any(source.less_equal(time) for source in self._sources)

    def done(self) -> bool:
        """Whether nothing more will ever appear (the frontier is empty)."""
        return all(source.is_empty() for source in self._sources)

    def frontier(self) -> tuple[Any, ...]:
        """The frontier's elements."""
        frontier = self._frontier
        if frontier is not None:
            return frontier.frontier()
        lower: MutableAntichain[Any] = MutableAntichain()
        lower.update_iter((time, 1) for source in self._sources for time in source.frontier())
        return lower.frontier()

    def with_frontier(self, func: Callable[[tuple[Any, ...]], T]) -> T:
        """Call ``func`` with the frontier's elements; return its result."""
        return func(self.frontier())

    def update_frontier(self, time: Any, diff: int) -> None:
        """Apply one change of a watched stream's frontier (an operator of your own may feed it).

        The times fed with a positive count are one more frontier the
        handle watches, beside its probes'.
        """
        fed = self._fed
        fed.update(time, diff)
        if not any(source is fed for source in self._sources):
            self._watch(len(self._sources), fed)

    def _watch(self, slot: int, frontier: MutableAntichain[Any]) -> None:
        """Watch ``frontier`` in ``slot`` (a new slot, or a replacement for one)."""
        sources = self._sources
        if slot == len(sources):
            sources.append(frontier)
        else:
            sources[slot] = frontier
        self._frontier = sources[0] if len(sources) == 1 else None

    def _reader(self) -> Callable[[MutableAntichain[Any]], None]:
        """A new slot: the function that (re)sets the frontier it watches."""
        slot = len(self._sources)
        self._watch(slot, MutableAntichain())  # empty until the dataflow is built
        return lambda frontier: self._watch(slot, frontier)

    def __repr__(self) -> str:
        return f"ProbeHandle({list(self.frontier())!r})"


@stream_method
def probe_with(stream: Stream[T], handle: ProbeHandle) -> Stream[T]:
    """Make ``handle`` watch ``stream``'s frontier; return ``stream``."""
    builder = OperatorBuilder("Probe", stream.scope)
    # The handle reads the input's live frontier, which the scope keeps current
    # as it propagates progress, so the operator itself has nothing to do on a
    # frontier change and is not scheduled for one (Timely's probe is, to run
    # logic that does nothing).  An enclosing scope still runs on every change
    # of its own input frontier, as for Timely's probe: it counts a child that
    # reads its frontier as interested in all of them.
    inp = builder.new_input(
        stream, interest=FrontierInterest.NEVER, frontier_reader=handle._reader()
    )

    def constructor(caps: list[Any]) -> Callable[[list[Frontier]], None]:
        discard = inp.discard

        def logic(frontiers: list[Frontier]) -> None:
            discard()  # records are only counted, never looked at

        return logic

    builder.build(constructor)
    builder.set_fuse(count_only)  # fusible: what it receives is only counted
    return stream


@stream_method
def probe(stream: Stream[Any]) -> ProbeHandle:
    """A new handle watching ``stream``'s frontier."""
    handle = ProbeHandle()
    probe_with(stream, handle)
    return handle
