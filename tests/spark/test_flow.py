"""``timelypy_spark.run_flow``: timelypy.flow Dataflows on Spark tasks.

Each result is compared with :func:`timelypy.flow.run` on one worker, the
reference: the same flow must give the same multiset of ``(epoch, item)``
whatever the number of workers, which holds only if epochs mean the same
data on every worker (from the record or the clock, never a count).
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from operator import add
from pathlib import Path
from typing import Any

import pytest

import timelypy_spark
from timelypy.errors import ConfigError, FlowError, InputError
from timelypy.flow import (
    AdvanceTo,
    Dataflow,
    Emit,
    ManualOutputConfig,
    PartitionedInputConfig,
    run,
    single_batch,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]

TEXT = """To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them. To die: to sleep;
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to, 'tis a consummation
Devoutly to be wish'd. To die, to sleep;
To sleep: perchance to dream: ay, there's the rub;""".splitlines()


def wordcount() -> Dataflow:
    """Seed 004's wordcount flow."""
    flow = Dataflow()
    flow.map(str.lower)
    flow.flat_map(lambda line: re.findall(r'[^\s!,.?":;0-9]+', line))
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.capture()
    return flow


def numbered(lines: list[str]) -> list[str]:
    """``"i: line"``: the tokenizer drops digits and colons, so only the epoch changes."""
    return [f"{i}: {line}" for i, line in enumerate(lines)]


def line_epoch(line: str) -> int:
    return int(line.split(":", 1)[0])


def test_wordcount_one_epoch_equals_run_on_one_worker(idle):
    lines = TEXT * 20
    expected = Counter(run(wordcount(), single_batch(lines)))
    rdd = idle.sparkContext.parallelize(lines, 2)
    result = timelypy_spark.run_flow(idle, wordcount(), rdd, workers=2)
    assert Counter(result.collect()) == expected
    assert {epoch for epoch, _ in expected} == {0}
    assert timelypy_spark.run_flow(idle, wordcount(), rdd, workers=2).count() == len(expected)


def test_one_epoch_partitions_larger_than_a_chunk_are_read_whole(idle):
    # Every record in epoch 0: each partition reaches its worker in 4,096-record
    # EmitBatch chunks; three and a bit of them per partition here.
    from timelypy_spark.io import BATCH

    n = 2 * (3 * BATCH + 17)
    flow = Dataflow()
    flow.map(lambda x: (str(x % 7), x))
    flow.reduce_epoch(add)
    flow.capture()
    rdd = idle.sparkContext.parallelize(range(n), 2)
    pairs = timelypy_spark.run_flow(idle, flow, rdd, workers=2, collect=True)
    expected = {str(r): sum(x for x in range(n) if x % 7 == r) for r in range(7)}
    assert sorted(pairs) == sorted((0, item) for item in expected.items())


def test_wordcount_epoch_per_line_equals_run_on_one_worker(idle):
    lines = numbered(TEXT * 3)
    expected = Counter(run(wordcount(), [(line_epoch(line), line) for line in lines]))
    shuffled = list(lines)
    random.Random(4).shuffle(shuffled)  # each task must sort its partition by epoch
    rdd = idle.sparkContext.parallelize(shuffled, 3)  # repartitioned to 2 workers
    pairs = timelypy_spark.run_flow(
        idle, wordcount(), rdd, workers=2, epoch_of=line_epoch, collect=True
    )
    assert Counter(pairs) == expected
    assert len({epoch for epoch, _ in pairs}) == len(lines)


def running_totals() -> Dataflow:
    flow = Dataflow()
    flow.map(lambda record: (record[1], record[2]))
    flow.stateful_map("total", lambda key: 0, lambda total, x: (total + x, total + x))
    flow.capture()
    return flow


def test_stateful_map_keeps_state_across_epochs(idle):
    # One value per key and epoch, so the running totals do not depend on arrival order.
    records = [(epoch, f"k{key}", epoch * 10 + key) for epoch in range(6) for key in range(5)]
    expected = Counter(run(running_totals(), [(r[0], r) for r in records]))
    shuffled = list(records)
    random.Random(7).shuffle(shuffled)
    rdd = idle.sparkContext.parallelize(shuffled, 2)
    result = timelypy_spark.run_flow(idle, running_totals(), rdd, epoch_of=lambda r: r[0])
    assert Counter(result.collect()) == expected
    assert (5, ("k4", sum(e * 10 + 4 for e in range(6)))) in expected


