"""The public API is pinned: what the API reference documents, module by module.

The reference (docs/api/*.md, rendered by mkdocstrings) shows the names in
each module's ``__all__``, or, where its ``:::`` block gives a ``members:``
list, only those (a subset of ``__all__``: used for modules whose ``__all__``
still names internals, owned by other work).  This file holds the documented
names; a change to them fails here, so adding or removing a public name is a
deliberate edit of this file, next to the code.  Internals live in
``_private`` modules or names, or stay out of ``__all__`` (still importable,
not documented).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Constants users are meant to read (everything else in capitals is an internal knob).
USER_CONSTANTS = {
    "timelypy.order": {"U64_MAX"},
    "timelypy.flow.window": {"UTC_EPOCH"},
    "timelypy.recovery": {"ALLOW_NON_RESTORED_ENV"},
    # bytewax's names for the first and last aware datetimes, and the tombstone limit
    # docs/windowing.md states
    "timelypy.flow.operators.windowing": {"UTC_MAX", "UTC_MIN", "TOMBSTONES"},
    # the table a PostgresSink keeps its committed epochs in, in the user's database
    "timelypy.flow.connectors.postgres": {"EPOCHS_TABLE"},
    # the aggregations aggregate_arrow accepts (docs/arrow.md lists them from it)
    "timelypy.flow.operators.arrow": {"AGGREGATIONS"},
}

PUBLIC: dict[str, list[str]] = {
    "timelypy": [
        "Capability",
        "CapabilityError",
        "CapabilitySet",
        "CaptureQueue",
        "ClusterError",
        "Config",
        "ConfigError",
        "CycleError",
        "EagerNotificator",
        "Err",
        "Exchange",
        "Frontier",
        "FrontierInterest",
        "FrontierNotificator",
        "InputCapability",
        "InputError",
        "InputHandle",
        "Messages",
        "Notificator",
        "Ok",
        "OperatorBuilder",
        "Pipeline",
        "PortError",
        "ProbeHandle",
        "Product",
        "ProductType",
        "ProgressUpdates",
        "Scope",
        "SerializationError",
        "Stream",
        "SummaryError",
        "TimelyError",
        "TimestampError",
        "Worker",
        "WorkerAborted",
        "concatenate",
        "example",
        "execute",
        "execute_from_args",
        "extract",
        "initialize_from",
        "replay_into",
        "source",
        "stable_hash",
    ],
    "timelypy.communication": [],
    "timelypy.communication.codec": [
        "Codec",
        "MsgpackCodec",
        "PickleCodec",
        "make_codec",
        "register_marked",
    ],
    "timelypy.communication.config": ["Arguments", "Config", "parse_arguments", "parse_hostfile"],
    "timelypy.dataflow": [
        "Capability",
        "CapabilitySet",
        "CaptureQueue",
        "EagerNotificator",
        "Err",
        "Exchange",
        "Frontier",
        "FrontierInterest",
        "FrontierNotificator",
        "InputCapability",
        "InputHandle",
        "Messages",
        "Notificator",
        "Ok",
        "OperatorBuilder",
        "OperatorInfo",
        "OperatorInput",
        "OperatorOutput",
        "Pact",
        "Pipeline",
        "ProbeHandle",
        "ProgressUpdates",
        "Scope",
        "Session",
        "Stream",
        "concatenate",
        "extract",
        "replay_into",
        "source",
    ],
    "timelypy.dataflow.builder": ["OperatorBuilder"],
    "timelypy.dataflow.capability": ["Capability", "CapabilitySet", "InputCapability"],
    "timelypy.dataflow.channels": ["Exchange", "Pact", "Pipeline"],
    "timelypy.dataflow.extension": ["attach", "scope_method", "stream_method"],
    "timelypy.dataflow.handles": [
        "Frontier",
        "OperatorInfo",
        "OperatorInput",
        "OperatorOutput",
        "Session",
    ],
    "timelypy.dataflow.input": ["InputHandle", "input_from", "new_input"],
    "timelypy.dataflow.notificator": ["EagerNotificator", "FrontierNotificator", "Notificator"],
    "timelypy.dataflow.operators": [
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
    ],
    "timelypy.dataflow.operators.accumulate": ["accumulate", "count"],
    "timelypy.dataflow.operators.branch": ["branch", "branch_when"],
    "timelypy.dataflow.operators.broadcast": ["broadcast"],
    "timelypy.dataflow.operators.capture": [
        "CaptureQueue",
        "Messages",
        "ProgressUpdates",
        "capture",
        "capture_into",
        "extract",
        "replay_into",
    ],
    "timelypy.dataflow.operators.concat": ["concat", "concatenate", "concatenate_with"],
    "timelypy.dataflow.operators.delay": ["delay", "delay_batch", "delay_total"],
    "timelypy.dataflow.operators.enterleave": ["enter", "leave"],
    "timelypy.dataflow.operators.exchange": ["exchange"],
    "timelypy.dataflow.operators.feedback": ["LoopHandle", "connect_loop", "feedback"],
    "timelypy.dataflow.operators.filter": ["filter"],
    "timelypy.dataflow.operators.generic": [
        "binary",
        "binary_frontier",
        "binary_notify",
        "sink",
        "source",
        "unary",
        "unary_frontier",
        "unary_notify",
    ],
    "timelypy.dataflow.operators.inspect": [
        "inspect",
        "inspect_batch",
        "inspect_frontier",
        "inspect_time",
    ],
    "timelypy.dataflow.operators.map": ["flat_map", "map", "map_in_place"],
    "timelypy.dataflow.operators.ok_err": [
        "Err",
        "Ok",
        "and_then",
        "err",
        "map_err",
        "map_ok",
        "ok",
        "ok_err",
        "unwrap_or_else",
    ],
    "timelypy.dataflow.operators.partition": ["partition"],
    "timelypy.dataflow.operators.reclock": ["reclock"],
    "timelypy.dataflow.operators.to_stream": ["scope_to_stream", "to_stream"],
    "timelypy.dataflow.probe": ["ProbeHandle", "probe", "probe_with"],
    "timelypy.dataflow.scope": ["Scope"],
    "timelypy.dataflow.stream": ["Stream"],
    "timelypy.errors": [
        "CapabilityError",
        "ClusterError",
        "ConfigError",
        "CycleError",
        "ExchangeKeyError",
        "FlowError",
        "InputError",
        "PortError",
        "RecoveryError",
        "SerializationError",
        "StateKeyError",
        "StepError",
        "SummaryError",
        "TimelyError",
        "TimestampError",
        "WorkerAborted",
        "short_repr",
        "type_label",
    ],
    "timelypy.events": [
        "ChannelsEvent",
        "Logger",
        "MessagesEvent",
        "OperatesEvent",
        "ParkEvent",
        "ProgressEvent",
        "Registry",
        "ScheduleEvent",
        "ShutdownEvent",
    ],
    "timelypy.execute": ["example", "execute", "execute_from_args", "initialize_from"],
    "timelypy.flow": [
        "AdvanceTo",
        "ClockConfig",
        "Dataflow",
        "DirectoryInput",
        "Emit",
        "EmitBatch",
        "EventClockConfig",
        "KeyedStream",
        "ManualInputConfig",
        "ManualOutputConfig",
        "PartitionedInputConfig",
        "PartitionedOutputConfig",
        "SessionWindowConfig",
        "SlidingWindowConfig",
        "SocketInput",
        "StdOutputConfig",
        "Step",
        "Stream",
        "SystemClockConfig",
        "TestingOutputConfig",
        "TumblingWindowConfig",
        "WindowConfig",
        "WindowMetadata",
        "cluster_main",
        "fully_ordered",
        "inputs",
        "operator",
        "outputs",
        "run",
        "run_cluster",
        "single_batch",
        "tumbling_epoch",
        "window",
    ],
    "timelypy.flow.connectors.demo": ["RandomMetricSource"],
    "timelypy.flow.connectors.files": [
        "CSVSource",
        "DirSink",
        "DirSource",
        "FileSink",
        "FileSource",
    ],
    "timelypy.flow.connectors.parquet": ["ParquetSink"],
    "timelypy.flow.connectors.postgres": ["EPOCHS_TABLE", "PostgresSink", "PostgresSource"],
    "timelypy.flow.connectors.redis_streams": ["RedisStreamSink", "RedisStreamSource"],
    "timelypy.flow.connectors.stdio": ["StdOutSink"],
    "timelypy.flow.dataflow": ["Dataflow", "KeyedStream", "Step", "Stream", "operator"],
    "timelypy.flow.directory": ["DirectoryInput"],
    "timelypy.flow.inputs": [
        "AbortExecution",
        "AdvanceTo",
        "DynamicSource",
        "Emit",
        "EmitBatch",
        "FixedPartitionedSource",
        "InputConfig",
        "InputItem",
        "ManualInputConfig",
        "PartitionedInputConfig",
        "SimplePollingSource",
        "Source",
        "StatefulSourcePartition",
        "StatelessSourcePartition",
        "batch",
        "fully_ordered",
        "single_batch",
        "tumbling_epoch",
    ],
    "timelypy.flow.operators": [
        "BranchOut",
        "JoinEmitMode",
        "JoinInsertMode",
        "KeyedStream",
        "StatefulLogic",
        "TTLCache",
        "branch",
        "collect",
        "count_final",
        "enrich_cached",
        "filter",
        "filter_map",
        "filter_map_value",
        "filter_value",
        "flat_map",
        "flat_map_batch",
        "flat_map_value",
        "flatten",
        "fold_final",
        "input",
        "inspect",
        "inspect_debug",
        "join",
        "key_on",
        "key_rm",
        "map",
        "map_batch",
        "map_value",
        "max_final",
        "merge",
        "min_final",
        "operator",
        "output",
        "raises",
        "redistribute",
        "reduce_final",
        "stateful",
        "stateful_flat_map",
        "stateful_map",
    ],
    "timelypy.flow.operators.arrow": [
        "AGGREGATIONS",
        "aggregate_arrow",
        "filter_arrow",
        "flat_map_arrow",
        "map_arrow",
    ],
    "timelypy.flow.operators.helpers": ["map_dict_value"],
    "timelypy.flow.operators.windowing": [
        "Clock",
        "ClockLogic",
        "EventClock",
        "SessionWindower",
        "SlidingWindower",
        "SystemClock",
        "TOMBSTONES",
        "TumblingWindower",
        "UTC_MAX",
        "UTC_MIN",
        "WindowLogic",
        "WindowMetadata",
        "WindowOut",
        "Windower",
        "WindowerLogic",
        "collect_window",
        "count_window",
        "fold_window",
        "join_window",
        "max_window",
        "min_window",
        "reduce_window",
        "window",
    ],
    "timelypy.flow.outputs": [
        "CaptureSink",
        "DynamicSink",
        "FixedPartitionedSink",
        "ManualOutputConfig",
        "OutputConfig",
        "OutputWriter",
        "PartitionedOutputConfig",
        "Sink",
        "StatefulSinkPartition",
        "StatelessSinkPartition",
        "StdOutputConfig",
        "TestingOutputConfig",
    ],
    "timelypy.flow.recovery": ["RecoveryConfig", "init_db_dir"],
    "timelypy.flow.run": ["FlowRun", "cli_main", "cluster_main", "run", "run_cluster"],
    "timelypy.flow.socket_input": ["SocketInput"],
    "timelypy.flow.testing": [
        "TestingSink",
        "TestingSource",
        "TimeTestingGetter",
        "cluster_main",
        "ffwd_iter",
        "poll_next_batch",
        "run_main",
        "run_to_list",
    ],
    "timelypy.flow.window": [
        "ClockConfig",
        "EventClockConfig",
        "SessionWindowConfig",
        "SlidingWindowConfig",
        "SystemClockConfig",
        "TumblingWindowConfig",
        "UTC_EPOCH",
        "WindowConfig",
        "WindowMetadata",
    ],
    "timelypy.hashing": ["stable_hash"],
    "timelypy.launch": [],
    "timelypy.live": ["ProgressLine", "show_progress"],
    "timelypy.metrics": ["MetricsServer", "serve", "start"],
    "timelypy.order": [
        "PartialOrder",
        "PathSummary",
        "Product",
        "ProductType",
        "Timestamp",
        "U64_MAX",
        "followed_by",
        "identity_summary",
        "is_identity_summary",
        "less_equal",
        "less_than",
        "minimum",
        "results_in",
    ],
    "timelypy.progress": [
        "Antichain",
        "Builder",
        "ChangeBatch",
        "Location",
        "MutableAntichain",
        "Port",
        "PortInformation",
        "PortKind",
        "Source",
        "Target",
        "Tracker",
    ],
    "timelypy.progress.change_batch": ["ChangeBatch"],
    "timelypy.progress.explain": ["Holder", "explain", "summarize"],
    "timelypy.progress.frontier": ["Antichain", "MutableAntichain"],
    "timelypy.progress.location": ["Location", "Port", "PortKind", "Source", "Target"],
    "timelypy.progress.metrics": ["time_operators", "timing_operators"],
    "timelypy.progress.operate": ["FrontierInterest"],
    "timelypy.progress.reachability": ["Builder", "PortInformation", "Tracker"],
    "timelypy.recovery": [
        "ALLOW_NON_RESTORED_ENV",
        "Execution",
        "RecoveryConfig",
        "RecoveryError",
        "RecoveryStore",
        "create_store",
        "key_hash",
    ],
    "timelypy.recovery.store": ["Execution", "RecoveryStore", "create_store", "key_hash"],
    "timelypy.result": ["Err", "Ok"],
    "timelypy.testing": [
        "Batch",
        "EpochFeed",
        "Simulation",
        "TestingOutputConfig",
        "TestingSink",
        "TestingSource",
        "Turn",
        "check_batches",
        "describe_holders",
        "extract_all",
        "feed",
        "items_by_epoch",
        "normalize_schedule",
        "records_by_epoch",
        "run_to_completion",
        "settle",
        "simulate",
        "stepped_workers",
    ],
    "timelypy.testing.batches": [
        "Batch",
        "EpochFeed",
        "check_batches",
        "extract_all",
        "feed",
        "records_by_epoch",
    ],
    "timelypy.testing.flow": ["TestingSink", "TestingSource", "items_by_epoch"],
    "timelypy.testing.simulation": ["Simulation", "Turn", "normalize_schedule", "simulate"],
    "timelypy.testing.stepping": [
        "describe_holders",
        "run_to_completion",
        "settle",
        "stepped_workers",
    ],
    "timelypy.testing.strategies": ["epoch_batches", "flow_pairs", "schedules", "worker_counts"],
    "timelypy.visualize": [
        "Cluster",
        "Edge",
        "Graph",
        "Node",
        "NodeKind",
        "flow_graph",
        "runtime_graph",
        "to_dot",
        "to_mermaid",
    ],
    "timelypy.visualize.graph": ["Cluster", "Edge", "Graph", "Node", "NodeKind", "flow_graph"],
    "timelypy.visualize.render": ["to_dot", "to_mermaid"],
    "timelypy.visualize.runtime": ["runtime_graph"],
    "timelypy.worker": ["Worker"],
    "timelypy_spark": [
        "SparkInput",
        "SparkJobError",
        "StreamingFlow",
        "StreamingInput",
        "check_slots",
        "execute",
        "iter_flow",
        "run",
        "run_flow",
        "session",
        "ship_package",
        "stream_flow",
    ],
    "timelypy_spark.cluster": ["check_slots"],
    "timelypy_spark.driver": ["SparkJobError", "TaskLostError", "execute"],
    "timelypy_spark.epochs": ["Epochs"],
    "timelypy_spark.flow": ["SparkInput", "iter_flow", "run_flow"],
    "timelypy_spark.io": ["run"],
    "timelypy_spark.session": ["session"],
    "timelypy_spark.ship": ["build_archive", "ship_package"],
    "timelypy_spark.streaming": ["StreamingFlow", "StreamingInput", "stream_flow"],
}


#: A ``:::`` block of docs/api and the indented options below it.
MODULE_BLOCK = re.compile(r"^::: ([\w.]+)\n((?:[ \t]+.*\n|[ \t]*\n)*)", re.M)
#: Its ``members:`` option, as written on one line: ``false`` or ``[a, b, c]``.
MEMBERS = re.compile(r"^[ \t]+members:(.*)$", re.M)


def members_option(options: str) -> list[str] | bool | None:
    """The ``members:`` option of one block's options (``None``: not given)."""
    found = MEMBERS.findall(options)
    if not found:
        return None
    assert len(found) == 1, f"two members: options in {options!r}"
    text = found[0].strip()
    if text == "false":
        return False
    assert re.fullmatch(r"\[[\w, ]+\]", text), f"write members: as false or [a, b]: {text!r}"
    return [name.strip() for name in text[1:-1].split(",")]


