"""The epoch round trip of ``epochs.py``, traced: when each message leaves and arrives.

    python benchmarks/epoch_path.py            # runs this script as 2 processes, reads the traces

Each worker runs the epochs of ``epochs.py`` (worker 0 sends one record per
epoch, which an exchange moves to worker 1; both advance and
``step_or_park`` until their probe passes) and records, on the machine's
monotonic clock (``time.perf_counter_ns``, one clock for every process of a
host):

- ``("send", t0, t1, kinds)`` around each message sent to the other process
  (``kinds`` holds ``B`` for a data batch and ``P`` for a progress batch, one
  letter per entry);
- ``("recv", t0, t1, kinds)`` around the delivery of each message received;
- ``("passed", t, t, epoch)`` when the worker's probe passed the epoch.

With ``lines=1`` it counts, instead of timing, the Python lines the worker
thread interprets (``sys.settrace``) in each stretch of the critical path:
worker 0 from the first message it receives after the step that follows the
record until its probe passes, and from then until it sends the next record; worker 1 from the
record's arrival until it sends its next message (its acknowledgement).
Counting is deterministic where timing on a shared machine is not; run it
with ``TIMELYPY_PARK_SPIN=0`` so that waiting interprets no lines.

A diagnostic, not a benchmark: the hooks wrap ``ClusterAllocator.release``
and ``ClusterNetwork._deliver``, internals of the cluster that it names by
their current names (``tests/test_epoch_path.py`` runs it, so a rename
fails there first).  The trace or the counts go out in the ``RESULT`` line.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Profiler, parse, run_and_emit

import timelypy
from timelypy.communication import cluster, network
from timelypy.communication.wire import DATA_HEADER, ENTRY, KIND_BATCH, KIND_PROGRESS

DEFAULTS = {"epochs": 3000, "warmup": 500, "lines": 0}

#: The stretches of the critical path ``lines=1`` counts, and the rest.
WAITING, RECV_TO_PASS, PASS_TO_SEND, RECORD_TO_ACK, OFF = (
    "w0 waiting",
    "w0 first receipt -> probe passed",
    "w0 probe passed -> record sent",
    "w1 record received -> acknowledgement sent",
    "off the path",
)


def _kinds(entries: Any) -> str:
    return "".join(
        "B" if kind == KIND_BATCH else "P" if kind == KIND_PROGRESS else "O"
        for _, _, _, kind, _ in entries
    )


class Recorder:
    """Wraps the cluster's send and delivery; keeps a trace, or counts lines per stretch."""

    def __init__(self, count_lines: bool) -> None:
        self.events: list[tuple[str, int, int, Any]] = []
        self.count_lines = count_lines
        self.stretch = OFF
        self.worker = -1
        self.lines: Counter[str] = Counter()
        self.functions: Counter[tuple[str, str]] = Counter()

    def install(self) -> None:
        """Wrap the send and delivery points (for the rest of this process)."""
        clock = time.perf_counter_ns
        events = self.events
        release = cluster.ClusterAllocator.release
        deliver = network.ClusterNetwork._deliver
        recorder = self

        def traced_release(allocator: cluster.ClusterAllocator) -> None:
            out = allocator._out
            if not out:
                release(allocator)
                return
            if recorder.count_lines:
                if recorder.stretch in (PASS_TO_SEND, RECORD_TO_ACK):
                    recorder.stretch = OFF
                release(allocator)
                return
            kinds = "".join(
                _kinds(ENTRY.unpack(entry) for entry in entries) for entries, _ in out.values()
            )
            start = clock()
            release(allocator)
            events.append(("send", start, clock(), kinds))

        def traced_deliver(net: network.ClusterNetwork, routing: bytes, message: Any, thread: Any):
            count = DATA_HEADER.unpack_from(message)[1]
            header = message[DATA_HEADER.size : DATA_HEADER.size + count * ENTRY.size]
            kinds = _kinds(ENTRY.iter_unpack(header))
            if recorder.count_lines:
                if recorder.worker == 0 and recorder.stretch == WAITING:
                    recorder.stretch = RECV_TO_PASS
                elif recorder.worker == 1 and "B" in kinds:
                    recorder.stretch = RECORD_TO_ACK
                deliver(net, routing, message, thread)
                return
            start = clock()
            deliver(net, routing, message, thread)
            events.append(("recv", start, clock(), kinds))

        cluster.ClusterAllocator.release = traced_release  # type: ignore[method-assign]
        network.ClusterNetwork._deliver = traced_deliver  # type: ignore[method-assign]

    def tracer(self, frame: Any, event: str, arg: Any) -> Any:
        """``sys.settrace`` hook: count each interpreted line against the current stretch.

        Lines of this script (the hooks, the epoch loop) are not counted.
        """
        if event != "call" or frame.f_code.co_filename == __file__:
            return None
        return self._line

    def _line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines[self.stretch] += 1
            code = frame.f_code
            self.functions[self.stretch, f"{Path(code.co_filename).name}:{code.co_name}"] += 1
        return self._line


def main() -> None:
    config, params = parse(sys.argv, DEFAULTS)
    epochs, warmup, count_lines = params["epochs"], params["warmup"], bool(params["lines"])
    if config.processes != 2 or config.workers != 1:
        raise SystemExit("run as 2 processes of 1 worker (benchmarks/epoch_path.py does)")
    recorder = Recorder(count_lines)
    recorder.install()

    def program(worker: timelypy.Worker) -> dict[str, Any]:
        recorder.worker = worker.index
        handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
        received: list[int] = []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: 1)
                .inspect_batch(lambda t, data: received.extend(data))
                .probe_with(probe)
            )
        )
        sender = worker.index == 0
        clock = time.perf_counter_ns
        events = recorder.events
        for epoch in range(warmup + epochs):
            if epoch == warmup:
                recorder.events.clear()
                if count_lines:
                    sys.settrace(recorder.tracer)
            if sender:
                recorder.stretch = PASS_TO_SEND
                handle.send(epoch)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step_or_park(1.0)
                if sender and recorder.stretch == OFF:
                    # the step that sent the record's progress is over
                    recorder.stretch = WAITING
            if not count_lines and epoch >= warmup:
                now = clock()
                events.append(("passed", now, now, epoch))
            elif sender:
                recorder.stretch = OFF
        sys.settrace(None)
        expected = [] if sender else list(range(warmup + epochs))
        if received != expected:
            raise AssertionError(f"worker {worker.index} received {len(received)} records")
        result: dict[str, Any] = {"worker": worker.index, "epochs": epochs, "checked": True}
        if count_lines:
            result["lines"] = {k: v / epochs for k, v in recorder.lines.items()}
            result["functions"] = [
                [stretch, name, n / epochs] for (stretch, name), n in recorder.functions.items()
            ]
        else:
            result["events"] = recorder.events
        return result

    run_and_emit(config, program, Profiler("", config.process_index))


if __name__ == "__main__":
    main()
