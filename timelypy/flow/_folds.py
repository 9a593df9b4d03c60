"""Folding ``(key, value)`` items per epoch and key, and the keyed-item check.

A keyed step's items must be ``(str, value)`` 2-tuples (the key is the
state key).  :func:`keyed_check` checks a batch before a keyed operator;
the per-epoch folds of ``reduce_epoch`` and the stream graph's ``*_final``
combine check as they fold instead:

* :func:`_fold` -- a key's first value kept, later ones combined with the
  reducer (``old + value`` written inline when it is :func:`operator.add`);
  no check (the items were checked on the worker that made them);
* :func:`checked_fold` -- the first fold on the worker the items are made
  on: each item checked as it is folded, with the per-item steps before it
  compiled into the same loop (:class:`~timelypy.flow._fused.FusedRun`), so
  the pairs they make are folded as they are made;
* :func:`partial_fold` -- ``fold_final(..., merger=)``'s fold of one batch
  on the worker that made it: each key's values folded into a fresh
  ``builder()`` with the user's folder, so one ``(key, partial)`` per key
  leaves the batch (merged per epoch with the merger, then sent to the
  key's worker, which merges the partials into the key's accumulator).

Every refusal is the same :class:`~timelypy.errors.StateKeyError`, naming
the step, the first bad item and the epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import add, itemgetter
from typing import Any

from timelypy.errors import StateKeyError
from timelypy.flow._fused import FOLD_CHECK, FOLD_UNPACK, FusedRun, PerItem
from timelypy.flow._step_errors import noted, raise_from
from timelypy.flow.dataflow import Step

__all__ = ["Fold", "keyed_check", "refusal", "checked_fold", "partial_fold"]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]
#: ``fold(epoch, acc, items)``: fold a batch of ``(key, value)`` items into ``acc``.
Fold = Callable[[int, dict[str, Any], list[Any]], None]

_MISSING = object()
_first = itemgetter(0)


def _bad_item(items: list[Any]) -> Any:
    for item in items:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            return item
    return _MISSING


def keyed_check(step: Step) -> BatchFn:
    """Check that every item of a batch is ``(str, value)`` before it enters keyed ``step``.

    Three passes in C (types, lengths, key types) rather than a Python
    loop; the slow scan runs only to name the offending item.  Each pass
    counts matches in a list (``list(map(type, items)).count(tuple)``),
    which compares types by identity first: about 37 ns an item against 52
    for building a set of the types and comparing it (a batch of 10,000
    ``(word, 1)`` items).
    """

    def check(epoch: int, items: list[Any]) -> list[Any]:
        n = len(items)
        if (
            list(map(type, items)).count(tuple) != n
            or list(map(len, items)).count(2) != n
            or list(map(type, map(_first, items))).count(str) != n
        ):
            error = refusal(step, epoch, items)
            if error is not None:
                raise error
        return items

    return check


def refusal(step: Step, epoch: int, items: list[Any]) -> StateKeyError | None:
    """The :class:`StateKeyError` for the first item of ``items`` that is not ``(str, value)``."""
    bad = _bad_item(items)
    if bad is _MISSING:
        return None
    kind = (
        f"a key of type {type(bad[0]).__name__}"
        if type(bad) is tuple and len(bad) == 2
        else f"a {type(bad).__name__}"
    )
    return StateKeyError(
        f"step {step.step_id!r} ({step.operator}) takes (key, value) 2-tuples with a str state "
        f"key, but got {bad!r} ({kind}) at epoch {epoch}; map items to "
        "(str(key), value) before this step"
    )


def _fold(step: Step, reducer: Callable[[Any, Any], Any]) -> Fold:
    """``fold(epoch, acc, items)``: fold each ``(key, value)`` of ``items`` into ``acc`` in order.

    A key's first value is kept as it is; each later one is folded in with
    ``reducer(old, value)``.  When ``reducer`` is :func:`operator.add` the
    loop writes ``old + value`` instead of calling it: the same
    ``PyNumber_Add`` on the same operands in the same order, so the same
    values, types and exceptions, without a call per item (and with ``in``
    and ``acc[key]``, bytecodes, rather than a ``dict.get`` call): about
    58 ns an item against 64 for the generic loop (batches of 10,000
    ``(word, 1)`` items on the 2-core benchmark machine).

    Counting the keys in C (``collections.Counter``'s helper) when every
    value is the int 1 was measured and is not used: proving that (the
    values' types and equality to 1, needed to keep a lone ``True`` a
    ``True`` and a float a float) costs two more passes over the batch,
    and with them the C count was slower (62 ns an item) than this loop.
    """
    step_id, operator = step.step_id, step.operator

    def reducer_raised(exc: BaseException, key: Any, epoch: int) -> None:
        noted(exc, step_id, operator, f"the reducer raised on key {key!r} at epoch {epoch}")

    if reducer is add:

        def fold_add(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
            key: Any = None
            try:
                for key, value in items:
                    if key in acc:
                        acc[key] = acc[key] + value
                    else:
                        acc[key] = value
            except Exception as exc:
                reducer_raised(exc, key, epoch)
                raise

        return fold_add

    def fold(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
        get = acc.get
        key: Any = None
        try:
            for key, value in items:
                old = get(key, _MISSING)
                acc[key] = value if old is _MISSING else reducer(old, value)
        except Exception as exc:
            reducer_raised(exc, key, epoch)
            raise

    return fold


def _refuser(step: Step) -> Callable[[int, Any], None]:
    def refuse(epoch: int, item: Any) -> None:
        error = refusal(step, epoch, [item])
        assert error is not None
        raise error

    return refuse


def checked_fold(
    step: Step,
    reducer: Callable[[Any, Any], Any],
    members: list[tuple[Step, PerItem]] | None = None,
    name: str | None = None,
    worker: int = 0,
) -> Fold:
    """The first fold of keyed ``step``, checking each item as it folds it.

    ``members`` (per-item steps before the fold) are compiled with it into
    one loop (:class:`~timelypy.flow._fused.FusedRun`).  An item that is
    not a ``(str, value)`` 2-tuple is refused with the
    :class:`StateKeyError` :func:`keyed_check` gives for it; an error of a
    member names that member, one of the reducer the key and the epoch.
    Items before the bad one are folded into the accumulator, but the
    error stops the dataflow.
    """
    fused = FusedRun(
        list(members or []), name or step.step_id, fold=(step, reducer, _refuser(step))
    )
    run = fused.fn

    def fold(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
        try:
            run(epoch, acc, items)
        except Exception as exc:
            _raise_fused(fused, step, worker, epoch, exc)

    return fold


def _raise_fused(fused: FusedRun, step: Step, worker: int, epoch: int, exc: Exception) -> None:
    """Raise the error for ``exc`` raised in the fused fold of keyed ``step``."""
    owner, local = fused.owner(exc)
    if isinstance(owner, Step):
        raise_from(owner, None, worker, epoch, exc)
    if isinstance(exc, StateKeyError) or owner == FOLD_CHECK:
        raise exc
    if owner == FOLD_UNPACK:
        error = refusal(step, epoch, [local.get(fused.item_name)])
        if error is not None:
            raise error from None
        raise exc
    key = local.get("key")
    noted(exc, step.step_id, step.operator, f"the reducer raised on key {key!r} at epoch {epoch}")
    raise exc


def partial_fold(
    step: Step, builder: Callable[[], Any], folder: Callable[[Any, Any], Any]
) -> BatchFn:
    """``fold_final``'s pre-exchange fold of one batch: one ``(key, partial)`` per key.

    Each key's values of the batch are folded, in order, into a fresh
    ``builder()`` with ``folder``, exactly as the key's worker would fold
    them into its accumulator; the batch is checked first as
    :func:`keyed_check` checks it (the same :class:`StateKeyError`).
    What this gives equals what the key's worker would have made only if
    the user's merger joins partials as folding the values one by one
    would (``merger(fold(xs), fold(ys)) == fold(xs + ys)``): that is what
    ``fold_final(..., merger=)`` asks of it.

    >>> step = Step("fold_final", "sum", form="graph")
    >>> partial_fold(step, int, lambda acc, v: acc + v)(0, [("a", 1), ("b", 5), ("a", 2)])
    [('a', 3), ('b', 5)]
    """
    check = keyed_check(step)
    missing = _MISSING

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        check(epoch, items)
        partials: dict[str, Any] = {}
        get = partials.get
        for key, value in items:
            acc = get(key, missing)
            partials[key] = folder(builder() if acc is missing else acc, value)
        return list(partials.items())

    fn.what = "the folder"  # type: ignore[attr-defined]  # named in a StepError
    return fn
