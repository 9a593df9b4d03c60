"""A flow worker's part of a recovery execution: begin it, commit as it runs, finish it.

:class:`Recovery` is what :func:`timelypy.flow.driver.flow_program` keeps
per worker when a flow runs with a recovery config: worker 0 begins the
execution in the store and every worker learns its number and resume
epoch; stateful steps and partitions queue snapshots in its writer, which
:meth:`Recovery.checkpoint` commits with the worker's frontier at most
every commit interval, and :meth:`Recovery.finish` records the worker as
done.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from timelypy.dataflow.probe import ProbeHandle
from timelypy.flow.primaries import broadcast_from_first
from timelypy.recovery import AttachedExecution, RecoveryConfig, refuse_unclaimed
from timelypy.recovery.store import Execution, RecoveryStore
from timelypy.worker import Worker

__all__ = ["Recovery", "GC_SECONDS", "partition_recorder"]

#: Seconds between worker 0's garbage collections of a recovery store during a run.
GC_SECONDS = 30.0


class Recovery:
    """One worker's part of an execution: its store, its writer, when it last committed."""

    def __init__(
        self,
        worker: Worker,
        store: Any,
        execution: Execution,
        commit_interval: float,
    ) -> None:
        self.worker = worker
        self.store = store
        self.execution = execution
        self.writer = store.writer(execution.ex_num, worker.index)
        self.commit_interval = commit_interval
        self._next_commit = 0.0
        self._next_gc = time.monotonic() + GC_SECONDS
        #: one past the largest epoch this worker's inputs reached
        self.end_epoch = execution.resume_epoch
        #: drop stored state no step claims instead of refusing it (worker 0 checks)
        self.allow_non_restored_state = False

    @classmethod
    def begin(
        cls,
        worker: Worker,
        config: RecoveryConfig | AttachedExecution,
        stack: contextlib.ExitStack,
    ) -> Recovery:
        """Agree on the execution (worker 0 begins it, under the store's lock).

        An :class:`~timelypy.recovery.AttachedExecution` was begun already
        (by the Spark driver): the worker joins it as it is.
        """
        store: Any
        if isinstance(config, AttachedExecution):
            store, execution = config.store, config.execution
        else:
            store, begun = None, None
            if worker.index == 0:
                store = config.store()
                stack.enter_context(store.running())
                begun_here = store.begin_execution(worker.peers)
                begun = (begun_here.ex_num, begun_here.resume_epoch)
            ex_num, resume = broadcast_from_first(worker, begun, "the execution")
            if store is None:
                store = RecoveryStore(config.db_dir)
            execution = Execution(ex_num, resume, worker.peers)
        recovery = cls(worker, store, execution, config.commit_interval)
        recovery.allow_non_restored_state = getattr(config, "allow_non_restored_state", False)
        stack.callback(recovery.writer.close)
        return recovery

    def check_claims(self) -> None:
        """Worker 0, once the flow is built: refuse stored state no step claims (or drop it)."""
        if self.worker.index != 0:
            return
        resume, allow = self.execution.resume_epoch, self.allow_non_restored_state
        if isinstance(self.store, RecoveryStore):
            refuse_unclaimed(self.store, resume, allow)
        elif hasattr(self.store, "refuse_unclaimed"):  # a Spark task's store, the driver's
            self.store.refuse_unclaimed(resume, allow)

    def seen(self, epoch: int) -> None:
        """An input of this worker reached ``epoch``."""
        if epoch >= self.end_epoch:
            self.end_epoch = epoch + 1

    def checkpoint(self, probe: ProbeHandle, force: bool = False) -> None:
        """Commit queued snapshots and the worker frontier, at most every commit interval."""
        now = time.monotonic()
        if now < self._next_commit and not force:
            return
        self._next_commit = now + self.commit_interval
        frontier = probe.frontier()
        if frontier:
            self.writer.commit(max(self.execution.resume_epoch, min(frontier)))
        if self.worker.index == 0 and now >= self._next_gc:
            self._next_gc = now + GC_SECONDS
            self.store.collect_garbage()

    def finish(self) -> None:
        """Every epoch is closed: commit the rest and record this worker as done."""
        self.writer.commit(self.end_epoch, done=True)
        if self.worker.index == 0:
            self.store.collect_garbage()


def partition_recorder(recovery: Recovery, step_id: str, part: str) -> Callable[[int, Any], None]:
    """Snapshot partition ``part`` of input ``step_id`` as its state at the end of an epoch."""
    snapshot = recovery.writer.snapshot

    def record(epoch: int, state: Any) -> None:
        snapshot(step_id, epoch, [(part, state)])

    return record
