"""Stepping workers by hand, from the test's own thread.

:func:`stepped_workers` builds ``peers`` real :class:`~timelypy.worker.Worker`
objects over :func:`~timelypy.communication.allocator.process_allocators`
(the in-memory allocator of worker threads) but starts no thread: the test
calls ``worker.step()`` itself.  Every worker builds the same dataflows, as
under :func:`timelypy.execute`; nothing else differs from a threaded run,
except that *which worker steps when* is now the test's choice.  So a test
is exactly reproducible, never waits on a clock, and can try the
interleavings it wants (:mod:`timelypy.testing.simulation` draws them).

:func:`settle` steps every worker a fixed number of rounds;
:func:`run_to_completion` steps until every dataflow completed and, if that
does not happen within a bound, fails with the list of what holds each
worker's dataflows (:meth:`Worker.holders`): a retained capability that is
never dropped, an input handle never closed, messages in flight.
"""

from __future__ import annotations

from collections.abc import Sequence

from timelypy.communication.allocator import process_allocators
from timelypy.communication.config import Config
from timelypy.worker import Worker

__all__ = ["stepped_workers", "settle", "run_to_completion", "describe_holders"]


def _as_list(workers: object, caller: str) -> list[Worker]:
    if isinstance(workers, Worker):
        return [workers]
    if not isinstance(workers, (list, tuple)):
        raise TypeError(f"{caller} takes a Worker or a list of Workers, got {workers!r}")
    for worker in workers:
        if not isinstance(worker, Worker):
            raise TypeError(f"{caller} takes a Worker or a list of Workers, got {worker!r} in it")
    return list(workers)


def _check_count(value: object, name: str, caller: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{caller}: {name} must be an int >= {minimum}, got {value!r}")
    return value


def stepped_workers(peers: int = 1) -> list[Worker]:
    """``peers`` workers of one computation, to be stepped by hand from this thread.

    They talk through the in-memory allocators of one process, exactly as
    the worker threads of ``execute(Config.process(peers), ...)`` do; no
    thread is started.  Build the same dataflows on each, in the same
    order, then drive them with :func:`settle`, :func:`run_to_completion`
    or your own ``worker.step()`` calls.

    >>> workers = stepped_workers(3)
    >>> probes = [w.dataflow(lambda scope: scope.to_stream([w.index]).probe()) for w in workers]
    >>> run_to_completion(workers)
    >>> [probe.done() for probe in probes]
    [True, True, True]
    """
    _check_count(peers, "peers", "stepped_workers", 1)
    config = Config.process(peers)
    return [Worker(allocator, config) for allocator in process_allocators(peers)]


def settle(workers: Worker | Sequence[Worker], rounds: int = 10) -> None:
    """Step every worker once per round, round-robin, for ``rounds`` rounds.

    Use it to let a dataflow absorb what was sent without requiring it to
    complete (an input still open, a capability still held).

    >>> import timelypy
    >>> worker = stepped_workers(1)[0]
    >>> handle = timelypy.InputHandle()
    >>> probe = worker.dataflow(lambda scope: scope.input_from(handle).probe())
    >>> handle.advance_to(3)
    >>> settle(worker)
    >>> probe.frontier()
    (3,)
    """
    workers = _as_list(workers, "settle")
    _check_count(rounds, "rounds", "settle", 0)
    for _ in range(rounds):
        for worker in workers:
            worker.step()


def describe_holders(workers: Worker | Sequence[Worker]) -> str:
    """What keeps each worker's dataflows from completing, one line per holder.

    >>> worker = stepped_workers(1)[0]
    >>> import timelypy
    >>> handle = timelypy.InputHandle()
    >>> _ = worker.dataflow(lambda scope: scope.input_from(handle).probe())
    >>> settle(worker, 1)
    >>> print(describe_holders(worker))
    worker 0: dataflow 0: 'Input' holds capabilities at [0] on output 0
    """
    workers = _as_list(workers, "describe_holders")
    lines = [f"worker {worker.index}: {line}" for worker in workers for line in worker.holders()]
    return "\n".join(lines) if lines else "(nothing holds them)"


def run_to_completion(workers: Worker | Sequence[Worker], limit: int = 2000) -> None:
    """Step every worker, round-robin, until all their dataflows completed.

    Raises :class:`AssertionError` after ``limit`` rounds if some dataflow
    is still running, naming what holds it on each worker (a capability
    retained and never dropped, an input handle left open, messages in
    flight), so a test of a stuck operator fails with a reason.

    >>> import timelypy
    >>> worker = stepped_workers(1)[0]
    >>> handle = timelypy.InputHandle()
    >>> _ = worker.dataflow(lambda scope: scope.input_from(handle).probe())
    >>> run_to_completion(worker, limit=5)
    Traceback (most recent call last):
    ...
    AssertionError: dataflows still running after 5 rounds of stepping 1 worker; what holds them:
    worker 0: dataflow 0: 'Input' holds capabilities at [0] on output 0
    (a capability that is retained and never dropped, or an input handle that is never closed,
    keeps a dataflow running)
    >>> handle.close()
    >>> run_to_completion(worker)
    """
    workers = _as_list(workers, "run_to_completion")
    _check_count(limit, "limit", "run_to_completion", 1)
    for _ in range(limit):
        if not any([worker.step() for worker in workers]):
            return
    count = f"{len(workers)} worker" + ("" if len(workers) == 1 else "s")
    raise AssertionError(
        f"dataflows still running after {limit} rounds of stepping {count}; what holds them:\n"
        f"{describe_holders(workers)}\n"
        "(a capability that is retained and never dropped, or an input handle that is never "
        "closed,\nkeeps a dataflow running)"
    )
