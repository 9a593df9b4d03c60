"""Start a multi-process computation on this machine.

    python -m timelypy.launch -n 2 -w 2 SCRIPT [ARGS...]

starts ``-n`` processes of ``SCRIPT --processes N --process I --workers W --hostfile FILE ARGS...``
(the script reads them with :func:`timelypy.execute_from_args`), with

* a fresh shared secret for this run in ``TIMELYPY_SECRET`` (unless
  ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE`` is already set), so only
  these processes can join the cluster;
* free ports on 127.0.0.1 written to a temporary host file (unless ``-h``
  gives one);
* every line a process prints prefixed with ``[I]``, its process index;
* Ctrl-C forwarded to every process.

The launcher's own options (``-n``, default 2; ``-w``; ``-h``;
``--serializer``; ``--help``) come before ``SCRIPT`` and are read by the same
parser as a program's Timely options
(:func:`~timelypy.communication.config.parse_arguments`); everything after
``SCRIPT`` is passed to it verbatim.  It takes no ``-p``: it gives every
process its own.  A usage error exits with 2.

If a process fails, the others stop too (they detect it themselves within
seconds; the launcher terminates any that linger, after
:data:`GRACE_SECONDS`) and the launcher exits with the failed process's exit
code.  A process killed by a signal (``kill -9``, the OOM killer) may die
before its peers ever met it, and they would only notice after their
connect timeout: the launcher says which process died of which signal and
stops the others after :data:`KILLED_GRACE_SECONDS`.  It exits 0 when every
process did.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from timelypy.communication.config import Config, free_ports, parse_arguments
from timelypy.communication.secret import SECRET_ENV, SECRET_FILE_ENV
from timelypy.errors import ConfigError

__all__ = [
    "main",
    "free_ports",
    "parse_launch_args",
    "LaunchOptions",
    "USAGE",
    "GRACE_SECONDS",
    "KILLED_GRACE_SECONDS",
]

#: Seconds the other processes get to stop by themselves after one fails.
GRACE_SECONDS = 10.0
#: The same after one was killed by a signal (it may never have met its peers).
KILLED_GRACE_SECONDS = 2.0


def _relay(stream: IO[bytes], prefix: bytes, out: IO[bytes], lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


#: The launcher's usage (``--help`` prints it).
USAGE = """\
usage: python -m timelypy.launch [-n PROCESSES] [-w WORKERS] [-h HOSTFILE]
                                 [--serializer msgpack|pickle] (SCRIPT | -m MODULE) [ARGS...]

Start a timelypy computation as several processes on this machine: each runs
SCRIPT --processes N --process I --workers W --hostfile FILE [--serializer NAME] ARGS...
(or python -m MODULE ...)

  -n, --processes N     number of processes (default 2)
  -w, --workers N       worker threads per process (default 1)
  -h, --hostfile FILE   host:port lines, one per process (default: free local ports)
  --serializer NAME     how records travel between processes (default: the script's)
  --help                show this message

Everything after SCRIPT is passed to it verbatim; Timely options the launcher
does not take (--progress-mode) go there too.  The launcher gives every process
its own -p."""


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """What the launcher was asked to do."""

    processes: int
    workers: int
    hostfile: str | None
    serializer: str | None
    script: str
    args: tuple[str, ...]
    #: Run ``python -m script`` rather than the file ``script``.
    module: bool = False


def parse_launch_args(argv: Sequence[str]) -> LaunchOptions | None:
    """Read the launcher's command line (without the program name); ``None`` for ``--help``.

    The launcher's options come before the script and are read by Timely's
    own parser (:func:`~timelypy.communication.config.parse_arguments`);
    everything after the script is the script's, verbatim.  Raises
    :class:`~timelypy.errors.ConfigError` with a message for the user.

    >>> parse_launch_args(["-w", "2", "prog.py", "--", "-n", "5"])
    LaunchOptions(processes=2, workers=2, hostfile=None, serializer=None, script='prog.py', \
args=('--', '-n', '5'), module=False)
    >>> parse_launch_args(["-n", "3", "-m", "timelypy.flow", "wordcount:flow"]).module
    True
    """
    argv = list(argv)
    module = "-m" in argv
    if module:
        at = argv.index("-m")
        # -m is the launcher's only if it comes before the script.
        module = not parse_arguments(argv[:at], stop_at_free=True, usage=USAGE).free
    if module:
        if at + 1 >= len(argv):
            raise ConfigError(f"-m needs a module name\n{USAGE}")
        argv = [*argv[:at], "--", *argv[at + 1 :]]
    given = parse_arguments(argv, stop_at_free=True, usage=USAGE)
    if given.help:
        return None
    if given.process_index is not None:
        raise ConfigError(
            f"-p {given.process_index}: the launcher takes no -p, it starts every process "
            "and gives each its own -p (0 to N-1)"
        )
    if given.progress_mode is not None:
        raise ConfigError(
            "--progress-mode is not a launcher option: put it after the script "
            "(python -m timelypy.launch -n 2 SCRIPT --progress-mode demand ARGS...), "
            "where the script reads it"
        )
    if not given.free:
        raise ConfigError(f"no script given\n{USAGE}")
    processes = 2 if given.processes is None else given.processes
    workers = 1 if given.workers is None else given.workers
    if processes < 1 or workers < 1:
        raise ConfigError("-n and -w must be at least 1")
    if given.serializer is not None:
        Config(serializer=given.serializer)  # says which serializers there are
    script, *args = given.free
    return LaunchOptions(
        processes, workers, given.hostfile, given.serializer, script, tuple(args), module
    )


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; return the exit code."""
    try:
        options = parse_launch_args(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return 2
    if options is None:
        print(USAGE)
        return 0
    if not options.module and not Path(options.script).exists():
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


def _run(options: LaunchOptions, hostfile: str, env: dict[str, str]) -> int:
    lock = threading.Lock()
    children: list[subprocess.Popen[bytes]] = []
    relays: list[threading.Thread] = []
    extra = ["--serializer", options.serializer] if options.serializer else []
    for index in range(options.processes):
        # Timely's flags come first: a "--" among the script's own arguments ends
        # option parsing, and flags after it would be taken for free arguments.
        command = [
            sys.executable,
            *(["-m"] if options.module else []),
            options.script,
            "--processes",
            str(options.processes),
            "--process",
            str(index),
            "--workers",
            str(options.workers),
            "--hostfile",
            hostfile,
            *extra,
            *options.args,
        ]
        child = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
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
    grace = GRACE_SECONDS
    while True:
        running = [c for c in children if c.poll() is None]
        for index, child in enumerate(children):
            code = child.returncode
            if code not in (None, 0) and first_failure == 0:
                first_failure = code if code > 0 else 128 - code
                failed_at = time.monotonic()
                if code < 0:
                    grace = KILLED_GRACE_SECONDS
                    if running:
                        print(
                            f"timelypy.launch: process {index} was killed by "
                            f"{_signal_name(-code)}; stopping the other processes",
                            file=sys.stderr,
                            flush=True,
                        )
        if not running:
            return first_failure
        if failed_at is not None and time.monotonic() - failed_at > grace:
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


if __name__ == "__main__":
    sys.exit(main())
