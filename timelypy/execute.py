"""Running a computation: ``execute``, ``execute_from_args``, ``example``.

``execute(config, func)`` starts the configured workers, calls
``func(worker)`` on each, then keeps every worker stepping until all its
dataflows are complete (input handles the program left open are closed
first, as Rust drops them).  It returns each worker's return value, in
worker order.

With one worker, ``func`` runs in the calling thread.  With ``n`` workers in
one process (``Config.process(n)``), each runs in its own thread and they
share records by reference.  Several processes (``-n``) are the cluster's
business (:mod:`timelypy.communication.cluster`).

If any worker raises, every other worker stops at its next step and
``execute`` re-raises the *original* exception -- same type, message and
traceback -- with notes naming the worker and operator.  Ctrl-C stops all
workers too.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from timelypy.communication.allocator import Allocator, process_allocators
from timelypy.communication.config import Config
from timelypy.errors import ClusterError, ConfigError, WorkerAborted
from timelypy.worker import Worker

__all__ = ["execute", "execute_from_args", "example", "run_worker"]

R = TypeVar("R")

log = logging.getLogger("timelypy")

#: How long an idle worker parks before checking again that its peers are alive.
PARK_SECONDS = 0.25
#: After this many idle seconds with dataflows incomplete, say what holds them.
STALL_WARNING_SECONDS = 30.0


def run_worker(worker: Worker, func: Callable[[Worker], R]) -> R:
    """Run ``func(worker)``, close its open inputs, and step until its dataflows complete."""
    result = func(worker)
    worker.close_inputs()
    warned_at = 0.0
    while worker.step_or_park(PARK_SECONDS):
        idle = worker.idle_seconds()
        if idle >= STALL_WARNING_SECONDS and idle - warned_at >= STALL_WARNING_SECONDS:
            warned_at = idle
            held = "; ".join(worker.holders()) or "nothing visible on this worker"
            log.warning(
                "worker %d: no operator has run for %.0f s but its dataflows are incomplete: %s. "
                "A capability that is retained and never dropped keeps a dataflow running.",
                worker.index,
                idle,
                held,
            )
        elif idle < warned_at:
            warned_at = 0.0
    return result


def _annotate(exc: BaseException, index: int) -> None:
    if getattr(exc, "timelypy_worker_noted", False):
        return
    try:
        exc.timelypy_worker_noted = True  # type: ignore[attr-defined]
    except AttributeError:
        pass
    if getattr(exc, "timelypy_operator", None) is None:
        exc.add_note(f"raised on worker {index}")


def execute(config: Config | None, func: Callable[[Worker], R]) -> list[R]:
    """Run ``func`` on every worker of ``config``; return their results in worker order.

    >>> import timelypy
    >>> def count(worker):
    ...     probe = timelypy.ProbeHandle()
    ...     seen = []
    ...     worker.dataflow(lambda scope: scope.to_stream(range(4))
    ...                     .inspect(seen.append).probe_with(probe))
    ...     worker.step_while(lambda: not probe.done())
    ...     return (worker.index, len(seen))
    >>> timelypy.execute(timelypy.Config.process(2), count)
    [(0, 4), (1, 4)]
    """
    config = Config.thread() if config is None else config
    if not isinstance(config, Config):
        raise ConfigError(f"execute() needs a Config, got {config!r}")
    if config.processes > 1:
        from timelypy.communication.cluster import execute_cluster

        return execute_cluster(config, func)
    allocators = process_allocators(config.workers)
    if config.workers == 1:
        worker = Worker(allocators[0], config)
        try:
            return [run_worker(worker, func)]
        except BaseException as exc:
            _annotate(exc, 0)
            raise
    return run_threads(allocators, config, func)


def run_threads(
    allocators: Sequence[Allocator], config: Config, func: Callable[[Worker], R]
) -> list[R]:
    """Run one worker thread per allocator; fail fast with the first original error."""
    results: list[Any] = [None] * len(allocators)
    errors: list[BaseException | None] = [None] * len(allocators)

    def body(slot: int, allocator: Allocator) -> None:
        worker = Worker(allocator, config)
        try:
            results[slot] = run_worker(worker, func)
        except BaseException as exc:
            errors[slot] = exc
            if not isinstance(exc, WorkerAborted | ClusterError):
                _annotate(exc, worker.index)
                allocator.abort(exc)
            elif isinstance(exc, ClusterError):
                allocator.abort(exc)

    threads = [
        threading.Thread(
            target=body, args=(slot, allocator), name=f"timelypy-worker-{allocator.index}",
            daemon=True,
        )
        for slot, allocator in enumerate(allocators)
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except BaseException as interrupt:
        # Ctrl-C, a test's timeout, SystemExit from a signal handler: whatever
        # stops the calling thread stops the workers too, rather than leaving
        # them running (or spinning) behind it.
        allocators[0].abort_all(interrupt)
        deadline = time.monotonic() + 5.0
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise
    failure = _first_failure(allocators, errors)
    if failure is not None:
        raise failure
    return results


def _first_failure(
    allocators: Sequence[Allocator], errors: Sequence[BaseException | None]
) -> BaseException | None:
    shared = getattr(allocators[0], "shared", None)
    recorded = shared.failure if shared is not None else None
    if recorded is not None and not isinstance(recorded, WorkerAborted):
        return recorded
    for error in errors:
        if error is not None and not isinstance(error, WorkerAborted):
            return error
    for error in errors:
        if error is not None:
            return error
    return None


def execute_from_args(argv: Sequence[str] | None, func: Callable[[Worker], R]) -> list[R]:
    """Like :func:`execute`, configured from Timely's arguments in ``argv``.

    ``argv[0]`` is the program name; ``-w``, ``-n``, ``-p``, ``-h`` and the
    other options of :class:`~timelypy.Config` are read, and free arguments
    are left for the program.
    """
    config, _ = Config.from_args(sys.argv if argv is None else argv)
    return execute(config, func)


def example(build: Callable[[Any], R]) -> R:
    """Build one dataflow with ``build(scope)`` on a single worker, run it, return the result.

    >>> import timelypy
    >>> timelypy.example(lambda scope: scope.to_stream(range(3)).map(lambda x: x * x)
    ...                  .capture()).extract()
    [(0, [0, 1, 4])]
    """

    def program(worker: Worker) -> R:
        return worker.dataflow(build)

    return execute(Config.thread(), program)[0]

