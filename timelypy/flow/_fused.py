"""Fused runs of per-item steps: one comprehension per run, or one loop into a fold.

A fused chain (:func:`timelypy.flow.steps.stateless_chain`) applies its
stateless steps to each batch in turn.  Applied one after another, each
per-item step (``map``, ``flat_map``, ``filter``, ``filter_map``, of either
form of a flow) would build a list of the whole batch for the next one;
here a run of them is compiled into one function instead:

* a **comprehension** over the batch whose clauses are the steps in order,
  ``[f2(v1) for v0 in items for v1 in f1(f0(v0))]`` for ``map(f0) ->
  flat_map(f1) -> map(f2)``: one list per batch, the last step's;
* a **loop into a fold** when the run feeds a per-epoch combine
  (``reduce_epoch``'s first fold on the sending worker): each ``(key,
  value)`` the last step makes is checked and folded into the epoch's
  accumulator as it is made, the loop a person would write by hand.  No
  list of pairs is built, and each pair is freed as soon as it is folded:
  a batch of 10,000 live pairs would cost fourteen young garbage
  collections, which the hand-written loop never triggers.

The function is generated source (``compile``), since only that gives one
frame and no call per step and item; its file name is ``<fused NAME>``.
Each call of a step's function starts a line of its own, so the line a
traceback stops at in that file names the step that raised
(:meth:`FusedRun.owner`), as exactly as unfused.  (A comprehension
reports a ``for`` clause's "not iterable" error at its first line, so a
run with more than one ``flat_map`` is compiled as loops, whose lines are
exact.)

Fused, the steps see one item after another, where unfused each saw the
whole batch before the next saw any: the outputs, their order and their
epochs are the same, only the interleaving of calls between the steps
differs.  Steps whose order of calls is their point (``inspect``) and
batch-level steps are not fused into runs; they end one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from timelypy.flow.dataflow import Step

__all__ = ["PerItem", "FusedRun", "Owner", "per_item", "runs", "FOLD_CHECK", "FOLD_UNPACK"]

#: A step applied to one batch: ``fn(epoch, items) -> items``.
BatchFn = Callable[[int, list[Any]], list[Any]]

#: Owners of the lines of a fold that are not a step's: the item check, its unpacking,
#: the reducer (the keyed step's own).
FOLD_CHECK, FOLD_UNPACK, FOLD_REDUCE = "check", "unpack", "reduce"
#: What a line of the generated source belongs to: a step, a part of the fold, or nothing.
Owner = Step | str | None


class PerItem:
    """A per-item stateless step's batch function, which a fused run can also inline.

    ``kind`` is ``map``, ``flat_map``, ``filter`` (truthiness),
    ``filter_bool`` (the stream graph's ``filter``: the predicate must
    return a ``bool``; ``refuse(result)`` raises for anything else) or
    ``filter_map``; ``func`` is the user's function.  Called, it is the
    step applied to one batch on its own.
    """

    __slots__ = ("batch", "func", "kind", "refuse")

    def __init__(
        self,
        kind: str,
        func: Callable[[Any], Any],
        batch: BatchFn,
        refuse: Callable[[Any], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.func = func
        self.batch = batch
        self.refuse = refuse

    def __call__(self, epoch: int, items: list[Any]) -> list[Any]:
        return self.batch(epoch, items)


def per_item(kind: str, func: Callable[[Any], Any]) -> PerItem:
    """The :class:`PerItem` of a ``map``, ``flat_map``, ``filter`` or ``filter_map`` step.

    >>> per_item("flat_map", str.split)(0, ["a b", "c"])
    ['a', 'b', 'c']
    """
    batch: BatchFn
    if kind == "map":

        def batch(epoch: int, items: list[Any]) -> list[Any]:
            return list(map(func, items))

    elif kind == "flat_map":

        def batch(epoch: int, items: list[Any]) -> list[Any]:
            return [out for item in items for out in func(item)]

    elif kind == "filter":

        def batch(epoch: int, items: list[Any]) -> list[Any]:
            return list(filter(func, items))

    elif kind == "filter_map":

        def batch(epoch: int, items: list[Any]) -> list[Any]:
            return [out for out in map(func, items) if out is not None]

    else:
        raise AssertionError(f"not a per-item kind: {kind}")
    return PerItem(kind, func, batch)


class _Source:
    """Generated source lines, each with its owner."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, Owner]] = []

    def add(self, depth: int, text: str, owner: Owner = None) -> None:
        self.lines.append(("    " * depth + text, owner))


