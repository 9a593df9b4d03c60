"""A graph flow on two processes with recovery, for the SIGKILL test (run as a script).

``python graph_recovery_job.py OUT_DIR STORE_DIR``: two partitioned
sources, a branch, a join, stateful maps and a merge, written to a
:class:`LinesSink` whose partitions truncate what a dead execution wrote
after their last snapshot, so the files hold each line exactly once.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path
from typing import Any

import timelypy.flow.operators as op
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.sinks import (
    DynamicSink,
    FixedPartitionedSink,
    StatefulSinkPartition,
    StatelessSinkPartition,
)
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

#: items per partition (the kill tests that need longer runs set GRAPH_JOB_COUNT)
COUNT = int(os.environ.get("GRAPH_JOB_COUNT", "150"))
STEP = datetime.timedelta(milliseconds=4)


class LinesSink(FixedPartitionedSink[str, int]):
    """``parts`` files of lines; a partition's snapshot is its length, restored by truncating."""

    def __init__(self, directory: str | os.PathLike[str], parts: int) -> None:
        self.directory = str(directory)
        self.parts = parts

    def list_parts(self) -> list[str]:
        return [f"part-{i}" for i in range(self.parts)]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        return _LinesPart(Path(self.directory) / f"{for_part}.txt", resume_state or 0)


class _LinesPart(StatefulSinkPartition[str, int]):
    def __init__(self, path: Path, length: int) -> None:
        self.file = path.open("a+b")
        self.file.truncate(length)
        self.file.seek(length)

    def write_batch(self, values: list[str]) -> None:
        self.file.write("".join(f"{value}\n" for value in values).encode())
        self.file.flush()

    def snapshot(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        self.file.close()


class PidSink(DynamicSink[Any]):
    """Writes ``pid-{worker}`` with its process's id when built; writes nothing else."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def build(self, step_id: str, worker_index: int, worker_count: int) -> Any:
        (Path(self.directory) / f"pid-{worker_index}").write_text(str(os.getpid()))
        return _Nothing()


class _Nothing(StatelessSinkPartition[Any]):
    def write_batch(self, items: list[Any]) -> None:
        pass


def read_parts(directory: str | os.PathLike[str]) -> list[str]:
    """Every line of every partition file."""
    lines: list[str] = []
    for path in sorted(Path(directory).glob("part-*.txt")):
        lines += path.read_text().splitlines()
    return lines


class Paced(FixedPartitionedSource[tuple[str, int], int]):
    """Partitions ``{name}0..{parts-1}``; partition i emits (key, j) for j = i, i+parts, ...

    One item every ``STEP``; the snapshot is the next j.
    """

    def __init__(self, name: str, parts: int, key: str) -> None:
        self.name, self.parts, self.key = name, parts, key

    def list_parts(self) -> list[str]:
        return [f"{self.name}{i}" for i in range(self.parts)]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        index = int(for_part[len(self.name) :])
        start = index if resume_state is None else resume_state
        return _PacedPart(self, index, start)


class _PacedPart(StatefulSourcePartition[tuple[str, int], int]):
    def __init__(self, source: Paced, index: int, start: int) -> None:
        self.source, self.index, self.next = source, index, start
        self.awake = datetime.datetime.now(datetime.UTC)

    def next_batch(self) -> list[tuple[str, int]]:
        if self.next >= COUNT:
            raise StopIteration()
        j = self.next
        self.next += self.source.parts
        self.awake = datetime.datetime.now(datetime.UTC) + STEP
        key = f"{self.source.key}{self.index}-{j % 5}" if self.source.key else f"j{j}"
        return [(key, j)]

    def next_awake(self) -> datetime.datetime:
        return self.awake

    def snapshot(self) -> int:
        return self.next


def _sum(total: int | None, value: int) -> tuple[int, int]:
    total = (total or 0) + value
    return total, total


def build(out: str) -> Dataflow:
    """The flow: sums per key on one branch, a join of both sources on the other."""
    flow = Dataflow("job")
    a = op.input("a", flow, Paced("a", 4, "p"))
    b = op.input("b", flow, Paced("b", 2, ""))
    split = op.branch("even", a, lambda kv: kv[1] % 2 == 0)
    sums = op.map_value("fmt", op.stateful_map("sums", split.trues, _sum), lambda s: f"sum {s}")
    odd = op.key_on("by_j", op.key_rm("rm", split.falses), lambda j: f"j{j}")
    joined = op.join("pair", odd, b, insert_mode="first")
    pairs = op.map_value("show", joined, lambda row: f"pair {row}")
    op.output("out", op.merge("all", sums, pairs), LinesSink(out, 3))
    op.output("pids", op.filter("none", a, lambda kv: False), PidSink(out))
    return flow


if __name__ == "__main__":
    out_dir, store = sys.argv[1], sys.argv[2]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    flow = build(out_dir)
    run_cluster(
        flow,
        proc_count=2,
        worker_count_per_proc=1,
        epoch_interval=datetime.timedelta(milliseconds=20),
        recovery_config=RecoveryConfig(store, partitions=2, commit_interval=0),
    )
