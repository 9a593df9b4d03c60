"""Primaries: which worker reads (or writes) each partition.

The assignment: every worker broadcasts the
partitions it can reach, the first worker computes an assignment for all
partitions and broadcasts it, and each worker then opens only the
partitions assigned to it.  A partition is therefore read by exactly one
worker, whatever the number of workers and whichever of them can reach it.

:func:`assign_primaries` is the first worker's computation: each partition,
the most constrained first (fewest workers reach it), goes to the worker
that reaches it and has the fewest partitions so far (the lowest index on a
tie); then partitions move while a worker that reaches one has at least two
fewer than its owner.  The result is balanced and the same in every run.

>>> assign_primaries({0: ["a", "b", "c"], 1: ["b", "c"]})
{'a': 0, 'b': 1, 'c': 0}

:func:`agree_primaries` runs the exchange on a worker, as two small
dataflows of the worker's own runtime (reports to worker 0, then the
assignment to everyone), before the flow itself is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from timelypy.dataflow.input import InputHandle
from timelypy.dataflow.probe import ProbeHandle
from timelypy.errors import FlowError
from timelypy.worker import Worker

__all__ = ["assign_primaries", "agree_primaries"]


def assign_primaries(
    reports: Mapping[int, Iterable[str]],
    required: Iterable[str] | None = None,
    what: str = "partitioned step",
) -> dict[str, int]:
    """Assign each partition in ``reports`` (worker -> reachable partitions) to one worker.

    ``required``, if given, lists partitions that must be assigned: one
    that no worker reaches is a :class:`~timelypy.errors.FlowError`.

    >>> assign_primaries({0: ["x"], 1: []}, required=["x", "y"], what="input 'logs'")
    Traceback (most recent call last):
    ...
    timelypy.errors.FlowError: input 'logs': partition 'y' is listed by no worker (worker 0 ...
    """
    reach: dict[str, list[int]] = {}
    for worker in sorted(reports):
        for part in sorted(set(reports[worker])):
            reach.setdefault(part, []).append(worker)
    if required is not None:
        missing = sorted(set(required) - set(reach))
        if missing:
            listed = ", ".join(
                f"worker {w} lists {sorted(set(reports[w]))}"
                if list(reports[w])
                else f"worker {w} lists nothing"
                for w in sorted(reports)
            )
            raise FlowError(
                f"{what}: partition {missing[0]!r} is listed by no worker ({listed}); every "
                "partition needs a worker that can reach it"
            )
    load = {worker: 0 for worker in reports}
    assignment: dict[str, int] = {}
    # Most constrained partitions first (fewest workers reach them), then by name.
    for part in sorted(reach, key=lambda p: (len(reach[p]), p)):
        primary = min(reach[part], key=lambda w: (load[w], w))
        assignment[part] = primary
        load[primary] += 1
    # Then move partitions from a worker to another that reaches them while
    # that lowers the larger load (each move lowers the sum of squared loads,
    # so this ends).
    moved = True
    while moved:
        moved = False
        for part in sorted(assignment):
            owner = assignment[part]
            target = min(reach[part], key=lambda w: (load[w], w))
            if load[target] + 1 < load[owner]:
                assignment[part] = target
                load[owner] -= 1
                load[target] += 1
                moved = True
    return assignment


def agree_primaries(
    worker: Worker, reachable: list[str], required: list[str] | None, what: str
) -> dict[str, int]:
    """Run the primary assignment on ``worker``; every worker returns the same assignment."""
    reports: list[tuple[int, list[str]]] = []
    handle: InputHandle[Any] = InputHandle()
    probe = ProbeHandle()
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .exchange(lambda report: 0)
            .inspect(reports.append)
            .probe_with(probe)
        )
    )
    handle.send((worker.index, sorted(set(reachable))))
    handle.close()
    worker.step_while(lambda: not probe.done())

    assignment = None
    if worker.index == 0:
        assignment = assign_primaries(dict((w, list(p)) for w, p in reports), required, what)
    return dict(broadcast_from_first(worker, assignment, what))


def broadcast_from_first(worker: Worker, value: Any, what: str = "a broadcast") -> Any:
    """Every worker returns worker 0's ``value`` (the others' ``value`` is ignored).

    A small dataflow of the worker's own runtime: worker 0 sends one copy
    to each worker, and every worker steps until its copy has arrived.
    """
    received: list[Any] = []
    handle: InputHandle[Any] = InputHandle()
    probe = ProbeHandle()
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .exchange(lambda message: message[0])
            .inspect(lambda message: received.append(message[1]))
            .probe_with(probe)
        )
    )
    if worker.index == 0:
        for target in range(worker.peers):
            handle.send((target, value))
    handle.close()
    worker.step_while(lambda: not probe.done())
    if len(received) != 1:
        raise FlowError(f"{what}: worker {worker.index} received {len(received)} copies, not 1")
    return received[0]
