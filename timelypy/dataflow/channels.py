"""Parallelization contracts (pacts) and the pushers that move batches.

A *pact* says how an operator input receives the records of the stream it
reads:

* :class:`Pipeline` -- every record stays on the worker that produced it;
  batches move by reference into the reader's queue.
* :class:`Exchange` -- each record goes to worker ``key(record) % peers``
  (``key(record) & (peers - 1)`` when ``peers`` is a power of two), as in
  Timely.  ``key`` must return an ``int``; for strings use
  :func:`timelypy.hashing.stable_hash`, never Python's salted ``hash``.

A pact must preserve the number of records per time: progress counts the
records an output produced and the records inputs consumed, and the two
totals must meet.

A stream's output feeds a :class:`Tee`: one pusher per reader.  When there
are several readers, all but the last receive a copy of each batch, so an
operator may always modify the list it receives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from timelypy.errors import ExchangeKeyError, SerializationError, short_repr
from timelypy.events import Logger, MessagesEvent

if TYPE_CHECKING:
    from timelypy.dataflow.operator import LeafOperator
    from timelypy.dataflow.scope import Scope

__all__ = ["Pact", "Pipeline", "Exchange"]

#: ``push(time, records)``
Push = Callable[[Any, list[Any]], None]


class Tee:
    """Fans a stream's batches out to every reader."""

    __slots__ = ("_pushers", "push")

    def __init__(self) -> None:
        self._pushers: list[Push] = []
        self.push: Push = self._push_none

    def add(self, pusher: Push) -> None:
        """Add a reader."""
        self._pushers.append(pusher)
        if len(self._pushers) == 1:
            self.push = pusher
        else:
            self.push = self._push_many

    def replace(self, index: int, pusher: Push) -> None:
        """Replace reader ``index``'s pusher (operator fusion does, once the scope is built)."""
        self._pushers[index] = pusher
        if len(self._pushers) == 1:
            self.push = pusher

    @property
    def pushers(self) -> list[Push]:
        """The readers' pushers, in the order they were added (a copy)."""
        return list(self._pushers)

    @property
    def readers(self) -> int:
        """The number of readers."""
        return len(self._pushers)

    def _push_none(self, time: Any, records: list[Any]) -> None:
        pass

    def _push_many(self, time: Any, records: list[Any]) -> None:
        pushers = self._pushers
        last = len(pushers) - 1
        for i, push in enumerate(pushers):
            push(time, records if i == last else list(records))


