"""Bad input to a flow: a clear error naming the step and the worker, never a hang."""

from __future__ import annotations

import time
from operator import add

import pytest

from timelypy.errors import FlowError, StateKeyError
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, EmitBatch, ManualInputConfig
from timelypy.flow.outputs import ManualOutputConfig


def notes(exc_info) -> str:
    return "\n".join(getattr(exc_info.value, "__notes__", []))


def keyed(step="stateful_map"):
    flow = Dataflow()
    if step == "stateful_map":
        flow.stateful_map("running", lambda key: 0, lambda s, v: (s + v, s + v))
    elif step == "reduce":
        flow.reduce("sessions", add, lambda acc: False)
    else:
        flow.reduce_epoch(add)
    flow.capture()
    return flow


@pytest.mark.parametrize("step", ["stateful_map", "reduce", "reduce_epoch"])
@pytest.mark.parametrize(
    ("item", "kind"), [("ab", "a str"), (("a", 1, 2), "a tuple"), ((1, 2), "a key of type int")]
)
def test_keyed_steps_take_str_keyed_pairs(step, item, kind):
    with pytest.raises(StateKeyError) as info:
        list(run_cluster(keyed(step), [(0, ("ok", 1)), (0, item)], 1, 2))
    message = str(info.value)
    assert "(key, value) 2-tuples with a str state key" in message
    assert repr(item) in message and kind in message
    assert "on worker 0" in notes(info)


def test_epoch_going_backwards_is_an_error_naming_the_input_and_worker():
    def builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(3)
        yield Emit(1)
        if worker_index == 1:
            yield AdvanceTo(2)

    flow = Dataflow()
    flow.input("numbers", ManualInputConfig(builder))
    flow.capture()
    backwards = r"input step 'numbers' .* on worker 1: the epoch went backwards, from 3 to 2"
    with pytest.raises(FlowError, match=backwards):
        run_cluster(flow, None, 1, 2)
    with pytest.raises(FlowError, match="went backwards, from 5 to 4"):
        list(run(flow_of_capture(), [(5, "a"), (4, "b")]))


def flow_of_capture():
    flow = Dataflow()
    flow.capture()
    return flow


def test_emit_before_advance_to_is_an_error():
    def builder(worker_index, worker_count, resume_epoch):
        yield Emit("x")

    with pytest.raises(FlowError, match=r"yielded Emit\(item='x'\) before any AdvanceTo"):
        list(run(flow_of_capture(), ManualInputConfig(builder)))


def test_input_builder_yielding_something_else_is_an_error():
    def builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(0)
        yield "x"

    with pytest.raises(
        FlowError, match=r"yields AdvanceTo\(epoch\), Emit\(item\) and EmitBatch\(items\), got 'x'"
    ):
        list(run(flow_of_capture(), ManualInputConfig(builder)))


def test_emit_batch_of_something_not_iterable_is_an_error():
    def builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(0)
        yield EmitBatch(5)

    with pytest.raises(FlowError, match=r"EmitBatch takes a list of items, got 5"):
        list(run(flow_of_capture(), ManualInputConfig(builder)))


def test_pairs_that_are_not_pairs_are_an_error():
    with pytest.raises(FlowError, match=r"must yield \(epoch, item\) pairs, got 'abc'"):
        list(run(flow_of_capture(), ["abc"]))


def test_a_flow_without_output_is_an_error():
    flow = Dataflow()
    flow.map(str)
    with pytest.raises(FlowError, match="the flow has no output: add a capture"):
        list(run(flow, [(0, 1)]))


def test_a_raising_mapper_names_step_and_worker_and_keeps_earlier_output():
    def mapper(state, value):
        if value == "boom":
            raise ZeroDivisionError("no")
        return state, value

    flow = Dataflow()
    flow.stateful_map("fragile", lambda key: None, mapper)
    flow.capture()
    got = []
    with pytest.raises(ZeroDivisionError, match="no") as info:
        for pair in run(flow, [(0, ("a", "fine")), (1, ("a", "boom"))]):
            got.append(pair)
    assert got == [(0, ("a", "fine"))]  # emitted before the error: not lost
    text = notes(info)
    assert "in step 'fragile' (stateful_map): raised on key 'a' at epoch 1" in text
    assert "on worker 0" in text


