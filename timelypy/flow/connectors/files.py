"""Files: lines and CSV rows in, lines out, each resumed at a byte offset.

* :class:`FileSource` -- one file, one partition;
* :class:`DirSource` -- every file of a directory matching a glob, a
  partition each, spread over the workers that can reach the directory;
* :class:`CSVSource` -- a CSV file's rows as dicts;
* :class:`FileSink`, :class:`DirSink` -- lines appended to one file, or
  to a directory of files by key: exactly once across failures (each
  file's length is its snapshot, and a resumed execution cuts it back).

Each partition's snapshot is the byte offset after the last line it
emitted, so a resumed execution reads on from there: every line reaches
the flow's steps exactly once in the state the recovery store holds.
Partitions are named ``fs_id::path``: ``fs_id`` (by default the device
of the directory) tells workers on different machines whether they see
the same file system.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from itertools import islice, repeat
from pathlib import Path
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["FileSource", "DirSource", "CSVSource", "FileSink", "DirSink"]


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
        # the lines sliced off the file and decoded at once, in C
        lines = list(islice(self._file, self._batch_size))
        if not lines:
            raise StopIteration()
        text = b"".join(lines).decode("utf-8")
        batch = text.split("\n")
        if text.endswith("\n"):
            batch.pop()
        return batch

    def snapshot(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


class _OneFile:
    """What a source of one file is: the file's path, its partition name, its batch size."""

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
        return f"{type(self).__name__}({str(self._path)!r})"

    def list_parts(self) -> list[str]:
        """The file's partition, if this worker can read it."""
        if not self._path.exists():
            return []
        return [f"{_check_fs_id(self._get_fs_id(self._path.parent))}::{self._path}"]


def _path_of(for_part: str) -> Path:
    return Path(for_part.split("::", 1)[1])


class FileSource(_OneFile, FixedPartitionedSource[str, int]):
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

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[str, int]:
        """A reader of the file from byte ``resume_state``."""
        return _Lines(_path_of(for_part), self._batch_size, resume_state)


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
        return _Lines(self._dir / _path_of(for_part), self._batch_size, resume_state)


class _CSVRows(StatefulSourcePartition[dict[str, str], int]):
    """Rows as dicts by the header's names; the snapshot is the byte offset after a row."""

    def __init__(
        self, path: Path, batch_size: int, offset: int | None, fmtparams: dict[str, Any]
    ) -> None:
        self._file = path.open("rb")
        self._fmtparams = fmtparams
        header = next(csv.reader([self._file.readline().decode("utf-8")], **fmtparams), None)
        self._header = header or []
        if offset:
            self._file.seek(offset)
        # a line at a time (a quoted field may span lines), decoded in C
        self._rows = csv.reader(map(bytes.decode, self._file), **fmtparams)
        self._batch_size = batch_size

    def next_batch(self) -> list[dict[str, str]]:
        header = self._header
        rows = islice(self._rows, self._batch_size)
        # dict(zip(header, row)) per row, with no Python bytecode per row
        batch = list(map(dict, map(zip, repeat(header), rows)))
        if not batch:
            raise StopIteration()
        return batch

    def snapshot(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


class CSVSource(_OneFile, FixedPartitionedSource[dict[str, str], int]):
    """The rows of the CSV file ``path`` as dicts keyed by its header row's names.

    ``fmtparams`` go to :func:`csv.reader` (``delimiter=";"``...).  Resumes
    at the byte offset after the last row it emitted.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _device,
        **fmtparams: Any,
    ) -> None:
        super().__init__(path, batch_size, get_fs_id)
        self._fmtparams = fmtparams

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[dict[str, str], int]:
        """A reader of the rows from byte ``resume_state``."""
        return _CSVRows(_path_of(for_part), self._batch_size, resume_state, self._fmtparams)


class _LineWriter(StatefulSinkPartition[str, int]):
    """Lines appended to a file; the snapshot is its length, made durable first.

    On resume the file is cut back to the snapshot's length: whatever a
    failed execution wrote after the epoch that snapshot closed is written
    again by the resumed one, exactly once in all.
    """

    def __init__(self, path: Path, resume_state: int | None, end: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a+b")
        self._file.truncate(resume_state or 0)
        self._file.seek(0, os.SEEK_END)
        self._end = end

    def write_batch(self, values: list[str]) -> None:
        end = self._end
        try:
            data = "".join([value + end for value in values]).encode("utf-8")
        except TypeError:
            bad = next(value for value in values if not isinstance(value, str))
            raise TypeError(
                f"a file sink writes str values, got {type(bad).__name__} {bad!r}; map the "
                "values to text first"
            ) from None
        self._file.write(data)

    def snapshot(self) -> int:
        self._file.flush()
        os.fsync(self._file.fileno())  # durable before the snapshot that covers it
        return self._file.tell()

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()


class FileSink(FixedPartitionedSink[str, int]):
    """Append each ``(key, line)`` item's line, and ``end``, to the file ``path``.

    Exactly once across failures with recovery: every epoch's lines are
    written in epoch order, the file's length is its snapshot when an epoch
    closes (after an fsync), and a resumed execution cuts the file back to
    the length of the resume epoch before writing on.  One worker writes it.
    """

    def __init__(self, path: str | os.PathLike[str], end: str = "\n") -> None:
        self._path = Path(path)
        self._end = end

    def __repr__(self) -> str:
        return f"FileSink({str(self._path)!r})"

    def list_parts(self) -> list[str]:
        """One partition: the file."""
        return [str(self._path)]

    def part_fn(self, item_key: str) -> int:
        """Every item to the one file."""
        return 0

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSinkPartition[str, int]:
        """The file's writer, cut back to ``resume_state`` bytes."""
        return _LineWriter(Path(for_part), resume_state, self._end)


def _part_name(index: int, count: int) -> str:
    return f"part_{index}"


def _adler(key: str) -> int:
    return adler32(key.encode())


class DirSink(FixedPartitionedSink[str, int]):
    """Lines into ``file_count`` files of ``dir_path``, each item's by ``assign_file(key)``.

    As exactly-once as :class:`FileSink`, each file written by one worker;
    the files are named ``file_namer(index, file_count)`` (``part_0``...).
    """

    def __init__(
        self,
        dir_path: str | os.PathLike[str],
        file_count: int,
        file_namer: Callable[[int, int], str] = _part_name,
        assign_file: Callable[[str], int] = _adler,
        end: str = "\n",
    ) -> None:
        if not isinstance(file_count, int) or isinstance(file_count, bool) or file_count < 1:
            raise FlowError(f"DirSink needs file_count >= 1, got {file_count!r}")
        self._dir = Path(dir_path)
        self._count = file_count
        self._namer = file_namer
        self._assign = assign_file
        self._end = end

    def __repr__(self) -> str:
        return f"DirSink({str(self._dir)!r}, {self._count})"

    def list_parts(self) -> list[str]:
        """The files' names."""
        return [self._namer(i, self._count) for i in range(self._count)]

    def part_fn(self, item_key: str) -> int:
        """``assign_file(key)`` (modulo the file count)."""
        return self._assign(item_key)

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSinkPartition[str, int]:
        """One file's writer, cut back to ``resume_state`` bytes."""
        return _LineWriter(self._dir / for_part, resume_state, self._end)
