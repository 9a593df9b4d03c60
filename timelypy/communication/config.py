"""Worker configuration and Timely's command-line arguments.

A computation runs ``workers`` worker threads in each of ``processes``
processes; worker indices are ``process * workers + thread``.  The arguments
are Timely's:

``-w N`` / ``--workers N`` (also ``--threads``)
    worker threads per process (default 1);
``-n N`` / ``--processes N``
    number of processes (default 1);
``-p I`` / ``--process I``
    this process's index, ``0 <= I < N`` (default 0);
``-h FILE`` / ``--hostfile FILE``
    ``host:port`` lines, one per process; the first ``N`` are used.
    Without it, process ``i`` listens on ``localhost:2101+i``.

``--serializer msgpack|pickle`` chooses how records travel between
processes (``pickle`` must be chosen explicitly: it can carry any Python
object, but unpickling runs code, so it is only used on authenticated
connections).  ``--progress-mode eager|demand`` is Timely's progress mode.

Since ``-h`` means host file, help is ``--help``.

:func:`parse_arguments` is the one parser of these options: programs use it
through :meth:`Config.from_args` (options and free arguments may mix; ``--``
ends the options), and ``python -m timelypy.launch`` uses it for its own
options, which end at the script.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from timelypy.errors import ConfigError

__all__ = [
    "Config",
    "Arguments",
    "parse_arguments",
    "parse_hostfile",
    "parse_address",
    "free_ports",
]

#: Default seconds a parking worker of a cluster polls before it blocks (``Config.park_spin``).
PARK_SPIN = 0.0003
#: The most ``Config.park_spin`` may be: a spin is a short wait, not a way of waiting.
MAX_PARK_SPIN = 0.1
#: Environment variable that sets ``Config.park_spin``'s default (seconds), e.g. for
#: Spark executors (``spark.executorEnv.TIMELYPY_PARK_SPIN``) or ``timelypy.launch``.
PARK_SPIN_ENV = "TIMELYPY_PARK_SPIN"


def _park_spin_default() -> float:
    """``TIMELYPY_PARK_SPIN`` if set, else :data:`PARK_SPIN`."""
    text = os.environ.get(PARK_SPIN_ENV, "").strip()
    if not text:
        return PARK_SPIN
    try:
        return float(text)
    except ValueError:
        raise ConfigError(
            f"{PARK_SPIN_ENV}={text!r} is not a number of seconds (0 turns the spin off)"
        ) from None


#: Without a host file, process ``i`` listens on ``localhost:DEFAULT_BASE_PORT + i``.
DEFAULT_BASE_PORT = 2101

_SERIALIZERS = ("msgpack", "pickle")
_PROGRESS_MODES = ("eager", "demand")

#: The usage of a program that reads Timely's arguments (``--help`` shows it).
USAGE = """\
usage: PROGRAM [-w WORKERS] [-n PROCESSES] [-p PROCESS] [-h HOSTFILE]
               [--serializer msgpack|pickle] [--progress-mode eager|demand] [ARGS...]

  -w, --workers N       worker threads per process (default 1)
  -n, --processes N     number of processes (default 1)
  -p, --process I       index of this process, 0 <= I < N (default 0)
  -h, --hostfile FILE   host:port lines, one per process (default localhost:2101+i)
  --serializer NAME     how records travel between processes (default msgpack)
  --progress-mode MODE  eager (default) or demand
  --help                show this message"""


@dataclasses.dataclass(frozen=True)
class Config:
    """How many workers, where, and how they talk.

    >>> Config.process(4).peers
    4
    >>> Config.from_args(["prog", "-w", "2", "data.txt"])
    (Config(workers=2, processes=1, process_index=0, addresses=None, serializer='msgpack', \
progress_mode='eager'), ['data.txt'])
    """

    workers: int = 1
    processes: int = 1
    process_index: int = 0
    addresses: tuple[str, ...] | None = None
    serializer: str = "msgpack"
    progress_mode: str = "eager"
    #: Whether chains of ``Pipeline`` operators run fused (:mod:`timelypy.dataflow.fusion`);
    #: ``False`` schedules every operator on its own, as with a ``"timely"`` logger.
    fuse: bool = dataclasses.field(default=True, repr=False)
    #: Seconds a parking worker, alone in a process of a cluster, keeps polling the
    #: network (yielding its CPU between polls) before it blocks; 0 blocks at once.
    #: A blocked thread costs tens of microseconds to wake, which a round trip of
    #: small epochs pays at every hop; a spin costs at most this much CPU per park.
    #: The default is ``TIMELYPY_PARK_SPIN`` if set, else :data:`PARK_SPIN`.
    park_spin: float = dataclasses.field(default_factory=_park_spin_default, repr=False)

    def __post_init__(self) -> None:
        for name in ("workers", "processes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.process_index, int) or not 0 <= self.process_index < self.processes:
            raise ConfigError(
                f"process index {self.process_index!r} is out of range: with {self.processes} "
                f"process(es) it must be in 0..{self.processes - 1}"
            )
        if self.serializer not in _SERIALIZERS:
            raise ConfigError(
                f"unknown serializer {self.serializer!r}: choose one of {', '.join(_SERIALIZERS)}"
            )
        if not isinstance(self.fuse, bool):
            raise ConfigError(f"fuse must be True or False, got {self.fuse!r}")
        spin = self.park_spin
        if (
            not isinstance(spin, (int, float))
            or isinstance(spin, bool)
            or not 0 <= spin <= MAX_PARK_SPIN
        ):
            raise ConfigError(
                f"park_spin must be a number of seconds in 0..{MAX_PARK_SPIN:g} "
                f"(Config.park_spin or {PARK_SPIN_ENV}), got {spin!r}"
            )
        if self.progress_mode not in _PROGRESS_MODES:
            raise ConfigError(
                f"unknown progress mode {self.progress_mode!r}: choose eager or demand"
            )
        if self.addresses is not None:
            if len(self.addresses) < self.processes:
                raise ConfigError(
                    f"{self.processes} processes need {self.processes} addresses, "
                    f"but only {len(self.addresses)} were given"
                )
            object.__setattr__(self, "addresses", tuple(self.addresses[: self.processes]))
            repeat = _first_repeat(enumerate(self.addresses))
            if repeat is not None:
                first, second, address = repeat
                raise ConfigError(
                    f"processes {first} and {second} have the same address {address!r}: "
                    "every process needs its own host:port"
                )

    @property
    def peers(self) -> int:
        """The total number of workers."""
        return self.workers * self.processes

    @classmethod
    def thread(cls) -> Config:
        """One worker, in the calling thread."""
        return cls()

    @classmethod
    def process(cls, workers: int) -> Config:
        """``workers`` worker threads in this process."""
        return cls(workers=workers)

    @classmethod
    def cluster(
        cls,
        workers: int,
        processes: int,
        process: int,
        addresses: Sequence[str] | None = None,
        **options: Any,
    ) -> Config:
        """``processes`` processes of ``workers`` threads; this is process ``process``."""
        return cls(
            workers=workers,
            processes=processes,
            process_index=process,
            addresses=tuple(addresses) if addresses is not None else None,
            **options,
        )

    def resolved_addresses(self) -> tuple[str, ...]:
        """The ``host:port`` of every process (the default is ``localhost:2101+i``)."""
        if self.addresses is not None:
            return self.addresses
        return tuple(f"localhost:{DEFAULT_BASE_PORT + i}" for i in range(self.processes))

    @classmethod
    def from_args(cls, argv: Sequence[str], *, strict: bool = True) -> tuple[Config, list[str]]:
        """Parse Timely's arguments from ``argv`` (``argv[0]`` is the program).

        Returns the configuration and the remaining (free) arguments.  With
        ``strict``, an unknown option (``-x`` before any ``--``) is an error,
        as in Timely; otherwise it is left in the remaining arguments.
        ``--help`` raises a :class:`~timelypy.errors.ConfigError` whose
        message is the usage.  See :func:`parse_arguments`.
        """
        arguments = parse_arguments(argv[1:], strict=strict)
        if arguments.help:
            raise ConfigError(USAGE)
        return arguments.config(), list(arguments.free)


@dataclasses.dataclass(frozen=True)
class Arguments:
    """Timely's options as written on a command line, before they make a :class:`Config`.

    An option that was not given is ``None``; ``free`` holds the other
    arguments, in order; ``help`` says that ``--help`` was given (parsing
    stops there).
    """

    workers: int | None = None
    processes: int | None = None
    process_index: int | None = None
    hostfile: str | None = None
    serializer: str | None = None
    progress_mode: str | None = None
    help: bool = False
    free: tuple[str, ...] = ()

    def config(self) -> Config:
        """The configuration these options describe (Timely's defaults for the others).

        A host file is read here, keeping as many addresses as processes.
        """
        kwargs: dict[str, Any] = {}
        for key in ("workers", "processes", "process_index", "serializer", "progress_mode"):
            value = getattr(self, key)
            if value is not None:
                kwargs[key] = value
        if self.hostfile is not None:
            processes = 1 if self.processes is None else self.processes
            kwargs["addresses"] = parse_hostfile(self.hostfile, processes)
        return Config(**kwargs)


#: Every name of every option, and the :class:`Arguments` field it sets.
_OPTIONS: dict[str, str] = {
    "-w": "workers",
    "--workers": "workers",
    "--threads": "workers",
    "-n": "processes",
    "--processes": "processes",
    "-p": "process_index",
    "--process": "process_index",
    "-h": "hostfile",
    "--hostfile": "hostfile",
    "--serializer": "serializer",
    "--progress-mode": "progress_mode",
}
#: The integer fields, and the flag that names each in errors.
_INTEGERS = {"workers": "-w", "processes": "-n", "process_index": "-p"}
#: Short options, which may be written with their value attached (``-w2``).
_SHORT = ("-w", "-n", "-p", "-h")


def parse_arguments(
    args: Sequence[str], *, strict: bool = True, stop_at_free: bool = False, usage: str = USAGE
) -> Arguments:
    """Read Timely's options (``-w``, ``-n``, ``-p``, ``-h`` and the long ones) from ``args``.

    ``args`` has no program name.  Options may be written ``-w 2``,
    ``-w2``, ``--workers 2`` or ``--workers=2``; ``--`` ends the options.
    Other arguments are free: numbers (``-5``) and ``-`` too.  With
    ``strict``, an unknown option is an error (whose message ends with
    ``usage``); otherwise it is free.  With ``stop_at_free``, the first free
    argument ends the options, and it and everything after it are free,
    verbatim (the launcher's ``[OPTIONS] SCRIPT [ARGS...]``).  Values are
    checked for form here (integers); :meth:`Arguments.config` checks the
    rest.

    >>> parse_arguments(["-w2", "data.txt", "-n", "3"])
    Arguments(workers=2, processes=3, process_index=None, hostfile=None, serializer=None, \
progress_mode=None, help=False, free=('data.txt',))
    >>> parse_arguments(["-n", "3", "script.py", "-w", "2"], stop_at_free=True).free
    ('script.py', '-w', '2')
    """
    values: dict[str, str] = {}
    free: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            free.extend(args[i + 1 :])
            break
        if arg == "--help":
            return Arguments(help=True)
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        elif arg[:2] in _SHORT and len(arg) > 2 and not arg.startswith("--"):
            name, value = arg[:2], arg[2:]
        key = _OPTIONS.get(name)
        if key is None:
            if strict and arg.startswith("-") and len(arg) > 1 and not _is_number(arg):
                raise ConfigError(f"unknown option {arg!r}\n{usage}")
            if stop_at_free:
                free.extend(args[i:])
                break
            free.append(arg)
            i += 1
            continue
        if value is None:
            if i + 1 >= len(args):
                raise ConfigError(f"option {name} needs a value\n{usage}")
            value = args[i + 1]
            i += 2
        else:
            i += 1
        values[key] = value
    fields: dict[str, Any] = dict(values)
    for key, flag in _INTEGERS.items():
        if key in values:
            try:
                fields[key] = int(values[key])
            except ValueError:
                raise ConfigError(f"{flag} needs an integer, got {values[key]!r}") from None
    return Arguments(**fields, free=tuple(free))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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


def parse_address(address: str, *, allow_any_port: bool = False) -> tuple[str, int]:
    """Split ``host:port`` (or ``[v6]:port``), validating the port.

    Port 0 ("any free port") is only accepted with ``allow_any_port``.
    """
    text = address.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"address {address!r} is not of the form host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"address {address!r}: port {port!r} is not a number") from None
    lowest = 0 if allow_any_port else 1
    if not lowest <= number < 65536:
        raise ConfigError(f"address {address!r}: port {number} is out of range {lowest}..65535")
    return host, number


def _first_repeat(entries: Iterable[tuple[int, str]]) -> tuple[int, int, str] | None:
    """The first ``(earlier label, label, address)`` whose address repeats an earlier one.

    Addresses are compared by port and host, the names of this machine's
    loopback (``localhost``, ``127.0.0.1``, ``::1``) counting as one host.
    """
    seen: dict[tuple[str, int], int] = {}
    for label, address in entries:
        host, port = parse_address(address)
        host = host.lower()
        endpoint = ("127.0.0.1" if host in ("localhost", "127.0.0.1", "::1") else host, port)
        if endpoint in seen:
            return seen[endpoint], label, address
        seen[endpoint] = label
    return None


def parse_hostfile(path: str | Path, processes: int) -> tuple[str, ...]:
    """Read ``host:port`` lines without blanks or ``#`` comments; keep the first ``processes``."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read host file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"host file {str(path)!r}, line {bad_line}: not UTF-8 text (byte {raw[exc.start]:#04x} "
            "cannot be decoded); a host file holds host:port lines"
        ) from None
    addresses: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        try:
            parse_address(entry)
        except ConfigError as exc:
            raise ConfigError(f"host file {str(path)!r}, line {number}: {exc}") from None
        addresses.append(entry)
        numbers.append(number)
    repeat = _first_repeat(zip(numbers[:processes], addresses[:processes], strict=True))
    if repeat is not None:
        first, second, entry = repeat
        raise ConfigError(
            f"host file {str(path)!r}, line {second}: {entry!r} repeats the address of line "
            f"{first}; every process needs its own host:port"
        )
    if len(addresses) < processes:
        raise ConfigError(
            f"host file {str(path)!r} lists {len(addresses)} address(es), but -n asks for "
            f"{processes} processes"
        )
    return tuple(addresses[:processes])
