"""The feed: micro-batch rows on the driver, pulled by the gang's readers.

:func:`timelypy_spark.streaming.stream_flow`'s data path goes through the
driver, and this module is that path.  Spark calls the query's batch
function (``foreachBatch``) on the driver; it hands the micro-batch's rows to
a :class:`BatchFeed`, which cuts them into chunks of :data:`CHUNK_ROWS` and
queues them: one queue, or one queue per worker when rows are routed by a
``key`` (``stable_hash(key(row)) % workers``, the worker a stateful step
keyed by the same ``str`` would send the row to).

The tasks pull.  Each task's reader (the input of its worker, made by
:func:`stream_program`) sends a :data:`PULL` request over its authenticated
channel (:meth:`~timelypy_spark.rendezvous.TaskChannel.request`), and the
driver's service, :class:`StreamCollector` (an ``iter_flow``
:class:`~timelypy_spark.flow.EpochCollector` that also answers pulls),
replies with one of four answers:

* a chunk of rows, at its micro-batch's epoch;
* ``advance``: the worker took its last chunk of the batch, so the epoch may
  close on it;
* ``wait``: nothing yet; the reader steps its worker for up to ``poll``
  seconds (exchanges, progress, closing epochs) and asks again;
* ``end``: the input ended and every batch was delivered.

Invariants: every row of micro-batch ``b`` enters the flow at epoch ``b``,
and batch ids must grow.  A worker is told to advance past ``b`` only after
it took its last chunk of ``b``, so an epoch closes exactly when its rows
are all inside the gang.  A batch that fails half-way closes the feed: a
partly delivered epoch never closes.

The batch function reads the micro-batch lazily (:func:`local_rows`, one
partition at a time, or :func:`arrow_rows`, one Arrow table), inside
:meth:`BatchFeed.feed`, so the feed counts a micro-batch as in progress
from its first read.

Backpressure: each queue holds at most :data:`MAX_CHUNKS` chunks; the batch
function waits while its queue is full, and :meth:`BatchFeed.feed` returns
only once the gang took every chunk of the batch, so Spark commits a
micro-batch only after its rows are inside the gang.  Every wait is made of
:data:`SLICE`-second slices that notice a :meth:`BatchFeed.close`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from timelypy.errors import ClusterError, ConfigError, FlowError
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.inputs import AdvanceTo, EmitBatch, InputItem, ManualInputConfig
from timelypy.hashing import stable_hash
from timelypy_spark.flow import EpochCollector, _run_task
from timelypy_spark.task import EmitRecords, StreamProgram, TaskContext

__all__ = [
    "BatchFeed",
    "FeedClosed",
    "StreamCollector",
    "CHUNK_ROWS",
    "MAX_CHUNKS",
    "PULL",
]

#: Rows per chunk a task's reader receives in one reply.
CHUNK_ROWS = 4096
#: Chunks a queue of the feed holds at most before the batch function waits.
MAX_CHUNKS = 8
#: The kind of a task's request for rows.
PULL = "stream.pull"
#: Seconds a task waits for the driver's answer to a pull.
REQUEST_TIMEOUT = 60.0
#: Seconds between the checks of a wait that must notice a stop or a failure.
SLICE = 0.05
#: Deliveries a :class:`BatchFeed` remembers (:attr:`BatchFeed.deliveries`).
KEEP = 1000


class FeedClosed(ClusterError):
    """The feed was closed (the gang failed or the run was cancelled) while a batch waited."""


class BatchFeed:
    """Micro-batch rows on the driver, waiting for the tasks' readers to pull them.

    :meth:`feed` (the batch function's thread) queues a batch's rows in
    chunks and returns once every chunk was taken; :meth:`answer` (the
    driver's rendezvous thread) gives a worker its next chunk, an advance
    past the last fully delivered batch, ``wait`` or ``end``.  A worker is
    told to advance only after it took its last chunk of that batch, so an
    epoch closes exactly when its rows are all inside the gang.

    >>> feed = BatchFeed(2, chunk_rows=2)
    >>> feeder = threading.Thread(target=feed.feed, args=(5, [1, 2, 3]))
    >>> feeder.start()
    >>> while feed.batches < 1: time.sleep(0.01)
    >>> sorted([feed.answer(0), feed.answer(1)])
    [('rows', 5, [1, 2]), ('rows', 5, [3])]
    >>> feeder.join(5)  # every chunk was taken: feed() returned
    >>> feed.answer(0), feed.answer(1), feed.answer(0)
    (('advance', 6), ('advance', 6), ('wait',))
    >>> feed.end(); feed.answer(1)
    ('end',)
    """

    def __init__(
        self,
        workers: int,
        *,
        key: Callable[[Any], Any] | None = None,
        convert: Callable[[Any], Any] | None = None,
        chunk_rows: int = CHUNK_ROWS,
        max_chunks: int = MAX_CHUNKS,
    ) -> None:
        if chunk_rows < 1 or max_chunks < 1:
            raise ConfigError("chunk_rows and max_chunks must be positive")
        self.workers = workers
        self.key = key
        self.convert = convert
        self.chunk_rows = chunk_rows
        self.max_chunks = max_chunks
        self._cond = threading.Condition()
        self._queues: list[deque[tuple[int, list[Any]]]] = [
            deque() for _ in range(workers if key is not None else 1)
        ]
        self._told = [0] * workers  # the epoch each worker was last given
        self._feeding: int | None = None  # the batch being queued now
        self._last: int | None = None  # the last batch whose rows are all queued
        self._ended = False
        self._error: BaseException | None = None
        self._asked: set[int] = set()
        #: Set once every worker asked for rows (the gang is up).
        self.ready = threading.Event()
        #: Micro-batches and rows queued so far.
        self.batches = 0
        self.rows = 0
        #: The latest deliveries, ``(batch, rows, started, taken)``: wall-clock times
        #: (``time.time()``) at which :meth:`feed` began and at which the gang had
        #: taken the last chunk (the epoch then closes); the last :data:`KEEP` only.
        self.deliveries: deque[tuple[int, int, float, float]] = deque(maxlen=KEEP)

    # -- the batch function's side -------------------------------------------------

    def feed(self, batch: int, rows: Iterable[Any]) -> None:
        """Queue ``rows`` at epoch ``batch``; return once the gang took all of them.

        Raises :class:`FeedClosed` if the feed is closed meanwhile, and a
        :class:`~timelypy.errors.FlowError` for a batch id that does not
        grow (an epoch cannot go back).  If reading ``rows`` (or ``key``)
        raises, part of the batch may be with the gang already: the feed is
        closed with that error, so that the partly delivered epoch never
        closes and no later batch is fed.
        """
        started = time.time()
        with self._cond:
            self._check_open(batch)
            if self._ended:
                raise FeedClosed(f"micro-batch {batch} came after the stream's input ended")
            if type(batch) is not int or batch < 0:
                raise FlowError(f"a micro-batch id must be an int >= 0, got {batch!r}")
            if self._last is not None and batch <= self._last:
                raise FlowError(
                    f"micro-batch {batch} came after micro-batch {self._last}: batch ids are "
                    "the flow's epochs and must grow (a query restarted from its checkpoint "
                    "needs a new stream_flow)"
                )
            self._feeding = batch
            before = self.rows
        try:
            if self.key is None:
                self._feed_shared(batch, iter(rows))
            else:
                self._feed_keyed(batch, iter(rows), self.key)
            with self._cond:
                self._last = batch
                self.batches += 1
                self._cond.notify_all()
                self._wait(batch, lambda: not any(self._queues))
                self.deliveries.append((batch, self.rows - before, started, time.time()))
        except BaseException as exc:
            self.close(exc)
            raise
        finally:
            with self._cond:
                self._feeding = None
                self._cond.notify_all()

    def _feed_shared(self, batch: int, rows: Iterator[Any]) -> None:
        convert = self.convert
        while chunk := list(islice(rows, self.chunk_rows)):
            self._put(0, batch, chunk if convert is None else list(map(convert, chunk)))

    def _feed_keyed(self, batch: int, rows: Iterator[Any], key: Callable[[Any], Any]) -> None:
        convert, workers, size = self.convert, self.workers, self.chunk_rows
        buffers: list[list[Any]] = [[] for _ in range(workers)]
        for row in rows:
            record = row if convert is None else convert(row)
            index = stable_hash(key(record)) % workers
            buffer = buffers[index]
            buffer.append(record)
            if len(buffer) >= size:
                buffers[index] = []
                self._put(index, batch, buffer)
        for index, buffer in enumerate(buffers):
            if buffer:
                self._put(index, batch, buffer)

    def _put(self, queue: int, batch: int, chunk: list[Any]) -> None:
        with self._cond:
            self._wait(batch, lambda: len(self._queues[queue]) < self.max_chunks)
            self._queues[queue].append((batch, chunk))
            self.rows += len(chunk)

    def _wait(self, batch: int, done: Callable[[], bool]) -> None:
        """Wait (holding the condition) until ``done()``, in slices that notice a close."""
        while not done():
            self._check_open(batch)
            self._cond.wait(SLICE)
        self._check_open(batch)

    def _check_open(self, batch: int) -> None:
        if self._error is not None:
            raise FeedClosed(
                f"micro-batch {batch} was not delivered: the timelypy gang stopped "
                f"({type(self._error).__name__}: {self._error})"
            )

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the batch being fed, if any; whether none is."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._feeding is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, SLICE))
        return True

    @property
    def feeding(self) -> int | None:
        """The micro-batch being queued now, if any."""
        return self._feeding

    def end(self) -> None:
        """No more batches: once their queues are empty, the readers end."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def close(self, error: BaseException) -> None:
        """Stop feeding because of ``error``: a waiting :meth:`feed` raises :class:`FeedClosed`."""
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()

    # -- the tasks' side (the driver's rendezvous thread) -----------------------------

    def answer(self, worker: int) -> tuple[Any, ...]:
        """What worker ``worker``'s reader gets for its pull."""
        with self._cond:
            if not self.ready.is_set():
                self._asked.add(worker)
                if len(self._asked) == self.workers:
                    self.ready.set()
            if self._error is not None:
                return ("wait",)  # the gang is being cancelled
            queue = self._queues[worker if self.key is not None else 0]
            if queue:
                batch, chunk = queue.popleft()
                self._told[worker] = batch
                self._cond.notify_all()
                return ("rows", batch, chunk)
            last = self._last
            if last is not None and self._told[worker] <= last:
                self._told[worker] = last + 1
                return ("advance", last + 1)
            if self._ended and self._feeding is None:
                return ("end",)
            return ("wait",)


class StreamCollector(EpochCollector):
    """The driver's service for the gang: answers pulls from :class:`BatchFeed`, collects epochs.

    Everything else (items, frontiers, ends) is :class:`EpochCollector`'s.
    """

    def __init__(self, workers: int, feed: BatchFeed) -> None:
        super().__init__(workers)
        self.feed = feed

    def handle(self, rendezvous: Any, identity: bytes, message: Any) -> bool:
        """Answer a ``stream.pull``; hand anything else to :class:`EpochCollector`."""
        if message.kind != PULL:
            return super().handle(rendezvous, identity, message)
        try:
            body: Any = self.feed.answer(message.index)
        except Exception as exc:  # the task raises it
            body = exc
        rendezvous.reply(identity, message, body)
        return True


def _pull_rows(
    task: TaskContext, poll: float, timeout: float, idle: Callable[[float], Any] = time.sleep
) -> Iterator[InputItem]:
    """A task's reader: rows from the driver at their batch's epoch, until ``end``.

    While the driver has nothing, ``idle(poll)`` runs between pulls: the
    worker steps (exchanges, progress, closing epochs) instead of sleeping.
    """
    epoch = 0
    yield AdvanceTo(0)
    request = task.channel.request
    while True:
        answer = request(PULL, {}, timeout)
        kind = answer[0]
        if kind == "rows":
            if answer[1] != epoch:
                epoch = answer[1]
                yield AdvanceTo(epoch)
            if answer[2]:
                yield EmitBatch(answer[2])
        elif kind == "advance":
            epoch = answer[1]
            yield AdvanceTo(epoch)
        elif kind == "end":
            return
        else:  # nothing yet: let the worker work a little, then ask again
            idle(poll)
            yield AdvanceTo(epoch)


def stream_program(flow: Dataflow, poll: float, timeout: float = REQUEST_TIMEOUT) -> StreamProgram:
    """The gang's program: each task a worker of ``flow``, its input pulled from the feed.

    ``poll``: seconds an idle reader steps its worker between pulls;
    ``timeout``: seconds a pull waits for the driver's answer.
    """

    def program(
        worker: Any, partition: Iterator[Any], emit: EmitRecords, task: TaskContext
    ) -> None:
        def input_builder(worker_index: int, worker_count: int, resume_epoch: int) -> Any:
            return _pull_rows(task, poll, timeout, worker.step_or_park)

        _run_task(worker, flow, ManualInputConfig(input_builder), emit, task, None, deliver=True)

    return program


# -- reading a micro-batch (the batch function, on the driver) --------------------------------


def row_converter(row_type: str) -> Callable[[Any], Any] | None:
    """What makes a Spark ``Row`` a tuple or a dict (``None``: the ``Row`` as it is)."""
    if row_type == "tuple":
        return tuple
    if row_type == "dict":
        return _as_dict
    return None


def _as_dict(row: Any) -> Any:
    return row.asDict()


def local_rows(frame: Any) -> Iterator[Any]:
    """A micro-batch's rows, one partition at a time (the read starts at the first row)."""
    yield from frame.toLocalIterator()


def arrow_rows(frame: Any, row_type: str) -> Iterator[Any]:
    """A micro-batch's rows read as one Arrow table: tuples, or dicts for ``row_type='dict'``."""
    table = frame.toArrow()
    for batch in table.to_batches():
        if row_type == "dict":
            yield from batch.to_pylist()
        else:
            yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def python_error(error: BaseException) -> BaseException:
    """The Python exception inside a Spark error from reading a micro-batch, if there is one.

    ``toLocalIterator`` reports a failed job as a bare ``Py4JJavaError``
    ("An error occurred while calling getResult"); the user's exception (a
    UDF's ``ValueError``) is a ``PythonException`` further down its Java
    causes.  That one is returned, as PySpark's ``collect()`` would raise it.
    """
    cause = getattr(error, "java_exception", None)
    found = None
    with contextlib.suppress(Exception):  # the JVM may be gone already
        while cause is not None:
            if cause.getClass().getName() == "org.apache.spark.api.python.PythonException":
                found = cause
            cause = cause.getCause()
    if found is None:
        return error
    from pyspark.errors.exceptions.captured import convert_exception

    converted: BaseException = convert_exception(found)
    converted.__cause__ = error
    return converted
