"""Structured Streaming micro-batches into one long-lived gang: ``stream_flow``.

:func:`stream_flow` runs a :class:`timelypy.flow.Dataflow` on a gang of
Spark tasks that stays up for the whole life of a Structured Streaming
query, and feeds it the query's micro-batches: every row of micro-batch
``b`` enters the flow at **epoch ``b``**, and the state of stateful steps
(``stateful_map``, ``reduce``, windows) carries over from one micro-batch to
the next because the workers never restart.  Results come back to the
driver epoch by epoch, as :func:`timelypy_spark.iter_flow` gives them.

Two Spark jobs run side by side:

* **the gang** -- one barrier job (:func:`timelypy_spark.io.run_streaming`,
  the machinery of ``iter_flow``) in a background thread; each task runs the
  flow on its worker and pulls its input from the driver;
* **the query** -- ``frame.writeStream.foreachBatch(...)``; Spark calls the
  batch function *on the driver* with each micro-batch, which reads it
  (``batch_df.toLocalIterator()``, one partition at a time; or, with
  ``arrow=True``, the whole micro-batch as one Arrow table) and hands its
  rows to the gang through a :class:`~timelypy_spark.feed.BatchFeed`
  (:mod:`timelypy_spark.feed`: the data path, its epochs and its
  backpressure).  The batch function returns once the gang took every row.

Slots: the gang holds ``workers`` task slots for as long as the query runs,
and every micro-batch is itself a Spark job that needs a free slot (the
batch function's reads).  :func:`stream_flow` checks for ``workers +
batch_slots`` slots before anything starts and says so with a
:class:`~timelypy.errors.ConfigError` rather than hang.

Ending: the query ending by itself (``trigger={"availableNow": True}``),
:meth:`StreamingFlow.stop` or a failure ends the gang.  A clean end closes the
last epochs and the iterator yields them before it stops; a failing worker,
a failing micro-batch or a failed query stops both the query and the gang,
and the iterator raises the *original* error (a worker's own exception with
its notes; the exception the micro-batch raised on the driver).  Leaving the
loop early cancels both.  Every wait is bounded.  :meth:`StreamingFlow.stop`
ends the feed before it waits for the micro-batch in progress, and stops the
query only after that one returned, so a stop never cancels a micro-batch
half-read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from timelypy.errors import ClusterError, ConfigError, FlowError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.inputs import InputConfig
from timelypy_spark._compat import max_concurrent_tasks
from timelypy_spark.cluster import check_slots, conf_value, spark_context
from timelypy_spark.feed import (
    CHUNK_ROWS,
    MAX_CHUNKS,
    PULL,
    SLICE,
    BatchFeed,
    FeedClosed,
    StreamCollector,
    arrow_rows,
    local_rows,
    python_error,
    row_converter,
    stream_program,
)
from timelypy_spark.flow import CANCEL_JOIN_SECONDS, flow_name
from timelypy_spark.io import run_streaming

__all__ = [
    "stream_flow",
    "StreamingFlow",
    "StreamingInput",
    # the feed's names, re-exported (they live in timelypy_spark.feed)
    "BatchFeed",
    "FeedClosed",
    "StreamCollector",
    "CHUNK_ROWS",
    "MAX_CHUNKS",
    "PULL",
]

#: Seconds :meth:`StreamingFlow.stop` waits for the micro-batch in progress by default.
STOP_WAIT = 60.0


class StreamingInput(InputConfig):
    """A streaming DataFrame as a flow's input: ``flow.input(step_id, StreamingInput(df))``.

    Only :func:`stream_flow` can run a flow that starts with it (the rows
    reach the tasks through the driver); ``key`` and ``row_type`` are
    described there.  The DataFrame stays on the driver: a pickled
    ``StreamingInput`` (inside a task) carries the options only.

    >>> config = StreamingInput(None, row_type="dict")
    >>> config
    StreamingInput(row_type='dict', key=None)
    """

    def __init__(
        self,
        frame: Any,
        *,
        key: Callable[[Any], Any] | None = None,
        row_type: str = "tuple",
    ) -> None:
        if row_type not in ("tuple", "dict", "row"):
            raise ConfigError(f"row_type must be 'tuple', 'dict' or 'row', not {row_type!r}")
        if key is not None and not callable(key):
            raise ConfigError(f"key must be a function of a row, got {key!r}")
        self.frame = frame
        self.key = key
        self.row_type = row_type

    def __getstate__(self) -> dict[str, Any]:
        return {"frame": None, "key": self.key, "row_type": self.row_type}

    def __repr__(self) -> str:
        key = None if self.key is None else getattr(self.key, "__name__", repr(self.key))
        return f"StreamingInput(row_type={self.row_type!r}, key={key})"


class StreamingFlow:
    """A flow running on a gang of Spark tasks, fed by a Structured Streaming query.

    Made (and started) by :func:`stream_flow`.  Iterate it for ``(epoch,
    items)`` as epochs complete; the iteration ends after the query ends
    (by itself, or by :meth:`stop`) and the gang delivered its last epochs,
    and raises the original error of a failed run.  Leaving the loop early,
    :meth:`close` or the ``with`` block's end cancels both.
    """

    def __init__(
        self,
        spark: Any,
        flow: Dataflow,
        source: StreamingInput,
        workers: int,
        *,
        trigger: dict[str, Any] | None,
        options: dict[str, str],
        query_name: str | None,
        arrow: bool,
        poll: float,
        chunk_rows: int,
        max_chunks: int,
        serializer: str | None,
        connect_timeout: float | None,
        start_timeout: float,
        timeout: float | None,
    ) -> None:
        self.spark = spark
        self.flow = flow
        self.workers = workers
        self._sc = spark_context(spark)
        self._frame = source.frame
        self._arrow = arrow
        self._row_type = source.row_type
        converter = None if arrow else row_converter(source.row_type)
        #: The rows waiting for the tasks (its counters tell how much was fed).
        self.feed = BatchFeed(
            workers,
            key=source.key,
            convert=converter,
            chunk_rows=chunk_rows,
            max_chunks=max_chunks,
        )
        self._collector = StreamCollector(workers, self.feed)
        #: The Structured Streaming query (``None`` until it started).
        self.query: Any = None
        self._trigger = trigger
        self._options = options
        self._query_name = query_name
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self._gang_done = threading.Event()
        self._wake = threading.Event()
        self._iterated = False
        rdd = self._sc.parallelize([], workers)
        program = stream_program(flow, poll)

        def gang() -> None:
            try:
                run_streaming(
                    self._sc,
                    rdd,
                    program,
                    name=f"stream {flow_name(flow)}",
                    collect=True,
                    timeout=timeout,
                    attempts=0,
                    serializer=serializer,
                    connect_timeout=connect_timeout,
                    service=self._collector,
                )
            except BaseException as exc:
                self._fail(exc)
            finally:
                self._gang_done.set()
                self._collector.finished()
                self._wake.set()

        self._gang = threading.Thread(target=gang, name="timelypy-spark-stream-gang", daemon=True)
        self._monitor = threading.Thread(
            target=self._watch, name="timelypy-spark-stream-monitor", daemon=True
        )
        self._start(start_timeout)

    @property
    def job_group(self) -> str:
        """The Spark job group of the gang's barrier job (one for the whole stream)."""
        return self._collector.job_group

    @property
    def error(self) -> BaseException | None:
        """The error that stopped the run, if one did."""
        return self._error

    # -- starting ----------------------------------------------------------------

    def _start(self, start_timeout: float) -> None:
        self._gang.start()
        deadline = time.monotonic() + start_timeout
        try:
            while not self.feed.ready.wait(SLICE):
                if self._gang_done.is_set():
                    raise self._error or ClusterError("the gang ended before it started")
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"the timelypy gang of {self.workers} Spark tasks did not start within "
                        f"{start_timeout:g} s (are {self.workers} task slots free?)"
                    )
            writer = self._frame.writeStream.foreachBatch(self._on_batch)
            if self._trigger:
                writer = writer.trigger(**self._trigger)
            for name, value in self._options.items():
                writer = writer.option(name, value)
            if self._query_name is not None:
                writer = writer.queryName(self._query_name)
            self.query = writer.start()
        except BaseException as exc:
            self._fail(exc)
            self.close()
            raise
        self._monitor.start()

    # -- the micro-batches (Spark's foreachBatch thread, on the driver) --------------

    def _on_batch(self, frame: Any, batch_id: int) -> None:
        if self._error is not None or self._closed:
            # fail the micro-batch, so that Spark does not commit it as processed
            raise FeedClosed(f"micro-batch {batch_id} was not read: the streaming flow is ending")
        if self._stopping:
            return  # stop() was called: later micro-batches are not read
        try:
            # lazily: the read starts inside feed(), once the feed counts the batch as
            # in progress, so stop() waits for it rather than stop the query under it
            if self._arrow:
                rows: Iterable[Any] = arrow_rows(frame, self._row_type)
            else:
                rows = local_rows(frame)
            self.feed.feed(int(batch_id), rows)
        except FeedClosed:
            if self._stopped_cleanly():
                return  # stop() ended the input just as this micro-batch began
            raise  # the gang's own error is the one to report
        except BaseException as exc:
            error = python_error(exc)
            error.add_note(f"in micro-batch {batch_id} of the query fed to the timelypy gang")
            self._fail(error)
            raise

    # -- ending ------------------------------------------------------------------

    def _stopped_cleanly(self) -> bool:
        """Whether :meth:`stop` was called and nothing failed (yet)."""
        return self._stopping and self._error is None and not self._closed

    def _fail(self, error: BaseException) -> None:
        """Keep the first error; stop feeding; the monitor stops the query and the gang."""
        with self._lock:
            if self._error is None:
                self._error = error
        self.feed.close(error)
        self._wake.set()

    def _watch(self) -> None:
        """The monitor thread: end the gang when the query ends, and the query on failure."""
        query_done = False
        cancelled = False
        while not (query_done and self._gang_done.is_set()):
            if (self._error is not None or self._closed) and not cancelled:
                self._cancel_gang()
                cancelled = True
            if not query_done and (self._error is not None or self._gang_done.is_set()):
                self._stop_query()
                query_done = True
            if not query_done:
                try:
                    active = self.query.isActive
                    problem = None if active else self.query.exception()
                except Exception as exc:  # the JVM is unreachable: a dead monitor would hang
                    error = ClusterError(
                        f"the state of the streaming query could not be read ({exc!r}); the "
                        "query and the gang were stopped"
                    )
                    error.__cause__ = exc
                    self._fail(error)
                    continue
                if not active:
                    query_done = True
                    if problem is not None:
                        self._fail(problem)
                    else:
                        self.feed.end()  # the last epochs close and the gang ends
            self._wake.wait(0.1)
            self._wake.clear()

    def _cancel_gang(self) -> None:
        group = self._collector.job_group
        if group:
            with contextlib.suppress(Exception):
                self._sc.cancelJobGroup(group)

    def _stop_query(self) -> None:
        query = self.query
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """Stop the query cleanly; the gang closes the last epochs, which iteration still yields.

        Ends the feed first (a micro-batch that Spark starts after this
        call is not read), then waits up to ``timeout`` seconds for the
        micro-batch being read and delivered (past that it is an error: the
        run is cancelled), and only then stops the query, so that the stop
        never cancels a micro-batch half-read.  Do not call it from inside
        Spark's ``foreachBatch``.
        """
        self._stopping = True
        self.feed.end()
        if not self.feed.wait_idle(timeout):
            self._fail(
                ClusterError(
                    f"stop(): micro-batch {self.feed.feeding} was still being delivered after "
                    f"{timeout:g} s; the query and the gang were cancelled"
                )
            )
            return
        self._stop_query()
        self._wake.set()

    def close(self) -> None:
        """Cancel the query and the gang at once (what leaving the loop early does)."""
        if self._closed:
            return
        self._closed = True
        self.feed.close(ClusterError("the streaming flow was closed"))
        self._cancel_gang()
        self._stop_query()
        self._wake.set()
        if self._gang.is_alive():
            self._gang.join(CANCEL_JOIN_SECONDS)
        if self._monitor.is_alive():
            self._monitor.join(CANCEL_JOIN_SECONDS)

    def __enter__(self) -> StreamingFlow:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- results -----------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[int, list[Any]]]:
        if self._iterated:
            raise ClusterError("a StreamingFlow can be iterated once")
        self._iterated = True
        return self._results()

    def _results(self) -> Iterator[tuple[int, list[Any]]]:
        finished = False
        try:
            yield from self._collector.epochs()
            self._gang.join(CANCEL_JOIN_SECONDS)
            finished = True
        finally:
            if not finished:  # the caller left the loop, or raised in it
                self.close()
        # the run ended: make sure the query is stopped before the caller hears of it
        self._stop_query()
        self._wake.set()
        self._monitor.join(CANCEL_JOIN_SECONDS)
        if self._error is not None:
            raise self._error
        if self._collector.missing:
            raise ClusterError(
                f"the gang ended, but the end of worker(s) {self._collector.missing} never "
                "reached the driver: their last epochs may be missing"
            )


