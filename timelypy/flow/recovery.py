"""Recovery for flows, in the shape bytewax users know: ``RecoveryConfig`` and ``init_db_dir``.

A flow run with a :class:`RecoveryConfig` is an *execution* against the
recovery store in ``db_dir``: when an epoch closes, every stateful step,
source and sink snapshots what changed; a new execution resumes at the
*resume epoch* (the last epoch every worker completed and committed) with
that state, so ``kill -9`` and a rerun give the same output as a run
without the failure (sinks permitting: see the docs on delivery).

>>> import tempfile, pathlib
>>> db = pathlib.Path(tempfile.mkdtemp())
>>> init_db_dir(db, 2)
>>> sorted(p.name for p in db.glob("part-*.sqlite3"))
['part-0.sqlite3', 'part-1.sqlite3']
>>> RecoveryConfig(db).partitions
2
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path

from timelypy.errors import RecoveryError
from timelypy.recovery import COMMIT_SECONDS
from timelypy.recovery import RecoveryConfig as _CoreConfig
from timelypy.recovery.store import create_store

__all__ = ["RecoveryConfig", "init_db_dir"]


@dataclasses.dataclass(frozen=True, init=False)
class RecoveryConfig(_CoreConfig):
    """Recover the flow from the store in ``db_dir``.

    ``backup_interval`` is accepted for bytewax programs; the store keeps
    what a resume needs and frees older snapshots at its garbage
    collection, so it changes nothing.  ``partitions`` is the number of
    partition files to create when ``db_dir`` holds no store yet (it must
    match an existing store); ``commit_interval`` bounds how long a closed
    epoch's snapshots wait to be committed; ``allow_non_restored_state``
    drops stored state that no step of the flow claims instead of refusing
    to run.
    """

    backup_interval: datetime.timedelta = datetime.timedelta(0)

    def __init__(
        self,
        db_dir: str | os.PathLike[str],
        backup_interval: datetime.timedelta | None = None,
        *,
        partitions: int | None = None,
        commit_interval: float = COMMIT_SECONDS,
        allow_non_restored_state: bool = False,
    ) -> None:
        root = Path(db_dir)
        if partitions is None and root.is_dir():
            found = len(list(root.glob("part-*.sqlite3")))
            partitions = found or None
        object.__setattr__(self, "db_dir", root)
        object.__setattr__(self, "partitions", partitions)
        object.__setattr__(self, "commit_interval", commit_interval)
        object.__setattr__(self, "allow_non_restored_state", bool(allow_non_restored_state))
        if backup_interval is not None and not isinstance(backup_interval, datetime.timedelta):
            raise RecoveryError(f"backup_interval must be a timedelta, got {backup_interval!r}")
        object.__setattr__(self, "backup_interval", backup_interval or datetime.timedelta(0))
        self.__post_init__()


def init_db_dir(db_dir: str | os.PathLike[str], count: int) -> None:
    """Create a recovery store of ``count`` partition files in ``db_dir`` (made if missing)."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise RecoveryError(f"init_db_dir needs count >= 1, got {count!r}")
    Path(db_dir).mkdir(parents=True, exist_ok=True)
    create_store(db_dir, count)
