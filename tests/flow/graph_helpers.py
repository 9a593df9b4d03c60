"""Helpers for the stream-graph tests: a sink every backend can read back, backends to run on."""

from __future__ import annotations

import ast
import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.operators import output
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.testing import cluster_main, run_main

BACKENDS = ["one", "threads", "processes"]
ZERO = datetime.timedelta(0)


class LinesSink(DynamicSink[Any]):
    """Each worker appends ``repr(item)`` lines to its own file in ``directory``."""

    def __init__(self, directory: str | os.PathLike[str], name: str = "out") -> None:
        self.directory = str(directory)
        self.name = name

    def build(
        self, step_id: str, worker_index: int, worker_count: int
    ) -> StatelessSinkPartition[Any]:
        return _LinesPartition(Path(self.directory) / f"{self.name}-{worker_index}.txt")


class _LinesPartition(StatelessSinkPartition[Any]):
    def __init__(self, path: Path) -> None:
        self.file = path.open("a", encoding="utf-8")

    def write_batch(self, items: list[Any]) -> None:
        self.file.write("".join(f"{item!r}\n" for item in items))
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_lines(directory: str | os.PathLike[str], name: str = "out") -> list[Any]:
    """Every item the workers' files of ``name`` hold."""
    items = []
    for path in sorted(Path(directory).glob(f"{name}-*.txt")):
        items.extend(ast.literal_eval(line) for line in path.read_text().splitlines())
    return items


def run_on(backend: str, flow: Dataflow, epoch_interval: datetime.timedelta = ZERO) -> None:
    """Run ``flow`` to its end on one worker, three threads, or two processes of two threads."""
    if backend == "one":
        run_main(flow, epoch_interval=epoch_interval)
    elif backend == "threads":
        cluster_main(flow, [], 0, worker_count_per_proc=3, epoch_interval=epoch_interval)
    elif backend == "processes":
        run_cluster(flow, proc_count=2, worker_count_per_proc=2, epoch_interval=epoch_interval)
    else:
        raise AssertionError(backend)


def collect(
    backend: str,
    tmp_path: Path,
    build: Callable[[Dataflow], Stream[Any] | dict[str, Stream[Any]]],
) -> Any:
    """Build a flow with ``build``, write its stream(s) with :class:`LinesSink`, run, read back.

    ``build`` returns one stream (the items come back as a list) or a dict
    of named streams (a dict of lists comes back).
    """
    tmp_path.mkdir(parents=True, exist_ok=True)
    flow = Dataflow("test")
    streams = build(flow)
    named = streams if isinstance(streams, dict) else {"out": streams}
    for name, stream in named.items():
        output(f"write_{name}", stream, LinesSink(tmp_path, name))
    run_on(backend, flow)
    results = {name: read_lines(tmp_path, name) for name in named}
    return results if isinstance(streams, dict) else results["out"]
