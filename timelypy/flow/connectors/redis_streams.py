"""Redis Streams: a replayable log in, and appends out that are exactly once across failures.

Needs redis-py: ``pip install 'timelypy[redis]'``.  ``client`` is a
``redis.Redis`` keyword dict (``{"host": "127.0.0.1", "port": 6379}``) or
a URL (``redis://127.0.0.1:6379/0``); each partition makes its own
connection from it.

* :class:`RedisStreamSource` -- one partition per stream key; yields
  ``(entry_id, fields)`` for each entry (``fields`` a dict of str), a batch
  at a time, and resumes after the last entry ID it snapshotted, as a
  consumer of a log (Kafka's offsets) does.  With ``tail=True`` (the
  default) it waits for new entries forever; with ``tail=False`` it ends
  at the last entry the stream had when it started.
* :class:`RedisStreamSink` -- ``(key, fields)`` items appended to one of
  ``stream_keys`` (by the key), a partition each.  Its snapshot is the ID
  of the last entry it appended when an epoch closed; a resumed execution
  first deletes the entries appended after that ID, then appends them
  again: every entry exactly once.  (A reader of the stream may see an
  entry that a crash then takes back, as with a file.)

A lost connection is retried ``connect_attempts`` times, the pause
doubling from ``retry_seconds`` (``_retry``), without blocking the worker:
a source partition reads on after the last entry it returned; a sink
partition keeps the epoch's entries, its epoch is held open by the engine
(``StatefulSinkPartition.Retry``), and after the pause it deletes what it
appended in the epoch and appends the epoch's entries again.  Then the error names the
step, the partition and the server.  Across a restart of the server, the
streams are only as durable as the server's persistence (``appendonly
yes`` keeps every acknowledged entry).
"""

from __future__ import annotations

import datetime
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.connectors._retry import Backoff, snapshot_when_closing
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["RedisStreamSource", "RedisStreamSink"]

#: Appends a sink partition queues before it sends them (one round trip each so many).
PIPELINE_ENTRIES = 1000
#: Seconds one connection attempt or command may take (unless ``client`` sets its own).
SOCKET_TIMEOUT = 5.0
#: Seconds a source partition with no new entries waits before asking again.
POLL_SECONDS = 0.05


def _redis() -> Any:
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise FlowError(
            "the Redis connectors need redis-py: pip install 'timelypy[redis]'"
        ) from exc
    return redis


def _describe(client: dict[str, Any] | str) -> str:
    if isinstance(client, str):
        return client.split("@")[-1]  # never a password
    return f"{client.get('host', 'localhost')}:{client.get('port', 6379)}"


def _client(client: dict[str, Any] | str, decode: bool = True) -> Any:
    """A client that tries each command once: the partitions retry, bounded (``_retry``).

    ``decode=False`` leaves replies as bytes (a sink only needs its last
    entry's ID, and decoding every reply costs as much as a tenth of an append).
    """
    redis = _redis()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    once = {
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": decode,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_connect_timeout": SOCKET_TIMEOUT,
    }
    if isinstance(client, str):
        return redis.Redis.from_url(client, **once)
    return redis.Redis(**{**once, **client})


def _gone() -> tuple[type[BaseException], ...]:
    """The errors that mean the server is unreachable (not that it refused a command)."""
    redis = _redis()
    return (redis.ConnectionError, redis.TimeoutError)


class _Entries(StatefulSourcePartition[tuple[str, dict[str, str]], str]):
    def __init__(self, source: RedisStreamSource, step_id: str, key: str, after: str | None):
        self._source = source
        self._key = key
        what = f"input step {step_id!r} (partition {key!r})"
        self._backoff = Backoff(
            source.connect_attempts,
            source.retry_seconds,
            what,
            f"Redis at {_describe(source.client)}",
        )
        self._conn: Any = None
        self._after = after or "0-0"
        self._end: str | None = None
        self._awake: datetime.datetime | None = None

    def next_batch(self) -> list[tuple[str, dict[str, str]]]:
        source = self._source
        try:
            if self._conn is None:
                self._conn = _client(source.client)
                if not source.tail and self._end is None:
                    last = self._conn.xrevrange(self._key, count=1)
                    self._end = last[0][0] if last else "0-0"
            end = self._end
            if end is not None and _id(self._after) >= _id(end):
                raise StopIteration()
            found = self._conn.xread({self._key: self._after}, count=source.batch_size)
        except _gone() as exc:
            self._close()
            self._awake = self._backoff.awake_after(exc)  # the error once the budget is spent
            return []
        self._backoff.reached()
        entries = found[0][1] if found else []
        if end is not None:
            entries = [entry for entry in entries if _id(entry[0]) <= _id(end)]
        if not entries:
            self._awake = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
                seconds=POLL_SECONDS
            )
            return []
        self._awake = None
        self._after = entries[-1][0]
        return [(entry_id, fields) for entry_id, fields in entries]

    def next_awake(self) -> datetime.datetime | None:
        return self._awake

    def snapshot(self) -> str:
        return self._after

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._close()


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class RedisStreamSource(FixedPartitionedSource[tuple[str, dict[str, str]], str]):
    """The entries of the streams ``stream_keys``, a partition each (see the module)."""

    def __init__(
        self,
        client: dict[str, Any] | str,
        stream_keys: list[str],
        *,
        batch_size: int = 1000,
        tail: bool = True,
        connect_attempts: int = 5,
        retry_seconds: float = 0.5,
    ) -> None:
        if not stream_keys:
            raise FlowError("RedisStreamSource needs at least one stream key")
        self.client = client
        self.stream_keys = list(stream_keys)
        self.batch_size = batch_size
        self.tail = tail
        self.connect_attempts = connect_attempts
        self.retry_seconds = retry_seconds

    def __repr__(self) -> str:
        return f"RedisStreamSource({_describe(self.client)}, {self.stream_keys})"

    def list_parts(self) -> list[str]:
        """One partition per stream key."""
        return list(self.stream_keys)

    def build_part(
        self, step_id: str, for_part: str, resume_state: str | None
    ) -> StatefulSourcePartition[tuple[str, dict[str, str]], str]:
        """A reader of the stream after entry ``resume_state`` (``None``: from its start)."""
        return _Entries(self, step_id, for_part, resume_state)


