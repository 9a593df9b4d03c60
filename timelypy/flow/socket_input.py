"""An unbounded input: the lines sent to TCP servers, one partition per server.

:class:`SocketInput` is a :class:`~timelypy.flow.inputs.PartitionedInputConfig`
whose partitions are ``"host:port"`` addresses.  Each partition's reader (on
its primary worker: a thread, a process or a Spark task alike) connects to
its server and emits the newline-separated text the server sends, a whole
received chunk at a time (:class:`~timelypy.flow.inputs.EmitBatch`), as
Spark's ``socketTextStream`` reads a line server.  Epochs close by the
clock: epoch ``e`` is the ``e``-th ``epoch_length`` seconds since the reader
started (from the resume epoch, after a resume).  A partition ends,
cleanly, when its server closes the connection; a last line without a
newline is emitted then.

The reader never keeps its worker more than ``poll`` seconds: while it
connects, while a server is quiet, and after every receive it returns to
its worker (an ``AdvanceTo`` of the current epoch), so the dataflow keeps
running, closing epochs and noticing failures.  Text is decoded
incrementally, so a character split between two packets arrives whole, and
a line received in many pieces is joined once, at its end.

A socket cannot be read twice: there is no snapshot.  With recovery, a
resumed execution connects again and reads what the server sends from then
on (at most once); lines sent while no reader was connected are the
server's to keep or lose.
"""

from __future__ import annotations

import codecs
import datetime
import errno
import os
import select
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from timelypy.errors import FlowError
from timelypy.flow.inputs import (
    AdvanceTo,
    EmitBatch,
    EpochClock,
    InputItem,
    PartitionedInputConfig,
    clock_settings,
)

__all__ = ["SocketInput"]

#: Bytes asked of the socket per read.
RECV_BYTES = 1 << 16


def _address(value: object) -> tuple[str, int]:
    """An address as ``(host, port)``; a :class:`FlowError` if it is not one.

    ``"host:port"`` (``"[::1]:9999"`` for IPv6), or a ``(host, port)`` tuple
    or list, as ``socket.getsockname()`` returns it (an IPv6 one has two
    more fields, which are ignored); the port an int or a string of digits.
    """
    host: object
    port: object
    if isinstance(value, str):
        host, sep, port = value.rpartition(":")
        if not sep:
            raise FlowError(f"SocketInput: an address is 'host:port', got {value!r}")
    elif isinstance(value, (tuple, list)) and len(value) in (2, 4):
        host, port = value[0], value[1]
    else:
        raise FlowError(f"SocketInput: an address is 'host:port' or (host, port), got {value!r}")
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if not isinstance(host, str) or not host.strip("[]"):
        raise FlowError(f"SocketInput: the address {value!r} has no host")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise FlowError(f"SocketInput: the address {value!r} has no port in 1..65535")
    return host.strip("[]"), port


