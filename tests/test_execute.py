"""Running computations: execute, initialize_from, execute_from_args, example, failures, stalls.

Ported behaviour: Timely's ``execute.rs`` (``execute`` returns each worker's
result in worker order, ``execute_from_args`` reads ``-w``/``--threads``,
``example`` runs one worker) plus timelypy's failure rules (DESIGN.md 4): a
user function raising in any worker stops every worker and is re-raised
from ``execute`` with its original type, message and traceback, and notes
naming the worker and the operator.

``initialize_from`` is tested here with in-process transports that record
their lifecycle; multi-process runs (``-n`` above 1, the cluster transport)
are tested in ``tests/communication``.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
import traceback
from typing import Any

import pytest

import timelypy
from timelypy import Config, ConfigError, InputHandle, Pipeline, ProbeHandle, Worker, source
from timelypy.communication.allocator import process_allocators
from timelypy.communication.transport import ProcessTransport
from timelypy.errors import ClusterError, WorkerAborted
from timelypy.execute import initialize_from

pytestmark = pytest.mark.timeout(60)


class Explosion(Exception):
    """A user exception nobody else raises."""


def worker_threads() -> list[threading.Thread]:
    """The worker threads of ``execute`` still alive."""
    return [t for t in threading.enumerate() if t.name.startswith("timelypy-worker-")]


def assert_worker_threads_end(limit: float = 5.0) -> None:
    """Poll (bounded) until no worker thread is alive."""
    deadline = time.monotonic() + limit
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker_threads() == []


def identify(worker: Worker) -> tuple[int, int, bool]:
    """What a worker function sees: index, peers, and whether it runs in a worker thread."""
    return (worker.index, worker.peers, threading.current_thread().name.startswith("timelypy"))


# -- results ---------------------------------------------------------------------------------


def test_execute_thread_runs_one_worker_in_the_calling_thread():
    assert timelypy.execute(Config.thread(), identify) == [(0, 1, False)]
    assert timelypy.execute(None, identify) == [(0, 1, False)]


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_execute_process_returns_results_in_worker_order(workers):
    def program(worker: Worker) -> tuple[int, list[Any]]:
        handle, probe, seen = InputHandle(), ProbeHandle(), []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: x)
                .inspect(seen.append)
                .probe_with(probe)
            )
        )
        handle.send_batch(list(range(worker.index * 10, worker.index * 10 + 10)))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return worker.index, sorted(seen)

    results = timelypy.execute(Config.process(workers), program)
    assert [index for index, _ in results] == list(range(workers))
    every = sorted(x for _, seen in results for x in seen)
    assert every == list(range(workers * 10))
    for index, seen in results:
        assert all(x % workers == index for x in seen)
    assert timelypy.execute(Config.process(workers), identify) == [
        (i, workers, True) for i in range(workers)
    ]
    assert_worker_threads_end()


def test_execute_needs_a_config():
    with pytest.raises(ConfigError, match="needs a Config"):
        timelypy.execute(2, identify)  # type: ignore[arg-type]


def test_example_runs_one_worker_and_returns_the_build_result():
    peers: list[int] = []

    def build(scope: Any) -> Any:
        peers.append(scope.peers)
        return scope.to_stream([3, 1, 2]).map(lambda x: x * 2).capture()

    assert timelypy.example(build).extract() == [(0, [2, 4, 6])]
    assert peers == [1]


@pytest.mark.parametrize(
    "args",
    [
        ["-w", "3"],
        ["--workers", "3"],
        ["--threads", "3"],
        ["-w3"],
        ["--workers=3"],
        ["data.txt", "-w", "3", "--", "-x"],
        ["-w", "3", "-n", "1", "-p", "0"],
    ],
)
def test_execute_from_args_reads_the_worker_count(args):
    results = timelypy.execute_from_args(["prog", *args], identify)
    assert results == [(0, 3, True), (1, 3, True), (2, 3, True)]


def test_execute_from_args_defaults_to_sys_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", "-w", "2"])
    assert [index for index, _, _ in timelypy.execute_from_args(None, identify)] == [0, 1]
    monkeypatch.setattr(sys, "argv", ["prog"])
    assert timelypy.execute_from_args(None, identify) == [(0, 1, False)]


@pytest.mark.parametrize("args", [["--bogus"], ["-x", "1"], ["-w", "2", "--verbose"], ["--help"]])
def test_execute_from_args_rejects_unknown_options_with_usage(args):
    ran: list[Worker] = []
    with pytest.raises(ConfigError) as info:
        timelypy.execute_from_args(["prog", *args], ran.append)
    assert "usage:" in str(info.value)
    assert ran == []


# -- failures --------------------------------------------------------------------------------


def test_example_re_raises_an_error_of_its_dataflow():
    def build(scope: Any) -> None:
        scope.to_stream([4]).map(explode)

    with pytest.raises(Explosion, match="cannot handle 4") as info:
        timelypy.example(build)
    assert any("'Map'" in note and "worker 0" in note for note in info.value.__notes__)


def explode(record: int) -> int:
    """The user function that fails."""
    raise Explosion(f"cannot handle {record}")


@pytest.mark.parametrize("workers", [1, 3])
def test_an_operator_error_is_re_raised_with_worker_and_operator_notes(workers):
    failing = workers - 1

    def program(worker: Worker) -> None:
        handle, probe = InputHandle(), ProbeHandle()

        def constructor(cap: Any, info: Any) -> Any:
            def logic(inp: Any, out: Any) -> None:
                for icap, data in inp:
                    if worker.index == failing:
                        explode(data[0])
                    out.session(icap).give_batch(list(data))

            return logic

        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: x)
                .unary(Pipeline(), "Boom", constructor)
                .probe_with(probe)
            )
        )
        if worker.index == 0:
            handle.send_batch(list(range(workers)))
        handle.advance_to(1)
        # every worker waits for a time the failing worker never completes
        while probe.less_than(1):
            worker.step()

    with pytest.raises(Explosion, match=f"cannot handle {failing}") as info:
        timelypy.execute(Config.process(workers), program)
    assert type(info.value) is Explosion
    notes = info.value.__notes__
    assert any("'Boom'" in note and f"worker {failing}" in note for note in notes), notes
    text = "".join(traceback.format_exception(info.value))
    assert "in explode" in text  # the original traceback
    assert_worker_threads_end()


@pytest.mark.parametrize(("workers", "failing"), [(1, 0), (3, 2), (2, 0)])
def test_an_error_in_the_worker_function_is_re_raised(workers, failing):
    def program(worker: Worker) -> int:
        probe = worker.dataflow(lambda scope: scope.to_stream(range(3)).probe())
        if worker.index == failing:
            raise KeyError(f"worker {worker.index} gave up")
        worker.step_while(lambda: not probe.done())
        return worker.index

    with pytest.raises(KeyError) as info:
        timelypy.execute(Config.process(workers), program)
    assert type(info.value) is KeyError
    assert info.value.args == (f"worker {failing} gave up",)
    assert f"raised on worker {failing}" in info.value.__notes__
    assert_worker_threads_end()


def test_a_failure_stops_a_worker_stuck_waiting_for_it():
    """Worker 1 waits for data worker 0 will never send; worker 0's failure ends it."""
    started = threading.Event()

    def program(worker: Worker) -> None:
        handle, probe = InputHandle(), ProbeHandle()
        worker.dataflow(lambda scope: scope.input_from(handle).probe_with(probe))
        if worker.index == 0:
            assert started.wait(10), "worker 1 never started"
            raise Explosion("worker 0 failed first")
        started.set()
        while probe.less_than(1):  # worker 0's handle never advances
            worker.step_or_park(0.05)

    with pytest.raises(Explosion, match="worker 0 failed first"):
        timelypy.execute(Config.process(2), program)
    assert_worker_threads_end()


