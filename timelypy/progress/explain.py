"""Why is time ``t`` not complete?  The pointstamps that hold it, and who holds them.

A dataflow's frontier stays at or before ``t`` while one of its scopes holds a
pointstamp at or before ``t``: a *capability* some operator holds at an
output, or *messages* sent to an operator's input and not yet consumed (a
message is counted from the moment it is sent until its reader takes it
from its queue).  A scope's tracker knows each pointstamp's count summed over
all workers -- the progress protocol exchanges exactly that -- but not who
holds it.  Two local facts complete the picture: a scope keeps, per child,
the capabilities the child holds *on this worker* (``Subgraph.held_by``:
kept from the same changes the scope sends to its peers, or, for a lone
worker's root scope, the tracker's own counts), and an operator knows
the records waiting unread in its own input queues (``Operate.unread``).

:func:`explain` walks a dataflow's scopes (nested ones too, their times
mapped out to the dataflow's) and returns a :class:`Holder` for every
pointstamp at or before ``t``, with its count over all workers and this
worker's share.  A share smaller than the count means other workers hold the
rest (their own :func:`explain` names them), or, for messages, that they are
still on their way.  Asked on every worker, the shares add up to the counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from timelypy.order import less_equal
from timelypy.progress.subgraph import Subgraph

__all__ = [
    "Holder",
    "explain",
    "summarize",
]

#: How many holders :func:`summarize` lists before it says how many more there are.
HOLDERS_LOGGED = 10


@dataclass(frozen=True)
class Holder:
    """One pointstamp that keeps a time from completing.

    ``kind`` is ``"capability"`` (``port`` is the operator's output) or
    ``"messages"`` (``port`` is its input; counts are records).  ``time`` is
    in the operator's own scope (a ``Product`` inside a loop); ``count`` is
    summed over all workers, ``here`` is the share of worker ``worker``.
    """

    worker: int
    dataflow: int
    operator: str
    address: tuple[int, ...]
    kind: str
    port: int
    time: Any
    count: int
    here: int

    def __str__(self) -> str:
        where = f"operator {self.operator!r} (address {self.address})"
        if self.kind == "capability":
            held = "a capability" if self.count == 1 else f"{self.count} capabilities"
            if self.here == self.count:
                return (
                    f"worker {self.worker}: {where} holds {held} at {self.time!r} "
                    f"on output {self.port}"
                )
            return (
                f"{held} at {self.time!r} on output {self.port} of {where}: "
                f"{self.here} held on worker {self.worker}, {self.count - self.here} "
                "on other workers"
            )
        records = "1 record" if self.count == 1 else f"{self.count} records"
        if self.here:
            return (
                f"{records} at {self.time!r} sent to input {self.port} of {where}: "
                f"{self.here} waiting unread on worker {self.worker}"
                + (
                    f", {self.count - self.here} unread on other workers or still on their way"
                    if self.here < self.count
                    else ""
                )
            )
        return (
            f"{records} at {self.time!r} sent to input {self.port} of {where}: unread on "
            f"other workers or still on their way (none waits on worker {self.worker})"
        )


def explain(dataflow: Subgraph, identifier: int, time: Any, worker: int) -> list[Holder]:
    """Every pointstamp of ``dataflow`` at or before ``time`` (``None``: every one).

    ``identifier`` is the dataflow's index on the worker, ``worker`` the
    worker's index, both only copied into the holders.
    """
    found: list[Holder] = []
    blocks = _always if time is None else (lambda t: less_equal(t, time))
    _walk(dataflow, identifier, blocks, worker, found)
    return found


def _always(time: Any) -> bool:
    return True


def _mapped(blocks: Callable[[Any], bool], to_outer: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """``blocks`` for a nested scope's times, mapped out to the enclosing scope's."""
    return lambda time: blocks(to_outer(time))


def _walk(
    scope: Subgraph,
    identifier: int,
    blocks: Callable[[Any], bool],
    worker: int,
    found: list[Holder],
) -> None:
    tracker = scope.tracker
    if tracker is None:
        return
    for index in range(1, len(scope.children)):
        child = scope.children[index]
        if child is None:
            continue
        state = tracker.node_state(index)
        address = (*scope.path, index)
        for port, info in enumerate(state.targets):
            waiting = None
            for t, count in info.pointstamps.updates():
                if count > 0 and blocks(t):
                    if waiting is None:
                        waiting = child.unread(port)
                    found.append(
                        Holder(
                            worker,
                            identifier,
                            child.name,
                            address,
                            "messages",
                            port,
                            t,
                            count,
                            min(count, waiting.get(t, 0)),
                        )
                    )
        if isinstance(child, Subgraph) and child.refinement is not None:
            # its capabilities are its children's: name those
            before = len(found)
            _walk(child, identifier, _mapped(blocks, child.refinement.to_outer), worker, found)
            if len(found) > before:
                continue
        held = scope.held_by(index) if isinstance(scope, Subgraph) else []
        for port, info in enumerate(state.sources):
            for t, count in info.pointstamps.updates():
                if count > 0 and blocks(t):
                    # a change not yet exchanged can make the local share look larger
                    here = min(count, held[port].get(t, 0) if port < len(held) else 0)
                    found.append(
                        Holder(
                            worker,
                            identifier,
                            child.name,
                            address,
                            "capability",
                            port,
                            t,
                            count,
                            here,
                        )
                    )


def summarize(holders: list[Holder], limit: int = HOLDERS_LOGGED) -> str:
    """``holders`` as one log line's worth of sentences (the first ``limit``)."""
    if not holders:
        return "nothing on this worker (other workers hold it, or messages are on their way)"
    text = "; ".join(str(holder) for holder in holders[:limit])
    if len(holders) > limit:
        text += f"; and {len(holders) - limit} more"
    return text
