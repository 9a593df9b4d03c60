"""SocketInput: lines from real TCP servers on 127.0.0.1, epochs by the clock."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from operator import add

import pytest

from timelypy.errors import FlowError
from timelypy.flow import Dataflow, SocketInput, run, run_cluster


class LineServer:
    """A TCP server on 127.0.0.1 that sends ``chunks`` (bytes) to its first client, then closes.

    ``pause`` seconds between chunks; the chunks are sent as they are, so a
    test can split a line, or a character, between two of them.
    """

    def __init__(self, chunks: list[bytes], pause: float = 0.0) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(30)
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.chunks = chunks
        self.pause = pause
        self.sent_all_at: float | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.server.accept()
        with connection:
            for chunk in self.chunks:
                connection.sendall(chunk)
                time.sleep(self.pause)
            self.sent_all_at = time.monotonic()

    def close(self) -> None:
        self.thread.join(30)
        self.server.close()


def lines_flow(addresses: list[str], **options) -> Dataflow:
    flow = Dataflow()
    flow.input("lines", SocketInput(addresses, **options))
    flow.capture()
    return flow


def test_lines_across_packets_arrive_whole_and_the_last_one_without_a_newline():
    server = LineServer([b"to be\nor n", b"ot to\r\nbe", b"\n", b"that is"])
    try:
        out = run(lines_flow([server.address], epoch_length=60))
        assert sorted(item for _, item in out) == ["be", "or not to", "that is", "to be"]
    finally:
        server.close()


def test_a_character_split_between_packets_is_decoded_whole():
    text = "café über\nnaïve\n".encode()
    cut = text.index("é".encode()) + 1  # in the middle of é's two bytes
    server = LineServer([text[:cut], text[cut:]], pause=0.05)
    try:
        out = run(lines_flow([server.address], epoch_length=60))
        assert sorted(item for _, item in out) == ["café über", "naïve"]
    finally:
        server.close()


def test_two_servers_on_two_workers_epochs_close_while_they_send():
    # each server sends ten lines over ~1 s; with 0.2 s epochs the counts come in several
    # epochs, every line is counted once, and both partitions end when their servers close
    lines = [f"w{n} common\n".encode() for n in range(10)]
    servers = [LineServer(lines, pause=0.1), LineServer(lines, pause=0.1)]
    flow = Dataflow()
    flow.input("lines", SocketInput([s.address for s in servers], epoch_length=0.2))
    flow.flat_map(str.split)
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.capture()
    try:
        out = run_cluster(flow, None, 1, 2)
    finally:
        for server in servers:
            server.close()
    totals: Counter[str] = Counter()
    for _, (word, n) in out:
        totals[word] += n
    assert totals == Counter({**{f"w{n}": 2 for n in range(10)}, "common": 20})
    assert len({epoch for epoch, _ in out}) >= 3


def test_two_processes_read_their_servers():
    servers = [LineServer([b"a b\n", b"c\n"]), LineServer([b"d\n"])]
    flow = Dataflow()
    flow.input("lines", SocketInput([s.address for s in servers], epoch_length=60))
    flow.flat_map(str.split)
    flow.capture()
    try:
        out = run_cluster(flow, None, 2, 1)
    finally:
        for server in servers:
            server.close()
    assert sorted(item for _, item in out) == ["a", "b", "c", "d"]


def test_an_unreachable_server_fails_within_the_connect_timeout():
    probe = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{probe.getsockname()[1]}"
    probe.close()  # nothing listens there now
    started = time.monotonic()
    with pytest.raises(FlowError, match=f"cannot connect to {address} within 0.5 s"):
        list(run(lines_flow([address], connect_timeout=0.5)))
    assert time.monotonic() - started < 10


def test_text_that_is_not_the_encoding_is_an_error_naming_the_server():
    server = LineServer([b"ok\n\xff\xfe\n"])
    try:
        with pytest.raises(FlowError, match=f"{server.address} sent text that is not utf-8"):
            list(run(lines_flow([server.address], epoch_length=60)))
    finally:
        server.close()


@pytest.mark.parametrize(
    "addresses, options, message",
    [
        ("127.0.0.1:9", {}, "needs a list of addresses"),
        ([], {}, "at least one address"),
        (["localhost"], {}, "an address is 'host:port'"),
        (["localhost:http"], {}, "an address is 'host:port'"),
        ([("localhost", 0)], {}, "no port in 1..65535"),
        ([("", 80)], {}, "has no host"),
        (["a:1", ("a", 1)], {}, "listed twice"),
        (["a:1"], {"epoch_length": 0}, "epoch_length > 0"),
        (["a:1"], {"poll": -1}, "poll > 0"),
        (["a:1"], {"connect_timeout": 0}, "connect_timeout > 0"),
        (["a:1"], {"encoding": "no-such-codec"}, "unknown encoding"),
    ],
)
def test_bad_arguments_are_refused_when_the_input_is_made(addresses, options, message):
    with pytest.raises(FlowError, match=message):
        SocketInput(addresses, **options)
