"""The stream graph: every operator on one worker, threads and processes; its errors."""

from __future__ import annotations

import datetime
import itertools
import threading
import time
from collections import Counter
from operator import add
from typing import Any

import pytest

import timelypy.flow.operators as op
import timelypy.flow.sources as op_sources
from timelypy.errors import FlowError, StateKeyError, StepError
from timelypy.flow import run
from timelypy.flow.dataflow import Dataflow, Stream, operator
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.sources import (
    DynamicSource,
    FixedPartitionedSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from .graph_helpers import BACKENDS, ZERO, collect

WORDS = "the quick brown fox jumps over the lazy dog the end".split()


def source(items: list[Any], batch_size: int = 2) -> TestingSource[Any]:
    return TestingSource(items, batch_size)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stateless_operators(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        lines = op.input("lines", flow, source(["a b", "c", "dd ee f"]))
        words = op.flat_map("split", lines, str.split)
        return {
            "map": op.map("upper", words, str.upper),
            "filter": op.filter("short", words, lambda w: len(w) == 1),
            "filter_map": op.filter_map("dd", words, lambda w: w * 2 if w != "c" else None),
            "flatten": op.flatten("chars", op.map("list", words, list)),
            "batch": op.flat_map_batch("lens", words, lambda batch: [len(batch)]),
            "keyed": op.key_rm(
                "rm",
                op.map_value("len", op.key_on("key", words, lambda w: w[0]), len),
            ),
        }

    out = collect(backend, tmp_path, build)
    words = ["a", "b", "c", "dd", "ee", "f"]
    assert sorted(out["map"]) == sorted(w.upper() for w in words)
    assert sorted(out["filter"]) == ["a", "b", "c", "f"]
    assert sorted(out["filter_map"]) == sorted(["aa", "bb", "dddd", "eeee", "ff"])
    assert sorted(out["flatten"]) == sorted("abcddeef")
    assert sum(out["batch"]) == 6
    assert sorted(out["keyed"]) == [1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_operators(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        pairs = op.input("pairs", flow, source([("a", 1), ("b", 2), ("a", 3), ("c", 4)]))
        return {
            "filter_value": op.filter_value("odd", pairs, lambda v: v % 2 == 1),
            "filter_map_value": op.filter_map_value(
                "half", pairs, lambda v: v // 2 if v % 2 == 0 else None
            ),
            "flat_map_value": op.flat_map_value("rep", pairs, lambda v: [v] * (v % 3)),
        }

    out = collect(backend, tmp_path, build)
    assert sorted(out["filter_value"]) == [("a", 1), ("a", 3)]
    assert sorted(out["filter_map_value"]) == [("b", 1), ("c", 2)]
    assert sorted(out["flat_map_value"]) == [("a", 1), ("b", 2), ("b", 2), ("c", 4)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_merge_and_redistribute(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        numbers = op.input("numbers", flow, source(list(range(20)), batch_size=3))
        split = op.branch("even", numbers, lambda x: x % 2 == 0)
        tens = op.map("tens", split.trues, lambda x: x * 10)
        both = op.merge("both", tens, split.falses, op.input("more", flow, source([100, 101])))
        return {
            "trues": split.trues,
            "falses": split.falses,
            "merged": op.redistribute("spread", both),
        }

    out = collect(backend, tmp_path, build)
    assert sorted(out["trues"]) == list(range(0, 20, 2))
    assert sorted(out["falses"]) == list(range(1, 20, 2))
    assert sorted(out["merged"]) == sorted(
        [x * 10 for x in range(0, 20, 2)] + list(range(1, 20, 2)) + [100, 101]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_finals(backend, tmp_path):
    values = [("a", 3), ("b", 1), ("a", 5), ("b", 7), ("c", 2), ("a", 1)]

    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        pairs = op.input("pairs", flow, source(values, batch_size=2))
        words = op.input("words", flow, source(WORDS, batch_size=3))
        return {
            "count": op.count_final("count", words, lambda w: w),
            "fold": op.fold_final("fold", pairs, list, lambda acc, v: sorted([*acc, v])),
            "reduce": op.reduce_final("reduce", pairs, add),
            "max": op.max_final("max", pairs),
            "min": op.min_final("min", pairs, by=lambda v: -v),
        }

    out = collect(backend, tmp_path, build)
    assert sorted(out["count"]) == sorted(Counter(WORDS).items())
    assert sorted(out["fold"]) == [("a", [1, 3, 5]), ("b", [1, 7]), ("c", [2])]
    assert sorted(out["reduce"]) == [("a", 9), ("b", 8), ("c", 2)]
    assert sorted(out["max"]) == [("a", 5), ("b", 7), ("c", 2)]
    assert sorted(out["min"]) == [("a", 5), ("b", 7), ("c", 2)]


def _running_mean(state: tuple[int, int] | None, value: int) -> tuple[Any, Any]:
    count, total = state or (0, 0)
    count, total = count + 1, total + value
    return ((count, total) if count < 3 else None), total / count


@pytest.mark.parametrize("backend", BACKENDS)
def test_stateful_map_and_flat_map(backend, tmp_path):
    values = [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 10)]

    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        # one item an epoch: the order within a key is the epoch order on every backend
        pairs = op.input("pairs", flow, source(values, batch_size=1))
        return {
            "mean": op.stateful_map("mean", pairs, _running_mean),
            "flat": op.stateful_flat_map(
                "flat", pairs, lambda seen, v: ((seen or 0) + 1, [v] * ((seen or 0) + 1))
            ),
        }

    out = collect(backend, tmp_path, build)
    # the state is dropped (None) after three values: the fourth starts afresh
    assert sorted(out["mean"]) == [("a", 1.0), ("a", 1.5), ("a", 2.0), ("a", 4.0), ("b", 10.0)]
    assert Counter(out["flat"]) == Counter(
        {("a", 1): 1, ("a", 2): 2, ("a", 3): 3, ("a", 4): 4, ("b", 10): 1}
    )


def _join(backend: str, tmp_path: Any, insert: str, emit: str) -> list[Any]:
    left = [("k", 1), ("k", 2), ("x", 9), ("k", 3)]
    right = [("k", "A"), ("k", "B")]

    def build(flow: Dataflow) -> Stream[Any]:
        # the sides take turns, an epoch at a time, as bytewax reads them in its test
        turns = [("l", item) for item in left[:2]] + [("r", right[0])]
        turns += [("l", left[2]), ("r", right[1]), ("l", left[3])]
        both = op.input("both", flow, TestingSource(turns))
        split = op.branch("side", both, lambda t: t[0] == "l")
        a = op.map("a", split.trues, lambda t: t[1])
        b = op.map("b", split.falses, lambda t: t[1])
        return op.join("join", a, b, insert_mode=insert, emit_mode=emit)

    return sorted(collect(backend, tmp_path, build), key=repr)


@pytest.mark.parametrize("backend", BACKENDS)
def test_join_modes(backend, tmp_path):
    assert _join(backend, tmp_path / "lf", "last", "final") == [("k", (3, "B")), ("x", (9, None))]
    assert _join(backend, tmp_path / "lc", "last", "complete") == [
        ("k", (2, "A")),
        ("k", (3, "B")),
    ]
    assert _join(backend, tmp_path / "fc", "first", "complete") == [
        ("k", (1, "A")),
        ("k", (3, "B")),
    ]
    product = _join(backend, tmp_path / "pf", "product", "final")
    assert sorted(product, key=repr) == sorted(
        [("k", row) for row in itertools.product([1, 2, 3], ["A", "B"])] + [("x", (9, None))],
        key=repr,
    )
    running = _join(backend, tmp_path / "lr", "last", "running")
    assert len(running) == 6 and ("k", (3, "B")) in running and ("x", (9, None)) in running


def test_join_complete_matches_bytewax_order():
    # the sides interleave as the items arrive; with one worker and one item an epoch
    # the result is bytewax's: k's first two values pair with A and B in turn
    flow = Dataflow("j")
    a = op.input("a", flow, TestingSource([("k", 1), ("k", 2), ("x", 9), ("k", 3)]))
    b = op.input("b", flow, TestingSource([("k", "A"), ("k", "B")]))
    out: list[Any] = []
    op.output("out", op.join("join", a, b), TestingSink(out))
    run_main(flow, epoch_interval=ZERO)
    assert sorted(out) == [("k", (1, "A")), ("k", (2, "B"))]


def test_collect_by_size_timeout_and_end():
    flow = Dataflow("c")
    pairs = op.input("pairs", flow, TestingSource([("k", 1), ("k", 2), ("k", 3), ("j", 1)]))
    out: list[Any] = []
    op.output(
        "out", op.collect("collect", pairs, datetime.timedelta(seconds=10), 2), TestingSink(out)
    )
    run_main(flow)
    assert sorted(out) == [("j", [1]), ("k", [1, 2]), ("k", [3])]

    flow = Dataflow("c")
    items = [("k", 1), TestingSource.PAUSE(datetime.timedelta(seconds=0.3)), ("k", 2)]
    pairs = op.input("pairs", flow, TestingSource(items))
    out = []
    op.output(
        "out", op.collect("collect", pairs, datetime.timedelta(seconds=0.05), 5), TestingSink(out)
    )
    run_main(flow)
    assert out == [("k", [1]), ("k", [2])]


class _Alarm(op.StatefulLogic[int, str, int]):
    """Sums values; emits the sum on a timer and at the end."""

    def __init__(self, total: int | None) -> None:
        self.total = total or 0
        self.due: datetime.datetime | None = None

    def on_item(self, value: int) -> tuple[list[str], bool]:
        self.total += value
        self.due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.05)
        return [f"item {self.total}"], op.StatefulLogic.RETAIN

    def on_notify(self) -> tuple[list[str], bool]:
        self.due = None
        return [f"timer {self.total}"], op.StatefulLogic.RETAIN

    def on_eof(self) -> tuple[list[str], bool]:
        return [f"eof {self.total}"], op.StatefulLogic.DISCARD

    def notify_at(self) -> datetime.datetime | None:
        return self.due

    def snapshot(self) -> int:
        return self.total


def test_stateful_logic_items_timers_and_end():
    flow = Dataflow("s")
    items = [("k", 1), ("k", 2), TestingSource.PAUSE(datetime.timedelta(seconds=0.3)), ("k", 4)]
    out: list[Any] = []
    op.output(
        "out",
        op.stateful("alarm", op.input("inp", flow, TestingSource(items)), _Alarm),
        TestingSink(out),
    )
    run_main(flow)
    values = [value for _, value in out]
    assert values[:3] == ["item 1", "item 3", "timer 3"]
    assert values[-2:] == ["item 7", "eof 7"]


def test_enrich_cached_fetches_once_per_ttl():
    fetched: list[str] = []

    def getter(key: str) -> int:
        fetched.append(key)
        return len(key)

    flow = Dataflow("e")
    words = op.input("words", flow, TestingSource(["ab", "abc", "ab", "ab"], batch_size=4))
    out: list[Any] = []
    enriched = op.enrich_cached("lens", words, getter, lambda cache, w: (w, cache.get(w)))
    op.output("out", enriched, TestingSink(out))
    run_main(flow)
    assert out == [("ab", 2), ("abc", 3), ("ab", 2), ("ab", 2)]
    assert fetched == ["ab", "abc"]


def test_inspect_and_inspect_debug_print(capsys):
    flow = Dataflow("i")
    s = op.input("inp", flow, TestingSource([1]))
    op.inspect_debug("dbg", op.inspect("see", s))
    run_main(flow, epoch_interval=ZERO)
    assert capsys.readouterr().out.splitlines() == ["i.see: 1", "i.dbg W0 @0: 1"]


def test_a_composite_operator_nests_its_step_ids():
    @operator
    def double_then_inc(step_id: str, up: Stream[int]) -> Stream[int]:
        return op.map("inc", op.map("double", up, lambda x: 2 * x), lambda x: x + 1)

    flow = Dataflow("f")
    out: list[int] = []
    op.output(
        "out",
        double_then_inc("calc", op.input("inp", flow, TestingSource([1, 2]))),
        TestingSink(out),
    )
    assert [step.step_id for step in flow.steps] == [
        "f.inp",
        "f.calc.double",
        "f.calc.inc",
        "f.out",
    ]
    run_main(flow)
    assert out == [3, 5]
    with pytest.raises(FlowError, match=r"'f.calc' is used twice"):
        double_then_inc("calc", op.input("inp2", flow, TestingSource([1])))


# -- sources and sinks ----------------------------------------------------------------


class _Numbers(FixedPartitionedSource[int, int]):
    """Partitions p0..p{n-1}; partition i emits i*100 + 0..count-1, resumable."""

    def __init__(self, parts: int, count: int) -> None:
        self.parts, self.count = parts, count

    def list_parts(self) -> list[str]:
        return [f"p{i}" for i in range(self.parts)]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        return _NumbersPart(int(for_part[1:]) * 100, self.count, resume_state or 0)


class _NumbersPart(StatefulSourcePartition[int, int]):
    def __init__(self, base: int, count: int, at: int) -> None:
        self.base, self.count, self.at = base, count, at

    def next_batch(self) -> list[int]:
        if self.at >= self.count:
            raise StopIteration()
        self.at += 1
        return [self.base + self.at - 1]

    def snapshot(self) -> int:
        return self.at


class _PerWorker(DynamicSource[int]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        return _PerWorkerPart(worker_index)


class _PerWorkerPart(StatelessSourcePartition[int]):
    def __init__(self, index: int) -> None:
        self.left = [index * 1000 + i for i in range(3)]

    def next_batch(self) -> list[int]:
        if not self.left:
            raise StopIteration()
        return [self.left.pop(0)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_partitioned_and_dynamic_sources(backend, tmp_path):
    def build(flow: Dataflow) -> dict[str, Stream[Any]]:
        return {
            "fixed": op.input("fixed", flow, _Numbers(3, 4)),
            "dynamic": op.input("dynamic", flow, _PerWorker()),
        }

    out = collect(backend, tmp_path, build)
    assert sorted(out["fixed"]) == [p * 100 + i for p in range(3) for i in range(4)]
    workers = {"one": 1, "threads": 3, "processes": 4}[backend]
    assert sorted(out["dynamic"]) == [w * 1000 + i for w in range(workers) for i in range(3)]


def test_run_runs_a_flow_whose_result_is_never_read():
    flow = Dataflow("r")
    out: list[int] = []
    op.output("out", op.input("inp", flow, TestingSource(list(range(100)))), TestingSink(out))
    run(flow)  # the result is dropped at once: the flow still runs to its end
    assert sorted(out) == list(range(100))

    chain = Dataflow()
    seen: list[Any] = []
    chain.inspect(seen.append)
    chain.capture()
    result = run(chain, [(0, "a"), (1, "b")])
    del result
    assert seen == ["a", "b"]


# -- bad input -----------------------------------------------------------------------


def test_a_stream_of_another_flow_is_refused():
    one, two = Dataflow("one"), Dataflow("two")
    a = op.input("a", one, TestingSource([1]))
    b = op.input("b", two, TestingSource([2]))
    with pytest.raises(FlowError, match=r"'two.both'.*another Dataflow"):
        op.merge("both", b, a)


def test_a_step_id_used_twice_is_refused():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    op.map("m", s, str)
    with pytest.raises(FlowError, match=r"step ID 'f.m' is used twice"):
        op.map("m", s, str)
    with pytest.raises(FlowError, match=r"contains '.'"):
        op.map("a.b", s, str)


@pytest.mark.parametrize(
    "build",
    [
        lambda s: op.stateful_map("keyed", s, lambda st, v: (st, v)),
        lambda s: op.fold_final("keyed", s, list, lambda a, v: a),
        lambda s: op.join("keyed", s, s),
    ],
    ids=["stateful_map", "fold_final", "join"],
)
def test_a_non_str_key_names_the_step(build):
    flow = Dataflow("f")
    out: list[Any] = []
    op.output("out", build(op.input("inp", flow, TestingSource([(1, "one")]))), TestingSink(out))
    with pytest.raises(StateKeyError, match=r"step 'f.keyed'.*a key of type int"):
        run_main(flow)


def test_a_join_of_streams_that_are_not_keyed_names_the_step():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource(["plain"]))
    op.output("out", op.join("j", s, s), TestingSink([]))
    with pytest.raises(StateKeyError, match=r"step 'f.j'.*'plain'"):
        run_main(flow)


def test_a_user_function_that_raises_is_a_step_error_with_its_cause():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1, 0]))
    op.output("out", op.map("invert", s, lambda x: 1 / x), TestingSink([]))
    message = r"step 'f.invert' on worker 0, epoch 0: the mapper"
    with pytest.raises(StepError, match=message) as info:
        run_main(flow)
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value.__cause__, ZeroDivisionError)

    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([("k", 1)]))

    def broken(state: Any, value: Any) -> Any:
        raise KeyError("mine")

    op.output("out", op.stateful_map("sm", s, broken), TestingSink([]))
    with pytest.raises(StepError, match=r"step 'f.sm' on worker 0") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, KeyError)