class Interrupted(BaseException):
    """What a timeout or signal handler raises in the thread that called ``execute``."""


def test_interrupting_the_calling_thread_stops_every_worker():
    """Any BaseException in the caller (a test timeout, SystemExit) ends the workers too."""
    import signal

    def program(worker: Worker) -> None:
        probe = worker.dataflow(lambda scope: scope.input_from(InputHandle()).probe())
        worker.step_while(lambda: not probe.done())  # the input is never closed

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted("caller gave up")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Interrupted, match="caller gave up"):
            timelypy.execute(Config.process(2), program)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_worker_threads_end()


# -- initialize_from and the transport lifecycle ----------------------------------------------


class RecordingTransport(ProcessTransport):
    """An in-process transport that records its lifecycle calls, in order."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def finish(self) -> None:
        self.calls.append("finish")
        super().finish()

    def fail(self, error: BaseException) -> None:
        self.calls.append(f"fail {type(error).__name__}")

    def close(self) -> None:
        self.calls.append("close")
        super().close()


@pytest.mark.parametrize("workers", [1, 3])
def test_initialize_from_wraps_a_worker_around_each_allocator(workers):
    transport = RecordingTransport(workers)
    results = initialize_from(transport, Config.process(workers), identify)
    assert results == [(i, workers, workers > 1) for i in range(workers)]
    assert transport.calls == ["start", "finish", "close"]


@pytest.mark.parametrize("workers", [1, 3])
def test_initialize_from_reports_its_own_failure_before_telling_peers(workers):
    transport = RecordingTransport(workers)
    reported: list[BaseException] = []

    def report(error: BaseException) -> None:
        transport.calls.append(f"report {type(error).__name__}")
        reported.append(error)

    def program(worker: Worker) -> None:
        if worker.index == workers - 1:
            raise Explosion("mine")
        worker.step_while(lambda: True, timeout=5)  # stopped by the failure

    with pytest.raises(Explosion, match="mine") as info:
        initialize_from(transport, Config.process(workers), program, report)
    assert reported == [info.value]
    assert transport.calls == ["start", "report Explosion", "fail Explosion", "close"]
    assert f"raised on worker {workers - 1}" in info.value.__notes__
    assert_worker_threads_end()


@pytest.mark.parametrize("workers", [1, 3])
def test_a_peer_failure_is_raised_as_the_peers_cluster_error(workers):
    """Workers stopped by a peer's failure raise it, and nobody reports or announces it."""
    transport = RecordingTransport(workers)
    lost = ClusterError("lost process 1 at localhost:2102")
    reported: list[BaseException] = []

    def program(worker: Worker) -> None:
        if worker.index == 0:
            worker.allocator.abort_all(lost)  # as the cluster's watchdog records it
        worker.step_while(lambda: True, timeout=5)

    with pytest.raises(ClusterError) as info:
        initialize_from(transport, Config.process(workers), program, reported.append)
    assert info.value is lost
    assert not isinstance(info.value, WorkerAborted)
    assert reported == []
    assert transport.calls == ["start", "close"]
    assert_worker_threads_end()


