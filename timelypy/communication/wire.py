"""The cluster's wire protocol: messages, addresses, and the time bounds.

Every message between processes is **one** ZeroMQ frame from a ``DEALER``
to a ``ROUTER``; the ``ROUTER`` prepends the sender's routing id
(``TAG:PROCESS:ROLE``, where ``TAG`` is the run tag of
:mod:`timelypy.communication.secret`), so that frame 0 tells which run a
message belongs to, and frame 1, the message, is the last.  One frame a
message keeps the Python cost of a send or a receive to one call: a
multipart message costs pyzmq a Python call and an option query per frame.
The message's first byte is its kind:

``HELLO``: :data:`HELLO_MESSAGE` ``<BIIH`` (kind, process, connection, wire
    version), then :data:`HELLO_SHAPE` ``<II`` (processes, workers per process)
    sent once on every connection at start-up, connection 0 being the
    control connection and ``t + 1`` worker thread ``t``'s; when a process
    has heard it on every connection of every peer, every CURVE handshake
    has succeeded.  A peer of another :data:`WIRE_VERSION`, or started with
    another ``-n`` or ``-w``, is refused at once.
``GOODBYE``: :data:`CONTROL` ``<BI`` (kind, process)
    the sender completed: its disconnection is expected from now on.
``ABORT``: :data:`CONTROL`, then the error's text (UTF-8)
    the sender failed; every receiver stops with a
    :class:`~timelypy.errors.ClusterError` that carries the text.
``DATA``: :data:`DATA_HEADER` ``<BI`` (kind, entries), the entries, then the payloads
    one :data:`ENTRY` per payload ``(channel, source worker, destination
    worker, payload kind, length)``, then the payloads one after the other:
    a ``(time, list)`` batch encoded by the codec (:data:`KIND_BATCH`), a
    progress batch whose times are ints as a flat msgpack list of ints
    (:data:`KIND_PROGRESS`, :func:`pack_progress`), or any other message
    encoded by the codec (:data:`KIND_OBJECT`).  One message carries
    everything one worker buffered for one process, so messages between a
    pair of workers stay in order (FIFO), as the progress protocol needs.

The constants below bound the time every step of the protocol may take:
nothing waits forever.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import zmq

from timelypy.communication.config import parse_address
from timelypy.errors import ConfigError

__all__ = [
    "HELLO",
    "GOODBYE",
    "ABORT",
    "DATA",
    "CONTROL",
    "HELLO_MESSAGE",
    "HELLO_SHAPE",
    "DATA_HEADER",
    "ENTRY",
    "WIRE_VERSION",
    "KIND_BATCH",
    "KIND_OBJECT",
    "KIND_PROGRESS",
    "ZERO_COPY_BYTES",
    "CONNECT_TIMEOUT",
    "CONNECT_TIMEOUT_ENV",
    "HEARTBEAT_INTERVAL",
    "HEARTBEAT_TIMEOUT",
    "GOODBYE_GRACE",
    "FLUSH_BYTES",
    "LINGER_SECONDS",
    "RECONNECT_INTERVAL",
    "RECONNECT_INTERVAL_MAX",
    "AUTH_FAILURE_LINGER",
    "HANDSHAKE_FAILURES",
    "NOBLOCK",
    "pack_progress",
    "progress_packer",
    "unpack_progress",
    "resolve",
]

#: Message kinds: the first byte of every header.
HELLO, GOODBYE, ABORT, DATA = 1, 2, 3, 4
#: The version of this protocol, in every ``HELLO``: peers must speak the same.
WIRE_VERSION = 3
#: The header of a control message: kind, sending process.
CONTROL = struct.Struct("<BI")
#: A ``HELLO``: kind, sending process, connection (0: control; thread + 1), wire version.
HELLO_MESSAGE = struct.Struct("<BIIH")
#: What follows a ``HELLO`` of this version: the sender's number of processes and of
#: worker threads per process (``-n`` and ``-w``), which must be every process's.
HELLO_SHAPE = struct.Struct("<II")
#: The header of a ``DATA`` message: kind, number of entries.
DATA_HEADER = struct.Struct("<BI")
#: One entry of a ``DATA`` message: channel, source worker, destination worker,
#: payload kind, payload length in bytes.
ENTRY = struct.Struct("<IIIBI")
#: Payload kinds: a ``(time, list_of_records)`` batch, any other message, a progress batch.
KIND_BATCH, KIND_OBJECT, KIND_PROGRESS = 0, 1, 2
#: Messages from this many bytes on are handed to ZeroMQ without a copy.
ZERO_COPY_BYTES = 1 << 16

#: Default seconds to wait for every peer at start-up.
CONNECT_TIMEOUT = 30.0
#: Environment variable overriding the start-up timeout (seconds).
CONNECT_TIMEOUT_ENV = "TIMELYPY_CONNECT_TIMEOUT"
#: Seconds between heartbeats on control connections.
HEARTBEAT_INTERVAL = 0.3
#: Seconds without an answer after which a peer is considered lost.
HEARTBEAT_TIMEOUT = 1.5
#: Seconds a disconnected peer has to show it said goodbye before it counts as lost.
GOODBYE_GRACE = 0.5
#: Buffered bytes (for all destinations of a worker) that trigger a send before the step ends.
FLUSH_BYTES = 1 << 18
#: Seconds a closing socket may spend delivering what is queued.
LINGER_SECONDS = 2.0
#: Seconds before a connecting socket's second attempt to reach a peer that is not
#: listening yet; each further wait doubles, up to RECONNECT_INTERVAL_MAX.  Processes of one
#: cluster start together, so the first retry is the one that usually connects: a short
#: one keeps a local cluster's start-up in milliseconds.
RECONNECT_INTERVAL = 0.01
#: The longest wait between a connecting socket's attempts (seconds).
RECONNECT_INTERVAL_MAX = 0.1
#: Seconds a process that refused a peer's keys keeps listening before it closes, so that
#: the peer's own attempts fail their handshake too (and it says why) rather than finding
#: nobody listening and waiting out its start-up timeout.
AUTH_FAILURE_LINGER = 1.0

#: Monitor events of a failed CURVE handshake, and what each means.
HANDSHAKE_FAILURES: dict[int, str] = {
    int(zmq.EVENT_HANDSHAKE_FAILED_AUTH): "wrong keys",
    int(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL): "protocol or security mechanism mismatch",
    int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL): "handshake failed",
}

# A plain int for the receive path: pyzmq's constants are enum members, and
# combining them costs more Python calls than the socket query itself.
#: ``zmq.NOBLOCK`` as a plain int.
NOBLOCK = int(zmq.NOBLOCK)

_unpackb = msgpack.unpackb


def progress_packer() -> Callable[[Any], bytes]:
    """A packer for :func:`pack_progress`: one per thread (packers are not thread-safe)."""
    # strict_types: a tuple (or any subclass of a packable type) raises instead of
    # changing type on the way, so what packs comes back exactly.
    return msgpack.Packer(use_bin_type=True, strict_types=True).pack  # type: ignore[no-any-return]


def pack_progress(pack: Callable[[Any], bytes], message: Any) -> bytes | None:
    """The :data:`KIND_PROGRESS` payload of a progress message, or None if it has none.

    A progress message is ``(worker, sequence, [((node, kind, port, time), diff), ...])``
    (:class:`~timelypy.progress.broadcast.Progcaster`).  When every ``time``
    is an ``int``, it travels as one flat msgpack list of ints, which packs
    and unpacks without the codec's per-tuple hooks (a quarter of the cost);
    any other message gets None, and travels through the codec.

    >>> pack = progress_packer()
    >>> message = (1, 7, [((3, 1, 0, 12), -1), ((2, 0, 0, 13), 1)])
    >>> unpack_progress(pack_progress(pack, message)) == message
    True
    >>> pack_progress(pack, (1, 7, [((3, 1, 0, (12, 0)), 1)])) is None  # a product time
    True
    """
    source, sequence, batch = message
    flat = [source, sequence]
    extend = flat.extend
    append = flat.append
    try:
        for key, diff in batch:
            if len(key) != 4 or type(key[3]) is not int:
                return None
            extend(key)
            append(diff)
        return pack(flat)
    except (TypeError, ValueError, OverflowError):  # not pairs, or not exactly ints
        return None


def unpack_progress(payload: Any) -> tuple[int, int, list[tuple[tuple[int, int, int, int], int]]]:
    """The progress message in a :data:`KIND_PROGRESS` payload (bytes or a buffer)."""
    items = iter(_unpackb(payload))
    source = next(items)
    sequence = next(items)
    # The outer zip takes four items for the key, then one for the diff.
    return (
        source,
        sequence,
        list(zip(zip(items, items, items, items, strict=True), items, strict=True)),
    )


def resolve(address: str) -> tuple[str, int]:
    """The IP (IPv4 first; IPv6 in brackets) and port of ``host:port``, for a ``tcp://`` URL.

    Port 0 (any free port) is accepted: binding picks one.

    >>> resolve("127.0.0.1:2101")
    ('127.0.0.1', 2101)
    """
    host, port = parse_address(address, allow_any_port=True)
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror:
        infos = []
    if infos:
        return str(infos[0][4][0]), port
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve host {host!r} of address {address!r}: {exc}") from None
    ip = str(infos[0][4][0])
    return (f"[{ip}]" if ":" in ip else ip), port
