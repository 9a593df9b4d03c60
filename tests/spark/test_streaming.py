"""``stream_flow``: Structured Streaming micro-batches fed to one long-lived gang.

The Spark tests read a file stream (``spark.readStream.text``) of a
directory the test fills, one file per micro-batch (``maxFilesPerTrigger=1``,
files dated so Spark takes them in order), and run a flow whose
``stateful_map`` keeps a running count per word: what a micro-batch's epoch
gives depends on every earlier micro-batch, so it shows that the workers kept
their state.  The tests of the driver's feed (:mod:`timelypy_spark.feed`)
and of the races between ``foreachBatch``, ``stop()`` and the monitor need no
Spark: they drive a :class:`StreamingFlow`'s driver side with stand-ins.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from timelypy.errors import ConfigError, FlowError
from timelypy.flow import Dataflow
from timelypy_spark.feed import BatchFeed, FeedClosed, StreamCollector
from timelypy_spark.streaming import StreamingFlow, StreamingInput, stream_flow

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

FILES = [
    ["apple banana apple", "cherry"],
    ["banana apple", "date date"],
    ["apple", "cherry banana elder"],
]


def write(directory: Path, index: int, lines: list[str]) -> None:
    """File ``index`` of the stream, complete before its name appears, dated in order."""
    hidden = directory / f".part-{index}.txt"
    hidden.write_text("\n".join(lines) + "\n")
    stamp = 1_700_000_000 + index  # Spark reads the oldest file first
    os.utime(hidden, (stamp, stamp))
    hidden.rename(directory / f"part-{index}.txt")


def running_counts(files: list[list[str]]) -> dict[int, Counter[tuple[str, int]]]:
    """What the flow must give, by plain Python: file ``e``'s running counts at epoch ``e``."""
    totals: Counter[str] = Counter()
    expected = {}
    for epoch, lines in enumerate(files):
        seen: Counter[tuple[str, int]] = Counter()
        for line in lines:
            for word in line.split():
                totals[word] += 1
                seen[(word, totals[word])] += 1
        expected[epoch] = seen
    return expected


def counting_flow(fail_on: str | None = None) -> Dataflow:
    """A running count per word over the lines' words (``fail_on`` raises in the step)."""

    def count(total: int, word: str) -> tuple[int, tuple[str, int]]:
        if word == fail_on:
            raise ValueError(f"cannot count {word!r}")
        return total + 1, (word, total + 1)

    flow = Dataflow()
    flow.flat_map(lambda row: row[0].split())
    flow.map(lambda word: (word, word))
    flow.stateful_map("running_count", lambda key: 0, count)
    flow.map(lambda pair: pair[1])
    flow.capture()
    return flow


def lines_stream(spark, directory: Path):
    return spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))


@pytest.mark.parametrize("arrow", [False, True], ids=["rows", "arrow"])
def test_state_is_carried_across_micro_batches_and_epochs_are_batch_ids(
    spark, idle, tmp_path, arrow
):
    for index, lines in enumerate(FILES):
        write(tmp_path, index, lines)
    flow = counting_flow()
    run = stream_flow(
        spark,
        flow,
        lines_stream(spark, tmp_path),
        workers=2,
        trigger={"availableNow": True},
        arrow=arrow,
    )
    got = {epoch: Counter(items) for epoch, items in run}
    assert got == running_counts(FILES)
    # batch 2's counts include batches 0 and 1: the workers kept their state
    assert got[2][("apple", 4)] == 1 and got[2][("banana", 3)] == 1
    # the epochs are Spark's batch ids, and every row entered the gang once
    progress = {p["batchId"]: p["numInputRows"] for p in run.query.recentProgress}
    assert {batch for batch, rows in progress.items() if rows} == set(got)
    assert run.feed.rows == sum(len(lines) for lines in FILES)
    assert not run.query.isActive


def test_results_reach_the_driver_while_the_query_runs_and_stop_is_clean(spark, idle, tmp_path):
    # the flow's own input step, rows routed to workers by their first word
    flow = counting_flow()
    steps = flow.steps
    fed = Dataflow()
    fed.input(
        "lines", StreamingInput(lines_stream(spark, tmp_path), key=lambda row: row[0].split()[0])
    )
    for step in steps:  # the same steps after the input
        if step.operator == "flat_map":
            fed.flat_map(step.logic[0])
        elif step.operator == "map":
            fed.map(step.logic[0])
        elif step.operator == "stateful_map":
            fed.stateful_map(step.step_id, *step.logic)
        else:
            fed.capture()
    write(tmp_path, 0, FILES[0])
    run = stream_flow(spark, fed, workers=2, trigger={"processingTime": "100 milliseconds"})
    got = {}
    group = run.job_group
    for epoch, items in run:
        # each micro-batch's result arrives while the query and the gang keep running:
        # the next file is only written once the previous epoch came back
        assert run.query.isActive and run.job_group == group
        got[epoch] = Counter(items)
        if len(got) < len(FILES):
            write(tmp_path, len(got), FILES[len(got)])
        else:
            started = time.monotonic()
            run.stop()
            assert time.monotonic() - started < 30
    assert got == running_counts(FILES)
    assert not run.query.isActive and run.error is None


