"""The progcaster: a batch goes to every other worker and is applied to this one at once."""

from __future__ import annotations

from collections import deque
from typing import Any

from timelypy.progress.broadcast import Progcaster


def _progcaster(
    source: int, peers: int, flush: Any = None
) -> tuple[Progcaster, list[list[Any]], list[tuple[bool, int, int, list[Any]]]]:
    boxes: list[list[Any]] = [[] for _ in range(peers)]
    events: list[tuple[bool, int, int, list[Any]]] = []
    progcaster = Progcaster(
        [box.append for box in boxes],
        deque(),
        source,
        channel=7,
        log=lambda *event: events.append(event),
        flush=flush,
    )
    return progcaster, boxes, events


def test_send_goes_to_the_others_and_into_this_worker_now() -> None:
    flushed: list[int] = []
    progcaster, boxes, events = _progcaster(1, 3, flush=lambda: flushed.append(len(boxes[0])))
    into = {(2, 0, 0, 5): 1}
    sent = progcaster.send({(2, 0, 0, 5): -1, (1, 1, 0, 6): 1, (3, 0, 0, 5): 0}, into)
    assert sent
    batch = [((2, 0, 0, 5), -1), ((1, 1, 0, 6), 1)]  # zero diffs are dropped
    assert boxes == [[(1, 0, batch)], [], [(1, 0, batch)]]  # not through its own mailbox
    assert into == {(2, 0, 0, 5): 0, (1, 1, 0, 6): 1}
    assert flushed == [1]  # after the pushes, so the batch leaves before it is applied here
    assert events == [(True, 1, 0, batch), (False, 1, 0, batch)]


def test_an_empty_batch_is_not_sent() -> None:
    progcaster, boxes, events = _progcaster(0, 2, flush=lambda: None)
    into: dict[Any, int] = {}
    assert not progcaster.send({(1, 1, 0, 0): 0}, into)
    assert boxes == [[], []] and into == {} and events == []


def test_received_batches_are_added_in_order() -> None:
    progcaster, _, _ = _progcaster(0, 2)
    progcaster._mailbox.extend([(1, 0, [((1, 1, 0, 0), -1)]), (1, 1, [((1, 1, 0, 1), 1)])])
    into = {(1, 1, 0, 0): 1}
    progcaster.recv(into)
    assert into == {(1, 1, 0, 0): 0, (1, 1, 0, 1): 1}
    assert not progcaster._mailbox


def test_by_port_the_batches_go_into_a_trackers_buffers() -> None:
    """``send_by_port`` and ``recv_by_port``: the same updates, kept per (node, port) and time."""
    progcaster, boxes, events = _progcaster(0, 2, flush=lambda: None)
    targets: dict[tuple[int, int], dict[Any, int]] = {(2, 0): {5: 1}}
    sources: dict[tuple[int, int], dict[Any, int]] = {}
    assert progcaster.send_by_port(
        {(2, 0, 0, 5): -1, (1, 1, 0, 6): 1, (1, 1, 0, 5): 0}, targets, sources
    )
    batch = [((2, 0, 0, 5), -1), ((1, 1, 0, 6), 1)]
    assert boxes == [[], [(0, 0, batch)]]
    assert targets == {(2, 0): {5: 0}} and sources == {(1, 0): {6: 1}}
    assert not progcaster.send_by_port({(1, 1, 0, 7): 0}, targets, sources)  # nothing to send
    progcaster._mailbox.extend(
        [(1, 0, [((1, 1, 0, 6), -1), ((1, 1, 0, 7), 1)]), (1, 1, [((3, 0, 1, 7), 2)])]
    )
    progcaster.recv_by_port(targets, sources)
    assert targets == {(2, 0): {5: 0}, (3, 1): {7: 2}}
    assert sources == {(1, 0): {6: 0, 7: 1}}
    assert not progcaster._mailbox
    assert [event[:3] for event in events] == [
        (True, 0, 0),
        (False, 0, 0),
        (False, 1, 0),
        (False, 1, 1),
    ]