class _Broken(FixedPartitionedSource[int, None]):
    def list_parts(self) -> list[str]:
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> Any:
        return _BrokenPart()


class _BrokenPart(StatefulSourcePartition[int, None]):
    def next_batch(self) -> list[int]:
        raise OSError("disk gone")

    def snapshot(self) -> None:
        return None


class _BrokenSink(DynamicSink[Any]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        return _BrokenSinkPart()


class _BrokenSinkPart(StatelessSinkPartition[Any]):
    def write_batch(self, items: list[Any]) -> None:
        raise OSError("sink full")


def test_a_source_or_sink_that_raises_names_its_step():
    flow = Dataflow("f")
    op.output("out", op.input("src", flow, _Broken()), TestingSink([]))
    with pytest.raises(
        StepError, match=r"input step 'f.src' \(partition 'only'\) on worker 0"
    ) as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, OSError)

    flow = Dataflow("f")
    op.output("out", op.input("src", flow, TestingSource([1])), _BrokenSink())
    with pytest.raises(StepError, match=r"output step 'f.out' on worker 0, epoch 0") as info:
        run_main(flow)
    assert isinstance(info.value.__cause__, OSError)


def test_bad_arguments_are_refused_when_the_flow_is_built():
    flow = Dataflow("f")
    s = op.input("inp", flow, TestingSource([1]))
    with pytest.raises(FlowError, match=r"needs a callable mapper"):
        op.map("m", s, 3)  # type: ignore[arg-type]
    with pytest.raises(FlowError, match=r"unknown insert_mode 'middle'"):
        op.join("j", s, insert_mode="middle")  # type: ignore[arg-type]
    with pytest.raises(FlowError, match=r"needs a source"):
        op.input("bad", flow, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(FlowError, match=r"needs a sink"):
        op.output("bad", s, [])  # type: ignore[arg-type]
    with pytest.raises(FlowError, match=r"takes a Stream"):
        op.map("m2", flow, str)  # type: ignore[arg-type]


def test_a_flow_can_be_run_again_and_by_several_threads():
    flow = Dataflow("again")
    out: list[int] = []
    op.output(
        "out",
        op.map("m", op.input("inp", flow, TestingSource([1, 2])), lambda x: x),
        TestingSink(out),
    )
    run_main(flow)
    threads = [threading.Thread(target=run_main, args=(flow,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(out) == [1, 1, 1, 2, 2, 2]


class _Ticks(op_sources.SimplePollingSource[int]):
    def __init__(self) -> None:
        super().__init__(datetime.timedelta(milliseconds=10))
        self.n = 0

    def next_item(self) -> int | None:
        self.n += 1
        if self.n == 3:
            raise op_sources.SimplePollingSource.Retry(datetime.timedelta(milliseconds=1))
        if self.n == 5:
            return None
        if self.n > 7:
            raise StopIteration()
        return self.n


def test_simple_polling_source_polls_on_its_interval_and_retries():
    flow = Dataflow("poll")
    out: list[int] = []
    op.output("out", op.input("ticks", flow, _Ticks()), TestingSink(out))
    started = time.monotonic()
    run_main(flow)
    assert out == [1, 2, 4, 6, 7]
    # 1 at once, 2 after 10 ms, a retry 1 ms later, then 10 ms apart: about 51 ms at least
    assert time.monotonic() - started >= 0.04


def test_polling_helpers_for_your_own_sources():
    from timelypy.flow.testing import TimeTestingGetter, ffwd_iter, poll_next_batch

    part = TestingSource([1, 2, 3], batch_size=2).build_part("s", "iterable", None)
    assert poll_next_batch(part) == [1, 2]
    assert part.snapshot() == 2
    resumed = TestingSource([1, 2, 3], batch_size=2).build_part("s", "iterable", 2)
    assert poll_next_batch(resumed) == [3]
    it = iter(range(5))
    ffwd_iter(it, 3)
    assert next(it) == 3

    class Quiet(StatelessSourcePartition[int]):
        def next_batch(self) -> list[int]:
            return []

    with pytest.raises(TimeoutError):
        poll_next_batch(Quiet(), timeout=datetime.timedelta(milliseconds=20))

    clock = TimeTestingGetter(datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))
    fetched: list[str] = []

    def getter(key: str) -> int:
        fetched.append(key)
        return len(fetched)

    cache: op.TTLCache[str, int] = op.TTLCache(getter, clock.get, datetime.timedelta(seconds=5))
    assert cache.get("a") == 1 and cache.get("a") == 1
    clock.advance(datetime.timedelta(seconds=6))
    assert cache.get("a") == 2
    cache.remove("a")
    assert cache.get("a") == 3


def test_testing_source_batches_and_markers_in_any_position():
    from timelypy.flow.sources import AbortExecution

    abort = TestingSource.ABORT()
    items = [1, 2, 3, TestingSource.PAUSE(datetime.timedelta(0)), 4, abort, 5, 6, 7]
    items += [TestingSource.EOF(), 8]
    part = TestingSource(items, batch_size=2).build_part("s", "iterable", None)
    batches = []
    with pytest.raises(AbortExecution):
        while True:
            batches.append(part.next_batch())
    assert batches == [[1, 2], [3], [4]]
    assert part.snapshot() == 6
    # the next execution resumes after the abort, which it skips, then ends at EOF
    part = TestingSource(items, batch_size=2).build_part("s", "iterable", 6)
    assert [part.next_batch(), part.next_batch()] == [[5, 6], [7]]
    with pytest.raises(StopIteration):
        part.next_batch()
    assert part.snapshot() == 10
    # a triggered abort in the middle of a batch is skipped without repeating anything
    part = TestingSource(items, batch_size=4).build_part("s", "iterable", 4)
    assert part.next_batch() == [4, 5, 6]
    assert part.next_batch() == [7]
    with pytest.raises(StopIteration):
        part.next_batch()
    # from a generator too
    part = TestingSource((x for x in range(5)), batch_size=3).build_part("s", "iterable", 1)
    assert [part.next_batch(), part.next_batch()] == [[1, 2, 3], [4]]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["one", "threads"])
def test_a_stateful_step_whose_input_ended_does_not_wait_for_the_other_inputs(backend):
    """A short input's stateful step ends while a long input runs on for many epochs.

    Regression: end-of-input results wait for the readers of the step's
    own upstream inputs to say where they ended, not for every input's:
    waiting for all held the short branch's output at its last epoch, the
    workers stopped reading while too many epochs were open, and the
    long input never ended (a hang).
    """
    from timelypy.flow.driver import MAX_OPEN_EPOCHS
    from timelypy.flow.testing import cluster_main

    flow = Dataflow("ends")
    short = op.input("short", flow, TestingSource([("k", 1), ("k", 2)], 1))
    long = op.input("long", flow, TestingSource(list(range(3 * MAX_OPEN_EPOCHS)), 1))
    totals = op.stateful_map("total", short, lambda total, x: ((total or 0) + x,) * 2)
    final = op.reduce_final("last", short, lambda a, b: a + b)
    got: list[Any] = []
    op.output("out", op.merge("all", totals, final, op.map("tag", long, str)), TestingSink(got))
    if backend == "one":
        run_main(flow, epoch_interval=ZERO)
    else:
        cluster_main(flow, [], 0, worker_count_per_proc=2, epoch_interval=ZERO)
    assert ("k", 3) in got and len(got) == 2 + 1 + 3 * MAX_OPEN_EPOCHS
