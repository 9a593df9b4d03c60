"""A two-process flow with recovery, for the kill-point and reliability tests (issue 39).

Run by hand, one process each: ``python reliability_job.py OUT STORE EPOCHS
-n 2 -p I -h HOSTFILE`` with ``TIMELYPY_SECRET`` set.  Every key ``k{i}``
(``KEYS`` of them) gets the value ``epoch + 1`` in every epoch; the stateful
step keeps each key's running total and the capture writes ``(epoch, (key,
total))`` lines to ``OUT/out-PID-WORKER``.  A resumed run's totals must
equal an uninterrupted run's.

Markers, so that a test can act at a precise moment (each file holds the
process id):

* ``OUT/handshake-P``: process P's handshake with its peers just ended;
* ``OUT/final-commit-P``: process P's worker began its last commit (its
  input ended);
* ``OUT/pid-P``: process P's worker is reading its input.

Knobs (environment):

* ``JOB_SLOW_FINAL_COMMIT=P:SECONDS`` -- process P's last commit takes
  SECONDS longer (a slow disk, or a large state), before it writes;
* ``JOB_STEP=NAME`` -- the stateful step's ID (default ``sum``);
* ``JOB_EXTRA_STEP=1`` -- this process's flow has one more step;
* ``JOB_RECONNECT=SECONDS`` -- how long this process waits before retrying
  a connection to a peer that was not listening yet;
* ``JOB_EPOCH_SLEEP=SECONDS`` -- a pause after each epoch (default 0.02);
* ``JOB_ALLOW_DROP=1`` -- allow dropping stored state no step claims.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import zmq

from timelypy.communication import network as network_module
from timelypy.communication.config import Config
from timelypy.flow import Dataflow, ManualOutputConfig
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.flow.run import cluster_main
from timelypy.recovery import RecoveryConfig
from timelypy.recovery.store import SnapshotWriter

KEYS = int(os.environ.get("JOB_KEYS", "20"))


def _mark(out: Path, name: str) -> None:
    (out / name).write_text(str(os.getpid()))


def main() -> None:
    """Run this process's part of the job."""
    out, store, epochs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    config, _ = Config.from_args(["job", *sys.argv[4:]])
    process = config.process_index
    epoch_sleep = float(os.environ.get("JOB_EPOCH_SLEEP", "0.02"))

    reconnect = os.environ.get("JOB_RECONNECT")
    if reconnect:
        dealer = network_module.ClusterNetwork._dealer

        def slow_dealer(self: network_module.ClusterNetwork, role: bytes) -> zmq.Socket[bytes]:
            sock = dealer(self, role)
            sock.setsockopt(zmq.RECONNECT_IVL, int(float(reconnect) * 1000))
            return sock

        network_module.ClusterNetwork._dealer = slow_dealer  # type: ignore[method-assign]

    handshake = network_module.ClusterNetwork.handshake

    def marked_handshake(self: network_module.ClusterNetwork) -> None:
        handshake(self)
        _mark(out, f"handshake-{process}")

    network_module.ClusterNetwork.handshake = marked_handshake  # type: ignore[method-assign]

    slow = os.environ.get("JOB_SLOW_FINAL_COMMIT", "")
    delay = float(slow.split(":")[1]) if slow and int(slow.split(":")[0]) == process else 0.0
    commit = SnapshotWriter.commit

    def marked_commit(self: SnapshotWriter, frontier: int, done: bool = False) -> None:
        if done:
            _mark(out, f"final-commit-{process}")
            if delay:
                time.sleep(delay)
        commit(self, frontier, done)

    SnapshotWriter.commit = marked_commit  # type: ignore[method-assign]

    def input_builder(worker_index: int, worker_count: int, resume_epoch: int):  # type: ignore[no-untyped-def]
        _mark(out, f"pid-{process}")
        for epoch in range(resume_epoch, epochs):
            yield AdvanceTo(epoch)
            for i in range(worker_index, KEYS, worker_count):
                yield Emit((f"k{i}", epoch + 1))
            time.sleep(epoch_sleep)

    def output_builder(worker_index: int, worker_count: int):  # type: ignore[no-untyped-def]
        path = out / f"out-{os.getpid()}-{worker_index}"

        def write(epoch: int, item: object) -> None:
            with open(path, "a") as f:
                f.write(repr((epoch, item)) + "\n")

        return write

    flow = Dataflow()
    flow.input("inp", ManualInputConfig(input_builder))
    if os.environ.get("JOB_EXTRA_STEP") == "1":
        flow.map(lambda item: item)
    flow.stateful_map(os.environ.get("JOB_STEP", "sum"), lambda key: 0, lambda s, v: (s + v, s + v))
    flow.capture(ManualOutputConfig(output_builder))
    allow = {"allow_non_restored_state": True} if os.environ.get("JOB_ALLOW_DROP") == "1" else {}
    recovery = RecoveryConfig(store, commit_interval=0.02, **allow)
    cluster_main(
        flow,
        None,
        list(config.addresses),
        process,
        config.workers,
        recovery_config=recovery,
    )


if __name__ == "__main__":
    main()
