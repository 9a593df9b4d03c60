"""``StatefulSinkPartition.Retry``: an epoch a partition cannot make durable yet is held open.

The engine side of the connectors' reconnects, without a server: a
partition whose ``snapshot()`` raises ``Retry`` keeps its epoch open while
the worker runs its other steps, gets no ``write_batch`` of a later epoch
meanwhile, and is asked again until it succeeds or raises its own error.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy.flow.operators as op
from timelypy.errors import FlowError, StepError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from .graph_helpers import ZERO

PAUSE = datetime.timedelta(milliseconds=1)


class Flaky(FixedPartitionedSink[int, int]):
    """One partition; its snapshots number ``stalls`` raise ``Retry`` until ``ready()`` holds.

    ``events`` records ``("write", values)``, ``("retry", n)`` and
    ``("snapshot", n)`` (``n``: the epochs the partition closed before).
    ``give_up``: after so many Retries of one snapshot, raise the error instead.
    """

    def __init__(
        self, events: list[Any], stalls: set[int], ready: Any, give_up: int | None = None
    ) -> None:
        self.events, self.stalls, self.ready, self.give_up = events, stalls, ready, give_up

    def list_parts(self) -> list[str]:
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        return _FlakyPart(self)


class _FlakyPart(StatefulSinkPartition[int, int]):
    def __init__(self, sink: Flaky) -> None:
        self.sink, self.closed, self.tries = sink, 0, 0

    def write_batch(self, values: list[int]) -> None:
        self.sink.events.append(("write", list(values)))

    def snapshot(self) -> int:
        sink = self.sink
        if self.closed in sink.stalls and not sink.ready():
            self.tries += 1
            if sink.give_up is not None and self.tries >= sink.give_up:
                raise FlowError(f"partition 'only': cannot reach the server after {self.tries}")
            sink.events.append(("retry", self.closed))
            raise StatefulSinkPartition.Retry(PAUSE)
        self.tries = 0
        sink.events.append(("snapshot", self.closed))
        self.closed += 1
        return self.closed


def _flow(items: list[int], sink: Flaky, beside: list[int]) -> Dataflow:
    flow = Dataflow("retry")
    inp = op.input("inp", flow, TestingSource(items))
    op.output("out", op.map("keyed", inp, lambda x: ("k", x)), sink)
    op.output("beside", inp, TestingSink(beside))
    return flow


def _check_held(events: list[Any]) -> None:
    """After a Retry, nothing is written until that snapshot succeeds."""
    waiting: int | None = None
    for kind, n in events:
        if kind == "retry":
            assert waiting in (None, n)
            waiting = n
        elif waiting is not None:
            assert (kind, n) == ("snapshot", waiting), events
            waiting = None
    assert waiting is None


def test_a_held_epoch_leaves_the_worker_to_its_other_steps_and_writes_nothing_later_meanwhile():
    events: list[Any] = []
    beside: list[int] = []
    # the first epoch's snapshot succeeds only once the other output has received 20
    # items: a worker that kept asking (or blocked) in the sink would never get there
    sink = Flaky(events, {0}, lambda: len(beside) >= 20)
    run_main(_flow(list(range(100)), sink, beside), epoch_interval=ZERO)
    assert beside == list(range(100))
    assert [kind for kind, _ in events].count("retry") >= 1
    _check_held(events)
    written = [v for kind, values in events if kind == "write" for v in values]
    assert written == list(range(100))  # in epoch order, each once
    snapshots = [n for kind, n in events if kind == "snapshot"]
    assert snapshots == list(range(len(snapshots)))  # each epoch's close once, in order


@settings(max_examples=15, deadline=None)
@given(
    count=st.integers(1, 40),
    stalls=st.sets(st.integers(0, 40), max_size=6),
    batch=st.integers(1, 7),
)
def test_any_epochs_held_any_number_of_times_write_everything_once_in_order(count, stalls, batch):
    events: list[Any] = []
    beside: list[int] = []
    asked = [0]

    def ready() -> bool:  # each stalled snapshot is refused twice, then accepted
        asked[0] += 1
        return asked[0] % 3 == 0

    flow = Dataflow("retry")
    inp = op.input("inp", flow, TestingSource(list(range(count)), batch_size=batch))
    op.output("out", op.map("keyed", inp, lambda x: ("k", x)), Flaky(events, stalls, ready))
    op.output("beside", inp, TestingSink(beside))
    run_main(flow, epoch_interval=ZERO)
    _check_held(events)
    written = [v for kind, values in events if kind == "write" for v in values]
    assert written == list(range(count))
    closed = [n for kind, n in events if kind == "snapshot"]
    assert closed == list(range(len(closed)))
    retried = [n for kind, n in events if kind == "retry"]
    assert {n: retried.count(n) for n in stalls} == {n: 2 if n < len(closed) else 0 for n in stalls}


@pytest.mark.timeout(120)
def test_a_partition_that_gives_up_ends_the_run_with_its_error_naming_step_and_partition():
    events: list[Any] = []
    sink = Flaky(events, {0}, lambda: False, give_up=5)
    with pytest.raises(StepError, match=r"output step 'retry\.out'.*partition 'only'") as info:
        run_main(_flow(list(range(50)), sink, []), epoch_interval=ZERO)
    assert "cannot reach the server after 5" in str(info.value)
    first = [kind for kind, _ in events].index("retry")
    assert [kind for kind, _ in events[first:]] == ["retry"] * 4  # nothing written meanwhile
