"""Word count per epoch over a few epochs of deterministic lines.

    python wordcount.py OUT_DIR [EPOCHS] TIMELY-ARGS

Lines -> ``flat_map`` split into words -> ``(word, 1)`` exchanged by
:func:`timelypy.stable_hash` of the word -> a ``unary_notify`` operator that
counts each word per epoch and sends ``(word, count)`` when the epoch is
complete.  Line ``i`` of an epoch is sent by worker ``i % peers``, so the
input is the same whatever the number of workers.  Each process writes
``OUT_DIR/process-P.json``: ``{"worker": [[epoch, word, count], ...]}``.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import timelypy
from timelypy.dataflow import Exchange, Notificator, OperatorInput, OperatorOutput

#: Words of the lines (two of them not ASCII, to exercise UTF-8 hashing).
VOCABULARY = (
    "apple",
    "banana",
    "cherry",
    "date",
    "elder",
    "fig",
    "grape",
    "naïve",
    "日本",
    "kiwi",
)
#: Default number of epochs.
EPOCHS = 4
#: Lines per epoch.
LINES_PER_EPOCH = 25


def lines_of(epoch: int) -> list[str]:
    """The input lines of ``epoch`` (the same in every process and run)."""
    rng = random.Random(epoch)
    return [
        " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0, 6)))
        for _ in range(LINES_PER_EPOCH)
    ]


def count_words(stream: timelypy.Stream) -> timelypy.Stream:
    """``(word, 1)`` pairs to one ``(word, count)`` per word and complete epoch."""
    counts_by_time: dict[Any, dict[str, int]] = {}

    def logic(inp: OperatorInput, out: OperatorOutput, notificator: Notificator) -> None:
        for cap, data in inp:
            counts = counts_by_time.get(cap.time)
            if counts is None:
                counts = counts_by_time[cap.time] = {}
                notificator.notify_at(cap.retain())
            for word, diff in data:
                counts[word] = counts.get(word, 0) + diff
        for cap, _count in notificator:
            out.session(cap).give_batch(sorted(counts_by_time.pop(cap.time).items()))

    return stream.unary_notify(
        Exchange(lambda pair: timelypy.stable_hash(pair[0])), "CountWords", [], logic
    )


def make_program(epochs: int) -> Callable[[timelypy.Worker], list[list[Any]]]:
    """The worker function: counts of ``epochs`` epochs, as ``[epoch, word, count]``."""

    def program(worker: timelypy.Worker) -> list[list[Any]]:
        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        results: list[list[Any]] = []
        worker.dataflow(
            lambda scope: (
                count_words(
                    scope.input_from(handle).flat_map(lambda line: [(w, 1) for w in line.split()])
                )
                .inspect_time(lambda time, pair: results.append([time, pair[0], pair[1]]))
                .probe_with(probe)
            )
        )
        for epoch in range(epochs):
            lines = lines_of(epoch)
            for line in lines[worker.index :: worker.peers]:
                handle.send(line)
            handle.advance_to(epoch + 1)
            while probe.less_than(handle.time):
                worker.step_or_park(0.05)
        return results

    return program


def main(argv: list[str]) -> None:
    """Run on the configuration in ``argv``; write this process's results."""
    config, free = timelypy.Config.from_args(argv)
    out = Path(free[0])
    epochs = int(free[1]) if len(free) > 1 else EPOCHS
    results = timelypy.execute_from_args(argv, make_program(epochs))
    first = config.process_index * config.workers
    data = {str(first + i): result for i, result in enumerate(results)}
    (out / f"process-{config.process_index}.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv)
