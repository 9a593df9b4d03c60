"""Flows that must type-check under ``mypy --strict`` (checked by test_typing.py)."""

from __future__ import annotations

import datetime

import timelypy.flow.operators as op
from timelypy.flow.connectors.stdio import StdOutSink
from timelypy.flow.dataflow import Dataflow, Stream, operator
from timelypy.flow.operators import KeyedStream
from timelypy.flow.testing import TestingSink, TestingSource, run_main


def parse(line: str) -> tuple[str, float]:
    user, amount = line.split(",")
    return user, float(amount)


def running_mean(
    state: tuple[int, float] | None, value: float
) -> tuple[tuple[int, float] | None, float]:
    count, total = state or (0, 0.0)
    count, total = count + 1, total + value
    return (count, total), total / count


@operator
def parse_and_key(step_id: str, up: Stream[str]) -> KeyedStream[float]:
    return op.map("parse", up, parse)


flow = Dataflow("typed")
lines: Stream[str] = op.input("lines", flow, TestingSource(["ann,1.5", "bob,2"]))
amounts: KeyedStream[float] = parse_and_key("parse", lines)
means: KeyedStream[float] = op.stateful_map("mean", amounts, running_mean)
big = op.branch("big", means, lambda kv: kv[1] > 1.0)
totals: KeyedStream[float] = op.reduce_final("total", amounts, lambda a, b: a + b)
counts: KeyedStream[int] = op.count_final("count", lines, lambda line: line[0])
joined = op.join("both", totals, counts)
words: Stream[str] = op.flat_map("words", lines, str.split)
lengths: Stream[int] = op.map("len", words, len)
batches: Stream[list[float]] = op.key_rm(
    "rm", op.collect("collect", amounts, datetime.timedelta(seconds=1), 10)
)
merged: Stream[object] = op.merge("merged", lengths, big.trues)
out: list[tuple[str, tuple[object, ...]]] = []
op.output("out", joined, TestingSink(out))
op.output("print", merged, StdOutSink())

if __name__ == "__main__":
    run_main(flow)
