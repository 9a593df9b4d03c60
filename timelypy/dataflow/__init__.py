"""The dataflow layer: scopes, streams, pacts, operators, capabilities, notificators.

Most users only need the names re-exported from :mod:`timelypy`.  Importing
this package attaches every operator to :class:`Stream` and :class:`Scope`
(each operator module does so itself; see :mod:`timelypy.dataflow.extension`).
"""

# The operator modules attach their methods as they are imported: import all.
from timelypy.dataflow import operators as _operators  # noqa: F401
from timelypy.dataflow.builder import OperatorBuilder
from timelypy.dataflow.capability import Capability, CapabilitySet, InputCapability
from timelypy.dataflow.channels import Exchange, Pact, Pipeline
from timelypy.dataflow.handles import (
    Frontier,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    Session,
)
from timelypy.dataflow.input import InputHandle
from timelypy.dataflow.notificator import EagerNotificator, FrontierNotificator, Notificator
from timelypy.dataflow.operators.capture import (
    CaptureQueue,
    Messages,
    ProgressUpdates,
    extract,
    replay_into,
)
from timelypy.dataflow.operators.concat import concatenate
from timelypy.dataflow.operators.generic import source
from timelypy.dataflow.operators.ok_err import Err, Ok
from timelypy.dataflow.probe import ProbeHandle
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.progress.operate import FrontierInterest

__all__ = [
    "Scope",
    "Stream",
    "Pact",
    "Pipeline",
    "Exchange",
    "OperatorBuilder",
    "OperatorInfo",
    "OperatorInput",
    "OperatorOutput",
    "Session",
    "Frontier",
    "FrontierInterest",
    "Capability",
    "InputCapability",
    "CapabilitySet",
    "Notificator",
    "FrontierNotificator",
    "EagerNotificator",
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
]
