"""Recovery for ``timelypy.flow``: executions, snapshots at epoch close, the resume epoch.

A flow run with a :class:`RecoveryConfig` is an *execution* against a
*recovery store* (a directory of partitioned SQLite files, see
:mod:`timelypy.recovery.store`).  When an epoch closes in a stateful step
(``stateful_map``, ``reduce``), the keys it touched in that epoch are
snapshotted; each worker records its *frontier*, the first epoch not yet
closed and committed on it.  A new execution against the same store gets the
next execution ID and resumes from the *resume epoch*, the last execution's
cluster frontier: every stateful step reloads the latest snapshot of each of
its keys before it, and the inputs start at it (``input_builder(worker_index,
worker_count, resume_epoch)``).  The worker count may change between
executions: keys go to workers by their stable hash.

Stored state that no step of the flow claims (a stateful step renamed or
removed since the last execution) is refused, naming the steps, unless the
run allows dropping it (``RecoveryConfig(..., allow_non_restored_state=True)``,
``--allow-non-restored-state``, or ``TIMELYPY_ALLOW_NON_RESTORED_STATE=1``):
otherwise a renamed step would silently restart from nothing
(:func:`refuse_unclaimed`).

>>> import tempfile
>>> from timelypy.recovery import RecoveryConfig
>>> config = RecoveryConfig(tempfile.mkdtemp(), partitions=2)
>>> config.store().partitions
2

See ``docs/recovery.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timelypy.errors import RecoveryError
from timelypy.recovery.store import (
    Execution,
    RecoveryStore,
    create_store,
    key_hash,
)

__all__ = [
    "RecoveryConfig",
    "RecoveryStore",
    "RecoveryError",
    "Execution",
    "create_store",
    "key_hash",
    "ALLOW_NON_RESTORED_ENV",
]

log = logging.getLogger("timelypy.recovery")

#: Environment variable that allows dropping stored state no step claims (``1``, ``true``).
ALLOW_NON_RESTORED_ENV = "TIMELYPY_ALLOW_NON_RESTORED_STATE"

#: Seconds between a worker's commits of snapshots and frontier, at most.
COMMIT_SECONDS = 0.05


@dataclass(frozen=True)
class AttachedExecution:
    """An execution begun by someone else, for a worker to join (the Spark driver's).

    ``store`` is what the worker reads its snapshots from and writes them
    to: a :class:`RecoveryStore`, or anything with the same ``load``,
    ``load_keys``, ``writer`` and ``collect_garbage`` (the Spark task's
    client of the store its driver keeps).  The worker neither takes the
    store's lock nor begins an execution: whoever attached it did.
    """

    store: Any
    execution: Execution
    commit_interval: float = 0.05


@dataclass(frozen=True)
class RecoveryConfig:
    """Where a flow keeps its recovery data, and how often it commits.

    ``db_dir`` is the store's directory.  If it holds no store yet, one of
    ``partitions`` files (default 1) is created there on first use; if it
    does, ``partitions`` (when given) must match it.  Every process of a
    cluster must reach the same directory.  ``commit_interval`` bounds how
    long a closed epoch's snapshots wait before they are committed with the
    worker's frontier (a resume redoes at most that much more work).
    ``allow_non_restored_state``: drop (with a warning) stored state that
    no step of the flow claims, instead of refusing to run (also
    ``TIMELYPY_ALLOW_NON_RESTORED_STATE=1``).
    """

    db_dir: str | os.PathLike[str]
    partitions: int | None = None
    commit_interval: float = COMMIT_SECONDS
    allow_non_restored_state: bool = False

    def __post_init__(self) -> None:
        if self.partitions is not None and (
            not isinstance(self.partitions, int)
            or isinstance(self.partitions, bool)
            or self.partitions < 1
        ):
            raise RecoveryError(f"partitions must be a positive int, got {self.partitions!r}")
        if not isinstance(self.commit_interval, (int, float)) or self.commit_interval < 0:
            raise RecoveryError(
                f"commit_interval must be seconds >= 0, got {self.commit_interval!r}"
            )

    def store(self) -> RecoveryStore:
        """Open the store, creating it first if the directory holds none."""
        root = Path(self.db_dir)
        if not root.is_dir() or not any(root.glob("part-*.sqlite3")):
            try:
                return create_store(root, self.partitions or 1)
            except RecoveryError:
                if not any(root.glob("part-*.sqlite3")):
                    raise
                # another process created it first: open theirs
        store = RecoveryStore(root)
        if self.partitions is not None and store.partitions != self.partitions:
            raise RecoveryError(
                f"the recovery store at {root} has {store.partitions} partition(s), but "
                f"RecoveryConfig asked for {self.partitions}; leave partitions out to use it"
            )
        return store


def _allowed(allow: bool, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return allow or env.get(ALLOW_NON_RESTORED_ENV, "").strip().lower() in ("1", "true", "yes")


def refuse_unclaimed(store: RecoveryStore, before: int, allow: bool = False) -> None:
    """Refuse the stored state before epoch ``before`` that no step claims; or drop it.

    The claims are the steps whose state was loaded through ``store``
    (:attr:`RecoveryStore.claimed`): call this once the flow is built.  A
    step ID with snapshots but no claim is a step renamed or removed since
    the state was stored: resuming would silently start it from nothing.
    With ``allow`` (or ``TIMELYPY_ALLOW_NON_RESTORED_STATE=1``) its
    snapshots are deleted, with a warning; otherwise a
    :class:`~timelypy.errors.RecoveryError` names the steps.
    """
    unclaimed = sorted(store.stored_steps(before) - store.claimed)
    if not unclaimed:
        return
    if _allowed(allow):
        deleted = store.drop_steps(unclaimed)
        log.warning(
            "dropped the stored state of step(s) %s (%d snapshot(s)) from %s: no step of the "
            "flow claims it, and dropping it is allowed",
            unclaimed,
            deleted,
            store.directory,
        )
        return
    claimed = sorted(store.claimed)
    raise RecoveryError(
        f"the recovery store {store.directory} holds state of step(s) {unclaimed} that no step "
        f"of this flow claims (its stateful steps, sources and sinks are {claimed}): a step "
        "renamed or removed would start from nothing. Give the step its old step ID back, or "
        "allow dropping that state: RecoveryConfig(..., allow_non_restored_state=True), "
        f"--allow-non-restored-state, or {ALLOW_NON_RESTORED_ENV}=1"
    )
