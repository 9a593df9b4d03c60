"""A first stateful program: each sensor's running mean, and alerts for outliers.

The input is JSON events, one a line, such as ``{"sensor": "a", "value": 3.5}``.
It shows keyed state: ``key_on`` routes every event of a sensor to the same
worker, where ``stateful_map`` keeps that sensor's ``(count, total)`` and adds
the running mean (and how far the value is from the mean of the values
before it) to each event.  One stream then goes to two outputs: every
event's mean, and, through ``filter``, the events more than ``threshold`` off
their sensor's mean.  ``running_mean(path, threshold)`` builds the flow;
``flow`` is the one over ``events.jsonl`` in the current directory.

Run it on one worker (the threshold is optional, 10 by default)::

    python examples/first_running_mean.py events.jsonl 5

or through the command line, on several workers or processes (a factory call
with literal arguments picks the file and the threshold)::

    python -m timelypy.flow examples/first_running_mean.py:flow           # events.jsonl
    python -m timelypy.flow "examples/first_running_mean.py:running_mean('events.jsonl', 5)" -w 2

It prints ``a mean 3.50`` for every event, and ``ALERT a: 30 is +26.00 off
its mean`` for an outlier.  A sensor's lines come in the order of its events;
the lines of different sensors interleave in no particular order.  The same
program runs on bytewax 0.21 with ``timelypy.flow`` renamed ``bytewax`` in its
imports.
"""

import json
import sys

import timelypy.flow.operators as op
from timelypy.flow.connectors.files import FileSource
from timelypy.flow.connectors.stdio import StdOutSink
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.testing import run_main

MEAN = "{sensor} mean {mean:.2f}"
ALERT = "ALERT {sensor}: {value} is {deviation:+.2f} off its mean"


def add_mean(state, event):
    count, total = state or (0, 0.0)
    deviation = event["value"] - total / count if count else 0.0
    count, total = count + 1, total + event["value"]
    return (count, total), {**event, "mean": total / count, "deviation": deviation}


def running_mean(path="events.jsonl", threshold=10.0):
    flow = Dataflow("running_mean")
    events = op.map("parse", op.input("lines", flow, FileSource(path)), json.loads)
    by_sensor = op.key_on("by_sensor", events, lambda event: event["sensor"])
    means = op.key_rm("unkey", op.stateful_map("mean", by_sensor, add_mean))
    alerts = op.filter("outliers", means, lambda event: abs(event["deviation"]) > float(threshold))
    op.output("means", op.map("show_mean", means, MEAN.format_map), StdOutSink())
    op.output("alerts", op.map("show_alert", alerts, ALERT.format_map), StdOutSink())
    return flow


flow = running_mean()

if __name__ == "__main__":
    run_main(running_mean(*sys.argv[1:]))