class _Appender(StatefulSinkPartition[dict[str, Any], str]):
    """One stream's appends; the epoch's entries are kept until it closes, to redo them."""

    def __init__(self, sink: RedisStreamSink, step_id: str, key: str, resume: str | None) -> None:
        self._sink = sink
        self._key = key
        self._what = f"output step {step_id!r} (partition {key!r})"
        self._backoff = Backoff(
            sink.connect_attempts,
            sink.retry_seconds,
            self._what,
            f"Redis at {_describe(sink.client)}",
        )
        self._conn: Any = None
        self._pipe: Any = None
        self._queued = 0
        #: the ID of the last entry of the last epoch closed: what a redo rolls back to
        self._closed = resume or "0-0"
        #: the ID of the last entry appended
        self._last = self._closed
        #: the entries of the epoch being written
        self._epoch: list[dict[str, Any]] = []
        try:
            self._redo()  # what a failed execution appended after the resume point goes
        except StatefulSinkPartition.Retry:
            pass  # the server is away: the first epoch's close (or close()) does it

    def _redo(self) -> None:
        """Delete what was appended after the last closed epoch; append the epoch's entries again.

        One attempt: a lost server raises ``Retry`` (``_retry``), and the
        engine, holding the epoch open, calls :meth:`snapshot` again after
        the pause, without blocking the worker meanwhile.
        """
        try:
            conn = self._conn = _client(self._sink.client, decode=False)
            after = conn.xrange(self._key, min=f"({self._closed}", max="+")
            if after:
                conn.xdel(self._key, *[entry_id for entry_id, _ in after])
            self._last = self._closed
            self._pipe = conn.pipeline(transaction=False)
            self._queued = 0
            for start in range(0, len(self._epoch), PIPELINE_ENTRIES):
                chunk = self._epoch[start : start + PIPELINE_ENTRIES]
                for fields in chunk:
                    self._pipe.xadd(self._key, fields)
                self._queued = len(chunk)
                self._send()
        except _gone() as exc:
            self._close()
            raise self._backoff.retry(exc) from None  # the error once the budget is spent
        self._backoff.reached()

    def write_batch(self, values: list[dict[str, Any]]) -> None:
        for fields in values:
            if not isinstance(fields, dict) or not fields:
                raise TypeError(
                    f"{self._what} appends entries as non-empty dicts of fields, got {fields!r}"
                )
        self._epoch.extend(values)
        if self._pipe is None:
            return  # the connection was lost: the epoch is redone when it closes
        pipe, key = self._pipe, self._key
        for fields in values:
            pipe.xadd(key, fields)
        self._queued += len(values)
        if self._queued >= PIPELINE_ENTRIES:
            try:
                self._send()
            except _gone():
                self._close()

    def _send(self) -> None:
        """Send the queued appends (a crash before the epoch closes: they are deleted on resume)."""
        if self._queued:
            self._queued = 0
            ids = self._pipe.execute()
            if ids:
                self._last = ids[-1].decode()

    def snapshot(self) -> str:
        """The epoch's entries are all in the stream: the ID of its last; ``Retry`` if away."""
        try:
            if self._pipe is not None:
                self._send()
        except _gone():
            self._close()
        if self._pipe is None:
            self._redo()
        self._closed = self._last
        self._epoch = []
        return self._closed

    def _close(self) -> None:
        conn, self._conn, self._pipe = self._conn, None, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        snapshot_when_closing(self.snapshot)
        self._close()


class RedisStreamSink(FixedPartitionedSink[dict[str, Any], str]):
    """``(key, fields)`` items appended to the streams ``stream_keys`` (by key), exactly once."""

    def __init__(
        self,
        client: dict[str, Any] | str,
        stream_keys: list[str],
        *,
        connect_attempts: int = 5,
        retry_seconds: float = 0.5,
    ) -> None:
        if not stream_keys:
            raise FlowError("RedisStreamSink needs at least one stream key")
        self.client = client
        self.stream_keys = list(stream_keys)
        self.connect_attempts = connect_attempts
        self.retry_seconds = retry_seconds

    def __repr__(self) -> str:
        return f"RedisStreamSink({_describe(self.client)}, {self.stream_keys})"

    def list_parts(self) -> list[str]:
        """One partition per stream key."""
        return list(self.stream_keys)

    def part_fn(self, item_key: str) -> int:
        """Adler-32 of the item's key."""
        return adler32(item_key.encode())

    def build_part(
        self, step_id: str, for_part: str, resume_state: str | None
    ) -> StatefulSinkPartition[dict[str, Any], str]:
        """The stream's appender, its entries after ``resume_state`` deleted."""
        return _Appender(self, step_id, for_part, resume_state)
