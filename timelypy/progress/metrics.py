"""What each operator did on this worker: activations, records, time, frontier.

Every scope counts, per child and on its own worker, how often the child
ran and the records it consumed and produced (the same per-batch counts the
progress protocol already keeps, so nothing is counted per record); once
:func:`time_operators` switched timing on, also the seconds spent in its
``schedule`` -- the user's logic plus the operator's own bookkeeping; a
nested scope's seconds include its children's.  Timing is off by default
because two clock reads per activation cost 3-4% of the epoch round trip.
:func:`operator_metrics` reads them, with each operator's input frontier,
into plain dicts, and :func:`frontier_lag` says how far the slowest
operator's frontier trails the fastest one's, in epochs.

The counters are fixed-size lists of numbers, so another thread (a metrics
server) may read them while the worker runs; a frontier read races with the
worker's updates and is retried.
"""

from __future__ import annotations

from typing import Any

from timelypy.progress import subgraph as _subgraph
from timelypy.progress.subgraph import Subgraph

__all__ = [
    "time_operators",
    "timing_operators",
]


def time_operators(on: bool = True) -> None:
    """Switch timing of every operator activation in this process on (or off)."""
    _subgraph.TIMING = on


def timing_operators() -> bool:
    """Whether operator activations are timed (:func:`time_operators`)."""
    return _subgraph.TIMING


def operator_metrics(dataflow: Subgraph, identifier: int, worker: int) -> list[dict[str, Any]]:
    """One dict per operator (and nested scope) of ``dataflow``, in address order.

    Keys: ``worker``, ``dataflow``, ``address``, ``name``, ``scope`` (whether it
    is a nested scope), ``activations``, ``records_in``, ``records_out``,
    ``seconds`` (0.0 unless :func:`time_operators` is on), ``inputs`` (how many
    it has), ``frontier`` (the minimal times still possible at its inputs, as a
    list; ``[]`` once complete) and ``capabilities`` (the minimal times of the
    capabilities held at its outputs, over all workers).
    """
    found: list[dict[str, Any]] = []
    _walk(dataflow, identifier, worker, found)
    return found


def _walk(scope: Subgraph, identifier: int, worker: int, found: list[dict[str, Any]]) -> None:
    stats = getattr(scope, "stats", None)
    tracker = scope.tracker
    if stats is None or tracker is None:
        return
    for index in range(1, len(scope.children)):
        child = scope.children[index]
        if child is None:
            continue
        _, records_in, records_out, seconds = stats[index]
        if isinstance(child, Subgraph):
            activations = child.rounds
        else:  # an operator counts its logic's runs, twice each (start and end)
            activations = getattr(child, "activation", 0) // 2
        found.append(
            {
                "worker": worker,
                "dataflow": identifier,
                "address": (*scope.path, index),
                "name": child.name,
                "scope": isinstance(child, Subgraph),
                "activations": activations,
                "records_in": records_in,
                "records_out": records_out,
                "seconds": seconds,
                "inputs": child.inputs,
                "frontier": _frontier(tracker, index, "targets"),
                "capabilities": _frontier(tracker, index, "sources"),
            }
        )
        if isinstance(child, Subgraph):
            _walk(child, identifier, worker, found)


def _frontier(tracker: Any, index: int, ports: str) -> list[Any]:
    """The frontier at a node's inputs or of its outputs' capabilities.

    ``targets``: the times that may still arrive; ``sources``: those it may still send.
    """
    for _ in range(3):  # the worker may change it while another thread reads
        try:
            times: set[Any] = set()
            for port in getattr(tracker.node_state(index), ports):
                found = port.implications if ports == "targets" else port.pointstamps
                times.update(found.frontier())
            return sorted(times, key=repr) if len(times) > 1 else list(times)
        except RuntimeError:
            continue
    return []


def frontier_lag(operators: list[dict[str, Any]]) -> int | None:
    """How many epochs the slowest operator's frontier trails the fastest's (int times).

    Over the operators with inputs and a frontier of ``int`` times; ``None``
    when fewer than one such operator, or the times are not ``int``.
    """
    firsts: list[int] = [
        min(op["frontier"])
        for op in operators
        if op["frontier"] and all(type(t) is int for t in op["frontier"])
    ]
    if not firsts:
        return None
    return max(firsts) - min(firsts)


def progress_summary(dataflows: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the given dataflows (``Worker.metrics()["dataflows"]``) got, in ``int`` epochs.

    ``frontier``: the first epoch not complete at any of their operators;
    ``inputs``: the first epoch their sources (the operators without inputs
    in a dataflow's own scope) may still send; ``records``: what those
    sources sent.  An epoch is ``None`` when there is none (or no ``int``).
    """
    frontiers: list[int] = []
    inputs: list[int] = []
    records = 0
    for flow in dataflows:
        for op in flow["operators"]:
            frontiers += [t for t in op["frontier"] if type(t) is int]
            if op["inputs"] == 0 and len(op["address"]) == 2:
                records += op["records_out"]
                inputs += [t for t in op["capabilities"] if type(t) is int]
    return {
        "frontier": min(frontiers) if frontiers else None,
        "inputs": min(inputs) if inputs else None,
        "records": records,
    }
