r"""``timelypy.flow``: the seeds' epoch-level layer on the timely runtime.

Users program at the level of *epochs* and *steps* (seeds 000 and 004),
not capabilities: a :class:`Dataflow` built step by step, inputs that yield
``AdvanceTo(epoch)`` and ``Emit(item)``, stateful steps keyed by ``str``
state keys, and :func:`run` / :func:`run_cluster` / :func:`cluster_main`
(or ``python -m timelypy.flow module:flow``, or
``timelypy_spark.run_flow``) to run it on threads, processes or Spark.

The seed's wordcount runs with only its import lines changed:

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

The layer is built only on the runtime's public API
(:mod:`timelypy.dataflow`), as a user's own operators would be; see
``docs/flow.md``.
"""

from timelypy.flow import inputs, outputs, window
from timelypy.flow.dataflow import Dataflow, Step
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
