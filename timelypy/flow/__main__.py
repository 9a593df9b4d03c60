"""Run a flow from the command line: ``python -m timelypy.flow module:flow [OPTIONS]``.

``module:flow`` names a :class:`~timelypy.flow.Dataflow` (or a function
of no arguments returning one) by import string, as ``module.attr``
(``module`` alone means ``module:flow``).  The flow must start with an
``input`` step; captures without an output config print their items on
standard output.  The options are Timely's:

* ``-w W`` -- worker threads per process;
* ``-n N -p P -h HOSTS`` -- process ``P`` of ``N``, with a host file of
  ``host:port`` lines (the cluster's shared secret comes from
  ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE``);
* ``-n N`` without ``-p`` -- start all ``N`` processes here, through
  ``python -m timelypy.launch`` (fresh local ports and secret);
* ``-r DIR`` (``--recovery``) -- run as an execution against the recovery
  store in ``DIR`` (created on first use; every process must reach it),
  resuming from its resume epoch; ``--commit-interval S`` sets how often
  each worker commits its snapshots (default 0.05 s);
* ``--progress`` -- a live progress line on standard error (the output
  frontier, the inputs' frontier, epochs and records per second), drawn
  only when standard error is a terminal (:mod:`timelypy.live`).

Exit status: 0 when the flow completed, 1 when it failed (the error is
printed), 2 for a usage error.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import traceback
from collections.abc import Sequence

from timelypy.communication.config import parse_arguments
from timelypy.errors import ConfigError, FlowError, RecoveryError
from timelypy.execute import execute
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.driver import FlowWorker, flow_program
from timelypy.flow.outputs import print_batch
from timelypy.live import ProgressLine, show_progress
from timelypy.recovery import RecoveryConfig

__all__ = ["main", "load_flow", "USAGE"]

#: What ``--help`` prints.
USAGE = """\
usage: python -m timelypy.flow MODULE[:ATTR] [-w WORKERS] [-n PROCESSES [-p INDEX -h HOSTFILE]]
                             [-r RECOVERY_DIR [--commit-interval SECONDS]] [--progress]

Run the timelypy.flow Dataflow MODULE.ATTR (default ATTR: flow; a function of no
arguments returning a Dataflow works too). Its first step must be an input
step; captures without an output config print their items.

  -w, --workers N       worker threads per process (default 1)
  -n, --processes N     number of processes (default 1); without -p, all N are
                        started here
  -p, --process I       this process's index (0 to N-1)
  -h, --hostfile FILE   host:port lines, one per process
  -r, --recovery DIR    recover from (and snapshot to) the recovery store in DIR:
                        a rerun resumes from the last execution's resume epoch
  --commit-interval S   seconds between a worker's snapshot commits (default 0.05)
  --progress            a live progress line on standard error, when it is a terminal
  --help                show this message
"""


def load_flow(target: str) -> Dataflow:
    """Import ``module:attr`` and return the :class:`Dataflow` it names.

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
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FlowError(f"cannot import {module_name!r} (from {target!r}): {exc}") from exc
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise FlowError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, Dataflow):
        value = value()
    if not isinstance(value, Dataflow):
        raise FlowError(f"{target!r} is {value!r}, not a timelypy.flow.Dataflow")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    progress = "--progress" in args
    args = [arg for arg in args if arg != "--progress"]
    try:
        args, recovery_args = _recovery_arguments(args)
        recovery = _recovery_config(recovery_args)
        given = parse_arguments(args, usage=USAGE)
        if given.help:
            print(USAGE)
            return 0
        if len(given.free) != 1:
            raise ConfigError(f"give exactly one MODULE:ATTR, got {list(given.free)}\n{USAGE}")
        (target,) = given.free
        processes = 1 if given.processes is None else given.processes
        if processes > 1 and given.process_index is None:
            if given.hostfile is not None:
                raise ConfigError("-h without -p: give every process its -p, or leave out -h")
            command = [
                sys.executable,
                "-m",
                "timelypy.launch",
                "-n",
                str(processes),
                "-w",
                str(given.workers or 1),
                "-m",
                "timelypy.flow",
                target,
                *recovery_args,
            ]  # --progress is left out: the launcher's children write to pipes
            return subprocess.call(command)
        config = given.config()
        flow = load_flow(target)
    except (ConfigError, FlowError, RecoveryError) as exc:
        print(f"timelypy.flow: {exc}", file=sys.stderr)
        return 2
    source = flow.input_config
    if source is None:
        print(
            f"timelypy.flow: {target!r} has no input step: start the flow with "
            "flow.input(step_id, input_config) to run it from the command line",
            file=sys.stderr,
        )
        return 2
    lines: list[ProgressLine] = []

    def show(runner: FlowWorker) -> None:
        lines.append(show_progress(runner.worker, runner.probe, name=target))

    try:
        execute(
            config,
            flow_program(
                flow, source, print_batch, collect_on=None, recovery_config=recovery,
                on_built=show if progress else None,
            ),
        )
        for line in lines[:1]:
            line.finish()
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def _recovery_arguments(args: list[str]) -> tuple[list[str], list[str]]:
    """Split ``args`` into the Timely options and the recovery options (with their values)."""
    rest: list[str] = []
    recovery: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in ("-r", "--recovery", "--commit-interval"):
            if eq:
                recovery += [name, value]
                i += 1
                continue
            if i + 1 >= len(args):
                raise ConfigError(f"{name} needs a value\n{USAGE}")
            recovery += [name, args[i + 1]]
            i += 2
            continue
        rest.append(arg)
        i += 1
    return rest, recovery


def _recovery_config(recovery_args: list[str]) -> RecoveryConfig | None:
    """The :class:`RecoveryConfig` the recovery options ask for, if any."""
    options = dict(zip(recovery_args[::2], recovery_args[1::2], strict=True))
    directory = options.get("-r", options.get("--recovery"))
    interval = options.get("--commit-interval")
    if directory is None:
        if interval is not None:
            raise ConfigError("--commit-interval needs -r DIR (a recovery store)")
        return None
    if interval is None:
        return RecoveryConfig(directory)
    try:
        seconds = float(interval)
    except ValueError:
        raise ConfigError(f"--commit-interval takes seconds, got {interval!r}") from None
    return RecoveryConfig(directory, commit_interval=seconds)


if __name__ == "__main__":
    sys.exit(main())
