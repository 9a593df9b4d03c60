"""Probes: watching a stream's frontier from outside the dataflow.

``stream.probe()`` returns a :class:`ProbeHandle` whose frontier is the
stream's: the times that may still appear on it.  The program driving the
dataflow uses it to wait for results (``while probe.less_than(t):
worker.step()``).  One handle can watch several streams
(``stream.probe_with(handle)``); its frontier is then the lower envelope of
theirs.

The scope updates a probe's handle while it propagates progress, so the
handle is current as soon as a worker step returns.  A handle watching no
stream is ``done()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.handles import Frontier
from timelypy.dataflow.stream import Stream
from timelypy.progress.frontier import MutableAntichain
from timelypy.progress.operate import FrontierInterest

__all__ = ["ProbeHandle", "probe", "probe_with"]

T = TypeVar("T")


class ProbeHandle:
    """A view of the frontier of one or more streams.

    >>> import timelypy
    >>> handle = timelypy.ProbeHandle()
    >>> handle.done()   # watching nothing yet
    True
    """

    __slots__ = ("_frontier",)

    def __init__(self) -> None:
        self._frontier: MutableAntichain[Any] = MutableAntichain()

    def less_than(self, time: Any) -> bool:
        """Whether some time strictly before ``time`` may still appear."""
        return self._frontier.less_than(time)

    def less_equal(self, time: Any) -> bool:
        """Whether ``time`` or an earlier time may still appear."""
        return self._frontier.less_equal(time)

    def done(self) -> bool:
        """Whether nothing more will ever appear (the frontier is empty)."""
        return self._frontier.is_empty()

    def frontier(self) -> tuple[Any, ...]:
        """The frontier's elements."""
        return self._frontier.frontier()

    def with_frontier(self, func: Callable[[tuple[Any, ...]], T]) -> T:
        """Call ``func`` with the frontier's elements; return its result."""
        return func(self._frontier.frontier())

    def update_frontier(self, time: Any, diff: int) -> None:
        """Apply one change of a watched stream's frontier (an operator of your own may feed it)."""
        self._frontier.update(time, diff)

    def __repr__(self) -> str:
        return f"ProbeHandle({list(self._frontier.frontier())!r})"


@stream_method
def probe_with(stream: Stream[T], handle: ProbeHandle) -> Stream[T]:
    """Make ``handle`` watch ``stream``'s frontier; return ``stream``."""
    builder = OperatorBuilder("Probe", stream.scope)
    # The scope pushes the input's frontier changes straight into the handle as
    # it propagates progress, so the operator itself has nothing to do on a
    # frontier change and is not scheduled for one (Timely's probe is, to run
    # logic that does nothing).  An enclosing scope still runs on every change
    # of its own input frontier, as for Timely's probe: it counts a child that
    # records its frontier's changes as interested in all of them.
    inp = builder.new_input(
        stream, interest=FrontierInterest.NEVER, frontier_changes=_Feed(handle._frontier)
    )

    def constructor(caps: list[Any]) -> Callable[[list[Frontier]], None]:
        discard = inp.discard

        def logic(frontiers: list[Frontier]) -> None:
            discard()  # records are only counted, never looked at

        return logic

    builder.build(constructor)
    builder.set_fuse(_count_only)  # fusible: what it receives is only counted
    return stream


def _count_only(time: Any, records: list[Any]) -> None:
    """A probe's batch function: nothing to do but be counted (see ``timelypy.dataflow.fusion``)."""
    return None


class _Feed:
    """Applies the ``(time, diff)`` frontier changes the scope appends to a handle's frontier."""

    __slots__ = ("_frontier",)

    def __init__(self, frontier: MutableAntichain[Any]) -> None:
        self._frontier = frontier

    def append(self, change: tuple[Any, int]) -> None:
        self._frontier.update(change[0], change[1])


@stream_method
def probe(stream: Stream[Any]) -> ProbeHandle:
    """A new handle watching ``stream``'s frontier."""
    handle = ProbeHandle()
    probe_with(stream, handle)
    return handle
