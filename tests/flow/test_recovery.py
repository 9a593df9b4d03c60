"""Recovery: the store, executions, snapshots at epoch close, resume, rescaling, GC.

Every test runs real flows against real SQLite files in a temporary
directory; the process test kills a real helper process with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from timelypy.errors import RecoveryError
from timelypy.flow import Dataflow, ManualOutputConfig, run, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig, PartitionedInputConfig
from timelypy.recovery import RecoveryConfig, RecoveryStore, create_store
from timelypy.recovery.store import partition_paths

EPOCHS = 12
KEYS = ["a", "b", "c", "d", "e"]


def builder(key):
    return 0


def running_sum(total, value):
    total += value
    # a key whose total passes 40 is discarded: its state is gone, its snapshot a discard
    return (None if total > 40 else total), total


def events(resume_epoch, fail_at=None, delay=0.0):
    """Epoch e carries (key, e) for every key; raise at ``fail_at`` (first execution only)."""
    for epoch in range(resume_epoch, EPOCHS):
        yield AdvanceTo(epoch)
        if epoch == fail_at:
            raise RuntimeError(f"injected failure at epoch {epoch}")
        for key in KEYS:
            yield Emit((key, epoch))
        if delay:
            time.sleep(delay)  # longer than a read: earlier epochs close (and commit) first


def sums_flow(fail_at=None, delay=0.0):
    def input_builder(worker_index, worker_count, resume_epoch):
        if worker_index == 0:
            yield from events(resume_epoch, fail_at, delay)

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(input_builder))
    flow.stateful_map("sum", builder, running_sum)
    flow.capture()
    return flow


def expected():
    return Counter(run(sums_flow()))


def config(tmp_path, **kwargs):
    return RecoveryConfig(tmp_path / "store", commit_interval=0, **kwargs)


def resumed_union(first, second, resume):
    """Execution 1's outputs before the resume epoch, then execution 2's."""
    return Counter(p for p in first if p[0] < resume) + Counter(second)


# -- the store -------------------------------------------------------------------


def test_create_open_and_describe(tmp_path):
    store = create_store(tmp_path / "s", 3)
    assert [p.name for p in partition_paths(store.directory, 3)] == sorted(
        p.name for p in (tmp_path / "s").glob("part-*.sqlite3")
    )
    assert RecoveryStore(tmp_path / "s").partitions == 3
    assert store.resume_epoch() == 0 and store.executions() == []
    with pytest.raises(RecoveryError, match="already holds a recovery store"):
        create_store(tmp_path / "s", 2)


def test_missing_extra_and_mixed_partitions_are_clear_errors(tmp_path):
    create_store(tmp_path / "s", 3)
    (tmp_path / "s" / "part-1.sqlite3").unlink()
    with pytest.raises(RecoveryError, match=r"has 3 partitions, but missing part-1\.sqlite3"):
        RecoveryStore(tmp_path / "s")

    create_store(tmp_path / "t", 2)
    create_store(tmp_path / "u", 3)
    os.replace(tmp_path / "u" / "part-2.sqlite3", tmp_path / "t" / "part-2.sqlite3")
    with pytest.raises(RecoveryError, match="come from different stores"):
        RecoveryStore(tmp_path / "t")

    with pytest.raises(RecoveryError, match="no recovery store at"):
        RecoveryStore(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecoveryError, match="holds no partition files"):
        RecoveryStore(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "part-0.sqlite3").write_text("not a database")
    with pytest.raises(RecoveryError, match="is not a timelypy recovery partition"):
        RecoveryStore(tmp_path / "bad")


def test_config_creates_on_first_use_and_checks_the_partition_count(tmp_path):
    store = RecoveryConfig(tmp_path / "s", partitions=2).store()
    assert store.partitions == 2
    assert RecoveryConfig(tmp_path / "s").store().partitions == 2
    with pytest.raises(RecoveryError, match="has 2 partition"):
        RecoveryConfig(tmp_path / "s", partitions=4).store()
    with pytest.raises(RecoveryError, match="positive int"):
        RecoveryConfig(tmp_path / "x", partitions=0)


def test_command_line_creates_shows_and_collects(tmp_path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "timelypy.recovery", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = cli("create", str(tmp_path / "s"), "--partitions", "2")
    assert made.returncode == 0, made.stderr
    assert "2 partition(s)" in made.stdout
    list(run(sums_flow(), recovery_config=RecoveryConfig(tmp_path / "s")))
    shown = cli("show", str(tmp_path / "s"))
    assert "execution 1: 1 worker(s), resumed at epoch 0" in shown.stdout
    assert f"resume epoch for the next execution: {EPOCHS}" in shown.stdout
    assert cli("gc", str(tmp_path / "s")).returncode == 0
    again = cli("create", str(tmp_path / "s"))
    assert again.returncode == 2 and "already holds" in again.stderr


# -- executions ------------------------------------------------------------------


def test_abort_before_any_snapshot_resumes_from_the_start(tmp_path):
    cfg = config(tmp_path)
    with pytest.raises(RuntimeError, match="injected failure at epoch 0"):
        list(run(sums_flow(fail_at=0), recovery_config=cfg))
    store = cfg.store()
    assert store.resume_epoch() == 0 and store.snapshots() == []
    assert Counter(run(sums_flow(), recovery_config=cfg)) == expected()
    assert [e.resume_epoch for e in store.executions()] == [0, 0]


def test_abort_after_snapshots_resumes_with_the_state_of_the_resume_epoch(tmp_path):
    cfg = config(tmp_path)
    first: list = []
    with pytest.raises(RuntimeError, match="injected failure at epoch 7"):
        for pair in run(sums_flow(fail_at=7, delay=0.03), recovery_config=cfg):
            first.append(pair)
    store = cfg.store()
    resume = store.resume_epoch()
    assert 1 <= resume <= 7, "the failed execution committed the epochs it closed"
    assert {step for step, *_ in store.snapshots()} == {"sum"}
    second = list(run(sums_flow(), recovery_config=cfg))
    assert min(epoch for epoch, _ in second) == resume
    assert resumed_union(first, second, resume) == expected()


def test_continuation_after_a_completed_execution(tmp_path):
    cfg = config(tmp_path)
    assert Counter(run(sums_flow(), recovery_config=cfg)) == expected()
    assert cfg.store().resume_epoch() == EPOCHS

    def more(worker_index, worker_count, resume_epoch):
        if worker_index == 0:
            yield AdvanceTo(resume_epoch)
            yield Emit(("a", 1))
            yield Emit(("z", 1))

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(more))
    flow.stateful_map("sum", builder, running_sum)
    flow.capture()
    # "a" was discarded at epoch 9 (0 + ... + 9 > 40), then summed 10 + 11; "z" is new
    assert sorted(run(flow, recovery_config=cfg)) == [(EPOCHS, ("a", 22)), (EPOCHS, ("z", 1))]


def test_rescaling_3_then_5_then_1_workers(tmp_path):
    """Each execution stops at a different epoch; keys move to their new workers."""
    cfg = config(tmp_path)
    resumes = []
    for workers, fail_at in [(3, 4), (5, 8)]:
        resumes.append(cfg.store().resume_epoch())
        with pytest.raises(RuntimeError, match=f"injected failure at epoch {fail_at}"):
            run_cluster(
                sums_flow(fail_at=fail_at, delay=0.03), None, 1, workers, recovery_config=cfg
            )
    resumes.append(cfg.store().resume_epoch())
    last = run_cluster(sums_flow(), None, 1, 1, recovery_config=cfg)
    store = cfg.store()
    assert [e.worker_count for e in store.executions()] == [3, 5, 1]
    assert [e.resume_epoch for e in store.executions()] == resumes
    assert resumes[0] == 0 and 0 < resumes[1] <= 4 and resumes[1] <= resumes[2] <= 8
    # the last execution's outputs are exactly the failure-free run's from its resume epoch
    assert Counter(last) == Counter(p for p in expected().elements() if p[0] >= resumes[2])


def test_garbage_collection_keeps_only_what_a_resume_can_need(tmp_path):
    cfg = config(tmp_path)
    list(run(sums_flow(), recovery_config=cfg))
    store = cfg.store()
    resume = store.resume_epoch()
    rows = store.snapshots("sum")
    # one snapshot per key at most, none a discard, all before the resume epoch
    assert len({key for _, key, _, _ in rows}) == len(rows)
    assert all(state is not None and epoch < resume for _, _, epoch, state in rows)
    # each key: discarded at epoch 9, then 10 + 11: only its epoch-11 snapshot is left
    assert rows == [("sum", key, EPOCHS - 1, 21) for key in KEYS]
    assert store.collect_garbage() == 0


def test_two_executions_never_overlap(tmp_path):
    cfg = config(tmp_path)
    started = threading.Event()

    def slow(worker_index, worker_count, resume_epoch):
        for epoch in range(resume_epoch, resume_epoch + 1000):
            started.set()
            yield AdvanceTo(epoch)
            yield Emit(("a", 1))
            time.sleep(0.01)

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(slow))
    flow.stateful_map("sum", builder, running_sum)
    flow.capture()
    first = run(flow, recovery_config=cfg)
    next(first)
    assert started.wait(10)
    with pytest.raises(RecoveryError, match="another execution is running"):
        list(run(sums_flow(), recovery_config=cfg))
    first.close()
    deadline = time.monotonic() + 10
    while True:  # the lock goes with the first execution's thread
        try:
            list(run(sums_flow(), recovery_config=cfg))
            break
        except RecoveryError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_unpicklable_state_names_the_step_and_key(tmp_path):
    flow = Dataflow()
    flow.stateful_map("locks", lambda key: threading.Lock(), lambda s, v: (s, v))
    flow.capture()
    with pytest.raises(RecoveryError, match=r"step 'locks' on worker 0: the state of key 'k'"):
        list(run(flow, [(0, ("k", 1))], recovery_config=config(tmp_path)))


# -- a process killed with SIGKILL -------------------------------------------------

KILL_SCRIPT = """
import os, sys, time
from timelypy.flow import Dataflow, ManualOutputConfig, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig, PartitionedInputConfig
from timelypy.recovery import RecoveryConfig

