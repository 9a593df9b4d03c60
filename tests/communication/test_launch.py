"""``python -m timelypy.launch``, run as a real program.

The launcher starts ``-n`` processes of a script with Timely's arguments, a
fresh secret and a host file of free local ports, prefixes every line they
print with ``[I] ``, forwards Ctrl-C, and exits with the first failing
process's exit code.  The programs it runs here are in ``cluster_scripts/``;
every run passes a marker (a path under the test's ``tmp_path``) to its
script so that the test can check that no process outlived the launcher.
"""

from __future__ import annotations

import hashlib
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.communication.cluster_scripts.harness import (
    LaunchResult,
    Process,
    clean_env,
    kill_marked,
    launch_command,
    processes_with,
    run_launcher,
    script,
    write_hostfile,
)
from timelypy.communication.secret import SECRET_ENV
from timelypy.communication.wire import CONNECT_TIMEOUT
from timelypy.errors import ConfigError
from timelypy.launch import GRACE_SECONDS, LaunchOptions, main, parse_launch_args

#: A secret of our own (long enough to be accepted).
OURS = "ours-" + "0123456789abcdef" * 2

#: Deadline for a launcher run that should complete.
RUN_DEADLINE = 60.0
#: Ctrl-C must stop every process and the launcher within this bound.  Without the
#: forwarding they would run until RUN_DEADLINE; the bound leaves room for a loaded
#: machine (the shared 2-core one runs several suites at once).
INTERRUPT_SECONDS = 20.0


def _lines_by_process(text: str) -> dict[int, list[str]]:
    """Group ``[I] line`` output by ``I``, keeping each process's order; all lines prefixed."""
    grouped: dict[int, list[str]] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\[(\d+)\] (.*)", line)
        assert match, f"line without a process prefix: {line!r}"
        grouped.setdefault(int(match.group(1)), []).append(match.group(2))
    return grouped


def _echo(
    tmp_path: Path, *args: str, launcher: tuple[str, ...] = ("-n", "2"), **options: Any
) -> tuple[LaunchResult, str]:
    """Launch ``echo.py ARGS MARKER``; assert nothing outlives it; return the result, marker."""
    marker = str(tmp_path / "marker")
    result = run_launcher(
        *launcher, script("echo"), *args, marker, marker=marker, timeout=RUN_DEADLINE, **options
    )
    assert result.leftover == [], "processes outlived the launcher"
    return result, marker


def test_output_is_prefixed_with_the_process_index(tmp_path: Path) -> None:
    result, marker = _echo(tmp_path, launcher=("-n", "3", "-w", "2"))
    assert result.returncode == 0, result.stdout + result.stderr
    stdout = _lines_by_process(result.stdout)
    assert sorted(stdout) == [0, 1, 2]
    for index, lines in stdout.items():
        assert all(line.startswith(f"process {index} ") for line in lines), lines
        assert lines[0] == f"process {index} args={[marker]!r}"
        assert lines[-1].startswith(f"process {index} sum=")
    # worker 0 sends 0..99 to worker value % 6; each process's two workers sum their share
    sums = {i: int(lines[-1].rsplit("=", 1)[1]) for i, lines in stdout.items()}
    assert sums == {i: sum(v for v in range(100) if v % 6 in (2 * i, 2 * i + 1)) for i in range(3)}
    stderr = _lines_by_process(result.stderr)
    assert stderr == {i: [f"process {i} says hello on stderr"] for i in range(3)}


def test_exit_code_of_a_failing_process(tmp_path: Path) -> None:
    result, _marker = _echo(tmp_path, "exit=1:3")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "[0] process 0 sum=" in result.stdout and "[1] process 1 sum=" in result.stdout


def test_exit_code_of_a_killed_process(tmp_path: Path) -> None:
    # A process killed by signal N counts as exit code 128 + N, as in a shell.
    result, _marker = _echo(tmp_path, "kill=1")
    assert result.returncode == 128 + signal.SIGKILL, result.stdout + result.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_stops_every_process(tmp_path: Path, workers: int) -> None:
    marker = str(tmp_path / "marker")
    launcher = Process(
        launch_command("-n", "2", "-w", str(workers), script("epochs"), marker),
        tmp_path,
        "launcher",
        clean_env(),
    )
    try:
        last = 2 * workers - 1
        launcher.wait_for_output("[0] worker 0 saw epoch 1", RUN_DEADLINE)
        launcher.wait_for_output(f"[1] worker {last} saw epoch 1", RUN_DEADLINE)
        assert len(processes_with(marker)) == 3  # the launcher and its two processes
        launcher.signal(signal.SIGINT)
        interrupted = time.monotonic()
        code = launcher.wait(RUN_DEADLINE)
        assert launcher.exited_at is not None
        assert launcher.exited_at - interrupted <= INTERRUPT_SECONDS, launcher.describe()
        assert code != 0, launcher.describe()
        assert processes_with(marker) == [], "processes outlived the launcher"
        assert "KeyboardInterrupt" in launcher.stderr(), launcher.describe()
    finally:
        launcher.kill()
        kill_marked(marker)


