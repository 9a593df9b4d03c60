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
* :class:`FoldInto` -- ``fold_final(..., merger=)``'s combine: given as
  the reducer, it makes :func:`_fold` fold each key's values of the epoch
  into a fresh ``builder()`` with the user's folder, so one ``(key,
  partial)`` per key and epoch leaves the worker for the key's worker,
  which joins the partials with the merger.

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

__all__ = ["Fold", "FoldInto", "keyed_check", "item_kind", "refusal", "checked_fold"]

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


def item_kind(item: Any) -> str:
    """What an item refused by a keyed step is: ``a key of type int``, ``a str``..."""
    if type(item) is tuple and len(item) == 2:
        return f"a key of type {type(item[0]).__name__}"
    name = type(item).__name__
    return f"{'an' if name[:1].lower() in ('a', 'e', 'i', 'o', 'u') else 'a'} {name}"


def refusal(step: Step, epoch: int, items: list[Any]) -> StateKeyError | None:
    """The :class:`StateKeyError` for the first item of ``items`` that is not ``(str, value)``."""
    bad = _bad_item(items)
    if bad is _MISSING:
        return None
    kind = item_kind(bad)
    return StateKeyError(
        f"step {step.step_id!r} ({step.operator}) takes (key, value) 2-tuples with a str state "
        f"key, but got {bad!r} ({kind}) at epoch {epoch}; map items to "
        "(str(key), value) before this step"
    )


class FoldInto:
    """A combine that folds a key's values into ``builder()`` instead of reducing them.

    ``fold_final(..., merger=)`` gives one as its per-epoch combine:
    :func:`_fold` then folds each key's values of an epoch, in the order
    they come, into a fresh ``builder()`` with ``folder``, exactly as the
    key's worker would fold them into its accumulator, and the epoch's
    ``(key, partial)`` pairs cross to the key's worker, which joins them
    with ``merger``.  Called, it is that merger: whatever takes it for a
    plain associative reducer joins accumulators with it.

    >>> from timelypy.flow.dataflow import Step
    >>> fold = _fold(Step("fold_final", "sum"), FoldInto(int, lambda acc, v: acc + v, max))
    >>> acc = {}
    >>> fold(0, acc, [("a", 1), ("b", 5), ("a", 2)])
    >>> acc
    {'a': 3, 'b': 5}
    """

    __slots__ = ("builder", "folder", "merger")

    #: the user's function :func:`_fold` calls, for error messages
    what = "the folder"

    def __init__(
        self,
        builder: Callable[[], Any],
        folder: Callable[[Any, Any], Any],
        merger: Callable[[Any, Any], Any],
    ) -> None:
        self.builder = builder
        self.folder = folder
        self.merger = merger

    def __call__(self, acc: Any, partial: Any) -> Any:
        return self.merger(acc, partial)


def _fold_into(step: Step, into: FoldInto) -> Fold:
    """``fold(epoch, acc, items)`` for :class:`FoldInto`: each value folded into its key's acc."""
    step_id, operator = step.step_id, step.operator
    builder, folder = into.builder, into.folder

    def fold(epoch: int, acc: dict[str, Any], items: list[Any]) -> None:
        get = acc.get
        missing = _MISSING
        key: Any = None
        try:
            for key, value in items:
                old = get(key, missing)
                acc[key] = folder(builder() if old is missing else old, value)
        except Exception as exc:
            noted(exc, step_id, operator, f"the folder raised on key {key!r} at epoch {epoch}")
            raise

    return fold


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
    if isinstance(reducer, FoldInto):
        return _fold_into(step, reducer)
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
