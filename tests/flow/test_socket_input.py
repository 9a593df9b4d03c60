"""SocketInput: lines from real TCP servers on 127.0.0.1, epochs by the clock."""

from __future__ import annotations

import socket
import struct
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
        (["localhost:http"], {}, "has no port in 1..65535"),
        ([("localhost", 1, 2)], {}, "an address is 'host:port' or \\(host, port\\)"),
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


# -- what an audit as a new user found, each fixed ------------------------------------------


def test_a_line_trickling_in_without_a_newline_does_not_hold_up_the_worker():
    # Server A sends one byte every 10 ms for 1.5 s before its newline, more often than
    # the reader's 0.2 s poll, so its reads never time out; server B's line, read by
    # the same (only) worker after A's (readers go in address order), must not wait
    # for A's line to end.
    sockets = sorted(
        (socket.create_server(("127.0.0.1", 0)) for _ in range(2)),
        key=lambda server: f"127.0.0.1:{server.getsockname()[1]}",
    )
    trickle_done = threading.Event()

    def serve(server, chunks, done=None):
        server.settimeout(30)
        connection, _ = server.accept()
        with connection:
            for chunk in chunks:
                connection.sendall(chunk)
                time.sleep(0.01)
        if done is not None:
            done.set()

    threads = [
        threading.Thread(target=serve, args=(sockets[0], [b"x"] * 150 + [b"\n"], trickle_done)),
        threading.Thread(target=serve, args=(sockets[1], [b"quick\n"])),
    ]
    for thread in threads:
        thread.start()
    addresses = [f"127.0.0.1:{server.getsockname()[1]}" for server in sockets]
    try:
        outputs = run(lines_flow(addresses, epoch_length=60, poll=0.2))
        assert next(outputs) == (0, "quick")
        assert not trickle_done.is_set(), "B's line waited for the end of A's"
        assert [item for _, item in outputs] == ["x" * 150]
    finally:
        for thread in threads:
            thread.join(30)
        for server in sockets:
            server.close()


def test_a_16_mib_line_arrives_whole():
    line = b"ab" * (8 << 20)
    server = LineServer([line[i : i + 65536] for i in range(0, len(line), 65536)] + [b"\nz"])
    try:
        out = sorted(item for _, item in run(lines_flow([server.address], epoch_length=60)))
        assert out == [line.decode(), "z"]
    finally:
        server.close()


def test_a_failing_flow_closes_its_connections_at_once():
    # The servers never close; a step raises; each server sees its client leave
    # without waiting for the garbage collector.
    import gc

    closed = [threading.Event(), threading.Event()]
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in closed]

    def serve(server, seen_close, line):
        server.settimeout(30)
        connection, _ = server.accept()
        with connection:
            connection.sendall(line)
            connection.settimeout(30)
            while connection.recv(1024):
                pass
            seen_close.set()

    threads = [
        threading.Thread(target=serve, args=(server, event, line), daemon=True)
        for server, event, line in zip(servers, closed, [b"boom\n", b"fine\n"], strict=True)
    ]
    for thread in threads:
        thread.start()
    flow = Dataflow()
    addresses = [f"127.0.0.1:{server.getsockname()[1]}" for server in servers]
    flow.input("lines", SocketInput(addresses, epoch_length=60))
    flow.map(lambda line: 1 / 0 if line == "boom" else line)
    flow.capture()
    gc.disable()
    try:
        with pytest.raises(ZeroDivisionError):
            run_cluster(flow, None, 1, 2)
        for event in closed:
            assert event.wait(10), "a connection stayed open after the flow failed"
    finally:
        gc.enable()
        for server in servers:
            server.close()


def test_a_server_that_listens_late_does_not_hold_up_the_others():
    late = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{late.getsockname()[1]}"
    late.close()  # nothing listens there for a second
    early = LineServer([b"early\n"])
    listening = threading.Event()

    def listen_late():
        time.sleep(1.0)
        server = socket.create_server(("127.0.0.1", int(address.rsplit(":", 1)[1])))
        listening.set()
        connection, _ = server.accept()
        with connection:
            connection.sendall(b"late\n")
        server.close()

    thread = threading.Thread(target=listen_late, daemon=True)
    thread.start()
    try:
        outputs = run(lines_flow([address, early.address], epoch_length=60, connect_timeout=20))
        assert next(outputs) == (0, "early")
        assert not listening.is_set(), "the early server's line waited for the late one"
        assert [item for _, item in outputs] == ["late"]
    finally:
        thread.join(30)
        early.close()


def test_errors_name_the_input_step_and_worker():
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    done = threading.Event()

    def reset():
        # Every connection, not just the first: on a busy machine the reader's
        # first connect can time out (after `poll`) once the kernel has already
        # queued it, and the reader then connects again.
        while not done.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.sendall(b"partial")
            linger = struct.pack("ii", 1, 0)  # on, 0 s: close() resets the connection
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            connection.close()

    thread = threading.Thread(target=reset, daemon=True)
    thread.start()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        with pytest.raises(FlowError, match=f"reading from {address} failed") as info:
            list(run(lines_flow([address], epoch_length=60)))
        assert "input step 'lines' (partition" in "\n".join(info.value.__notes__)
    finally:
        done.set()
        thread.join(30)
        server.close()


def test_addresses_as_getsockname_gives_them():
    server = LineServer([b"v4\n"])
    host, port = server.address.rsplit(":", 1)
    try:
        spellings = [[host, port], (host, int(port))]
        for spelling in spellings:
            assert SocketInput([spelling]).addresses == [server.address]
        assert SocketInput([("::1", 9, 0, 0)]).addresses == ["[::1]:9"]
        assert [item for _, item in run(lines_flow([[host, port]], epoch_length=60))] == ["v4"]
    finally:
        server.close()


def test_a_host_that_does_not_resolve_is_named_at_once():
    started = time.monotonic()
    with pytest.raises(FlowError, match=r"cannot resolve no-such-host\.invalid:80"):
        list(run(lines_flow(["no-such-host.invalid:80"], epoch_length=60, connect_timeout=30)))
    assert time.monotonic() - started < 20  # not after the connect timeout
