"""Run a flow from the command line: ``python -m timelypy.flow IMPORT_STR [OPTIONS]``.

``IMPORT_STR`` names a :class:`~timelypy.flow.Dataflow`: ``module``,
``module:attr``, ``path/to/file.py:attr``, or a call of a factory with
literal arguments, ``module:make_flow(2, name="x")`` (``attr`` defaults to
``flow``; a function of no arguments is called).  The options are
bytewax's, each with a ``TIMELYPY_*`` environment default, and Timely's
process options as long options:

* ``-w/--workers-per-process`` -- worker threads per process;
* ``-i/--process-id`` with ``-a/--addresses "host:port;host:port"`` (or
  ``--hostfile``) -- this process of a cluster (the shared secret comes
  from ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE``);
* ``--processes N`` without ``-i`` -- start all ``N`` processes here
  (through :mod:`timelypy.launch`, with fresh local ports and secret);
* ``-r/--recovery-directory DIR`` -- run as an execution of the recovery
  store in ``DIR``; ``-s/--snapshot-interval`` is the epoch length of the
  stream graph's sources in seconds (snapshots are taken as epochs close);
  ``-b/--backup-interval`` is accepted for bytewax's sake;
  ``--allow-non-restored-state`` drops stored state that no step of the
  flow claims (a renamed step's) instead of refusing to run;
* ``--metrics-port PORT`` -- serve the operators' metrics to Prometheus at
  ``http://127.0.0.1:PORT+I/metrics`` while the flow runs, ``I`` being the
  process's index (``--metrics-host`` to listen elsewhere; see
  :mod:`timelypy.metrics`);
* ``--progress`` -- a live progress line on standard error (a terminal).

An epoch chain's ``capture()`` without an output config prints its items.
Exit status: 0 when the flow completed, 1 when it failed (one line on
standard error; ``--traceback`` or ``TIMELYPY_TRACEBACK=1`` for the whole
traceback), 2 for a usage error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib
import importlib.util
import os
import subprocess
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from timelypy.communication.config import Config, parse_hostfile
from timelypy.errors import ConfigError, FlowError, RecoveryError
from timelypy.execute import execute
from timelypy.flow._metrics import built_hook, start_metrics
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.driver import EPOCH_INTERVAL, FlowWorker, flow_program
from timelypy.flow.outputs import print_batch
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.sources import AbortExecution
from timelypy.live import ProgressLine, show_progress

__all__ = ["main", "load_flow", "parser"]

#: The environment variables that give the options' defaults, by option.
ENVIRONMENT = {
    "workers_per_process": "TIMELYPY_WORKERS_PER_PROCESS",
    "process_id": "TIMELYPY_PROCESS_ID",
    "addresses": "TIMELYPY_ADDRESSES",
    "hostfile": "TIMELYPY_HOSTFILE",
    "processes": "TIMELYPY_PROCESSES",
    "recovery_directory": "TIMELYPY_RECOVERY_DIRECTORY",
    "snapshot_interval": "TIMELYPY_SNAPSHOT_INTERVAL",
    "backup_interval": "TIMELYPY_BACKUP_INTERVAL",
    "commit_interval": "TIMELYPY_COMMIT_INTERVAL",
    "metrics_port": "TIMELYPY_METRICS_PORT",
    "metrics_host": "TIMELYPY_METRICS_HOST",
}


def _env(name: str) -> str | None:
    value = os.environ.get(ENVIRONMENT[name])
    return value if value else None


def parser() -> argparse.ArgumentParser:
    """The command line's parser (``--help`` prints its usage)."""
    p = argparse.ArgumentParser(
        prog="python -m timelypy.flow",
        description="Run a timelypy.flow Dataflow, named by an import string.",
        epilog="Every option also reads its default from the environment: "
        + ", ".join(f"{flag} {var}" for flag, var in ENVIRONMENT.items()),
    )
    p.add_argument("import_str", help="module[:attr] or file.py[:attr]; attr may be a call")
    p.add_argument(
        "-w",
        "--workers-per-process",
        "--workers",
        type=int,
        metavar="N",
        default=_env("workers_per_process"),
        help="worker threads per process (default 1)",
    )
    p.add_argument(
        "-i",
        "--process-id",
        "--process",
        type=int,
        metavar="I",
        default=_env("process_id"),
        help="this process's index in a cluster started by hand",
    )
    p.add_argument(
        "-a",
        "--addresses",
        metavar="H:P;H:P",
        default=_env("addresses"),
        help="every process's host:port, separated by ';'",
    )
    p.add_argument(
        "--hostfile",
        metavar="FILE",
        default=_env("hostfile"),
        help="host:port lines, one per process",
    )
    p.add_argument(
        "-n",
        "--processes",
        type=int,
        metavar="N",
        default=_env("processes"),
        help="processes: without -i, start them all on this machine",
    )
    p.add_argument(
        "-r",
        "--recovery-directory",
        "--recovery",
        metavar="DIR",
        default=_env("recovery_directory"),
        help="the recovery store: snapshot to it, resume from it",
    )
    p.add_argument(
        "-s",
        "--snapshot-interval",
        type=float,
        metavar="SECONDS",
        default=_env("snapshot_interval"),
        help=f"seconds an epoch of the sources lasts (default {EPOCH_INTERVAL:g})",
    )
    p.add_argument(
        "-b",
        "--backup-interval",
        type=float,
        metavar="SECONDS",
        default=_env("backup_interval"),
        help="accepted for bytewax programs; the store keeps what a resume needs",
    )
    p.add_argument(
        "--commit-interval",
        type=float,
        metavar="SECONDS",
        default=_env("commit_interval"),
        help="seconds between a worker's snapshot commits (default 0.05)",
    )
    p.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        default=None,
        help="drop stored state that no step claims (a renamed step's) instead of refusing",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        default=_env("metrics_port"),
        help="serve Prometheus metrics on PORT (+ the process's index) while the flow runs",
    )
    p.add_argument(
        "--metrics-host",
        metavar="HOST",
        default=_env("metrics_host") or "127.0.0.1",
        help="the address the metrics endpoint listens on (default 127.0.0.1)",
    )
    p.add_argument("--progress", action="store_true", help="a live progress line on stderr")
    p.add_argument(
        "--traceback",
        action="store_true",
        default=bool(os.environ.get("TIMELYPY_TRACEBACK")),
        help="print the whole traceback of a failure (TIMELYPY_TRACEBACK=1)",
    )
    return p


