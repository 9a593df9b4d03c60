"""Worker 0 drives epochs of records that are exchanged to every worker of the cluster.

    python epochs.py [epochs=N | gate=PATH] [fail=P:E] [busy=P:S] [exit=P:C] [out=DIR] [log]
                     TIMELY-ARGS

At every epoch worker 0 sends the values ``0 .. RECORDS_PER_EPOCH - 1``, routed
to worker ``value % peers``, and waits (on a probe) until the epoch is complete
on every worker before it starts the next; the other workers send nothing.

* ``epochs=N`` -- run ``N`` epochs, then complete;
* ``gate=PATH`` -- run epochs until the file ``PATH`` exists (at most
  :data:`GATE_SECONDS`), then one more, then complete;
* neither -- run forever (until killed, interrupted, or a peer fails);
* ``fail=P:E`` -- the first worker of process ``P`` raises
  ``RuntimeError("boom: ...")`` when it receives the records of epoch ``E``;
* ``busy=P:S`` -- the first worker of process ``P`` spends ``S`` seconds in its
  user function when it receives the records of epoch 1 (printing ``worker W
  busy`` before and ``worker W done being busy`` after), so nothing pumps that
  process's network meanwhile if it has one worker;
* ``exit=P:C`` -- once the computation is complete, process ``P`` exits with code ``C``;
* ``out=DIR`` -- each process writes ``DIR/process-P.json``:
  ``{"worker": [[epoch, value], ...]}`` for each of its workers;
* ``log`` -- configure logging to stderr at WARNING, to show the cluster's warnings.

Prints (flushed) ``worker W saw epoch E`` for a few epochs on every worker,
``epochs N`` on process 0 when worker 0 stops sending, and
``worker W raising at epoch E`` just before a ``fail=`` worker raises, and
``process P finished`` when the computation completed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

import timelypy

#: Values worker 0 sends at every epoch.
RECORDS_PER_EPOCH = 8
#: Longest a gated run waits for its gate file.
GATE_SECONDS = 60.0
#: Pause between epochs of an open-ended run, so that it does not saturate the CPUs.
PACE_SECONDS = 0.01


def _options(free: list[str]) -> dict[str, str]:
    """``key=value`` words (a bare ``key`` means ``key=1``)."""
    return dict(word.split("=", 1) if "=" in word else (word, "1") for word in free)


def _pair(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    first, second = text.split(":")
    return int(first), int(second)


def make_program(options: dict[str, str]) -> Callable[[timelypy.Worker], list[list[int]]]:
    """The worker function for ``options`` (see the module documentation)."""
    fixed_epochs = int(options["epochs"]) if "epochs" in options else None
    gate_path = options.get("gate")
    fail = _pair(options.get("fail"))
    busy = _pair(options.get("busy"))

    def program(worker: timelypy.Worker) -> list[list[int]]:
        index = worker.index
        workers = worker.config.workers
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        received: list[list[int]] = []
        announced: set[int] = set()
        slept: list[bool] = []

        def receive(epoch: int, value: int) -> None:
            received.append([epoch, value])
            if epoch not in announced and (epoch < 3 or epoch % 20 == 0):
                announced.add(epoch)
                print(f"worker {index} saw epoch {epoch}", flush=True)
            if busy is not None and index == busy[0] * workers and epoch == 1 and not slept:
                slept.append(True)
                print(f"worker {index} busy", flush=True)
                time.sleep(busy[1])  # a user function that takes long: nothing is pumped
                print(f"worker {index} done being busy", flush=True)
            if fail is not None and index == fail[0] * workers and epoch == fail[1]:
                print(f"worker {index} raising at epoch {epoch}", flush=True)
                raise RuntimeError(f"boom: worker {index} refuses epoch {epoch}")

        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda value: value)
                .inspect_time(receive)
                .probe_with(probe)
            )
        )
        if index != 0:
            return received  # only worker 0 sends; the others just follow
        epochs, gate = fixed_epochs, gate_path
        deadline = time.monotonic() + GATE_SECONDS
        for epoch in count():
            if epochs is not None and epoch >= epochs:
                break
            if gate is not None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gate file {gate} did not appear in {GATE_SECONDS} s")
                if os.path.exists(gate) and epoch > 0:
                    gate = None
                    epochs = epoch + 1  # one more epoch after the gate opened
            for value in range(RECORDS_PER_EPOCH):
                handle.send(value)
            handle.advance_to(epoch + 1)
            while probe.less_than(handle.time):
                worker.step_or_park(0.05)
            if epochs is None:
                time.sleep(PACE_SECONDS)  # pacing of an open-ended run, not a wait
        print(f"epochs {epochs}", flush=True)
        return received

    return program


def main(argv: list[str]) -> None:
    """Run the program configured by ``argv``."""
    config, free = timelypy.Config.from_args(argv)
    options = _options(free)
    if "log" in options:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    results = timelypy.execute_from_args(argv, make_program(options))
    process = config.process_index
    if "out" in options:
        first = process * config.workers
        data = {str(first + i): result for i, result in enumerate(results)}
        Path(options["out"], f"process-{process}.json").write_text(json.dumps(data))
    print(f"process {process} finished", flush=True)
    exit_code = _pair(options.get("exit"))
    if exit_code is not None and exit_code[0] == process:
        sys.exit(exit_code[1])


if __name__ == "__main__":
    main(sys.argv)
