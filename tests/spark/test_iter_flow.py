"""``iter_flow``: a flow's results on the driver, epoch by epoch, while it runs on Spark."""

from __future__ import annotations

import time
from collections import Counter

import pytest

import timelypy_spark
from timelypy.flow import Dataflow
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def doubled() -> Dataflow:
    flow = Dataflow()
    flow.map(lambda n: n * 2)
    flow.capture()
    return flow


def test_epochs_come_in_order_with_every_workers_items(spark, idle):
    rdd = spark.sparkContext.parallelize(range(300), 3)
    got = list(
        timelypy_spark.iter_flow(spark, doubled(), rdd, workers=3, epoch_of=lambda n: n // 50)
    )
    assert [epoch for epoch, _ in got] == [0, 1, 2, 3, 4, 5]
    for epoch, items in got:
        assert Counter(items) == Counter(n * 2 for n in range(epoch * 50, epoch * 50 + 50))
    expected = timelypy_spark.run_flow(
        spark, doubled(), rdd, workers=3, epoch_of=lambda n: n // 50, collect=True
    )
    assert Counter((e, i) for e, items in got for i in items) == Counter(expected)


def slow_reader(worker_index, worker_count, resume_epoch):
    for epoch in range(8):
        yield AdvanceTo(epoch)
        for i in range(worker_index, 20, worker_count):
            yield Emit(i)
        time.sleep(0.4)  # an epoch every 0.4 s: a stream, not a file


def slow_flow() -> Dataflow:
    flow = Dataflow()
    flow.input("ticks", ManualInputConfig(slow_reader))
    flow.map(lambda i: i + 1)
    flow.capture()
    return flow


def test_results_arrive_while_the_flow_runs(spark, idle):
    started = time.monotonic()
    arrivals = []
    for epoch, items in timelypy_spark.iter_flow(spark, slow_flow(), workers=2):
        arrivals.append((epoch, time.monotonic() - started))
        assert sorted(items) == list(range(1, 21))
    assert [epoch for epoch, _ in arrivals] == list(range(8))
    # the first epoch came long before the last: 7 more epochs took >= 2.8 s
    assert arrivals[-1][1] - arrivals[0][1] >= 2.0, arrivals


def test_leaving_the_loop_cancels_the_run(spark, idle):
    started = time.monotonic()
    for epoch, _ in timelypy_spark.iter_flow(spark, slow_flow(), workers=2):
        if epoch == 1:
            break
    assert time.monotonic() - started < 60
    # the idle fixture checks that no Spark job is left running


def test_a_directory_that_keeps_filling_gives_results_as_it_fills(spark, idle, tmp_path):
    # files keep arriving while the flow runs on Spark; each epoch's lines reach the
    # driver before the last file is even written, and the _DONE file stops the run
    import threading

    from timelypy.flow import DirectoryInput

    arrived = threading.Event()

    def write():
        for n in range(6):
            temporary = tmp_path / f".f{n}"
            temporary.write_text(f"file{n} a\nfile{n} b\n")
            temporary.rename(tmp_path / f"f{n}.txt")
            time.sleep(0.5)
            if n == 2:
                # The rest waits for a first epoch (starting the Spark stage can take
                # seconds on a busy machine), but not forever: a flow that only gave
                # results at the end would get them after the last file, and fail.
                arrived.wait(60)
        (tmp_path / "_DONE").write_text("")

    flow = Dataflow()
    flow.input("lines", DirectoryInput(tmp_path, epoch_length=0.25, parts=2, poll=0.05))
    flow.map(lambda line: line.split()[0])
    flow.capture()
    writer = threading.Thread(target=write)
    seen, first_at = Counter(), None
    writer.start()
    try:
        for _, items in timelypy_spark.iter_flow(spark, flow, workers=2):
            if first_at is None:
                first_at = time.monotonic()
                assert writer.is_alive(), "the first epoch came only after the last file"
                arrived.set()
            seen.update(items)
    finally:
        writer.join()
    assert seen == Counter({f"file{n}": 2 for n in range(6)})


def test_a_socket_server_that_keeps_sending_gives_results_as_it_sends(spark, idle):
    # two line servers keep sending while the flow runs on Spark (a partition each);
    # epochs reach the driver before the servers are done, and their closing ends the run
    import socket
    import threading

    from timelypy.flow import SocketInput

    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]

    def serve(server, name):
        server.settimeout(60)
        connection, _ = server.accept()
        with connection:
            for n in range(6):
                connection.sendall(f"{name}{n} x\n".encode())
                time.sleep(0.4)

    threads = [
        threading.Thread(target=serve, args=(server, name), daemon=True)
        for server, name in zip(servers, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    addresses = [f"127.0.0.1:{server.getsockname()[1]}" for server in servers]
    flow = Dataflow()
    flow.input("lines", SocketInput(addresses, epoch_length=0.25, poll=0.05))
    flow.map(lambda line: line.split()[0])
    flow.capture()
    seen, early = Counter(), None
    try:
        for _, items in timelypy_spark.iter_flow(spark, flow, workers=2):
            if early is None:
                early = any(thread.is_alive() for thread in threads)
            seen.update(items)
    finally:
        for thread in threads:
            thread.join(30)
        for server in servers:
            server.close()
    assert early, "the first epoch came only after the servers were done"
    assert seen == Counter({f"{name}{n}": 1 for name in "ab" for n in range(6)})


class _Message:
    def __init__(self, kind, index, body=None):
        self.kind, self.index, self.body = kind, index, body


def test_the_collector_yields_an_epoch_once_every_task_passed_it():
    from timelypy_spark.flow import EpochCollector

    collector = EpochCollector(2)
    for message in [
        _Message("epoch.items", 0, (0, ["a"])),
        _Message("epoch.items", 1, (0, ["b"])),
        _Message("epoch.frontier", 0, 1),  # task 1 has not passed 0 yet
        _Message("epoch.items", 0, (1, ["c"])),
        _Message("epoch.items", 1, (1, ["d"])),  # a task's items precede its frontier
        _Message("epoch.frontier", 1, 2),  # now both passed 0; 1 waits for task 0
        _Message("done", 0),
        _Message("done", 1),
    ]:
        assert collector.handle(None, b"", message)
    assert not collector.handle(None, b"", _Message("recovery.commit", 0))
    collector.finished()
    got = [(epoch, sorted(items)) for epoch, items in collector.epochs()]
    assert got == [(0, ["a", "b"]), (1, ["c", "d"])]
    assert collector.missing == []


def test_the_collector_keeps_what_a_task_that_never_ended_may_not_have_sent():
    from timelypy_spark.flow import EpochCollector

    collector = EpochCollector(2)
    for message in [
        _Message("epoch.items", 0, (0, ["a"])),
        _Message("done", 0),
        _Message("epoch.items", 1, (0, ["b"])),  # task 1's end never comes
    ]:
        collector.handle(None, b"", message)
    collector.finished()
    assert list(collector.epochs()) == []  # epoch 0 may lack task 1's items: not yielded
    assert collector.missing == [1]
