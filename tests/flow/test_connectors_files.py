"""File connectors: sources resume at their offsets; sinks are exactly once across SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import timelypy.flow.operators as op
from timelypy.flow.connectors.files import CSVSource, DirSink, DirSource, FileSink, FileSource
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.recovery import RecoveryConfig
from timelypy.flow.testing import TestingSink, TestingSource, poll_next_batch, run_main

from .graph_helpers import ZERO
from .kill_loop import TOPOLOGIES, kill_and_resume, rescaling


def test_sources_read_and_resume_at_their_byte_offsets(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "b.txt").write_text("four\n")
    (tmp_path / "rows.csv").write_text('name,qty\nfig,1\n"date, dried",2\nkiwi,3\n')
    source = FileSource(tmp_path / "a.txt", batch_size=2)
    (part,) = source.list_parts()
    reader = source.build_part("s", part, None)
    assert poll_next_batch(reader) == ["one", "two"]
    resumed = source.build_part("s", part, reader.snapshot())
    assert poll_next_batch(resumed) == ["three"]
    assert sorted(DirSource(tmp_path, "*.txt").list_parts())[0].endswith("::a.txt")
    csv_source = CSVSource(tmp_path / "rows.csv", batch_size=2)
    (part,) = csv_source.list_parts()
    rows = csv_source.build_part("s", part, None)
    assert poll_next_batch(rows) == [
        {"name": "fig", "qty": "1"},
        {"name": "date, dried", "qty": "2"},
    ]
    assert poll_next_batch(csv_source.build_part("s", part, rows.snapshot())) == [
        {"name": "kiwi", "qty": "3"}
    ]
    flow = Dataflow("dir")
    out: list[str] = []
    op.output("out", op.input("lines", flow, DirSource(tmp_path, "*.txt")), TestingSink(out))
    run_main(flow)
    assert sorted(out) == ["four", "one", "three", "two"]
    assert FileSource(tmp_path / "missing.txt").list_parts() == []


def test_sinks_write_lines_and_cut_back_to_their_snapshot_on_resume(tmp_path):
    items = [("a", "x"), ("b", "y"), TestingSource.ABORT(), ("a", "z"), ("c", "w")]
    config = RecoveryConfig(tmp_path / "db", partitions=1)
    for _ in range(2):
        flow = Dataflow("sinks")
        s = op.input("inp", flow, TestingSource(items))
        op.output("file", s, FileSink(tmp_path / "out.txt"))
        op.output("dir", s, DirSink(tmp_path / "dir", 2))
        run_main(flow, epoch_interval=ZERO, recovery_config=config)
    assert (tmp_path / "out.txt").read_text().splitlines() == ["x", "y", "z", "w"]
    lines = [
        line for p in sorted((tmp_path / "dir").iterdir()) for line in p.read_text().splitlines()
    ]
    assert sorted(lines) == ["w", "x", "y", "z"]
    # a failed execution's lines after the last snapshot are cut off on resume
    (tmp_path / "out.txt").write_text("x\ny\nz\nw\nHALF-WRITTEN")
    writer = FileSink(tmp_path / "out.txt").build_part("s", str(tmp_path / "out.txt"), 4)
    writer.write_batch(["again"])
    writer.close()
    assert (tmp_path / "out.txt").read_text() == "x\ny\nagain\n"
    with pytest.raises(TypeError, match="writes str values"):
        FileSink(tmp_path / "x.txt").build_part("s", str(tmp_path / "x.txt"), None).write_batch([1])


def _lines(out: Path) -> Counter[str]:
    lines: Counter[str] = Counter()
    for path in [out / "pairs.txt", *sorted((out / "dir").glob("part_*"))]:
        if path.exists():
            lines.update(f"{path.name}:{line}" for line in path.read_text().splitlines())
    return lines


def _run_with_kills(tmp_path: Path, kills: int, seed: int, items: int) -> int:
    job = Path(__file__).with_name("files_job.py")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "GRAPH_JOB_COUNT": str(items),  # 4 ms an item and partition
    }

    def start(out: Path, store: Path, topology: dict[str, str]) -> subprocess.Popen[bytes]:
        out.mkdir(exist_ok=True)
        return subprocess.Popen(
            [sys.executable, str(job), str(out), str(store)],
            env={**env, **topology},
            stderr=subprocess.PIPE,
        )

    clean = start(tmp_path / "clean", tmp_path / "clean-store", {})
    assert clean.wait(120) == 0, clean.stderr.read().decode() if clean.stderr else ""
    want = _lines(tmp_path / "clean")
    assert sum(want.values()) > 150
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    runs = rescaling()  # each run on the next topology: resumed on other worker counts
    killed = kill_and_resume(
        lambda: start(out, store, next(runs)), out, kills, seed, span=items / 1000 / (kills + 1)
    )
    final = start(out, store, next(runs))
    assert final.wait(120) == 0, final.stderr.read().decode() if final.stderr else ""
    got = _lines(out)
    assert got == want, (sum(got.values()), sum(want.values()))
    print(
        f"file and dir sinks exactly once through {killed} SIGKILLs, resumed on processes x "
        f"workers {TOPOLOGIES} in turn: {sum(got.values())} lines"
    )
    return killed


@pytest.mark.timeout(300)
def test_file_and_dir_sinks_are_exactly_once_through_sigkills(tmp_path):
    assert _run_with_kills(tmp_path, kills=3, seed=38, items=1200) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_file_and_dir_sinks_are_exactly_once_through_twenty_sigkills(tmp_path):
    assert _run_with_kills(tmp_path, kills=24, seed=2026, items=5000) >= 20


def test_parquet_sink_commits_a_file_per_epoch_and_resumes_exactly_once(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from timelypy.flow.connectors.parquet import ParquetSink

    values = [(f"k{i % 4}", {"k": f"k{i % 4}", "n": i}) for i in range(40)]
    aborting = [*values[:15], TestingSource.ABORT(), *values[15:30], TestingSource.ABORT()]
    aborting += values[30:]
    config = RecoveryConfig(tmp_path / "db", partitions=1)
    for _ in range(3):
        flow = Dataflow("pq")
        op.output(
            "out",
            op.input("inp", flow, TestingSource(aborting, 3)),
            ParquetSink(tmp_path / "ds", 2),
        )
        run_main(flow, epoch_interval=ZERO, recovery_config=config)
    table = pq.read_table(tmp_path / "ds")
    assert sorted(table.column("n").to_pylist()) == list(range(40))
    names = sorted(p.name for p in (tmp_path / "ds").iterdir())
    assert all(name.startswith("part-") and name.endswith(".parquet") for name in names)
    # a file a failed execution committed after the resume point, and a half-written
    # one: a partition resumed at its last snapshot deletes both and keeps the rest
    last = {
        p: max(int(n.split("-")[2][:8]) for n in names if n.startswith(f"part-{p}-"))
        for p in (0, 1)
    }
    (tmp_path / "ds" / f"part-0-{last[0] + 1:08d}.parquet").write_bytes(b"junk")
    (tmp_path / "ds" / ".part-1-00000007.parquet.tmp").write_bytes(b"junk")
    ParquetSink(tmp_path / "ds", 2).build_part("s", "0", last[0])
    ParquetSink(tmp_path / "ds", 2).build_part("s", "1", last[1])
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == names
