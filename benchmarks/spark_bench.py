r"""Wordcount and a DataFrame map on Spark: timelypy workers as barrier tasks vs PySpark.

    python -m benchmarks.spark_bench [--quick] [--repeat N] [--master local[2]] [--markdown]
    python -m benchmarks.spark_bench --words 2M,10M,20M --repeat 3 [--map-rows 1000000]
    python -m benchmarks.spark_bench --words 20M --output-records 20M --map-rows 0 --repeat 3

**Wordcount.**  Every candidate counts the words of the 2,000,000-word corpus
(``benchmarks/_data.py``), or ``--words`` sizes of it: 10M and 20M words are
the corpus repeated 5 and 10 times, written once as one file per core
(``.bench-data/wc-x5``...; the session reads each file as one partition, so
every candidate runs with as many partitions, and timelypy workers, as the
master has cores), on the same SparkSession:

* ``timelypy combiner`` -- ``textFile`` -> :func:`timelypy_spark.run` with the
  ``count_words`` dataflow of ``examples/spark_combiner_wordcount.py`` (a hand-written
  per-epoch combiner, exchange by ``stable_hash``, totals per epoch),
  ``collect=True`` (one Spark job, like the peers);
* ``timelypy run_flow (docs)`` -- the wordcount as ``docs/spark.md`` shows it:
  a :class:`timelypy.flow.Dataflow` of ``flat_map(str.split)``, ``map((w, 1))``,
  ``reduce_epoch(add)``, ``capture()``, run by :func:`timelypy_spark.run_flow`
  over the ``textFile`` RDD, ``collect=True``; no hand-written combiner
  (``reduce_epoch`` combines on the sending worker itself);
* ``timelypy run_flow (docs, Arrow)`` -- the same flow over ``read.text``'s
  DataFrame to a DataFrame (``schema="word string, count long"``): rows in
  and out as Arrow batches (``mapInArrow(barrier=True)``), then ``collect``;
* ``timelypy run (docs)`` -- ``docs/spark.md``'s ``run`` example: ``flat_map``,
  ``exchange(stable_hash)`` of every word, ``accumulate(Counter(), add)``;
* ``python floor (no engine)`` -- the least a Python engine running the
  docs' wordcount could do: ``textFile`` -> ``mapPartitions`` doing exactly
  the docs' per-word work in one loop (``str.split``, the ``(w, 1)``
  lambda, the fold ``reduce_epoch(add)`` does), then the partitions' counts
  merged on the driver -- no dataflow, no exchange, no batches; ``vs
  floor`` in the table is this candidate's time over each candidate's;
* ``pyspark rdd`` -- ``textFile`` -> ``flatMap(split)`` -> ``map((w, 1))``
  -> ``reduceByKey(add)`` -> ``collectAsMap``;
* ``pyspark dataframe`` -- ``read.text`` -> ``split``/``explode`` ->
  ``groupBy().count()`` -> collect;
* ``timelypy arrow steps (lower+regex)`` -- the seed wordcount's
  tokenisation (``lower``, then its regex ``[^\s!,.?":;0-9]+``) with
  Arrow-native steps (:func:`arrow_flow`): ``read.text``'s DataFrame into
  :func:`timelypy_spark.run_flow` with ``row_type="arrow"``, a
  ``flat_map_arrow`` of :func:`arrow_words` (an ASCII batch: one
  translation of its bytes, separators to spaces and upper case to lower,
  then ``ascii_split_whitespace``; any other: ``utf8_lower`` and
  ``split_pattern_regex`` on the separators), ``aggregate_arrow`` counting
  per word (group-by in Arrow on each worker, partial counts exchanged,
  totals per epoch), a DataFrame out, ``collect``;
* ``pyspark dataframe (lower+regex)`` -- the DataFrame doing that same
  tokenisation: ``explode(split(lower(value), separators))``, empty words
  dropped, ``groupBy().count()``;
* ``pyspark mapInArrow, same kernels (lower+regex)`` -- the same Arrow
  kernels with no engine: plain ``mapInArrow`` counting each batch's words
  (:func:`arrow_words`, then a group-by), then a DataFrame
  ``groupBy().sum()`` of the partial counts;
* ``timelypy batch steps (lower+regex)`` -- the same tokenisation with the
  flow layer's batch-level Python steps (:func:`batch_flow`): ``textFile``
  -> :func:`timelypy_spark.run_flow` of ``reduce_epoch(add,
  pre_aggregate=count_seed_batch)`` (``count_seed_batch(lines) =
  Counter(findall(" ".join(lines).lower()))``: one regular-expression pass
  per batch of lines the engine hands over), per-epoch combine on each
  worker, partial counts exchanged by word, totals at the epoch's end,
  ``collect=True``; no hand-written operator;
* ``timelypy batch steps, DataFrame in (lower+regex)`` -- the same flow over
  ``read.text``'s DataFrame (rows ``(line,)`` from Arrow batches), the counts
  as a DataFrame (``word string, count long``), then ``collect``;
* ``python floor, batch (no engine, lower+regex)`` -- the least a Python
  engine running that batch-level flow could do: ``textFile`` ->
  ``mapPartitions`` calling ``count_seed_batch`` on slices of
  ``PULL_LIMIT`` lines (the batches the flow's reader hands over) and adding
  the partial counts up in a dict, then the partitions' counts merged on
  the driver -- no dataflow, no exchange.

``--only arrow,regex`` runs the wordcount candidates whose names hold one
of those strings (and the DataFrame peers every ratio needs: ``--only
batch`` runs the batch-level candidates beside both DataFrames).

**Output-heavy flow** (``--output-records``, default 20M): a flow whose
output is ``records`` records, ``flat_map`` of ``records / 100`` numbers
into 100 records each, run by :func:`timelypy_spark.run_flow` to an RDD
(no cache: the workers' output crosses one shuffle as pickled batches), then
written (``saveAsPickleFile``) or counted, against PySpark's ``flatMap``
making the same ``(0, (n, i))`` records followed by the same action; every
timelypy run is checked to leave no cached RDD behind.  A third pair writes
the records as text lines: the flow's tasks through a sink of their own
(``op.output`` to a per-worker file) against ``flatMap().saveAsTextFile``.

**DataFrame map** (``--map-rows``, default 1,000,000): a DataFrame of
``(id long, word string, value double)`` rows (``spark.range`` on as many
partitions as cores) through one Python map per row, ``(id, word.upper(),
value + 1.0)``, to a DataFrame, which is then read whole (``sum``/``max``
of every column): ``timelypy arrow`` is :func:`timelypy_spark.run` with
``rows.map(f)`` and the input's schema (Arrow in and out); ``pyspark
mapInArrow`` is plain ``mapInArrow`` doing the same map, a batch at a time
(``to_pylist`` per column, ``f`` per row, ``pyarrow.array`` per column).
The same map on whole columns (``utf8_upper``, ``add``): ``timelypy
map_arrow (compute)`` is :func:`timelypy_spark.run_flow` of a ``map_arrow``
step with ``row_type="arrow"`` (a flow of stateless steps: a plain, lazy
``mapInArrow``, each task one worker), ``pyspark mapInArrow (compute)``
plain ``mapInArrow`` calling the same function.

Session start is excluded; every candidate runs untimed first (twice at the
first size: Python workers start and import pyarrow, files are cached), then
the candidates alternate.  Every
wordcount is checked against ``collections.Counter`` (the seed's tokens,
``lower`` and its regex, for the ``lower+regex`` candidates), every map
against the others.  Beside each median: the peak resident set of the
Spark Python workers that ran the job (the largest over the worker
processes, not counting the idle ``pyspark.daemon``; each process's
high-water mark reset through ``/proc/PID/clear_refs`` before every run and
sampled every 0.2 s while it runs, so that workers which end with their job
are counted), which stays flat as the input grows when nothing holds a
whole partition or output.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from operator import add
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._data import load_lines, part_paths  # noqa: E402
from benchmarks._harness import fmt_ratio, measure_interleaved, print_table  # noqa: E402
from benchmarks.peers import pyspark_peer  # noqa: E402
from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition  # noqa: E402

#: Words in the corpus; ``--words`` sizes must be whole multiples of it.
CORPUS_WORDS = 2_000_000


def _count_words() -> Any:
    spec = importlib.util.spec_from_file_location(
        "spark_combiner_wordcount", ROOT / "examples" / "spark_combiner_wordcount.py"
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(module)
    return module.count_words


def docs_count_words(scope: Any, lines: Any) -> Any:
    """``docs/spark.md``'s ``run`` wordcount: every word exchanged to its owner, then counted."""
    from timelypy import stable_hash

    def update(counts: Counter[str], words: list[str]) -> Counter[str]:
        counts.update(words)
        return counts

    return (
        lines.flat_map(str.split)
        .exchange(stable_hash)
        .accumulate(Counter(), update)
        .flat_map(lambda counts: counts.items())
    )


