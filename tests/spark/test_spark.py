"""The Spark backend on a real local[4] SparkSession: workers are barrier tasks."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import timelypy
import timelypy_spark
from timelypy import ConfigError
from timelypy_spark.driver import TaskLostError

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


wordcount_example = load_example("spark_combiner_wordcount")


def hello(worker: timelypy.Worker) -> list[tuple[int, int]]:
    handle, probe, seen = timelypy.InputHandle(), timelypy.ProbeHandle(), []
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .exchange(lambda x: x)
            .inspect_time(lambda t, x: seen.append((t, x)))
            .probe_with(probe)
        )
    )
    for round_ in range(10):
        if worker.index == 0:
            handle.send(round_)
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()
    return seen


def test_hello_across_four_tasks(idle):
    results = timelypy_spark.execute(idle, hello, workers=4)
    assert results == [[(r, r) for r in range(10) if r % 4 == w] for w in range(4)]


def test_results_come_back_in_worker_order(idle):
    results = timelypy_spark.execute(idle, lambda worker: (worker.index, worker.peers), workers=3)
    assert results == [(0, 3), (1, 3), (2, 3)]


def test_wordcount_equals_reduce_by_key(idle, tmp_path):
    paths = wordcount_example.generate_text(tmp_path, lines=3000, files=4)
    lines = idle.sparkContext.textFile(",".join(paths), 4)
    expected = (
        lines.flatMap(str.split)
        .map(lambda w: (w, 1))
        .reduceByKey(lambda a, b: a + b)
        .collectAsMap()
    )
    counts = timelypy_spark.run(idle, wordcount_example.count_words, lines, workers=4)
    assert dict(counts.collect()) == expected
    frame = timelypy_spark.run(
        idle, wordcount_example.count_words, lines, workers=4, schema="word string, count long"
    )
    assert frame.columns == ["word", "count"]
    assert {row["word"]: row["count"] for row in frame.collect()} == expected


def test_output_supports_partial_actions_without_rerunning_the_workers(idle):
    runs = idle.sparkContext.accumulator(0)

    def build(scope: timelypy.Scope, numbers: timelypy.Stream) -> timelypy.Stream:
        def count_run(x: int) -> int:
            return x * 2

        runs.add(1)  # once per worker build
        return numbers.map(count_run)

    rdd = idle.sparkContext.parallelize(range(10), 2)
    result = timelypy_spark.run(idle, build, rdd)
    assert sorted(result.collect()) == [x * 2 for x in range(10)]
    assert len(result.take(3)) == 3 and result.first() in range(0, 20, 2)

    def build_rows(scope: timelypy.Scope, numbers: timelypy.Stream) -> timelypy.Stream:
        runs.add(1)
        return numbers.map(lambda x: (x * 2,))

    frame = timelypy_spark.run(idle, build_rows, rdd, schema="n long")
    assert frame.count() == 10 and len(frame.limit(3).collect()) == 3
    assert len(frame.head(2)) == 2
    assert runs.value == 4  # two runs of two workers: later actions reuse the output


def test_dataframe_source_rows_arrive_as_tuples(idle):
    frame = idle.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string")

    def build(scope: timelypy.Scope, rows: timelypy.Stream) -> timelypy.Stream:
        return rows.map(lambda row: (row[0] * 10, row[1].upper())).exchange(lambda r: r[0])

    result = timelypy_spark.run(idle, build, frame.repartition(2), schema="id long, name string")
    assert sorted(tuple(r) for r in result.collect()) == [(i * 10, f"N{i}") for i in range(20)]


def test_epoch_size_is_gone_and_says_what_to_use(idle):
    # Epochs of "every N records of this worker" mean different data on each worker.
    rdd = idle.sparkContext.parallelize(range(40), 2)
    with pytest.raises(ConfigError, match="epoch_size was removed") as info:
        timelypy_spark.run(idle, lambda scope, xs: xs.count(), rdd, epoch_size=5)
    assert "epoch_of" in str(info.value) and "epoch_length" in str(info.value)


def test_epoch_length_gives_clock_epochs(idle):
    # Records read within the first hour of the run are all in epoch 0, on every worker.
    rdd = idle.sparkContext.parallelize(range(40), 2)
    counts = timelypy_spark.run(
        idle, lambda scope, xs: xs.count(), rdd, epoch_length=3600, collect=True
    )
    assert sorted(counts) == [20, 20]


def test_epoch_of_sorts_each_partition_by_epoch(idle):
    # Each partition holds its records in decreasing epoch order: they are sorted first.
    records = [(e, x) for e in reversed(range(4)) for x in range(3)]
    rdd = idle.sparkContext.parallelize(records, 2)

    def build(scope: timelypy.Scope, numbers: timelypy.Stream) -> timelypy.Stream:
        return numbers.count()

    counts = timelypy_spark.run(idle, build, rdd, epoch_of=lambda r: r[0], collect=True)
    assert sum(counts) == 12 and len(counts) == 4  # one count per (worker, epoch) it saw
    with pytest.raises(timelypy.InputError, match="presorted=True"):
        timelypy_spark.run(idle, build, rdd, epoch_of=lambda r: r[0], presorted=True)


def test_epoch_of_assigns_epochs_from_records(idle):
    rdd = idle.sparkContext.parallelize([(e, x) for e in range(4) for x in range(3)], 2)

    def build(scope: timelypy.Scope, records: timelypy.Stream) -> timelypy.Stream:
        return records.inspect_time(lambda t, r: None).map(lambda r: r[0])

    def check_times(scope: timelypy.Scope, records: timelypy.Stream) -> timelypy.Stream:
        def constructor(cap: Any, info: Any) -> Any:
            def logic(inp: Any, out: Any) -> None:
                for cap, data in inp:
                    out.session(cap).give_batch([(cap.time, r[0]) for r in data])

            return logic

        return records.unary(timelypy.Pipeline(), "TimeOf", constructor)

    pairs = timelypy_spark.run(idle, check_times, rdd, epoch_of=lambda r: r[0]).collect()
    assert all(time == epoch for time, epoch in pairs) and len(pairs) == 12


def test_worker_error_is_reraised_quickly_and_no_task_is_left(idle):
    def failing(worker: timelypy.Worker) -> None:
        if worker.index == 2:
            raise ValueError("worker two failed on purpose")
        worker.dataflow(lambda scope: scope.to_stream(range(10)).exchange(lambda x: x))

    started = time.monotonic()
    with pytest.raises(ValueError, match="worker two failed on purpose") as info:
        timelypy_spark.execute(idle, failing, workers=4)
    assert time.monotonic() - started < 15
    assert any("worker 2" in note for note in getattr(info.value, "__notes__", []))


def test_operator_error_inside_dataflow_is_reraised(idle):
    def failing(worker: timelypy.Worker) -> None:
        def boom(x: int) -> int:
            if x == 13:
                raise KeyError("thirteen")
            return x

        worker.dataflow(lambda scope: scope.to_stream(range(20)).exchange(lambda x: x).map(boom))

    with pytest.raises(KeyError, match="thirteen") as info:
        timelypy_spark.execute(idle, failing, workers=2)
    assert any("'Map'" in note for note in getattr(info.value, "__notes__", []))


def test_more_workers_than_slots_fails_fast(idle):
    started = time.monotonic()
    with pytest.raises(ConfigError, match="needs 9 free task slots") as info:
        timelypy_spark.execute(idle, hello, workers=9)
    assert "has 4" in str(info.value)
    assert time.monotonic() - started < 10


def test_timeout_cancels_the_gang(idle):
    def stuck(worker: timelypy.Worker) -> None:
        handle = timelypy.InputHandle()
        worker.dataflow(lambda scope: scope.input_from(handle))
        while True:  # never advances: the dataflow cannot complete
            worker.step_or_park(0.05)

    started = time.monotonic()
    with pytest.raises(timelypy.ClusterError, match="did not finish within 3 s"):
        timelypy_spark.execute(idle, stuck, workers=2, timeout=3)
    assert time.monotonic() - started < 20


def test_failed_gang_is_retried_as_a_new_execution(idle, tmp_path):
    marker = tmp_path / "failed-once"

    def flaky(worker: timelypy.Worker) -> int:
        if worker.index == 0 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("first execution fails")
        return worker.index

    assert timelypy_spark.execute(idle, flaky, workers=2, attempts=1) == [0, 1]
    marker.unlink()
    with pytest.raises(RuntimeError, match="first execution fails"):
        timelypy_spark.execute(idle, flaky, workers=2, attempts=0)


def test_an_upstream_spark_error_is_reraised_as_itself(idle):
    # The partition is computed lazily inside the worker that reads it, so an
    # error in Spark's own map comes back as the original exception.
    rdd = idle.sparkContext.parallelize(range(4), 2).map(lambda x: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        timelypy_spark.run(idle, lambda scope, stream: stream, rdd)


def test_a_task_process_that_dies_stops_the_run(idle):
    import os

    def dying(worker: timelypy.Worker) -> None:
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        worker.dataflow(
            lambda scope: scope.input_from(handle).exchange(lambda x: x).probe_with(probe)
        )
        for epoch in range(1000):
            if worker.index == 1 and epoch == 5:
                os._exit(3)  # the task's Python process vanishes without a word
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            while probe.less_than(handle.time):
                worker.step()

    started = time.monotonic()
    with pytest.raises(TaskLostError) as info:
        timelypy_spark.execute(idle, dying, workers=2)
    assert time.monotonic() - started < 30
    message = str(info.value)
    assert "was lost" in message
    # which worker died, and on which executor: Spark's words, or its peer's report
    assert re.search(r"worker 1('s task|\b.*ran on the executor at)", message) or (
        "process 1" in message
    ), message


def test_bad_arguments(idle):
    rdd = idle.sparkContext.parallelize(range(4), 2)
    with pytest.raises(ConfigError, match=r"epoch_of .* or epoch_length .*, not both"):
        timelypy_spark.run(idle, lambda s, x: x, rdd, epoch_length=2, epoch_of=lambda r: 0)
    with pytest.raises(ConfigError, match="epoch_length must be a positive number"):
        timelypy_spark.run(idle, lambda s, x: x, rdd, epoch_length=0)
    with pytest.raises(ConfigError, match="RDD or a DataFrame"):
        timelypy_spark.run(idle, lambda s, x: x, [1, 2, 3])
    with pytest.raises(ConfigError, match="return the output stream"):
        timelypy_spark.run(idle, lambda s, x: None, rdd)


def test_the_readme_main_job_prints_checkable_counts_per_epoch():
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "spark_wordcount.py"),
            "--copies",
            "600",
            "--epochs",
            "3",
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    zen = load_example("spark_wordcount").ZEN
    per_copy = sum(len(re.findall(r"[a-z']+", line.lower())) for line in zen)
    assert f"Counted {600 * per_copy:,} words" in out
    assert "in 3 epochs" in out and "by 2 timelypy workers" in out and "on local[2]" in out
    better = sum(line.lower().split().count("better") for line in zen)
    for epoch in range(3):  # 200 copies an epoch
        assert re.search(
            rf"epoch {epoch}: {200 * per_copy:,} words; .*better {200 * better:,}", out
        )
    assert re.search(r"Spark start-up [\d.]+ s; first run [\d.]+ s; warm run [\d.]+ s", out)


@pytest.mark.slow
def test_the_combiner_wordcount_example_runs(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "spark_combiner_wordcount.py"),
            "--lines",
            "2000",
            "--master",
            "local[2]",
            "--workers",
            "2",
            "--top",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("20000 words")
    counts = [int(line.split()[0]) for line in lines[1:]]
    assert len(counts) == 3 and counts == sorted(counts, reverse=True)


def test_counter_cross_check(idle, tmp_path):
    # The generated text's counts, computed without Spark, match the dataflow's.
    paths = wordcount_example.generate_text(tmp_path, lines=1000, files=2)
    expected = Counter(
        w for p in paths for line in Path(p).read_text().splitlines() for w in line.split()
    )
    lines = idle.sparkContext.textFile(",".join(paths), 2)
    counts = timelypy_spark.run(idle, wordcount_example.count_words, lines)
    assert dict(counts.collect()) == dict(expected)


def test_settings_come_from_the_spark_configuration_when_left_out(spark, idle):
    # spark.timelypy.* in the session's runtime configuration: a notebook's spark.conf.set
    def index(worker):
        return worker.index

    spark.conf.set("spark.timelypy.workers", "3")
    try:
        assert timelypy_spark.execute(spark, index) == [0, 1, 2]
        assert timelypy_spark.execute(spark, index, workers=2) == [0, 1]  # the keyword wins
        spark.conf.set("spark.timelypy.attempts", "many")
        with pytest.raises(ConfigError, match=r"spark\.timelypy\.attempts='many' is not an? int"):
            timelypy_spark.execute(spark, index)
    finally:
        spark.conf.unset("spark.timelypy.workers")
        spark.conf.unset("spark.timelypy.attempts")
    assert len(timelypy_spark.execute(spark, index)) == spark.sparkContext.defaultParallelism


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_spark_ui_names_jobs_and_stages_after_the_flow(tmp_path):
    script = Path(__file__).parent / "scripts" / "ui_names.py"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ui.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ui = json.loads((tmp_path / "ui.json").read_text())
    names = {job["name"] for job in ui["jobs"]} | {stage["name"] for stage in ui["stages"]}
    assert names == {"timelypy flow plus_one..capture (2 steps)", "timelypy executor check"}
    (barrier,) = [job for job in ui["jobs"] if job["name"].startswith("timelypy flow")]
    assert barrier["description"].startswith(
        "timelypy flow plus_one..capture (2 steps): 2 workers (run "
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_worker_memory_stays_flat_as_the_output_grows(tmp_path):
    # 2M then 20M output records through run(): the tasks stream their output to Spark
    # through a queue bounded in records, so a Python worker's peak stays where it was.
    script = Path(__file__).parent / "scripts" / "output_memory.py"
    peaks = {}
    for records in (2_000_000, 20_000_000):
        output = tmp_path / f"{records}.json"
        result = subprocess.run(
            [sys.executable, str(script), str(records), str(output)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
        )
        assert result.returncode == 0, result.stderr[-3000:]
        data = json.loads(output.read_text())
        assert data["records"] == records
        peaks[records] = max(data["peak_kb"].values())
    assert peaks[20_000_000] <= peaks[2_000_000] * 1.25, peaks


def test_a_stuck_probe_is_explained_on_the_driver(spark, idle, caplog):
    # Worker 1 keeps a capability for a second: each task's watch_probe warning is
    # forwarded to the driver, naming the worker that really holds the time.
    def program(worker):
        import time as clock

        import timelypy as tp

        probe = tp.ProbeHandle()
        kept = []

        def keeper(cap, info):
            if info.worker_index == 1:
                kept.append(cap.retain())
            return lambda out: kept

        worker.dataflow(lambda scope: tp.source(scope, "Holdout", keeper).probe_with(probe))
        worker.watch_probe(probe, after=0.2, name="out")
        deadline = clock.monotonic() + 1.5
        while clock.monotonic() < deadline:
            worker.step_or_park(0.05)
        if kept:
            kept.pop().drop()
        return worker.index

    import logging

    with caplog.at_level(logging.WARNING, logger="timelypy_spark"):
        assert timelypy_spark.execute(spark, program, workers=2) == [0, 1]
    forwarded = [r.getMessage() for r in caplog.records if "has not moved" in r.getMessage()]
    assert any(
        m.startswith("[task 1] worker 1: probe 'out' has not moved from [0]")
        and "operator 'Holdout' (address (0, 1)) holds a capability at 0" in m
        for m in forwarded
    ), forwarded
    assert any(
        m.startswith("[task 0] ") and "0 held on worker 0, 1 on other workers" in m
        for m in forwarded
    ), forwarded


class _Terminal(list):
    """A stream that says it is a terminal and keeps what is written."""

    def isatty(self):
        return True

    def write(self, text):
        self.append(text)

    def flush(self):
        pass


def test_the_driver_draws_the_workers_progress_on_its_terminal(spark, idle, monkeypatch):
    driver = importlib.import_module("timelypy_spark.driver")
    terminal = _Terminal()
    monkeypatch.setattr(driver, "PROGRESS_STREAM", terminal)

    def program(worker):
        import time as clock

        import timelypy as tp

        handle, probe = tp.InputHandle(), tp.ProbeHandle()
        worker.dataflow(lambda scope: scope.input_from(handle).map(str).probe_with(probe))
        for epoch in range(25):  # 2.5 s: two or three reports per worker
            handle.send_batch(list(range(100)))
            handle.advance_to(epoch + 1)
            pause = clock.monotonic() + 0.1
            while clock.monotonic() < pause:
                worker.step_or_park(0.01)
        handle.close()
        return worker.index

    assert timelypy_spark.execute(spark, program, workers=2) == [0, 1]
    frames = [frame for frame in "".join(terminal).split("\r\x1b[K") if frame]
    assert frames, terminal
    assert frames[-1].endswith("\n")
    assert all(frame.startswith("timelypy program on Spark: ") for frame in frames), frames
    assert any(
        re.search(r"epoch \d+ complete below \| inputs at \d+ \| .*records/s \| 2/2 tasks", f)
        for f in frames
    ), frames
