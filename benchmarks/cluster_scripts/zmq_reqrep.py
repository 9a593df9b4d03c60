"""The raw ZeroMQ round trip: a REQ/REP pair of processes on 127.0.0.1.

    python benchmarks/cluster_scripts/zmq_reqrep.py role=rep port=P [trips=N] [warmup=W] [curve=0]
    python benchmarks/cluster_scripts/zmq_reqrep.py role=req port=P [trips=N] [warmup=W] [curve=0]

The ``rep`` process binds ``tcp://127.0.0.1:P`` and echoes ``warmup +
trips`` messages (then prints ``RESULT {"role": "rep", ...}``); the
``req`` process connects, sends an 8-byte message and
waits for its echo, ``warmup`` times untimed and then ``trips`` times
timed, and prints ``RESULT {"wall": ..., "trips": ...}``.  Blocking
``send``/``recv``, no polling: the least a round trip through ZeroMQ costs
from Python.  With ``curve=1`` both sockets use CURVE encryption and
authentication, as timelypy's cluster sockets do (keys made here, for the
comparison only).

Not a timelypy program: it takes no Timely options.
"""

from __future__ import annotations

import sys
from pathlib import Path

import zmq
from zmq.utils import z85

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit

DEFAULTS = {"role": "", "port": 0, "trips": 5000, "warmup": 500, "curve": 0, "timeout": 60.0}


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
        total = p["warmup"] + p["trips"]
        if p["role"] == "rep":
            sock.bind(endpoint)
            for _ in range(total):
                sock.send(sock.recv())
            emit({"role": "rep", "echoed": total, "checked": True})
            return
        sock.connect(endpoint)
        message = b"12345678"
        send, recv = sock.send, sock.recv
        for _ in range(p["warmup"]):
            send(message)
            recv()
        with Timer() as timer:
            for _ in range(p["trips"]):
                send(message)
                if recv() != message:
                    raise AssertionError("the echo differs from the message sent")
        emit(
            {
                "role": "req",
                **timer.as_dict(),
                "trips": p["trips"],
                "curve": p["curve"],
                "checked": True,
            }
        )
    finally:
        context.destroy(linger=0)


if __name__ == "__main__":
    main()
