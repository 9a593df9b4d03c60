"""Operator metrics: ``Worker.metrics()`` and the Prometheus endpoint of ``timelypy.metrics``."""

from __future__ import annotations

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