def test_dataframe_in_and_out(idle):
    rows = [(epoch, user, amount) for epoch in range(3) for user in "abc" for amount in (1, 2)]
    frame = idle.createDataFrame(rows, "epoch long, user string, amount long")
    flow = Dataflow()
    flow.map(lambda row: (row[1], row[2]))
    flow.reduce_epoch(add)
    flow.capture()
    result = timelypy_spark.run_flow(
        idle, flow, frame, workers=2, epoch_of=lambda row: row[0], schema="user string, total long"
    )
    assert result.columns == ["epoch", "user", "total"]
    assert sorted(tuple(row) for row in result.collect()) == [
        (epoch, user, 3) for epoch in range(3) for user in "abc"
    ]
    assert result.filter("user = 'b'").count() == 3  # later actions do not rerun the flow

    # Without a schema: an RDD of (epoch, item); rows enter as tuples, or dicts.
    pairs = timelypy_spark.run_flow(idle, flow, frame, workers=2, epoch_of=lambda r: r[0])
    assert sorted(pairs.collect())[:2] == [(0, ("a", 3)), (0, ("b", 3))]
    names = Dataflow()
    names.map(lambda row: row["user"])
    names.capture()
    plain = timelypy_spark.run_flow(
        idle, names, frame, workers=2, row_type="dict", schema="user string", epoch_column=None
    )
    assert plain.columns == ["user"] and plain.distinct().count() == 3


class Files(PartitionedInputConfig):
    """Five partitions, every worker can reach every one: the primaries pick the reader."""

    def __init__(self, marks: str) -> None:
        self.marks = marks

    def list_parts(self, worker_index: int, worker_count: int) -> list[str]:
        return [f"part{i}" for i in range(5)]

    def build_part(self, part: str, resume_epoch: int) -> Iterator[Any]:
        Path(self.marks, f"{part}-{time.monotonic_ns()}").touch()  # one file per opening
        for epoch in range(3):
            yield AdvanceTo(epoch)
            for i in range(4):
                yield Emit((part, i))


def test_partitioned_input_reads_each_partition_exactly_once(idle, tmp_path):
    flow = Dataflow()
    flow.map(lambda item: (item[0], 1))
    flow.reduce_epoch(add)
    flow.capture()
    pairs = timelypy_spark.run_flow(idle, flow, Files(str(tmp_path)), workers=2, collect=True)
    assert sorted(pairs) == [(epoch, (f"part{i}", 4)) for epoch in range(3) for i in range(5)]
    opened = sorted(path.name.split("-")[0] for path in tmp_path.iterdir())
    assert opened == [f"part{i}" for i in range(5)]


def test_flow_with_its_own_input_step(idle, tmp_path):
    flow = Dataflow()
    flow.input("files", Files(str(tmp_path)))
    flow.filter(lambda item: item[1] == 0)
    flow.capture()
    pairs = timelypy_spark.run_flow(idle, flow, workers=2, collect=True)
    assert Counter(pairs) == Counter((e, (f"part{i}", 0)) for e in range(3) for i in range(5))
    with pytest.raises(FlowError, match="already has an input step"):
        timelypy_spark.run_flow(idle, flow, idle.sparkContext.parallelize([1], 1))


def test_capture_with_an_output_config_writes_from_the_tasks(idle, tmp_path):
    def output_builder(worker_index: int, worker_count: int) -> Any:
        path = tmp_path / f"worker{worker_index}.txt"

        def write(epoch: int, item: Any) -> None:
            with path.open("a") as file:
                file.write(f"{epoch} {item}\n")

        return write

    flow = Dataflow()
    flow.map(lambda x: x * 2)
    flow.capture(ManualOutputConfig(output_builder))
    rdd = idle.sparkContext.parallelize(range(10), 2)
    assert timelypy_spark.run_flow(idle, flow, rdd, collect=True) == []
    written = [line for path in tmp_path.iterdir() for line in path.read_text().splitlines()]
    assert sorted(written) == sorted(f"0 {x * 2}" for x in range(10))


