"""``DirectoryInput``: files that keep arriving in a directory, read as they come."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from timelypy.errors import FlowError
from timelypy.flow import Dataflow, DirectoryInput, run, run_cluster

pytestmark = pytest.mark.timeout(120)


def write_files(folder: Path, count: int, every: float, lines: int = 5) -> None:
    """Write ``count`` files, ``every`` seconds apart (renamed into place), then ``_DONE``."""
    for n in range(count):
        temporary = folder / f".file{n}.txt"
        temporary.write_text("".join(f"file{n} line{i}\n" for i in range(lines)))
        temporary.rename(folder / f"file{n}.txt")
        time.sleep(every)
    (folder / "_DONE").write_text("")


def lines_flow(folder: Path, parts: int = 1) -> Dataflow:
    flow = Dataflow()
    flow.input("lines", DirectoryInput(folder, epoch_length=0.2, parts=parts, poll=0.02))
    flow.capture()
    return flow


def expected(count: int, lines: int = 5) -> Counter:
    return Counter(f"file{n} line{i}" for n in range(count) for i in range(lines))


def test_files_arriving_while_it_runs_are_read_in_later_epochs(tmp_path):
    writer = threading.Thread(target=write_files, args=(tmp_path, 6, 0.25))
    writer.start()
    output = list(run(lines_flow(tmp_path)))
    writer.join()
    assert Counter(item for _, item in output) == expected(6)
    epochs = {item.split()[0]: epoch for epoch, item in output}
    assert epochs["file5"] > epochs["file0"]  # later files, later epochs: a stream
    for name in epochs:  # a file's lines share one epoch
        assert len({e for e, item in output if item.startswith(name + " ")}) == 1


@pytest.mark.parametrize(("processes", "workers"), [(1, 3), (2, 1)])
def test_partitions_split_the_files_over_workers(tmp_path, processes, workers):
    writer = threading.Thread(target=write_files, args=(tmp_path, 8, 0.05))
    writer.start()
    output = run_cluster(lines_flow(tmp_path, parts=3), None, processes, workers)
    writer.join()
    assert Counter(item for _, item in output) == expected(8)


def test_a_half_written_file_is_never_read(tmp_path):
    (tmp_path / ".partial.txt").write_text("not yet\n")
    (tmp_path / "writing.tmp").write_text("not yet\n")
    (tmp_path / "done.txt").write_text("ready\n")
    (tmp_path / "_DONE").write_text("")
    assert [item for _, item in run(lines_flow(tmp_path))] == ["ready"]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(FlowError, match="epoch_length > 0"):
        DirectoryInput(tmp_path, epoch_length=0)
    with pytest.raises(FlowError, match="parts >= 1"):
        DirectoryInput(tmp_path, parts=0)
    flow = Dataflow()
    flow.input("lines", DirectoryInput(tmp_path / "missing"))
    flow.capture()
    with pytest.raises(FlowError, match="is not a directory"):
        list(run(flow))
