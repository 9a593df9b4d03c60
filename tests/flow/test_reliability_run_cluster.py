"""run_cluster reports success only once its helper processes finished committing (issue 39).

A helper process whose last recovery commit is slow used to be stopped
once the caller had its result (``CHILD_EXIT_SECONDS`` after process 0
completed): the caller saw success while the store said "not done", and
the next execution redid the last epochs.
"""

from __future__ import annotations

import importlib
import time

import pytest

from timelypy.flow import Dataflow, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.recovery import RecoveryConfig, RecoveryStore

EPOCHS = 8


def input_builder(worker_index, worker_count, resume_epoch):
    if worker_index == 1:  # (this runs in the helper process)
        from timelypy.recovery.store import SnapshotWriter

        commit = SnapshotWriter.commit

        def slow_last_commit(self, frontier, done=False):
            if done:
                time.sleep(3)  # a slow disk, or a large state
            commit(self, frontier, done)

        SnapshotWriter.commit = slow_last_commit
    for epoch in range(resume_epoch, EPOCHS):
        yield AdvanceTo(epoch)
        for i in range(worker_index, 10, worker_count):
            yield Emit((f"k{i}", 1))


@pytest.mark.timeout(180)
def test_run_cluster_waits_for_a_helpers_slow_last_commit(tmp_path, monkeypatch):
    run_module = importlib.import_module("timelypy.flow.run")
    # the helper is given less time than its last commit takes once process 0 is done
    monkeypatch.setattr(run_module, "CHILD_EXIT_SECONDS", 0.5)
    flow = Dataflow()
    flow.input("inp", ManualInputConfig(input_builder))
    flow.stateful_map("sum", lambda key: 0, lambda s, v: (s + v, s + v))
    flow.capture()
    store = tmp_path / "store"
    pairs = run_cluster(flow, None, 2, 1, recovery_config=RecoveryConfig(store))
    assert sorted(item for epoch, item in pairs if epoch == EPOCHS - 1) == sorted(
        (f"k{i}", EPOCHS) for i in range(10)
    )
    recovered = RecoveryStore(store)
    (execution,) = recovered.executions()
    assert recovered.fronts(execution.ex_num) == {0: (EPOCHS, True), 1: (EPOCHS, True)}
