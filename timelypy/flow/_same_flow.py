"""Every worker must run the same flow: a fingerprint compared before anything runs.

Processes of a cluster are started separately (by hand, by a launcher, as
Spark tasks), so nothing but this check stops two of them from running
different flows: a step missing on one process used to hang the others
(its exchange waits for ever), an extra step ran to a "successful" end.
Before a flow's first dataflow is built (and before worker 0 begins a
recovery execution), every worker sends a digest of its flow's
description to worker 0, which compares them and tells every worker the
verdict; on a difference every worker raises a
:class:`~timelypy.errors.FlowError` (the differing one saying what
differs), so nothing runs and nothing is recorded.  The worker counts are
compared earlier still, when the processes first connect
(:mod:`timelypy.communication.network`).

The description is each step's operator, step ID, and the streams it
reads and writes, in the order the steps were added; the user's
functions are not compared (their code may differ legitimately, e.g.
closures over a process's own paths).
"""

from __future__ import annotations

import hashlib
from typing import Any

from timelypy.dataflow.input import InputHandle
from timelypy.dataflow.probe import ProbeHandle
from timelypy.errors import FlowError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.primaries import broadcast_from_first
from timelypy.worker import Worker

__all__ = ["flow_description", "check_same_flow"]


def flow_description(flow: Dataflow) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """What every worker's flow must share: ``(operator, step_id, ups, outs)`` per step.

    >>> from timelypy.flow import Dataflow
    >>> flow = Dataflow(); flow.map(str); flow.capture()
    >>> [(operator, step_id) for operator, step_id, _, _ in flow_description(flow)]
    [('map', 'map'), ('capture', 'capture')]
    """
    return [(step.operator, step.step_id, tuple(step.ups), tuple(step.outs)) for step in flow.steps]


def check_same_flow(worker: Worker, flow: Dataflow) -> None:
    """Raise on every worker if any worker's flow differs from worker 0's (call it on all).

    Every worker sends its flow's description to worker 0, which compares
    them and sends its verdict back: nobody goes on (worker 0 does not
    begin a recovery execution) unless every flow is the same.
    """
    mine = flow_description(flow)
    digest = hashlib.sha256(repr(mine).encode()).hexdigest()
    reports: list[tuple[int, str, Any]] = []
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
    handle.send((worker.index, digest, mine))
    handle.close()
    worker.step_while(lambda: not probe.done())
    verdict = None
    if worker.index == 0:
        differ = sorted((index, other) for index, key, other in reports if key != digest)
        if differ:
            verdict = _difference(*differ[0], mine)
            if len(differ) > 1:
                verdict += f" (and so do workers {[index for index, _ in differ[1:]]})"
    verdict = broadcast_from_first(worker, verdict, "the flows' fingerprints")
    if verdict is not None:
        raise FlowError(verdict)


def _difference(index: int, mine: list[Any], first: list[Any]) -> str:
    ids = [step_id for _, step_id, _, _ in mine]
    first_ids = [step_id for _, step_id, _, _ in first]
    differences = []
    only_here = [step_id for step_id in ids if step_id not in first_ids]
    only_first = [step_id for step_id in first_ids if step_id not in ids]
    if only_here:
        differences.append(f"steps only here: {only_here}")
    if only_first:
        differences.append(f"steps only on worker 0: {only_first}")
    if not differences:
        changed = [
            here[1] for here, there in zip(mine, first, strict=False) if here != there
        ] or ids[:1]
        differences.append(f"steps that differ in operator, order or streams: {changed}")
    return (
        f"worker {index} runs another flow than worker 0 ({'; '.join(differences)}): "
        "every process of a cluster must run the same flow, with the same steps and step IDs"
    )
