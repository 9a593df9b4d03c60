"""Helpers the cluster tests share: start real processes, poll them with deadlines, clean up.

Nothing here sleeps in the hope that something happened: every wait polls a
condition until a deadline and fails, saying what it waited for, when the
deadline passes.  Every process started is killed when its owner exits, so a
failing test never leaves processes behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from timelypy.communication.secret import SECRET_ENV
from timelypy.launch import free_ports

#: The folder of the cluster test programs.
SCRIPTS = Path(__file__).resolve().parent
#: The repository root.
ROOT = SCRIPTS.parents[2]
#: How often a wait looks again.
POLL_SECONDS = 0.02

#: The cluster secret the harness gives its processes (long enough to be accepted).
TEST_SECRET = "cluster-test-secret-0123456789abcdef"


def script(name: str) -> str:
    """The path of the cluster test program ``name`` (``"epochs"`` -> ``.../epochs.py``)."""
    return str(SCRIPTS / f"{name}.py")


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def write_hostfile(folder: Path, processes: int) -> tuple[Path, list[int]]:
    """A host file of ``processes`` free ports on 127.0.0.1; return it and the ports."""
    ports = free_ports(processes)
    path = folder / "hosts"
    path.write_text("".join(f"127.0.0.1:{port}\n" for port in ports))
    return path, ports


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any ``TIMELYPY_*`` setting (secret, run, timeout), and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Process:
    """A started program whose stdout and stderr go to files (no pipe can fill up)."""

    def __init__(self, command: Sequence[str], folder: Path, name: str, env: dict[str, str]):
        self.name = name
        self.stdout_path = folder / f"{name}.out"
        self.stderr_path = folder / f"{name}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.popen = subprocess.Popen(
                list(command),
                stdout=out,
                stderr=err,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )
        self.started = time.monotonic()
        self.exited_at: float | None = None

    @property
    def pid(self) -> int:
        """The process id."""
        return self.popen.pid

    def stdout(self) -> str:
        """What it printed so far."""
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        """What it wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def poll(self) -> int | None:
        """Its exit code, or None while it runs (records when it was first seen exited)."""
        code = self.popen.poll()
        if code is not None and self.exited_at is None:
            self.exited_at = time.monotonic()
        return code

    def wait(self, timeout: float) -> int:
        """Wait (bounded) for it to exit; fail with its output if it does not."""
        try:
            wait_until(lambda: self.poll() is not None, timeout, f"{self.name} to exit")
        except AssertionError:
            raise AssertionError(
                f"{self.name} did not exit within {timeout} s\n{self.describe()}"
            ) from None
        assert self.popen.returncode is not None
        return self.popen.returncode

    def wait_for_output(self, text: str, timeout: float, *, stream: str = "stdout") -> None:
        """Wait until ``text`` appears in its stdout (or stderr); fail if it exits first."""

        def seen() -> bool:
            read = self.stdout if stream == "stdout" else self.stderr
            if text in read():
                return True
            if self.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited before writing {text!r}\n{self.describe()}"
                )
            return False

        try:
            wait_until(seen, timeout, f"{text!r} from {self.name}")
        except AssertionError as exc:
            if "exited before" in str(exc):
                raise
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process."""
        os.kill(self.pid, signum)

    def kill(self) -> None:
        """Kill its whole session (it and anything it started) and reap it."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - the kernel reaps killed processes
            pass

    def describe(self) -> str:
        """Its exit code and output, for failure messages."""
        return (
            f"--- {self.name}: exit code {self.popen.returncode}\n"
            f"--- stdout:\n{self.stdout()}\n--- stderr:\n{self.stderr()}"
        )


class Cluster:
    """Processes of one cluster started by hand (``SCRIPT ARGS -n N -p I -w W -h HOSTFILE``)."""

    def __init__(
        self,
        folder: Path,
        script_name: str,
        args: Sequence[str] = (),
        *,
        processes: int = 2,
        workers: int = 1,
        secret: str | None = TEST_SECRET,
        env: dict[str, str] | None = None,
        hostfile: Path | None = None,
    ) -> None:
        self.folder = folder
        self.script = script(script_name)
        self.args = list(args)
        self.processes_count = processes
        self.workers = workers
        if hostfile is None:
            hostfile, self.ports = write_hostfile(folder, processes)
        else:
            self.ports = []
        self.hostfile = hostfile
        extra = dict(env or {})
        if secret is not None:
            extra[SECRET_ENV] = secret
        self.env = clean_env(**extra)
        self.processes: dict[int, Process] = {}

    def command(self, index: int) -> list[str]:
        """The command line of process ``index``."""
        return [
            sys.executable,
            self.script,
            *self.args,
            "-n",
            str(self.processes_count),
            "-p",
            str(index),
            "-w",
            str(self.workers),
            "-h",
            str(self.hostfile),
        ]

    def start_as(self, process_arg: str) -> Process:
        """Start one process (named ``process-0``) with ``-p process_arg``, valid or not."""
        command = self.command(0)
        command[command.index("-p") + 1] = process_arg
        self.processes[0] = Process(command, self.folder, "process-0", self.env)
        return self.processes[0]

    def start(self, indices: Sequence[int] | None = None) -> Cluster:
        """Start processes ``indices`` (default: all)."""
        for index in range(self.processes_count) if indices is None else indices:
            self.processes[index] = Process(
                self.command(index), self.folder, f"process-{index}", self.env
            )
        return self

    def __getitem__(self, index: int) -> Process:
        return self.processes[index]

    def wait_all(self, timeout: float) -> list[int]:
        """Wait (one shared deadline) for every started process; return the exit codes."""
        deadline = time.monotonic() + timeout
        return [
            process.wait(max(0.0, deadline - time.monotonic()))
            for process in self.processes.values()
        ]

    def describe(self) -> str:
        """Every process's exit code and output."""
        return "\n".join(process.describe() for process in self.processes.values())

    def kill(self) -> None:
        """Kill every process still running."""
        for process in self.processes.values():
            process.kill()


@contextmanager
def cluster(
    folder: Path, script_name: str, args: Sequence[str] = (), **options: object
) -> Iterator[Cluster]:
    """A :class:`Cluster` (not started) whose processes are all killed on exit."""
    instance = Cluster(folder, script_name, args, **options)  # type: ignore[arg-type]
    try:
        yield instance
    finally:
        instance.kill()


def launch_command(*args: str) -> list[str]:
    """The command line of ``python -m timelypy.launch ARGS``."""
    return [sys.executable, "-m", "timelypy.launch", *args]


@dataclass
class LaunchResult:
    """How a launcher run ended."""

    returncode: int
    stdout: str
    stderr: str
    #: Processes carrying the run's marker that were still alive after the launcher exited.
    leftover: list[int]


def run_launcher(
    *args: str, marker: str, timeout: float = 60, env: dict[str, str] | None = None
) -> LaunchResult:
    """Run the launcher to completion (bounded); return its exit code and output.

    ``marker`` must occur in the command line of every process it starts (a
    path under the test's ``tmp_path`` will do): whatever still carries it
    once the launcher has exited is listed in ``leftover`` and killed, since
    the launcher starts its processes in sessions of their own.
    """
    try:
        result = subprocess.run(
            launch_command(*args),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env() if env is None else env,
        )
    finally:
        leftover = kill_marked(marker)
    return LaunchResult(result.returncode, result.stdout, result.stderr, leftover)


def kill_marked(marker: str) -> list[int]:
    """Kill every process whose command line contains ``marker``; return their ids."""
    found = processes_with(marker)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found


def processes_with(marker: str) -> list[int]:
    """The ids of running processes whose command line contains ``marker``."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
