"""Scopes: where operators are built, and how scopes nest.

A :class:`Scope` is handed to the function that builds a dataflow
(``worker.dataflow(build)``).  Operators built in it become its children;
streams belong to it.  Scopes nest:

* ``scope.iterative(build, inner=int)`` builds a scope whose timestamps are
  ``Product(outer, inner)``: records enter with ``inner = 0``, feedback
  edges advance ``inner``, and the scope's progress is summarised for its
  parent in outer times.
* ``scope.region(build)`` builds a nested scope with the same timestamps,
  to group operators (and their progress tracking) together.

``stream.enter(inner_scope)`` brings a stream of the parent into a nested
scope and ``stream.leave()`` takes one out.  Entering counts the records as
consumed by the nested scope (so the parent knows they arrived) and
activates the nested scope; leaving passes records straight to the parent's
readers while the nested scope reports them as produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Tee
from timelypy.errors import PortError
from timelypy.order import ProductType, check_timestamp, minimum
from timelypy.progress.subgraph import Refinement, Subgraph

if TYPE_CHECKING:
    from timelypy.dataflow.input import InputHandle
    from timelypy.dataflow.operators.feedback import LoopHandle
    from timelypy.dataflow.stream import Stream
    from timelypy.worker import Worker

__all__ = ["Scope"]

R = TypeVar("R")


class Scope:
    """A scope under construction on one worker."""

    def __init__(
        self,
        worker: Worker,
        subgraph: Subgraph,
        parent: Scope | None = None,
    ) -> None:
        self.worker = worker
        self.subgraph = subgraph
        self.parent = parent
        self.timestamp_type = subgraph.timestamp_type
        self.minimum = minimum(self.timestamp_type)

    @property
    def name(self) -> str:
        """The scope's name."""
        return self.subgraph.name

    @property
    def path(self) -> tuple[int, ...]:
        """The scope's address: dataflow index, then child indices."""
        return self.subgraph.path

    @property
    def index(self) -> int:
        """The index of the worker building this scope."""
        return self.worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.worker.peers

    def check_time(self, time: Any, what: str = "timestamp") -> Any:
        """Validate that ``time`` is a timestamp of this scope; return it."""
        return check_timestamp(time, self.timestamp_type, what)

    # -- nesting ------------------------------------------------------------------

    def scoped(
        self,
        name: str,
        timestamp_type: Any,
        refinement: Refinement,
        build: Callable[[Scope], R],
    ) -> R:
        """Build a nested scope with the given timestamps; return ``build``'s result."""
        parent = self.subgraph
        index = parent.allocate_child_index()
        subgraph = Subgraph(
            name=name,
            path=(*parent.path, index),
            worker_index=self.worker.index,
            peers=self.worker.peers,
            timestamp_type=timestamp_type,
            refinement=refinement,
        )
        subgraph.index = index
        self.worker._log_operates(self.worker.new_identifier(), subgraph.path, name)
        inner = Scope(self.worker, subgraph, parent=self)
        result = build(inner)
        self.worker._finalize_subgraph(subgraph)
        parent.add_child(subgraph, index)
        return result

    def iterative(
        self, build: Callable[[Scope], R], inner: Any = int, name: str = "Iterative"
    ) -> R:
        """Build an iterative scope with ``Product(outer, inner)`` timestamps.

        >>> import timelypy
        >>> def collatz(scope):
        ...     def loop(inner):
        ...         handle, cycle = inner.feedback(1)   # one iteration per round
        ...         start = scope.to_stream([6]).enter(inner)
        ...         step = start.concat(cycle).map(lambda n: n // 2 if n % 2 == 0 else 3 * n + 1)
        ...         step.filter(lambda n: n != 1).connect_loop(handle)
        ...         return step.leave()
        ...     return scope.iterative(loop).capture()
        >>> timelypy.example(collatz).extract()   # every round leaves at outer time 0
        [(0, [1, 2, 3, 4, 5, 8, 10, 16])]
        """
        ttype = ProductType(self.timestamp_type, inner)
        return self.scoped(name, ttype, Refinement.product(ttype), build)

    def region(self, build: Callable[[Scope], R], name: str = "Region") -> R:
        """Build a nested scope with this scope's timestamps."""
        return self.scoped(name, self.timestamp_type, Refinement.identity(), build)

    def _enter(self, stream: Stream) -> Stream:
        """Bring ``stream`` (of the parent scope) into this nested scope."""
        from timelypy.dataflow.stream import Stream

        if self.parent is None or stream.scope is not self.parent:
            raise PortError(
                f"cannot enter scope {self.name!r} from scope {stream.scope.name!r}: "
                "enter() takes a stream of the immediately enclosing scope"
            )
        subgraph = self.subgraph
        port, counts = subgraph.new_input()
        to_inner = subgraph.refinement.to_inner  # type: ignore[union-attr]
        tee = Tee()

        def push(time: Any, records: list[Any]) -> None:
            inner_time = to_inner(time)
            counts[inner_time] = counts.get(inner_time, 0) + len(records)
            tee.push(inner_time, records)
            subgraph.activate()

        stream._connect((subgraph.index, port), push)
        return Stream(self, (0, port), tee)

    def _leave(self, stream: Stream) -> Stream:
        """Take ``stream`` (of this nested scope) out to the parent scope."""
        from timelypy.dataflow.stream import Stream

        parent = self.parent
        if parent is None:
            raise PortError(
                f"scope {self.name!r} is a dataflow's root; there is nothing to leave to"
            )
        subgraph = self.subgraph
        port = subgraph.new_output()
        to_outer = subgraph.refinement.to_outer  # type: ignore[union-attr]
        tee = Tee()

        def push(time: Any, records: list[Any]) -> None:
            tee.push(to_outer(time), records)

        stream._connect((0, port), push)
        return Stream(parent, (subgraph.index, port), tee)

    # -- sources ------------------------------------------------------------------

    def feedback(self, summary: Any) -> tuple[LoopHandle, Stream]:
        """Create a loop: records given to the handle come back advanced by ``summary``.

        Returns ``(handle, stream)``; close the loop with
        ``stream.connect_loop(handle)``.  In an iterative scope an ``int``
        summary ``n`` means ``Product(identity, n)``: ``n`` more iterations.
        """
        from timelypy.dataflow.operators.feedback import feedback

        return feedback(self, summary)

    def input_from(self, handle: InputHandle) -> Stream:
        """A stream of the records sent through ``handle``."""
        return handle.to_stream(self)

    def new_input(self) -> tuple[InputHandle, Stream]:
        """A new input handle and the stream of its records."""
        from timelypy.dataflow.input import InputHandle

        handle = InputHandle()
        return handle, handle.to_stream(self)

    def to_stream(self, iterable: Iterable[Any]) -> Stream:
        """A stream of ``iterable``'s items at the minimum time (on every worker)."""
        from timelypy.dataflow.operators.to_stream import to_stream

        return to_stream(iterable, self)

    def activator_for(self, address: tuple[int, ...]) -> Callable[[], None]:
        """A function that schedules the operator at ``address`` (from this worker)."""
        return self.worker.activator_for(address)

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, path={self.path}, timestamps={self.timestamp_type!r})"