def stream_flow(
    spark: Any,
    flow: Dataflow | Callable[[], Dataflow],
    source: Any = None,
    workers: int | None = None,
    *,
    key: Callable[[Any], Any] | None = None,
    row_type: str | None = None,
    trigger: dict[str, Any] | None = None,
    options: dict[str, str] | None = None,
    query_name: str | None = None,
    arrow: bool = False,
    batch_slots: int = 1,
    poll: float = 0.01,
    chunk_rows: int = CHUNK_ROWS,
    max_chunks: int = MAX_CHUNKS,
    serializer: str | None = None,
    connect_timeout: float | None = None,
    start_timeout: float = 120.0,
    timeout: float | None = None,
) -> StreamingFlow:
    """Run ``flow`` on a long-lived gang of Spark tasks fed by a streaming DataFrame.

    ``source`` is a streaming DataFrame (``spark.readStream...``), or a
    :class:`StreamingInput`, or ``None`` when the flow starts with
    ``flow.input(step_id, StreamingInput(frame))``.  Every row of
    micro-batch ``b`` enters the flow at epoch ``b``; the workers keep
    their state from one micro-batch to the next.  Returns the running
    :class:`StreamingFlow`: iterate it for ``(epoch, items)``.

    * ``workers``: the gang's tasks (default: ``spark.timelypy.workers``,
      else Spark's default parallelism less ``batch_slots``); the cluster
      needs ``workers + batch_slots`` task slots, ``batch_slots`` (default
      1) staying free for the micro-batches' own jobs.
    * ``key(row)``: rows with the same key go to the same worker
      (``stable_hash(key) % workers``); without it a chunk of
      :data:`CHUNK_ROWS` rows goes to whichever worker asks first.
    * ``row_type``: rows enter as tuples (default), ``"dict"`` or ``"row"``.
    * ``trigger``: keywords of ``DataStreamWriter.trigger``, such as
      ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``
      (then the run ends once the available data was processed);
      ``options`` (a ``checkpointLocation``...) and ``query_name`` go to
      the writer too.
    * ``arrow=True`` reads each micro-batch as one Arrow table (faster,
      the whole micro-batch in the driver's memory) instead of one
      partition at a time.
    * ``poll``: seconds an idle reader steps its worker between pulls.
    * ``serializer``, ``connect_timeout``, ``timeout``: as for
      :func:`timelypy_spark.execute`; ``start_timeout`` bounds the gang's
      start.

    >>> # for epoch, counts in stream_flow(spark, flow, spark.readStream.text(d), workers=2):
    >>> #     print(epoch, counts)
    """
    if not isinstance(flow, Dataflow):
        built = flow() if callable(flow) else flow
        if not isinstance(built, Dataflow):
            raise FlowError(
                f"stream_flow needs a timelypy.flow.Dataflow (or a function returning one), "
                f"got {flow!r}"
            )
        flow = built
    own = flow.input_config
    if source is None:
        if not isinstance(own, StreamingInput):
            raise FlowError(
                "stream_flow needs a streaming DataFrame: pass it as source, or start the flow "
                "with flow.input(step_id, StreamingInput(frame))"
            )
        config = own
    else:
        if own is not None:
            raise FlowError("the flow already has an input step; run it with source=None")
        config = source if isinstance(source, StreamingInput) else StreamingInput(source)
    if key is not None or row_type is not None:
        config = StreamingInput(
            config.frame,
            key=key if key is not None else config.key,
            row_type=row_type if row_type is not None else config.row_type,
        )
    frame = config.frame
    if not getattr(frame, "isStreaming", False):
        raise ConfigError(
            f"stream_flow needs a streaming DataFrame (spark.readStream...), got {frame!r}; "
            "for a DataFrame that is not streaming use timelypy_spark.run_flow or iter_flow"
        )
    if arrow and config.row_type == "row":
        raise ConfigError("arrow=True gives tuples or dicts, not Rows: row_type='tuple' or 'dict'")
    if not isinstance(batch_slots, int) or batch_slots < 1:
        raise ConfigError(f"batch_slots must be an int >= 1, got {batch_slots!r}")
    if not poll > 0:
        raise ConfigError(f"poll must be > 0 seconds, got {poll!r}")
    sc = spark_context(spark)
    chosen: int | None = conf_value(sc, "spark.timelypy.workers", workers, int, None)
    if chosen is None:
        chosen = max(1, int(sc.defaultParallelism) - batch_slots)
    if not isinstance(chosen, int) or isinstance(chosen, bool) or chosen < 1:
        raise ConfigError(f"workers must be a positive int, got {chosen!r}")
    _check_stream_slots(sc, chosen, batch_slots)
    return StreamingFlow(
        spark,
        flow,
        config,
        chosen,
        trigger=trigger,
        options=dict(options or {}),
        query_name=query_name,
        arrow=arrow,
        poll=poll,
        chunk_rows=chunk_rows,
        max_chunks=max_chunks,
        serializer=serializer,
        connect_timeout=connect_timeout,
        start_timeout=start_timeout,
        timeout=timeout,
    )


def _check_stream_slots(sc: Any, workers: int, batch_slots: int) -> None:
    """Fail fast unless the gang and the micro-batches' jobs all fit in the cluster's slots."""
    needed = workers + batch_slots
    try:
        check_slots(sc, needed)
    except ConfigError as exc:
        if "dynamic allocation" in str(exc):
            raise
        slots = max_concurrent_tasks(sc)
        raise ConfigError(
            f"stream_flow needs {needed} task slots: {workers} for the gang of workers, which "
            f"holds them while the query runs, and {batch_slots} for the micro-batches' own "
            f"Spark jobs; the Spark cluster at {sc.master!r} has {slots}: ask for "
            f"workers={max(1, slots - batch_slots)} or fewer, or give Spark more executors or "
            "cores"
        ) from None
