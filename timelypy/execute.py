"""Running a computation: ``execute``, ``initialize_from``, ``execute_from_args``, ``example``.

This is the one module that wraps workers around allocators, as Timely's
``initialize_from`` does: the communication layer builds a
:class:`~timelypy.communication.transport.Transport` (the allocators of this
process's workers and the lifecycle around them) and knows nothing of
workers; :func:`initialize_from` makes a
:class:`~timelypy.worker.Worker` of each allocator and runs the program on
it.  Threads, processes and Spark tasks all take this one path.

``execute(config, func)`` builds the transport ``config`` describes and
calls ``initialize_from``, which calls ``func(worker)`` on every local
worker, then keeps each stepping until all its dataflows are complete
(input handles the program left open are closed first, as Rust drops
them).  It returns each local worker's return value, in worker order.

With one worker, ``func`` runs in the calling thread.  With ``n`` workers in
one process (``Config.process(n)``), each runs in its own thread and they
share records by reference.  With several processes (``-n``), each process
runs its own workers and they talk over ZeroMQ
(:mod:`timelypy.communication.cluster`).

If any worker raises, every other worker stops at its next step and
``execute`` re-raises the *original* exception -- same type, message and
traceback -- with notes naming the worker and operator; a worker that only
stopped because a peer process failed raises that peer's
:class:`~timelypy.errors.ClusterError` instead.  Ctrl-C (anything raised in
the calling thread) stops all workers too.  A process whose every local
worker completed its dataflows is never failed by what a peer does after
that (a peer lost or failing once the work is done is logged, not raised):
its results are whole.
"""

from __future__ import annotations

import logging
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from timelypy.communication.allocator import Allocator
from timelypy.communication.config import Config
from timelypy.communication.transport import ProcessTransport, Transport
from timelypy.errors import ClusterError, ConfigError, WorkerAborted
from timelypy.progress.explain import summarize
from timelypy.worker import Worker

__all__ = ["execute", "initialize_from", "execute_from_args", "example"]

R = TypeVar("R")

log = logging.getLogger("timelypy")

#: How long an idle worker parks before checking again that its peers are alive.
PARK_SECONDS = 0.25
#: After this many idle seconds with dataflows incomplete, say what holds them.
STALL_WARNING_SECONDS = 30.0
#: How long the calling thread waits for worker threads after it was interrupted.
INTERRUPT_JOIN_SECONDS = 5.0
#: Seconds the other worker threads get to stop once one failed; a thread still
#: inside a user function after that is left behind (a daemon) and named.
STOP_GRACE_SECONDS = 2.0


def run_worker(worker: Worker, func: Callable[[Worker], R]) -> R:
    """Run ``func(worker)``, close its open inputs, and step until its dataflows complete.

    A worker idle for :data:`STALL_WARNING_SECONDS` with dataflows still
    incomplete logs what holds them (and again every as many seconds);
    records unread at an operator's input are reported by the worker's own
    steps every as many seconds, in ``func``'s stepping loop as well
    (:attr:`Worker.stall_seconds <timelypy.worker.Worker.stall_seconds>`).
    """
    if STALL_WARNING_SECONDS > 0:
        worker.stall_seconds = STALL_WARNING_SECONDS  # in the program's own loop too
    result = func(worker)
    worker.close_inputs()
    if not worker.has_dataflows():
        return result  # complete: nothing a peer does from now on concerns this worker
    warned_at = 0.0
    # (Records never read at an operator's input are reported by the worker's own step,
    # in this loop as in the program's: see timelypy.worker, "Stalls".)
    while worker.step_or_park(PARK_SECONDS):
        idle = worker.idle_seconds()
        if idle >= STALL_WARNING_SECONDS and idle - warned_at >= STALL_WARNING_SECONDS:
            warned_at = idle
            held = summarize(worker.why_not_complete())
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


