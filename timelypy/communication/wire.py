"""The cluster's wire protocol: messages, addresses, and the time bounds.

Every message between processes is a ZeroMQ multipart message from a
``DEALER`` to a ``ROUTER``; the ``ROUTER`` prepends the sender's routing id
(``TAG:PROCESS:ROLE``, where ``TAG`` is the run tag of
:mod:`timelypy.communication.secret`), so that frame 0 tells which run a
message belongs to.  Frame 1 is a header whose first byte is the kind:

``HELLO`` ``<BI`` (kind, process) on a control connection, ``<BII`` (kind,
process, thread + 1) on a worker connection
    sent once on every connection at start-up; when a process has heard it
    on every connection of every peer, every CURVE handshake has succeeded.
``GOODBYE`` ``<BI``
    the sender completed: its disconnection is expected from now on.
``ABORT`` ``<BI``, then the error's text (UTF-8) in frame 2
    the sender failed; every receiver stops with a
    :class:`~timelypy.errors.ClusterError` that carries the text.
``DATA``: the kind byte, then one :data:`ENTRY` per payload
    ``(channel, source worker, destination worker, payload kind)``; frames
    2, 3, ... are the payloads, encoded by the codec as a batch
    (:data:`KIND_BATCH`, a ``(time, list)`` message) or as one object
    (:data:`KIND_OBJECT`).  One message carries everything one worker
    buffered for one process, so messages between a pair of workers stay in
    order (FIFO), as the progress protocol needs.

The constants below bound the time every step of the protocol may take:
nothing waits forever.
"""

from __future__ import annotations

import socket
import struct

import zmq

from timelypy.communication.config import parse_address
from timelypy.errors import ConfigError

__all__ = [
    "HELLO",
    "GOODBYE",
    "ABORT",
    "DATA",
    "CONTROL",
    "WORKER_HELLO",
    "ENTRY",
    "KIND_BATCH",
    "KIND_OBJECT",
    "CONNECT_TIMEOUT",
    "CONNECT_TIMEOUT_ENV",
    "HEARTBEAT_INTERVAL",
    "HEARTBEAT_TIMEOUT",
    "GOODBYE_GRACE",
    "FLUSH_BYTES",
    "LINGER_SECONDS",
    "HANDSHAKE_FAILURES",
    "NOBLOCK",
    "resolve",
]

#: Message kinds: the first byte of every header.
HELLO, GOODBYE, ABORT, DATA = 1, 2, 3, 4
#: The header of a control message: kind, sending process.
CONTROL = struct.Struct("<BI")
#: The header of a worker connection's ``HELLO``: kind, sending process, thread + 1.
WORKER_HELLO = struct.Struct("<BII")
#: One entry of a ``DATA`` header: channel, source worker, destination worker, payload kind.
ENTRY = struct.Struct("<IIIB")
#: Payload kinds: a ``(time, list_of_records)`` batch, or any other message.
KIND_BATCH, KIND_OBJECT = 0, 1

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