class Pact:
    """How an operator input receives the records of its stream."""

    name = "Pact"

    def connect(
        self, scope: Scope, operator: LeafOperator, input_index: int
    ) -> tuple[Push, deque[Any], int | None]:
        """Return ``(pusher for the producer's tee, the reader's queue, channel id or None)``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Pipeline(Pact):
    """Keep records on the worker that produced them."""

    name = "Pipeline"

    def connect(
        self, scope: Scope, operator: LeafOperator, input_index: int
    ) -> tuple[Push, deque[Any], int | None]:
        """A local queue; pushing activates the reader."""
        queue: deque[Any] = deque()
        append = queue.append

        def push(time: Any, records: list[Any]) -> None:
            append((time, records))
            activate = operator.activate
            if activate is not None:
                activate()

        return push, queue, None


class Exchange(Pact):
    """Route each record to worker ``key(record) % peers``.

    ``partition(records, peers)``, if given, splits each batch into one
    list per worker, each record where ``key`` sends it (the flow layer's
    keyed steps pass one that remembers its keys' hashes); a lone record
    whose key works goes whole to its worker without it.  If it raises, the
    batch is split record by record, so the error is reported as for any
    key; if its lists are not one per worker, or lose or add records, that
    is an :class:`~timelypy.errors.ExchangeKeyError` naming the operator.

    >>> Exchange(lambda word: len(word))
    Exchange(key=<lambda>)
    """

    name = "Exchange"

    def __init__(
        self,
        key: Callable[[Any], int],
        partition: Callable[[list[Any], int], list[list[Any]]] | None = None,
    ) -> None:
        if not callable(key):
            raise TypeError(f"Exchange needs a key function, got {key!r}")
        if partition is not None and not callable(partition):
            raise TypeError(f"Exchange's partition must be callable, got {partition!r}")
        self.key = key
        self.partition = partition

    def connect(
        self, scope: Scope, operator: LeafOperator, input_index: int
    ) -> tuple[Push, deque[Any], int | None]:
        """Allocate a channel between all workers; partition each batch by key."""
        worker = scope.worker
        channel = worker.new_identifier()
        pushers, mailbox = worker.allocate(channel, operator)
        logger = worker.log_register().get("timely")
        if logger is not None:
            pushers = [
                _logged(push, logger, channel, worker.index, j) for j, push in enumerate(pushers)
            ]
        peers = len(pushers)
        if peers == 1:
            (only,) = pushers

            def push_one(time: Any, records: list[Any]) -> None:
                only((time, records))

            return push_one, mailbox, channel
        key = self.key
        where = f"operator {operator.name!r} (worker {worker.index})"
        mask = peers - 1 if peers & (peers - 1) == 0 else None
        partition = self.partition

        def split(records: list[Any]) -> list[list[Any]]:
            """One list per worker, by ``key``; a key's error names this operator."""
            parts: list[list[Any]] = [[] for _ in range(peers)]
            appends = [p.append for p in parts]
            try:
                if mask is not None:
                    for record in records:
                        appends[key(record) & mask](record)
                else:
                    for record in records:
                        appends[key(record) % peers](record)
            except Exception as exc:
                bad = None
                if isinstance(exc, TypeError):
                    bad = next((r for r in records if not _gives_int(key, r)), None)
                if bad is None:
                    # the user's key function raised: name the operator it belongs to
                    exc.add_note(f"raised by the exchange key function of {where}")
                    _blame(exc, operator.name, worker.index)
                    raise
                error = ExchangeKeyError(
                    f"{where}: the exchange key must return an int, but returned "
                    f"{key(bad)!r} ({type(key(bad)).__name__}) for record {bad!r}; use "
                    "timelypy.stable_hash(...) for strings (Python's hash() differs "
                    "between processes)"
                )
                # One name, the right one: the operator whose key it is, not its sender.
                _blame(error, operator.name, worker.index)
                raise error from exc
            return parts

        def push(time: Any, records: list[Any]) -> None:
            to = None
            if len(records) == 1:
                # One record (a small epoch's): it goes whole to its worker, with no
                # partition to build.  A key that fails falls through to split(),
                # which raises the error it names.
                try:
                    target = key(records[0])
                    to = pushers[target & mask if mask is not None else target % peers]
                except Exception:
                    to = None
            try:
                if to is not None:
                    to((time, records))
                    return
                parts = None
                if partition is not None:
                    try:
                        parts = partition(records, peers)
                    except Exception:
                        parts = None  # split() raises the error, named as for any key
                    else:
                        if not _complete(parts, peers, len(records)):
                            error = ExchangeKeyError(
                                f"{where}: the exchange's partition must return one list per "
                                f"worker ({peers}) holding every record of the batch "
                                f"({len(records)}), but returned {short_repr(parts)}"
                            )
                            _blame(error, operator.name, worker.index)
                            raise error
                if parts is None:
                    parts = split(records)
                for j, part in enumerate(parts):
                    if part:
                        pushers[j]((time, part))
            except SerializationError as exc:
                # the codec names this operator already: not the one sending to it
                _blame(exc, operator.name, worker.index)
                raise

        return push, mailbox, channel

    def __repr__(self) -> str:
        return f"Exchange(key={getattr(self.key, '__name__', self.key)!r})".replace("'", "")


def _complete(parts: Any, peers: int, records: int) -> bool:
    """Whether ``parts`` is one list per worker holding ``records`` records in all."""
    try:
        return len(parts) == peers and sum(map(len, parts)) == records
    except TypeError:
        return False


def _gives_int(key: Callable[[Any], Any], record: Any) -> bool:
    """Whether ``key(record)`` is an ``int``; a key that raises is not this kind of failure."""
    try:
        return isinstance(key(record), int)
    except Exception:
        return True


def _blame(exc: BaseException, operator: str, worker: int) -> None:
    """Mark ``exc`` as located at ``operator``: the scheduler then adds no other name."""
    try:
        exc.timelypy_operator = operator  # type: ignore[attr-defined]
        exc.timelypy_worker = worker  # type: ignore[attr-defined]
    except AttributeError:
        pass


def _logged(
    push: Callable[[Any], None], logger: Logger, channel: int, source: int, target: int
) -> Callable[[Any], None]:
    """Wrap a pusher so every batch it sends is logged as a ``MessagesEvent``."""

    def logged(message: Any) -> None:
        logger.log(MessagesEvent(True, channel, source, target, len(message[1])))
        push(message)

    return logged
