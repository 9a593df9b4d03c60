"""Operator metrics: ``Worker.metrics()`` and the Prometheus endpoint of ``timelypy.metrics``."""

from __future__ import annotations

import sys
import urllib.request

import pytest

import timelypy
import timelypy.metrics
from tests.stepping import settle
from timelypy import InputHandle, ProbeHandle
from timelypy.communication.allocator import process_allocators
from timelypy.errors import ConfigError
from timelypy.progress.metrics import time_operators, timing_operators
from timelypy.worker import Worker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def timing_off():
    """Each test starts with timing off, and leaves it off (serve() switches it on)."""
    time_operators(False)
    yield
    time_operators(False)


def pipeline(worker: Worker, handle: InputHandle, probe: ProbeHandle) -> None:
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .flat_map(lambda x: [x, x])  # doubles the records
            .filter(lambda x: x % 2 == 0)
            .exchange(lambda x: x // 2)
            .probe_with(probe)
        )
    )


def by_name(metrics: dict) -> dict:
    (flow,) = metrics["dataflows"]
    return {op["name"]: op for op in flow["operators"]}


def test_records_and_activations_are_counted_per_operator_and_worker():
    workers = [Worker(a) for a in process_allocators(2)]
    handles = [InputHandle() for _ in workers]
    probes = [ProbeHandle() for _ in workers]
    for worker, handle, probe in zip(workers, handles, probes, strict=True):
        pipeline(worker, handle, probe)
    handles[0].send_batch([1, 2, 3, 4])  # 8 records after flat_map, 4 even: 2 and 2, 4 and 4
    for handle in handles:
        handle.advance_to(1)
    settle(workers)
    first = by_name(workers[0].metrics())
    assert (first["FlatMap"]["records_in"], first["FlatMap"]["records_out"]) == (4, 8)
    assert (first["Filter"]["records_in"], first["Filter"]["records_out"]) == (8, 4)
    # the exchange (by x // 2) sends 4, 4 to worker 0 and 2, 2 to worker 1
    assert first["Exchange"]["records_in"] == 2  # its input is after the exchange
    assert first["Probe"]["records_in"] == 2
    assert by_name(workers[1].metrics())["Probe"]["records_in"] == 2
    assert by_name(workers[1].metrics())["FlatMap"]["records_in"] == 0
    for op in first.values():
        assert op["activations"] >= 1 and op["seconds"] >= 0.0
        assert op["worker"] == 0 and op["dataflow"] == 0
    assert first["Probe"]["frontier"] == [1]


def test_frontier_lag_counts_the_epochs_a_held_operator_trails():
    (worker,) = [Worker(a) for a in process_allocators(1)]
    handle, probe = InputHandle(), ProbeHandle()
    kept = []

    def hold_epoch_0(cap, info):
        kept.append(cap.retain())  # holds epoch 0: everything after it waits
        return lambda inp, out: inp.for_each(lambda c, data: out.session(c).give_batch(data))

    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .unary(timelypy.Pipeline(), "Hold", hold_epoch_0)
            .map(str)
            .probe_with(probe)
        )
    )
    handle.advance_to(5)
    settle(worker)
    (flow,) = worker.metrics()["dataflows"]
    assert flow["frontier_lag"] == 5  # 'Hold' sees 5, 'Map' after it still 0
    kept.pop().drop()
    settle(worker)
    assert worker.metrics()["dataflows"][0]["frontier_lag"] == 0
    handle.close()
    settle(worker)
    assert worker.metrics()["dataflows"] == []


def scrape(port: int) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("timelypy_"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_a_running_flow_is_scraped_over_http():
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    scraped = []

    def program(worker):
        server = timelypy.metrics.serve(worker, port=0, registry=registry)
        handle, probe = InputHandle(), ProbeHandle()
        pipeline(worker, handle, probe)
        if worker.index == 0:
            handle.send_batch(list(range(10)))
        handle.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))
        if worker.index == 0:
            scraped.append(scrape(server.port))  # while the dataflow still runs
        handle.close()

    timelypy.execute(timelypy.Config.thread(), program)
    (samples,) = scraped
    labels = (("address", "0.2"), ("dataflow", "0"), ("operator", "FlatMap"), ("worker", "0"))
    assert samples[("timelypy_operator_records_in_total", labels)] == 10
    assert samples[("timelypy_operator_records_out_total", labels)] == 20
    assert samples[("timelypy_operator_activations_total", labels)] >= 1
    probe = (("address", "0.5"), ("dataflow", "0"), ("operator", "Probe"), ("worker", "0"))
    assert samples[("timelypy_operator_records_in_total", probe)] == 10
    assert samples[("timelypy_operator_frontier", probe)] == 1
    assert samples[("timelypy_dataflow_frontier_lag", (("dataflow", "0"), ("worker", "0")))] == 0
    assert samples[("timelypy_operator_seconds_total", labels)] > 0  # serve() times operators
    assert timing_operators()


