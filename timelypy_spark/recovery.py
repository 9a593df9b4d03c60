"""Recovery on Spark: the driver keeps the store, the tasks reach it over their channel.

``run_flow(spark, flow, source, recovery_config=RecoveryConfig(DIR),
attempts=N)`` runs a flow as executions against the recovery store in
``DIR`` *on the driver's machine* (why the driver, and not a path every
executor mounts: ``docs/recovery.md``).  For the whole call the driver
holds the store's execution lock (:class:`StoreService`); before each
attempt it begins the next execution, and while the attempt runs it
answers the tasks' requests over their CURVE-authenticated channel
(:class:`~timelypy_spark.rendezvous.TaskChannel`):

* ``recovery.begin`` -- the execution: its number, its resume epoch, the
  id of this call's output log;
* ``recovery.load`` / ``recovery.load_keys`` -- the snapshots a worker
  reloads;
* ``recovery.commit`` -- a worker's snapshots, captured items and frontier,
  in that order (the final commit of a worker waits for its reply, so the
  driver has stored it before the task can end);
* ``recovery.replay`` -- a page of the output log: the items earlier
  executions of this call captured before the resume epoch.

Each task runs :class:`RemoteStore` (what the flow driver's ``Recovery``
needs of a store), so the flow's recovery code is the same as on threads
and processes.  A lost task ends the attempt at once
(:class:`~timelypy_spark.driver.TaskLostError`); the next attempt is a new
execution that resumes from the resume epoch, re-emits the logged items
of the epochs before it, and computes the rest, so the call's result is
the failure-free one.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from timelypy.recovery import RecoveryConfig, RecoveryStore, refuse_unclaimed
from timelypy.recovery.store import Execution, SnapshotRow, SnapshotWriter, snapshot_rows
from timelypy_spark.driver import AttemptService
from timelypy_spark.rendezvous import Message, Rendezvous, TaskChannel

__all__ = ["StoreService", "RemoteStore", "RemoteWriter", "REQUEST_SECONDS", "REPLAY_PAGE"]

log = logging.getLogger("timelypy_spark")

#: Seconds a task waits for the driver to answer a store request.
REQUEST_SECONDS = 120.0
#: Logged output batches per replay request.
REPLAY_PAGE = 64


class StoreService(AttemptService):
    """The driver's side: the store's lock for the call, one execution per attempt.

    Use it as a context manager around the call's attempts: it takes the
    store's execution lock on entry and, on exit, drops this call's output
    log and collects garbage.
    """

    def __init__(self, config: RecoveryConfig, workers: int) -> None:
        self.config = config
        self.workers = workers
        self.store: RecoveryStore = config.store()
        #: the id of this call's output log
        self.run = uuid.uuid4().hex
        self.execution: Execution | None = None
        self._writers: dict[int, SnapshotWriter] = {}
        self._stack = contextlib.ExitStack()
        #: ``(execution number, resume epoch, started, first frontier past the resume)``
        #: per attempt (monotonic seconds; the last is ``None`` until a worker passes it)
        self.timeline: list[list[Any]] = []

    def __enter__(self) -> StoreService:
        self._stack.enter_context(self.store.running())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._close_writers()
            self.store.drop_outputs(self.run)
            self.store.collect_garbage()
        finally:
            self._stack.close()

    # -- attempts -------------------------------------------------------------------

    def start(self, attempt: int) -> None:
        """Begin the execution this attempt runs."""
        self._close_writers()
        self.execution = self.store.begin_execution(self.workers)
        self.timeline.append(
            [self.execution.ex_num, self.execution.resume_epoch, time.monotonic(), None]
        )
        log.info(
            "attempt %d is execution %d of %s, resuming from epoch %d",
            attempt,
            self.execution.ex_num,
            self.store.directory,
            self.execution.resume_epoch,
        )

    def end(self, attempt: int, ok: bool) -> None:
        """The attempt ended: close its writers (what they committed stays)."""
        self._close_writers()

    def _close_writers(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _writer(self, worker: int) -> SnapshotWriter:
        writer = self._writers.get(worker)
        if writer is None:
            assert self.execution is not None
            writer = self._writers[worker] = self.store.writer(self.execution.ex_num, worker)
        return writer

    # -- requests ---------------------------------------------------------------------

    def handle(self, rendezvous: Rendezvous, identity: bytes, message: Message) -> bool:
        """Answer a ``recovery.*`` request; other messages are not this service's."""
        kind = message.kind
        if not kind.startswith("recovery."):
            return False
        body = message.body
        try:
            result = self._answer(kind[len("recovery.") :], body)
        except Exception as exc:
            exc.add_note(f"in the Spark driver's recovery store {self.store.directory}")
            if body.get("reply", True):
                rendezvous.reply(identity, message, exc)
                return True
            raise
        if body.get("reply", True):
            rendezvous.reply(identity, message, result)
        return True

    def _answer(self, what: str, body: dict[str, Any]) -> Any:
        store, execution = self.store, self.execution
        assert execution is not None
        if what == "begin":
            return {"execution": execution, "run": self.run}
        if what == "load":
            return store.load(
                body["step_id"], body["before"], body["worker_index"], body["worker_count"]
            )
        if what == "load_keys":
            return store.load_keys(body["step_id"], body["keys"], body["before"])
        if what == "claims":
            # worker 0, its flow built: the state no step of it claims is refused (or dropped)
            store.claimed.update(body["claimed"])
            refuse_unclaimed(store, body["before"], body["allow"])
            return None
        if what == "replay":
            return store.replay_outputs(
                self.run,
                execution.resume_epoch,
                body["worker_index"],
                body["worker_count"],
                tuple(body["after"]),
                REPLAY_PAGE,
            )
        if what == "commit":
            writer = self._writer(body["worker"])
            writer.queue(body["rows"])
            for epoch, items in body["outputs"]:
                writer.log_output(self.run, epoch, items)
            writer.commit(body["frontier"], body["done"])
            entry = self.timeline[-1]
            if entry[3] is None and body["frontier"] > execution.resume_epoch:
                entry[3] = time.monotonic()
                log.info(
                    "execution %d closed its first epoch (%d) %.3f s after it began",
                    execution.ex_num,
                    execution.resume_epoch,
                    entry[3] - entry[2],
                    extra={"timelypy_first_epoch": (execution.ex_num, time.time())},
                )
            return None
        raise ValueError(f"unknown recovery request {what!r}")


