"""The driver's live progress line for a run on Spark.

Every worker (task) reports, once a second over its channel to the driver
(``timelypy_spark.task``), the first epoch not yet complete at any of its
operators, the first epoch its sources may still send and the records they
sent.  :class:`DriverProgress` keeps the latest report of each task and, when
the driver's standard error is a terminal, redraws one line at most every
``every`` seconds::

    timelypy flow lines..capture (4 steps) on Spark: epoch 1,204 complete below
    | inputs at 1,210 | 402 epochs/s | 1.21 M records/s | 4/4 tasks reporting

(one line on the terminal), then ends it when the run ends.  Nothing is
written elsewhere (a notebook's or a log's stream), nor while Spark's own
console progress bar is on (``spark.ui.showConsoleProgress``), which draws on
the same terminal; the Spark UI's job description, which Spark fixes when
the job starts, names the run instead (see ``docs/spark.md``).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from timelypy.live import Rates

__all__ = ["DriverProgress"]


class DriverProgress:
    """The latest report of each of ``workers`` tasks, drawn on ``out`` if it is a terminal."""

    def __init__(
        self,
        workers: int,
        name: str,
        out: TextIO | None = None,
        every: float = 0.5,
        *,
        enabled: bool = True,
    ) -> None:
        self.workers = workers
        self.name = name
        self.out = out if out is not None else sys.stderr
        isatty = getattr(self.out, "isatty", None)
        #: Whether the line is drawn (wanted, and the stream is a terminal).
        self.enabled = enabled and bool(isatty and isatty())
        self.every = every
        self.reports: dict[int, dict[str, Any]] = {}
        self._drawn_at = 0.0
        self._rates = Rates()
        self._drawn = False

    def report(self, task: int, body: dict[str, Any]) -> None:
        """Take task ``task``'s report; redraw if it is time."""
        self.reports[task] = body
        now = time.monotonic()
        if self.enabled and now - self._drawn_at >= self.every:
            self._drawn_at = now
            self._write("\r\x1b[K" + self.render(now))
            self._drawn = True

    def render(self, now: float | None = None) -> str:
        """The line for the reports so far."""
        now = time.monotonic() if now is None else now
        reports = list(self.reports.values())
        frontiers = [r["frontier"] for r in reports if r.get("frontier") is not None]
        inputs = [r["inputs"] for r in reports if r.get("inputs") is not None]
        records = sum(int(r.get("records", 0)) for r in reports)
        first = min(frontiers) if frontiers else None
        text = f"timelypy {self.name} on Spark: " + (
            f"epoch {first:,} complete below" if first is not None else "starting"
        )
        if inputs:
            text += f" | inputs at {min(inputs):,}"
        text += self._rates.since_last(now, first, records)
        return text + f" | {len(reports)}/{self.workers} tasks reporting"

    def finish(self) -> None:
        """End the line (a newline), if one was drawn."""
        if self._drawn:
            self._write("\n")
            self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            self.enabled = False
