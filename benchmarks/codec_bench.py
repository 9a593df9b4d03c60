"""Throughput of the wire codecs against plain msgpack, measured side by side.

    python benchmarks/codec_bench.py [--quick] [--repeat N] [--markdown]

For each batch shape, every candidate turns the batch into bytes and back
(encode + decode, in one process), timed interleaved with
``benchmarks._harness`` (garbage collector on; each timed call runs the round
trip enough times to last ~20 ms, ~5 ms with ``--quick``).  The limit is
``plain msgpack``: ``msgpack.unpackb(msgpack.packb((0, batch)),
use_list=False, strict_map_key=False)``, which loses types (lists, tuples and
Products all come back as tuples) but is the fastest plain round trip that
accepts every shape here.  ``plain (lists)`` is the default ``unpackb``,
where it works (tuple dict keys come back as unhashable lists).  The table
quotes records/s at the median time, the ratio of median times to the limit
(``> 1`` is slower) and the spread ``(max - min) / median``.  Every codec's
result is checked against the input first.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `timelypy` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fmt_rate, fmt_ratio, measure_interleaved, print_table
from timelypy.communication.codec import MsgpackCodec, PickleCodec
from timelypy.order import Product

LIMIT = "plain msgpack"


def make_batches(seed: int = 0) -> dict[str, list[Any]]:
    rng = random.Random(seed)
    words = [f"word{i}" for i in range(1000)]
    return {
        "4096 (str, int)": [(rng.choice(words), rng.randrange(1000)) for _ in range(4096)],
        "1024 (str, int)": [(rng.choice(words), rng.randrange(1000)) for _ in range(1024)],
        "4096 int": [rng.randrange(2**40) for _ in range(4096)],
        "1024 nested": [
            {
                ("key", i): [Product(i, j) for j in range(3)],
                "name": rng.choice(words),
                "score": rng.random(),
            }
            for i in range(1024)
        ],
    }


def round_trips(batch: list[Any]) -> dict[str, Callable[[], Any]]:
    """One encode + decode of ``batch`` per candidate; checks the codecs first."""
    msg, pkl = MsgpackCodec(), PickleCodec()
    packb, unpackb = msgpack.packb, msgpack.unpackb
    candidates: dict[str, Callable[[], Any]] = {
        LIMIT: lambda: unpackb(packb((0, batch)), use_list=False, strict_map_key=False),
        "plain (lists)": lambda: unpackb(packb((0, batch))),
        "MsgpackCodec": lambda: msg.decode_batch(msg.encode_batch(0, batch)),
        "PickleCodec": lambda: pkl.decode_batch(pkl.encode_batch(0, batch)),
    }
    try:
        candidates["plain (lists)"]()
    except (TypeError, ValueError):
        del candidates["plain (lists)"]
    for name in ("MsgpackCodec", "PickleCodec"):
        if candidates[name]() != (0, batch):
            raise AssertionError(f"{name} does not round-trip the batch")
    return candidates


def looped(fn: Callable[[], Any], seconds: float) -> tuple[Callable[[], None], int]:
    """Wrap ``fn`` to run enough times per call to take about ``seconds``."""
    start = time.perf_counter()
    fn()
    number = max(1, round(seconds / max(time.perf_counter() - start, 1e-7)))

    def run() -> None:
        for _ in range(number):
            fn()

    return run, number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 short rounds")
    parser.add_argument("--repeat", type=int, help="timed rounds per batch (default 9, quick 3)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 9)
    seconds = 0.005 if args.quick else 0.02

    rows = []
    for label, batch in make_batches().items():
        candidates = round_trips(batch)
        timed, numbers = {}, {}
        for name, fn in candidates.items():
            timed[name], numbers[name] = looped(fn, seconds)
        stats = measure_interleaved(timed, repeat=repeat)
        limit = stats[LIMIT].median / numbers[LIMIT]
        for name, s in stats.items():
            per_batch = s.median / numbers[name]
            rows.append(
                {
                    "batch": label,
                    "candidate": name,
                    "throughput": fmt_rate(len(batch) / per_batch),
                    "ratio": fmt_ratio(per_batch / limit),
                    "spread": f"{s.spread:.2f}",
                }
            )
    print(f"encode + decode, median of {repeat} interleaved rounds; ratio to {LIMIT!r}")
    columns = ["batch", "candidate", "throughput", "ratio", "spread"]
    print_table(rows, columns, markdown=args.markdown)


if __name__ == "__main__":
    main()
