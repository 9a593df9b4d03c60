"""A live progress line for long runs: frontiers, epochs per second, records per second.

:func:`show_progress` puts one line on a terminal (standard error by
default) and redraws it every ``every`` seconds while the computation runs::

    timelypy: output at 1,204 | inputs at 1,210 | 402 epochs/s | 1.21 M records/s | 2 workers

*output* is the frontier of the probe it watches (the first epoch not yet
complete there), *inputs* the frontier of the dataflows' source operators
(the first epoch they may still send), *epochs/s* how fast the output
frontier moved since the last redraw, *records/s* how many records the
source operators of the registered workers sent.  When the probe is done (or
:meth:`ProgressLine.finish` is called) the line is replaced by a summary and
a newline.

The line turns itself off when its stream is not a terminal (a pipe, a
file, a launcher's child: nothing is written), unless ``force=True``.
Redrawing is a worker timer (:meth:`Worker.activate_after
<timelypy.worker.Worker.activate_after>`) on the first registered worker:
nothing is done per step, and every worker thread of the process may
register, so the records of all of them are counted.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from timelypy.dataflow.probe import ProbeHandle
from timelypy.progress.metrics import progress_summary
from timelypy.worker import Worker

__all__ = ["ProgressLine", "show_progress"]

_lock = threading.Lock()
_lines: dict[int, ProgressLine] = {}  # by id(out): one line per stream


class ProgressLine:
    """One progress line on ``out``, fed by the workers added to it."""

    def __init__(
        self,
        probe: ProbeHandle,
        *,
        out: TextIO | None = None,
        every: float = 0.5,
        force: bool = False,
        name: str = "output",
    ) -> None:
        if every <= 0:
            raise ValueError(f"show_progress needs every > 0 seconds, got {every!r}")
        self.out: TextIO = out if out is not None else sys.stderr
        isatty = getattr(self.out, "isatty", None)
        #: Whether anything is written (a terminal, or ``force``).
        self.enabled = force or bool(isatty and isatty())
        self.probe = probe
        self.every = every
        self.name = name
        self._workers: list[Worker] = []
        self._first_dataflow: dict[int, int] = {}  # per worker: the first dataflow counted
        self._started = time.monotonic()
        self._rates = Rates()
        self._finished = False

    def add(self, worker: Worker) -> None:
        """Count ``worker``'s records too; the first worker added drives the redraws."""
        first = not self._workers
        self._workers.append(worker)
        running = worker.installed_dataflows()
        self._first_dataflow[worker.index] = running[0] if running else 0
        if first and self.enabled:
            worker.activate_after(self._tick, self.every)

    def render(self) -> str:
        """The line as it would be drawn now (also when disabled)."""
        now = time.monotonic()
        output = _first_int(self.probe.frontier())
        inputs, records = self._sources()
        rate = self._rates.since_last(now, output, records)
        where = "done" if output is None and self.probe.done() else _epoch(output)
        text = f"timelypy: {self.name} at {where}"
        if inputs is not None:
            text += f" | inputs at {_epoch(inputs)}"
        workers = len(self._workers)
        return (
            f"{text}{rate} | {workers} worker{'s' if workers != 1 else ''}"
            f" | {now - self._started:.1f} s"
        )

    def summary(self) -> str:
        """The final line: records, time and rate (completed dataflows included)."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        _, records = self._sources(completed=True)
        return (
            f"timelypy: {self.name} done: {records:,} records in {elapsed:.1f} s "
            f"({format_rate(records / elapsed)} records/s)"
        )

    def finish(self) -> None:
        """Replace the line with the summary and end it (once; nothing if disabled)."""
        if self._finished:
            return
        self._finished = True
        if self.enabled:
            self._write(self.summary() + "\n")
        with _lock:
            if _lines.get(id(self.out)) is self:
                del _lines[id(self.out)]

    def _tick(self) -> None:
        if self._finished:
            return
        if self.probe.done() or not any(w.has_dataflows() for w in self._workers):
            self.finish()
            return
        self._write(self.render())
        self._workers[0].activate_after(self._tick, self.every)

    def _write(self, text: str) -> None:
        try:
            self.out.write("\r\x1b[K" + text)
            self.out.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing
            self.enabled = False

    def _sources(self, completed: bool = False) -> tuple[int | None, int]:
        """The source operators' first epoch (over the workers) and their records sent."""
        flows = [
            flow
            for worker in list(self._workers)
            for flow in worker.metrics(completed=completed)["dataflows"]
            # not those that completed before this line started
            if not flow["complete"] or flow["dataflow"] >= self._first_dataflow[worker.index]
        ]
        summary = progress_summary(flows)
        return summary["inputs"], summary["records"]


