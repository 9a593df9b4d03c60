"""Batch-level steps: your function takes a whole batch of items at once.

The engine moves items in batches (a list per epoch and activation, a few
hundred to a few thousand items).  A per-item step calls your function
once per item; a batch-level step calls it once per batch, so the work
inside can be written with whatever is fastest on a list: a ``join`` and
one regular expression over all the lines, ``collections.Counter``, numpy.
Both forms of a flow have them (``Dataflow.map_batch``,
``op.map_batch``, ...); this module holds their batch functions:

* :func:`map_batch` -- ``mapper(batch)`` returns a list with one output
  per item, in order;
* :func:`flat_map_batch` -- ``mapper(batch)`` returns a list (or any
  iterable that is not a ``str``, ``bytes`` or mapping) of any length;
* :func:`pre_aggregate` -- a keyed aggregation's per-batch pre-aggregate:
  ``aggregate(batch)`` returns a mapping ``key -> partial`` (a ``dict``, a
  ``Counter``) or an iterable of ``(key, partial)`` pairs, which the step
  then combines per epoch on the sending worker, exchanges by key, and
  totals (``reduce_epoch(reducer, pre_aggregate=...)``,
  ``op.reduce_final(..., pre_aggregate=...)``).

A batch is what the engine happens to have gathered: its size and where
it starts depend on the input, the pull limit and the number of workers,
so a batch function must not depend on them; each batch holds items of
one epoch.  The list you get is the engine's: read it, return a new one.

A function that returns the wrong kind of thing stops the flow with a
:class:`BatchRefused` that the step's operator turns into a
:class:`~timelypy.errors.FlowError` naming the step, the worker and the
epoch; one that raises is reported as any step function that raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from timelypy.errors import StateKeyError, short_repr

__all__ = ["BatchRefused", "map_batch", "flat_map_batch", "pre_aggregate", "describe"]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]


class BatchRefused(Exception):
    """What a batch-level step's function returned is refused (the message says why).

    Raised inside the step's batch function; the operator running it
    (:func:`timelypy.flow.steps.stateless_chain`) raises a
    :class:`~timelypy.errors.FlowError` in its place that names the step,
    the worker and the epoch.
    """


def describe(value: Any) -> str:
    """``value``'s type and a short repr, for error messages.

    >>> describe("abc")
    "a str ('abc')"
    """
    return f"a {type(value).__name__} ({short_repr(value, 60)})"


def map_batch(mapper: Callable[[list[Any]], list[Any]], what: str = "the mapper") -> BatchFn:
    """The batch function of a ``map_batch`` step: one output per item, as a list.

    >>> map_batch(lambda batch: [x * 2 for x in batch])(0, [1, 2])
    [2, 4]
    """

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        out = mapper(items)
        if type(out) is not list:
            raise BatchRefused(
                f"{what} of a map_batch step must return a list (one output per item), "
                f"got {describe(out)}"
            )
        if len(out) != len(items):
            raise BatchRefused(
                f"{what} of a map_batch step must return one output per item: it returned "
                f"{len(out)} for a batch of {len(items)}; use flat_map_batch for any number"
            )
        return out

    return fn


def _listed(out: Any, what: str, step_kind: str) -> list[Any]:
    """``out`` (a batch function's result) as a list; refused if a str, bytes, mapping or None."""
    if isinstance(out, (str, bytes, bytearray, Mapping)) or out is None:
        hint = " (return list(d.items()) for its pairs)" if isinstance(out, Mapping) else ""
        raise BatchRefused(
            f"{what} of a {step_kind} step must return a list of items, got {describe(out)}{hint}"
        )
    try:
        return list(out)
    except TypeError:
        raise BatchRefused(
            f"{what} of a {step_kind} step must return a list of items, got {describe(out)}"
        ) from None


def flat_map_batch(
    mapper: Callable[[list[Any]], Iterable[Any]], what: str = "the mapper"
) -> BatchFn:
    """The batch function of a ``flat_map_batch`` step: any number of outputs.

    >>> flat_map_batch(lambda batch: [sum(batch)])(0, [1, 2, 3])
    [6]
    """

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        out = mapper(items)
        return out if type(out) is list else _listed(out, what, "flat_map_batch")

    return fn


def pre_aggregate(
    aggregate: Callable[[list[Any]], Any],
    step_id: str,
    operator: str,
) -> BatchFn:
    """The batch function of a keyed step's ``pre_aggregate``: ``(key, partial)`` pairs.

    ``aggregate(batch)`` returns a mapping (its items are the pairs) or
    an iterable of ``(key, partial)`` 2-tuples; every key must be a
    ``str`` (a :class:`~timelypy.errors.StateKeyError` naming the step
    otherwise).  A mapping's keys are checked in one pass over its keys,
    not its items.

    >>> from collections import Counter
    >>> pre_aggregate(lambda batch: Counter(batch), "count", "reduce_epoch")(0, ["a", "b", "a"])
    [('a', 2), ('b', 1)]
    """

    def refuse(epoch: int, bad: Any) -> StateKeyError:
        kind = (
            f"a key of type {type(bad[0]).__name__}"
            if type(bad) is tuple and len(bad) == 2
            else describe(bad)
        )
        return StateKeyError(
            f"step {step_id!r} ({operator}): its pre_aggregate must give (key, partial) pairs "
            f"with a str state key, but gave {bad!r} ({kind}) at epoch {epoch}; return a "
            "mapping of str keys (a dict, a Counter) or a list of (str, partial) tuples"
        )

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        out = aggregate(items)
        if isinstance(out, Mapping):
            if list(map(type, out)).count(str) != len(out):
                bad = next(key for key in out if type(key) is not str)
                raise refuse(epoch, (bad, out[bad]))
            return list(out.items())
        pairs = _listed(out, "the pre_aggregate", operator)
        n = len(pairs)
        if list(map(type, pairs)).count(tuple) != n or list(map(len, pairs)).count(2) != n:
            raise refuse(epoch, next(p for p in pairs if type(p) is not tuple or len(p) != 2))
        if [type(pair[0]) for pair in pairs].count(str) != n:
            raise refuse(epoch, next(p for p in pairs if type(p[0]) is not str))
        return pairs

    fn.what = "the pre_aggregate"  # type: ignore[attr-defined]
    return fn