def test_seconds_are_measured_only_while_timing_is_on():
    (worker,) = [Worker(a) for a in process_allocators(1)]
    handle = InputHandle()
    worker.dataflow(lambda scope: scope.input_from(handle).map(lambda x: x + 1).probe())
    handle.send_batch([1, 2])
    handle.advance_to(1)
    settle(worker)
    assert by_name(worker.metrics())["Map"]["seconds"] == 0.0
    time_operators()
    handle.send_batch([3])
    handle.advance_to(2)
    settle(worker)
    timed = by_name(worker.metrics())["Map"]
    assert timed["seconds"] > 0 and timed["records_in"] == 3


def test_serve_refuses_what_is_not_a_worker():
    with pytest.raises(ConfigError, match="needs a Worker"):
        timelypy.metrics.serve("worker 0")


# -- metrics for every flow: metrics_port= on run, run_cluster, run_main, cluster_main, the CLI --

GATED_FLOW = '''
import datetime
import os
from pathlib import Path

import timelypy.flow.operators as op
from timelypy.flow import Dataflow
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
from timelypy.flow.sources import DynamicSource, StatelessSourcePartition


class Gated(StatelessSourcePartition):
    """Three items per worker, then nothing until the gate file exists, then the end."""

    def __init__(self, gate):
        self.gate, self.sent = Path(gate), False

    def next_batch(self):
        if not self.sent:
            self.sent = True
            return [1, 2, 3]
        if self.gate.exists():
            raise StopIteration()
        return []

    def next_awake(self):
        return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=0.02)


class GatedSource(DynamicSource):
    def __init__(self, gate):
        self.gate = gate

    def build(self, step_id, worker_index, worker_count):
        return Gated(self.gate)


class Drop(StatelessSinkPartition):
    def write_batch(self, items):
        pass


class DropSink(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return Drop()


def make(gate):
    flow = Dataflow("gated")
    numbers = op.input("numbers", flow, GatedSource(gate))
    op.output("out", op.map("double", numbers, lambda x: 2 * x), DropSink())
    return flow


flow = make(os.environ.get("GATE", "gate"))
'''

FLOW_CLI = [sys.executable, "-m", "timelypy.flow"]
#: How long a test waits for a flow's endpoint to serve its first records.
SCRAPE_DEADLINE = 60.0