def execute(config: Config | None, func: Callable[[Worker], R]) -> list[R]:
    """Run ``func`` on every worker of ``config``; return their results in worker order.

    ``config`` ``None`` is one worker (:meth:`Config.thread`).  With several
    processes, each process returns its own workers' results; the cluster's
    shared secret is read from ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE``.

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
    return initialize_from(_transport_for(config), config, func)


def _transport_for(config: Config) -> Transport:
    if config.processes > 1:
        # Imported here: a run within one process needs neither ZeroMQ nor its sockets.
        from timelypy.communication.cluster import ClusterTransport

        return ClusterTransport.from_config(config)
    return ProcessTransport(config.workers)


def initialize_from(
    transport: Transport,
    config: Config,
    func: Callable[[Worker], R],
    report: Callable[[BaseException], object] | None = None,
) -> list[R]:
    """Run ``func`` on a worker around each of ``transport``'s allocators; return the results.

    Each worker is ``Worker(allocator, config)``; a lone worker of a
    single process runs in the calling thread, otherwise every worker runs
    in a thread of its own, so that the calling thread can raise a failure
    even while a worker is stuck in a user function (after
    :data:`STOP_GRACE_SECONDS`).  After ``func(worker)`` returns, the
    worker's open inputs are closed and it steps until its dataflows
    complete (:func:`run_worker`).  The transport's lifecycle frames the
    run: :meth:`~Transport.start` first, :meth:`~Transport.finish` once every
    worker completed, :meth:`~Transport.fail` with this process's own
    failure, and :meth:`~Transport.close` always.

    On failure it raises the first original error, with a note naming the
    worker (and the operator, where one raised).  When this process's own
    worker, or the calling thread, failed, ``report(error)`` is called with
    that error *before* the peers are told (the Spark driver learns the root
    cause first; an exception from ``report`` is logged and ignored).  A
    failure a peer reported is raised as that peer's
    :class:`~timelypy.errors.ClusterError`, not as the local workers'
    :class:`~timelypy.errors.WorkerAborted`.

    >>> from timelypy.communication.config import Config
    >>> from timelypy.communication.transport import ProcessTransport
    >>> initialize_from(ProcessTransport(3), Config.process(3), lambda worker: worker.index)
    [0, 1, 2]
    """
    allocators = transport.allocators
    try:
        transport.start()
        if len(allocators) == 1 and config.processes == 1:
            results = [_run_here(allocators[0], config, func)]
        else:
            results = _run_threads(transport, config, func)
        transport.finish()
        late = transport.failure
        if late is not None:
            # Every local worker completed its dataflows, then a peer was lost or
            # failed: this process's results are whole, so it does not fail for it.
            log.warning("the dataflows of this process completed; after that: %s", late)
        return results
    except BaseException as exc:
        failure = transport.failure
        if not isinstance(failure, ClusterError) and not isinstance(exc, ClusterError):
            own = failure if failure is not None else exc
            if report is not None:
                try:
                    report(own)
                except Exception:
                    log.debug("could not report the failure", exc_info=True)
            transport.fail(own)
        if isinstance(exc, WorkerAborted) and isinstance(failure, ClusterError):
            raise failure from None
        raise
    finally:
        transport.close()


def _annotate(exc: BaseException, index: int) -> None:
    """Add a note naming worker ``index`` to ``exc``, unless an operator's note names it."""
    if getattr(exc, "timelypy_worker_noted", False):
        return
    try:
        exc.timelypy_worker_noted = True  # type: ignore[attr-defined]
    except AttributeError:
        pass
    if getattr(exc, "timelypy_operator", None) is None:
        exc.add_note(f"raised on worker {index}")


