"""``partition``: split one stream into ``parts`` streams.

``partition(stream, parts, route)`` builds one operator with ``parts``
outputs.  ``route(record)`` returns ``(part, new_record)``: ``new_record``
is sent, at the record's time, on output ``part``, which must be an ``int``
in ``range(parts)``.  Records stay on their worker (``Pipeline``), as in
Timely; exchange upstream to choose where they are.

Each input batch becomes at most one batch per part.  A ``part`` out of
range raises a :class:`~timelypy.errors.PortError` naming the operator, the
worker, the part and the record (Timely would panic on the index).

Timely's example, checked:

>>> import timelypy
>>> def build(scope):
...     streams = scope.to_stream(range(10)).partition(3, lambda x: (x % 3, x))
...     return [stream.capture() for stream in streams]
>>> [captured.extract() for captured in timelypy.example(build)]
[[(0, [0, 3, 6, 9])], [(0, [1, 4, 7])], [(0, [2, 5, 8])]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.channels import Pipeline
from timelypy.dataflow.extension import stream_method
from timelypy.dataflow.stream import Stream
from timelypy.errors import PortError
from timelypy.progress.operate import FrontierInterest

__all__ = ["partition"]

T = TypeVar("T")
U = TypeVar("U")

_NO_PART: Any = object()


@stream_method
def partition(
    stream: Stream[T], parts: int, route: Callable[[T], tuple[int, U]]
) -> list[Stream[U]]:
    """``parts`` streams; ``route(record) -> (part, new_record)`` picks each record's stream.

    >>> import timelypy
    >>> def build(scope):
    ...     small, large = scope.to_stream([1, 50, 7, 80]).partition(
    ...         2, lambda x: (int(x >= 10), str(x)))
    ...     return small.capture(), large.capture()
    >>> small, large = timelypy.example(build)
    >>> small.extract(), large.extract()
    ([(0, ['1', '7'])], [(0, ['50', '80'])])
    """
    if type(parts) is not int or parts < 0:
        raise ValueError(f"partition: parts must be a non-negative int, not {parts!r}")
    builder = OperatorBuilder("Partition", stream.scope)
    info = builder.info
    inp = builder.new_input(stream, Pipeline(), interest=FrontierInterest.NEVER)
    outputs = []
    streams = []
    for _ in range(parts):
        output, part_stream = builder.new_output()
        outputs.append(output)
        streams.append(part_stream)

    def out_of_range(part: Any, record: Any) -> PortError:
        return PortError(
            f"operator {info.name!r} (worker {info.worker_index}): route returned part "
            f"{part!r} for record {record!r}, but the operator has {parts} output(s): parts "
            f"must be ints in range({parts})"
        )

    def constructor(caps: Any) -> Callable[[Any], None]:
        def logic(frontiers: Any) -> None:
            for cap, data in inp:
                buckets: list[list[Any]] = [[] for _ in range(parts)]
                # A dict, not a list, so that negative parts are rejected too.
                appends = {index: bucket.append for index, bucket in enumerate(buckets)}
                part: Any = _NO_PART
                record: Any = None
                try:
                    for record in data:
                        part, new_record = route(record)
                        appends[part](new_record)
                except (KeyError, TypeError):
                    # Either our lookup failed (the part is invalid) or route raised.
                    try:
                        valid = part is _NO_PART or part in appends
                    except TypeError:  # unhashable part
                        valid = False
                    if valid:
                        raise
                    raise out_of_range(part, record) from None
                for output, bucket in zip(outputs, buckets, strict=True):
                    if bucket:
                        output.give_batch(cap, bucket)

        return logic

    builder.build(constructor)
    return streams
