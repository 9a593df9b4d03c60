"""Epoch round trip: one record per epoch crosses from worker 0 to worker 1.

    python -m timelypy.launch -n 2 -w 1 benchmarks/cluster_scripts/epochs.py [epochs=N] [wait=spin]

Per epoch ``e``, worker 0 sends the record ``e``, which an exchange keyed
``lambda x: 1`` moves to worker 1; both workers ``advance_to(e + 1)`` and
step until their probe (after the exchange) has passed ``e + 1``.  So every
epoch needs each worker to hear the other's progress (and worker 1 the
record): at least one message each way.  ``wait`` chooses how a worker waits
for its probe:

- ``spin``: ``while probe.less_than(t): worker.step()`` (the examples' loop;
  every step polls the network without blocking);
- ``park``: ``worker.step_or_park(1.0)`` instead, which blocks in the
  network poll when no operator has work (no busy CPU while waiting).

``warmup`` epochs run first, then the clock runs over ``epochs`` epochs.
Checked: worker 1 received exactly one record per epoch, at its epoch.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Profiler, Timer, parse, run_and_emit

import timelypy

DEFAULTS = {"epochs": 5000, "warmup": 500, "wait": "spin", "profile": ""}


def timed_epochs(
    worker: timelypy.Worker,
    handle: timelypy.InputHandle,
    probe: timelypy.ProbeHandle,
    first: int,
    count: int,
    park: bool,
) -> Timer:
    """Run epochs ``first .. first + count - 1``, timed."""
    sender = worker.index == 0
    less_than = probe.less_than
    with Timer() as timer:
        _epochs(worker, handle, less_than, sender, first, count, park)
    return timer


def _epochs(
    worker: timelypy.Worker,
    handle: timelypy.InputHandle,
    less_than,
    sender: bool,
    first: int,
    count: int,
    park: bool,
) -> None:
    if park:
        step = worker.step_or_park
        for epoch in range(first, first + count):
            if sender:
                handle.send(epoch)
            handle.advance_to(epoch + 1)
            while less_than(epoch + 1):
                step(1.0)
    else:
        step = worker.step
        for epoch in range(first, first + count):
            if sender:
                handle.send(epoch)
            handle.advance_to(epoch + 1)
            while less_than(epoch + 1):
                step()


def main() -> None:
    config, params = parse(sys.argv, DEFAULTS)
    epochs, warmup, wait = params["epochs"], params["warmup"], params["wait"]
    if wait not in ("spin", "park"):
        raise SystemExit(f"wait must be spin or park, got {wait!r}")
    profiler = Profiler(params["profile"], config.process_index)

    def program(worker: timelypy.Worker) -> dict:
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        received: list[tuple[int, list]] = []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: 1 % worker.peers)
                .inspect_batch(lambda t, data: received.append((t, data)))
                .probe_with(probe)
            )
        )
        park = wait == "park"
        timed_epochs(worker, handle, probe, 0, warmup, park)  # also synchronises the start
        gc.collect()
        with profiler.timed():
            timer = timed_epochs(worker, handle, probe, warmup, epochs, park)
        expected = (
            [(e, [e]) for e in range(warmup + epochs)] if worker.index == 1 % worker.peers else []
        )
        if received != expected:
            raise AssertionError(
                f"worker {worker.index} received {len(received)} batches, expected "
                f"{len(expected)} (one record per epoch, at its epoch)"
            )
        return {
            "worker": worker.index,
            **timer.as_dict(),
            "epochs": epochs,
            "wait": wait,
            "checked": True,
        }

    run_and_emit(config, program, profiler)


if __name__ == "__main__":
    main()
