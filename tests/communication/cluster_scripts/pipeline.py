"""Run pipelines described in JSON, one dataflow each; also a pure-Python model of them.

    python pipeline.py DESCRIPTIONS_JSON OUT_DIR TIMELY-ARGS

A description is ``{"input": [[v, ...], ...], "stages": [stage, ...]}``:
``input[e]`` holds the integer records of epoch ``e`` (record ``i`` of an
epoch is sent by worker ``i % peers``), and a stage is one of

* ``["map", NAME]``, ``["filter", NAME]``, ``["flat_map", NAME]`` -- a function
  from :data:`MAPS`, :data:`FILTERS` or :data:`FLAT_MAPS`;
* ``["exchange", NAME]`` -- route by a key from :data:`KEYS`;
* ``["concat", [stage, ...], [stage, ...]]`` -- apply both branches to the
  stream and concatenate what they produce;
* ``["loop", N, [stage, ...]]`` -- an iterative scope in which the body runs
  ``N`` times: round ``k + 1`` reads what round ``k`` produced, and every
  round's output leaves the loop.

:func:`build` makes the dataflow of a description, :func:`model` computes
its output with plain Python, and :func:`make_program` runs a list of
descriptions, returning ``[[dataflow, epoch, value], ...]`` per worker.  The
script writes ``OUT_DIR/process-P.json``: ``{"worker": [[dataflow, epoch, value], ...]}``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import timelypy

#: Record-to-record functions.
MAPS: dict[str, Callable[[int], int]] = {
    "add3": lambda x: x + 3,
    "mul2": lambda x: x * 2,
    "sub5": lambda x: x - 5,
    "mod11": lambda x: x % 11,
    "neg": lambda x: -x,
}
#: Predicates.
FILTERS: dict[str, Callable[[int], bool]] = {
    "keep_even": lambda x: x % 2 == 0,
    "keep_odd": lambda x: x % 2 == 1,
    "keep_small": lambda x: abs(x) < 40,
    "keep_pos": lambda x: x > 0,
}
#: Record-to-records functions.
FLAT_MAPS: dict[str, Callable[[int], list[int]]] = {
    "dup": lambda x: [x, x],
    "spread": lambda x: [x, x + 1],
    "drop_odd": lambda x: [] if x % 2 else [x],
    "upto3": lambda x: list(range(x % 3)),
}
#: Exchange keys.
KEYS: dict[str, Callable[[int], int]] = {
    "ident": lambda x: x,
    "mod3": lambda x: x % 3,
    "hashed": lambda x: timelypy.stable_hash(str(x)),
    "zero": lambda x: 0,
}

Stage = list[Any]


def apply(stream: timelypy.Stream, stages: Iterable[Stage]) -> timelypy.Stream:
    """``stream`` through ``stages``."""
    for stage in stages:
        kind = stage[0]
        if kind == "map":
            stream = stream.map(MAPS[stage[1]])
        elif kind == "filter":
            stream = stream.filter(FILTERS[stage[1]])
        elif kind == "flat_map":
            stream = stream.flat_map(FLAT_MAPS[stage[1]])
        elif kind == "exchange":
            stream = stream.exchange(KEYS[stage[1]])
        elif kind == "concat":
            stream = apply(stream, stage[1]).concat(apply(stream, stage[2]))
        elif kind == "loop":
            stream = _loop(stream, stage[1], stage[2])
        else:
            raise ValueError(f"unknown stage {stage!r}")
    return stream


def _loop(stream: timelypy.Stream, rounds: int, body: list[Stage]) -> timelypy.Stream:
    def build(inner: timelypy.Scope) -> timelypy.Stream:
        handle, cycle = inner.feedback(1)
        output = apply(stream.enter(inner).concat(cycle), body)
        _stop, again = output.branch(lambda time, _x: time.inner + 1 < rounds)
        again.connect_loop(handle)
        return output.leave()

    return stream.scope.iterative(build)


def model_stages(records: list[int], stages: Iterable[Stage]) -> list[int]:
    """What ``stages`` make of ``records`` (one epoch), computed with plain Python."""
    for stage in stages:
        kind = stage[0]
        if kind == "map":
            records = [MAPS[stage[1]](x) for x in records]
        elif kind == "filter":
            records = [x for x in records if FILTERS[stage[1]](x)]
        elif kind == "flat_map":
            records = [y for x in records for y in FLAT_MAPS[stage[1]](x)]
        elif kind == "exchange":
            pass
        elif kind == "concat":
            records = model_stages(records, stage[1]) + model_stages(records, stage[2])
        elif kind == "loop":
            out: list[int] = []
            current = records
            for _round in range(stage[1]):
                current = model_stages(current, stage[2])
                out.extend(current)
            records = out
        else:
            raise ValueError(f"unknown stage {stage!r}")
    return records


def model(description: dict[str, Any]) -> Counter[tuple[int, int]]:
    """The multiset of ``(epoch, value)`` a description's dataflow outputs."""
    return Counter(
        (epoch, value)
        for epoch, records in enumerate(description["input"])
        for value in model_stages(list(records), description["stages"])
    )


def make_program(
    descriptions: list[dict[str, Any]],
) -> Callable[[timelypy.Worker], list[list[int]]]:
    """The worker function running every description as its own dataflow."""

    def program(worker: timelypy.Worker) -> list[list[int]]:
        results: list[list[int]] = []
        handles = []
        for number, description in enumerate(descriptions):
            handle = timelypy.InputHandle()

            def build(
                scope: timelypy.Scope,
                number: int = number,
                handle: Any = handle,
                stages: list[Stage] = description["stages"],
            ) -> None:
                apply(scope.input_from(handle), stages).inspect_time(
                    lambda time, value: results.append([number, time, value])
                )

            worker.dataflow(build)
            handles.append((handle, description["input"]))
        for handle, epochs in handles:
            for epoch, records in enumerate(epochs):
                for value in records[worker.index :: worker.peers]:
                    handle.send(value)
                handle.advance_to(epoch + 1)
            handle.close()
        return results

    return program


def main(argv: list[str]) -> None:
    """Run the descriptions named in ``argv``; write this process's results."""
    config, free = timelypy.Config.from_args(argv)
    descriptions = json.loads(Path(free[0]).read_text())
    results = timelypy.execute_from_args(argv, make_program(descriptions))
    first = config.process_index * config.workers
    data = {str(first + i): result for i, result in enumerate(results)}
    Path(free[1], f"process-{config.process_index}.json").write_text(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv)
