"""Start a multi-process computation on this machine.

    python -m timelypy.launch -n 2 -w 2 SCRIPT [ARGS...]

starts ``-n`` processes of ``SCRIPT -n N -p I -w W -h HOSTFILE ARGS...``
(the script reads them with :func:`timelypy.execute_from_args`), with

* a fresh shared secret for this run in ``TIMELYPY_SECRET`` (unless
  ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE`` is already set), so only
  these processes can join the cluster;
* free ports on 127.0.0.1 written to a temporary host file (unless ``-h``
  gives one);
* every line a process prints prefixed with ``[I]``, its process index;
* Ctrl-C forwarded to every process.

If a process fails, the others stop too (they detect it themselves within
seconds; the launcher terminates any that linger) and the launcher exits
with the failed process's exit code.  It exits 0 when every process did.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from timelypy.communication.secret import SECRET_ENV, SECRET_FILE_ENV

__all__ = ["main", "free_ports"]

#: Seconds the other processes get to stop by themselves after one fails.
GRACE_SECONDS = 10.0


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ask the OS for ``count`` currently free TCP ports on ``host``."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _relay(stream: IO[bytes], prefix: bytes, out: IO[bytes], lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m timelypy.launch",
        description="Start a timelypy computation as several processes on this machine.",
        add_help=False,
    )
    parser.add_argument("-n", "--processes", type=int, default=2, help="number of processes")
    parser.add_argument("-w", "--workers", type=int, default=1, help="worker threads per process")
    parser.add_argument("-h", "--hostfile", help="host:port lines (default: free local ports)")
    parser.add_argument("--serializer", choices=("msgpack", "pickle"), help="record codec")
    parser.add_argument("--help", action="help", help="show this message and exit")
    parser.add_argument("script", help="the Python script to run in every process")
    parser.add_argument("args", nargs="*", help="arguments for the script (passed verbatim)")
    return parser


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split at the script: the launcher's options (and the script), and the script's arguments.

    argparse would swallow a ``--`` among the script's own arguments, so
    everything after the script is passed through verbatim.
    """
    valued = {"-n", "--processes", "-w", "--workers", "-h", "--hostfile", "--serializer"}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in valued:
            index += 2
        elif arg.startswith("-") and arg != "-":
            index += 1
        else:
            return argv[: index + 1], argv[index + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; return the exit code."""
    own, script_args = _split(list(sys.argv[1:] if argv is None else argv))
    options = _parser().parse_args(own)
    options.args = script_args
    if options.processes < 1 or options.workers < 1:
        print("launch: -n and -w must be at least 1", file=sys.stderr)
        return 2
    if not Path(options.script).exists():
        print(f"launch: no such script: {options.script}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if not env.get(SECRET_ENV) and not env.get(SECRET_FILE_ENV):
        env[SECRET_ENV] = secrets.token_hex(32)  # a fresh secret for this run
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory(prefix="timelypy-launch-") as tmp:
        hostfile = options.hostfile
        if hostfile is None:
            hostfile = str(Path(tmp) / "hosts")
            ports = free_ports(options.processes)
            Path(hostfile).write_text("".join(f"127.0.0.1:{port}\n" for port in ports))
        return _run(options, hostfile, env)


def _run(options: argparse.Namespace, hostfile: str, env: dict[str, str]) -> int:
    lock = threading.Lock()
    children: list[subprocess.Popen[bytes]] = []
    relays: list[threading.Thread] = []
    extra = ["--serializer", options.serializer] if options.serializer else []
    for index in range(options.processes):
        # Timely's flags come first: a "--" among the script's own arguments ends
        # option parsing, and flags after it would be taken for free arguments.
        command = [
            sys.executable, options.script,
            "-n", str(options.processes), "-p", str(index), "-w", str(options.workers),
            "-h", hostfile, *extra, *options.args,
        ]
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True,
        )
        children.append(child)
        prefix = b"[%d] " % index
        for stream, out in ((child.stdout, sys.stdout.buffer), (child.stderr, sys.stderr.buffer)):
            relay = threading.Thread(target=_relay, args=(stream, prefix, out, lock), daemon=True)
            relay.start()
            relays.append(relay)

    def forward(signum: int, frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _wait(children)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for relay in relays:
            relay.join(timeout=5)
    return code


def _wait(children: list[subprocess.Popen[bytes]]) -> int:
    failed_at: float | None = None
    first_failure = 0
    while True:
        running = [c for c in children if c.poll() is None]
        for child in children:
            code = child.returncode
            if code not in (None, 0) and first_failure == 0:
                first_failure = code if code > 0 else 128 - code
                failed_at = time.monotonic()
        if not running:
            return first_failure
        if failed_at is not None and time.monotonic() - failed_at > GRACE_SECONDS:
            for child in running:
                child.terminate()
            deadline = time.monotonic() + 5
            for child in running:
                try:
                    child.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
            return first_failure
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