def documented_modules() -> dict[str, list[str] | bool | None]:
    """Every module docs/api documents, with its ``members:`` option."""
    found: dict[str, list[str] | bool | None] = {}
    for path in sorted((ROOT / "docs" / "api").glob("*.md")):
        for block in MODULE_BLOCK.finditer(path.read_text()):
            assert block.group(1) not in found, f"{block.group(1)} is documented twice"
            found[block.group(1)] = members_option(block.group(2))
    return found


def test_the_members_option_is_read_as_mkdocstrings_reads_it():
    text = (
        "::: a.b\n"
        "    options:\n"
        "      members: [x, y_z]\n"
        "\n"
        "::: a.c\n"
        "    options:\n"
        "      show_root_heading: false\n"
        "      members: false\n"
        "\n"
        "::: a.d\n"
        "\n"
        "text\n"
    )
    blocks = {m.group(1): members_option(m.group(2)) for m in MODULE_BLOCK.finditer(text)}
    assert blocks == {"a.b": ["x", "y_z"], "a.c": False, "a.d": None}
    with pytest.raises(AssertionError, match="write members"):
        members_option("      members:\n")


def test_the_pin_covers_every_module_the_reference_documents():
    assert set(documented_modules()) == set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_documented_module_documents_exactly_its_pinned_names(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__: the reference would show every name"
    assert len(set(exported)) == len(exported), f"{name}.__all__ names something twice"
    members = documented_modules()[name]
    if isinstance(members, list):
        assert set(members) <= set(exported), f"{name}: members: lists names not in __all__"
        shown = members
    else:
        shown = list(exported)  # members: false on a package still lists its exports
    assert sorted(shown) == PUBLIC[name], (
        f"{name}'s documented names changed: if that is meant, update PUBLIC in this file"
    )
    for export in exported:
        value = getattr(module, export)  # every name resolves
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name}.{export} has no docstring"


def test_internal_constants_stay_out_of_the_reference():
    knobs = [
        f"{name}.{export}"
        for name, exports in PUBLIC.items()
        for export in exports
        if export.isupper() and export not in USER_CONSTANTS.get(name, set())
    ]
    assert knobs == []
