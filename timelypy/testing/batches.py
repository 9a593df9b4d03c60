"""Epoch-stamped batches: into an ``InputHandle``, out of captures.

A test describes what one worker sends on one input as a list of
*batches* ``(epoch, records)`` whose epochs never decrease::

    [(0, [1, 2]), (0, [3]), (2, []), (3, [4])]

:class:`EpochFeed` sends such a list through an
:class:`~timelypy.dataflow.input.InputHandle` one batch at a time (so a
test can interleave feeding with stepping), advancing the handle lazily:
``advance_to(epoch)`` happens when a batch of a later epoch is sent, so an
epoch stays open until the next one starts or the input closes.  A batch
with no records only advances the handle.  The last action of a feed
closes the handle.  :func:`feed` does all of it at once.

Out of the dataflow, ``stream.capture()`` records ``(time, records)`` on
each worker; :func:`extract_all` merges the captures of several workers.
:func:`records_by_epoch` is the other half of a test: the records of one
or more inputs grouped by epoch, what a plain-Python model of an operator
starts from.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from timelypy.dataflow.input import InputHandle
from timelypy.dataflow.operators.capture import Event, extract
from timelypy.order import less_equal

__all__ = ["Batch", "EpochFeed", "feed", "check_batches", "extract_all", "records_by_epoch"]

T = TypeVar("T")

#: One batch of an input: ``(epoch, records)``.
Batch = tuple[Any, Sequence[T]]


def check_batches(batches: object, what: str = "the input") -> list[tuple[Any, list[Any]]]:
    """Return ``batches`` as a list of ``(epoch, list of records)``; raise naming what is wrong.

    Epochs must never decrease (by the timestamps' partial order); each
    batch's records must be a list or a tuple.

    >>> check_batches([(0, [1]), (1, (2, 3))])
    [(0, [1]), (1, [2, 3])]
    >>> check_batches([(1, [1]), (0, [2])])
    Traceback (most recent call last):
    ...
    ValueError: the input: batch 1 is at epoch 0, after a batch at epoch 1; epochs must not ...
    """
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence):
        raise TypeError(f"{what} must be a list of (epoch, records) batches, got {batches!r}")
    checked: list[tuple[Any, list[Any]]] = []
    previous: Any = None
    for position, batch in enumerate(batches):
        if not isinstance(batch, tuple) or len(batch) != 2:
            raise TypeError(
                f"{what}: batch {position} must be an (epoch, records) pair, got {batch!r}"
            )
        epoch, records = batch
        if epoch is None:
            raise TypeError(f"{what}: batch {position} has no epoch (None)")
        if not isinstance(records, (list, tuple)):
            raise TypeError(
                f"{what}: batch {position} at epoch {epoch!r} must carry a list of records, "
                f"got {records!r}"
            )
        if previous is not None and not less_equal(previous, epoch):
            raise ValueError(
                f"{what}: batch {position} is at epoch {epoch!r}, after a batch at epoch "
                f"{previous!r}; epochs must not decrease (each is >= the one before)"
            )
        previous = epoch
        checked.append((epoch, list(records)))
    return checked


class EpochFeed(Generic[T]):
    """Sends ``batches`` through ``handle`` one step at a time, then closes it.

    Each :meth:`feed_next` does one thing: send the next batch (advancing
    the handle to its epoch first) or, after the last batch, close the
    handle.  It returns ``False`` once there is nothing left to do.

    >>> import timelypy
    >>> from timelypy.testing import stepped_workers, run_to_completion
    >>> worker = stepped_workers(1)[0]
    >>> handle = timelypy.InputHandle()
    >>> queue = worker.dataflow(lambda scope: scope.input_from(handle).capture())
    >>> feeder = EpochFeed(handle, [(0, ["a"]), (2, ["b", "c"])])
    >>> feeder.feed_next(), feeder.pending
    (True, 2)
    >>> feeder.feed_all()
    >>> handle.closed
    True
    >>> run_to_completion(worker)
    >>> queue.extract()
    [(0, ['a']), (2, ['b', 'c'])]
    """

    def __init__(
        self, handle: InputHandle[T], batches: Sequence[Batch[T]], name: str = "the input"
    ) -> None:
        if not isinstance(handle, InputHandle):
            raise TypeError(f"EpochFeed feeds an InputHandle, got {handle!r}")
        self.handle = handle
        self.name = name
        self._batches = check_batches(batches, name)
        self._next = 0

    @property
    def pending(self) -> int:
        """How many actions are left: batches to send, and the final close."""
        return len(self._batches) - self._next + (0 if self.handle.closed else 1)

    @property
    def done(self) -> bool:
        """Whether every batch was sent and the handle closed."""
        return self.pending == 0

    def feed_next(self) -> bool:
        """Send the next batch, or close the handle after the last; ``False`` if nothing is left."""
        handle = self.handle
        if self._next < len(self._batches):
            epoch, records = self._batches[self._next]
            self._next += 1
            if handle.time != epoch:
                handle.advance_to(epoch)
            if records:
                handle.send_batch(list(records))
            return True
        if not handle.closed:
            handle.close()
            return True
        return False

    def feed_all(self) -> None:
        """Send every remaining batch and close the handle."""
        while self.feed_next():
            pass

    def __repr__(self) -> str:
        return f"EpochFeed({self.name}, {self.pending} actions pending)"


def feed(handle: InputHandle[T], batches: Sequence[Batch[T]], *, close: bool = True) -> None:
    """Send ``(epoch, records)`` batches through ``handle``; close it unless ``close=False``.

    With ``close=False`` the handle stays at the last batch's epoch, open.

    >>> import timelypy
    >>> from timelypy.testing import stepped_workers, run_to_completion
    >>> worker = stepped_workers(1)[0]
    >>> handle = timelypy.InputHandle()
    >>> queue = worker.dataflow(lambda scope: scope.input_from(handle).map(len).capture())
    >>> feed(handle, [(0, ["ab"]), (1, ["c", "def"])])
    >>> run_to_completion(worker)
    >>> queue.extract()
    [(0, [2]), (1, [1, 3])]
    """
    if close:
        EpochFeed(handle, batches).feed_all()
        return
    if not isinstance(handle, InputHandle):
        raise TypeError(f"feed feeds an InputHandle, got {handle!r}")
    for epoch, records in check_batches(batches):
        if handle.time != epoch:
            handle.advance_to(epoch)
        if records:
            handle.send_batch(records)


def extract_all(captures: Iterable[Iterable[Event]]) -> list[tuple[Any, list[Any]]]:
    """The records of several captures (one per worker): ``[(time, sorted records)]``, sorted.

    As :meth:`CaptureQueue.extract <timelypy.CaptureQueue.extract>` does for
    one; times with no records are left out.

    >>> from timelypy.testing import stepped_workers, run_to_completion
    >>> workers = stepped_workers(2)
    >>> queues = [w.dataflow(lambda scope: scope.to_stream([w.index]).capture())
    ...           for w in workers]
    >>> run_to_completion(workers)
    >>> extract_all(queues)
    [(0, [0, 1])]
    """
    return extract(itertools.chain.from_iterable(captures))


def records_by_epoch(*inputs: Sequence[Batch[T]]) -> dict[Any, list[T]]:
    """The records of every input, grouped by epoch, epochs in order; epochs with none left out.

    Records keep their order (input by input, batch by batch).  This is
    what a plain-Python model of an operator usually starts from.

    >>> records_by_epoch([(0, [1, 2]), (1, []), (2, [3])], [(0, [10])])
    {0: [1, 2, 10], 2: [3]}
    """
    grouped: dict[Any, list[T]] = {}
    for index, batches in enumerate(inputs):
        for epoch, records in check_batches(batches, f"input {index}"):
            if records:
                grouped.setdefault(epoch, []).extend(records)
    return {epoch: grouped[epoch] for epoch in sorted(grouped)}
