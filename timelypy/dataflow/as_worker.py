"""``AsWorker``: what a scope may ask of the worker that builds it.

Timely's scopes reach their worker through the ``AsWorker`` and
``Scheduler`` traits, never through the worker's internals; so do
timelypy's.  The dataflow layer (scopes, builders, pacts, inputs) is
written against this protocol alone, and :class:`timelypy.worker.Worker`
implements it.  Anything else that implements it -- a test double, another
runtime -- can build and run timelypy dataflows.

The protocol is small on purpose:

* who the worker is: ``index``, ``peers``, ``config``;
* identifiers that agree across workers: ``new_identifier()`` for channels
  and operators, ``allocate_dataflow_index()`` for dataflows (every worker
  builds the same dataflows in the same order, so the numbers match);
* communication: ``allocate(channel, reader)`` gives pushers to every
  worker and this worker's mailbox; messages from other workers activate
  ``reader``;
* scheduling: ``activator_for(address)``;
* logging: ``log_register()``, the registry of event streams
  (:mod:`timelypy.events`);
* lifecycle: ``install_dataflow(index, subgraph)`` hands a built dataflow
  to the worker to schedule, and ``register_input(handle)`` asks it to
  close an input handle the program leaves open when it ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from timelypy.communication.config import Config
    from timelypy.events import Registry
    from timelypy.progress.operate import Operate
    from timelypy.progress.subgraph import Subgraph

__all__ = ["AsWorker", "Closable", "Push"]

#: A pusher delivers one message to one worker.
Push = Callable[[Any], None]


class Closable(Protocol):
    """Something the worker closes when the program leaves it open (an input handle)."""

    @property
    def closed(self) -> bool:
        """Whether it is closed already."""
        ...

    def close(self) -> None:
        """Close it."""
        ...


class AsWorker(Protocol):
    """The worker, as the dataflow layer sees it; see the module documentation."""

    @property
    def index(self) -> int:
        """The worker's index, ``0 <= index < peers``."""
        ...

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        ...

    @property
    def config(self) -> Config:
        """The computation's configuration (progress mode, serializer, ...)."""
        ...

    def new_identifier(self) -> int:
        """A worker-unique number; equal across workers that build the same dataflows."""
        ...

    def allocate_dataflow_index(self) -> int:
        """The index of the next dataflow this worker builds."""
        ...

    def allocate(self, channel: int, reader: Operate) -> tuple[list[Push], deque[Any]]:
        """Pushers to every worker on ``channel``, and this worker's mailbox for it."""
        ...

    def flush_sends(self) -> None:
        """Send what this worker buffered for other processes now, not at the step's end."""
        ...

    @property
    def remote_flush(self) -> Callable[[], None] | None:
        """:meth:`flush_sends` where this worker sends to other processes; else None."""
        ...

    def activator_for(self, address: tuple[int, ...]) -> Callable[[], None]:
        """A function scheduling the operator at ``address`` in this worker's next step."""
        ...

    def activate_after(self, activate: Callable[[], None], delay: float) -> None:
        """Call ``activate`` once ``delay`` seconds have passed (a parked worker wakes for it)."""
        ...

    def log_register(self) -> Registry:
        """The registry of this worker's event streams."""
        ...

    def install_dataflow(self, index: int, dataflow: Subgraph) -> None:
        """Schedule the built dataflow ``dataflow`` from now on."""
        ...

    def register_input(self, handle: Closable) -> None:
        """Close ``handle`` when the program's function returns, if it is still open."""
        ...
