"""The server connectors across a server that goes away mid-run: real servers, stopped for real.

A short outage (the server killed and started again while the flow runs)
is survived: the output equals a run without it, every row once.  A long
one (the server killed for good) ends the run with an error that names the
step, the partition and the server, once the bounded retries are spent.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import timelypy.flow.operators as op
from timelypy.errors import TimelyError
from timelypy.flow import run_cluster
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition
from timelypy.flow.testing import TestingSink, run_main

from ..servers import postgres_server, redis_server

EPOCH = datetime.timedelta(milliseconds=20)


class Ticks(FixedPartitionedSource[tuple[str, int], int]):
    """``count`` items ``(key, i)``, one every ``every`` seconds (so the flow runs a while)."""

    def __init__(self, count: int, every: float) -> None:
        self.count, self.every = count, every

    def list_parts(self) -> list[str]:
        return ["ticks"]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Any:
        return _TicksPart(self, resume_state or 0)


class _TicksPart(StatefulSourcePartition[tuple[str, int], int]):
    def __init__(self, source: Ticks, start: int) -> None:
        self.source, self.next = source, start
        self.awake = datetime.datetime.now(datetime.UTC)

    def next_batch(self) -> list[tuple[str, int]]:
        if self.next >= self.source.count:
            raise StopIteration()
        i, self.next = self.next, self.next + 1
        self.awake = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=self.source.every
        )
        return [(f"k{i % 7}", i)]

    def next_awake(self) -> datetime.datetime:
        return self.awake

    def snapshot(self) -> int:
        return self.next


class Outage(threading.Thread):
    """Once ``ready()`` holds, ``stop()`` the server; after ``seconds``, ``start()`` it again.

    ``seconds=None``: it stays down.  Every wait is bounded.
    """

    def __init__(
        self,
        ready: Callable[[], bool],
        stop: Callable[[], None],
        start: Callable[[], None],
        seconds: float | None,
    ) -> None:
        super().__init__(daemon=True)
        self.ready, self.stop_server, self.start_server = ready, stop, start
        self.seconds = seconds
        self.stopped_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 60
            while not self.ready():
                assert time.monotonic() < deadline, "the flow never got far enough"
                time.sleep(0.02)
            self.stop_server()
            self.stopped_at = time.monotonic()
            if self.seconds is not None:
                time.sleep(self.seconds)
                self.start_server()
        except BaseException as exc:  # reported by check()
            self.error = exc

    def check(self) -> None:
        """The outage happened (and the server is back, if it was to come back)."""
        self.join(120)
        assert not self.is_alive() and self.error is None, self.error
        assert self.stopped_at is not None


# -- PostgreSQL ---------------------------------------------------------------------------------


def _sql(dsn: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def _count(dsn: str, table: str) -> int:
    try:
        return int(_sql(dsn, f"SELECT count(*) FROM {table}")[0][0])
    except Exception:  # the server is starting or going: not yet
        return 0


def _pg_sink_flow(dsn: str, table: str, count: int, attempts: int) -> Dataflow:
    from timelypy.flow.connectors.postgres import PostgresSink

    flow = Dataflow("pg_outage")
    rows = op.map(
        "row", op.input("ticks", flow, Ticks(count, 0.004)), lambda kv: (kv[0], {"n": kv[1]})
    )
    sink = PostgresSink(dsn, table, partitions=2, connect_attempts=attempts, retry_seconds=0.2)
    op.output("out", rows, sink)
    return flow


@pytest.mark.timeout(300)
def test_postgres_sink_and_source_survive_a_restart_of_the_server():
    from timelypy.flow.connectors.postgres import PostgresSource

    with postgres_server() as server:
        dsn = server.dsn
        _sql(dsn, "CREATE TABLE restarted (n int)")
        outage = Outage(lambda: _count(dsn, "restarted") >= 60, server.stop, server.start, 0.5)
        outage.start()
        run_main(_pg_sink_flow(dsn, "restarted", 400, attempts=10), epoch_interval=EPOCH)
        outage.check()
        rows = sorted(n for (n,) in _sql(dsn, "SELECT n FROM restarted"))
        assert rows == list(range(400))  # none lost, none twice

        # the source reads on after the last key it returned
        seen: list[Any] = []
        source = PostgresSource(
            dsn, "restarted", "n", batch_size=20, connect_attempts=10, retry_seconds=0.2
        )
        flow = Dataflow("pg_read")
        slow = op.map("slow", op.input("rows", flow, source), lambda row: time.sleep(0.003) or row)
        op.output("out", slow, TestingSink(seen))
        outage = Outage(lambda: len(seen) >= 100, server.stop, server.start, 0.5)
        outage.start()
        run_main(flow, epoch_interval=EPOCH)
        outage.check()
        assert [row["n"] for row in seen] == list(range(400))


@pytest.mark.timeout(300)
def test_postgres_sink_fails_naming_step_partition_and_server_when_it_stays_down():
    with postgres_server() as server:
        dsn = server.dsn
        _sql(dsn, "CREATE TABLE abandoned (n int)")
        outage = Outage(lambda: _count(dsn, "abandoned") >= 30, server.stop, server.start, None)
        outage.start()
        pattern = (
            r"output step 'pg_outage\.out' \(partition 'abandoned-[01]'\): cannot reach "
            rf"PostgreSQL at 127\.0\.0\.1:{server.port} after 4 attempts"
        )
        with pytest.raises(TimelyError, match=pattern):
            run_main(_pg_sink_flow(dsn, "abandoned", 100_000, attempts=4), epoch_interval=EPOCH)
        outage.check()
        assert outage.stopped_at is not None
        print(f"failed {time.monotonic() - outage.stopped_at:.1f}s after the server went")


# -- Redis --------------------------------------------------------------------------------------


def _redis_sink_flow(address: dict[str, Any], attempts: int, count: int = 400) -> Dataflow:
    from timelypy.flow.connectors.redis_streams import RedisStreamSink

    flow = Dataflow("redis_outage")
    entries = op.map(
        "entry", op.input("ticks", flow, Ticks(count, 0.004)), lambda kv: (kv[0], {"n": str(kv[1])})
    )
    sink = RedisStreamSink(address, ["o:0", "o:1"], connect_attempts=attempts, retry_seconds=0.2)
    op.output("out", entries, sink)
    return flow


def _xlen(client: Any, *keys: str) -> int:
    try:
        return sum(int(client.xlen(key)) for key in keys)
    except Exception:  # the server is starting or going: not yet
        return 0


@pytest.mark.timeout(300)
def test_redis_sink_and_source_survive_a_crash_of_the_server():
    redis_py = pytest.importorskip("redis")
    from timelypy.flow.connectors.redis_streams import RedisStreamSource

    with redis_server(persistent=True) as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=5)
        outage = Outage(lambda: _xlen(client, "o:0", "o:1") >= 60, server.kill, server.start, 0.5)
        outage.start()
        run_main(_redis_sink_flow(server.address, attempts=10), epoch_interval=EPOCH)
        outage.check()
        got = sorted(int(f["n"]) for key in ("o:0", "o:1") for _, f in client.xrange(key))
        assert got == list(range(400))  # none lost, none twice

        seen: list[Any] = []
        source = RedisStreamSource(
            server.address, ["o:0", "o:1"], batch_size=20, tail=False, retry_seconds=0.2
        )
        source.connect_attempts = 10
        flow = Dataflow("redis_read")
        slow = op.map("slow", op.input("log", flow, source), lambda e: time.sleep(0.003) or e)
        op.output("out", slow, TestingSink(seen))
        outage = Outage(lambda: len(seen) >= 100, server.kill, server.start, 0.5)
        outage.start()
        run_main(flow, epoch_interval=EPOCH)
        outage.check()
        assert sorted(int(fields["n"]) for _, fields in seen) == list(range(400))


@pytest.mark.timeout(300)
def test_redis_sink_fails_naming_step_partition_and_server_when_it_stays_down():
    redis_py = pytest.importorskip("redis")

    with redis_server() as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=5)
        outage = Outage(lambda: _xlen(client, "o:0", "o:1") >= 30, server.kill, server.start, None)
        outage.start()
        pattern = (
            r"output step 'redis_outage\.out' \(partition 'o:[01]'\): cannot reach "
            rf"Redis at 127\.0\.0\.1:{server.port} after 4 attempts"
        )
        with pytest.raises(TimelyError, match=pattern):
            run_main(
                _redis_sink_flow(server.address, attempts=4, count=100_000), epoch_interval=EPOCH
            )
        outage.check()
        assert outage.stopped_at is not None
        print(f"failed {time.monotonic() - outage.stopped_at:.1f}s after the server went")


@pytest.mark.timeout(300)
def test_redis_source_fails_naming_step_partition_and_server_when_it_stays_down():
    redis_py = pytest.importorskip("redis")
    from timelypy.flow.connectors.redis_streams import RedisStreamSource

    with redis_server() as server:
        client = redis_py.Redis(**server.address, decode_responses=True)
        client.xadd("in", {"n": "0"})
        seen: list[Any] = []
        source = RedisStreamSource(server.address, ["in"], connect_attempts=4, retry_seconds=0.2)
        flow = Dataflow("redis_gone")
        op.output("out", op.input("log", flow, source), TestingSink(seen))
        outage = Outage(lambda: len(seen) >= 1, server.kill, server.start, None)
        outage.start()
        pattern = (
            r"input step 'redis_gone\.log' \(partition 'in'\): cannot reach "
            rf"Redis at 127\.0\.0\.1:{server.port} after 4 attempts"
        )
        with pytest.raises(TimelyError, match=pattern):
            run_main(flow, epoch_interval=EPOCH)  # tails forever while the server is up
        outage.check()
        assert outage.stopped_at is not None
        print(f"failed {time.monotonic() - outage.stopped_at:.1f}s after the server went")


# -- sinks reconnect without blocking their worker ----------------------------------------------


class Attempts(logging.Handler):
    """Counts the failed attempts to reach a server that sink partitions log (``_retry``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.failed = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("output step"):
            self.failed += 1


def _wait(until: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


class WhileAway(threading.Thread):
    """Stop the server once ``ready()``; start it again once the worker has shown it runs on.

    Once the sink has failed twice to reach the server (two attempts, so the
    engine activated the sink again), the second output must receive
    ``items`` more items before the server comes back: a worker that blocked
    in the sink's reconnect would run no other step.  Every wait is bounded;
    the server comes back even when they run out (the error says why).
    """

    def __init__(self, server: Any, ready: Callable[[], bool], seen: list[Any], items: int):
        super().__init__(daemon=True)
        self.server, self.ready, self.seen, self.items = server, ready, seen, items
        self.attempts = Attempts()
        #: items the second output received between the sink's first failed attempt and the
        #: server's return, and the sink's failed attempts by then
        self.during: int | None = None
        self.failed_then = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        stopped = False
        try:
            _wait(self.ready, "the flow never got far enough")
            getattr(self.server, "kill", self.server.stop)()
            stopped = True
            _wait(lambda: self.attempts.failed >= 1, "the sink never noticed the server went")
            mark = len(self.seen)
            _wait(
                lambda: self.attempts.failed >= 2 and len(self.seen) >= mark + self.items,
                "the worker ran no other step while the sink reconnected",
            )
            self.during, self.failed_then = len(self.seen) - mark, self.attempts.failed
        except BaseException as exc:  # reported by check()
            self.error = exc
        finally:
            if stopped:
                self.server.start()

    def __enter__(self) -> WhileAway:
        logging.getLogger("timelypy.flow.connectors").addHandler(self.attempts)
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("timelypy.flow.connectors").removeHandler(self.attempts)

    def check(self) -> None:
        self.join(120)
        assert not self.is_alive() and self.error is None, self.error
        assert self.during is not None and self.during >= self.items
        print(
            f"the second output received {self.during} items while the sink failed "
            f"{self.failed_then} attempts to reach its server"
        )


def _two_outputs(name: str, count: int, sink: Any, seen: list[Any]) -> Dataflow:
    """Ticks into ``sink`` (as rows/entries ``{"n": i}``) and, beside it, into ``seen``."""
    flow = Dataflow(name)
    ticks = op.input("ticks", flow, Ticks(count, 0.004))
    values = op.map("value", ticks, lambda kv: (kv[0], {"n": kv[1]}))
    op.output("out", values, sink)
    op.output("beside", op.map("n", ticks, lambda kv: kv[1]), TestingSink(seen))
    return flow


@pytest.mark.timeout(300)
def test_a_postgres_sink_waiting_for_its_server_leaves_the_worker_to_its_other_steps():
    from timelypy.flow.connectors.postgres import PostgresSink

    with postgres_server() as server:
        dsn = server.dsn
        _sql(dsn, "CREATE TABLE waited (n int)")
        seen: list[int] = []
        # a budget far longer than the test: only a worker that runs on brings the server back
        sink = PostgresSink(dsn, "waited", partitions=2, connect_attempts=40, retry_seconds=0.05)
        with WhileAway(server, lambda: _count(dsn, "waited") >= 60, seen, 25) as away:
            run_main(_two_outputs("pg_wait", 600, sink, seen), epoch_interval=EPOCH)
        away.check()
        assert sorted(seen) == list(range(600))
        rows = sorted(n for (n,) in _sql(dsn, "SELECT n FROM waited"))
        assert rows == list(range(600))  # none lost, none twice


@pytest.mark.timeout(300)
def test_a_redis_sink_waiting_for_its_server_leaves_the_worker_to_its_other_steps():
    redis_py = pytest.importorskip("redis")
    from timelypy.flow.connectors.redis_streams import RedisStreamSink

    with redis_server(persistent=True) as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=5)
        seen: list[int] = []
        keys = ["w:0", "w:1"]
        sink = RedisStreamSink(server.address, keys, connect_attempts=40, retry_seconds=0.05)
        with WhileAway(server, lambda: _xlen(client, *keys) >= 60, seen, 25) as away:
            run_main(_two_outputs("redis_wait", 600, sink, seen), epoch_interval=EPOCH)
        away.check()
        assert sorted(seen) == list(range(600))
        got = sorted(int(f["n"]) for key in keys for _, f in client.xrange(key))
        assert got == list(range(600))  # none lost, none twice


class Frozen:
    """A server process stopped with SIGSTOP (it keeps its connections and answers nothing)."""

    def __init__(self, server: Any) -> None:
        self.process = server.process

    def stop(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def start(self) -> None:
        self.process.send_signal(signal.SIGCONT)


@pytest.mark.timeout(300)
def test_a_redis_sink_rides_out_a_server_that_stops_answering():
    redis_py = pytest.importorskip("redis")
    from timelypy.flow.connectors.redis_streams import RedisStreamSink

    with redis_server() as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=30)
        seen: list[int] = []
        keys = ["f:0", "f:1"]
        # the client's own socket timeout bounds each command the sink sends the frozen server
        address = {**server.address, "socket_timeout": 0.3, "socket_connect_timeout": 0.3}
        sink = RedisStreamSink(address, keys, connect_attempts=40, retry_seconds=0.05)
        frozen = Frozen(server)
        with WhileAway(frozen, lambda: _xlen(client, *keys) >= 60, seen, 25) as away:
            run_main(_two_outputs("redis_frozen", 600, sink, seen), epoch_interval=EPOCH)
        away.check()
        got = sorted(int(f["n"]) for key in keys for _, f in client.xrange(key))
        assert got == list(range(600))  # none lost, none twice: what the timed-out
        # connections had sent ran before the redo's commands, and the redo deleted it


# -- two processes: the outage survived, then the error that ends both -------------------------


def _on_two_processes(flow: Dataflow) -> None:
    run_cluster(flow, proc_count=2, worker_count_per_proc=1, epoch_interval=EPOCH)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_postgres_sink_on_two_processes_rides_out_an_outage_then_fails_naming_the_server():
    with postgres_server() as server:
        dsn = server.dsn
        _sql(dsn, "CREATE TABLE two (n int)")
        outage = Outage(lambda: _count(dsn, "two") >= 60, server.stop, server.start, 0.5)
        outage.start()
        _on_two_processes(_pg_sink_flow(dsn, "two", 400, attempts=10))
        outage.check()
        rows = sorted(n for (n,) in _sql(dsn, "SELECT n FROM two"))
        assert rows == list(range(400))  # none lost, none twice

        _sql(dsn, "CREATE TABLE two_gone (n int)")
        outage = Outage(lambda: _count(dsn, "two_gone") >= 30, server.stop, server.start, None)
        outage.start()
        pattern = (
            r"output step 'pg_outage\.out' \(partition 'two_gone-[01]'\): cannot reach "
            rf"PostgreSQL at 127\.0\.0\.1:{server.port} after 4 attempts"
        )
        with pytest.raises(TimelyError, match=pattern):
            _on_two_processes(_pg_sink_flow(dsn, "two_gone", 100_000, attempts=4))
        outage.check()
        assert outage.stopped_at is not None
        print(f"both processes ended {time.monotonic() - outage.stopped_at:.1f}s after it went")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_redis_sink_on_two_processes_rides_out_a_crash_then_fails_naming_the_server():
    redis_py = pytest.importorskip("redis")

    with redis_server(persistent=True) as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=5)
        outage = Outage(lambda: _xlen(client, "o:0", "o:1") >= 60, server.kill, server.start, 0.5)
        outage.start()
        _on_two_processes(_redis_sink_flow(server.address, attempts=10))
        outage.check()
        got = sorted(int(f["n"]) for key in ("o:0", "o:1") for _, f in client.xrange(key))
        assert got == list(range(400))  # none lost, none twice

        client.delete("o:0", "o:1")
        outage = Outage(lambda: _xlen(client, "o:0", "o:1") >= 30, server.kill, server.start, None)
        outage.start()
        pattern = (
            r"output step 'redis_outage\.out' \(partition 'o:[01]'\): cannot reach "
            rf"Redis at 127\.0\.0\.1:{server.port} after 4 attempts"
        )
        with pytest.raises(TimelyError, match=pattern):
            _on_two_processes(_redis_sink_flow(server.address, attempts=4, count=100_000))
        outage.check()
        assert outage.stopped_at is not None
        print(f"both processes ended {time.monotonic() - outage.stopped_at:.1f}s after it went")