def floor_counts(lines: Iterator[str]) -> Iterator[dict[str, int]]:
    """One partition's counts, doing the docs' per-word work and nothing else.

    The docs' wordcount calls ``str.split`` per line and its ``(w, 1)``
    lambda per word, and ``reduce_epoch(add)`` folds ``old + value`` per
    word; this does just that, in one loop, with no engine around it: what
    any Python engine running that program must at least pay.
    """
    pair = lambda word: (word, 1)  # noqa: E731 - the docs' lambda, as the flow calls it
    acc: dict[str, int] = {}
    for line in lines:
        for key, value in map(pair, line.split()):
            if key in acc:
                acc[key] = acc[key] + value
            else:
                acc[key] = value
    yield acc


def docs_flow(from_rows: bool = False) -> Any:
    """``docs/spark.md``'s ``run_flow`` wordcount (seed 004's, splitting as ``str.split`` does)."""
    from timelypy.flow import Dataflow

    flow = Dataflow()
    if from_rows:
        flow.flat_map(lambda row: row[0].split())  # a DataFrame's rows are (line,)
    else:
        flow.flat_map(str.split)
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.capture()
    return flow


#: The seed wordcount's tokens (seed 004): ``re.findall`` of this over the lower-cased line.
SEED_TOKEN = r'[^\s!,.?":;0-9]+'
#: What separates those tokens: splitting on it and dropping empty strings gives the same words.
SEED_SEPARATORS = r'[\s!,.?":;0-9]+'


