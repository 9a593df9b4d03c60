"""The driver's control socket: rendezvous, and errors back from tasks.

Spark's own ``BarrierTaskContext.allGather`` costs about a second per call
(the JVM polls), so the workers meet through a ZeroMQ socket on the driver
instead (as xgboost's tracker does):

1. the driver binds a ``ROUTER`` (:class:`Rendezvous`) before launching the
   barrier stage;
2. each task binds its own cluster socket on a free port and sends
   ``register(index, endpoint)``;
3. once every worker registered, the driver answers each with the ordered
   ``table`` of endpoints; the workers then talk to each other directly;
4. a task whose worker fails sends ``error(index, exception)`` before it
   fails, so the driver can cancel the gang at once and re-raise the
   *original* exception; a task that completes sends ``done(index)``;
5. a task may also ask the driver's services (the recovery store a driver
   keeps for ``run_flow``): :meth:`TaskChannel.request` sends a request
   with a number and waits, bounded, for the ``reply`` carrying the same
   number (:meth:`Rendezvous.reply`).

The socket is CURVE-authenticated with keys derived from the run's secret
and its execution tag, exactly like the cluster's own sockets, so only this
execution's tasks can talk to it; only then are messages unpickled (they
carry exception objects).  Every message also names the run and execution,
and one from another execution is rejected.
"""

from __future__ import annotations

import logging
import pickle
import socket
import time
from dataclasses import dataclass
from typing import Any

import zmq

from timelypy.communication.secret import admit_only, curve_keys, run_tag

__all__ = ["Rendezvous", "TaskChannel", "Message", "local_ip_towards", "execution_tag"]

log = logging.getLogger("timelypy_spark")


def execution_tag(run: str, execution: int) -> str:
    """The string that names one execution of a run (keys and routing derive from it)."""
    return f"{run}/{execution}"


def local_ip_towards(host: str) -> str:
    """The address of this machine on the route to ``host`` (no packet is sent)."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((host, 9))
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


@dataclass
class Message:
    """One control message: ``kind`` is register, table, error or done."""

    kind: str
    run: str
    execution: int
    index: int = -1
    body: Any = None


def _keys(secret: bytes, tag: str) -> tuple[bytes, bytes]:
    return curve_keys(secret, run_tag(secret, tag))


class Rendezvous:
    """The driver's end: a CURVE ``ROUTER`` on the driver host."""

    def __init__(self, host: str, secret: bytes, run: str, execution: int) -> None:
        self.run = run
        self.execution = execution
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        public, private = _keys(secret, execution_tag(run, execution))
        # only tasks holding the run's secret-derived key pair are admitted
        self._auth = admit_only(self.context, public)
        self.socket.curve_server = True
        self.socket.curve_publickey = public
        self.socket.curve_secretkey = private
        self.socket.setsockopt(zmq.LINGER, 0)
        port = self.socket.bind_to_random_port(f"tcp://{host}")
        #: ``host:port`` the tasks connect to.
        self.endpoint = f"{host}:{port}"
        self._identities: dict[int, bytes] = {}

    def poll(self, timeout: float) -> list[tuple[bytes, Message]]:
        """Receive the messages that arrive within ``timeout`` seconds."""
        received = []
        if self.socket.poll(int(timeout * 1000)) if timeout > 0 else self.socket.poll(0):
            while True:
                try:
                    identity, payload = self.socket.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                message = pickle.loads(payload)  # authenticated by CURVE
                if message.run != self.run or message.execution != self.execution:
                    log.warning(
                        "rejected a control message from run %s execution %s (expected %s/%s)",
                        message.run,
                        message.execution,
                        self.run,
                        self.execution,
                    )
                    continue
                if message.kind == "register":
                    self._identities[message.index] = identity
                received.append((identity, message))
        return received

    def reply(self, identity: bytes, request: Message, body: Any) -> None:
        """Answer ``request`` (from the task at ``identity``) with ``body``."""
        number = request.body.get("id") if isinstance(request.body, dict) else None
        message = Message("reply", self.run, self.execution, request.index, (number, body))
        self.socket.send_multipart([identity, pickle.dumps(message, pickle.HIGHEST_PROTOCOL)])

    def send_table(self, table: list[str]) -> None:
        """Send every registered task the ordered list of worker endpoints."""
        payload = pickle.dumps(Message("table", self.run, self.execution, body=table))
        for identity in self._identities.values():
            self.socket.send_multipart([identity, payload])

    def close(self) -> None:
        """Close the socket."""
        self.socket.close(0)
        self._auth.stop()
        self.context.term()


class TaskChannel:
    """A task's end: a CURVE ``DEALER`` connected to the driver."""

    def __init__(self, endpoint: str, secret: bytes, run: str, execution: int, index: int) -> None:
        self.run = run
        self.execution = execution
        self.index = index
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        public, private = _keys(secret, execution_tag(run, execution))
        self.socket.curve_serverkey = public
        self.socket.curve_publickey = public
        self.socket.curve_secretkey = private
        self.socket.setsockopt(zmq.LINGER, 2000)
        self.socket.connect(f"tcp://{endpoint}")
        self._requests = 0

    def send(self, kind: str, body: Any = None) -> None:
        """Send a message to the driver."""
        message = Message(kind, self.run, self.execution, self.index, body)
        try:
            payload = pickle.dumps(message)
        except Exception:  # an unpicklable exception: send its text instead
            payload = pickle.dumps(Message(kind, self.run, self.execution, self.index, repr(body)))
        self.socket.send(payload)

    def send_error(self, error: BaseException, text: str) -> None:
        """Send ``error`` (pickled with cloudpickle when possible) and its traceback text."""
        import cloudpickle

        try:
            blob = cloudpickle.dumps(error)
        except Exception:
            blob = None
        self.send("error", {"exception": blob, "text": text, "type": type(error).__name__})

    def request(self, kind: str, body: dict[str, Any], timeout: float) -> Any:
        """Send a request to the driver's services and return its reply's body.

        Waits at most ``timeout`` seconds in all; a driver that does not
        answer in time is a :class:`~timelypy.errors.ClusterError`.  A reply
        carrying an exception (the service failed) raises it here.
        """
        from timelypy.errors import ClusterError

        self._requests += 1
        number = self._requests
        message = Message(kind, self.run, self.execution, self.index, {**body, "id": number})
        self.socket.send(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            answer = self.receive(min(remaining, 0.5))
            if answer is None or answer.kind != "reply":
                continue
            answered, result = answer.body
            if answered != number:
                continue
            if isinstance(result, BaseException):
                raise result
            return result
        raise ClusterError(
            f"worker {self.index}: the Spark driver did not answer a {kind!r} request within "
            f"{timeout:g} s (is the driver overloaded or gone?)"
        )

    def receive(self, timeout: float) -> Message | None:
        """The next message from the driver within ``timeout`` seconds, if any."""
        if self.socket.poll(int(timeout * 1000)):
            message = pickle.loads(self.socket.recv())  # authenticated by CURVE
            if isinstance(message, Message) and message.execution == self.execution:
                return message
        return None

    def close(self) -> None:
        """Close the socket, delivering what is queued (bounded)."""
        self.socket.close()
        self.context.term()