def test_stopping_before_any_data_ends_the_gang_cleanly(spark, idle, tmp_path):
    run = stream_flow(
        spark,
        counting_flow(),
        lines_stream(spark, tmp_path),
        workers=2,
        trigger={"processingTime": "100 milliseconds"},
    )
    assert run.query.isActive
    run.stop()
    started = time.monotonic()
    assert list(run) == []
    assert time.monotonic() - started < 20
    assert not run.query.isActive and run.error is None and run.feed.batches == 0


def test_a_failing_step_stops_the_query_and_the_gang_with_its_own_error(spark, idle, tmp_path):
    write(tmp_path, 0, FILES[0])
    write(tmp_path, 1, ["apple boom"])
    run = stream_flow(
        spark,
        counting_flow(fail_on="boom"),
        lines_stream(spark, tmp_path),
        workers=2,
        trigger={"processingTime": "100 milliseconds"},
    )
    epochs = []
    started = time.monotonic()
    with pytest.raises(ValueError, match="cannot count 'boom'") as raised:
        for epoch, _ in run:
            epochs.append(epoch)
    assert time.monotonic() - started < 30
    assert epochs in ([], [0])  # batch 0 may close before batch 1 fails the gang
    assert any("running_count" in note for note in raised.value.__notes__)
    assert not run.query.isActive


def test_a_failing_micro_batch_stops_the_gang_and_the_query(spark, idle, tmp_path):
    from pyspark.errors import PythonException
    from pyspark.sql.functions import col, udf

    def checked(line):  # no type hints: PySpark would try to infer an Arrow UDF
        if "bad" in line:
            raise ValueError(f"bad line {line!r}")
        return line

    write(tmp_path, 0, FILES[0])
    write(tmp_path, 1, ["a bad line"])
    checked_udf = udf(checked, "string")
    frame = lines_stream(spark, tmp_path).select(checked_udf(col("value")).alias("value"))
    run = stream_flow(
        spark,
        counting_flow(),
        frame,
        workers=2,
        trigger={"processingTime": "100 milliseconds"},
    )
    started = time.monotonic()
    with pytest.raises(PythonException, match="ValueError: bad line 'a bad line'") as raised:
        list(run)
    assert time.monotonic() - started < 30
    assert any("micro-batch 1" in note for note in raised.value.__notes__)
    assert not run.query.isActive


def test_leaving_the_loop_cancels_the_query_and_the_gang(spark, idle, tmp_path):
    write(tmp_path, 0, FILES[0])
    run = stream_flow(
        spark,
        counting_flow(),
        lines_stream(spark, tmp_path),
        workers=2,
        trigger={"processingTime": "100 milliseconds"},
    )
    started = time.monotonic()
    for epoch, items in run:
        assert epoch == 0 and Counter(items) == running_counts(FILES)[0]
        break
    assert time.monotonic() - started < 30
    assert not run.query.isActive
    # the idle fixture checks that no Spark job is left running


def test_too_few_slots_for_the_gang_and_the_micro_batches_fail_up_front(spark, tmp_path):
    started = time.monotonic()
    with pytest.raises(ConfigError, match="needs 5 task slots: 4 for the gang") as raised:
        stream_flow(spark, counting_flow(), lines_stream(spark, tmp_path), workers=4)
    assert "workers=3 or fewer" in str(raised.value)
    assert time.monotonic() - started < 10


def test_a_dataframe_that_is_not_streaming_is_refused(spark):
    with pytest.raises(ConfigError, match="needs a streaming DataFrame"):
        stream_flow(spark, counting_flow(), spark.range(3), workers=1)
    with pytest.raises(FlowError, match="needs a streaming DataFrame"):
        stream_flow(spark, counting_flow(), workers=1)


# -- the driver's feed, without Spark ------------------------------------------------------


def drain(feed: BatchFeed, worker: int) -> list[tuple]:
    """Every answer worker ``worker`` gets until it is told to wait or end."""
    answers = []
    while (answer := feed.answer(worker))[0] not in ("wait", "end"):
        answers.append(answer)
    return answers


def test_the_feed_routes_rows_by_key_and_returns_only_once_they_were_taken():
    from timelypy import stable_hash

    feed = BatchFeed(2, key=lambda row: row[0], chunk_rows=2)
    rows = [(word, n) for n, word in enumerate("a b c a b c a d".split())]
    feeder = threading.Thread(target=feed.feed, args=(3, rows))
    feeder.start()
    while feed.batches < 1:
        time.sleep(0.01)
    time.sleep(0.1)
    assert feeder.is_alive(), "feed() returned before the workers took the rows"
    taken = {worker: drain(feed, worker) for worker in (0, 1)}
    feeder.join(5)
    assert not feeder.is_alive()
    got = []
    for worker, answers in taken.items():
        assert answers[-1] == ("advance", 4)  # batch 3 is all delivered: epoch 3 may close
        assert {(kind, epoch) for kind, epoch, _ in answers[:-1]} <= {("rows", 3)}
        mine = [row for _, _, chunk in answers[:-1] for row in chunk]
        # every row went to the worker its key hashes to
        assert all(stable_hash(word) % 2 == worker for word, _ in mine)
        got.extend(mine)
    assert sorted(got) == sorted(rows)
    assert {stable_hash(word) % 2 for word, _ in rows} == {0, 1}  # both workers had rows