def gated_module(tmp_path):
    """Import the gated flow's module (written to ``tmp_path``) and return it."""
    import importlib.util

    path = tmp_path / "gatedflow.py"
    path.write_text(GATED_FLOW)
    spec = importlib.util.spec_from_file_location(f"gatedflow_{id(tmp_path)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scrape_until_counted(port: int, step: str, records: int) -> dict:
    """Scrape ``port`` until ``step`` has consumed ``records`` records (bounded by a deadline).

    The endpoint may not be up yet (a process still starting) and the flow may
    not have read its items yet: both are waited for, never slept through.
    """
    import time

    deadline = time.monotonic() + SCRAPE_DEADLINE
    last: object = None
    while time.monotonic() < deadline:
        try:
            samples = scrape(port)
        except OSError as exc:  # not listening yet
            last = exc
        else:
            counted = sum(
                value
                for (name, labels), value in samples.items()
                if name == "timelypy_operator_records_in_total" and dict(labels)["operator"] == step
            )
            if counted >= records:
                return samples
            last = samples
        time.sleep(0.05)
    raise AssertionError(f"port {port} never counted {records} records into {step}: {last}")


def refused(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return True
    return False


def test_run_serves_a_flows_metrics_while_it_runs_and_stops_after(tmp_path):
    pytest.importorskip("prometheus_client")
    gate = tmp_path / "gate"
    flow = gated_module(tmp_path).make(str(gate))
    from timelypy.flow import run

    running = run(flow, metrics_port=0)
    try:
        port = running.metrics_port
        assert isinstance(port, int) and port > 0
        samples = scrape_until_counted(port, "gated.double", 3)
        double = {
            dict(labels)["worker"]: value
            for (name, labels), value in samples.items()
            if name == "timelypy_operator_records_out_total"
            and dict(labels)["operator"] == "gated.double"
        }
        assert double == {"0": 3}
        assert refused(port) is False  # still running: the gate is closed
    finally:
        gate.touch()
        running.wait()
    assert refused(port), "the endpoint outlived the run"


def run_catching(start, flow, errors: list) -> None:
    try:
        start(flow)
    except BaseException as exc:
        errors.append(exc)


def test_run_main_and_cluster_main_serve_while_they_run(tmp_path):
    pytest.importorskip("prometheus_client")
    import threading

    from timelypy.communication.config import free_ports
    from timelypy.flow.testing import cluster_main, run_main

    module = gated_module(tmp_path)
    (port,) = free_ports(1)
    starts = {
        "run_main": lambda flow: run_main(flow, metrics_port=port),
        # one process of a cluster: process 0 serves on the port itself
        "cluster_main": lambda flow: cluster_main(flow, [], 0, metrics_port=port),
    }
    for name, start in starts.items():
        gate = tmp_path / f"gate-{name}"
        errors: list[BaseException] = []
        thread = threading.Thread(
            target=run_catching, args=(start, module.make(str(gate)), errors), daemon=True
        )
        thread.start()
        try:
            scrape_until_counted(port, "gated.double", 3)
        finally:
            gate.touch()
            thread.join(60)
        assert not thread.is_alive() and errors == [], (name, errors)
        assert refused(port), f"{name}: the endpoint outlived the run"


def test_run_cluster_serves_one_port_per_process(tmp_path):
    pytest.importorskip("prometheus_client")
    import threading

    from timelypy.communication.config import free_ports
    from timelypy.flow import run_cluster

    gate = tmp_path / "gate"
    flow = gated_module(tmp_path).make(str(gate))
    # two consecutive free ports: process I serves on port + I
    port = next(p for p in sorted(free_ports(8)) if not taken(p + 1))
    results: list = []
    thread = threading.Thread(
        target=lambda: results.append(
            run_cluster(flow, proc_count=2, worker_count_per_proc=2, metrics_port=port)
        ),
        daemon=True,
    )
    thread.start()
    try:
        for process in (0, 1):
            samples = scrape_until_counted(port + process, "gated.double", 6)
            workers = {
                dict(labels)["worker"]
                for (name, labels), _ in samples.items()
                if name == "timelypy_operator_records_in_total"
            }
            # each process reports its own two workers
            assert workers == {str(2 * process), str(2 * process + 1)}, (process, workers)
    finally:
        gate.touch()
        thread.join(120)
    assert results == [[]]


def taken(port: int) -> bool:
    """True if ``port`` is taken on 127.0.0.1 (so it cannot serve)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_the_cli_serves_metrics_from_the_environment(tmp_path):
    pytest.importorskip("prometheus_client")
    import os
    import subprocess
    import sys

    from timelypy.communication.config import free_ports

    (tmp_path / "gatedflow.py").write_text(GATED_FLOW)
    (port,) = free_ports(1)
    env = dict(os.environ, TIMELYPY_METRICS_PORT=str(port), GATE=str(tmp_path / "gate"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "timelypy.flow", "gatedflow:flow", "-w", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        samples = scrape_until_counted(port, "gated.double", 6)
        seconds = [
            value
            for (name, labels), value in samples.items()
            if name == "timelypy_operator_seconds_total"
        ]
        assert seconds and all(value >= 0 for value in seconds)
    finally:
        (tmp_path / "gate").touch()
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def test_a_bad_or_taken_metrics_port_is_a_clear_error_before_the_run(tmp_path):
    pytest.importorskip("prometheus_client")
    import socket
    import subprocess
    import sys

    from timelypy.flow import Dataflow, run

    flow = Dataflow()
    flow.map(lambda x: x)
    flow.capture()
    with pytest.raises(ConfigError, match="metrics_port must be an int from 0 to 65535"):
        run(flow, [(0, 1)], metrics_port=70000)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            run(flow, [(0, 1)], metrics_port=port)
        (tmp_path / "gatedflow.py").write_text(GATED_FLOW)
        result = subprocess.run(
            [sys.executable, "-m", "timelypy.flow", "gatedflow:flow", "--metrics-port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_cli_gives_each_launched_process_its_own_port(tmp_path):
    """``-n 2`` starts both processes through the launcher: process I serves on port + I."""
    pytest.importorskip("prometheus_client")
    import os
    import subprocess

    from timelypy.communication.config import free_ports

    (tmp_path / "gatedflow.py").write_text(GATED_FLOW)
    port = next(p for p in sorted(free_ports(8)) if not taken(p + 1))
    env = dict(os.environ, GATE=str(tmp_path / "gate"))
    proc = subprocess.Popen(
        [*FLOW_CLI, "gatedflow:flow", "-n", "2", "--metrics-port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for process in (0, 1):
            samples = scrape_until_counted(port + process, "gated.double", 3)
            workers = {
                dict(labels)["worker"]
                for (name, labels), _ in samples.items()
                if name == "timelypy_operator_records_in_total"
            }
            assert workers == {str(process)}, (process, workers)
    finally:
        (tmp_path / "gate").touch()
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