def test_serializer_is_passed_through(tmp_path: Path) -> None:
    result, _marker = _echo(tmp_path, launcher=("-n", "2", "--serializer", "pickle"))
    assert result.returncode == 0, result.stdout + result.stderr
    for index, lines in _lines_by_process(result.stdout).items():
        assert f"process {index} serializer=pickle workers=1 processes=2" in lines


def test_default_serializer_is_left_to_the_program(tmp_path: Path) -> None:
    result, _marker = _echo(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[0] process 0 serializer=msgpack workers=1 processes=2" in result.stdout


def test_script_arguments_are_passed_through(tmp_path: Path) -> None:
    args = ["data.txt", "two words", "-5", "key=value", "ünïcode"]
    result, marker = _echo(tmp_path, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    for index, lines in _lines_by_process(result.stdout).items():
        assert lines[0] == f"process {index} args={[*args, marker]!r}"


def test_given_hostfile_is_used(tmp_path: Path) -> None:
    hosts, ports = write_hostfile(tmp_path, 2)
    hosts.write_text(f"# the cluster\n\n127.0.0.1:{ports[0]}\n127.0.0.1:{ports[1]}  # second\n")
    result, _marker = _echo(tmp_path, launcher=("-n", "2", "--hostfile", str(hosts)))
    assert result.returncode == 0, result.stdout + result.stderr
    for index, lines in _lines_by_process(result.stdout).items():
        assert f"process {index} address=127.0.0.1:{ports[index]}" in lines
    assert hosts.exists()  # the launcher only deletes host files it made


def test_a_fresh_secret_per_run_shared_by_its_processes(tmp_path: Path) -> None:
    fingerprints = []
    for run in range(2):
        result, _marker = _echo(tmp_path / str(run))
        assert result.returncode == 0, result.stdout + result.stderr
        seen = {
            line.split("secret=")[1] for line in result.stdout.splitlines() if "secret=" in line
        }
        assert len(seen) == 1 and "none" not in seen, result.stdout
        fingerprints.append(seen.pop())
    assert fingerprints[0] != fingerprints[1]


def test_a_given_secret_is_kept(tmp_path: Path) -> None:
    result, _marker = _echo(tmp_path, env=clean_env(**{SECRET_ENV: OURS}))
    assert result.returncode == 0, result.stdout + result.stderr
    fingerprint = hashlib.sha256(OURS.encode()).hexdigest()[:8]
    assert f"[0] process 0 secret={fingerprint}" in result.stdout
    assert f"[1] process 1 secret={fingerprint}" in result.stdout


def test_missing_script(tmp_path: Path) -> None:
    result = run_launcher(
        "-n", "2", str(tmp_path / "nowhere.py"), marker=str(tmp_path), timeout=RUN_DEADLINE
    )
    assert result.returncode == 2
    assert "no such script" in result.stderr


@pytest.mark.parametrize("flag", ["-n", "-w"])
def test_counts_must_be_positive(tmp_path: Path, flag: str) -> None:
    result = run_launcher(flag, "0", script("echo"), marker=str(tmp_path), timeout=RUN_DEADLINE)
    assert result.returncode == 2
    assert "-n and -w must be at least 1" in result.stderr


@pytest.mark.slow
def test_lingering_processes_are_terminated(tmp_path: Path) -> None:
    # linger.py takes no part in a cluster, so nothing but the launcher stops process 0
    # after process 1 failed: it does after its grace period.
    marker = str(tmp_path / "marker")
    started = time.monotonic()
    result = run_launcher(
        "-n", "2", script("linger"), marker, marker=marker, timeout=GRACE_SECONDS + RUN_DEADLINE
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.leftover == []
    assert "[0] process 0 lingering" in result.stdout
    assert elapsed <= GRACE_SECONDS + INTERRUPT_SECONDS + 5, elapsed


def test_script_options_after_a_double_dash_reach_the_script(tmp_path: Path) -> None:
    script_path = tmp_path / "args.py"
    script_path.write_text(
        "import sys, timelypy\n"
        "config, rest = timelypy.Config.from_args(sys.argv)\n"
        "print(config.processes, config.process_index, rest, flush=True)\n"
    )
    result = run_launcher(
        "-n",
        "2",
        str(script_path),
        "data.txt",
        "--",
        "--verbose",
        "-5",
        marker=str(tmp_path),
        timeout=RUN_DEADLINE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == [
        "[0] 2 0 ['data.txt', '--verbose', '-5']",
        "[1] 2 1 ['data.txt', '--verbose', '-5']",
    ]


# -- the launcher's command line (argparse, with environment defaults; no process starts) ------


def test_launcher_options_come_before_the_script_and_its_arguments_pass_verbatim() -> None:
    options = parse_launch_args(
        ["-n3", "--workers=2", "--serializer", "pickle", "prog.py", "-w", "5", "--", "-p", "0"]
    )
    assert options == LaunchOptions(
        processes=3,
        workers=2,
        hostfile=None,
        serializer="pickle",
        script="prog.py",
        args=("-w", "5", "--", "-p", "0"),
    )


def test_launcher_defaults_to_two_processes_of_one_worker() -> None:
    options = parse_launch_args(["prog.py"])
    assert options is not None
    assert (options.processes, options.workers, options.hostfile, options.serializer) == (
        2,
        1,
        None,
        None,
    )
    assert options.args == ()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "1", "prog.py"], "-p 1: the launcher takes no -p, it starts every process"),
        (["--progress-mode", "demand", "prog.py"], "put it after the script"),
        ([], "no script given"),
        (["-n", "2"], "no script given"),
        (["-x", "prog.py"], "unrecognized arguments: -x"),
        (["-n", "two", "prog.py"], "argument -n/--processes: invalid int value: 'two'"),
        (["-h", "hosts", "prog.py"], "a host file is --hostfile FILE (Timely's -h FILE)"),
        (["-m"], "-m needs a module name"),
        (["-w", "0", "prog.py"], "-n and -w must be at least 1"),
        (["--serializer", "json", "prog.py"], "unknown serializer 'json'"),
    ],
)
def test_launcher_usage_errors_say_what_to_do(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_launch_args(args)


def test_launcher_usage_errors_exit_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-p", "0", "prog.py"]) == 2
    assert capsys.readouterr().err.startswith("timelypy.launch: -p 0: the launcher takes no -p")
    assert main(["--bogus", "prog.py"]) == 2
    assert "usage: python -m timelypy.launch" in capsys.readouterr().err


def test_launcher_help_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_launch_args(["-n", "3", "--help"]) is None
    assert parse_launch_args(["-h"]) is None
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m timelypy.launch")
    assert "--hostfile FILE" in out and "default 2" in out
    assert "TIMELYPY_PROCESSES" in out and "TIMELYPY_WORKERS_PER_PROCESS" in out


def test_launcher_options_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIMELYPY_PROCESSES", "3")
    monkeypatch.setenv("TIMELYPY_WORKERS_PER_PROCESS", "2")
    monkeypatch.setenv("TIMELYPY_HOSTFILE", "hosts.txt")
    options = parse_launch_args(["prog.py"])
    assert options is not None
    assert (options.processes, options.workers, options.hostfile) == (3, 2, "hosts.txt")
    options = parse_launch_args(["-n", "4", "prog.py"])  # the command line wins
    assert options is not None and options.processes == 4


def test_a_process_killed_before_it_met_its_peers_stops_the_run_quickly(tmp_path: Path) -> None:
    # Process 1 dies of SIGKILL before connecting: process 0 would wait for its connect
    # timeout (30 s); the launcher names the dead process and stops it much sooner.
    started = time.monotonic()
    result, _marker = _echo(tmp_path, "prekill=1")
    elapsed = time.monotonic() - started
    assert result.returncode == 128 + signal.SIGKILL, result.stdout + result.stderr
    assert "process 1 was killed by SIGKILL" in result.stderr
    # without the launcher's help process 0 would wait out its connect timeout
    assert elapsed < CONNECT_TIMEOUT, elapsed


def test_a_process_stuck_in_user_code_ends_by_itself_with_its_peer_s_error(tmp_path: Path) -> None:
    # Process 0's worker raises; process 1's is stuck in a function that never returns.
    # Process 1 must not wait for the launcher: it raises within its grace, naming both.
    started = time.monotonic()
    result, _marker = _echo(tmp_path, "fail=0", "block=1")
    elapsed = time.monotonic() - started
    assert result.returncode != 0, result.stdout + result.stderr
    assert "[0] ValueError: worker 0 failed on purpose" in result.stderr
    assert "[1] timelypy.errors.ClusterError" in result.stderr, result.stderr
    assert "did not stop within" in result.stderr and "in program" in result.stderr
    # ended by itself: the launcher, had it waited out GRACE_SECONDS, would have killed it
    assert "was killed" not in result.stderr, (elapsed, result.stderr)