def test_a_failed_start_runs_no_worker_and_closes_the_transport():
    class Unreachable(RecordingTransport):
        def start(self) -> None:
            super().start()
            raise ClusterError("heard nothing from process(es) [1]")

    transport = Unreachable(2)
    ran: list[Worker] = []
    with pytest.raises(ClusterError, match="heard nothing"):
        initialize_from(transport, Config.process(2), ran.append)
    assert ran == []
    assert transport.calls == ["start", "close"]


# -- stalls ------------------------------------------------------------------------------------


def test_a_retained_capability_keeps_the_worker_stepping_and_holders_name_it():
    worker = Worker(process_allocators(1)[0])
    held: list[Any] = []

    def build(scope: Any) -> ProbeHandle:
        def constructor(cap: Any, info: Any) -> Any:
            held.append(cap.retain())
            return lambda output: None

        return source(scope, "Forever", constructor).map(lambda x: x).probe()

    probe = worker.dataflow(build)
    for _ in range(5):
        assert worker.step()
    assert worker.installed_dataflows() == [0]
    holders = worker.holders()
    assert any("'Forever'" in line and "[0]" in line for line in holders), holders
    assert all(line.startswith("dataflow 0: ") for line in holders)
    held[0].downgrade(4)
    for _ in range(5):
        assert worker.step()
    assert any("'Forever'" in line and "[4]" in line for line in worker.holders())
    assert probe.frontier() == (4,)
    held[0].drop()
    for _ in range(100):
        if not worker.step():
            break
    assert not worker.has_dataflows()
    assert worker.holders() == []
    assert probe.done()