def seed_counts(lines: list[str]) -> Counter[str]:
    """The seed wordcount's counts of ``lines``, by its own functions (``lower``, ``findall``)."""
    pattern = re.compile(SEED_TOKEN)
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(pattern.findall(line.lower()))
    return counts


_SEED_PATTERN = re.compile(SEED_TOKEN)


def count_seed_batch(lines: list[str]) -> Counter[str]:
    """A batch of lines' counts of the seed's tokens: one ``lower`` and one ``findall`` per batch.

    >>> sorted(count_seed_batch(["To be,", "or NOT 2b"]).items())
    [('b', 1), ('be', 1), ('not', 1), ('or', 1), ('to', 1)]
    """
    return Counter(_SEED_PATTERN.findall(" ".join(lines).lower()))


def count_seed_rows(rows: list[tuple[str]]) -> Counter[str]:
    """:func:`count_seed_batch` of a DataFrame's ``(line,)`` rows."""
    return Counter(_SEED_PATTERN.findall(" ".join([row[0] for row in rows]).lower()))


def batch_floor_counts(lines: Iterator[str]) -> Iterator[dict[str, int]]:
    """One partition's counts by :func:`count_seed_batch` over slices of ``PULL_LIMIT`` lines.

    The batch-level flow's work with no engine around it: the same function
    on batches of the size the flow's reader hands over, the partial counts
    added up per word as ``reduce_epoch(add)`` does.
    """
    from itertools import islice

    from timelypy.flow.driver import PULL_LIMIT

    acc: dict[str, int] = {}
    while chunk := list(islice(lines, PULL_LIMIT)):
        for word, n in count_seed_batch(chunk).items():
            acc[word] = acc[word] + n if word in acc else n
    yield acc


def batch_flow(from_rows: bool = False) -> Any:
    """The wordcount with batch-level Python steps: ``reduce_epoch(add, pre_aggregate=...)``."""
    from timelypy.flow import Dataflow

    flow = Dataflow()
    flow.reduce_epoch(add, pre_aggregate=count_seed_rows if from_rows else count_seed_batch)
    flow.capture()
    return flow


