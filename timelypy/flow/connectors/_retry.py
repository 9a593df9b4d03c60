"""Bounded reconnects for the connectors that talk to a server (PostgreSQL, Redis).

A :class:`Backoff` counts the failed attempts to reach a server since it
was last reached: the pause before the next attempt doubles from
``first_pause`` up to :data:`MAX_PAUSE`, and the attempt after the last
allowed one raises a :class:`~timelypy.errors.FlowError` that names the
step, the partition and the server's address, so a long outage ends the
execution (a run with recovery resumes later) instead of hanging it.

Neither sources nor sinks sleep, so a worker keeps running its other
steps during an outage: a source partition returns an empty batch and asks
to be called again after the pause (``next_awake``); a sink partition
whose epoch cannot be written raises the :class:`Retry
<timelypy.flow.sinks.StatefulSinkPartition.Retry>` of :meth:`Backoff.retry`
from ``snapshot()``, and the engine holds the epoch open and asks again
after the pause.  One attempt blocks at most the client's connect or
socket timeout (a refused connection fails at once).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from timelypy.errors import FlowError
from timelypy.flow.sinks import StatefulSinkPartition

__all__ = ["Backoff", "MAX_PAUSE", "snapshot_when_closing"]

S = TypeVar("S")

#: The longest pause between two attempts, in seconds.
MAX_PAUSE = 4.0

log = logging.getLogger("timelypy.flow.connectors")


class Backoff:
    """``attempts`` tries to reach ``address``, pauses doubling from ``first_pause`` seconds.

    >>> backoff = Backoff(3, 0.5, "step 'f.out' (partition 'p')", "Redis at h:1")
    >>> backoff.failed(OSError("refused")), backoff.failed(OSError("refused"))
    (0.5, 1.0)
    >>> backoff.failed(OSError("refused"))
    Traceback (most recent call last):
    ...
    timelypy.errors.FlowError: step 'f.out' (partition 'p'): cannot reach Redis at h:1 after 3 ...
    >>> backoff.reached(); backoff.failures
    0
    """

    def __init__(self, attempts: int, first_pause: float, what: str, address: str) -> None:
        if attempts < 1:
            raise FlowError(f"{what}: connect_attempts must be >= 1, got {attempts!r}")
        self.attempts = attempts
        self.first_pause = first_pause
        self.what = what
        self.address = address
        #: failed attempts since the server was last reached
        self.failures = 0

    def reached(self) -> None:
        """The server answered: the next outage gets the whole budget again."""
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        """Count a failed attempt; the pause before the next one, or the error when none is left."""
        self.failures += 1
        reason = str(exc).strip() or type(exc).__name__
        if self.failures >= self.attempts:
            raise FlowError(
                f"{self.what}: cannot reach {self.address} after {self.attempts} attempts: {reason}"
            ) from exc
        pause: float = min(self.first_pause * 2.0 ** (self.failures - 1), MAX_PAUSE)
        log.warning(
            "%s: %s failed (%s); attempt %d of %d in %.2fs",
            self.what,
            self.address,
            reason,
            self.failures + 1,
            self.attempts,
            pause,
        )
        return pause

    def retry(self, exc: BaseException) -> StatefulSinkPartition.Retry:
        """Count a failed attempt; what a sink partition's ``snapshot()`` raises to be asked again.

        >>> backoff = Backoff(2, 0.25, "step 'f.out' (partition 'p')", "Redis at h:1")
        >>> backoff.retry(OSError("refused")).timeout.total_seconds()
        0.25
        """
        pause = self.failed(exc)
        reason = f"{self.what}: {self.address} unreachable, attempt {self.failures + 1} next"
        return StatefulSinkPartition.Retry(datetime.timedelta(seconds=pause), reason)

    def awake_after(self, exc: BaseException) -> datetime.datetime:
        """Count a failed attempt; when a source partition should try again."""
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.failed(exc))


def snapshot_when_closing(snapshot: Callable[[], S]) -> S:
    """``snapshot()`` until it stops raising ``Retry``, sleeping its pauses: for ``close()`` only.

    A sink partition's ``close()`` at the end of a run may still have work
    that no epoch's close took (rolling back what a failed execution wrote,
    when the partition got no rows): the worker has finished its steps, so
    it waits there, as long as the partition's bounded attempts allow.
    """
    while True:
        try:
            return snapshot()
        except StatefulSinkPartition.Retry as retry:
            time.sleep(retry.timeout.total_seconds())