# -- a SIGKILL while a sink waits for its server ------------------------------------------------


def _job(script: str, args: list[str], out: Path, store: Path, log: Path, items: int) -> Any:
    """Start a kill-test job (``tests/flow/{script}``, 2 processes) with its stderr in ``log``."""
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GRAPH_JOB_COUNT": str(items)}
    job = [sys.executable, str(Path(__file__).with_name(script)), *args, str(out), str(store)]
    with log.open("ab") as err:
        return subprocess.Popen(job, env=env, stderr=err)


def _kill_while_waiting(
    script: str,
    args: Callable[[str], list[str]],
    written: Callable[[str], int],
    server: Any,
    tmp_path: Path,
) -> None:
    """Run the job to its end (``clean``); then run it again, take its server away mid-run,
    SIGKILL both processes once the sink has failed twice to reach it (its epoch held open
    meanwhile), bring the server back and resume the job to its end (``out``)."""
    items = 2500
    clean_log = tmp_path / "clean.log"
    clean = _job(script, args("clean"), tmp_path / "c", tmp_path / "cs", clean_log, items)
    assert clean.wait(120) == 0, clean_log.read_text()
    out, store, log = tmp_path / "out", tmp_path / "store", tmp_path / "out.log"
    run = _job(script, args("out"), out, store, log, items)
    try:
        _wait(lambda: written("out") >= 300 or run.poll() is not None, "the job wrote nothing")
        assert run.poll() is None, log.read_text()
        getattr(server, "kill", server.stop)()
        # the worker logs each failed attempt; the second means the engine asked again
        _wait(
            lambda: log.read_text().count("failed (") >= 2 or run.poll() is not None,
            "the sink never retried",
        )
        assert run.poll() is None, log.read_text()
        for pid in ("pid-0", "pid-1"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int((out / pid).read_text()), signal.SIGKILL)
    finally:
        run.kill()
        run.wait(30)
    server.start()
    resumed = _job(script, args("out"), out, store, log, items)
    assert resumed.wait(120) == 0, log.read_text()


