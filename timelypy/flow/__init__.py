r"""``timelypy.flow``: streams of epochs on the timely runtime, written two ways.

**The stream graph** (what you write first): typed operators that take
and return streams, in bytewax 0.21's shape, so a bytewax program runs
after its imports are renamed from ``bytewax`` to ``timelypy.flow``:

>>> from timelypy.flow.dataflow import Dataflow
>>> import timelypy.flow.operators as op
>>> from timelypy.flow.testing import TestingSink, TestingSource, run_main
>>> flow = Dataflow("wordcount")
>>> lines = op.input("lines", flow, TestingSource(["To be, or not to be"]))
>>> words = op.flat_map("split", lines, lambda line: line.lower().replace(",", "").split())
>>> out = []
>>> op.output("out", op.count_final("count", words, lambda word: word), TestingSink(out))
>>> run_main(flow)
>>> sorted(out)
[('be', 2), ('not', 1), ('or', 1), ('to', 2)]

**The epoch chain**: a :class:`Dataflow` built step by step, inputs that
yield ``AdvanceTo(epoch)`` and ``Emit(item)`` (or ``(epoch, item)``
pairs), stateful steps keyed by ``str`` state keys, and :func:`run` /
:func:`run_cluster` / :func:`cluster_main`:

>>> import re
>>> from operator import add
>>> from timelypy.flow import Dataflow, run
>>> flow = Dataflow()
>>> flow.map(str.lower)
>>> flow.flat_map(lambda line: re.findall(r'[^\s!,.?":;0-9]+', line))
>>> flow.map(lambda word: (word, 1))
>>> flow.reduce_epoch(add)
>>> flow.capture()
>>> sorted(item for epoch, item in run(flow, [(1, "To be, or not to be")]))
[('be', 2), ('not', 1), ('or', 1), ('to', 2)]

Both run on one worker, threads, processes (``python -m timelypy.flow
module:flow``) and Spark (``timelypy_spark.run_flow``).  The layer is
built only on the runtime's public API (:mod:`timelypy.dataflow`), as a
user's own operators would be; see ``docs/flow.md`` (the stream graph) and
``docs/flow_epochs.md`` (the epoch chain).
"""

from timelypy.flow import inputs, outputs, window
from timelypy.flow.dataflow import Dataflow, KeyedStream, Step, Stream, operator
from timelypy.flow.directory import DirectoryInput
from timelypy.flow.inputs import (
    AdvanceTo,
    Emit,
    EmitBatch,
    ManualInputConfig,
    PartitionedInputConfig,
    fully_ordered,
    single_batch,
    tumbling_epoch,
)
from timelypy.flow.outputs import (
    ManualOutputConfig,
    PartitionedOutputConfig,
    StdOutputConfig,
    TestingOutputConfig,
)
from timelypy.flow.run import cluster_main, run, run_cluster
from timelypy.flow.socket_input import SocketInput
from timelypy.flow.window import (
    ClockConfig,
    EventClockConfig,
    SessionWindowConfig,
    SlidingWindowConfig,
    SystemClockConfig,
    TumblingWindowConfig,
    WindowConfig,
    WindowMetadata,
)

__all__ = [
    "Dataflow",
    "Stream",
    "KeyedStream",
    "operator",
    "Step",
    "run",
    "run_cluster",
    "cluster_main",
    "inputs",
    "outputs",
    "window",
    "ClockConfig",
    "SystemClockConfig",
    "EventClockConfig",
    "WindowConfig",
    "TumblingWindowConfig",
    "SlidingWindowConfig",
    "SessionWindowConfig",
    "WindowMetadata",
    "AdvanceTo",
    "Emit",
    "EmitBatch",
    "ManualInputConfig",
    "PartitionedInputConfig",
    "DirectoryInput",
    "SocketInput",
    "single_batch",
    "tumbling_epoch",
    "fully_ordered",
    "ManualOutputConfig",
    "StdOutputConfig",
    "PartitionedOutputConfig",
    "TestingOutputConfig",
]
