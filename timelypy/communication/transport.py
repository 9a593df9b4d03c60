"""Transports: the allocators of one process's workers, and their lifecycle.

A *transport* is what the communication layer hands to
:func:`timelypy.execute.initialize_from`, as Timely's communication crate
hands its allocator builders to ``initialize_from``: one
:class:`~timelypy.communication.allocator.Allocator` per worker thread of
this process, plus what must happen around the workers' run.  It knows
nothing of workers or dataflows; ``initialize_from`` wraps a worker around
each allocator and drives the lifecycle:

1. :meth:`Transport.start` -- before any worker runs (the cluster waits for
   every peer here);
2. the workers run, each on its allocator;
3. :meth:`Transport.finish` when every local worker completed, or
   :meth:`Transport.fail` with this process's own failure (not one a peer
   reported: peers already know of theirs);
4. :meth:`Transport.close`, always, bounded in time.

:attr:`Transport.failure` is the first failure recorded by any local
worker, interrupt or peer; recording one wakes every local worker, which
then stops at its next step.

:class:`ProcessTransport` is the in-process case: ``n`` worker threads
exchanging messages by reference (``n = 1`` is a single worker in the
calling thread); its lifecycle has nothing to do.  The cluster's transport,
over ZeroMQ, is :class:`~timelypy.communication.cluster.ClusterTransport`.

>>> transport = ProcessTransport(2)
>>> [allocator.index for allocator in transport.allocators]
[0, 1]
>>> transport.failure is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from timelypy.communication.allocator import Allocator, ProcessAllocator, ProcessShared
from timelypy.errors import ConfigError

__all__ = ["Transport", "ProcessTransport"]

log = logging.getLogger("timelypy")


class Transport:
    """The allocators of this process's workers, and the lifecycle around their run.

    Subclasses pass their allocators (in worker order) and the state they
    share; the base class's lifecycle sends what the allocators buffered on
    :meth:`finish` and closes them on :meth:`close`.
    """

    def __init__(self, allocators: Sequence[Allocator], shared: ProcessShared) -> None:
        """Hold ``allocators`` (one per local worker, in worker order) sharing ``shared``."""
        if not allocators:
            raise ConfigError("a transport needs at least one allocator (one per local worker)")
        self._allocators = tuple(allocators)
        self._shared = shared

    @property
    def allocators(self) -> Sequence[Allocator]:
        """One allocator per worker thread of this process, in worker order."""
        return self._allocators

    @property
    def failure(self) -> BaseException | None:
        """The first failure recorded by a local worker, an interrupt or a peer; else ``None``."""
        return self._shared.failure

    def start(self) -> None:
        """Prepare for the workers' run (nothing to do within one process)."""

    def finish(self) -> None:
        """Every local worker completed: send what the allocators still buffer."""
        for allocator in self._allocators:
            allocator.release()

    def fail(self, error: BaseException) -> None:
        """Tell peers that this process failed with ``error`` (within one process: nobody)."""

    def close(self) -> None:
        """Release the allocators' resources; never raises, never waits for long."""
        for allocator in self._allocators:
            try:
                allocator.close()
            except Exception:
                log.debug(
                    "error while closing the allocator of worker %d", allocator.index, exc_info=True
                )


class ProcessTransport(Transport):
    """``workers`` worker threads in this process, exchanging messages by reference."""

    def __init__(self, workers: int) -> None:
        """Allocators for ``workers`` threads (``1``: one worker, in the calling thread)."""
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"a process needs at least one worker thread, got {workers!r}")
        shared = ProcessShared(workers)
        super().__init__([ProcessAllocator(shared, i) for i in range(workers)], shared)