@pytest.mark.timeout(300)
def test_a_sigkill_while_a_postgres_sink_waits_for_its_server_loses_and_repeats_nothing(tmp_path):
    from collections import Counter

    with postgres_server() as server:
        dsn = server.dsn
        for table in ("clean", "out"):
            _sql(dsn, f"CREATE TABLE k_{table} (k text, total int)")
            _sql(dsn, f"CREATE TABLE k_{table}_latest (k text PRIMARY KEY, total int)")
        _kill_while_waiting(
            "pg_job.py",
            lambda name: [dsn, f"k_{name}"],
            lambda name: _count(dsn, f"k_{name}"),
            server,
            tmp_path,
        )
        for table in ("k_{}", "k_{}_latest"):
            want = Counter(_sql(dsn, f"SELECT k, total FROM {table.format('clean')}"))
            got = Counter(_sql(dsn, f"SELECT k, total FROM {table.format('out')}"))
            assert got == want  # every row once
        assert sum(want.values()) == 20  # the latest sum of each of the 20 keys


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sigkill_while_a_redis_sink_waits_for_its_server_loses_and_repeats_nothing(tmp_path):
    from collections import Counter

    redis_py = pytest.importorskip("redis")
    with redis_server(persistent=True) as server:
        client = redis_py.Redis(**server.address, decode_responses=True, socket_timeout=5)
        address = [str(server.address["host"]), str(server.address["port"])]

        def entries(prefix: str) -> Counter[tuple[str, str]]:
            keys = [f"{prefix}:{i}" for i in range(3)]
            return Counter((f["k"], f["total"]) for key in keys for _, f in client.xrange(key))

        _kill_while_waiting(
            "redis_job.py",
            lambda name: [*address, name],
            lambda name: _xlen(client, *(f"{name}:{i}" for i in range(3))),
            server,
            tmp_path,
        )
        want = entries("clean")
        assert sum(want.values()) == 2500  # one running sum per item
        assert entries("out") == want  # every entry once