class RemoteWriter:
    """A task's writer: queues snapshot rows and captured items, sends them with its frontier."""

    def __init__(self, channel: TaskChannel, run: str, worker_index: int) -> None:
        self.channel = channel
        self.run = run
        self.worker_index = worker_index
        self._rows: list[SnapshotRow] = []
        self._outputs: list[tuple[int, bytes]] = []
        self.committed: tuple[int, bool] | None = None

    def snapshot(self, step_id: str, epoch: int, states: Iterable[tuple[str, Any]]) -> None:
        """Queue ``(state_key, state)`` of ``step_id`` at the end of ``epoch``."""
        self._rows.extend(snapshot_rows(step_id, epoch, states, self.worker_index))

    def log_output(self, epoch: int, pairs: list[tuple[int, Any]]) -> None:
        """Queue a batch of ``(epoch, item)`` captured at ``epoch`` for the call's output log."""
        self._outputs.append((epoch, pickle.dumps(pairs, pickle.HIGHEST_PROTOCOL)))

    def commit(self, frontier: int, done: bool = False) -> None:
        """Send what is queued and the frontier; the last commit (``done``) waits for the driver."""
        if not self._rows and not self._outputs and self.committed == (frontier, done):
            return
        body = {
            "worker": self.worker_index,
            "rows": self._rows,
            "outputs": self._outputs,
            "frontier": frontier,
            "done": done,
            "reply": done,
        }
        if done:
            self.channel.request("recovery.commit", body, REQUEST_SECONDS)
        else:
            self.channel.send("recovery.commit", body)
        self._rows, self._outputs = [], []
        self.committed = (frontier, done)

    def close(self) -> None:
        """Nothing to release: the channel belongs to the task."""


class RemoteStore:
    """What a flow worker needs of a store, asked of the driver that keeps it."""

    def __init__(self, channel: TaskChannel, worker_index: int) -> None:
        self.channel = channel
        self.worker_index = worker_index
        begun = channel.request("recovery.begin", {}, REQUEST_SECONDS)
        #: the execution the driver began for this attempt
        self.execution: Execution = begun["execution"]
        #: the step IDs whose state this task loaded (as :attr:`RecoveryStore.claimed`)
        self.claimed: set[str] = set()
        #: this task's writer (one worker per task)
        self.remote_writer = RemoteWriter(channel, begun["run"], worker_index)

    def load(
        self, step_id: str, before: int, worker_index: int = 0, worker_count: int = 1
    ) -> dict[str, Any]:
        """The snapshots of ``step_id`` before ``before`` for one worker (see RecoveryStore)."""
        self.claimed.add(step_id)
        return dict(
            self.channel.request(
                "recovery.load",
                {
                    "step_id": step_id,
                    "before": before,
                    "worker_index": worker_index,
                    "worker_count": worker_count,
                },
                REQUEST_SECONDS,
            )
        )

    def load_keys(self, step_id: str, keys: Iterable[str], before: int) -> dict[str, Any]:
        """The snapshots of some keys of ``step_id`` before ``before`` (see RecoveryStore)."""
        self.claimed.add(step_id)
        return dict(
            self.channel.request(
                "recovery.load_keys",
                {"step_id": step_id, "keys": list(keys), "before": before},
                REQUEST_SECONDS,
            )
        )

    def refuse_unclaimed(self, before: int, allow: bool) -> None:
        """Have the driver refuse (or drop) the stored state no step of the flow claims.

        Every worker builds every step, so worker 0's claims are the flow's.
        """
        self.channel.request(
            "recovery.claims",
            {"claimed": sorted(self.claimed), "before": before, "allow": allow},
            REQUEST_SECONDS,
        )

    def writer(self, ex_num: int, worker_index: int) -> RemoteWriter:
        """The task's writer (one worker per task, so one writer)."""
        return self.remote_writer

    def collect_garbage(self) -> int:
        """The driver collects garbage itself, between attempts."""
        return 0

    def replay(self, worker_count: int) -> Iterator[list[tuple[int, Any]]]:
        """The ``(epoch, item)`` batches earlier executions of this call captured.

        Those of the epochs before the resume epoch, logged by the workers
        ``w`` with ``w % worker_count`` this worker's index.
        """
        after: tuple[int, int] = (0, 0)
        while True:
            page = self.channel.request(
                "recovery.replay",
                {"worker_index": self.worker_index, "worker_count": worker_count, "after": after},
                REQUEST_SECONDS,
            )
            for position, blob in page:
                after = position
                yield pickle.loads(blob)  # written by this call's own tasks
            if len(page) < REPLAY_PAGE:
                return