def test_the_feed_holds_a_bounded_number_of_chunks_and_a_close_frees_the_batch():
    feed = BatchFeed(1, chunk_rows=10, max_chunks=2)
    outcome = []

    def run():
        try:
            feed.feed(0, range(1000))
        except FeedClosed as exc:
            outcome.append(exc)

    feeder = threading.Thread(target=run)
    feeder.start()
    time.sleep(0.2)
    assert feed.rows == 20  # two chunks queued, the batch function waits for room
    assert feed.answer(0)[:2] == ("rows", 0)
    time.sleep(0.1)
    assert feed.rows == 30
    started = time.monotonic()
    feed.close(RuntimeError("worker 0 failed"))
    feeder.join(5)
    assert time.monotonic() - started < 1
    assert outcome and "worker 0 failed" in str(outcome[0])


def test_the_feed_refuses_a_batch_id_that_does_not_grow_and_ends_after_the_last():
    feed = BatchFeed(1)
    feeder = threading.Thread(target=feed.feed, args=(4, ["x"]))
    feeder.start()
    while feed.batches < 1:
        time.sleep(0.01)
    assert feed.answer(0) == ("rows", 4, ["x"])
    feeder.join(5)
    with pytest.raises(FlowError, match="micro-batch 4 came after micro-batch 4"):
        feed.feed(4, ["y"])
    feed.end()
    assert feed.answer(0) == ("advance", 5)
    assert feed.answer(0) == ("end",)
    with pytest.raises(FeedClosed, match="after the stream's input ended"):
        feed.feed(5, ["z"])


def test_a_batch_that_fails_half_way_closes_the_feed_so_its_epoch_never_closes():
    feed = BatchFeed(1, chunk_rows=2)

    def rows():
        yield from [1, 2, 3]
        raise ValueError("the read failed")

    with pytest.raises(ValueError, match="the read failed"):
        feed.feed(0, rows())
    # the chunk [1, 2] was queued: no worker gets it, nor an advance past epoch 0
    assert feed.answer(0) == ("wait",)
    with pytest.raises(FeedClosed, match="the read failed"):
        feed.feed(1, ["x"])


# -- the driver's side of a StreamingFlow, with stand-ins for Spark ---------------------------


def detached(feed: BatchFeed, query) -> StreamingFlow:
    """A StreamingFlow's driver side (feed, batch function, stop, monitor) without Spark."""
    run = StreamingFlow.__new__(StreamingFlow)
    run.feed, run.query, run._sc = feed, query, None
    run._arrow, run._row_type = False, "tuple"
    run._error, run._stopping, run._closed = None, False, False
    run._lock, run._wake, run._gang_done = threading.Lock(), threading.Event(), threading.Event()
    run._collector = StreamCollector(feed.workers, feed)
    return run


def test_stop_waits_for_the_micro_batch_being_read_before_it_stops_the_query():
    events = []
    reading = threading.Event()

    class Frame:  # the micro-batch; stopping the query would cancel its read
        def toLocalIterator(self):
            events.append("read")
            reading.set()
            time.sleep(0.3)
            return iter([("a",), ("b",)])

    class Query:
        def stop(self):
            events.append("query stopped")

    feed = BatchFeed(1)
    run = detached(feed, Query())

    def batch():
        run._on_batch(Frame(), 0)
        events.append("batch returned")

    batch_thread = threading.Thread(target=batch)
    batch_thread.start()
    assert reading.wait(5)
    stopper = threading.Thread(target=run.stop, args=(5,))
    stopper.start()
    answers = []
    while batch_thread.is_alive():  # the gang's one worker pulls
        answers.append(feed.answer(0))
        time.sleep(0.01)
    stopper.join(5)
    assert events == ["read", "batch returned", "query stopped"]
    assert ("rows", 0, [("a",), ("b",)]) in answers and run.error is None
    assert feed.answer(0) == ("advance", 1) and feed.answer(0) == ("end",)
    # a micro-batch Spark starts after stop() is not read, and does not fail the run
    run._on_batch(Frame(), 1)
    assert events.count("read") == 1 and run.error is None


def test_a_query_whose_state_cannot_be_read_fails_the_run_instead_of_killing_the_monitor():
    class Query:
        @property
        def isActive(self):
            raise ConnectionError("the JVM is gone")

        def stop(self):
            pass

    feed = BatchFeed(1)
    run = detached(feed, Query())
    monitor = threading.Thread(target=run._watch, daemon=True)
    monitor.start()
    deadline = time.monotonic() + 5
    while run.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    run._gang_done.set()  # the cancelled gang ends
    monitor.join(5)
    assert not monitor.is_alive()
    assert "could not be read" in str(run.error) and "JVM is gone" in str(run.error)
    assert feed.answer(0) == ("wait",)  # the feed is closed: the gang is being cancelled
