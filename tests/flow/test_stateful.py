"""Stateful steps: state per key, items applied in epoch order on every worker."""

from __future__ import annotations

import time
from operator import add

from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.flow.outputs import TestingOutputConfig


def racing_builder(worker_index, worker_count, resume_epoch):
    """Worker 1 emits epochs 0..9 at once; worker 0 emits the same key slowly."""
    for epoch in range(10):
        yield AdvanceTo(epoch)
        if worker_index == 1:
            yield Emit(("k", f"w1e{epoch}"))
        else:
            time.sleep(0.002)
            yield Emit(("k", f"w0e{epoch}"))


def test_stateful_map_applies_items_in_epoch_order_across_workers():
    def mapper(history, value):
        history = [*history, value]
        return history, list(history)

    flow = Dataflow()
    flow.stateful_map("history", lambda key: [], mapper)
    flow.capture()
    out = run_cluster(flow, ManualInputConfig(racing_builder), 1, 3)
    seen = max((item[1] for _, item in out), key=len)
    epochs = [int(value.split("e")[1]) for value in seen]
    assert epochs == sorted(epochs) and len(seen) == 30  # 10 epochs x 3 workers
    # every output is in the epoch of its input
    for epoch, (_key, history) in out:
        assert int(history[-1].split("e")[1]) == epoch


def test_stateful_map_builder_gets_the_key_and_none_forgets():
    flow = Dataflow()
    flow.stateful_map(
        "resets",
        lambda key: f"<{key}>",
        lambda state, value: (None if value == "reset" else state + value, state + value),
    )
    flow.capture()
    pairs = [(0, ("a", "1")), (1, ("a", "reset")), (2, ("a", "2")), (2, ("b", "3"))]
    assert sorted(run(flow, pairs)) == [
        (0, ("a", "<a>1")),
        (1, ("a", "<a>1reset")),
        (2, ("a", "<a>2")),
        (2, ("b", "<b>3")),
    ]


def test_reduce_emits_when_complete_and_forgets_the_key():
    flow = Dataflow()
    flow.reduce("pairs", add, lambda acc: len(acc) == 2)
    flow.capture()
    pairs = [(0, ("a", [1])), (0, ("b", [5])), (1, ("a", [2])), (2, ("a", [3])), (3, ("a", [4]))]
    assert sorted(run_cluster(flow, pairs, 1, 2)) == [(1, ("a", [1, 2])), (3, ("a", [3, 4]))]


def test_reduce_epoch_state_does_not_carry_over_and_local_does_not_exchange():
    pairs = [(0, ("a", 1)), (0, ("a", 1)), (1, ("a", 1))]
    flow = Dataflow()
    flow.reduce_epoch(add)
    flow.capture()
    assert sorted(run(flow, pairs)) == [(0, ("a", 2)), (1, ("a", 1))]

    def builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(0)
        yield Emit(("a", 1))
        yield Emit(("a", 1))

    flow = Dataflow()
    flow.reduce_epoch_local(add)
    flow.capture()
    assert sorted(run_cluster(flow, ManualInputConfig(builder), 1, 2)) == [
        (0, ("a", 2)),
        (0, ("a", 2)),
    ]
    flow = Dataflow()
    flow.reduce_epoch(add)
    flow.capture()
    assert run_cluster(flow, ManualInputConfig(builder), 1, 2) == [(0, ("a", 4))]


def test_state_sees_every_epoch_close_with_the_keys_it_touched():
    from timelypy import Config, execute
    from timelypy.flow.driver import flow_program

    flow = Dataflow()
    flow.stateful_map("count", lambda key: 0, lambda n, v: (n + 1, n + 1))
    sink = []
    flow.capture(TestingOutputConfig(sink))
    closes = []

    def watch(runner):
        state = runner.states["count"]
        state.on_close(lambda epoch, keys: closes.append((epoch, sorted(keys), dict(state.states))))

    pairs = [(0, ("a", 1)), (0, ("b", 1)), (2, ("a", 1))]
    from timelypy.flow.driver import PairsInput

    execute(Config.thread(), flow_program(flow, PairsInput(pairs), on_built=watch))
    assert closes == [(0, ["a", "b"], {"a": 1, "b": 1}), (2, ["a"], {"a": 2, "b": 1})]
    assert sorted(sink) == [(0, ("a", 1)), (0, ("b", 1)), (2, ("a", 2))]
