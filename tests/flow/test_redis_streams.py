"""The Redis Streams connectors against a real redis-server started for these tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import timelypy.flow.operators as op
from timelypy.errors import StepError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.testing import TestingSink, TestingSource, run_main

from ..servers import redis
from .graph_helpers import ZERO
from .kill_loop import TOPOLOGIES, kill_and_resume, rescaling

redis_py = pytest.importorskip("redis", reason="needs redis-py: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def server():
    with redis() as address:
        yield address


def conn(server: dict[str, Any]) -> Any:
    return redis_py.Redis(**server, decode_responses=True)


def test_streams_are_read_and_resumed_after_the_last_entry(server):
    from timelypy.flow.connectors.redis_streams import RedisStreamSource

    r = conn(server)
    for i in range(2500):
        r.xadd(f"log{i % 2}", {"n": str(i)})
    source = RedisStreamSource(server, ["log0", "log1"], batch_size=1000, tail=False)
    flow = Dataflow("read")
    out: list[Any] = []
    op.output("out", op.input("log", flow, source), TestingSink(out))
    run_main(flow)
    assert sorted(int(fields["n"]) for _, fields in out) == list(range(2500))
    part = source.build_part("s", "log0", None)
    first = part.next_batch()
    resumed = source.build_part("s", "log0", part.snapshot())
    second = resumed.next_batch()
    assert [int(f["n"]) for _, f in first + second] == list(range(0, 2500, 2))


def test_a_tailing_source_sees_entries_added_while_it_runs(server):
    import threading

    from timelypy.flow.connectors.redis_streams import RedisStreamSource

    r = conn(server)
    r.xadd("live", {"n": "0"})
    flow = Dataflow("tail")
    seen: list[Any] = []

    def stop_after_three(item: Any) -> bool:
        seen.append(item)
        if len(seen) == 3:
            raise RuntimeError("enough")
        return True

    op.output(
        "out",
        op.filter(
            "watch", op.input("live", flow, RedisStreamSource(server, ["live"])), stop_after_three
        ),
        TestingSink([]),
    )

    def feed() -> None:
        for n in (1, 2):
            time.sleep(0.2)
            r.xadd("live", {"n": str(n)})

    threading.Thread(target=feed).start()
    with pytest.raises(RuntimeError):
        run_main(flow)
    assert [fields["n"] for _, fields in seen] == ["0", "1", "2"]


def test_appends_are_exactly_once_across_aborts(server, tmp_path):
    from timelypy.flow.connectors.redis_streams import RedisStreamSink

    values = [(f"k{i % 5}", i) for i in range(60)]
    aborting = [
        *values[:25],
        TestingSource.ABORT(),
        *values[25:50],
        TestingSource.ABORT(),
        *values[50:],
    ]
    config = RecoveryConfig(tmp_path / "db", partitions=1)
    for _ in range(3):
        flow = Dataflow("sink")
        entries = op.map(
            "entry",
            op.input("inp", flow, TestingSource(aborting)),
            lambda kv: (kv[0], {"v": str(kv[1])}),
        )
        op.output("out", entries, RedisStreamSink(server, ["out:a", "out:b"]))
        run_main(flow, epoch_interval=ZERO, recovery_config=config)
    r = conn(server)
    got = [int(f["v"]) for key in ("out:a", "out:b") for _, f in r.xrange(key)]
    assert sorted(got) == list(range(60))
    pattern = r"'nowhere\.out' \(partition 's'\).*127\.0\.0\.1:1 after 2"
    with pytest.raises(StepError, match=pattern):  # tried when the first epoch closes
        flow = Dataflow("nowhere")
        sink = RedisStreamSink(
            {"host": "127.0.0.1", "port": 1}, ["s"], connect_attempts=2, retry_seconds=0.01
        )
        op.output("out", op.input("inp", flow, TestingSource([("a", {"x": "1"})])), sink)
        run_main(flow)


def _entries(server: dict[str, Any], prefix: str) -> Counter[tuple[str, str, str]]:
    r = conn(server)
    return Counter(
        (key, f["k"], f["total"])
        for key in (f"{prefix}:{i}" for i in range(3))
        for _, f in r.xrange(key)
    )


def _run_with_kills(
    server: dict[str, Any], tmp_path: Path, kills: int, seed: int, items: int
) -> int:
    job = Path(__file__).with_name("redis_job.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GRAPH_JOB_COUNT": str(items)}

    def start(prefix: str, out: Path, store: Path, topology: dict[str, str]) -> Any:
        out.mkdir(exist_ok=True)
        return subprocess.Popen(
            [
                sys.executable,
                str(job),
                server["host"],
                str(server["port"]),
                prefix,
                str(out),
                str(store),
            ],
            env={**env, **topology},
            stderr=subprocess.PIPE,
        )

    clean = start(f"clean{seed}", tmp_path / "clean", tmp_path / "clean-store", {})
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    runs = rescaling()  # each run on the next topology: resumed on other worker counts
    killed = kill_and_resume(
        lambda: start(f"out{seed}", out, store, next(runs)),
        out,
        kills,
        seed,
        span=items / 1000 / (kills + 1),
    )
    final = start(f"out{seed}", out, store, next(runs))
    assert final.wait(120) == 0, final.stderr.read().decode() if final.stderr else ""
    want = Counter(
        (key.replace(f"clean{seed}", "s"), k, t)
        for key, k, t in _entries(server, f"clean{seed}").elements()
    )
    got = Counter(
        (key.replace(f"out{seed}", "s"), k, t)
        for key, k, t in _entries(server, f"out{seed}").elements()
    )
    assert sum(want.values()) == items
    assert got == want, (sum(got.values()), sum(want.values()))
    print(
        f"Redis exactly once through {killed} SIGKILLs, resumed on processes x workers "
        f"{TOPOLOGIES} in turn: {sum(got.values())} entries"
    )
    return killed


@pytest.mark.timeout(300)
def test_the_sink_is_exactly_once_through_sigkills(server, tmp_path):
    assert _run_with_kills(server, tmp_path, kills=3, seed=38, items=1200) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_sink_is_exactly_once_through_twenty_sigkills(server, tmp_path):
    assert _run_with_kills(server, tmp_path, kills=24, seed=2026, items=5000) >= 20
