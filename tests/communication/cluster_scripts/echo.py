"""Say what the launcher gave this process, on stdout and stderr; run a tiny exchange.

    python echo.py [ARGS...] TIMELY-ARGS

Each process prints (flushed)::

    process P args=[...free arguments...]
    process P serializer=NAME workers=W processes=N
    process P address=HOST:PORT
    process P secret=FINGERPRINT        (the first 8 hex digits of the secret's SHA-256)
    process P sum=S                     (the sum of 0..99, exchanged between every worker)

and ``process P says hello on stderr`` on stderr.  Free arguments
``exit=P:C`` make process ``P`` exit with code ``C`` once the computation is
complete, and ``kill=P`` makes process ``P`` kill itself with ``SIGKILL`` then;
``prekill=P`` makes it do so before it connects to its peers; ``fail=W``
makes worker ``W`` raise in its program (after a second), ``block=W`` makes it
block forever.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time

import timelypy
from timelypy.communication.secret import SECRET_ENV


def program(worker: timelypy.Worker) -> int:
    """Exchange ``0..99`` (sent by worker 0) by value; return this worker's sum."""
    total = 0

    def add(value: int) -> None:
        nonlocal total
        total += value

    if f"fail={worker.index}" in sys.argv:
        time.sleep(1.0)  # the other processes are connected (and blocked) by then
        raise ValueError(f"worker {worker.index} failed on purpose")
    if f"block={worker.index}" in sys.argv:
        threading.Event().wait()  # a user function that never returns
    values = range(100) if worker.index == 0 else range(0)
    worker.dataflow(lambda scope: scope.to_stream(values).exchange(lambda x: x).inspect(add))
    worker.step_while(worker.has_dataflows, 0.05)
    return total


def main(argv: list[str]) -> None:
    """Print what this process was given, run the exchange, apply ``exit=``/``kill=``."""
    config, free = timelypy.Config.from_args(argv)
    p = config.process_index
    secret = os.environ.get(SECRET_ENV, "")
    fingerprint = hashlib.sha256(secret.encode()).hexdigest()[:8] if secret else "none"
    print(f"process {p} args={free!r}", flush=True)
    print(
        f"process {p} serializer={config.serializer} workers={config.workers} "
        f"processes={config.processes}",
        flush=True,
    )
    print(f"process {p} address={config.resolved_addresses()[p]}", flush=True)
    print(f"process {p} secret={fingerprint}", flush=True)
    print(f"process {p} says hello on stderr", file=sys.stderr, flush=True)
    if f"prekill={p}" in free:
        os.kill(os.getpid(), signal.SIGKILL)
    results = timelypy.execute_from_args(argv, program)
    print(f"process {p} sum={sum(results)}", flush=True)
    for word in free:
        if word.startswith("exit="):
            target, code = word[len("exit=") :].split(":")
            if int(target) == p:
                sys.exit(int(code))
        if word.startswith("kill=") and int(word[len("kill=") :]) == p:
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv)