def _name(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class SocketInput(PartitionedInputConfig):
    r"""The lines sent to the TCP servers at ``addresses``, a partition each, epochs by the clock.

    ``addresses`` are ``"host:port"`` strings (``"[::1]:9999"`` for IPv6) or
    ``(host, port)`` tuples or lists, as ``socket.getsockname()`` gives them;
    every worker must be able to reach every one.  ``connect_timeout``
    seconds after it starts, a reader that still cannot connect fails the
    flow with a :class:`~timelypy.errors.FlowError` naming the address.
    ``poll`` is the longest a reader keeps its worker waiting for its server.

    >>> import socket, threading
    >>> from timelypy.flow import Dataflow, run
    >>> server = socket.create_server(("127.0.0.1", 0))
    >>> def serve():
    ...     connection, _ = server.accept()
    ...     connection.sendall(b"to be\nor not")
    ...     connection.close()
    >>> threading.Thread(target=serve).start()
    >>> flow = Dataflow()
    >>> flow.input("lines", SocketInput([server.getsockname()], epoch_length=60))
    >>> flow.capture()
    >>> sorted(run(flow))
    [(0, 'or not'), (0, 'to be')]
    >>> server.close()
    """

    def __init__(
        self,
        addresses: Sequence[str | tuple[str, int]],
        *,
        epoch_length: float | datetime.timedelta = 1.0,
        poll: float = 0.01,
        encoding: str = "utf-8",
        connect_timeout: float = 10.0,
    ) -> None:
        if isinstance(addresses, (str, bytes)) or not isinstance(addresses, Sequence):
            raise FlowError(
                f"SocketInput needs a list of addresses ('host:port'), got {addresses!r}"
            )
        if not addresses:
            raise FlowError("SocketInput needs at least one address")
        parsed = [_address(value) for value in addresses]
        names = [_name(host, port) for host, port in parsed]
        if len(set(names)) != len(names):
            raise FlowError(f"SocketInput: an address is listed twice in {names}")
        self.epoch_length, self.poll = clock_settings("SocketInput", epoch_length, poll)
        if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
            raise FlowError(f"SocketInput needs connect_timeout > 0, got {connect_timeout!r}")
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise FlowError(f"SocketInput: unknown encoding {encoding!r}") from None
        self.addresses = names
        self.encoding = encoding
        self.connect_timeout = float(connect_timeout)

    def list_parts(self, worker_index: int, worker_count: int) -> Iterable[str]:
        """Every address, from every worker (each must reach them all)."""
        return list(self.addresses)

    def all_parts(self) -> Iterable[str]:
        """Every address must be read."""
        return list(self.addresses)

    def build_part(
        self, part: str, resume_epoch: int, resume_state: Any = None
    ) -> Iterable[InputItem]:
        """The reader of the server at ``part`` (no snapshot: a socket is read once)."""
        return _read_socket(self, part, resume_epoch)

    def __repr__(self) -> str:
        return f"SocketInput({self.addresses!r}, epoch_length={self.epoch_length:g})"


def _read_socket(config: SocketInput, address: str, resume_epoch: int) -> Iterator[InputItem]:
    """The reader of one server: connect, then its lines, epochs by the clock from its start.

    Every wait is at most ``poll`` seconds, after which the reader returns
    to its worker (an ``AdvanceTo`` of the current epoch): while connecting,
    while the server is quiet, and after every receive, lines or not.  So
    the worker keeps stepping (and can be cancelled) whatever the server
    does.
    """
    clock = EpochClock(config.epoch_length, resume_epoch)
    yield AdvanceTo(clock.epoch)
    connection = None
    attempt: socket.socket | None = None
    try:
        deadline = time.monotonic() + config.connect_timeout
        host, port = _address(address)
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise FlowError(f"SocketInput: cannot resolve {address} ({exc})") from exc
        family, kind, proto, _, where = found[0]
        while connection is None:
            # One connect in progress at a time, waited for `poll` s per visit: giving
            # up on a slow one and dialling again would leave the first queued at the
            # server, which may only ever accept that one.
            failure: OSError | None = None
            if attempt is None:
                attempt = socket.socket(family, kind, proto)
                attempt.setblocking(False)
                code = attempt.connect_ex(where)
                if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                    failure = OSError(code, os.strerror(code))
            if failure is None:
                _, writable, _ = select.select([], [attempt], [], config.poll)
                if writable:
                    code = attempt.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code == 0:
                        connection, attempt = attempt, None
                        break
                    failure = OSError(code, os.strerror(code))
            if time.monotonic() >= deadline:  # (the attempt is closed below, finally)
                raise FlowError(
                    f"SocketInput: cannot connect to {address} within "
                    f"{config.connect_timeout:g} s ({failure or 'no answer'}); is its server "
                    "listening?"
                ) from failure
            if failure is not None:
                attempt.close()
                attempt = None
                time.sleep(config.poll)  # refused at once: do not spin
            clock.advanced()
            yield AdvanceTo(clock.epoch)
        connection.settimeout(config.poll)
        decoder = codecs.getincrementaldecoder(config.encoding)()
        pending: list[str] = []  # the line being received, in pieces (joined once, at its end)
        while True:
            if clock.advanced():
                yield AdvanceTo(clock.epoch)
            try:
                data = connection.recv(RECV_BYTES)
            except TimeoutError:
                yield AdvanceTo(clock.epoch)  # nothing yet: back to the worker for a while
                continue
            except OSError as exc:
                raise FlowError(f"SocketInput: reading from {address} failed: {exc}") from exc
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                what = (
                    "ended inside a character"
                    if not data
                    else (f"sent text that is not {config.encoding}")
                )
                raise FlowError(f"SocketInput: {address} {what} ({exc})") from exc
            if not data:  # the server closed the connection: the partition ends
                last = "".join(pending) + text
                if last:
                    yield EmitBatch([last.removesuffix("\r")])
                return
            if "\n" not in text:
                pending.append(text)
                yield AdvanceTo(clock.epoch)  # part of a line: back to the worker meanwhile
                continue
            lines = text.split("\n")
            if pending:
                lines[0] = "".join(pending) + lines[0]
            tail = lines.pop()
            pending = [tail] if tail else []
            yield EmitBatch([line.removesuffix("\r") for line in lines])
    finally:
        if attempt is not None:
            attempt.close()
        if connection is not None:
            connection.close()
