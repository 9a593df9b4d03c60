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

Connections are retried ``connect_attempts`` times, ``retry_seconds``
apart; then the error names the step, the partition and the server.
"""

from __future__ import annotations

import datetime
import time
from typing import Any
from zlib import adler32

from timelypy.errors import FlowError
from timelypy.flow.sinks import FixedPartitionedSink, StatefulSinkPartition
from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["RedisStreamSource", "RedisStreamSink"]

#: Appends a sink partition queues before it sends them (one round trip each so many).
PIPELINE_ENTRIES = 1000
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


def _connect(client: dict[str, Any] | str, what: str, attempts: int, pause: float) -> Any:
    redis = _redis()
    for attempt in range(1, attempts + 1):
        try:
            if isinstance(client, str):
                conn = redis.Redis.from_url(client, decode_responses=True)
            else:
                conn = redis.Redis(**client, decode_responses=True)
            conn.ping()
            return conn
        except redis.ConnectionError as exc:
            if attempt == attempts:
                raise FlowError(
                    f"{what}: cannot reach Redis at {_describe(client)} after {attempts} "
                    f"attempts: {exc}"
                ) from exc
            time.sleep(pause)
    raise AssertionError("unreachable")


class _Entries(StatefulSourcePartition[tuple[str, dict[str, str]], str]):
    def __init__(self, source: RedisStreamSource, step_id: str, key: str, after: str | None):
        self._source = source
        self._key = key
        what = f"input step {step_id!r} (stream {key!r})"
        self._conn = _connect(source.client, what, source.connect_attempts, source.retry_seconds)
        self._after = after or "0-0"
        self._end: str | None = None
        if not source.tail:
            last = self._conn.xrevrange(key, count=1)
            self._end = last[0][0] if last else "0-0"
        self._awake: datetime.datetime | None = None

    def next_batch(self) -> list[tuple[str, dict[str, str]]]:
        end = self._end
        if end is not None and _id(self._after) >= _id(end):
            raise StopIteration()
        found = self._conn.xread({self._key: self._after}, count=self._source.batch_size)
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

    def close(self) -> None:
        self._conn.close()


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
    def __init__(self, sink: RedisStreamSink, step_id: str, key: str, resume: str | None) -> None:
        self._key = key
        self._what = f"output step {step_id!r} (stream {key!r})"
        self._conn = _connect(sink.client, self._what, sink.connect_attempts, sink.retry_seconds)
        self._last = resume or "0-0"
        # what a failed execution appended after the resume point goes
        after = self._conn.xrange(key, min=f"({self._last}", max="+")
        if after:
            self._conn.xdel(key, *[entry_id for entry_id, _ in after])
        self._pipe = self._conn.pipeline(transaction=False)
        self._queued = 0

    def write_batch(self, values: list[dict[str, Any]]) -> None:
        pipe, key = self._pipe, self._key
        for fields in values:
            if not isinstance(fields, dict) or not fields:
                raise TypeError(
                    f"{self._what} appends entries as non-empty dicts of fields, got {fields!r}"
                )
            pipe.xadd(key, fields)
        self._queued += len(values)
        if self._queued >= PIPELINE_ENTRIES:
            self._send()

    def _send(self) -> None:
        """Send the queued appends (a crash before the epoch closes: they are deleted on resume)."""
        if self._queued:
            ids = self._pipe.execute()
            self._queued = 0
            if ids:
                self._last = ids[-1]

    def snapshot(self) -> str:
        self._send()
        return self._last

    def close(self) -> None:
        self.snapshot()
        self._conn.close()


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
