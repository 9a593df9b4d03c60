"""Files: the lines of a file or of every file of a directory, resumed at their byte offsets.

* :class:`FileSource` -- one file, one partition;
* :class:`DirSource` -- every file of a directory matching a glob, a
  partition each, spread over the workers that can reach the directory.

Each partition's snapshot is the byte offset after the last line it
emitted, so a resumed execution reads on from there: every line reaches
the flow's steps exactly once in the state the recovery store holds.
Partitions are named ``fs_id::path``: ``fs_id`` (by default the device
of the directory) tells workers on different machines whether they see
the same file system.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from timelypy.errors import FlowError
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["FileSource", "DirSource"]


def _device(path: Path) -> str:
    return str(path.stat().st_dev)


def _check_fs_id(fs_id: str) -> str:
    if "::" in fs_id:
        raise FlowError(f"the result of get_fs_id must not contain '::'; got {fs_id!r}")
    return fs_id


class _Lines(StatefulSourcePartition[str, int]):
    def __init__(self, path: Path, batch_size: int, offset: int | None) -> None:
        self._file = path.open("rb")
        if offset:
            self._file.seek(offset)
        self._batch_size = batch_size

    def next_batch(self) -> list[str]:
        readline = self._file.readline
        batch = []
        for _ in range(self._batch_size):
            line = readline()
            if not line:
                break
            batch.append(line.decode("utf-8").rstrip("\n"))
        if not batch:
            raise StopIteration()
        return batch

    def snapshot(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


class FileSource(FixedPartitionedSource[str, int]):
    r"""The lines of ``path`` (without their ``\n``), ``batch_size`` at a time.

    >>> import tempfile, pathlib
    >>> from timelypy.flow.dataflow import Dataflow
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import run_to_list
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "words.txt"
    >>> _ = path.write_text("to be\nor not\n")
    >>> run_to_list(op.input("lines", Dataflow("doc"), FileSource(path)))
    ['to be', 'or not']
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _device,
    ) -> None:
        self._path = Path(path)
        self._batch_size = batch_size
        self._get_fs_id = get_fs_id

    def __repr__(self) -> str:
        return f"FileSource({str(self._path)!r})"

    def list_parts(self) -> list[str]:
        """The file's partition, if this worker can read it."""
        if not self._path.exists():
            return []
        return [f"{_check_fs_id(self._get_fs_id(self._path.parent))}::{self._path}"]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[str, int]:
        """A reader of the file from byte ``resume_state``."""
        _, path = for_part.split("::", 1)
        return _Lines(Path(path), self._batch_size, resume_state)


class DirSource(FixedPartitionedSource[str, int]):
    """The lines of every file in ``dir_path`` matching ``glob_pat``, a partition per file."""

    def __init__(
        self,
        dir_path: str | os.PathLike[str],
        glob_pat: str = "*",
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _device,
    ) -> None:
        self._dir = Path(dir_path)
        if not self._dir.is_dir():
            raise FlowError(f"DirSource: {str(self._dir)!r} is not a directory")
        self._glob = glob_pat
        self._batch_size = batch_size
        self._get_fs_id = get_fs_id

    def __repr__(self) -> str:
        return f"DirSource({str(self._dir)!r}, {self._glob!r})"

    def list_parts(self) -> list[str]:
        """The files this worker can read."""
        fs_id = _check_fs_id(self._get_fs_id(self._dir))
        return [
            f"{fs_id}::{path.relative_to(self._dir)}"
            for path in sorted(self._dir.glob(self._glob))
            if path.is_file()
        ]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[str, int]:
        """A reader of one file from byte ``resume_state``."""
        _, path = for_part.split("::", 1)
        return _Lines(self._dir / path, self._batch_size, resume_state)
