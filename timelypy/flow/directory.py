"""An unbounded input: the lines of the files that keep appearing in a directory.

:class:`DirectoryInput` is a :class:`~timelypy.flow.inputs.PartitionedInputConfig`
whose ``parts`` partitions split the directory's files by a stable hash of
their names; each partition's reader (on its primary worker, on threads,
processes or Spark tasks alike) polls the directory, emits the lines of every
new file, whole files at a time, and closes epochs by the clock: epoch ``e``
is the ``e``-th ``epoch_length`` seconds since the reader started (from the
resume epoch, after a resume).  A file counts once its name is complete:
write it under a name starting with ``.`` or ending with ``.tmp`` and rename
it, so no half-written file is read.

The input ends, cleanly, once a file called ``stop_file`` (``_DONE``) is in
the directory and every file before it was read.  While nothing arrives the
reader sleeps ``poll`` seconds between listings, and returns to its worker
each time (an ``AdvanceTo`` of the current epoch), so the dataflow keeps
running and closing epochs.

With recovery each partition snapshots the names it has read, so a resumed
execution reads only the files that arrived since (their lines at the resume
epoch or later).
"""

from __future__ import annotations

import datetime
import fnmatch
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from timelypy.errors import FlowError
from timelypy.flow.inputs import (
    AdvanceTo,
    EmitBatch,
    EpochClock,
    InputItem,
    PartitionedInputConfig,
    clock_settings,
)
from timelypy.hashing import stable_hash

__all__ = ["DirectoryInput"]


class DirectoryInput(PartitionedInputConfig):
    r"""The lines of the files arriving in ``path``, in ``parts`` partitions, epochs by the clock.

    >>> import tempfile, pathlib
    >>> from timelypy.flow import Dataflow, run
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("to be\nor not\n")
    >>> _ = (folder / "_DONE").write_text("")
    >>> flow = Dataflow()
    >>> flow.input("lines", DirectoryInput(folder, epoch_length=60))
    >>> flow.capture()
    >>> sorted(run(flow))
    [(0, 'or not'), (0, 'to be')]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        epoch_length: float | datetime.timedelta = 1.0,
        pattern: str = "*",
        parts: int = 1,
        stop_file: str | None = "_DONE",
        poll: float = 0.05,
        encoding: str = "utf-8",
    ) -> None:
        self.epoch_length, self.poll = clock_settings("DirectoryInput", epoch_length, poll)
        if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise FlowError(f"DirectoryInput needs parts >= 1, got {parts!r}")
        self.path = os.fspath(path)
        self.pattern = pattern
        self.parts = parts
        self.stop_file = stop_file
        self.encoding = encoding

    def list_parts(self, worker_index: int, worker_count: int) -> Iterable[str]:
        """Every partition, from every worker (the directory must be reachable from each)."""
        if not os.path.isdir(self.path):
            raise FlowError(
                f"DirectoryInput: {self.path!r} is not a directory that worker "
                f"{worker_index} can read"
            )
        return [str(part) for part in range(self.parts)]

    def all_parts(self) -> Iterable[str]:
        """Every partition must be read."""
        return [str(part) for part in range(self.parts)]

    def build_part(
        self, part: str, resume_epoch: int, resume_state: Any = None
    ) -> Iterable[InputItem]:
        """The reader of partition ``part`` (a ``snapshot()`` gives the files it read)."""
        return _DirectoryReader(self, int(part), resume_epoch, resume_state)

    def __repr__(self) -> str:
        return (
            f"DirectoryInput({self.path!r}, epoch_length={self.epoch_length:g}, parts={self.parts})"
        )


class _DirectoryReader:
    """One partition's reader: a generator of AdvanceTo/EmitBatch with a ``snapshot()``."""

    def __init__(
        self, config: DirectoryInput, part: int, resume_epoch: int, resume_state: Any
    ) -> None:
        self.config = config
        self.part = part
        self.read: set[str] = set(resume_state or ())
        # names that are not this partition's: judged once, not at every listing
        self.others: set[str] = set()
        self._items = self._generate(resume_epoch)

    def snapshot(self) -> list[str]:
        """The names of the files read so far (the partition's resume state)."""
        return sorted(self.read)

    def __iter__(self) -> Iterator[InputItem]:
        return self._items

    def _mine(self, name: str) -> bool:
        config = self.config
        return (
            not name.startswith(".")
            and not name.endswith(".tmp")
            and name != config.stop_file
            and fnmatch.fnmatch(name, config.pattern)
            and stable_hash(name) % config.parts == self.part
        )

    def _generate(self, resume_epoch: int) -> Iterator[InputItem]:
        config = self.config
        clock = EpochClock(config.epoch_length, resume_epoch)
        yield AdvanceTo(clock.epoch)
        while True:
            if clock.advanced():
                yield AdvanceTo(clock.epoch)
            try:
                names = os.listdir(config.path)
            except OSError as exc:
                raise FlowError(f"DirectoryInput: cannot list {config.path!r}: {exc}") from exc
            stopping = config.stop_file is not None and config.stop_file in names
            new = []
            for name in names:
                if name in self.read or name in self.others:
                    continue
                if self._mine(name):
                    new.append(name)
                else:
                    self.others.add(name)
            new.sort()
            for name in new:
                with open(os.path.join(config.path, name), encoding=config.encoding) as file:
                    lines = file.read().splitlines()
                self.read.add(name)
                if lines:
                    yield EmitBatch(lines)
            if stopping and not new:
                return  # the stop file, and every file listed with it read
            if not new:
                time.sleep(config.poll)
                yield AdvanceTo(clock.epoch)  # nothing new: back to the worker for a while