@pytest.mark.parametrize("procs", [1, 2])
def test_a_raising_stateless_function_stops_every_worker_quickly(procs):
    def explode(x):
        if x == 7:
            raise ValueError("bad item 7")
        return x

    flow = Dataflow()
    flow.map(explode, step_id="check")
    flow.capture()
    start = time.monotonic()
    with pytest.raises(ValueError, match="bad item 7") as info:
        run_cluster(flow, ((0, x) for x in range(20)), procs, 2)
    assert time.monotonic() - start < 20
    assert "in step 'check' (map): your function raised at epoch 0" in notes(info)


def test_a_raising_reducer_names_the_step():
    def reducer(a, b):
        raise KeyError("reducer")

    flow = Dataflow()
    flow.reduce_epoch(reducer, step_id="sum")
    flow.capture()
    with pytest.raises(KeyError) as info:
        list(run(flow, [(0, ("a", 1)), (0, ("a", 2))]))
    assert "in step 'sum' (reduce_epoch): the reducer raised on key 'a' at epoch 0" in notes(info)


def test_a_raising_output_names_the_capture_and_keeps_what_was_written():
    written = []

    def output_builder(worker_index, worker_count):
        def write(epoch, item):
            if item == 3:
                raise OSError("disk full")
            written.append(item)

        return write

    flow = Dataflow()
    flow.capture(ManualOutputConfig(output_builder), step_id="to_disk")
    with pytest.raises(OSError, match="disk full") as info:
        run_cluster(flow, [(0, 1), (0, 2), (1, 3)], 1, 1)
    assert written == [1, 2]
    assert "in step 'to_disk' (capture): the output raised writing 3 at epoch 1" in notes(info)


def test_step_ids_are_checked_when_the_flow_is_built():
    flow = Dataflow()
    flow.map(str, step_id="clean")
    twice = r"step ID 'clean' is used twice: by step 0 \(map\) and by step 1 \(filter\)"
    with pytest.raises(FlowError, match=twice):
        flow.filter(bool, step_id="clean")
    with pytest.raises(FlowError, match=r"contains '\.'"):
        flow.map(str, step_id="a.b")
    with pytest.raises(FlowError, match="needs a callable mapper"):
        flow.map(42)
    with pytest.raises(FlowError, match="must be the first step"):
        flow.input("late", ManualInputConfig(lambda i, n, r: iter(())))
    assert [step.step_id for step in flow.steps] == ["clean"]


def test_a_flow_with_an_input_runs_without_another():
    flow = Dataflow()
    flow.input("inp", ManualInputConfig(lambda i, n, r: iter([AdvanceTo(0), Emit(1)])))
    flow.capture()
    assert list(run(flow)) == [(0, 1)]
    with pytest.raises(FlowError, match="already has an input step"):
        list(run(flow, [(0, 1)]))
    with pytest.raises(FlowError, match="the flow has no input"):
        list(run(flow_of_capture()))


def test_breaking_out_of_run_stops_the_flow():
    def forever():
        epoch = 0
        while True:
            yield epoch, epoch
            epoch += 1

    start = time.monotonic()
    for epoch, _item in run(flow_of_capture(), forever()):
        if epoch >= 50:
            break
    assert time.monotonic() - start < 20


def test_a_mapper_that_returns_no_pair_says_what_it_must_return():
    flow = Dataflow()
    flow.stateful_map("bad", lambda key: 0, lambda state, value: state + value)
    flow.capture()
    with pytest.raises(
        FlowError, match=r"the mapper must return a \(new_state, output\) pair, got 1"
    ):
        list(run(flow, [(0, ("a", 1))]))


def test_the_runtime_note_names_the_fused_steps():
    flow = Dataflow()
    flow.map(lambda x: x, step_id="keep")
    flow.map(lambda x: 1 / x, step_id="invert")
    flow.capture()
    with pytest.raises(ZeroDivisionError) as info:
        list(run(flow, [(0, 0)]))
    text = notes(info)
    assert "in step 'invert' (map)" in text
    assert "raised in operator 'keep+invert'" in text


def test_testing_output_with_processes_is_an_error():
    from timelypy.errors import ClusterError
    from timelypy.flow.outputs import TestingOutputConfig

    flow = Dataflow()
    flow.capture(TestingOutputConfig([]))
    # both processes refuse it; the caller's own error or process 1's (which may come
    # first, as a ClusterError quoting it), the message is the same
    with pytest.raises(
        (FlowError, ClusterError), match="TestingOutputConfig appends to a list in one process"
    ):
        run_cluster(flow, [(0, 1)], 2, 1)


