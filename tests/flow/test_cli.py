"""``python -m timelypy.flow module:flow`` with Timely's options, as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

FLOW = """
from operator import add
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig


def input_builder(worker_index, worker_count, resume_epoch):
    for epoch in range(3):
        yield AdvanceTo(epoch)
        for i in range(worker_index, 12, worker_count):
            yield Emit((f"k{i % 3}", 1))


def make():
    flow = Dataflow()
    flow.input("numbers", ManualInputConfig(input_builder))
    flow.reduce_epoch(add)
    flow.capture()
    return flow


flow = make()
"""


def cli(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    (tmp_path / "counting.py").write_text(FLOW)
    return subprocess.run(
        [sys.executable, "-m", "timelypy.flow", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def counts(stdout: str) -> Counter:
    # lines may carry the launcher's "[I] " prefix
    return Counter(line.split("] ")[-1] for line in stdout.splitlines())


EXPECTED = Counter({"('k0', 4)": 3, "('k1', 4)": 3, "('k2', 4)": 3})


def test_cli_runs_a_flow_on_worker_threads(tmp_path):
    result = cli(tmp_path, "counting:flow", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == EXPECTED


def test_cli_starts_every_process_without_p(tmp_path):
    result = cli(tmp_path, "counting:make", "-n", "2", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == EXPECTED


def test_cli_usage_errors(tmp_path):
    result = cli(tmp_path, "nope:flow")
    assert result.returncode == 2 and "cannot import 'nope'" in result.stderr
    result = cli(tmp_path, "counting:missing")
    assert result.returncode == 2 and "has no attribute 'missing'" in result.stderr
    result = cli(tmp_path, "counting:flow", "--bogus")
    assert result.returncode == 2 and "unrecognized arguments: --bogus" in result.stderr
    for help_flag in ("--help", "-h"):
        result = cli(tmp_path, help_flag)
        assert result.returncode == 0 and "usage: python -m timelypy.flow" in result.stdout
        assert "TIMELYPY_WORKERS_PER_PROCESS" in result.stdout


RECOVERING_FLOW = """
import os
import time
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig

FAIL_AT = int(os.environ.get("FAIL_AT", "-1"))


def input_builder(worker_index, worker_count, resume_epoch):
    for epoch in range(resume_epoch, 6):
        yield AdvanceTo(epoch)
        if epoch == FAIL_AT:
            raise RuntimeError(f"injected failure at epoch {epoch}")
        for i in range(worker_index, 12, worker_count):
            yield Emit((f"k{i % 3}", 1))
        time.sleep(0.1)


def running(total, value):
    return total + value, total + value


flow = Dataflow()
flow.input("numbers", ManualInputConfig(input_builder))
flow.stateful_map("running", lambda key: 0, running)
flow.capture()
"""


def test_cli_recovery_resumes_a_failed_run_from_its_store(tmp_path):
    (tmp_path / "recovering.py").write_text(RECOVERING_FLOW)
    store = str(tmp_path / "store")

    def cli_run(*args: str, fail_at: int = -1) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "timelypy.flow", "recovering", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "FAIL_AT": str(fail_at)},
        )

    first = cli_run("-w", "2", "-r", store, "--commit-interval", "0", fail_at=4)
    assert first.returncode == 1 and "injected failure at epoch 4" in first.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "timelypy.recovery", "show", store],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    resume = int(shown.split("resume epoch for the next execution: ")[1].split()[0])
    assert 1 <= resume <= 4, shown
    # the second execution runs as 2 processes (rescaled), and resumes with the state
    second = cli_run("-n", "2", f"--recovery={store}")
    assert second.returncode == 0, second.stderr
    # 4 items per key and epoch: running counts 4e+1 .. 4e+4 belong to epoch e
    total = 4 * resume
    kept = Counter(line for line in counts(first.stdout).elements() if int(line[7:-1]) <= total)
    resumed = counts(second.stdout)
    assert min(int(line[7:-1]) for line in resumed) == total + 1, "state was reloaded"
    assert kept + resumed == Counter(f"('k{k}', {v})" for k in range(3) for v in range(1, 25))


def test_cli_recovery_usage_errors(tmp_path):
    result = cli(tmp_path, "counting:flow", "--commit-interval", "1")
    assert result.returncode == 2 and "--commit-interval needs -r DIR" in result.stderr
    result = cli(tmp_path, "counting:flow", "-r")
    assert result.returncode == 2 and "-r/--recovery-directory" in result.stderr
    assert "expected one argument" in result.stderr
    result = cli(tmp_path, "counting:flow", "-r", str(tmp_path / "s"), "--commit-interval", "x")
    assert result.returncode == 2 and "--commit-interval: invalid float value" in result.stderr


GRAPH_FLOW = """
import timelypy.flow.operators as op
from timelypy.flow.connectors.stdio import StdOutSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.testing import TestingSource


def make(words, repeat=1):
    flow = Dataflow("cli")
    lines = op.input("lines", flow, TestingSource(words.split() * repeat, 3))
    counts = op.count_final("count", lines, lambda word: word)
    op.output("out", op.map("fmt", counts, lambda kv: f"{kv[0]}={kv[1]}"), StdOutSink())
    return flow


def broken():
    flow = Dataflow("broken")
    lines = op.input("lines", flow, TestingSource([1, 0]))
    op.output("out", op.map("invert", lines, lambda x: 1 / x), StdOutSink())
    return flow
"""


def graph_cli(tmp_path, *args, env=None):
    (tmp_path / "graphflow.py").write_text(GRAPH_FLOW)
    return subprocess.run(
        [sys.executable, "-m", "timelypy.flow", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_cli_runs_a_graph_flow_from_a_factory_call_on_threads_and_processes(tmp_path):
    want = Counter({"a=4": 1, "b=2": 1})
    result = graph_cli(tmp_path, "graphflow:make('a b a', repeat=2)", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == want
    # the worker count from the environment, a file path, and two processes
    result = graph_cli(
        tmp_path,
        "graphflow.py:make('a b a', 2)",
        "--processes",
        "2",
        env={"TIMELYPY_WORKERS_PER_PROCESS": "2"},
    )
    assert result.returncode == 0, result.stderr
    assert counts(result.stdout) == want


def test_cli_processes_started_by_hand_with_bytewax_flags(tmp_path):
    from timelypy.communication.config import free_ports

    (tmp_path / "graphflow.py").write_text(GRAPH_FLOW)
    addresses = ";".join(f"127.0.0.1:{port}" for port in free_ports(2))
    env = {**os.environ, "TIMELYPY_SECRET": "x7Kp2mQv9LzR4tWb8NcY3hJd6FgA5sUe"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "timelypy.flow",
                "graphflow:make('x y x')",
                "-i",
                str(i),
                "-a",
                addresses,
                "-w",
                "1",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in outs]
    assert counts("".join(out for out, _ in outs)) == Counter({"x=2": 1, "y=1": 1})


def test_cli_prints_one_line_for_a_failure_and_the_traceback_on_request(tmp_path):
    result = graph_cli(tmp_path, "graphflow:broken")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # one line, naming the step, worker and cause
    assert "StepError: step 'broken.invert' on worker 0" in line
    assert "ZeroDivisionError" in line and "--traceback" in line
    result = graph_cli(tmp_path, "graphflow:broken", "--traceback")
    assert result.returncode == 1 and "Traceback" in result.stderr
    result = graph_cli(tmp_path, "graphflow:make(words)")
    assert result.returncode == 2 and "must be literals" in result.stderr
