"""``spark.timelypy.metrics.port``: each Spark task's worker serves metrics while it runs.

A flow whose source holds its end back until a gate file exists runs on two
tasks; the test scrapes ``port`` and ``port + 1`` (worker 0's and worker 1's
endpoints, on the executors' host) while the flow is still running, then
opens the gate, and checks that the endpoints are gone after the run.
"""

from __future__ import annotations

import datetime
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import timelypy.flow.operators as op
import timelypy_spark
from timelypy.errors import ConfigError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.sources import DynamicSource, StatelessSourcePartition

from ..test_metrics import refused, scrape_until_counted

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
pytest.importorskip("prometheus_client", reason="metrics need prometheus_client")

KEY = "spark.timelypy.metrics.port"


class _Gated(StatelessSourcePartition[int]):
    """Three items, then nothing until the gate file exists, then the end."""

    def __init__(self, gate: str) -> None:
        self.gate, self.sent = Path(gate), False

    def next_batch(self) -> list[int]:
        if not self.sent:
            self.sent = True
            return [1, 2, 3]
        if self.gate.exists():
            raise StopIteration()
        return []

    def next_awake(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.02)


class _GatedSource(DynamicSource[int]):
    def __init__(self, gate: str) -> None:
        self.gate = gate

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Gated:
        return _Gated(self.gate)


class _Drop(StatelessSinkPartition[Any]):
    def write_batch(self, items: list[Any]) -> None:
        pass


class _DropSink(DynamicSink[Any]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Drop:
        return _Drop()


def _flow(gate: Path) -> Dataflow:
    flow = Dataflow("sparkgated")
    numbers = op.input("numbers", flow, _GatedSource(str(gate)))
    op.output("out", op.map("double", numbers, lambda x: 2 * x), _DropSink())
    return flow


def _two_free_ports() -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` are free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port >= 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return int(port)
    raise AssertionError("no two consecutive free ports found")


def test_each_task_serves_its_workers_metrics_while_the_flow_runs(idle, tmp_path):
    gate = tmp_path / "gate"
    port = _two_free_ports()
    idle.conf.set(KEY, str(port))
    errors: list[BaseException] = []

    def running() -> None:
        try:
            timelypy_spark.run_flow(idle, _flow(gate), workers=2)
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=running, daemon=True)
    try:
        thread.start()
        for worker in (0, 1):
            samples = scrape_until_counted(port + worker, "sparkgated.double", 3)
            seen = {
                dict(labels)["worker"]
                for (name, labels), _ in samples.items()
                if name == "timelypy_operator_records_in_total"
            }
            assert seen == {str(worker)}  # each endpoint reports its own worker
    finally:
        gate.touch()
        thread.join(120)
        idle.conf.unset(KEY)
    assert not thread.is_alive()
    assert errors == []
    assert refused(port) and refused(port + 1)  # given back when the run ended


def test_a_metrics_port_that_leaves_no_room_for_the_workers_is_refused(idle, tmp_path):
    idle.conf.set(KEY, "65535")
    try:
        with pytest.raises(ConfigError, match=r"metrics\.port=65535"):
            timelypy_spark.run_flow(idle, _flow(tmp_path / "gate"), workers=2)
    finally:
        idle.conf.unset(KEY)
