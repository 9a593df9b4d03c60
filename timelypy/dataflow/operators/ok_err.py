"""``ok_err``: split a stream by a function returning :class:`Ok` or :class:`Err`.

Timely's ``OkErr`` calls a closure returning a Rust ``Result`` on every
record and sends the ``Ok`` payloads to its first output and the ``Err``
payloads to its second.  Python has no ``Result``, so this module defines
two tiny immutable wrappers, :class:`Ok` and :class:`Err`, and the
operators built on them:

* ``ok_err(stream, func) -> (ok_stream, err_stream)`` -- one operator with
  two outputs; ``func(record)`` returns ``Ok(x)`` (``x`` goes to the first
  stream) or ``Err(e)`` (``e`` goes to the second);
* Timely's ``ResultStream`` helpers over streams whose records are already
  ``Ok``/``Err``: :func:`ok` and :func:`err` keep the payloads of one kind,
  :func:`map_ok`/:func:`map_err` transform the payloads of one kind,
  :func:`and_then` chains a fallible step on ``Ok`` payloads, and
  :func:`unwrap_or_else` turns ``Err`` payloads into values.

Records keep their time, and stay on their worker (``Pipeline``).  Anything
but an ``Ok`` or an ``Err`` where one is expected raises a ``TypeError``
naming the operator and worker.  ``Ok`` sorts before ``Err``, as Rust's
``Result`` does, so mixed streams can be sorted (``extract`` sorts).

>>> import timelypy
>>> from timelypy import Ok, Err
>>> def build(scope):
...     evens, odds = scope.to_stream(range(6)).ok_err(
...         lambda x: Ok(x) if x % 2 == 0 else Err(x))
...     return evens.capture(), odds.capture()
>>> evens, odds = timelypy.example(build)
>>> evens.extract(), odds.extract()
([(0, [0, 2, 4])], [(0, [1, 3, 5])])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.operators.generic import unary
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest
from timelypy.result import Err, Ok

if TYPE_CHECKING:
    from timelypy.dataflow.handles import OperatorInfo

__all__ = [
    "Ok",
    "Err",
    "ok_err",
    "ok",
    "err",
    "map_ok",
    "map_err",
    "and_then",
    "unwrap_or_else",
]

T = TypeVar("T")

_PIPELINE = Pipeline()


def _not_a_result(info: OperatorInfo, what: str, value: Any) -> NoReturn:
    raise TypeError(
        f"operator {info.name!r} (worker {info.worker_index}): {what} {value!r} "
        f"({type(value).__name__}) is neither timelypy.Ok nor timelypy.Err; wrap values "
        "as Ok(value) or Err(error)"
    )


@stream_method
def ok_err(stream: Stream[T], func: Callable[[T], Ok | Err]) -> tuple[Stream[Any], Stream[Any]]:
    """Split by ``func(record)``: ``Ok`` payloads to the first stream, ``Err`` to the second.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> def build(scope):
    ...     good, bad = scope.to_stream(["1", "x", "3"]).ok_err(
    ...         lambda s: Ok(int(s)) if s.isdigit() else Err(f"not a number: {s}"))
    ...     return good.capture(), bad.capture()
    >>> good, bad = timelypy.example(build)
    >>> good.extract(), bad.extract()
    ([(0, [1, 3])], [(0, ['not a number: x'])])
    """
    builder = OperatorBuilder("OkErr", stream.scope)
    info = builder.info
    inp = builder.new_input(stream, _PIPELINE, interest=FrontierInterest.NEVER)
    ok_out, ok_stream = builder.new_output()
    err_out, err_stream = builder.new_output()

    def constructor(caps: Any) -> Callable[[Any], None]:
        def logic(frontiers: Any) -> None:
            for cap, data in inp:
                oks: list[Any] = []
                errs: list[Any] = []
                ok_append = oks.append
                err_append = errs.append
                for record in data:
                    result = func(record)
                    kind = type(result)
                    if kind is Ok:
                        ok_append(result.value)
                    elif kind is Err:
                        err_append(result.value)
                    else:
                        _not_a_result(info, f"the function returned {result!r} for record", record)
                if oks:
                    ok_out.give_batch(cap, oks)
                if errs:
                    err_out.give_batch(cap, errs)

        return logic

    builder.build(constructor)
    return ok_stream, err_stream


def _result_map(
    stream: Stream[Any], name: str, transform: Callable[[list[Any], OperatorInfo], list[Any]]
) -> Stream[Any]:
    """A Pipeline operator applying ``transform(batch, info)`` to every batch."""

    def constructor(cap: Any, info: OperatorInfo) -> Callable[[Any, Any], None]:
        def logic(inp: Any, out: Any) -> None:
            for cap, data in inp:
                result = transform(data, info)
                if result:
                    out.give_batch(cap, result)

        return logic

    return unary(stream, _PIPELINE, name, constructor)


def _bad(info: OperatorInfo, record: Any) -> NoReturn:
    _not_a_result(info, "record", record)


@stream_method
def ok(stream: Stream[Any]) -> Stream[Any]:
    """The payloads of the ``Ok`` records; ``Err`` records are dropped.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(0), Err("e"), Ok(2)])
    ...                  .ok().capture()).extract()
    [(0, [0, 2])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        return [r.value for r in data if (k := type(r)) is Ok or (k is not Err and _bad(info, r))]

    return _result_map(stream, "ResultOk", transform)


@stream_method
def err(stream: Stream[Any]) -> Stream[Any]:
    """The payloads of the ``Err`` records; ``Ok`` records are dropped.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(0), Err("e"), Ok(2)])
    ...                  .err().capture()).extract()
    [(0, ['e'])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        return [r.value for r in data if (k := type(r)) is Err or (k is not Ok and _bad(info, r))]

    return _result_map(stream, "ResultErr", transform)


@stream_method
def map_ok(stream: Stream[Any], func: Callable[[Any], Any]) -> Stream[Any]:
    """Replace ``Ok(x)`` by ``Ok(func(x))``; ``Err`` records pass unchanged.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(0), Err("e")])
    ...                  .map_ok(lambda x: x + 10).capture()).extract()
    [(0, [Ok(10), Err('e')])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        return [
            Ok(func(r.value)) if (k := type(r)) is Ok else r if k is Err else _bad(info, r)
            for r in data
        ]

    return _result_map(stream, "MapOk", transform)


@stream_method
def map_err(stream: Stream[Any], func: Callable[[Any], Any]) -> Stream[Any]:
    """Replace ``Err(e)`` by ``Err(func(e))``; ``Ok`` records pass unchanged.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(0), Err("e")])
    ...                  .map_err(str.upper).capture()).extract()
    [(0, [Ok(0), Err('E')])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        return [
            Err(func(r.value)) if (k := type(r)) is Err else r if k is Ok else _bad(info, r)
            for r in data
        ]

    return _result_map(stream, "MapErr", transform)


@stream_method
def and_then(stream: Stream[Any], func: Callable[[Any], Ok | Err]) -> Stream[Any]:
    """Replace ``Ok(x)`` by ``func(x)`` (an ``Ok`` or ``Err``); ``Err`` records pass unchanged.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(0), Ok(4), Err("e")])
    ...                  .and_then(lambda x: Ok(10 // x) if x else Err("zero"))
    ...                  .capture()).extract()
    [(0, [Ok(2), Err('e'), Err('zero')])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        result = [
            func(r.value) if (k := type(r)) is Ok else r if k is Err else _bad(info, r)
            for r in data
        ]
        for r in result:
            if type(r) is not Ok and type(r) is not Err:
                _not_a_result(info, "the function returned", r)
        return result

    return _result_map(stream, "AndThen", transform)


@stream_method
def unwrap_or_else(stream: Stream[Any], func: Callable[[Any], Any]) -> Stream[Any]:
    """Replace ``Ok(x)`` by ``x`` and ``Err(e)`` by ``func(e)``.

    >>> import timelypy
    >>> from timelypy import Ok, Err
    >>> timelypy.example(lambda scope: scope.to_stream([Ok(1), Err("e")])
    ...                  .unwrap_or_else(lambda e: 0).capture()).extract()
    [(0, [0, 1])]
    """

    def transform(data: list[Any], info: OperatorInfo) -> list[Any]:
        return [
            r.value if (k := type(r)) is Ok else func(r.value) if k is Err else _bad(info, r)
            for r in data
        ]

    return _result_map(stream, "UnwrapOrElse", transform)
