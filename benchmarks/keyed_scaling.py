"""Keyed steps that cannot combine, on one process and on two: does the second one pay.

    python -m benchmarks.keyed_scaling [--items 2000000] [--repeat 3]

Two flows of the stream graph, each run with ``run_cluster`` on 1 process x
1 worker and on 2 processes x 1 worker, interleaved (``--repeat`` rounds
after a warm-up). Each round also runs the same flow on 1,000 items, and
the table's ``work`` is the run's wall time minus that one's: what is left
when the start and end of a run (a second process to start, its sockets to
connect and close) are taken out.

- ``stateful_map``: ``items`` integers, worker ``i`` of ``n`` reading
  ``i, i + n, ...`` in batches of 1,000; keyed by ``x % 10,000``; a running
  sum per key; every result to a sink that only counts. Every item crosses
  the exchange to its key's worker (half of them to the other process).
- ``join``: two inputs of ``items / 2`` integers each, keyed the same way,
  joined with ``emit_mode="complete"`` (a key emits once both sides have a
  value, then forgets it).

Neither step can combine before the exchange, so two processes are faster
only if the exchange costs less than the work the second process takes
over (issue: two processes faster than one). Two processes run twice,
with the second one started by ``fork`` and by ``spawn`` (``run_cluster``'s
``start_method``); ``run speed-up`` compares whole runs, start included,
``work speed-up`` the work alone. The table prints each
median, the spread and the speed-up of two processes over one; the
machine's core count and load average say what the speed-up can be.

A second table compares ``fold_final`` without and with ``merger=`` (the
pre-exchange combine), the four runs (plain and merged, 1 and 2
processes) interleaved in each round: ``items`` integers keyed the same
way, summed per key (``folder`` and ``merger`` are plain Python functions,
not ``operator.add``). Its ``merged vs plain`` column is the plain run's
work over the merged one's on the same process count (above 1: the
combine pays); ``2 vs 1`` is the speed-up of two processes over one.

    python -m benchmarks.keyed_scaling --only fold_final   # the second table alone

A third table does the same for ``count_window`` with a ``SystemClock``
and one-second tumbling windows, which counts per key and batch before the
exchange, against the per-value fold it replaced (``fold_window`` over
``key_on``, counting one per value), with 10,000 keys (a batch of 1,000
holds about 1,000 distinct keys: nothing to combine) and with 100.

    python -m benchmarks.keyed_scaling --only count_window
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import timelypy.flow.operators as op
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.sources import DynamicSource, StatelessSourcePartition

BATCH = 1000
KEYS = 10_000


class _Share(StatelessSourcePartition[int]):
    def __init__(self, start: int, stop: int, step: int) -> None:
        self.numbers = range(start, stop, step)
        self.at = 0

    def next_batch(self) -> list[int]:
        if self.at >= len(self.numbers):
            raise StopIteration()
        batch = list(self.numbers[self.at : self.at + BATCH])
        self.at += BATCH
        return batch


class Shares(DynamicSource[int]):
    """``0 .. n-1``, worker ``i`` of ``c`` reading ``i, i + c, ...``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Share:
        """Worker ``worker_index``'s share."""
        return _Share(worker_index, self.n, worker_count)


class _Drop(StatelessSinkPartition[Any]):
    def write_batch(self, items: list[Any]) -> None:
        pass


class Drop(DynamicSink[Any]):
    """A sink that keeps nothing (the flows' results are checked by their counts' shape)."""

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Drop:
        """A partition that drops what it is given."""
        return _Drop()


def _key(x: int) -> str:
    return str(x % KEYS)


def _running_sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def stateful_map_flow(items: int) -> Dataflow:
    """``items`` integers keyed by ``x % 10,000``, a running sum per key."""
    flow = Dataflow("keyed_map")
    keyed = op.key_on("key", op.input("inp", flow, Shares(items)), _key)
    op.output("out", op.stateful_map("sum", keyed, _running_sum), Drop())
    return flow


