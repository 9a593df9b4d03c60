r"""A first program: per-user sums of JSON events in tumbling windows of event time.

Each line of the input is a JSON event such as ``{"user": "ana", "at":
"2024-05-01T12:00:07+00:00", "amount": 3.5}``.  The flow keys the events by
user, sums ``amount`` in one-minute windows of the events' own timestamps
(an ``EventClock`` that waits 10 s for stragglers), and prints one line per
user and window when the window closes: ``ana 12:00 10.5``.  Events that
come after their window closed are printed as ``late ...`` instead of
being dropped.

Run it on one worker, or through the command line on several::

    python examples/first_tumbling_sums.py events.jsonl
    python -m timelypy.flow "examples/first_tumbling_sums.py:sums('events.jsonl')" -w 2

The same program runs on bytewax 0.21 with ``timelypy.flow`` renamed
``bytewax`` in its imports.
"""

import json
import sys
from datetime import UTC, datetime, timedelta

import timelypy.flow.operators as op
from timelypy.flow.connectors.files import FileSource
from timelypy.flow.connectors.stdio import StdOutSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.operators import windowing as win
from timelypy.flow.testing import run_main

ALIGN = datetime(2024, 1, 1, tzinfo=UTC)


def sums(path="events.jsonl"):
    flow = Dataflow("sums")
    events = op.map("parse", op.input("lines", flow, FileSource(path)), json.loads)
    by_user = op.key_on("by_user", events, lambda event: event["user"])
    clock = win.EventClock(lambda event: datetime.fromisoformat(event["at"]), timedelta(seconds=10))
    windows = win.fold_window(
        "sum",
        by_user,
        clock,
        win.TumblingWindower(timedelta(minutes=1), ALIGN),
        float,
        lambda total, event: total + event["amount"],
        lambda a, b: a + b,
    )

    def show(user_window):
        user, (window_id, total) = user_window
        return f"{user} {(ALIGN + timedelta(minutes=window_id)):%H:%M} {total:g}"

    op.output("out", op.map("show", windows.down, show), StdOutSink())
    op.output("late", op.map("late_show", windows.late, lambda kv: f"late {kv}"), StdOutSink())
    return flow


flow = sums()

if __name__ == "__main__":
    run_main(sums(*sys.argv[1:]))
