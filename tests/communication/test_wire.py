"""The cluster's wire format: one frame a message, compact progress, peers of another protocol.

The unit half checks the progress payload (:func:`pack_progress` and
:func:`unpack_progress`) against its contract: exactly what was packed
comes back, and anything it cannot carry exactly is refused, to travel
through the codec.  The other half builds the two networks of a
two-process cluster in this process, on real CURVE sockets on 127.0.0.1,
and checks what crosses them: every payload kind in one message, a large
message (sent without a copy), FIFO order, and that a peer speaking
another wire protocol stops the computation with an error that says so.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st

from timelypy import Config, Product
from timelypy.communication.cluster import ClusterAllocator
from timelypy.communication.config import MAX_PARK_SPIN
from timelypy.communication.network import ClusterNetwork
from timelypy.communication.secret import curve_keys, run_tag
from timelypy.communication.wire import (
    DATA,
    DATA_HEADER,
    ENTRY,
    HELLO,
    HELLO_MESSAGE,
    KIND_PROGRESS,
    WIRE_VERSION,
    ZERO_COPY_BYTES,
    pack_progress,
    progress_packer,
    unpack_progress,
)
from timelypy.errors import ClusterError
from timelypy.launch import free_ports

SECRET = b"wire-test-secret"
#: Seconds a network may take to deliver what was sent on 127.0.0.1.
PROMPT = 10.0

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)
UPDATE = st.tuples(st.tuples(INT64, st.integers(0, 1), INT64, INT64), INT64)


# -- the progress payload --------------------------------------------------------------


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**63 - 1), st.lists(UPDATE, max_size=20))
def test_a_progress_batch_of_int_times_comes_back_exactly(source, sequence, batch):
    message = (source, sequence, batch)
    payload = pack_progress(progress_packer(), message)
    assert payload is not None
    back = unpack_progress(payload)
    assert back == message
    assert all(type(x) is int for _, _, updates in [back] for k, d in updates for x in (*k, d))


@pytest.mark.parametrize(
    "time",
    [Product(3, 1), (3, 1), True, 2**70, -(2**64), 1.5, "3"],
    ids=["product", "tuple", "bool", "big", "small", "float", "str"],
)
def test_a_progress_batch_of_other_times_is_refused(time):
    # Refused, it travels through the codec, which carries these exactly.
    packer = progress_packer()
    assert pack_progress(packer, (0, 1, [((1, 0, 0, 5), 1), ((1, 1, 0, time), -1)])) is None
    # The packer is left usable: its buffer is reset after a refusal.
    assert unpack_progress(pack_progress(packer, (0, 2, [((1, 0, 0, 5), 1)]))) == (
        0,
        2,
        [((1, 0, 0, 5), 1)],
    )


@pytest.mark.parametrize(
    "message",
    [(0, 1, [((1, 0, 0), 1)]), (0, 1, [((1, 0, 0, 5, 6), 1)]), (0, 1, [(1, 2, 3)]), (0, 1, [7])],
    ids=["short key", "long key", "not a pair", "not a tuple"],
)
def test_a_message_not_shaped_like_progress_is_refused(message):
    assert pack_progress(progress_packer(), message) is None


def test_a_truncated_progress_payload_raises():
    with pytest.raises(ValueError):
        unpack_progress(msgpack.packb([0, 1, 2, 0, 0, 5]))


# -- two networks in one process ---------------------------------------------------------


@contextlib.contextmanager
def cluster_networks(**options: Any) -> Iterator[list[ClusterNetwork]]:
    """Process 0 and process 1 of a 2 x 1 cluster, handshaken, on real sockets."""
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    nets = [
        ClusterNetwork(
            Config.cluster(1, 2, index, addresses, **options), SECRET, connect_timeout=PROMPT
        )
        for index in range(2)
    ]
    try:
        shakers = [threading.Thread(target=net.handshake) for net in nets]
        for thread in shakers:
            thread.start()
        for thread in shakers:
            thread.join(PROMPT + 5)
        assert all(net.joined == {1 - net.process} for net in nets)
        yield nets
    finally:
        for net in nets:
            net.close()


@pytest.fixture
def networks() -> Iterator[list[ClusterNetwork]]:
    """Two processes' networks with the default configuration."""
    with cluster_networks() as nets:
        yield nets


