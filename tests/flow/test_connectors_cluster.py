"""The file, Parquet and demo connectors on one worker and on two processes: the same outputs."""

from __future__ import annotations

import datetime

import pytest

from timelypy.flow import run, run_cluster

from . import connector_flows

pytest.importorskip("pyarrow.parquet", reason="needs pyarrow: pip install pyarrow")


@pytest.mark.timeout(180)
def test_dir_csv_parquet_file_and_random_metric_connectors_on_two_processes(tmp_path):
    connector_flows.write_inputs(tmp_path / "in")
    epoch = datetime.timedelta(milliseconds=10)
    one = tmp_path / "one"
    captured = list(run(connector_flows.build(tmp_path / "in", one), epoch_interval=epoch))
    want = connector_flows.outputs(one, captured)
    two = tmp_path / "two"
    captured = run_cluster(
        connector_flows.build(tmp_path / "in", two),
        proc_count=2,
        worker_count_per_proc=1,
        epoch_interval=epoch,
    )
    got = connector_flows.outputs(two, captured)
    # the metrics are random digits: each run draws its own, so compare what they
    # must share (every metric, each value once), not the digits' bounds
    assert [(k, n) for k, (n, _, _) in got.pop("metrics")] == [
        (k, n) for k, (n, _, _) in want["metrics"]
    ]
    assert got == {k: v for k, v in want.items() if k != "metrics"}
    assert sorted((w, n) for w, n in want["parquet"]) == connector_flows.expected_counts()
    assert len(want["file"]) == len(connector_flows.WORDS)
    # each metric: every value once, made-up digits from 0 to 9
    assert [(key, n) for key, (n, _, _) in want["metrics"]] == [
        (f"m{i}", connector_flows.METRIC_VALUES) for i in range(3)
    ]
    assert all(0 <= low <= high <= 9 for _, (_, low, high) in want["metrics"])
    # the two processes wrote the dir sink's files and the dataset's parts side by side
    assert sorted(p.name for p in (two / "dir").iterdir()) == ["part_0", "part_1", "part_2"]
    assert {p.name.split("-")[1] for p in (two / "ds").iterdir()} == {"0", "1"}
