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

``stream.enter(inner_scope)`` and ``stream.leave()``
(:mod:`timelypy.dataflow.operators.enterleave`) move streams between a
scope and the scopes nested in it.

A scope reaches its worker only through the
:class:`~timelypy.dataflow.as_worker.AsWorker` protocol.  Finishing a scope
(:func:`finalize`) gives its subgraph a progress channel between all
workers; :func:`build_dataflow` builds a dataflow's root scope and installs
it in the worker.

Sources that start a stream in a scope (``scope.to_stream``,
``scope.input_from``, ``scope.feedback``) are defined with their operators
and attach themselves to :class:`Scope`, as Timely's extension traits do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.fusion import fuse_pipelines
from timelypy.events import OperatesEvent, ProgressEvent
from timelypy.order import ProductType, check_timestamp, minimum
from timelypy.progress.broadcast import Progcaster
from timelypy.progress.subgraph import Refinement, Subgraph

if TYPE_CHECKING:
    from timelypy.dataflow import input as _input
    from timelypy.dataflow.as_worker import AsWorker
    from timelypy.dataflow.operators import feedback as _feedback
    from timelypy.dataflow.operators import to_stream as _to_stream

__all__ = ["Scope"]

R = TypeVar("R")


class Scope:
    """A scope under construction on one worker."""

    def __init__(
        self,
        worker: AsWorker,
        subgraph: Subgraph,
        parent: Scope | None = None,
    ) -> None:
        #: The worker building this scope.
        self.worker = worker
        #: The scope's subgraph (its progress tracking and scheduling).
        self.subgraph = subgraph
        #: The enclosing scope (``None`` for a dataflow's root).
        self.parent = parent
        #: The type of this scope's timestamps.
        self.timestamp_type = subgraph.timestamp_type
        #: The least timestamp of that type.
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

    def log_operates(self, identifier: int, address: tuple[int, ...], name: str) -> None:
        """Log that an operator (or scope) named ``name`` was built at ``address``."""
        logger = self.worker.log_register().get("timely")
        if logger is not None:
            logger.log(OperatesEvent(identifier, address, name))

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
        worker = self.worker
        index = parent.allocate_child_index()
        subgraph = Subgraph(
            name=name,
            path=(*parent.path, index),
            worker_index=worker.index,
            peers=worker.peers,
            timestamp_type=timestamp_type,
            refinement=refinement,
        )
        subgraph.index = index
        self.log_operates(worker.new_identifier(), subgraph.path, name)
        inner = Scope(worker, subgraph, parent=self)
        result = build(inner)
        finalize(worker, subgraph)
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

    def activator_for(self, address: tuple[int, ...]) -> Callable[[], None]:
        """A function that schedules the operator at ``address`` (from this worker)."""
        return self.worker.activator_for(address)

    if TYPE_CHECKING:
        # Attached by their modules (see the module documentation).
        feedback = _feedback.feedback
        to_stream = _to_stream.scope_to_stream
        input_from = _input.input_from
        new_input = _input.new_input

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, path={self.path}, timestamps={self.timestamp_type!r})"


def finalize(worker: AsWorker, subgraph: Subgraph) -> None:
    """Finish ``subgraph``: a progress channel between all workers, logging, progress mode."""
    channel = worker.new_identifier()
    pushers, mailbox = worker.allocate(channel, subgraph)
    registry = worker.log_register()
    logger = registry.get("timely/progress")
    hook = None
    if logger is not None:

        def hook(is_send: bool, source: int, seq: int, updates: list[Any]) -> None:
            logger.log(ProgressEvent(is_send, source, channel, seq, tuple(updates)))

    # A dataflow's batch leaves at once (nested scopes' go with their dataflow's).
    flush = worker.flush_sends if len(subgraph.path) == 1 and worker.peers > 1 else None
    progcaster = Progcaster(pushers, mailbox, worker.index, channel, hook, flush)
    subgraph.logger = registry.get("timely")
    subgraph.demand = worker.config.progress_mode == "demand"
    subgraph.finalize(progcaster)
    if subgraph.logger is None and worker.config.fuse:
        fuse_pipelines(subgraph)


def build_dataflow(
    worker: AsWorker,
    build: Callable[[Scope], R],
    *,
    name: str | None = None,
    timestamp_type: Any = int,
) -> R:
    """Build a dataflow with ``build(scope)``, install it in ``worker``; return ``build``'s result.

    Every worker must build the same dataflows in the same order.
    """
    identifier = worker.allocate_dataflow_index()
    subgraph = Subgraph(
        name=name or f"Dataflow{identifier}",
        path=(identifier,),
        worker_index=worker.index,
        peers=worker.peers,
        timestamp_type=timestamp_type,
        refinement=None,
    )
    scope = Scope(worker, subgraph)
    scope.log_operates(worker.new_identifier(), (identifier,), subgraph.name)
    result = build(scope)
    finalize(worker, subgraph)
    worker.install_dataflow(identifier, subgraph)
    return result