out_dir, store_dir, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])

def input_builder(worker_index, worker_count, resume_epoch):
    with open(os.path.join(out_dir, f"pid-{worker_index}"), "w") as f:
        f.write(str(os.getpid()))
    for epoch in range(resume_epoch, epochs):
        yield AdvanceTo(epoch)
        for i in range(worker_index, 20, worker_count):
            yield Emit((f"k{i}", epoch))
        time.sleep(0.02)

def output_builder(worker_index, worker_count):
    path = os.path.join(out_dir, f"out-{os.getpid()}-{worker_index}")
    def write(epoch, item):
        with open(path, "a") as f:
            f.write(repr((epoch, item)) + "\\n")
    return write

flow = Dataflow()
flow.input("inp", ManualInputConfig(input_builder))
flow.stateful_map("sum", lambda key: 0, lambda s, v: (s + v, s + v))
flow.capture(ManualOutputConfig(output_builder))
run_cluster(flow, None, 2, 1, recovery_config=RecoveryConfig(store_dir, commit_interval=0))
"""


def _outputs(directory: Path) -> list:
    import ast

    pairs = []
    for path in sorted(directory.glob("out-*")):
        pairs += [ast.literal_eval(line) for line in path.read_text().splitlines() if line]
    return pairs


@pytest.mark.timeout(120)
def test_sigkill_one_process_mid_stream_then_resume(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(KILL_SCRIPT)
    epochs = 60
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(out_dir: Path, store: Path) -> subprocess.Popen:
        out_dir.mkdir()
        return subprocess.Popen(
            [sys.executable, str(script), str(out_dir), str(store), str(epochs)],
            env=env,
            stderr=subprocess.PIPE,
        )

    # the failure-free run, against its own store
    clean = start(tmp_path / "clean", tmp_path / "clean-store")
    assert clean.wait(90) == 0, clean.stderr.read().decode() if clean.stderr else ""
    want = Counter(_outputs(tmp_path / "clean"))

    first = start(tmp_path / "first", tmp_path / "store")
    pid_file = tmp_path / "first" / "pid-1"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) or not any(
        epoch >= 15 for epoch, _ in _outputs(tmp_path / "first")
    ):
        assert time.monotonic() < deadline, "the first run made no progress"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert child != first.pid
    os.kill(child, signal.SIGKILL)
    killed_at = time.monotonic()
    assert first.wait(30) != 0
    assert time.monotonic() - killed_at < 15, "the surviving process did not stop in seconds"
    assert first.stderr is not None
    assert "process 1" in first.stderr.read().decode()

    resume = RecoveryStore(tmp_path / "store").resume_epoch()
    assert 0 < resume < epochs
    second = start(tmp_path / "second", tmp_path / "store")
    assert second.wait(90) == 0, second.stderr.read().decode() if second.stderr else ""
    got = resumed_union(_outputs(tmp_path / "first"), _outputs(tmp_path / "second"), resume)
    assert got == want


def test_manual_output_sees_the_epoch_of_every_item(tmp_path):
    seen = []
    flow = Dataflow()
    flow.stateful_map("sum", builder, running_sum)
    flow.capture(ManualOutputConfig(lambda i, n: lambda epoch, item: seen.append(epoch)))
    list(run(flow, [(3, ("a", 1)), (5, ("a", 2))], recovery_config=config(tmp_path)))
    assert seen == [3, 5]


# -- random failure points in random flows ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _random_flow(prefix, fail_epoch, sink):
    def fail(epoch, item):
        if epoch == fail_epoch:
            raise RuntimeError(f"injected failure at epoch {epoch}")

    flow = Dataflow()
    for kind in prefix:
        if kind == "double":
            flow.map(lambda kv: (kv[0], kv[1] * 2))
        elif kind == "drop_odd":
            flow.filter(lambda kv: kv[1] % 2 == 0)
        else:
            flow.flat_map(lambda kv: [kv, (kv[0] + "x", 1)])
    flow.inspect_epoch(fail)
    flow.stateful_map("running", builder, running_sum)
    flow.reduce("batches", lambda a, b: a + b, lambda total: total >= 7)
    flow.capture(ManualOutputConfig(lambda i, n: lambda epoch, item: sink.append((epoch, item))))
    return flow


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prefix=st.lists(st.sampled_from(["double", "drop_odd", "split"]), max_size=3),
    epochs=st.lists(
        st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 5)), max_size=6),
        min_size=1,
        max_size=8,
    ),
    fail_epoch=st.integers(0, 8),
    workers=st.sampled_from([1, 2, 3]),
    resume_workers=st.sampled_from([1, 2]),
)
def test_random_failures_resume_to_the_failure_free_output(
    tmp_path_factory, prefix, epochs, fail_epoch, workers, resume_workers
):
    def pairs():
        for epoch, items in enumerate(epochs):
            yield from ((epoch, item) for item in items)
            time.sleep(0.012)  # past a read's 10 ms: earlier epochs close and commit first

    clean: list = []
    run_cluster(_random_flow(prefix, None, clean), pairs(), 1, workers)
    cfg = RecoveryConfig(tmp_path_factory.mktemp("store"), commit_interval=0)
    first: list = []
    try:
        run_cluster(
            _random_flow(prefix, fail_epoch, first), pairs(), 1, workers, recovery_config=cfg
        )
    except RuntimeError as exc:
        assert "injected failure" in str(exc)
    resume = cfg.store().resume_epoch()
    second: list = []
    run_cluster(_random_flow(prefix, None, second), pairs(), 1, resume_workers, recovery_config=cfg)
    assert resumed_union(first, second, resume) == Counter(clean)


# -- partitioned inputs: each partition's own resume state --------------------------

#: Three "files" of (epoch, word) rows, epochs ascending; partitions of one input.
FILES = {
    f"log-{name}": [(epoch, f"{name}{epoch}") for epoch in range(EPOCHS) for _ in range(2)]
    for name in "xyz"
}


class FileReader:
    """Reads one file from a row offset; ``snapshot()`` is the offset of the next row."""

    def __init__(self, part, offset, resume_epoch, fail_at, opened):
        self.rows = FILES[part]
        self.offset = offset
        self.resume_epoch = resume_epoch
        self.fail_at = fail_at
        opened.append((part, offset))

    def snapshot(self):
        return self.offset

    def __iter__(self):
        current = None
        while self.offset < len(self.rows):
            epoch, word = self.rows[self.offset]
            if epoch < self.resume_epoch:  # only without a resume state
                self.offset += 1
                continue
            if epoch != current:
                yield AdvanceTo(epoch)
                current = epoch
                if epoch == self.fail_at:
                    raise RuntimeError(f"injected failure at epoch {epoch}")
            self.offset += 1
            yield Emit((word[0], 1))
            time.sleep(0.002)


class Files(PartitionedInputConfig):
    def __init__(self, fail_at=None):
        self.fail_at = fail_at
        self.opened = []

    def list_parts(self, worker_index, worker_count):
        return sorted(FILES)

    def build_part(self, part, resume_epoch, resume_state=None):
        offset = 0 if resume_state is None else resume_state
        return FileReader(part, offset, resume_epoch, self.fail_at, self.opened)


def files_flow(config):
    flow = Dataflow()
    flow.input("files", config)
    flow.stateful_map("count", builder, lambda total, value: (total + value, total + value))
    flow.capture()
    return flow


def test_partitioned_input_resumes_each_partition_from_its_own_state(tmp_path):
    want = Counter(run(files_flow(Files())))
    first_config = Files(fail_at=7)
    first: list = []
    with pytest.raises(RuntimeError, match="injected failure at epoch 7"):
        for pair in run(files_flow(first_config), recovery_config=config(tmp_path)):
            first.append(pair)
    store = RecoveryStore(tmp_path / "store")
    resume = store.resume_epoch()
    assert 0 < resume <= 7
    # every partition's offset at the end of an epoch was snapshotted under the input step
    assert {key for step, key, _, _ in store.snapshots("files")} == set(FILES)

    again = Files()
    # two workers now: each reads its own partitions, from their own offsets
    second = run_cluster(files_flow(again), None, 1, 2, recovery_config=config(tmp_path))
    # each reader was opened at the first row of the resume epoch, not at the start
    assert sorted(again.opened) == sorted(
        (part, next(i for i, row in enumerate(rows) if row[0] >= resume))
        for part, rows in FILES.items()
    )
    assert resumed_union(first, second, resume) == want
