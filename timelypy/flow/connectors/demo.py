"""Made-up data to try flows with: :class:`RandomMetricSource`.

>>> from datetime import timedelta
>>> from timelypy.flow.dataflow import Dataflow
>>> import timelypy.flow.operators as op
>>> from timelypy.flow.testing import run_to_list
>>> source = RandomMetricSource("cpu", timedelta(0), count=3, next_random=lambda: 7)
>>> run_to_list(op.input("metrics", Dataflow("demo"), source))
[('cpu', 7), ('cpu', 7), ('cpu', 7)]
"""

from __future__ import annotations

import datetime
import random
import sys
from collections.abc import Callable
from typing import Any

from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["RandomMetricSource"]


def _digit() -> float:
    return random.randrange(0, 10)


class _Metrics(StatefulSourcePartition[tuple[str, float], int]):
    def __init__(self, source: RandomMetricSource, emitted: int) -> None:
        self._source = source
        self._emitted = emitted
        self._awake = datetime.datetime.now(datetime.UTC)

    def next_batch(self) -> list[tuple[str, float]]:
        source = self._source
        if self._emitted >= source.count:
            raise StopIteration()
        self._emitted += 1
        self._awake = datetime.datetime.now(datetime.UTC) + source.interval
        return [(source.metric_name, source.next_random())]

    def next_awake(self) -> datetime.datetime:
        return self._awake

    def snapshot(self) -> int:
        return self._emitted


class RandomMetricSource(FixedPartitionedSource[tuple[str, float], int]):
    """``(metric_name, next_random())`` every ``interval``, ``count`` times (one partition)."""

    def __init__(
        self,
        metric_name: str,
        interval: datetime.timedelta = datetime.timedelta(seconds=0.7),
        count: int = sys.maxsize,
        next_random: Callable[[], Any] = _digit,
    ) -> None:
        self.metric_name = metric_name
        self.interval = interval
        self.count = count
        self.next_random = next_random

    def list_parts(self) -> list[str]:
        """One partition, named after the metric."""
        return [self.metric_name]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[tuple[str, float], int]:
        """The metric's generator, resumed after ``resume_state`` values."""
        return _Metrics(self, resume_state or 0)