def _split_call(attr: str) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
    """``name(literal args)`` as ``(name, args, kwargs)``; ``None`` for a plain name."""
    try:
        tree = ast.parse(attr, mode="eval").body
    except SyntaxError:
        raise FlowError(
            f"cannot read {attr!r}: write a name or a call, e.g. make_flow(2)"
        ) from None
    if isinstance(tree, ast.Name):
        return None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise FlowError(f"{attr!r} must be a name or a call of a name with literal arguments")
    try:
        args = tuple(ast.literal_eval(arg) for arg in tree.args)
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords if kw.arg}
    except ValueError:
        raise FlowError(
            f"the arguments of {attr!r} must be literals (numbers, strings...)"
        ) from None
    return tree.func.id, args, kwargs


def load_flow(target: str) -> Dataflow:
    """Import ``module:attr`` (or ``file.py:attr``, or ``module:factory(args)``); its Dataflow.

    >>> load_flow("no_such_module_here:flow")
    Traceback (most recent call last):
    ...
    timelypy.errors.FlowError: cannot import 'no_such_module_here' (from ...): ...
    """
    module_name, _, attr = target.partition(":")
    attr = attr or "flow"
    if not module_name:
        raise FlowError(f"{target!r} names no module: write MODULE:ATTR, e.g. wordcount:flow")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` has it
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            sys.path.insert(0, str(path.parent))
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.exists():
                raise ImportError(f"no file {str(path)!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FlowError(f"cannot import {module_name!r} (from {target!r}): {exc}") from exc
    call = _split_call(attr)
    name = attr if call is None else call[0]
    try:
        value = getattr(module, name)
    except AttributeError:
        raise FlowError(f"module {module_name!r} has no attribute {name!r}") from None
    if call is not None:
        value = value(*call[1], **call[2])
    elif callable(value) and not isinstance(value, Dataflow):
        value = value()
    if not isinstance(value, Dataflow):
        raise FlowError(f"{target!r} is {value!r}, not a timelypy.flow.Dataflow")
    return value


def _config(args: argparse.Namespace) -> Config:
    workers = args.workers_per_process or 1
    if args.process_id is None:
        if args.addresses or args.hostfile:
            raise ConfigError("-a/--addresses and --hostfile need -i/--process-id")
        return Config.process(workers)
    if args.addresses:
        addresses = [a.strip() for a in args.addresses.split(";") if a.strip()]
    elif args.hostfile:
        addresses = (
            list(parse_hostfile(args.hostfile, args.processes or 0))
            if args.processes
            else [
                line.strip()
                for line in Path(args.hostfile).read_text().splitlines()
                if line.strip()
            ]
        )
    else:
        raise ConfigError("-i/--process-id needs -a/--addresses or --hostfile")
    if len(addresses) == 1:
        if args.process_id != 0:
            raise ConfigError(f"process id {args.process_id} is out of range for one address")
        return Config.process(workers)
    return Config.cluster(workers, len(addresses), args.process_id, addresses)


def _recovery(args: argparse.Namespace) -> RecoveryConfig | None:
    allow = bool(args.allow_non_restored_state)
    if args.recovery_directory is None:
        if args.commit_interval is not None:
            raise ConfigError("--commit-interval needs -r DIR (a recovery store)")
        if allow:
            raise ConfigError("--allow-non-restored-state needs -r DIR (a recovery store)")
        return None
    backup = (
        None if args.backup_interval is None else datetime.timedelta(seconds=args.backup_interval)
    )
    if args.commit_interval is None:
        return RecoveryConfig(args.recovery_directory, backup, allow_non_restored_state=allow)
    return RecoveryConfig(
        args.recovery_directory,
        backup,
        commit_interval=args.commit_interval,
        allow_non_restored_state=allow,
    )


def _launch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Start every process of ``--processes N`` here, through the launcher."""
    rest = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("-n", "--processes", "-w", "--workers-per-process", "--workers", "--progress"):
            skip = "=" not in arg and name != "--progress"
            continue
        rest.append(arg)
    command = [
        sys.executable,
        "-m",
        "timelypy.launch",
        "-n",
        str(args.processes),
        "-w",
        str(args.workers_per_process or 1),
        "-m",
        "timelypy.flow",
        *rest,
    ]  # --progress is left out: the launcher's children write to pipes
    return subprocess.call(command)


def _one_line(target: str, exc: BaseException) -> str:
    """A failed run in one line: the error, its cause if the message does not name it."""
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    cause = exc.__cause__
    if cause is not None:
        said = " ".join(f"{type(cause).__name__}: {cause}".split())
        if said not in message:
            message += f" (caused by {said})"
    return (
        f"timelypy.flow: {target} failed: {message} "
        "[--traceback or TIMELYPY_TRACEBACK=1 for the whole traceback]"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if args.processes and args.processes > 1 and args.process_id is None:
            if args.addresses or args.hostfile:
                raise ConfigError("--processes with addresses needs -i/--process-id")
            return _launch(args, argv)
        config = _config(args)
        recovery = _recovery(args)
        interval = EPOCH_INTERVAL if args.snapshot_interval is None else args.snapshot_interval
        if interval < 0:
            raise ConfigError(f"-s/--snapshot-interval must be >= 0, got {interval}")
        flow = load_flow(args.import_str)
        server = start_metrics(args.metrics_port, args.metrics_host, args.process_id or 0)
    except (ConfigError, FlowError, RecoveryError, OSError) as exc:
        print(f"timelypy.flow: {exc}", file=sys.stderr)
        return 2
    if flow.has_chain and flow.input_config is None:
        if server is not None:
            server.close()
        print(
            f"timelypy.flow: {args.import_str!r} has no input step: start the flow with "
            "flow.input(step_id, input_config) or op.input to run it from the command line",
            file=sys.stderr,
        )
        return 2
    lines: list[ProgressLine] = []

    def show(runner: FlowWorker) -> None:
        lines.append(show_progress(runner.worker, runner.probe, name=args.import_str))

    try:
        execute(
            config,
            flow_program(
                flow,
                flow.input_config if flow.has_chain else None,
                print_batch,
                collect_on=None,
                recovery_config=recovery,
                epoch_interval=interval,
                on_built=built_hook(server, show if args.progress else None),
            ),
        )
        for line in lines[:1]:
            line.finish()
    except KeyboardInterrupt:
        return 130
    except AbortExecution:
        return 0
    except Exception as exc:
        if args.traceback:
            traceback.print_exc()
        else:
            print(_one_line(args.import_str, exc), file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
