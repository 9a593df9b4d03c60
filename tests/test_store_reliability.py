"""The recovery store under a careless or hostile operator (issue 39), on real SQLite files.

* a partition that lost committed writes (copied without its ``-wal``
  file) is refused, naming it, instead of resuming with wrong totals;
* a writer of an execution that is no longer the current one writes
  nothing (fencing);
* a full disk (a real tmpfs, where the machine lets the test mount one) and
  a damaged partition are :class:`RecoveryError` s naming the file and the
  cause, with nothing written;
* a new store is private to its owner (0700/0600);
* stored state that no step claims (a renamed step) is refused unless the
  run allows dropping it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from timelypy.errors import RecoveryError
from timelypy.flow import Dataflow, run
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.recovery import ALLOW_NON_RESTORED_ENV, RecoveryConfig, RecoveryStore, create_store
from timelypy.recovery.store import partition_paths

EPOCHS = 10
KEYS = [f"k{i}" for i in range(12)]


def events(resume_epoch, fail_at=None):
    for epoch in range(resume_epoch, EPOCHS):
        yield AdvanceTo(epoch)
        if epoch == fail_at:
            raise RuntimeError(f"injected failure at epoch {epoch}")
        for key in KEYS:
            yield Emit((key, 1))
        time.sleep(0.01)  # earlier epochs close and commit first


def totals_flow(step_id="sum", fail_at=None):
    def input_builder(worker_index, worker_count, resume_epoch):
        if worker_index == 0:
            yield from events(resume_epoch, fail_at)

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(input_builder))
    flow.stateful_map(step_id, lambda key: 0, lambda total, v: (total + v, total + v))
    flow.capture()
    return flow


def final_totals(pairs):
    last = {}
    for _epoch, (key, total) in sorted(pairs):
        last[key] = total
    return last


def config(store, **kwargs):
    return RecoveryConfig(store, commit_interval=0, **kwargs)


def fail_once(store, **kwargs):
    """An execution that fails at epoch 6: epochs 0-5 are committed."""
    with pytest.raises(RuntimeError, match="injected failure"):
        list(run(totals_flow(fail_at=6, **kwargs), recovery_config=config(store, partitions=2)))


# -- item 3: a frontier is never trusted beyond the snapshots it covers --------------


def test_a_partition_copied_without_its_wal_is_refused_naming_it(tmp_path):
    store = tmp_path / "store"
    create_store(store, 2)
    # Keep a reader open on each partition, as a running process would: SQLite then
    # leaves the committed transactions in the -wal files instead of folding them
    # into the database files when the run's connections close.
    readers = [sqlite3.connect(path) for path in partition_paths(store, 2)]
    try:
        for reader in readers:
            reader.execute("SELECT COUNT(*) FROM meta").fetchone()
        fail_once(store)
        wal = Path(f"{partition_paths(store, 2)[1]}-wal")
        assert wal.exists() and wal.stat().st_size > 0, "part-1's commits are not in its -wal"
        copy = tmp_path / "copy"
        copy.mkdir()
        for path in store.iterdir():
            if path.name != wal.name and not path.name.endswith("-shm"):
                shutil.copy2(path, copy / path.name)
    finally:
        for reader in readers:
            reader.close()
    with pytest.raises(RecoveryError) as info:
        list(run(totals_flow(), recovery_config=config(copy)))
    text = str(info.value)
    assert "part-1.sqlite3" in text and "lacks snapshots" in text and "-wal" in text
    # refused before anything was recorded: the copy's ledger still ends with execution 1
    assert [ex.ex_num for ex in RecoveryStore(copy).executions()] == [1]
    # and the original store (with its -wal files) resumes to the exact totals
    resumed = list(run(totals_flow(), recovery_config=config(store)))
    assert final_totals(resumed) == dict.fromkeys(KEYS, EPOCHS)


def test_partitions_other_than_the_ledgers_commit_synchronously(tmp_path):
    store = create_store(tmp_path / "store", 3)
    writer = store.writer(store.begin_execution(1).ex_num, 0)
    try:
        modes = [conn.execute("PRAGMA synchronous").fetchone()[0] for conn in writer._conns]
    finally:
        writer.close()
    # 1 = NORMAL (the ledger: a crash may lose its last commits, never reorder them),
    # 2 = FULL (synced before the frontier that covers them is written)
    assert modes == [1, 2, 2]


# -- item 6: fencing -----------------------------------------------------------------


def test_a_writer_of_a_superseded_execution_writes_nothing(tmp_path):
    store = create_store(tmp_path / "store", 2)
    old = store.writer(store.begin_execution(2).ex_num, 1)
    new = store.begin_execution(2)
    try:
        old.snapshot("sum", 3, [(key, 7) for key in KEYS])
        with pytest.raises(RecoveryError, match=rf"no longer the current execution.*{new.ex_num}"):
            old.commit(4)
    finally:
        old.close()
    assert store.snapshots() == []
    assert store.fronts(1) == {} and store.fronts(2) == {}


# -- item 8: store errors name the file and the cause, with nothing written ----------


def test_a_damaged_partition_is_refused_naming_it_before_anything_is_written(tmp_path):
    store = tmp_path / "store"
    fail_once(store)
    # a checkpoint folds every commit into the files, then part-1's snapshot pages are hit
    for path in partition_paths(store, 2):
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    part = partition_paths(store, 2)[1]
    page = 4096
    data = bytearray(part.read_bytes())
    assert len(data) >= 3 * page
    data[2 * page : 3 * page] = b"\xa5" * page  # page 3: the snapshots' b-tree root
    part.write_bytes(bytes(data))
    executions = len(RecoveryStore(store).executions())
    with pytest.raises(RecoveryError) as info:
        list(run(totals_flow(), recovery_config=config(store)))
    text = str(info.value)
    assert "part-1.sqlite3" in text
    assert "malformed" in text or "not a database" in text
    assert "restore the whole store from one backup" in text
    assert len(RecoveryStore(store).executions()) == executions


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def test_a_full_disk_is_a_recovery_error_naming_the_file(tmp_path):
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    if not _mount_tmpfs(disk, "600k"):
        pytest.skip("this machine does not let the test mount a small tmpfs (needs root)")
    try:
        store = create_store(disk / "store", 2)
        ex = store.begin_execution(1)
        writer = store.writer(ex.ex_num, 0)
        try:
            big = os.urandom(64 * 1024)
            epoch = 0
            with pytest.raises(RecoveryError) as info:
                for epoch in range(1000):  # until the disk is full
                    writer.snapshot("sum", epoch, [(f"key-{epoch}-{i}", big) for i in range(4)])
                    writer.commit(epoch + 1)
            committed = writer.committed
        finally:
            writer.close()
        text = str(info.value)
        assert "part-" in text and str(disk) in text
        assert "full" in text
        assert "cannot rollback" not in text
        # what failed was rolled back: the ledger's frontier is the last commit's, and no
        # snapshot of the failed epoch is stored (read from a copy: the full disk has no
        # room left for a reader's shared-memory file)
        after = shutil.copytree(disk / "store", tmp_path / "after")
        copied = RecoveryStore(after)
        assert copied.fronts(ex.ex_num).get(0) == committed
        assert not [row for row in copied.snapshots() if row[2] >= epoch]
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


# -- item 9: private files -------------------------------------------------------------


def test_a_new_store_is_private_to_its_owner(tmp_path):
    store = tmp_path / "deep" / "store"
    list(run(totals_flow(), recovery_config=config(store, partitions=2)))
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    files = [p for p in store.iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"part-0.sqlite3", "part-1.sqlite3", "execution.lock"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path, oct(path.stat().st_mode))


# -- item 5: state no step claims --------------------------------------------------------


def test_state_of_a_renamed_step_is_refused_unless_dropping_it_is_allowed(
    tmp_path, monkeypatch, caplog
):
    store = tmp_path / "store"
    fail_once(store)
    resume = RecoveryStore(store).resume_epoch()
    before = RecoveryStore(store).load("sum", resume)
    assert sorted(before) == sorted(KEYS)
    with pytest.raises(RecoveryError) as info:
        list(run(totals_flow("total"), recovery_config=config(store)))
    text = str(info.value)
    assert "['sum']" in text and "no step of this flow claims" in text
    assert "allow_non_restored_state" in text and ALLOW_NON_RESTORED_ENV in text
    assert RecoveryStore(store).load("sum", resume) == before  # refused: nothing dropped

    # the old name still resumes exactly
    renamed_back = list(run(totals_flow("sum"), recovery_config=config(store)))
    assert final_totals(renamed_back) == dict.fromkeys(KEYS, EPOCHS)


@pytest.mark.parametrize("how", ["config", "environment"])
def test_allowing_non_restored_state_drops_it_with_a_warning(tmp_path, monkeypatch, caplog, how):
    store = tmp_path / "store"
    fail_once(store)
    if how == "environment":
        monkeypatch.setenv(ALLOW_NON_RESTORED_ENV, "1")
        recovery = config(store)
    else:
        recovery = config(store, allow_non_restored_state=True)
    with caplog.at_level(logging.WARNING, logger="timelypy.recovery"):
        pairs = list(run(totals_flow("total"), recovery_config=recovery))
    assert any(
        "dropped the stored state of step(s) ['sum']" in r.getMessage() for r in caplog.records
    )
    # the renamed step started from nothing at the resume epoch, as asked
    resume = min(epoch for epoch, _ in pairs)
    assert final_totals(pairs) == dict.fromkeys(KEYS, EPOCHS - resume)
    assert not [row for row in RecoveryStore(store).snapshots() if row[0] == "sum"]


def test_the_command_line_flag_allows_dropping_non_restored_state(tmp_path):
    from timelypy.errors import ConfigError
    from timelypy.flow.__main__ import _recovery, parser

    allowed = _recovery(
        parser().parse_args(["m:flow", "-r", str(tmp_path), "--allow-non-restored-state"])
    )
    assert allowed is not None and allowed.allow_non_restored_state is True
    plain = _recovery(parser().parse_args(["m:flow", "-r", str(tmp_path)]))
    assert plain is not None and plain.allow_non_restored_state is False
    with pytest.raises(ConfigError, match="needs -r DIR"):
        _recovery(parser().parse_args(["m:flow", "--allow-non-restored-state"]))