@pytest.fixture
def spinning() -> Iterator[list[ClusterNetwork]]:
    """Two processes' networks whose parking workers spin as long as allowed."""
    with cluster_networks(park_spin=MAX_PARK_SPIN) as nets:
        yield nets


def receive(net: ClusterNetwork, channel: int, worker: int, count: int) -> list[Any]:
    """Pump ``net`` until ``worker``'s mailbox on ``channel`` holds ``count`` messages."""
    box = net.shared.mailbox(channel, worker)
    deadline = time.monotonic() + PROMPT
    while len(box) < count:
        assert time.monotonic() < deadline, f"only {len(box)} of {count} messages arrived"
        net.pump(0.05)
        net.check()
    return [box.popleft() for _ in range(count)]


def test_every_payload_kind_crosses_in_one_message(networks):
    sender = ClusterAllocator(networks[0], 0)
    pushers, _ = sender.allocate(5)
    push = pushers[1]
    batch = (3, [("word", 1), ("other", 2), ("third", 3), ("fourth", 4)])
    progress = (0, 0, [((2, 0, 0, 3), 1), ((1, 1, 0, 3), -1)])
    product_progress = (0, 1, [((2, 0, 0, Product(3, 1)), 1)])
    other = {"not": ("a batch",)}
    for message in (batch, progress, product_progress, other):
        push(message)
    sender.release()  # one message: four entries, each of its own kind
    got = receive(networks[1], 5, 1, 4)
    assert got == [batch, progress, product_progress, other]
    assert type(got[2][2][0][0][3]) is Product  # the codec carried the product time exactly


