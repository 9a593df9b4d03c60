"""The multi-process cluster, tested with real processes on 127.0.0.1.

Every test starts real Python processes, either through the launcher
(``python -m timelypy.launch``) or by hand (``SCRIPT ARGS -n N -p I -w W -h
HOSTFILE`` with ``TIMELYPY_SECRET`` set), running the programs in
``cluster_scripts/``.  Output goes to files, every wait polls with a
deadline, and every process is killed when its test ends, pass or fail.

The bounds asserted are the cluster's specification, not its speed: a lost
or stopped peer, or a peer whose worker raised, ends the computation within
:data:`DETECTION_SECONDS` of the event; a peer that never starts is named
after the start-up timeout.  Liveness waits (a run that should complete)
use generous deadlines and only fail on a hang.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import zmq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from zmq.utils import z85

import timelypy
from tests.communication.cluster_scripts import early_send, pipeline, wordcount
from tests.communication.cluster_scripts.epochs import RECORDS_PER_EPOCH
from tests.communication.cluster_scripts.harness import (
    ROOT,
    TEST_SECRET,
    Cluster,
    cluster,
    processes_with,
    run_launcher,
    script,
    wait_until,
    write_hostfile,
)
from timelypy.communication.secret import curve_keys, run_tag

#: A lost, stopped or failed peer must end the computation this fast (the specification).
DETECTION_SECONDS = 5.0
#: The start-up timeout used for unreachable peers (TIMELYPY_CONNECT_TIMEOUT).
CONNECT_TIMEOUT = 3
#: Deadline for something that should happen at once (a process starting, an error at start-up).
PROMPT = 30.0
#: Deadline for a whole run that should complete.
RUN_DEADLINE = 60.0


def read_results(folder: Path) -> dict[int, list[Any]]:
    """Merge the ``process-P.json`` files a run wrote: worker index -> its results."""
    merged: dict[int, list[Any]] = {}
    for path in sorted(folder.glob("process-*.json")):
        for worker, results in json.loads(path.read_text()).items():
            merged[int(worker)] = results
    return merged


def launch_ok(*args: str, marker: str) -> str:
    """Run the launcher; assert it exits 0, quietly, leaving nothing behind; return stdout."""
    result = run_launcher(*args, marker=marker, timeout=RUN_DEADLINE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == "", result.stderr
    assert result.leftover == [], "processes outlived the launcher"
    return result.stdout


# -- 1. hello ---------------------------------------------------------------------------


def test_hello_two_processes_two_workers(tmp_path: Path) -> None:
    # Only worker 0 sends, round r goes to worker r % 4, which runs in process w // 2.  The
    # lines of different processes may interleave in the launcher's output, but each
    # worker prints its rounds in round order (the driver waits for each round).
    out = launch_ok(
        "-n",
        "2",
        "-w",
        "2",
        str(ROOT / "examples" / "hello.py"),
        str(tmp_path),
        marker=str(tmp_path),
    )
    lines = out.splitlines()
    assert len(lines) == 10, out
    per_worker: dict[int, list[int]] = {}
    for line in lines:
        match = re.fullmatch(r"\[(\d)\] worker (\d):\thello (\d+)", line)
        assert match, line
        process, worker, round_ = map(int, match.groups())
        assert process == worker // 2, line
        per_worker.setdefault(worker, []).append(round_)
    assert per_worker == {w: [r for r in range(10) if r % 4 == w] for w in range(4)}


# -- 2. same results as one worker ------------------------------------------------------


def test_wordcount_matches_one_worker_and_counter(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    launch_ok("-n", "2", "-w", "2", script("wordcount"), str(out_dir), marker=str(tmp_path))
    per_worker = read_results(out_dir)
    assert sorted(per_worker) == [0, 1, 2, 3]
    cluster_counts = Counter(
        (epoch, word, count) for results in per_worker.values() for epoch, word, count in results
    )
    # Every word is counted, per epoch, on the one worker its stable hash routes it to.
    for worker, results in per_worker.items():
        for _epoch, word, _count in results:
            assert timelypy.stable_hash(word) % 4 == worker, (word, worker)

    single = timelypy.execute(timelypy.Config.thread(), wordcount.make_program(wordcount.EPOCHS))[0]
    single_counts = Counter((epoch, word, count) for epoch, word, count in single)

    expected = Counter(
        (epoch, word, count)
        for epoch in range(wordcount.EPOCHS)
        for word, count in Counter(
            word for line in wordcount.lines_of(epoch) for word in line.split()
        ).items()
    )
    assert cluster_counts == expected
    assert single_counts == expected
    assert any(not word.isascii() for _e, word, _c in expected)  # UTF-8 words were routed too


def test_a_sent_batch_leaves_before_the_steps_work(tmp_path: Path) -> None:
    # Worker 0 sends a record to worker 1 and advances its input, then pauses 1 s without
    # stepping: the record must reach worker 1 during the pause (advancing sends the
    # epoch's records on).  Then it sends another with send_batch and takes a step in
    # which another operator sleeps 2 s: that record must reach worker 1 during the
    # step, because what the program sent leaves when the step starts, not at its end.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    launch_ok("-n", "2", "-w", "1", script("early_send"), str(out_dir), marker=str(tmp_path))
    times = read_results(out_dir)
    sender, arrived = times[0], times[1]["arrived"]
    assert set(arrived) == {"7", "8"}, times
    assert sender["advanced"] <= arrived["7"] < sender["paused"], times
    assert sender["step_ended"] - sender["step_started"] >= early_send.SLOW_SECONDS * 0.9, times
    assert sender["step_started"] <= arrived["8"] < sender["step_ended"], times


def _leaf() -> st.SearchStrategy[list[Any]]:
    return st.one_of(
        st.tuples(st.just("map"), st.sampled_from(sorted(pipeline.MAPS))),
        st.tuples(st.just("filter"), st.sampled_from(sorted(pipeline.FILTERS))),
        st.tuples(st.just("flat_map"), st.sampled_from(sorted(pipeline.FLAT_MAPS))),
        st.tuples(st.just("exchange"), st.sampled_from(sorted(pipeline.KEYS))),
    ).map(list)


def _stages() -> st.SearchStrategy[list[Any]]:
    def extend(children: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[list[Any]]:
        compound = st.one_of(
            st.tuples(st.just("concat"), children, children).map(list),
            st.tuples(st.just("loop"), st.integers(1, 3), children).map(list),
        )
        return st.lists(st.one_of(_leaf(), compound), max_size=4)

    return st.recursive(st.lists(_leaf(), max_size=4), extend, max_leaves=10)


DESCRIPTIONS = st.lists(
    st.fixed_dictionaries(
        {
            "input": st.lists(st.lists(st.integers(-20, 60), max_size=12), min_size=1, max_size=3),
            "stages": _stages(),
        }
    ),
    min_size=1,
    max_size=3,
)

#: Largest output a generated pipeline may have (loops of flat_maps grow geometrically).
MAX_OUTPUT = 3000


def _random_stages(rng: random.Random, depth: int) -> list[Any]:
    """A random stage list; concat and loop nest at most two deep."""
    tables = {
        "map": pipeline.MAPS,
        "filter": pipeline.FILTERS,
        "flat_map": pipeline.FLAT_MAPS,
        "exchange": pipeline.KEYS,
    }
    kinds = [*tables, "concat", "loop"] if depth < 2 else list(tables)
    stages: list[Any] = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(kinds)
        if kind == "concat":
            stages.append([kind, _random_stages(rng, depth + 1), _random_stages(rng, depth + 1)])
        elif kind == "loop":
            stages.append([kind, rng.randint(1, 3), _random_stages(rng, depth + 1)])
        else:
            stages.append([kind, rng.choice(sorted(tables[kind]))])
    return stages


def _outputs(per_worker: dict[int, list[Any]], count: int) -> list[Counter[tuple[int, int]]]:
    """Per dataflow, the multiset of ``(epoch, value)`` from ``[dataflow, epoch, value]``."""
    outputs: list[Counter[tuple[int, int]]] = [Counter() for _ in range(count)]
    for results in per_worker.values():
        for number, epoch, value in results:
            outputs[number][(epoch, value)] += 1
    return outputs


def check_pipelines(
    descriptions: list[dict[str, Any]], folder: Path, options: Sequence[str] = ()
) -> None:
    """Run ``descriptions`` on 2 processes x 2 workers and on one worker; compare with the model.

    ``options`` are Timely options for the cluster run (``--progress-mode demand``).
    """
    (folder / "descriptions.json").write_text(json.dumps(descriptions))
    out_dir = folder / "out"
    out_dir.mkdir()
    launch_ok(
        "-n",
        "2",
        "-w",
        "2",
        script("pipeline"),
        *options,
        str(folder / "descriptions.json"),
        str(out_dir),
        marker=str(folder),
    )
    per_worker = read_results(out_dir)
    assert sorted(per_worker) == [0, 1, 2, 3]
    clustered = _outputs(per_worker, len(descriptions))
    single = _outputs(
        {0: timelypy.execute(timelypy.Config.thread(), pipeline.make_program(descriptions))[0]},
        len(descriptions),
    )
    for number, description in enumerate(descriptions):
        expected = pipeline.model(description)
        assert single[number] == expected, (number, description)
        assert clustered[number] == expected, (number, description)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(descriptions=DESCRIPTIONS)
def test_random_pipelines_match_one_worker(
    descriptions: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Each example starts a cluster, so few examples; each runs up to three pipelines.
    assume(all(sum(pipeline.model(d).values()) <= MAX_OUTPUT for d in descriptions))
    check_pipelines(descriptions, tmp_path_factory.mktemp("pipelines"))


@pytest.mark.parametrize("mode", ["eager", "demand"])
def test_seeded_pipelines_match_one_worker(tmp_path: Path, mode: str) -> None:
    # Thirty seeded pipelines as thirty dataflows of one cluster run: breadth for the cost
    # of one start-up.  Demand mode holds progress batches back; results must not change.
    rng = random.Random(20240611)
    descriptions = []
    while len(descriptions) < 30:
        description = {
            "input": [
                [rng.randint(-20, 60) for _ in range(rng.randint(0, 12))]
                for _ in range(rng.randint(1, 3))
            ],
            "stages": _random_stages(rng, 0),
        }
        if sum(pipeline.model(description).values()) <= MAX_OUTPUT:
            descriptions.append(description)
    assert any(stage[0] == "loop" for d in descriptions for stage in d["stages"])
    assert any(stage[0] == "concat" for d in descriptions for stage in d["stages"])
    check_pipelines(descriptions, tmp_path, ["--progress-mode", mode])


# -- 3. failures during a run -------------------------------------------------------------


def _running(c: Cluster, workers: int) -> None:
    """Wait until every worker of both processes has received records of epoch 1."""
    for index in range(2 * workers):
        c[index // workers].wait_for_output(f"worker {index} saw epoch 1", PROMPT)


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_of_a_process_is_detected(tmp_path: Path, workers: int) -> None:
    with cluster(tmp_path, "epochs", workers=workers) as c:
        c.start()
        _running(c, workers)
        c[1].signal(signal.SIGKILL)
        killed_at = time.monotonic()
        code = c[0].wait(PROMPT)
        assert code != 0, c.describe()
        assert c[0].exited_at is not None
        assert c[0].exited_at - killed_at <= DETECTION_SECONDS, c.describe()
        errors = c[0].stderr()
        assert "ClusterError" in errors and "lost process 1" in errors, errors
        assert f"127.0.0.1:{c.ports[1]}" in errors, errors


def test_stopped_process_is_detected(tmp_path: Path) -> None:
    # SIGSTOP: the process's sockets stay open but nothing answers, not even heartbeats.
    with cluster(tmp_path, "epochs", workers=2) as c:
        c.start()
        _running(c, 2)
        c[1].signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        code = c[0].wait(PROMPT)
        assert code != 0, c.describe()
        assert c[0].exited_at is not None
        assert c[0].exited_at - stopped_at <= DETECTION_SECONDS, c.describe()
        assert "lost process 1" in c[0].stderr(), c.describe()
        assert c[1].poll() is None  # still stopped; the fixture kills it


def test_worker_error_in_process_1_stops_process_0(tmp_path: Path) -> None:
    with cluster(tmp_path, "epochs", ["fail=1:3"], workers=2) as c:
        c.start()
        c[1].wait_for_output("worker 2 raising at epoch 3", PROMPT)
        raised_at = time.monotonic()
        codes = c.wait_all(PROMPT)
        assert codes[0] != 0 and codes[1] != 0, c.describe()
        assert c[0].exited_at is not None
        assert c[0].exited_at - raised_at <= DETECTION_SECONDS, c.describe()
        own = c[1].stderr()
        assert "RuntimeError: boom: worker 2 refuses epoch 3" in own, own
        errors = c[0].stderr()
        assert re.search(
            r"ClusterError: process 1 at 127\.0\.0\.1:\d+ failed: "
            r"RuntimeError: boom: worker 2 refuses epoch 3",
            errors,
        ), errors


def test_peer_failure_is_not_attributed_to_a_local_worker(tmp_path: Path) -> None:
    with cluster(tmp_path, "epochs", ["fail=0:3"], workers=2) as c:
        c.start()
        codes = c.wait_all(PROMPT)
        assert codes[0] != 0 and codes[1] != 0, c.describe()
        errors = c[1].stderr()
        assert "ClusterError: process 0 at" in errors, errors
        assert "boom: worker 0 refuses epoch 3" in errors, errors
        assert not re.search(r"^raised on worker [23]$", errors, re.MULTILINE), errors


# -- 4. bad input -------------------------------------------------------------------------


def _fails_at_start(c: Cluster, *needles: str, within: float = PROMPT) -> str:
    """Start process 0 only; assert it exits non-zero by itself, saying ``needles``."""
    c.start([0])
    code = c[0].wait(within)
    errors = c[0].stderr()
    assert code != 0, c.describe()
    for needle in needles:
        assert needle in errors, f"{needle!r} not in:\n{errors}"
    return errors


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not-an-address", "line 2: address 'not-an-address' is not of the form host:port"),
        ("127.0.0.1:http", "line 2: address '127.0.0.1:http': port 'http' is not a number"),
        ("127.0.0.1:70000", "line 2: address '127.0.0.1:70000': port 70000 is out of range"),
    ],
)
def test_malformed_hostfile_line(tmp_path: Path, line: str, message: str) -> None:
    hosts = tmp_path / "bad-hosts"
    hosts.write_text(f"127.0.0.1:2101\n{line}\n")
    with cluster(tmp_path, "epochs", ["epochs=1"], hostfile=hosts) as c:
        _fails_at_start(c, "ConfigError", f"host file '{hosts}'", message)


@pytest.mark.parametrize(
    ("process", "message"),
    [
        ("2", "process index 2 is out of range: with 2 process(es) it must be in 0..1"),
        ("5", "process index 5 is out of range: with 2 process(es) it must be in 0..1"),
        ("-1", "process index -1 is out of range"),
        ("one", "-p needs an integer, got 'one'"),
    ],
)
def test_process_index_out_of_range(tmp_path: Path, process: str, message: str) -> None:
    with cluster(tmp_path, "epochs", ["epochs=1"]) as c:
        c.start_as(process)
        code = c[0].wait(PROMPT)
        assert code != 0, c.describe()
        assert "ConfigError" in c[0].stderr() and message in c[0].stderr(), c.describe()


def test_fewer_host_lines_than_processes(tmp_path: Path) -> None:
    hosts, _ports = write_hostfile(tmp_path, 1)
    with cluster(tmp_path, "epochs", ["epochs=1"], hostfile=hosts, processes=2) as c:
        _fails_at_start(c, "ConfigError", "lists 1 address(es), but -n asks for 2 processes")


def test_port_already_in_use(tmp_path: Path) -> None:
    with cluster(tmp_path, "epochs", ["epochs=1"]) as c:
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.bind(("127.0.0.1", c.ports[0]))
            blocker.listen()
            errors = _fails_at_start(c, "ClusterError", "already in use")
            assert f"127.0.0.1:{c.ports[0]}" in errors
        finally:
            blocker.close()


def test_unreachable_peer_is_named(tmp_path: Path) -> None:
    env = {"TIMELYPY_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT)}
    with cluster(tmp_path, "epochs", ["epochs=1"], env=env) as c:
        started = time.monotonic()
        errors = _fails_at_start(
            c,
            "ClusterError",
            "heard nothing from process(es) [1]",
            f"127.0.0.1:{c.ports[1]}",
            within=CONNECT_TIMEOUT + PROMPT,
        )
        assert c[0].exited_at is not None
        elapsed = c[0].exited_at - started
        assert CONNECT_TIMEOUT <= elapsed <= CONNECT_TIMEOUT + DETECTION_SECONDS, (elapsed, errors)


@pytest.mark.parametrize("count", [5, 1])
def test_record_the_codec_cannot_carry(tmp_path: Path, count: int) -> None:
    # count=1: the exchange's batch of one record, which skips the partition.
    result = run_launcher(
        "-n",
        "2",
        "-w",
        "2",
        script("custom_record"),
        str(tmp_path),
        f"count={count}",
        marker=str(tmp_path),
        timeout=RUN_DEADLINE,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    # The sender (process 1) raises it, naming the operator that reads the channel and the
    # type; process 0 reports that process 1 failed, with the same text.
    assert re.search(
        r"\[1\] timelypy\.errors\.SerializationError: operator 'GatherPoints' on worker 3: "
        r"cannot serialise record of type __main__\.Point",
        result.stderr,
    ), result.stderr
    assert re.search(
        r"\[0\] timelypy\.errors\.ClusterError: process 1 at 127\.0\.0\.1:\d+ failed: "
        r"SerializationError: operator 'GatherPoints'",
        result.stderr,
    ), result.stderr
    assert 'serializer="pickle"' in result.stderr  # says what to do
    # one name, the right one: not also the operator that sent the records
    assert "raised in operator" not in result.stderr, result.stderr
    assert "points:" not in result.stdout


def test_record_travels_with_pickle(tmp_path: Path) -> None:
    out = launch_ok(
        "-n",
        "2",
        "-w",
        "2",
        "--serializer",
        "pickle",
        script("custom_record"),
        str(tmp_path),
        marker=str(tmp_path),
    )
    assert out.splitlines() == [
        "[0] points: [Point(0, 0), Point(1, 1), Point(2, 4), Point(3, 9), Point(4, 16)]"
    ]


def test_missing_secret(tmp_path: Path) -> None:
    with cluster(tmp_path, "epochs", ["epochs=1"], secret=None) as c:
        _fails_at_start(
            c,
            "ConfigError",
            "needs a shared secret",
            "python -m timelypy.launch",
            "TIMELYPY_SECRET",
            "TIMELYPY_SECRET_FILE",
        )


def test_unreadable_secret_file(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-secret"
    with cluster(
        tmp_path, "epochs", ["epochs=1"], secret=None, env={"TIMELYPY_SECRET_FILE": str(missing)}
    ) as c:
        _fails_at_start(c, "ConfigError", f"cannot read the cluster secret file '{missing}'")


# -- 5. strangers -------------------------------------------------------------------------

REJECTED = "rejected a connection"
#: What a ZMTP peer sends before it knows anything about the other end: the greeting.
ZMTP_GREETING_MAX = 64


def _stranger_null(context: zmq.Context[Any], port: int) -> zmq.Socket[Any]:
    """A plain DEALER: no CURVE keys at all."""
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(f"tcp://127.0.0.1:{port}")
    sock.send_multipart([b"\x01\x00\x00\x00\x00", b"let me in"], flags=zmq.NOBLOCK)
    return sock


def _stranger_curve(context: zmq.Context[Any], port: int) -> zmq.Socket[Any]:
    """A CURVE client with keys made from a wrong secret (it cannot know the server's key)."""
    wrong = z85.encode(hashlib.sha256(b"not the cluster secret").digest())
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_serverkey = zmq.curve_public(wrong)
    sock.curve_publickey = zmq.curve_public(wrong)
    sock.curve_secretkey = wrong
    sock.connect(f"tcp://127.0.0.1:{port}")
    sock.send_multipart([b"\x01\x00\x00\x00\x00", b"let me in"], flags=zmq.NOBLOCK)
    return sock


def _stranger_leaked_key(context: zmq.Context[Any], port: int) -> zmq.Socket[Any]:
    """A CURVE client that knows the server's public key (leaked) but not the secret.

    It presents a key pair of its own; only the ZAP handler tells it from a peer.
    """
    secret = TEST_SECRET.encode()
    server_public, _ = curve_keys(secret, run_tag(secret, ""))
    public, private = zmq.curve_keypair()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_serverkey = server_public
    sock.curve_publickey = public
    sock.curve_secretkey = private
    sock.connect(f"tcp://127.0.0.1:{port}")
    sock.send_multipart([run_tag(secret, "") + b":0:c", b"let me in"], flags=zmq.NOBLOCK)
    return sock


def _stranger_raw(port: int, garbage: bytes) -> socket.socket:
    """A raw TCP connection that writes ``garbage``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=PROMPT)
    sock.sendall(garbage)
    return sock


def _raw_received(sock: socket.socket) -> bytes:
    """Everything the server sent on ``sock`` until it closed it (bounded)."""
    received = b""
    sock.settimeout(PROMPT)
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return received


def _assert_at_most_greeting(received: bytes) -> None:
    # A ZMTP server greets every connection (signature 0xFF ... 0x7F, version, mechanism)
    # before it reads a byte; anything past the 64-byte greeting would be a message.
    assert len(received) <= ZMTP_GREETING_MAX, received
    assert not received or received[0] == 0xFF, received


def _check_epochs(out_dir: Path, workers: int) -> int:
    """Every epoch's records arrived, each once, at the worker it is routed to."""
    per_worker = read_results(out_dir)
    peers = 2 * workers
    assert sorted(per_worker) == list(range(peers))
    by_epoch: dict[int, Counter[int]] = {}
    for worker, results in per_worker.items():
        for epoch, value in results:
            assert value % peers == worker
            by_epoch.setdefault(epoch, Counter())[value] += 1
    epochs = len(by_epoch)
    assert sorted(by_epoch) == list(range(epochs))
    for counts in by_epoch.values():
        assert counts == Counter(range(RECORDS_PER_EPOCH))
    return epochs


def test_strangers_are_rejected_logged_and_get_nothing(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    context: zmq.Context[Any] = zmq.Context()
    sockets: list[zmq.Socket[Any]] = []
    try:
        with cluster(tmp_path, "epochs", [f"gate={gate}", f"out={out_dir}", "log"], workers=2) as c:
            c.start()
            _running(c, 2)

            def rejections(index: int) -> int:
                return c[index].stderr().count(REJECTED)

            for index, attack in (
                (0, lambda: sockets.append(_stranger_null(context, c.ports[0]))),
                (1, lambda: sockets.append(_stranger_curve(context, c.ports[1]))),
                (0, lambda: sockets.append(_stranger_leaked_key(context, c.ports[0]))),
            ):
                before = rejections(index)
                attack()
                wait_until(
                    lambda index=index, before=before: rejections(index) > before,
                    DETECTION_SECONDS,
                    f"process {index} to log the stranger",
                )
            # Garbage that opens like a ZMTP greeting is refused during the handshake.
            before = rejections(0)
            raw = _stranger_raw(c.ports[0], b"\xff" + b"\x13" * 80)
            wait_until(lambda: rejections(0) > before, DETECTION_SECONDS, "the raw stranger")
            _assert_at_most_greeting(_raw_received(raw))
            # Plain-text garbage is cut off too (its logging is tested below).
            _assert_at_most_greeting(
                _raw_received(_stranger_raw(c.ports[1], b"GET / HTTP/1.0\r\n\r\n"))
            )

            gate.touch()
            codes = c.wait_all(RUN_DEADLINE)
            assert codes == [0, 0], c.describe()
            assert "process 0 finished" in c[0].stdout()
            # The warning says what happened and that the run went on.
            warning = next(line for line in c[0].stderr().splitlines() if REJECTED in line)
            assert "did not authenticate with the cluster secret" in warning
            for index in (0, 1):
                for line in c[index].stderr().splitlines():
                    assert REJECTED in line, c.describe()  # nothing else went wrong
            assert _check_epochs(out_dir, 2) >= 2
        for sock in sockets:
            assert sock.poll(0) == 0  # the strangers never received a single message
    finally:
        for sock in sockets:
            sock.close(0)
        context.term()


def test_plain_text_garbage_is_logged(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with cluster(tmp_path, "epochs", [f"gate={gate}", "log"]) as c:
        c.start()
        _running(c, 1)
        raw = _stranger_raw(c.ports[0], b"GET / HTTP/1.0\r\n\r\n")
        _assert_at_most_greeting(_raw_received(raw))  # the connection was closed on it
        gate.touch()
        assert c.wait_all(RUN_DEADLINE) == [0, 0], c.describe()
        assert REJECTED in c[0].stderr(), c.describe()


#: Garbage connections the flood test makes at most (libzmq queues about 2000 monitor events).
FLOOD_CONNECTIONS = 4000
#: How long the flood test's busy worker stays in its user function.
BUSY_SECONDS = 8


def _flood(port: int, done: Any) -> int:
    """Open connections that write ZMTP-looking garbage until ``done()`` or the limit."""
    made = 0
    while made < FLOOD_CONNECTIONS and not done():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"\xff" + b"\x13" * 80)
        except OSError:
            pass  # the listener's backlog is full: the point is made
        made += 1
    return made


@pytest.mark.slow
def test_connection_flood_while_a_worker_is_busy(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with cluster(tmp_path, "epochs", [f"gate={gate}", f"busy=0:{BUSY_SECONDS}"]) as c:
        c.start()
        c[0].wait_for_output("worker 0 busy", PROMPT)
        _flood(c.ports[0], lambda: "done being busy" in c[0].stdout())
        gate.touch()
        assert c.wait_all(RUN_DEADLINE) == [0, 0], c.describe()


def test_close_survives_a_peer_leaving_meanwhile() -> None:
    # cluster_scripts/close_race.py holds the window open that a loaded machine hits by chance
    # (seen as a launcher run whose process 0 never exits after printing its result).
    try:
        result = subprocess.run(
            [sys.executable, script("close_race")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=8,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ClusterNetwork.close hung after a peer disconnected while it was closing")
    assert result.returncode == 0 and result.stdout == "closed\n", result.stderr


# -- 6. clean completion ------------------------------------------------------------------


def _port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now (as ZeroMQ does, with SO_REUSEADDR)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        return False
    finally:
        sock.close()
    return True


def test_clean_completion_exits_zero_and_frees_ports(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with cluster(tmp_path, "epochs", ["epochs=20", f"out={out_dir}"], workers=2) as c:
        c.start()
        codes = c.wait_all(RUN_DEADLINE)
        assert codes == [0, 0], c.describe()
        for index in (0, 1):
            assert f"process {index} finished" in c[index].stdout()
            assert c[index].stderr() == "", c.describe()
        assert _check_epochs(out_dir, 2) == 20
        assert processes_with(str(tmp_path)) == []
        for port in c.ports:
            assert _port_is_free(port), port
        # The strongest check that nothing lingers: the same cluster again, on the same ports.
        for path in out_dir.iterdir():
            path.unlink()
        again_dir = tmp_path / "again"
        again_dir.mkdir()
        with cluster(
            again_dir, "epochs", ["epochs=3", f"out={out_dir}"], workers=2, hostfile=c.hostfile
        ) as again:
            again.start()
            assert again.wait_all(RUN_DEADLINE) == [0, 0], again.describe()
        assert _check_epochs(out_dir, 2) == 3


def test_launcher_leaves_no_process_behind(tmp_path: Path) -> None:
    # launch_ok asserts that no process carrying the marker outlived the launcher.
    marker = str(tmp_path / "marker")
    out = launch_ok("-n", "3", "-w", "1", script("epochs"), "epochs=5", marker, marker=marker)
    for index in range(3):
        assert f"[{index}] process {index} finished" in out
