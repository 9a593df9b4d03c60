"""Every error timelypy raises, in one hierarchy.

All errors derive from :class:`TimelyError`, and each also derives from the
built-in exception a Python user would expect (``TypeError`` for a value of
the wrong type, ``ValueError`` for a value out of range), so both
``except TimelyError`` and ``except TypeError`` work.

Messages say what was wrong, where (operator name, worker index, node or
port), and what to do about it.  Errors raised by *user* functions inside
operators are not wrapped: the original exception is re-raised by
:func:`timelypy.execute` with a note naming the worker and operator.
"""

from __future__ import annotations

__all__ = [
    "TimelyError",
    "TimestampError",
    "SummaryError",
    "PortError",
    "CycleError",
    "CapabilityError",
    "InputError",
    "ConfigError",
    "SerializationError",
    "ExchangeKeyError",
    "ClusterError",
    "WorkerAborted",
    "FlowError",
    "StateKeyError",
    "StepError",
    "RecoveryError",
    "short_repr",
    "type_label",
]


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message naming a bad value.

    A ``repr`` that raises gives ``<type object>``: the message being built
    is about something else.

    >>> short_repr("x" * 100, 10)
    "'xxxxxx..."
    """
    try:
        text = repr(value)
    except Exception:
        return f"<{type_label(value)} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_label(value: object) -> str:
    """The name of ``value``'s type for a message: ``int``, ``decimal.Decimal``.

    >>> type_label(1), type_label(ValueError())
    ('int', 'ValueError')
    """
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


class TimelyError(Exception):
    """Base class of every error raised by timelypy itself."""


class TimestampError(TimelyError, TypeError):
    """A timestamp of the wrong type, or timestamps of mixed types compared.

    >>> from timelypy.progress import Antichain
    >>> from timelypy.order import Product
    >>> Antichain([1, Product(0, 0)])
    Traceback (most recent call last):
    ...
    timelypy.errors.TimestampError: cannot mix timestamp (0, 0) (Product) with int timestamps: ...
    """


class SummaryError(TimelyError, TypeError):
    """A path summary that does not fit the timestamps it is applied to."""


class PortError(TimelyError, ValueError):
    """A reference to an operator port (input or output) that does not exist."""


class CycleError(TimelyError, ValueError):
    """A dataflow cycle along which timestamps do not strictly advance.

    Every cycle must pass through a feedback edge whose summary increments the
    timestamp, otherwise progress tracking could never conclude that a time is
    complete.  ``nodes`` lists the operator indices on the offending cycle.
    """

    def __init__(self, message: str, nodes: list[int]) -> None:
        super().__init__(message)
        self.nodes = nodes


class CapabilityError(TimelyError, RuntimeError):
    """A capability used in a way that would corrupt progress tracking.

    Examples: delaying a capability to an earlier time, using a capability
    after it was released, minting an output capability from an input
    capability through a port the input is not connected to.
    """


class InputError(TimelyError, ValueError):
    """Misuse of an input handle, such as advancing it backwards in time."""


class ConfigError(TimelyError, ValueError):
    """Bad worker/process configuration: arguments, host files, ports."""


class SerializationError(TimelyError, TypeError):
    """A record that the configured codec cannot carry between processes."""


class ExchangeKeyError(TimelyError, TypeError):
    """An exchange key function returned something other than an ``int``.

    Use :func:`timelypy.stable_hash` for strings and other keys: Python's own
    ``hash`` of a string differs between processes.
    """


class ClusterError(TimelyError, RuntimeError):
    """A peer process was lost, unreachable, or failed."""


class WorkerAborted(TimelyError, RuntimeError):
    """Raised inside a worker that stops because another worker failed."""


class FlowError(TimelyError, ValueError):
    """A ``timelypy.flow`` dataflow that cannot run as written.

    Examples: two steps with the same step ID, a flow with no output, an
    input builder whose epochs go backwards or that emits before its first
    ``AdvanceTo``, a partition that no worker can reach.  The message names
    the step ID and, when it happened while running, the worker.
    """


class StateKeyError(FlowError, TypeError):
    """An item into a keyed (stateful) step that is not a ``(str, value)`` 2-tuple."""


class StepError(TimelyError, RuntimeError):
    """A user function raised inside a step of a stream-graph flow.

    The message names the step ID, the worker and the epoch; ``__cause__``
    is the exception the function raised (``except StepError as e: raise
    e.__cause__`` gets it back).  bytewax raises a ``RuntimeError`` here
    too, so ``except RuntimeError`` works in ported programs.
    """


class RecoveryError(TimelyError, RuntimeError):
    """A recovery store that cannot be used as asked: missing, inconsistent, or busy.

    Raised when a store's partition files are missing, extra or mixed from
    different stores, when a second execution would overlap a running one,
    or when a stateful step's state cannot be snapshotted.
    """
