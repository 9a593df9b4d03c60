"""Operator fusion: a chain of ``Pipeline`` operators runs in one activation.

``map``, ``filter``, ``flat_map``, the ``inspect`` family and probes are
*fusible*: besides their ordinary logic, each declares a batch function
(:attr:`~timelypy.dataflow.operator.LeafOperator.fuse`) that does to one
batch exactly what one activation of its logic does.  When a scope is built,
every edge from an ordinary operator's output to a fusible operator is
*fused* if it is the output's only edge.  While the scope schedules its
operators, a batch the producer sends along a fused edge is not queued for
the consumer's next activation: the consumer's batch function runs on it at
once, inside the producer's activation, and its output goes on the same way.
So ``map(f).filter(g).inspect(h)`` after an exchange costs one activation
per batch instead of three, as Flink chains operators.

The graph stays the one that was built -- every operator keeps its place, its
input and output locations, its frontiers and its metrics -- and no frontier
anyone can observe changes: a fused edge carries no message count.  The
producer's count of a batch is taken back as the consumer takes the batch,
exactly the ``+n`` and ``-n`` that would have met in the scope's batch of
changes had the consumer run later in the same pass, before any progress was
propagated.  Along a chain of fused edges one call takes the batch through
every batch function in turn, and between them it is not counted at all
(only each operator's records in and out, for its metrics).

An input handle's operator is a producer like any other: each batch the
handle pushes (``send_batch``, or its buffer of single records at
``flush``, ``advance_to``, ``close``, or when it fills) goes through the
chain fused after it at once, in that call, between the worker's steps --
behind any batch still queued for the chain (one sent while the dataflow
was being built, or while operators were timed), never ahead of it.  The
handle holds its capability at the batch's time meanwhile, and whatever
count the chain leaves (a batch for an operator it is not fused with) is
reported with the input's own changes, so the next step propagates them
together: no frontier passes a time while a batch at that time is on its
way, and this worker's frontiers move only in its steps, as without
fusion.  With several workers, a batch the chain sends on (through an
exchange) reaches the others before this worker's next step, so they may
take it, and see their frontiers advance, a step earlier than without
fusion.  So ``input -> map -> inspect -> probe`` costs no activation per
epoch.  Any other batch sent outside the scope's pass (an operator's logic
run from a frontier callback) takes the ordinary path through the
consumer's queue.

Fusion is off while a ``"timely"`` logger is registered (every schedule and
message event is then logged as without fusion), while per-operator timing is
on, and with ``Config(fuse=False)``.  Within one activation fused operators
see batches one after the other: ``inspect(a).inspect(b)`` over two batches
calls ``a`` and ``b`` alternately, where unfused it calls ``a`` twice first;
each operator still sees its own batches in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from timelypy.dataflow.operator import LeafOperator
from timelypy.progress import subgraph as _subgraph
from timelypy.progress.location import Location
from timelypy.progress.subgraph import Subgraph

__all__ = ["count_only", "fuse_pipelines", "fused_edges", "shared_frontiers"]

#: ``fuse(time, records)``: what one activation does to one batch; returns the batch
#: to send on (``None`` or empty for nothing).
BatchFn = Callable[[Any, list[Any]], Any]


def count_only(time: Any, records: list[Any]) -> None:
    """The batch function of an operator that only counts what it receives (a probe).

    Fusion recognises it: a fused edge into such an operator takes the
    batch's count and calls nothing.
    """
    return None


def fused_edges(subgraph: Subgraph) -> list[tuple[int, int, int]]:
    """The edges of ``subgraph`` that can be fused, as ``(producer, output, consumer)``.

    The producer is an operator (not the scope boundary, not a nested
    scope; an input handle's passive operator is one) and the edge is its
    output's only one; the consumer is a fusible operator with that edge as
    its only input.
    """
    children = subgraph.children
    result = []
    for producer in range(1, len(children)):
        child = children[producer]
        if type(child) is not LeafOperator:
            continue
        for output, targets in enumerate(subgraph.child_edges(producer)):
            if len(targets) != 1 or child.tees[output].readers != 1:
                continue
            ((consumer, _),) = targets
            reader = children[consumer]
            if (
                type(reader) is LeafOperator
                and reader.fuse is not None
                and reader.inputs == 1
                and reader.outputs <= 1
                and consumer > producer
            ):
                result.append((producer, output, consumer))
    return result


def fuse_pipelines(subgraph: Subgraph) -> int:
    """Fuse every edge :func:`fused_edges` finds; return how many.

    The fused operators' frontiers are then shared (:func:`shared_frontiers`).
    """
    edges = fused_edges(subgraph)
    # A consumer's output (it has at most one) fused on to the next consumer.
    onward = {producer: consumer for producer, _, consumer in edges}
    for producer, output, consumer in edges:
        # The batch runs through the rest of the chain in one call: the consumer, the
        # consumer fused after it, and so on.  The last one's output is not fused: if
        # it has one, its batch is counted there for the scope to extract.
        chain = [consumer]
        while chain[-1] in onward:
            chain.append(onward[chain[-1]])
        _install(subgraph, producer, output, chain)
    links = shared_frontiers(subgraph, edges)
    if links:
        subgraph.share_frontiers(links)
    return len(edges)


def shared_frontiers(
    subgraph: Subgraph, edges: list[tuple[int, int, int]]
) -> list[tuple[Location, Location]]:
    """The pairs of locations whose frontiers are always equal once ``edges`` are fused.

    * A fusible operator's output and its input: it never holds a capability
      (after its initial one is released), and its input reaches its output
      unchanged, so the output's frontier is the input's.  The same holds
      for an operator that passes its input's frontier through (an
      exchange, :attr:`~timelypy.dataflow.operator.LeafOperator.passes_through`).
    * The two ends of a fused edge from either kind of operator: such a
      producer only sends while the scope runs its pass, where the consumer
      takes every batch at once (or, unfused under operator timing, later
      in the same pass), so the edge never holds a message when progress is
      propagated.
    * The two ends of a fused edge from a passive operator (an input
      handle's): its batch runs through the chain as it is sent, between
      steps; one that must queue instead (behind batches queued while the
      dataflow was built, or under operator timing) is counted in the next
      pass, which the consumer it activated runs too, taking it.  The
      consumer's input then shares the input's own antichain of
      capabilities (a mirrored location, :class:`~timelypy.progress.reachability.PortInformation`).

    A chain ``map -> filter -> inspect -> probe`` after an input thus has one
    frontier from the input's output to the probe, updated once per change
    instead of once per location (:meth:`~timelypy.progress.subgraph.Subgraph.share_frontiers`);
    so has ``exchange -> inspect -> probe``, from the exchange's input, where
    the records in flight between workers are counted.
    """
    children = subgraph.children
    links: list[tuple[Location, Location]] = []
    for index in range(1, len(children)):
        child = children[index]
        if (
            type(child) is LeafOperator
            and (child.fuse is not None or child.passes_through)
            and child.inputs == 1
            and child.outputs == 1
        ):
            links.append((Location.new_target(index, 0), Location.new_source(index, 0)))
    for producer, output, consumer in edges:
        head = children[producer]
        if type(head) is LeafOperator and (
            head.fuse is not None or head.passes_through or head.passive
        ):
            links.append((Location.new_source(producer, output), Location.new_target(consumer, 0)))
    # Earlier locations first, so that a chain joins in one pass.
    links.sort(key=lambda link: (link[0].node, link[0].port.kind.value))
    return links


def _install(subgraph: Subgraph, producer: int, output: int, chain: list[int]) -> None:
    children = subgraph.children
    head: LeafOperator = children[producer]  # type: ignore[assignment]
    tee = head.tees[output]
    (queued,) = tee.pushers  # the Pipeline push into the first consumer's queue
    produced = head.produceds[output]
    head_stats = subgraph.stats[producer]
    # Every consumer but the last: its batch function, its stats, itself, its index.
    middle: list[tuple[BatchFn, list[Any], LeafOperator, int]] = [
        (children[index].fuse, subgraph.stats[index], children[index], index)  # type: ignore[misc,union-attr]
        for index in chain[:-1]
    ]
    consumer = chain[-1]
    reader: LeafOperator = children[consumer]  # type: ignore[assignment]
    reader_stats = subgraph.stats[consumer]
    fuse: BatchFn | None = reader.fuse
    if fuse is count_only:
        fuse = None  # nothing to run but the counts
    if reader.outputs and reader.tees[0].readers:
        out_produced: dict[Any, int] = reader.produceds[0]
        out_tee = reader.tees[0]
    else:
        out_produced = {}
        out_tee = None
    dirty = subgraph.fused_dirty
    locate = subgraph.locate
    module = _subgraph

    def push(time: Any, records: list[Any]) -> None:
        if module.TIMING or not (subgraph.scheduling or subgraph.fusing):
            queued(time, records)
            return
        n = len(records)
        # The producer counted the batch as sent; the consumer takes it now.
        left = produced[time] - n
        if left:
            produced[time] = left
        else:
            del produced[time]
        head_stats[2] += n
        # Between consumers of the chain a batch is never counted: it is taken at once.
        for batch_fn, stats, member, index in middle:
            stats[1] += n
            try:
                records = batch_fn(time, records)
            except Exception as exc:
                locate(exc, member, index)
                raise
            if not records:
                return
            n = len(records)
            stats[2] += n
        reader_stats[1] += n
        if fuse is None:
            return
        try:
            result = fuse(time, records)
        except Exception as exc:
            locate(exc, reader, consumer)
            raise
        if result and out_tee is not None:
            out_produced[time] = out_produced.get(time, 0) + len(result)
            # The scope extracts that count: in its pass, after the activation that
            # ran the chain; outside it (an input handle's batch), as the input's.
            if subgraph.scheduling:
                dirty.append(consumer)
            else:
                subgraph.note_changes(consumer)
            out_tee.push(time, result)

    if not head.passive:
        tee.replace(0, push)
        return

    waiting = children[chain[0]].queue(0)  # type: ignore[union-attr]

    def push_from_input(time: Any, records: list[Any]) -> None:
        # A passive producer (an input handle's) sends from outside the scope's pass,
        # between steps: its batch runs through the chain now, with the fused edges
        # further on taking it at once too.
        if waiting:
            # Batches queued earlier (sent while the dataflow was being built, or while
            # operators were timed) go first: this one waits behind them.
            queued(time, records)
        elif subgraph.scheduling or subgraph.fusing or module.TIMING:
            push(time, records)  # in the pass, or inside another input's chain
        else:
            subgraph.fusing = True
            try:
                push(time, records)
            finally:
                subgraph.fusing = False

    tee.replace(0, push_from_input)
