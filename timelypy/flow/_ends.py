"""The end of the input, told to every worker: the epoch that end-of-input results carry.

When a flow's input ends, stateful steps emit what they held to the end
(windows still open, ``fold_final`` and ``collect`` results).  They emit it
at one epoch, and it must be the same epoch on any number of workers and
processes.  The step's own input frontier cannot give it: a worker may see
the frontier go from an early epoch straight to empty, another may see
the last epoch first.  So every reader, when it ends, tells every worker
the epoch it ended at, and results of the end of input carry the largest
of those: the last epoch of the flow's input, the same everywhere.

:class:`EndsSource` is the operator through which a worker's readers tell
it (one record per reader, at the reader's last epoch, broadcast); a
stateful step reads that stream on an input that is connected to no output,
so it holds back nothing while the flow runs.  :class:`InputEnd` is the
step's view of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability
from timelypy.dataflow.channels import Pact, Pipeline
from timelypy.dataflow.handles import Frontier, OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.flow._io import detached_output
from timelypy.progress.operate import FrontierInterest

__all__ = ["EndsSource", "InputEnd", "with_input_end", "with_input_end_outputs"]


class EndsSource:
    """One worker's readers' last epochs, broadcast to every worker (:attr:`stream`)."""

    __slots__ = ("_cap", "_out", "stream")

    def __init__(self, scope: Scope, first_epoch: int) -> None:
        out, stream, cap = detached_output(scope, "flow.ends")
        if first_epoch > cap.time:
            cap.downgrade(first_epoch)
        self._cap: Capability | None = cap
        self._out: OperatorOutput[int] = out
        #: every worker's readers' last epochs, on every worker
        self.stream: Stream[int] = stream.broadcast()

    def ended(self, epoch: int) -> None:
        """A reader of this worker ended at ``epoch``."""
        cap = self._cap
        if cap is None:
            raise RuntimeError("flow.ends: a reader ended after the input was closed")
        at = cap.delayed(max(epoch, cap.time))
        self._out.give_batch(at, [at.time])
        at.drop()
        self._out.flush()

    def close(self) -> None:
        """Every reader of this worker has ended (once)."""
        cap, self._cap = self._cap, None
        if cap is not None:
            cap.drop()


class InputEnd:
    """A stateful step's view of the end of the input: whether it came, and its epoch."""

    __slots__ = ("_handle", "_last")

    def __init__(self, handle: OperatorInput[int] | None) -> None:
        self._handle = handle
        self._last: int | None = None

    def read(self) -> None:
        """Read what came (call at every activation: unread messages hold the frontier)."""
        handle = self._handle
        if handle is not None:
            for _, epochs in handle:
                top = max(epochs)
                if self._last is None or top > self._last:
                    self._last = top

    def reached(self) -> bool:
        """Whether every reader on every worker has ended (and said at which epoch)."""
        handle = self._handle
        if handle is None:
            return True
        self.read()
        return not handle.frontier.frontier()

    def epoch(self, at_least: int) -> int:
        """The epoch end-of-input results carry: the input's last, at least ``at_least``."""
        last = self._last
        return at_least if last is None or last < at_least else last


def with_input_end(
    stream: Stream[Any],
    pact: Pact,
    name: str,
    ends: Stream[int] | None,
    constructor: Callable[[Capability, OperatorInfo, InputEnd], Callable[..., Any]],
    extra_input: tuple[Stream[Any], list[OperatorInput[Any]]] | None = None,
) -> Stream[Any]:
    """``unary_frontier`` whose ``constructor`` also gets the :class:`InputEnd` of ``ends``.

    ``ends`` (an :attr:`EndsSource.stream`) is read on a second input that
    reaches no output; without it (``None``) the end comes with the input's
    frontier alone.  The logic is called as ``logic(input, output)``.
    ``extra_input``, ``(stream, handles)``, reads one more stream (with
    ``Pipeline``, reaching no output) and appends its input handle to
    ``handles`` before the operator is built.
    """
    return with_input_end_outputs(stream, pact, name, ends, constructor, 1, extra_input)[0]


def with_input_end_outputs(
    stream: Stream[Any],
    pact: Pact,
    name: str,
    ends: Stream[int] | None,
    constructor: Callable[[Capability, OperatorInfo, InputEnd], Callable[..., Any]],
    outputs: int,
    extra_input: tuple[Stream[Any], list[OperatorInput[Any]]] | None = None,
) -> list[Stream[Any]]:
    """:func:`with_input_end` with ``outputs`` outputs: ``logic(input, output, ...)``.

    ``constructor`` gets the first output's capability (every output's
    capability starts at the same time; ``Capability.delayed`` of it is not
    valid on the others, so send on them with the capabilities of the input).
    """
    builder = OperatorBuilder(name, stream.scope)
    info = builder.info
    inp: OperatorInput[Any] = builder.new_input(stream, pact, interest=FrontierInterest.ALWAYS)
    outs: list[OperatorOutput[Any]] = []
    results: list[Stream[Any]] = []
    for _ in range(outputs):
        out: OperatorOutput[Any]
        out, result = builder.new_output()
        outs.append(out)
        results.append(result)
    end_handle: OperatorInput[int] | None = None
    if ends is not None:
        end_handle = builder.new_input(
            ends, Pipeline(), connection={}, interest=FrontierInterest.ALWAYS
        )
    end = InputEnd(end_handle)
    if extra_input is not None:
        extra, handles = extra_input
        handles.append(
            builder.new_input(extra, Pipeline(), connection={}, interest=FrontierInterest.ALWAYS)
        )

    def build(caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        logic = constructor(caps[0], info, end)
        read_end = end.read

        def run(frontiers: list[Frontier]) -> None:
            read_end()  # the ends as they come: an unread message holds the frontier
            logic(inp, *outs)

        return run

    builder.build(build)
    return results
