"""Start a multi-process computation on this machine.

    python -m timelypy.launch -n 2 -w 2 SCRIPT [ARGS...]
    python -m timelypy.launch -n 2 -m MODULE [ARGS...]

starts ``-n`` processes of ``SCRIPT --processes N --process I --workers W --hostfile FILE ARGS...``
(the script reads them with :func:`timelypy.execute_from_args`), with

* a fresh shared secret for this run in ``TIMELYPY_SECRET`` (unless
  ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE`` is already set), so only
  these processes can join the cluster;
* free ports on 127.0.0.1 written to a temporary host file (unless
  ``--hostfile`` gives one);
* every line a process prints prefixed with ``[I]``, its process index;
* Ctrl-C forwarded to every process.

The launcher's own options come before ``SCRIPT`` (``-n/--processes``,
default 2; ``-w/--workers``, default 1; ``--hostfile``; ``--serializer``;
``-h/--help``), each with a ``TIMELYPY_*`` environment default
(``TIMELYPY_PROCESSES``, ``TIMELYPY_WORKERS_PER_PROCESS``,
``TIMELYPY_HOSTFILE``, ``TIMELYPY_SERIALIZER``); everything after
``SCRIPT`` is passed to it verbatim.  It takes no ``--process``: it gives
every process its own.  Timely's ``-h HOSTFILE`` is ``--hostfile HOSTFILE``
here (``-h`` is help, as in every Python tool).  A usage error exits with 2.

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

import argparse
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

from timelypy.communication.config import Config, free_ports
from timelypy.communication.secret import SECRET_ENV, SECRET_FILE_ENV
from timelypy.errors import ConfigError

__all__: list[str] = []  # a command line (python -m timelypy.launch); its functions are its own

#: Seconds the other processes get to stop by themselves after one fails.
GRACE_SECONDS = 10.0
#: The same after one was killed by a signal (it may never have met its peers).
KILLED_GRACE_SECONDS = 2.0

#: The environment variables that give the options' defaults, by option.
ENVIRONMENT = {
    "processes": "TIMELYPY_PROCESSES",
    "workers": "TIMELYPY_WORKERS_PER_PROCESS",
    "hostfile": "TIMELYPY_HOSTFILE",
    "serializer": "TIMELYPY_SERIALIZER",
}

#: The launcher's options that take a value (so the script is the first other word).
_VALUED = frozenset(
    {
        "-n",
        "--processes",
        "-w",
        "--workers",
        "--workers-per-process",
        "--hostfile",
        "--serializer",
        "-p",
        "--process",
        "--progress-mode",
    }
)


def _relay(stream: IO[bytes], prefix: bytes, out: IO[bytes], lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def _env(name: str) -> str | None:
    return os.environ.get(ENVIRONMENT[name]) or None


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised as :class:`ConfigError` (``main`` prints them)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{message}\n{self.format_usage().rstrip()}")


def parser() -> argparse.ArgumentParser:
    """The launcher's options (``--help`` prints them); the script and its arguments follow."""
    p = _Parser(
        prog="python -m timelypy.launch",
        usage="python -m timelypy.launch [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description=(
            "Start a timelypy computation as several processes on this machine: each runs "
            "SCRIPT --processes N --process I --workers W --hostfile FILE ARGS... "
            "(or python -m MODULE ...). Everything after SCRIPT is passed to it verbatim."
        ),
        epilog="Every option also reads its default from the environment: "
        + ", ".join(f"--{flag} {var}" for flag, var in ENVIRONMENT.items()),
    )
    p.add_argument(
        "-n",
        "--processes",
        type=int,
        metavar="N",
        default=_env("processes") or 2,
        help="number of processes (default 2)",
    )
    p.add_argument(
        "-w",
        "--workers",
        "--workers-per-process",
        type=int,
        metavar="N",
        default=_env("workers") or 1,
        help="worker threads per process (default 1)",
    )
    p.add_argument(
        "--hostfile",
        metavar="FILE",
        default=_env("hostfile"),
        help="host:port lines, one per process (default: free local ports)",
    )
    p.add_argument(
        "--serializer",
        metavar="NAME",
        default=_env("serializer"),
        help="how records travel between processes: msgpack or pickle (default: the script's)",
    )
    # Timely's flags that are not the launcher's, for a clear error rather than "unknown"
    p.add_argument("-p", "--process", type=int, help=argparse.SUPPRESS)
    p.add_argument("--progress-mode", help=argparse.SUPPRESS)
    return p


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


def _split(argv: list[str]) -> tuple[list[str], bool, list[str]]:
    """``argv`` as (the launcher's options, whether ``-m``, the script and its arguments)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[:i], True, argv[i + 1 :]
        if arg == "--":
            return argv[:i], False, argv[i + 1 :]
        if not arg.startswith("-") or arg == "-":
            return argv[:i], False, argv[i:]
        i += 2 if arg in _VALUED else 1
    return argv, False, []


def parse_launch_args(argv: Sequence[str]) -> LaunchOptions | None:
    """Read the launcher's command line (without the program name); ``None`` for ``--help``.

    The launcher's options come before the script (or ``-m MODULE``);
    everything after the script is the script's, verbatim.  Raises
    :class:`~timelypy.errors.ConfigError` with a message for the user.

    >>> parse_launch_args(["-w", "2", "prog.py", "--", "-n", "5"])
    LaunchOptions(processes=2, workers=2, hostfile=None, serializer=None, script='prog.py', \
args=('--', '-n', '5'), module=False)
    >>> parse_launch_args(["-n", "3", "-m", "timelypy.flow", "wordcount:flow"]).module
    True
    """
    own, module, program = _split(list(argv))
    if "-h" in own or "--help" in own:
        if program and "-h" in own and "--help" not in own:
            raise ConfigError(
                "-h prints the launcher's help; a host file is --hostfile FILE "
                "(Timely's -h FILE): python -m timelypy.launch --hostfile FILE SCRIPT"
            )
        return None
    given = parser().parse_args(own)
    if given.process is not None:
        raise ConfigError(
            f"-p {given.process}: the launcher takes no -p, it starts every process "
            "and gives each its own -p (0 to N-1)"
        )
    if given.progress_mode is not None:
        raise ConfigError(
            "--progress-mode is not a launcher option: put it after the script "
            "(python -m timelypy.launch -n 2 SCRIPT --progress-mode demand ARGS...), "
            "where the script reads it"
        )
    if module and not program:
        raise ConfigError("-m needs a module name: python -m timelypy.launch -m MODULE [ARGS...]")
    if not program:
        raise ConfigError(
            "no script given: python -m timelypy.launch [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]"
        )
    processes, workers = int(given.processes), int(given.workers)
    if processes < 1 or workers < 1:
        raise ConfigError("-n and -w must be at least 1")
    if given.serializer is not None:
        Config(serializer=given.serializer)  # says which serializers there are
    script, *args = program
    return LaunchOptions(
        processes, workers, given.hostfile, given.serializer, script, tuple(args), module
    )


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; return the exit code."""
    try:
        options = parse_launch_args(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"timelypy.launch: {exc}", file=sys.stderr)
        return 2
    if options is None:
        parser().print_help()
        return 0
    if not options.module and not Path(options.script).exists():
        print(f"timelypy.launch: no such script: {options.script}", file=sys.stderr)
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
