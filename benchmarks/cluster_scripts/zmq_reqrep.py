"""The raw ZeroMQ round trip: a REQ/REP pair of processes on 127.0.0.1.

    python benchmarks/cluster_scripts/zmq_reqrep.py role=rep port=P [trips=N] [warmup=W] [curve=0]
                                                    [epoch=0] [spin=0]
    python benchmarks/cluster_scripts/zmq_reqrep.py role=req port=P [trips=N] [warmup=W] [curve=0]
                                                    [epoch=0] [spin=0]

The ``rep`` process binds ``tcp://127.0.0.1:P`` and echoes ``warmup +
trips`` messages (then prints ``RESULT {"role": "rep", ...}``); the
``req`` process connects, sends an 8-byte message and
waits for its echo, ``warmup`` times untimed and then ``trips`` times
timed, and prints ``RESULT {"wall": ..., "trips": ...}``.  Blocking
``send``/``recv``, no polling: the least a round trip through ZeroMQ costs
from Python.  With ``curve=1`` both sockets use CURVE encryption and
authentication, as timelypy's cluster sockets do (keys made here, for the
comparison only).

With ``epoch=1`` each process also runs, per trip, one epoch of a
one-worker timelypy dataflow of its own (``input -> map -> inspect_batch ->
probe``: send a record, advance the input, step until the probe passes),
the requester before it sends and the replier between receiving and
replying.  That is what a two-process epoch round trip costs at the least
if crossing processes added no work to timelypy's: the raw round trip plus
each side's one-worker epoch, on the critical path, on this machine.

With ``spin=S`` (seconds) each receive first polls for up to ``S`` seconds,
yielding the CPU between polls, and blocks only after that: how a timelypy
worker parks (``Config.park_spin``), so that its round trip can be set
beside a raw one that waits the same way.

Not a timelypy program: it takes no Timely options.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import zmq
from zmq.utils import z85

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit

DEFAULTS = {
    "role": "",
    "port": 0,
    "trips": 5000,
    "warmup": 500,
    "curve": 0,
    "epoch": 0,
    "spin": 0.0,
    "timeout": 60.0,
}


def _params(argv: list[str]) -> dict:
    params = dict(DEFAULTS)
    for arg in argv[1:]:
        name, sep, value = arg.partition("=")
        if not sep or name not in DEFAULTS:
            raise SystemExit(f"unknown argument {arg!r}; known: {', '.join(DEFAULTS)}")
        params[name] = type(DEFAULTS[name])(value)
    if params["role"] not in ("req", "rep") or not params["port"]:
        raise SystemExit("need role=req|rep and port=P")
    return params


def _receiver(sock: zmq.Socket[bytes], spin: float) -> Callable[[], bytes]:
    """``sock.recv``, or with ``spin`` > 0 one that first polls for ``spin`` s, yielding.

    As a timelypy worker parks (``Config.park_spin``): poll without blocking,
    give the CPU away between polls, and block only when the spin is over.
    """
    if spin <= 0:
        return sock.recv
    items = [(sock, int(zmq.POLLIN))]
    poll, recv, now = zmq.zmq_poll, sock.recv, time.monotonic

    def spin_recv() -> bytes:
        until = now() + spin
        while not poll(items, 0):
            if now() >= until:
                break
            os.sched_yield()
        return recv()

    return spin_recv


def _trips(p: dict, sock: zmq.Socket[bytes], epoch: Callable[[], None]) -> None:
    """Echo (``rep``) or time (``req``) the round trips, with ``epoch()`` on each side's path."""
    total = p["warmup"] + p["trips"]
    send, recv = sock.send, _receiver(sock, p["spin"])
    if p["role"] == "rep":
        for _ in range(total):
            message = recv()
            epoch()
            send(message)
        emit({"role": "rep", "echoed": total, "checked": True})
        return
    message = b"12345678"
    for _ in range(p["warmup"]):
        epoch()
        send(message)
        recv()
    with Timer() as timer:
        for _ in range(p["trips"]):
            epoch()
            send(message)
            if recv() != message:
                raise AssertionError("the echo differs from the message sent")
    emit(
        {
            "role": "req",
            **timer.as_dict(),
            "trips": p["trips"],
            "curve": p["curve"],
            "epoch": p["epoch"],
            "spin": p["spin"],
            "checked": True,
        }
    )


def _with_local_epochs(p: dict, sock: zmq.Socket[bytes]) -> None:
    """Run the trips with one epoch of a one-worker dataflow per trip on each side."""
    import timelypy

    def program(worker: timelypy.Worker) -> None:
        handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
        out: list[int] = []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .map(lambda x: x + 1)
                .inspect_batch(lambda _t, data: out.extend(data))
                .probe_with(probe)
            )
        )

        def epoch() -> None:
            handle.send(handle.time)
            handle.advance_to(handle.time + 1)
            while probe.less_than(handle.time):
                worker.step()

        _trips(p, sock, epoch)
        if len(out) != p["warmup"] + p["trips"]:
            raise AssertionError(f"the local dataflow saw {len(out)} records")

    timelypy.execute(timelypy.Config.thread(), program)  # in this thread: Timer's CPU is ours


def main() -> None:
    p = _params(sys.argv)
    context = zmq.Context()
    try:
        sock = context.socket(zmq.REQ if p["role"] == "req" else zmq.REP)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, int(p["timeout"] * 1000))  # never hang
        if p["curve"]:
            secret = b"timelypy-cluster-bench-curve-key"  # 32 bytes, comparison only
            public = zmq.curve_public(z85.encode(secret))
            sock.curve_secretkey = z85.encode(secret)
            sock.curve_publickey = public
            if p["role"] == "rep":
                sock.curve_server = True
            else:
                sock.curve_serverkey = public
        endpoint = f"tcp://127.0.0.1:{p['port']}"
        if p["role"] == "rep":
            sock.bind(endpoint)
        else:
            sock.connect(endpoint)
        if p["epoch"]:
            _with_local_epochs(p, sock)
        else:
            _trips(p, sock, lambda: None)
    finally:
        context.destroy(linger=0)


if __name__ == "__main__":
    main()
