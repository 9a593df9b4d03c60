"""The operator set: one module per operator family, named after it.

Each is written with the public building blocks (``unary``, ``binary``,
``OperatorBuilder``) and attaches itself to :class:`~timelypy.dataflow.Stream`
(or :class:`~timelypy.dataflow.Scope`) as a method, as Timely's extension
traits do.  Importing this package imports (and so attaches) all of them.
"""

from timelypy.dataflow import input, probe
from timelypy.dataflow.operators import (
    accumulate,
    branch,
    broadcast,
    capture,
    concat,
    delay,
    enterleave,
    exchange,
    feedback,
    filter,
    generic,
    inspect,
    map,
    ok_err,
    partition,
    reclock,
    to_stream,
)

__all__ = [
    "accumulate",
    "branch",
    "broadcast",
    "capture",
    "concat",
    "delay",
    "enterleave",
    "exchange",
    "feedback",
    "filter",
    "generic",
    "input",
    "inspect",
    "map",
    "ok_err",
    "partition",
    "probe",
    "reclock",
    "to_stream",
]
