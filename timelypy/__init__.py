"""timelypy: Timely Dataflow's progress-tracking model in pure Python.

The package is layered (see ``docs/``):

* :mod:`timelypy.order` -- timestamps and path summaries;
* :mod:`timelypy.progress` -- antichains, change batches, reachability, scopes' progress;
* :mod:`timelypy.communication` -- transports, allocators and configuration;
* :mod:`timelypy.dataflow` -- scopes, ``Stream[T]``, operators, capabilities;
* :mod:`timelypy.worker` and :mod:`timelypy.execute` -- running it.

``docs/architecture.md`` says what each layer may import (a test checks it).

>>> import timelypy
>>> timelypy.example(lambda scope: scope.to_stream(range(3)).map(lambda x: x + 1)
...                  .capture()).extract()
[(0, [1, 2, 3])]
"""

from timelypy.communication.config import Config
from timelypy.dataflow import (
    Capability,
    CapabilitySet,
    CaptureQueue,
    EagerNotificator,
    Err,
    Exchange,
    Frontier,
    FrontierInterest,
    FrontierNotificator,
    InputCapability,
    InputHandle,
    Messages,
    Notificator,
    Ok,
    OperatorBuilder,
    Pipeline,
    ProbeHandle,
    ProgressUpdates,
    Scope,
    Stream,
    concatenate,
    extract,
    replay_into,
    source,
)
from timelypy.errors import (
    CapabilityError,
    ClusterError,
    ConfigError,
    CycleError,
    InputError,
    PortError,
    SerializationError,
    SummaryError,
    TimelyError,
    TimestampError,
    WorkerAborted,
)
from timelypy.execute import example, execute, execute_from_args, initialize_from
from timelypy.hashing import stable_hash
from timelypy.order import Product, ProductType
from timelypy.worker import Worker

__all__ = [
    "execute",
    "execute_from_args",
    "example",
    "initialize_from",
    "Config",
    "Worker",
    "Scope",
    "Stream",
    "Pipeline",
    "Exchange",
    "OperatorBuilder",
    "Capability",
    "InputCapability",
    "CapabilitySet",
    "Notificator",
    "FrontierNotificator",
    "EagerNotificator",
    "Frontier",
    "FrontierInterest",
    "InputHandle",
    "ProbeHandle",
    "CaptureQueue",
    "Messages",
    "ProgressUpdates",
    "extract",
    "replay_into",
    "concatenate",
    "source",
    "Ok",
    "Err",
    "stable_hash",
    "Product",
    "ProductType",
    "TimelyError",
    "TimestampError",
    "SummaryError",
    "PortError",
    "CycleError",
    "CapabilityError",
    "InputError",
    "ConfigError",
    "SerializationError",
    "ClusterError",
    "WorkerAborted",
]

__version__ = "0.1.0"
