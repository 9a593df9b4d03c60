"""Recovery: start a flow, kill it with SIGKILL mid-stream, resume it from its store.

    python examples/flow_recovery.py                 # the whole demo, in a temporary directory
    python examples/flow_recovery.py run STORE OUT   # one execution (what the demo starts)

A shop's purchases arrive one epoch (a "minute") at a time; the flow keeps
a running total per customer with ``stateful_map`` and writes, for every
epoch, each customer's total to ``OUT/epoch-NNNN/CUSTOMER``.  That output
is *idempotent per epoch*: redoing an epoch rewrites the same files with
the same totals, so a resumed execution that redoes the epochs the killed
one had not committed leaves exactly what a run without the failure leaves.

The demo

1. starts ``run STORE OUT`` in a child process (two worker threads, a
   recovery store in ``STORE``), waits until the store says some epochs are
   committed, and kills the child with SIGKILL: no clean-up runs;
2. runs the same flow again in this process: the new execution resumes
   from the store's resume epoch, reloads every customer's total as of
   that epoch, and reads the input from there;
3. compares the output directory with the totals computed in plain Python.

It prints, for example::

    execution 1 killed (SIGKILL) with epochs before 5 committed
    execution 2 resumed from epoch 5 and completed
    totals after epoch 19: ana 720, ben 840, cy 920, dee 840
    the output equals a run without the failure: True
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from timelypy.errors import RecoveryError
from timelypy.flow import Dataflow, ManualOutputConfig, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig
from timelypy.recovery import RecoveryConfig, RecoveryStore

CUSTOMERS = ["ana", "ben", "cy", "dee"]
EPOCHS = 20
#: Seconds each epoch of input takes to arrive (so the demo can kill it mid-stream).
EPOCH_SECONDS = 0.1


def purchases(epoch: int) -> list[tuple[str, int]]:
    """The purchases of one epoch: the same on every run (the input can be re-read)."""
    return [(CUSTOMERS[(epoch * 7 + i) % 4], (epoch * 31 + i * 17) % 40 + 1) for i in range(8)]


def input_builder(worker_index: int, worker_count: int, resume_epoch: int) -> Iterator[object]:
    """Worker 0 reads the purchases, from the resume epoch on."""
    if worker_index != 0:
        return
    for epoch in range(resume_epoch, EPOCHS):
        yield AdvanceTo(epoch)
        for purchase in purchases(epoch):
            yield Emit(purchase)
        time.sleep(EPOCH_SECONDS)


def add_up(total: int, amount: int) -> tuple[int, tuple[int, int]]:
    """The running total: keep ``total + amount``, emit it with the amount."""
    total += amount
    return total, (amount, total)


def make_flow(out: Path) -> Dataflow:
    """Running totals per customer, written as one file per customer and epoch."""

    def output_builder(worker_index: int, worker_count: int):  # type: ignore[no-untyped-def]
        def write(epoch: int, item: tuple[str, tuple[int, int]]) -> None:
            customer, (_amount, total) = item
            folder = out / f"epoch-{epoch:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            # several purchases of one customer in one epoch: the largest total is the last
            path = folder / customer
            if not path.exists() or int(path.read_text()) < total:
                path.write_text(str(total))

        return write

    flow = Dataflow()
    flow.input("purchases", ManualInputConfig(input_builder))
    flow.stateful_map("totals", lambda customer: 0, add_up)
    flow.capture(ManualOutputConfig(output_builder))
    return flow


def execute(store: Path, out: Path) -> None:
    """One execution against ``store``: resumes wherever the last one stopped."""
    run_cluster(make_flow(out), None, 1, 2, recovery_config=RecoveryConfig(store))


def expected() -> dict[int, dict[str, int]]:
    """What the output directory holds after a run without failures (plain Python)."""
    totals = dict.fromkeys(CUSTOMERS, 0)
    result: dict[int, dict[str, int]] = {}
    for epoch in range(EPOCHS):
        for customer, amount in purchases(epoch):
            totals[customer] += amount
            result.setdefault(epoch, {})[customer] = totals[customer]
    return result


def written(out: Path) -> dict[int, dict[str, int]]:
    """What the output directory holds."""
    return {
        int(folder.name.split("-")[1]): {f.name: int(f.read_text()) for f in folder.iterdir()}
        for folder in sorted(out.glob("epoch-*"))
    }


def _resume_epoch(store: Path) -> int:
    """The store's resume epoch, or -1 while the child is still creating the store."""
    try:
        return RecoveryStore(store).resume_epoch()
    except RecoveryError:
        return -1


def demo(root: Path) -> bool:
    """Start, kill, resume; return whether the output is the failure-free one."""
    store, out = root / "store", root / "out"
    child = subprocess.Popen([sys.executable, __file__, "run", str(store), str(out)])
    try:
        # Wait until the child's workers have committed a few epochs, then kill it.
        while True:
            if child.poll() is not None:
                raise SystemExit(f"the first execution ended by itself ({child.returncode})")
            if _resume_epoch(store) >= 5:
                break
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    resume = RecoveryStore(store).resume_epoch()
    print(f"execution 1 killed (SIGKILL) with epochs before {resume} committed")
    execute(store, out)
    last = RecoveryStore(store).executions()[-1]
    print(f"execution {last.ex_num} resumed from epoch {last.resume_epoch} and completed")
    final = written(out)[EPOCHS - 1]
    shown = ", ".join(f"{name} {final[name]}" for name in sorted(final))
    print(f"totals after epoch {EPOCHS - 1}: {shown}")
    same = written(out) == expected()
    print(f"the output equals a run without the failure: {same}")
    return same


def main(argv: list[str]) -> int:
    """``run STORE OUT`` runs one execution; no arguments runs the demo."""
    if argv[:1] == ["run"] and len(argv) == 3:
        execute(Path(argv[1]), Path(argv[2]))
        return 0
    if argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as root:
        return 0 if demo(Path(root)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
