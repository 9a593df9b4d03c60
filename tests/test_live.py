"""The live progress line: drawn on a terminal, silent elsewhere, and ``--progress`` on the CLI."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import timelypy
from timelypy import InputHandle, ProbeHandle
from timelypy.live import show_progress

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run_epochs(out, epochs=30, per_epoch=50, pause=0.01, every=0.02):
    """Two workers send ``per_epoch`` records per epoch, pausing between epochs."""
    lines = []

    def program(worker):
        handle, probe = InputHandle(), ProbeHandle()
        worker.dataflow(
            lambda scope: scope.input_from(handle).exchange(lambda x: x).map(str).probe_with(probe)
        )
        lines.append(show_progress(worker, probe, out=out, every=every, name="test"))
        for epoch in range(epochs):
            handle.send_batch(list(range(per_epoch // 2)))
            handle.advance_to(epoch + 1)
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline:
                worker.step()
        handle.close()

    timelypy.execute(timelypy.Config.process(2), program)
    return lines


def test_a_terminal_gets_a_redrawn_line_and_a_summary():
    out = Terminal()
    lines = run_epochs(out)
    assert lines[0] is lines[1]  # one line for the process, both workers counted
    lines[0].finish()
    text = out.getvalue()
    frames = [frame for frame in text.split("\r\x1b[K") if frame]
    assert len(frames) >= 3, text
    assert any(
        re.fullmatch(
            r"timelypy: test at [\d,]+ \| inputs at [\d,]+ \| [\d.,]+( k| M)? epochs/s \| "
            r"[\d.,]+( k| M)? records/s \| 2 workers \| [\d.]+ s",
            frame,
        )
        for frame in frames
    ), frames
    assert frames[-1].startswith("timelypy: test done: 1,500 records in ")
    assert text.endswith(")\n")


def test_a_stream_that_is_not_a_terminal_gets_nothing():
    out = io.StringIO()
    (line, _) = run_epochs(out, epochs=5)
    assert not line.enabled
    line.finish()
    assert out.getvalue() == ""
    line.render()
    assert "records/s" in line.render()  # it still knows what it would say
    assert line.summary().startswith("timelypy: test done: 250 records in ")


def test_every_must_be_positive():
    with pytest.raises(ValueError, match="every > 0"):
        show_progress(None, ProbeHandle(), every=0)  # type: ignore[arg-type]


SLOW_FLOW = """
import time
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig


def input_builder(worker_index, worker_count, resume_epoch):
    for epoch in range(40):
        yield AdvanceTo(epoch)
        for i in range(10):
            yield Emit(i)
        time.sleep(0.04)


flow = Dataflow()
flow.input("slow", ManualInputConfig(input_builder))
flow.map(lambda x: x * 2)
flow.capture()
"""


def test_the_cli_draws_the_line_on_a_terminal_only(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_FLOW)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "timelypy.flow", "slow:flow", "--progress"]
    # standard error a pipe: the items on stdout, no line
    piped = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert len(piped.stdout.splitlines()) == 400
    # standard error a terminal (a pty): the line, then the summary
    master, slave = pty.openpty()
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=slave, env=env
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    assert process.wait(timeout=30) == 0
    os.close(master)
    text = seen.decode()
    assert "\r\x1b[Ktimelypy: slow:flow at " in text, text
    assert "records/s" in text
    assert re.search(r"timelypy: slow:flow done: 400 records in [\d.]+ s", text), text