class FusedRun:
    """A run of :class:`PerItem` steps compiled into one function.

    Without ``fold``, :attr:`fn` is ``fn(epoch, items) -> items``.  With
    ``fold = (keyed_step, reducer, refuse)`` it is ``fn(epoch, acc,
    items)``: it folds every ``(key, value)`` the run makes into the dict
    ``acc`` (a key's first value kept, later ones combined with
    ``reducer(old, value)``, inline ``old + value`` when ``reducer`` is
    :func:`operator.add`), refusing with ``refuse(epoch, item)`` an item
    that is not a tuple or whose key is not a ``str`` (a tuple of another
    length fails the unpacking, which the caller turns into the same
    refusal).
    """

    def __init__(
        self,
        members: list[tuple[Step, PerItem]],
        name: str,
        fold: tuple[Step, Callable[[Any, Any], Any], Callable[[int, Any], Any]] | None = None,
    ) -> None:
        self.steps = [step for step, _ in members]
        self.filename = f"<fused {name}>"
        #: the name of the item the fold checks (``fold`` only; for error messages)
        self.item_name = "v0"
        namespace: dict[str, Any] = {}
        for i, (_, item) in enumerate(members):
            namespace[f"f{i}"] = item.func
            if item.refuse is not None:
                namespace[f"nb{i}"] = item.refuse
        flat_maps = sum(1 for _, item in members if item.kind == "flat_map")
        if fold is None and flat_maps <= 1:
            source = self._comprehension(members)
        else:
            source = self._loops(members, fold, namespace)
        #: the generated source, for the curious (``print(run.source)``)
        self.source = "\n".join(text for text, _ in source.lines) + "\n"
        #: line number -> owner
        self.owners: dict[int, Owner] = {
            number: owner for number, (_, owner) in enumerate(source.lines, start=1)
        }
        #: the first step making a "not iterable" error a comprehension reports at its first line
        self.first_flat_map = next(
            (step for step, item in members if item.kind == "flat_map"), None
        )
        exec(compile(self.source, self.filename, "exec"), namespace)
        self.fn: Callable[..., Any] = namespace["fused"]

    def _comprehension(self, members: list[tuple[Step, PerItem]]) -> _Source:
        expr: list[tuple[str, Owner]] = [("v0", None)]
        clauses: list[tuple[str, Owner]] = []

        def indented(lines: list[tuple[str, Owner]]) -> list[tuple[str, Owner]]:
            return [("    " + text, owner) for text, owner in lines]

        def as_name(i: int) -> tuple[list[tuple[str, Owner]], str]:
            # the current value as a name: itself, or bound with := as the argument
            if len(expr) == 1 and expr[0][0].isidentifier():
                return [], expr[0][0]
            return [(f"(v{i + 1} :=", None), *indented(expr), (")", None)], f"v{i + 1}"

        for i, (step, item) in enumerate(members):
            kind = item.kind
            if kind == "map":
                expr = [(f"f{i}(", step), *indented(expr), (")", step)]
            elif kind == "flat_map":
                clauses += [(f"for v{i + 1} in f{i}(", step), *indented(expr), (")", step)]
                expr = [(f"v{i + 1}", None)]
            elif kind == "filter":
                bound, name = as_name(i)
                if bound:
                    clauses += [(f"if f{i}(", step), *indented(bound), (")", step)]
                else:
                    clauses.append((f"if f{i}({name})", step))
                expr = [(name, None)]
            elif kind == "filter_bool":
                bound, name = as_name(i)
                arg = indented(bound) if bound else [(f"    {name}", None)]
                clauses += [
                    (f"if (b{i} := f{i}(", step),
                    *arg,
                    (f")) is True or b{i} is not False and nb{i}(b{i})", step),
                ]
                expr = [(name, None)]
            elif kind == "filter_map":
                clauses += [
                    (f"if (v{i + 1} := f{i}(", step),
                    *indented(expr),
                    (")) is not None", step),
                ]
                expr = [(f"v{i + 1}", None)]
            else:
                raise AssertionError(kind)
        source = _Source()
        source.add(0, "def fused(epoch, items):")
        source.add(1, "return [")
        for text, owner in expr:
            source.add(2, text, owner)
        source.add(2, "for v0 in items")
        for text, owner in clauses:
            source.add(2, text, owner)
        source.add(1, "]")
        return source

    def _loops(
        self,
        members: list[tuple[Step, PerItem]],
        fold: tuple[Step, Callable[[Any, Any], Any], Callable[[int, Any], Any]] | None,
        namespace: dict[str, Any],
    ) -> _Source:
        source = _Source()
        if fold is None:
            source.add(0, "def fused(epoch, items):")
            source.add(1, "out = []")
            source.add(1, "append = out.append")
        else:
            source.add(0, "def fused(epoch, acc, items):")
        source.add(1, "for v0 in items:")
        depth, cur = 2, "v0"
        for i, (step, item) in enumerate(members):
            kind = item.kind
            if kind == "map":
                source.add(depth, f"v{i + 1} = f{i}({cur})", step)
                cur = f"v{i + 1}"
            elif kind == "flat_map":
                source.add(depth, f"for v{i + 1} in f{i}({cur}):", step)
                depth += 1
                cur = f"v{i + 1}"
            elif kind == "filter":
                source.add(depth, f"if not f{i}({cur}):", step)
                source.add(depth + 1, "continue", step)
            elif kind == "filter_bool":
                source.add(depth, f"b{i} = f{i}({cur})", step)
                source.add(depth, f"if b{i} is not True:", step)
                source.add(depth + 1, f"if b{i} is not False:", step)
                source.add(depth + 2, f"nb{i}(b{i})", step)
                source.add(depth + 1, "continue", step)
            elif kind == "filter_map":
                source.add(depth, f"v{i + 1} = f{i}({cur})", step)
                source.add(depth, f"if v{i + 1} is None:", step)
                source.add(depth + 1, "continue", step)
                cur = f"v{i + 1}"
            else:
                raise AssertionError(kind)
        if fold is None:
            source.add(depth, f"append({cur})")
            source.add(1, "return out")
            return source
        from operator import add

        _, reducer, refuse = fold
        namespace["reducer"] = reducer
        namespace["refuse"] = refuse
        self.item_name = cur
        source.add(depth, f"if type({cur}) is not tuple:", FOLD_CHECK)
        source.add(depth + 1, f"refuse(epoch, {cur})", FOLD_CHECK)
        source.add(depth, f"key, value = {cur}", FOLD_UNPACK)
        source.add(depth, "if type(key) is not str:", FOLD_CHECK)
        source.add(depth + 1, f"refuse(epoch, {cur})", FOLD_CHECK)
        source.add(depth, "if key in acc:", FOLD_REDUCE)
        if reducer is add:
            source.add(depth + 1, "acc[key] = acc[key] + value", FOLD_REDUCE)
        else:
            source.add(depth + 1, "acc[key] = reducer(acc[key], value)", FOLD_REDUCE)
        source.add(depth, "else:", FOLD_REDUCE)
        source.add(depth + 1, "acc[key] = value", FOLD_REDUCE)
        return source

    def owner(self, exc: BaseException) -> tuple[Owner, dict[str, Any]]:
        """What raised ``exc`` in :attr:`fn`: the owner of the line, and that frame's locals.

        ``(None, {})`` when the error did not come from the generated
        source (nor a function it called).
        """
        tb = exc.__traceback__
        found: tuple[int, Any] | None = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename:
                found = (tb.tb_lineno, tb.tb_frame)
            tb = tb.tb_next
        if found is None:
            return None, {}
        line, frame = found
        owner = self.owners.get(line)
        if owner is None:
            # a comprehension's "not iterable" for a for clause: its only flat_map
            owner = self.first_flat_map
        return owner, dict(frame.f_locals)


def runs(
    chain: Iterable[tuple[Step, BatchFn]],
) -> list[tuple[Step, BatchFn] | list[tuple[Step, PerItem]]]:
    """``chain`` with each run of two or more consecutive :class:`PerItem` steps as one list.

    >>> a, b, c = Step("map", "a"), Step("map", "b"), Step("inspect", "c")
    >>> shape = runs([(a, per_item("map", str)), (b, per_item("map", len)), (c, print)])
    >>> [len(part) if isinstance(part, list) else part[0].step_id for part in shape]
    [2, 'c']
    """
    out: list[tuple[Step, BatchFn] | list[tuple[Step, PerItem]]] = []
    current: list[tuple[Step, PerItem]] = []

    def close() -> None:
        if len(current) >= 2:
            out.append(list(current))
        else:
            out.extend(current)
        current.clear()

    for step, fn in chain:
        if isinstance(fn, PerItem):
            current.append((step, fn))
        else:
            close()
            out.append((step, fn))
    close()
    return out