def test_a_large_message_crosses_without_a_copy_and_in_order(networks):
    sender = ClusterAllocator(networks[0], 0)
    (_, push), _ = sender.allocate(9)
    big = (1, [bytes(range(256)) * 8 for _ in range(2 * ZERO_COPY_BYTES // 2048)])
    for time_ in range(3):
        push((time_, [time_]))
        sender.release()  # one message each: FIFO across messages
    push(big)
    push((4, ["after"]))
    sender.release()
    got = receive(networks[1], 9, 1, 5)
    assert got == [(0, [0]), (1, [1]), (2, [2]), big, (4, ["after"])]


def _impostor(net: ClusterNetwork, context: zmq.Context[Any]) -> zmq.Socket[Any]:
    """A DEALER holding the cluster's keys, naming itself a connection of process 0."""
    tag = run_tag(SECRET, "")
    public, private = curve_keys(SECRET, tag)
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_serverkey = public
    sock.curve_publickey = public
    sock.curve_secretkey = private
    # A role of its own: the ROUTER refuses a second connection with a routing id in use.
    sock.setsockopt(zmq.ROUTING_ID, tag + b":0:x")
    sock.connect(f"tcp://{net.endpoint}")
    return sock


def _failure_after(net: ClusterNetwork, send: Any) -> BaseException:
    context = zmq.Context()
    try:
        sock = _impostor(net, context)
        send(sock)
        deadline = time.monotonic() + PROMPT
        while net.shared.failure is None:
            assert time.monotonic() < deadline, "the network did not notice"
            net.pump(0.05)
        return net.shared.failure
    finally:
        context.destroy(linger=0)


@pytest.mark.parametrize(
    "frames",
    [[HELLO_MESSAGE.pack(HELLO, 0, 0, WIRE_VERSION), b""], [b"\x04\x01\x00\x00\x00", b"x", b"y"]],
    ids=["hello of two frames", "data of three frames"],
)
def test_a_peer_sending_several_frames_stops_the_computation(networks, frames):
    failure = _failure_after(networks[1], lambda sock: sock.send_multipart(frames))
    assert isinstance(failure, ClusterError)
    text = str(failure)
    assert "process 1 received a message it cannot read from process 0" in text
    assert f"a message of {len(frames) + 1} frames" in text
    assert f"same timelypy version (wire protocol {WIRE_VERSION} here)" in text
    assert 0 in networks[1].departed


def test_a_peer_of_another_wire_version_stops_the_computation(networks):
    hello = HELLO_MESSAGE.pack(HELLO, 0, 0, WIRE_VERSION + 1)
    failure = _failure_after(networks[1], lambda sock: sock.send(hello))
    assert isinstance(failure, ClusterError)
    assert f"a HELLO of wire protocol {WIRE_VERSION + 1}" in str(failure)


def _data(*entries: tuple[int, bytes], tail: bytes = b"") -> bytes:
    """A DATA message to worker 1 with one progress entry per (announced length, payload)."""
    head = DATA_HEADER.pack(DATA, len(entries))
    heads = b"".join(ENTRY.pack(7, 0, 1, KIND_PROGRESS, length) for length, _ in entries)
    return head + heads + b"".join(payload for _, payload in entries) + tail


EMPTY_PROGRESS = msgpack.packb([0, 0])  # worker 0's batch 0, no updates: 3 bytes


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (_data((3, EMPTY_PROGRESS), tail=b"xy"), "whose entries say otherwise"),
        (_data((9, EMPTY_PROGRESS)), "whose entries say otherwise"),
        (_data((3, EMPTY_PROGRESS))[:-10], "too short for its header"),
        (bytes([DATA, 1]), "too short for its header"),
    ],
    ids=["bytes left over", "a payload past the end", "entries cut short", "header cut short"],
)
def test_a_data_message_of_the_wrong_length_stops_the_computation(networks, message, says):
    failure = _failure_after(networks[1], lambda sock: sock.send(message))
    assert isinstance(failure, ClusterError)
    assert f"a DATA message of {len(message)} bytes, {says}" in str(failure)


# -- parking: a short spin, then a block ------------------------------------------------------


def _send_later(net: ClusterNetwork, channel: int, delay: float) -> threading.Thread:
    def send() -> None:
        time.sleep(delay)
        sender = ClusterAllocator(net, 0)
        (_, push), _ = sender.allocate(channel)
        push((0, ["wake up"]))
        sender.release()

    thread = threading.Thread(target=send)
    thread.start()
    return thread


@pytest.mark.parametrize("delay", [0.01, MAX_PARK_SPIN * 3], ids=["within the spin", "after it"])
def test_a_parked_worker_wakes_for_a_message_during_or_after_its_spin(spinning, delay):
    networks = spinning
    parked = ClusterAllocator(networks[1], 0)
    parked.allocate(11)
    sender = _send_later(networks[0], 11, delay)
    started = time.monotonic()
    parked.await_events(PROMPT)
    waited = time.monotonic() - started
    sender.join(PROMPT)
    assert parked.take_events() == [11]
    assert list(networks[1].shared.mailbox(11, 1)) == [(0, ["wake up"])]
    assert waited < PROMPT / 2  # woken by the message, not by the timeout


def test_a_park_shorter_than_the_spin_returns_with_nothing(spinning):
    parked = ClusterAllocator(spinning[1], 0)
    started = time.monotonic()
    parked.await_events(0.02)
    assert time.monotonic() - started < PROMPT / 2  # bounded: the spin ends at the timeout
    assert parked.take_events() == []


def test_a_failure_wakes_a_spinning_worker(spinning):
    parked = ClusterAllocator(spinning[1], 0)
    error = ClusterError("a peer was lost")
    threading.Timer(0.01, spinning[1].shared.abort, (error, None)).start()
    started = time.monotonic()
    parked.await_events(PROMPT)
    assert time.monotonic() - started < PROMPT / 2
    assert spinning[1].shared.failure is error