def _failed(allocator: Allocator, exc: BaseException) -> None:
    """Record worker ``allocator.index``'s failure ``exc`` so that every other worker stops.

    A worker's own error is noted with its index.  ``WorkerAborted`` (this
    worker stopped because another failed) records nothing; a
    ``ClusterError`` (a peer failed) is recorded but not annotated.
    """
    if not isinstance(exc, WorkerAborted | ClusterError):
        _annotate(exc, allocator.index)
        allocator.abort(exc)
    elif isinstance(exc, ClusterError):
        allocator.abort(exc)


def _run_here(allocator: Allocator, config: Config, func: Callable[[Worker], R]) -> R:
    """Run the one local worker in the calling thread."""
    worker = Worker(allocator, config)
    try:
        return run_worker(worker, func)
    except BaseException as exc:
        _failed(allocator, exc)
        raise


def _run_threads(transport: Transport, config: Config, func: Callable[[Worker], R]) -> list[R]:
    """Run one worker thread per allocator; fail fast with the first original error."""
    allocators = transport.allocators
    results: list[Any] = [None] * len(allocators)
    errors: list[BaseException | None] = [None] * len(allocators)

    def body(slot: int, allocator: Allocator) -> None:
        worker = Worker(allocator, config)
        try:
            results[slot] = run_worker(worker, func)
        except BaseException as exc:
            errors[slot] = exc
            _failed(allocator, exc)

    threads = [
        threading.Thread(
            target=body,
            args=(slot, allocator),
            name=f"timelypy-worker-{allocator.index}",
            daemon=True,
        )
        for slot, allocator in enumerate(allocators)
    ]
    for thread in threads:
        thread.start()
    failed_at: float | None = None
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
                if failed_at is None and (
                    transport.failure is not None or any(e is not None for e in errors)
                ):
                    failed_at = time.monotonic()
                if failed_at is not None and time.monotonic() - failed_at > STOP_GRACE_SECONDS:
                    break
    except BaseException as interrupt:
        # Ctrl-C, a test's timeout, SystemExit from a signal handler: whatever
        # stops the calling thread stops the workers too, rather than leaving
        # them running (or spinning) behind it.
        allocators[0].abort_all(interrupt)
        deadline = time.monotonic() + INTERRUPT_JOIN_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise
    if all(error is None for error in errors) and not any(t.is_alive() for t in threads):
        # Every worker returned: its dataflows completed.  A peer's loss or failure
        # recorded since is the caller's to log (initialize_from), not to raise.
        return results
    failure = _first_failure(transport.failure, errors)
    if failure is not None:
        stuck = [t for t in threads if t.is_alive()]
        if stuck:
            where = "; ".join(_doing(thread) for thread in stuck)
            failure.add_note(
                f"{len(stuck)} other worker thread(s) did not stop within "
                f"{STOP_GRACE_SECONDS:g} s and were left running as daemon threads: {where}"
            )
            log.warning("worker thread(s) still running after a failure: %s", where)
        raise failure
    return results


def _doing(thread: threading.Thread) -> str:
    """``thread``'s name and the user code it is in (for a stuck worker).

    The innermost frame outside the standard library and timelypy: the user
    function that does not return (not the ``time.sleep`` it waits in).
    """
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return thread.name
    innermost, ours = frame, (sysconfig.get_paths()["stdlib"], str(Path(__file__).parent))
    while frame is not None and frame.f_code.co_filename.startswith(ours):
        frame = frame.f_back
    frame = frame or innermost
    return f"{thread.name} in {frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})"


def _first_failure(
    recorded: BaseException | None, errors: Sequence[BaseException | None]
) -> BaseException | None:
    """The failure to raise: the recorded one, else a worker's own, else any."""
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

    ``argv[0]`` is the program name (``None``: :data:`sys.argv`); ``-w``,
    ``-n``, ``-p``, ``-h`` and the other options of :class:`~timelypy.Config`
    are read, and free arguments are left for the program.

    >>> import timelypy
    >>> timelypy.execute_from_args(["prog", "-w", "2", "data.txt"], lambda w: w.index)
    [0, 1]
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