#: The characters Python's ``\s`` matches in a ``str`` (``str.isspace``), in RE2's syntax:
#: RE2's own ``\s`` is ASCII's ``[\t\n\f\r ]`` only.
_PYTHON_SPACE = (
    r"\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
#: The seed's separators for ``pyarrow.compute``'s RE2, ``\s`` as Python reads it.
ARROW_SEPARATORS = f'[{_PYTHON_SPACE}!,.?":;0-9]+'
#: ASCII text, one pass: every separator byte of the seed's tokens becomes a space, and
#: every upper-case letter its lower case (what ``str.lower`` does to ASCII).
_ASCII_SEPARATORS = b'\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f !,.?":;0123456789'
ASCII_TOKENS = bytes.maketrans(
    bytes(range(ord("A"), ord("Z") + 1)) + _ASCII_SEPARATORS,
    bytes(range(ord("a"), ord("z") + 1)) + b" " * len(_ASCII_SEPARATORS),
)


def arrow_words(batch: Any) -> list[Any]:
    """A record batch of lines -> one of their words: the seed's tokens, lower-cased.

    ASCII lines (checked per batch) take one translation of the batch's
    bytes (:data:`ASCII_TOKENS`: separators to spaces, upper case to lower)
    and Arrow's ``ascii_split_whitespace``; other lines ``utf8_lower`` and
    ``split_pattern_regex`` on :data:`ARROW_SEPARATORS`.  Either way the
    words are those of ``re.findall(SEED_TOKEN, line.lower())`` (on the
    second path, where Arrow's ``utf8_lower`` agrees with ``str.lower``);
    the first takes under half the time of the second.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = batch.column(0)
    validity, offsets, data = lines.buffers()
    text = b"" if data is None else data.to_pybytes()
    if text.isascii():
        spaced = pa.Array.from_buffers(
            pa.string(),
            len(lines),
            [validity, offsets, pa.py_buffer(text.translate(ASCII_TOKENS))],
            lines.null_count,
            lines.offset,
        )
        tokens = pc.list_flatten(pc.ascii_split_whitespace(spaced))
    else:
        lower = pc.utf8_lower(lines)
        tokens = pc.list_flatten(pc.split_pattern_regex(lower, ARROW_SEPARATORS))
    return [pa.record_batch({"word": pc.filter(tokens, pc.not_equal(tokens, ""))})]


def arrow_flow() -> Any:
    """The wordcount with Arrow-native steps: lines -> words -> counts, all record batches."""
    import timelypy.flow.operators as op
    from timelypy.flow import Dataflow
    from timelypy.flow.operators.arrow import aggregate_arrow, flat_map_arrow
    from timelypy.flow.sinks import CaptureSink
    from timelypy_spark import SparkInput

    flow = Dataflow("arrow_wordcount")
    lines = op.input("lines", flow, SparkInput())
    words = flat_map_arrow("words", lines, arrow_words)
    counts = aggregate_arrow("count", words, "word", [([], "count_all")])
    op.output("out", counts, CaptureSink())
    return flow


def regex_dataframe_wordcount(spark: Any, paths: list[str]) -> dict[str, int]:
    """The DataFrame doing the seed's tokenisation: ``lower``, split on the separators."""
    from pyspark.sql import functions as F

    words = spark.read.text(paths).select(
        F.explode(F.split(F.lower("value"), SEED_SEPARATORS)).alias("word")
    )
    counts = words.where(F.col("word") != "").groupBy("word").count()
    return {row["word"]: row["count"] for row in counts.collect()}


def _partial_counts(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow``'s side of the no-engine Arrow wordcount: one partial count per batch."""
    import pyarrow as pa

    for batch in batches:
        for words in arrow_words(batch):
            counts = pa.Table.from_batches([words]).group_by("word", use_threads=False)
            yield from counts.aggregate([([], "count_all")]).to_batches()


def arrow_floor_wordcount(spark: Any, paths: list[str]) -> dict[str, int]:
    """The same kernels with no engine: ``mapInArrow`` per batch, then a DataFrame ``sum``."""
    from pyspark.sql import functions as F

    partials = spark.read.text(paths).mapInArrow(_partial_counts, "word string, count_all long")
    counts = partials.groupBy("word").agg(F.sum("count_all"))
    return {row[0]: row[1] for row in counts.collect()}


def parse_words(text: str) -> list[int]:
    """``"2M,10M,20M"`` -> ``[2000000, 10000000, 20000000]`` (whole multiples of the corpus).

    >>> parse_words("2M,20M")
    [2000000, 20000000]
    """
    sizes = []
    for part in text.split(","):
        part = part.strip().upper()
        scale = 1_000_000 if part.endswith("M") else 1_000 if part.endswith("K") else 1
        words = int(float(part.rstrip("MK")) * scale)
        if words < CORPUS_WORDS or words % CORPUS_WORDS:
            raise SystemExit(f"--words sizes are multiples of {CORPUS_WORDS:,}, not {part}")
        sizes.append(words)
    return sizes


def scaled_paths(factor: int) -> list[str]:
    """The corpus ``factor`` times over: part ``i`` repeated, one file per part (written once)."""
    parts = part_paths()
    if factor == 1:
        return [str(p) for p in parts]
    directory = ROOT / ".bench-data" / f"wc-x{factor}"
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for part in parts:
        path = directory / part.name
        text = part.read_bytes()
        if not path.is_file() or path.stat().st_size != len(text) * factor:
            tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
            with tmp.open("wb") as out:
                for _ in range(factor):
                    out.write(text)
            tmp.replace(path)
        paths.append(str(path))
    return paths


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def python_workers() -> list[int]:
    """The pids of this driver's Spark Python workers: the forks of ``pyspark.daemon``.

    The daemon itself (the one whose parent is no Python worker) is left
    out: it runs no task, and its resident set would set a floor under
    every candidate's figure.
    """
    pids = []
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                text = cmdline.read()
            if b"pyspark.daemon" in text or b"pyspark.worker" in text:
                pids.append(pid)
        except OSError:
            continue
    workers = set(pids)
    return [pid for pid in pids if _parent(pid) in workers]


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def reset_peaks() -> None:
    """Reset every Python worker's peak resident set (``echo 5 > /proc/PID/clear_refs``)."""
    for pid in python_workers():
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as refs:
                refs.write("5")
        except OSError:
            continue


def peak_mb(pids: list[int] | None = None) -> float:
    """The largest peak resident set (``VmHWM``) of the Python workers since the reset, MB."""
    peak = 0
    for pid in python_workers() if pids is None else pids:
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak / 1024


#: Seconds between two looks at the Python workers while a candidate runs.
SAMPLE_SECONDS = 0.2


def with_peaks(fn: Callable[[], Any], peaks: list[float]) -> Callable[[], Any]:
    """``fn``, recording the peak resident set of the workers that ran it in ``peaks``.

    A worker that ends with its job (a barrier task's, a ``mapInArrow``
    task's when Spark does not reuse it) is gone by the time ``fn``
    returns, so a thread looks at the workers every :data:`SAMPLE_SECONDS`
    while ``fn`` runs and keeps the largest ``VmHWM`` it saw (each
    worker's high-water mark, reset before the run): the job's workers,
    not the idle ones left after it.
    """

    def call() -> Any:
        reset_peaks()
        seen = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_SECONDS):
                seen[0] = max(seen[0], peak_mb())

        sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
        sampler.start()
        try:
            result = fn()
        finally:
            done.set()
            sampler.join()
        peaks.append(max(seen[0], peak_mb()))
        return result

    return call


def wordcount(
    spark: Any,
    paths: list[str],
    cores: int,
    repeat: int,
    expected: Counter[str],
    warmup: int = 1,
    seed_expected: Counter[str] | None = None,
    only: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Time every wordcount candidate over ``paths``; return their stats and peaks.

    The candidates of :data:`SEED_TOKENS` count the seed's tokens and are
    checked against ``seed_expected``; the others against ``expected``.
    ``only`` keeps the candidates whose name holds one of its strings.
    """
    import timelypy_spark

    sc = spark.sparkContext
    count_words = _count_words()
    layouts = {
        "textFile": sc.textFile(",".join(paths), cores).getNumPartitions(),
        "read.text": spark.read.text(paths).rdd.getNumPartitions(),
    }
    if set(layouts.values()) != {cores}:
        raise AssertionError(f"the inputs should have {cores} partitions each: {layouts}")

    def lines() -> Any:
        source = sc.textFile(",".join(paths), cores)
        if source.getNumPartitions() != cores:
            source = source.repartition(cores)
        return source

    def combiner() -> dict[str, int]:
        return dict(timelypy_spark.run(spark, count_words, lines(), workers=cores, collect=True))

    def run_docs() -> dict[str, int]:
        return dict(
            timelypy_spark.run(spark, docs_count_words, lines(), workers=cores, collect=True)
        )

    def flow_docs() -> dict[str, int]:
        pairs = timelypy_spark.run_flow(spark, docs_flow(), lines(), workers=cores, collect=True)
        return dict(item for _, item in pairs)

    def frame_counts(flow: Any, schema: str, **options: Any) -> dict[str, int]:
        """``flow`` over the text files as a DataFrame, its DataFrame result collected."""
        counts = timelypy_spark.run_flow(
            spark,
            flow,
            spark.read.text(paths),
            workers=cores,
            schema=schema,
            epoch_column=None,
            **options,
        )
        try:
            return {row[0]: row[1] for row in counts.collect()}
        finally:
            counts.unpersist()

    def flow_arrow() -> dict[str, int]:
        return frame_counts(docs_flow(from_rows=True), "word string, count long")

    def flow_arrow_steps() -> dict[str, int]:
        return frame_counts(arrow_flow(), "word string, count_all long", row_type="arrow")

    def flow_batch() -> dict[str, int]:
        pairs = timelypy_spark.run_flow(spark, batch_flow(), lines(), workers=cores, collect=True)
        return dict(item for _, item in pairs)

    def flow_batch_frame() -> dict[str, int]:
        return frame_counts(batch_flow(from_rows=True), "word string, count long")

    def batch_floor() -> dict[str, int]:
        total: Counter[str] = Counter()
        for counts in lines().mapPartitions(batch_floor_counts).collect():
            total.update(counts)
        return dict(total)

    def floor() -> dict[str, int]:
        total: Counter[str] = Counter()
        for counts in lines().mapPartitions(floor_counts).collect():
            total.update(counts)
        return dict(total)

    candidates = {
        "timelypy combiner": combiner,
        "timelypy run_flow (docs)": flow_docs,
        "timelypy run_flow (docs, Arrow)": flow_arrow,
        "timelypy run (docs)": run_docs,
        FLOOR: floor,
        "pyspark rdd": lambda: pyspark_peer.rdd_wordcount(spark, paths),
        "pyspark dataframe": lambda: pyspark_peer.dataframe_wordcount(spark, paths),
        ARROW_STEPS: flow_arrow_steps,
        REGEX_FRAME: lambda: regex_dataframe_wordcount(spark, paths),
        ARROW_FLOOR: lambda: arrow_floor_wordcount(spark, paths),
        BATCH_STEPS: flow_batch,
        BATCH_STEPS_FRAME: flow_batch_frame,
        BATCH_FLOOR: batch_floor,
    }
    if only:  # the peers the table's ratios are against always run
        keep = [*only, "pyspark dataframe"]
        candidates = {
            name: fn for name, fn in candidates.items() if any(part in name for part in keep)
        }
    peaks: dict[str, list[float]] = {name: [] for name in candidates}
    stats = measure_interleaved(
        {name: with_peaks(fn, peaks[name]) for name, fn in candidates.items()},
        repeat=repeat,
        warmup=warmup,
    )
    for name, stat in stats.items():
        want = seed_expected if name in SEED_TOKENS else expected
        if dict(stat.result) != dict(want or {}):
            raise AssertionError(f"{name} counted differently from collections.Counter")
    return stats, {name: values[-repeat:] for name, values in peaks.items()}


#: Records each input number fans out to in the output-heavy flow.
FAN_OUT = 100


def fan_out(n: int) -> list[tuple[int, int]]:
    """The output-heavy flow's ``flat_map``: ``FAN_OUT`` records per input number."""
    return [(n, i) for i in range(FAN_OUT)]


def fan_out_pairs(n: int) -> list[tuple[int, tuple[int, int]]]:
    """The same records as ``run_flow``'s result holds them: ``(epoch, item)``, epoch 0."""
    return [(0, (n, i)) for i in range(FAN_OUT)]


class LineWriter(StatelessSinkPartition[Any]):
    """Worker ``i``'s part of :class:`LineFiles`: ``str(item)`` a line, a batch per write."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "w")  # closed by close(), when the run ends

    def write_batch(self, items: list[Any]) -> None:
        """Write ``items``, one line each."""
        self.file.write("\n".join(map(str, items)))
        self.file.write("\n")

    def close(self) -> None:
        """Close the file."""
        self.file.close()


class LineFiles(DynamicSink[Any]):
    """A user's sink: each worker writes its items as text lines to its own file.

    What the tasks write themselves, with no record handed back to Spark
    (the output-heavy flow's "text files" candidate): worker ``i`` writes
    ``part-0000i.txt`` in ``directory``.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def build(self, step_id: str, worker_index: int, worker_count: int) -> LineWriter:
        """Worker ``worker_index``'s writer."""
        return LineWriter(f"{self.directory}/part-{worker_index:05d}.txt")


def output_heavy(
    spark: Any, records: int, cores: int, repeat: int, out_dir: Path
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Time a flow whose output is ``records`` records, handed to Spark, vs PySpark's flatMap.

    Every candidate turns ``records // FAN_OUT`` numbers (one partition per
    core) into the same ``records`` records, ``(0, (n, i))``, and hands them
    to Spark, which then writes them (``saveAsPickleFile``) or counts them.
    timelypy: ``run_flow`` of ``flat_map(fan_out)``, then the action on its
    result RDD; PySpark: ``flatMap(fan_out_pairs)`` and the same action.
    After each timelypy run, no RDD may be left cached.  And the same records
    written as text lines, ``str((n, i))`` a line: timelypy's tasks write
    them themselves through a sink (:class:`LineFiles`, nothing handed back),
    PySpark's ``flatMap(fan_out).saveAsTextFile``; both are checked by
    counting the lines.
    """
    import shutil

    import timelypy_spark
    from timelypy.flow import Dataflow

    sc = spark.sparkContext
    flow = Dataflow()
    flow.flat_map(fan_out)
    flow.capture()

    def numbers() -> Any:
        return sc.parallelize(range(records // FAN_OUT), cores)

    def cached() -> int:
        return len(sc._jsc.getPersistentRDDs())

    def written(rdd: Any) -> int:
        target = out_dir / "output-heavy"
        shutil.rmtree(target, ignore_errors=True)
        rdd.saveAsPickleFile(str(target))
        count = sum(1 for part in target.glob("part-*") if part.stat().st_size)
        shutil.rmtree(target, ignore_errors=True)
        return count

    def ours(action: Callable[[Any], Any]) -> Callable[[], Any]:
        def call() -> Any:
            result = timelypy_spark.run_flow(spark, flow, numbers(), workers=cores)
            value = action(result)
            if cached():
                raise AssertionError("run_flow left a cached RDD behind")
            return value

        return call

    def peer(action: Callable[[Any], Any]) -> Callable[[], Any]:
        return lambda: action(numbers().flatMap(fan_out_pairs))

    text_dir = out_dir / "output-heavy-text"

    def lines_written() -> int:
        count = 0
        for part in text_dir.glob("part-*"):
            with part.open("rb") as file:
                count += sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b""))
        shutil.rmtree(text_dir, ignore_errors=True)
        return count

    def ours_text() -> int:
        import timelypy.flow.operators as op

        shutil.rmtree(text_dir, ignore_errors=True)
        text_dir.mkdir(parents=True)
        text_flow = Dataflow("output_heavy")
        numbers_in = op.input("numbers", text_flow, timelypy_spark.SparkInput())
        out = op.flat_map("fan_out", numbers_in, fan_out)
        op.output("lines", out, LineFiles(str(text_dir)))
        timelypy_spark.run_flow(spark, text_flow, numbers(), workers=cores, collect=True)
        return lines_written()

    def peer_text() -> int:
        shutil.rmtree(text_dir, ignore_errors=True)
        numbers().flatMap(fan_out).saveAsTextFile(str(text_dir))
        return lines_written()

    candidates = {
        "timelypy run_flow, text files": ours_text,
        "pyspark flatMap, text files": peer_text,
        "timelypy run_flow, saveAsPickleFile": ours(written),
        "pyspark flatMap, saveAsPickleFile": peer(written),
        "timelypy run_flow, count": ours(lambda rdd: rdd.count()),
        "pyspark flatMap, count": peer(lambda rdd: rdd.count()),
    }
    peaks: dict[str, list[float]] = {name: [] for name in candidates}
    stats = measure_interleaved(
        {name: with_peaks(fn, peaks[name]) for name, fn in candidates.items()},
        repeat=repeat,
        warmup=1,
    )
    for name, stat in stats.items():
        want = cores if "PickleFile" in name else records
        if stat.result != want:
            raise AssertionError(f"{name} gave {stat.result}, not {want}")
    return stats, {name: values[-repeat:] for name, values in peaks.items()}


def map_step(spark: Any, rows: int, cores: int, repeat: int) -> tuple[Any, Any]:
    """Time a DataFrame -> map -> DataFrame step: timelypy's Arrow path vs plain mapInArrow."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    import timelypy.flow.operators as op
    import timelypy_spark
    from timelypy.flow import Dataflow
    from timelypy.flow.operators.arrow import map_arrow
    from timelypy.flow.sinks import CaptureSink
    from timelypy_spark import SparkInput

    frame = spark.range(0, rows, numPartitions=cores).selectExpr(
        "id", "concat('w', cast(id % 1000 as string)) as word", "cast(id as double) * 0.5 as value"
    )
    schema = frame.schema
    arrow_schema = to_arrow_schema(schema)

    def f(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return (row[0], row[1].upper(), row[2] + 1.0)

    def summary(result: Any) -> tuple[Any, ...]:
        return tuple(
            result.agg(F.count("*"), F.sum("id"), F.max("word"), F.sum("value")).collect()[0]
        )

    def with_timelypy() -> tuple[Any, ...]:
        result = timelypy_spark.run(spark, lambda scope, rows: rows.map(f), frame, schema=schema)
        try:
            return summary(result)
        finally:
            result.unpersist()

    def mapper(batches: Any) -> Any:
        for batch in batches:
            columns = [column.to_pylist() for column in batch.columns]
            out = [f(row) for row in zip(*columns, strict=True)]
            arrays = [
                pa.array(list(values), type=field.type)
                for values, field in zip(zip(*out, strict=True), arrow_schema, strict=True)
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    def with_pyspark() -> tuple[Any, ...]:
        return summary(frame.mapInArrow(mapper, schema))

    def compute(batch: Any) -> Any:
        # the same map as f, on whole columns: Arrow compute kernels, no row in Python
        return pa.RecordBatch.from_arrays(
            [
                batch.column(0),
                pc.utf8_upper(batch.column(1)),
                pc.add(batch.column(2), 1.0),
            ],
            names=schema.names,
        )

    def compute_mapper(batches: Any) -> Any:
        for batch in batches:
            yield compute(batch)

    def with_map_arrow() -> tuple[Any, ...]:
        flow = Dataflow("map")
        rows_in = op.input("rows", flow, SparkInput())
        op.output("out", map_arrow("upper", rows_in, compute), CaptureSink())
        result = timelypy_spark.run_flow(
            spark, flow, frame, row_type="arrow", schema=schema, epoch_column=None
        )
        try:
            return summary(result)
        finally:
            result.unpersist()

    def with_pyspark_compute() -> tuple[Any, ...]:
        return summary(frame.mapInArrow(compute_mapper, schema))

    candidates = {
        "timelypy arrow": with_timelypy,
        "pyspark mapInArrow": with_pyspark,
        MAP_ARROW: with_map_arrow,
        MAP_IN_ARROW_COMPUTE: with_pyspark_compute,
    }
    peaks: dict[str, list[float]] = {name: [] for name in candidates}
    stats = measure_interleaved(
        {name: with_peaks(fn, peaks[name]) for name, fn in candidates.items()},
        repeat=repeat,
        warmup=1,
    )
    results = {name: stat.result for name, stat in stats.items()}
    if len(set(results.values())) != 1:
        raise AssertionError(f"the map results differ: {results}")
    return stats, {name: values[-repeat:] for name, values in peaks.items()}


#: The DataFrame map with an Arrow-native step (``map_arrow`` of ``pyarrow.compute``).
MAP_ARROW = "timelypy map_arrow (compute)"
#: Plain ``mapInArrow`` doing the same ``pyarrow.compute`` map.
MAP_IN_ARROW_COMPUTE = "pyspark mapInArrow (compute)"


#: The wordcount's no-engine candidate (see :func:`floor_counts`).
FLOOR = "python floor (no engine)"
#: The wordcount with Arrow-native steps (:func:`arrow_flow`).
ARROW_STEPS = "timelypy arrow steps (lower+regex)"
#: The DataFrame doing the same tokenisation (:func:`regex_dataframe_wordcount`).
REGEX_FRAME = "pyspark dataframe (lower+regex)"
#: The same Arrow kernels in plain ``mapInArrow``, no engine (:func:`arrow_floor_wordcount`).
ARROW_FLOOR = "pyspark mapInArrow, same kernels (lower+regex)"
#: The wordcount with batch-level Python steps over ``textFile`` (:func:`batch_flow`).
BATCH_STEPS = "timelypy batch steps (lower+regex)"
#: The same flow over ``read.text``'s DataFrame, a DataFrame out.
BATCH_STEPS_FRAME = "timelypy batch steps, DataFrame in (lower+regex)"
#: The batch-level flow's work with no engine (:func:`batch_floor_counts`).
BATCH_FLOOR = "python floor, batch (no engine, lower+regex)"
#: The candidates that count the seed's tokens, not ``str.split``'s.
SEED_TOKENS = frozenset(
    {ARROW_STEPS, REGEX_FRAME, ARROW_FLOOR, BATCH_STEPS, BATCH_STEPS_FRAME, BATCH_FLOOR}
)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def _table_rows(
    workload: str,
    stats: dict[str, Any],
    peaks: dict[str, list[float]],
    items: int,
    rate: str,
    peer: str,
    versus: str,
    floor: str | None = None,
    more: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One row per candidate: median, rate, workers' peak RSS, speed vs ``peer`` (and ``floor``).

    ``more`` maps further columns to the candidate each compares against.
    """
    baseline = stats[peer].median
    rows = []
    for name, stat in stats.items():
        row = {
            "workload": workload,
            "candidate": name,
            "median s": f"{stat.median:.2f}",
            rate: f"{items / stat.median / 1e6:.2f} M",
            "worker peak RSS": f"{_median(peaks[name]):.0f} MB",
            versus: fmt_ratio(baseline / stat.median),
        }
        if floor is not None:
            row["vs floor"] = fmt_ratio(stats[floor].median / stat.median)
        for column, other in (more or {}).items():
            row[column] = fmt_ratio(stats[other].median / stat.median)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark, print the tables, and return their rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the corpus, 3 runs")
    parser.add_argument(
        "--words",
        default=None,
        help="wordcount sizes, multiples of 2M: e.g. 2M,10M,20M (default 2M)",
    )
    parser.add_argument(
        "--map-rows", type=int, default=1_000_000, help="rows of the map workload (0: skip it)"
    )
    parser.add_argument(
        "--output-records",
        default="20M",
        help="records out of the output-heavy flow, e.g. 20M (0: skip it)",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="wordcount candidates whose name holds one of these comma-separated strings "
        "(the DataFrame peer always runs), e.g. 'arrow,regex'",
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    only = [part.strip() for part in args.only.split(",")] if args.only else None

    import timelypy_spark

    base_lines = load_lines()
    base = Counter(word for line in base_lines for word in line.split())
    base_seed = seed_counts(base_lines)
    sizes: list[tuple[int, list[str], Counter[str], Counter[str]]] = []
    if args.quick:
        lines = base_lines[: len(base_lines) // 10]
        quick_dir = ROOT / ".bench-data" / "spark-quick"
        quick_dir.mkdir(parents=True, exist_ok=True)
        half = len(lines) // 2
        paths = []
        for index, chunk in enumerate((lines[:half], lines[half:])):
            path = quick_dir / f"part-{index}.txt"
            path.write_text("\n".join(chunk) + "\n")
            paths.append(str(path))
        expected = Counter(word for line in lines for word in line.split())
        sizes.append((sum(expected.values()), paths, expected, seed_counts(lines)))
    else:
        for words in parse_words(args.words or "2M"):
            factor = words // CORPUS_WORDS
            expected = Counter({word: n * factor for word, n in base.items()})
            seed = Counter({word: n * factor for word, n in base_seed.items()})
            sizes.append((words, scaled_paths(factor), expected, seed))
    repeat = 3 if args.quick else args.repeat

    # one partition per file (one file per core), for every candidate alike
    spark = timelypy_spark.session(
        args.master,
        "timelypy-spark-bench",
        spark__ui__showConsoleProgress="false",
        **{
            "spark.hadoop.mapreduce.input.fileinputformat.split.minsize": str(1 << 40),
            "spark.sql.files.maxPartitionBytes": str(1 << 40),
            "spark.sql.files.openCostInBytes": str(1 << 40),
        },
    )
    rows: list[dict[str, Any]] = []
    map_rows: list[dict[str, Any]] = []
    out_rows: list[dict[str, Any]] = []
    try:
        cores = spark.sparkContext.defaultParallelism
        for index, (words, paths, expected, seed) in enumerate(sizes):
            # the first size warms twice: each Python worker imports pyarrow and pandas once
            stats, peaks = wordcount(
                spark, paths, cores, repeat, expected, 2 if index == 0 else 1, seed, only
            )
            versus = {
                "vs reduceByKey": "pyspark rdd",
                "vs lower+regex DF": REGEX_FRAME,
                "vs batch floor": BATCH_FLOOR,
            }
            rows.extend(
                _table_rows(
                    f"wordcount {words:,} words on {args.master}",
                    stats,
                    peaks,
                    words,
                    "words/s",
                    "pyspark dataframe",
                    "vs DataFrame",
                    FLOOR if FLOOR in stats else None,
                    {column: peer for column, peer in versus.items() if peer in stats},
                )
            )
        out_records = parse_records(args.output_records)
        if args.quick:
            out_records = min(out_records, 2_000_000)
        if out_records:
            stats, peaks = output_heavy(spark, out_records, cores, repeat, ROOT / ".bench-data")
            for action in ("text files", "saveAsPickleFile", "count"):
                out_rows.extend(
                    _table_rows(
                        f"output-heavy flow, {out_records:,} records, {action}, on {args.master}",
                        {name: stat for name, stat in stats.items() if name.endswith(action)},
                        peaks,
                        out_records,
                        "records/s",
                        f"pyspark flatMap, {action}",
                        "vs flatMap",
                    )
                )
        if args.map_rows and not args.quick:
            stats, peaks = map_step(spark, args.map_rows, cores, repeat)
            map_rows.extend(
                _table_rows(
                    f"DataFrame map {args.map_rows:,} rows on {args.master}",
                    stats,
                    peaks,
                    args.map_rows,
                    "rows/s",
                    "pyspark mapInArrow",
                    "vs mapInArrow",
                    more={"vs mapInArrow (compute)": MAP_IN_ARROW_COMPUTE},
                )
            )
    finally:
        spark.stop()

    print_table(
        rows,
        [
            "workload",
            "candidate",
            "median s",
            "words/s",
            "worker peak RSS",
            "vs DataFrame",
            "vs lower+regex DF",
            "vs reduceByKey",
            "vs floor",
            "vs batch floor",
        ],
        markdown=args.markdown,
    )
    if out_rows:
        print()
        print_table(
            out_rows,
            ["workload", "candidate", "median s", "records/s", "worker peak RSS", "vs flatMap"],
            markdown=args.markdown,
        )
    if map_rows:
        print()
        print_table(
            map_rows,
            [
                "workload",
                "candidate",
                "median s",
                "rows/s",
                "worker peak RSS",
                "vs mapInArrow",
                "vs mapInArrow (compute)",
            ],
            markdown=args.markdown,
        )
    return rows + out_rows + map_rows


def parse_records(text: str) -> int:
    """``"20M"`` -> 20000000, ``"0"`` -> 0 (a whole multiple of the fan-out).

    >>> parse_records("20M"), parse_records("0")
    (20000000, 0)
    """
    text = text.strip().upper()
    scale = 1_000_000 if text.endswith("M") else 1_000 if text.endswith("K") else 1
    records = int(float(text.rstrip("MK")) * scale)
    if records % FAN_OUT:
        raise SystemExit(f"--output-records must be a multiple of {FAN_OUT}, not {text}")
    return records


if __name__ == "__main__":
    main()