def test_many_output_batches_stream_through_the_bounded_queue(idle):
    # Far more output batches per task than its queue holds (64): the worker waits
    # for Spark to write them, and every record arrives once.
    flow = Dataflow()
    flow.map(lambda x: x + 1)
    flow.capture()
    rdd = idle.sparkContext.parallelize(range(300_000), 2)
    result = timelypy_spark.run_flow(idle, flow, rdd)
    assert result.count() == 300_000
    assert result.map(lambda pair: pair[1]).sum() == sum(range(1, 300_001))


def test_clock_epochs(idle):
    rdd = idle.sparkContext.parallelize(range(40), 2)
    flow = Dataflow()
    flow.capture()
    pairs = timelypy_spark.run_flow(idle, flow, rdd, epoch_length=3600, collect=True)
    assert sorted(pairs) == [(0, x) for x in range(40)]  # all within the run's first hour

    slow = rdd.map(lambda x: (time.sleep(0.02), x)[1])  # 20 records a worker, 0.4 s
    pairs = timelypy_spark.run_flow(idle, flow, slow, epoch_length=0.1, collect=True)
    assert sorted(x for _, x in pairs) == list(range(40))
    assert len({epoch for epoch, _ in pairs}) > 1


def test_a_raising_user_function_comes_back_as_itself_quickly(idle):
    def check(word: str) -> str:
        if word.startswith("question"):
            raise ValueError("no questions, please")
        return word

    flow = Dataflow()
    flow.flat_map(str.split)
    flow.map(check, step_id="check")
    flow.capture()
    rdd = idle.sparkContext.parallelize(TEXT * 50, 2)
    started = time.monotonic()
    with pytest.raises(ValueError, match="no questions, please") as info:
        timelypy_spark.run_flow(idle, flow, rdd, workers=2)
    assert time.monotonic() - started < 15
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "check" in notes and "worker" in notes


def test_flow_without_capture_fails_with_the_flow_error(idle):
    flow = Dataflow()
    flow.map(str.upper)
    rdd = idle.sparkContext.parallelize(["a"], 2)
    started = time.monotonic()
    with pytest.raises(FlowError, match="the flow has no output: add a capture"):
        timelypy_spark.run_flow(idle, flow, rdd)
    assert time.monotonic() - started < 15


def test_bad_epoch_of_and_bad_arguments(idle):
    flow = wordcount()
    rdd = idle.sparkContext.parallelize(["a b"], 2)
    with pytest.raises(InputError, match="epoch_of must return an int >= 0"):
        timelypy_spark.run_flow(idle, flow, rdd, epoch_of=lambda line: "soon")
    with pytest.raises(ConfigError, match="not both"):
        timelypy_spark.run_flow(idle, flow, rdd, epoch_of=len, epoch_length=1.0)
    with pytest.raises(ConfigError, match="needs 9 free task slots"):
        timelypy_spark.run_flow(idle, flow, rdd, workers=9)
    for source in (rdd, Files("/nonexistent")):
        with pytest.raises(ConfigError, match="workers must be a positive int"):
            timelypy_spark.run_flow(idle, flow, source, workers=0)
    with pytest.raises(ConfigError, match="AdvanceTo"):
        timelypy_spark.run_flow(idle, flow, Files("/nonexistent"), epoch_of=len)
    with pytest.raises(ConfigError, match="already has a column 'epoch'"):
        timelypy_spark.run_flow(idle, flow, rdd, schema="epoch long, word string")
    with pytest.raises(ConfigError, match="RDD or a DataFrame"):
        timelypy_spark.run_flow(idle, flow, ["a list"])
    with pytest.raises(FlowError, match="no input"):
        timelypy_spark.run_flow(idle, flow)


def test_the_docs_example_runs_on_spark(idle):
    # docs/spark.md runs its ```python blocks without Spark (tests/test_repository.py);
    # the ```text block of the run_flow section needs a session, so it runs here.
    text = (ROOT / "docs" / "spark.md").read_text()
    section = text[text.index("## Running a timelypy.flow Dataflow on Spark") :]
    section = section[: section.index("\n## ", 1)]
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    spark_blocks = re.findall(r"```text\n(.*?)```", section, re.S)
    assert python and spark_blocks
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in python + spark_blocks[:1]:
        exec(compile(block, "docs/spark.md", "exec"), namespace)