def test_leaving_run_early_returns_at_once():
    import itertools
    import threading

    from timelypy.flow.inputs import fully_ordered

    flow = Dataflow()
    flow.map(lambda x: x)
    flow.capture()
    # The input never ends: only stopping the flow lets the loop and its thread
    # end.  The bounds catch a hang, not a slow machine (no timed claim).  Only
    # this flow's thread counts: an earlier test's may still be winding down.
    before = set(threading.enumerate())
    start = time.monotonic()
    for _epoch, item in run(flow, fully_ordered(itertools.count())):
        if item > 20:
            break
    assert time.monotonic() - start < 30
    deadline = time.monotonic() + 30
    while any(t.name == "timelypy-flow" and t not in before for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the flow's thread is still running"
        time.sleep(0.05)


def test_a_caller_that_does_not_read_holds_the_workers_back(monkeypatch):
    """The captured items waiting for ``run``'s caller stay bounded: the input is not drained."""
    import importlib
    import itertools

    from timelypy.flow.inputs import single_batch

    monkeypatch.setattr(importlib.import_module("timelypy.flow.run"), "QUEUE_ITEMS", 100)
    pulled = itertools.count()

    def source():
        for i in itertools.count():
            next(pulled)
            yield i

    flow = Dataflow()
    flow.map(lambda x: x)
    flow.capture()
    results = run(flow, single_batch(source()))
    first = next(results)
    assert first[0] == 0
    time.sleep(0.5)  # the worker runs on while we do not read
    waiting = next(pulled)
    time.sleep(0.5)
    assert next(pulled) - waiting <= 1 + 2, "the worker kept reading input nobody consumed"
    assert waiting < 100 + 2 * 1024 + 10  # the bound, one batch over it, and a pull in flight
    results.close()


@pytest.mark.parametrize("items", ["hello", b"ab", {"k": 1}])
def test_emit_batch_of_one_value_is_an_error(items):
    # a str, bytes or a dict is one value, not a batch of them
    def builder(worker_index, worker_count, resume_epoch):
        yield AdvanceTo(0)
        yield EmitBatch(items)

    with pytest.raises(FlowError, match=r"EmitBatch takes a list of items, got a (str|bytes|dict)"):
        list(run(flow_of_capture(), ManualInputConfig(builder)))


def test_an_input_builder_yielding_none_first_is_an_error_not_an_empty_input():
    def builder(worker_index, worker_count, resume_epoch):
        yield None
        yield AdvanceTo(0)
        yield Emit(1)

    with pytest.raises(FlowError, match=r"yielded None before any AdvanceTo"):
        list(run(flow_of_capture(), ManualInputConfig(builder)))


@pytest.mark.parametrize("error", [ValueError, TypeError])
@pytest.mark.parametrize("at", [0, 2])
def test_a_stateful_map_mapper_raising_is_reported_as_itself(error, at):
    """The mapper's own TypeError/ValueError is not taken for a wrong return shape.

    The first item's error was once reported as "must return a 2-tuple, got None".
    """
    import timelypy.flow.operators as op
    from timelypy.errors import StepError
    from timelypy.flow.dataflow import Dataflow as GraphFlow
    from timelypy.flow.testing import TestingSink, TestingSource, run_main

    def mapper(state, value):
        if value == at:
            raise error(f"refusing {value}")
        return (state or 0) + value, value

    flow = GraphFlow("mapper_raises")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(range(4))), lambda v: "k")
    op.output("out", op.stateful_map("sum", keyed, mapper), TestingSink([]))
    with pytest.raises(StepError) as raised:
        run_main(flow)
    message = str(raised.value)
    assert f"{error.__name__}: refusing {at}" in message, message
    assert "2-tuple" not in message
    assert type(raised.value.__cause__) is error


def test_a_stateful_map_mapper_returning_a_wrong_shape_is_named():
    import timelypy.flow.operators as op
    from timelypy.errors import StepError
    from timelypy.flow.dataflow import Dataflow as GraphFlow
    from timelypy.flow.testing import TestingSink, TestingSource, run_main

    flow = GraphFlow("mapper_shape")
    keyed = op.key_on("key", op.input("inp", flow, TestingSource(range(4))), lambda v: "k")
    op.output("out", op.stateful_map("sum", keyed, lambda state, value: value), TestingSink([]))
    with pytest.raises(StepError, match=r"must return a 2-tuple .*got 0"):
        run_main(flow)