def join_flow(items: int) -> Dataflow:
    """Two inputs of ``items / 2`` integers each, joined by ``x % 10,000``."""
    flow = Dataflow("keyed_join")
    left = op.key_on("lkey", op.input("left", flow, Shares(items // 2)), _key)
    right = op.key_on("rkey", op.input("right", flow, Shares(items // 2)), _key)
    op.output("out", op.join("join", left, right, emit_mode="complete"), Drop())
    return flow


FLOWS: dict[str, Callable[[int], Dataflow]] = {
    "stateful_map": stateful_map_flow,
    "join": join_flow,
}


def _fold_sum(total: int, value: int) -> int:
    return total + value


def _merge_sums(a: int, b: int) -> int:
    return a + b


def fold_final_flow(items: int) -> Dataflow:
    """``items`` integers keyed by ``x % 10,000``, summed per key by ``fold_final``."""
    flow = Dataflow("keyed_fold")
    keyed = op.key_on("key", op.input("inp", flow, Shares(items)), _key)
    op.output("out", op.fold_final("sum", keyed, int, _fold_sum), Drop())
    return flow


def fold_final_merger_flow(items: int) -> Dataflow:
    """The same sums with ``merger=``: each worker folds its own values before the exchange."""
    flow = Dataflow("keyed_fold")
    keyed = op.key_on("key", op.input("inp", flow, Shares(items)), _key)
    op.output("out", op.fold_final("sum", keyed, int, _fold_sum, merger=_merge_sums), Drop())
    return flow


#: the fold_final candidates, measured against each other on each process count
FOLDS: dict[str, Callable[[int], Dataflow]] = {
    "plain": fold_final_flow,
    "merger": fold_final_merger_flow,
}


def timed(
    build: Callable[[int], Dataflow], items: int, processes: int, start_method: str = "auto"
) -> float:
    """Seconds of one ``run_cluster`` of ``build(items)`` on ``processes`` x 1 worker."""
    flow = build(items)
    start = time.perf_counter()
    run_cluster(flow, proc_count=processes, worker_count_per_proc=1, start_method=start_method)
    return time.perf_counter() - start


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the second process)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measured(build: Callable[[int], Dataflow], items: int, processes: int) -> tuple[float, float]:
    """Wall and CPU seconds (every process's) of one ``run_cluster`` of ``build(items)``."""
    flow = build(items)
    cpu = _cpu()
    start = time.perf_counter()
    run_cluster(flow, proc_count=processes, worker_count_per_proc=1)
    return time.perf_counter() - start, _cpu() - cpu


def _window_key(x: int, keys: int) -> str:
    return str(x % keys)


def _count_one(acc: int, value: int) -> int:
    return acc + 1


def count_window_flow(items: int, keys: int, combined: bool) -> Dataflow:
    """``items`` integers counted per ``x % keys`` in one-second system-clock windows."""
    from datetime import UTC, datetime, timedelta

    from timelypy.flow.operators import windowing as w

    flow = Dataflow("keyed_count_window")
    up = op.input("inp", flow, Shares(items))
    key = functools.partial(_window_key, keys=keys)
    windower = w.TumblingWindower(timedelta(seconds=1), datetime(2024, 1, 1, tzinfo=UTC))
    if combined:
        out = w.count_window("count", up, w.SystemClock(), windower, key)
    else:
        keyed = op.key_on("key", up, key)
        out = w.fold_window(
            "count", keyed, w.SystemClock(), windower, int, _count_one, _merge_sums, ordered=False
        )
    op.output("out", out.down, Drop())
    return flow


def _window_table(items: int, repeat: int) -> None:
    """``count_window`` (per batch) against the per-value fold, 1 and 2 processes, interleaved."""
    configs = [
        (keys, form, processes)
        for keys in (10_000, 100)
        for processes in (1, 2)
        for form in ("per value", "per batch")
    ]
    works: dict[tuple[int, str, int], list[float]] = {config: [] for config in configs}
    cpus: dict[tuple[int, str, int], list[float]] = {config: [] for config in configs}
    for round_ in range(repeat + 1):
        for keys, form, processes in configs if round_ % 2 else configs[::-1]:
            build = functools.partial(count_window_flow, keys=keys, combined=form == "per batch")
            took, cpu = measured(build, items, processes)
            base, base_cpu = measured(build, 1000, processes)
            if round_:
                works[keys, form, processes].append(took - base)
                cpus[keys, form, processes].append(cpu - base_cpu)
    print(
        "| count_window | keys | processes | work s | spread | CPU s "
        "| per batch vs per value | per batch vs per value, CPU |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for keys, form, processes in configs:
        got = works[keys, form, processes]
        work_s = statistics.median(got)
        cpu_s = statistics.median(cpus[keys, form, processes])
        spread = (max(got) - min(got)) / work_s
        versus = versus_cpu = ""
        if form == "per batch":
            plain = works[keys, "per value", processes]
            versus = f"{statistics.median(p / c for p, c in zip(plain, got, strict=True)):.2f}x"
            versus_cpu = f"{statistics.median(cpus[keys, 'per value', processes]) / cpu_s:.2f}x"
        print(
            f"| {form} | {keys:,} | {processes} | {work_s:.2f} | {spread:.0%} | {cpu_s:.2f} "
            f"| {versus} | {versus_cpu} |"
        )


#: The runs of the scaling table: (processes, run_cluster's start_method).
SCALING_RUNS = ((1, "auto"), (2, "fork"), (2, "spawn"))


def _scaling_table(items: int, repeat: int) -> None:
    print(
        "| flow | processes | start | run s | start and end s | work s | spread "
        "| run speed-up | work speed-up |"
    )
    print("|---|--:|---|--:|--:|--:|--:|--:|--:|")
    for name, build in FLOWS.items():
        runs: dict[tuple[int, str], list[float]] = {run: [] for run in SCALING_RUNS}
        bases: dict[tuple[int, str], list[float]] = {run: [] for run in SCALING_RUNS}
        for round_ in range(repeat + 1):
            for run in SCALING_RUNS:
                took = timed(build, items, *run)
                base = timed(build, 1000, *run)
                if round_:
                    runs[run].append(took)
                    bases[run].append(base)
        work = {
            run: statistics.median(r - b for r, b in zip(runs[run], bases[run], strict=True))
            for run in SCALING_RUNS
        }
        whole = {run: statistics.median(runs[run]) for run in SCALING_RUNS}
        one = SCALING_RUNS[0]
        for run in SCALING_RUNS:
            processes, method = run
            spread = (max(runs[run]) - min(runs[run])) / whole[run]
            print(
                f"| {name} | {processes} | {method if processes > 1 else ''} | {whole[run]:.2f} "
                f"| {statistics.median(bases[run]):.2f} | {work[run]:.2f} | {spread:.0%} "
                f"| {whole[one] / whole[run]:.2f}x | {work[one] / work[run]:.2f}x |"
            )


def _fold_table(items: int, repeat: int) -> None:
    """``fold_final`` plain and with a merger, on 1 and 2 processes, all interleaved.

    Beside the wall times, the CPU seconds of all the run's processes
    (less those of the 1,000-item run): on a shared machine the wall time
    moves with the others' load, the CPU a run spends much less.
    """
    configs = [(name, processes) for processes in (1, 2) for name in FOLDS]
    runs: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
    works: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
    cpus: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
    ratios: dict[int, list[float]] = {1: [], 2: []}
    for round_ in range(repeat + 1):
        order = configs if round_ % 2 else configs[::-1]  # neither always goes first
        for name, processes in order:
            took, cpu = measured(FOLDS[name], items, processes)
            base, base_cpu = measured(FOLDS[name], 1000, processes)
            if round_:
                runs[name, processes].append(took)
                works[name, processes].append(took - base)
                cpus[name, processes].append(cpu - base_cpu)
        if round_:
            for processes in (1, 2):
                plain = works["plain", processes][-1]
                ratios[processes].append(plain / works["merger", processes][-1])
    print(
        "| fold_final | processes | run s | work s | spread | CPU s | merged vs plain "
        "| merged vs plain, CPU | 2 vs 1 |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, processes in configs:
        run_s = statistics.median(runs[name, processes])
        work_s = statistics.median(works[name, processes])
        cpu_s = statistics.median(cpus[name, processes])
        one = statistics.median(works[name, 1])
        spread = (max(runs[name, processes]) - min(runs[name, processes])) / run_s
        versus = versus_cpu = ""
        if name == "merger":
            versus = f"{statistics.median(ratios[processes]):.2f}x"
            versus_cpu = f"{statistics.median(cpus['plain', processes]) / cpu_s:.2f}x"
        print(
            f"| {name} | {processes} | {run_s:.2f} | {work_s:.2f} | {spread:.0%} | {cpu_s:.2f} "
            f"| {versus} | {versus_cpu} | {one / work_s:.2f}x |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the flows on 1 and 2 processes, interleaved; print Markdown tables."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.keyed_scaling", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--items", type=int, default=2_000_000, help="items per flow")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds after a warm-up")
    parser.add_argument(
        "--only",
        choices=["scaling", "fold_final", "count_window"],
        help="one table: the steps that cannot combine, fold_final with and without a merger, "
        "or count_window per batch and per value",
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(
        f"keyed steps on 1 and 2 processes x 1 worker, {args.items:,} items, median of "
        f"{args.repeat} interleaved rounds, {os.cpu_count()} CPUs, load average {load:.1f}"
    )
    if args.only in (None, "scaling"):
        _scaling_table(args.items, args.repeat)
    if args.only in (None, "fold_final"):
        _fold_table(args.items, args.repeat)
    if args.only in (None, "count_window"):
        _window_table(args.items, args.repeat)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