def test_a_stalled_worker_logs_who_holds_its_dataflow(monkeypatch, caplog):
    # ``timelypy.execute`` the attribute is the function; fetch the module itself
    execute_module = importlib.import_module("timelypy.execute")
    monkeypatch.setattr(execute_module, "STALL_WARNING_SECONDS", 0.0)

    def program(worker: Worker) -> None:
        def constructor(cap: Any, info: Any) -> Any:
            held = [cap.retain()]
            runs = [0]

            def logic(output: Any) -> None:
                runs[0] += 1
                if runs[0] < 3:
                    info.activate()
                elif held:
                    held.pop().drop()

            return logic

        worker.dataflow(lambda scope: source(scope, "Stubborn", constructor).probe())

    with caplog.at_level(logging.WARNING, logger="timelypy"):
        timelypy.execute(Config.thread(), program)
    assert any(
        "operator 'Stubborn' (address (0, 1)) holds a capability at 0 on output 0" in r.getMessage()
        for r in caplog.records
    )


def test_a_failure_next_to_a_stuck_worker_thread_is_raised_within_the_grace():
    from timelypy.execute import STOP_GRACE_SECONDS

    release = threading.Event()

    def program(worker):
        if worker.index == 0:
            raise ValueError("worker 0 broke")
        release.wait(60)  # a user function that does not return by itself

    started = time.monotonic()
    try:
        with pytest.raises(ValueError, match="worker 0 broke") as info:
            timelypy.execute(Config.process(2), program)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < STOP_GRACE_SECONDS + 10, "the error waited for the stuck thread"
    assert any("timelypy-worker-1 in program" in note for note in info.value.__notes__)


def test_unread_input_is_reported_as_a_stall(monkeypatch, caplog):
    execute_module = importlib.import_module("timelypy.execute")
    monkeypatch.setattr(execute_module, "STALL_WARNING_SECONDS", 0.2)
    reported = threading.Event()

    class Reported(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "made no progress" in record.getMessage():
                reported.set()

    def program(worker: Worker) -> None:
        def constructor(cap: Any, info: Any) -> Any:
            def logic(inp: Any, out: Any) -> None:
                if reported.is_set():  # reads its input only once the stall was reported
                    for _ in inp:
                        pass
                else:
                    info.activate()

            return logic

        worker.dataflow(
            lambda scope: scope.to_stream([1, 2]).unary(Pipeline(), "Deaf", constructor).probe()
        )

    handler = Reported()
    logging.getLogger("timelypy").addHandler(handler)
    try:
        with caplog.at_level(logging.WARNING, logger="timelypy"):
            timelypy.execute(Config.thread(), program)
    finally:
        logging.getLogger("timelypy").removeHandler(handler)
    warning = next(r.getMessage() for r in caplog.records if "made no progress" in r.getMessage())
    assert "2 records at 0 sent to input 0 of operator 'Deaf'" in warning
    assert "2 waiting unread on worker 0" in warning
