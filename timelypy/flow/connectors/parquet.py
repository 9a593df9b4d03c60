"""Parquet datasets: a file per epoch and partition, committed by an atomic rename.

Needs pyarrow (in the ``spark`` extra, or ``pip install pyarrow``).
:class:`ParquetSink` takes ``(key, row)`` items, ``row`` a dict of column
values, and writes each partition's rows of an epoch, when the epoch
closes, to ``.part-P-N.parquet.tmp`` in ``dir_path``, then renames it to
``part-P-N.parquet`` (``N`` the partition's epoch count): a reader never
sees half a file, and ``spark.read.parquet(dir_path)`` or
``pyarrow.dataset.dataset(dir_path)`` read the whole dataset (names that
start with a dot are hidden from both).  The snapshot is ``N``; a resumed
execution deletes the files its partition committed after it, and writes
them again: every row exactly once.

>>> import tempfile, pyarrow.parquet as pq
>>> from timelypy.flow.dataflow import Dataflow
>>> import timelypy.flow.operators as op
>>> from timelypy.flow.testing import TestingSource, run_main
>>> out = tempfile.mkdtemp()
>>> flow = Dataflow("doc")
>>> items = [("a", {"k": "a", "n": 1}), ("b", {"k": "b", "n": 2})]
>>> rows = op.input("rows", flow, TestingSource(items))
>>> op.output("out", rows, ParquetSink(out))
>>> run_main(flow)
>>> sorted(pq.read_table(out).column("n").to_pylist())
[1, 2]
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition

__all__ = ["ParquetSink"]


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FlowError("ParquetSink needs pyarrow: pip install pyarrow") from exc
    return pyarrow


class _Files(StatefulSinkPartition[dict[str, Any], int]):
    def __init__(self, directory: Path, part: int, resume: int | None, what: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._part = part
        self._what = what
        self._seq = resume or 0
        pattern = re.compile(rf"^\.?part-{part}-(\d+)\.parquet(\.tmp)?$")
        for path in directory.iterdir():
            found = pattern.match(path.name)
            if found and (found[2] or int(found[1]) > self._seq):
                path.unlink()  # a failed execution's, after the resume point
        self._rows: list[dict[str, Any]] = []

    def write_batch(self, values: list[dict[str, Any]]) -> None:
        for value in values:
            if not isinstance(value, dict):
                raise TypeError(
                    f"{self._what} writes rows as dicts of column values, got {value!r}"
                )
        self._rows.extend(values)

    def snapshot(self) -> int:
        rows, self._rows = self._rows, []
        if not rows:
            return self._seq
        pyarrow = _pyarrow()
        seq = self._seq + 1
        name = f"part-{self._part}-{seq:08d}.parquet"
        temporary = self._dir / f".{name}.tmp"
        try:
            table = pyarrow.Table.from_pylist(rows)
        except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError) as exc:
            raise FlowError(f"{self._what}: the rows do not make one Arrow table: {exc}") from exc
        pyarrow.parquet.write_table(table, temporary)
        with open(temporary, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temporary, self._dir / name)
        self._seq = seq
        return seq

    def close(self) -> None:
        self.snapshot()


class ParquetSink(FixedPartitionedSink[dict[str, Any], int]):
    """``(key, row)`` items into a Parquet dataset in ``dir_path``, exactly once (see above)."""

    def __init__(self, dir_path: str | os.PathLike[str], partitions: int = 1) -> None:
        if not isinstance(partitions, int) or partitions < 1:
            raise FlowError(f"ParquetSink needs partitions >= 1, got {partitions!r}")
        self._dir = Path(dir_path)
        self._partitions = partitions

    def __repr__(self) -> str:
        return f"ParquetSink({str(self._dir)!r}, {self._partitions})"

    def list_parts(self) -> list[str]:
        """``partitions`` partitions (their files share the directory)."""
        return [str(i) for i in range(self._partitions)]

    def part_fn(self, item_key: str) -> int:
        """Adler-32 of the key."""
        return adler32(item_key.encode())

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSinkPartition[dict[str, Any], int]:
        """One partition's writer, its files after ``resume_state`` deleted."""
        what = f"output step {step_id!r} (partition {for_part})"
        return _Files(self._dir, int(for_part), resume_state, what)