class Rates:
    """Epochs and records per second between two readings of a progress line.

    >>> rates = Rates()
    >>> rates.since_last(0.0, 10, 0)        # the first reading has nothing to compare
    ''
    >>> rates.since_last(2.0, 30, 50_000)
    ' | 10 epochs/s | 25.0 k records/s'
    """

    def __init__(self) -> None:
        self._last: tuple[float, int | None, int] | None = None  # (time, epoch, records)

    def since_last(self, now: float, epoch: int | None, records: int) -> str:
        """`` | E epochs/s | R records/s`` since the previous reading (``""`` at the first)."""
        text = ""
        if self._last is not None:
            then, last_epoch, last_records = self._last
            elapsed = max(now - then, 1e-9)
            if epoch is not None and last_epoch is not None:
                text = f" | {format_rate((epoch - last_epoch) / elapsed)} epochs/s"
            text += f" | {format_rate((records - last_records) / elapsed)} records/s"
        self._last = (now, epoch, records)
        return text


def show_progress(
    worker: Worker,
    probe: ProbeHandle,
    *,
    every: float = 0.5,
    out: TextIO | None = None,
    force: bool = False,
    name: str = "output",
) -> ProgressLine:
    """Show a live progress line for the dataflows of ``worker`` watched by ``probe``.

    Every worker thread of the process may call it with the same ``probe``
    and ``out``: the first call makes the line, the others add their worker
    (their records are counted).  Call :meth:`ProgressLine.finish` at the end
    if the probe may not be done by then.

    >>> import io, timelypy
    >>> def program(worker):
    ...     handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
    ...     worker.dataflow(lambda scope: scope.input_from(handle).probe_with(probe))
    ...     line = show_progress(worker, probe, out=io.StringIO())   # not a terminal
    ...     handle.send_batch([1, 2, 3])
    ...     handle.advance_to(4)
    ...     worker.step_while(lambda: probe.less_than(4))
    ...     handle.close()
    ...     return line.enabled, line.render().split(" | ")[:2]
    >>> timelypy.execute(timelypy.Config.thread(), program)
    [(False, ['timelypy: output at 4', 'inputs at 4'])]
    """
    with _lock:
        line = _lines.get(id(out if out is not None else sys.stderr))
        if line is None or line._finished:
            # every worker watches its own probe of the same frontier: the first one serves
            line = ProgressLine(probe, out=out, every=every, force=force, name=name)
            _lines[id(line.out)] = line
    line.add(worker)
    return line


def _first_int(times: Any) -> int | None:
    ints = [t for t in times if type(t) is int]
    return min(ints) if ints else None


def _epoch(epoch: int | None) -> str:
    return "?" if epoch is None else f"{epoch:,}"


def format_rate(value: float) -> str:
    """A rate or count with a k/M suffix, as the progress lines show them.

    >>> format_rate(1_210_000), format_rate(402.4), format_rate(12_345)
    ('1.21 M', '402', '12.3 k')
    """
    value = max(value, 0.0)
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e4:
        return f"{value / 1e3:.1f} k"
    return f"{value:,.0f}"
