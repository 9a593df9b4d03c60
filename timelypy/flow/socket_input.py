"""An unbounded input: the lines sent to TCP servers, one partition per server.

:class:`SocketInput` is a :class:`~timelypy.flow.inputs.PartitionedInputConfig`
whose partitions are ``"host:port"`` addresses.  Each partition's reader (on
its primary worker: a thread, a process or a Spark task alike) connects to
its server and emits the newline-separated text the server sends, a whole
received chunk at a time (:class:`~timelypy.flow.inputs.EmitBatch`), as
Spark's ``socketTextStream`` reads a line server.  Epochs close by the
clock: epoch ``e`` is the ``e``-th ``epoch_length`` seconds since the reader
connected (from the resume epoch, after a resume).  A partition ends,
cleanly, when its server closes the connection; a last line without a
newline is emitted then.

The reader waits for data ``poll`` seconds at a time and returns to its
worker in between (an ``AdvanceTo`` of the current epoch), so the dataflow
keeps running and closing epochs while a server is quiet.  Text is decoded
incrementally, so a character split between two packets arrives whole.

A socket cannot be read twice: there is no snapshot.  With recovery, a
resumed execution connects again and reads what the server sends from then
on (at most once); lines sent while no reader was connected are the
server's to keep or lose.
"""

from __future__ import annotations

import codecs
import datetime
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from timelypy.errors import FlowError
from timelypy.flow.inputs import (
    AdvanceTo,
    EmitBatch,
    InputItem,
    PartitionedInputConfig,
    clock_epoch,
    clock_settings,
)

__all__ = ["SocketInput"]

#: Bytes asked of the socket per read.
RECV_BYTES = 1 << 16


def _address(value: object) -> tuple[str, int]:
    """``"host:port"`` or ``(host, port)`` as ``(host, port)``; a :class:`FlowError` if neither."""
    host: object
    port: object
    if isinstance(value, str):
        host, sep, port_text = value.rpartition(":")
        if not sep or not port_text.isdigit():
            raise FlowError(f"SocketInput: an address is 'host:port', got {value!r}")
        port = int(port_text)
    elif isinstance(value, tuple) and len(value) == 2:
        host, port = value
    else:
        raise FlowError(f"SocketInput: an address is 'host:port' or (host, port), got {value!r}")
    if not isinstance(host, str) or not host.strip("[]"):
        raise FlowError(f"SocketInput: the address {value!r} has no host")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise FlowError(f"SocketInput: the address {value!r} has no port in 1..65535")
    return host.strip("[]"), port


class SocketInput(PartitionedInputConfig):
    r"""The lines sent to the TCP servers at ``addresses``, a partition each, epochs by the clock.

    ``addresses`` are ``"host:port"`` strings or ``(host, port)`` pairs; every
    worker must be able to reach every one.  ``connect_timeout`` seconds
    after it starts, a reader that still cannot connect fails the flow with
    a :class:`~timelypy.errors.FlowError` naming the address.

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
        poll: float = 0.05,
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
        names = [f"{host}:{port}" for host, port in parsed]
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


def _connect(config: SocketInput, address: str) -> socket.socket:
    """A connection to ``address``, retried until ``config.connect_timeout`` has passed."""
    host, port = _address(address)
    deadline = time.monotonic() + config.connect_timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return socket.create_connection((host, port), timeout=max(min(left, 1.0), 0.01))
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise FlowError(
                    f"SocketInput: cannot connect to {address} within "
                    f"{config.connect_timeout:g} s ({exc}); is its server listening?"
                ) from exc
            time.sleep(min(config.poll, max(deadline - time.monotonic(), 0)))


def _read_socket(config: SocketInput, address: str, resume_epoch: int) -> Iterator[InputItem]:
    connection = _connect(config, address)
    clock = clock_epoch(config.epoch_length, resume_epoch)
    epoch = resume_epoch
    decoder = codecs.getincrementaldecoder(config.encoding)()
    tail = ""
    try:
        connection.settimeout(config.poll)
        yield AdvanceTo(epoch)
        while True:
            now_epoch = clock()
            if now_epoch > epoch:
                epoch = now_epoch
                yield AdvanceTo(epoch)
            try:
                data = connection.recv(RECV_BYTES)
            except TimeoutError:
                yield AdvanceTo(epoch)  # nothing yet: back to the worker for a while
                continue
            except OSError as exc:
                raise FlowError(f"SocketInput: reading from {address} failed: {exc}") from exc
            if not data:  # the server closed the connection: the partition ends
                try:
                    tail += decoder.decode(b"", final=True)
                except UnicodeDecodeError as exc:
                    raise FlowError(
                        f"SocketInput: {address} ended inside a character ({exc})"
                    ) from exc
                if tail:
                    yield EmitBatch([tail.removesuffix("\r")])
                return
            try:
                text = tail + decoder.decode(data)
            except UnicodeDecodeError as exc:
                raise FlowError(
                    f"SocketInput: {address} sent text that is not {config.encoding} ({exc})"
                ) from exc
            lines = text.split("\n")
            tail = lines.pop()
            if lines:
                yield EmitBatch([line.removesuffix("\r") for line in lines])
    finally:
        connection.close()
