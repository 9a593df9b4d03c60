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

Two candidates measure formats that might beat plain msgpack while keeping
types exact (an issue asked for them before the codec changes):

- ``packed columns``: a batch of exact tuples of one arity travels as
  columns, a column of ``str`` (none holding NUL) as one UTF-8 string
  joined by NUL and split on arrival, a column of ``int`` (64-bit) as an
  ``array('q')``'s bytes, any other column through ``MsgpackCodec``;
  rows are rebuilt with ``zip``.  Exact for the shapes it takes; it runs
  only on batches of tuples.
- ``msgspec typed``: ``msgspec.msgpack`` encoding ``(0, batch)`` and
  decoding it as ``tuple[Any, list[tuple]]`` (records come back as
  tuples; nested tuples would come back as lists, so it runs only where the
  result equals the input with exact types).  Only when ``msgspec`` is
  installed; it is not a dependency of timelypy.  ``msgspec typed,
  checked`` adds what would make it exact for any batch of tuples: a
  C-level check that every record is a ``tuple`` and every field a ``str``,
  ``int``, ``float``, ``bool``, ``bytes`` or ``None`` (msgspec writes
  lists, tuples, sets, buffers and subclasses alike, so a codec built on
  it must check first).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from array import array
from collections.abc import Callable
from itertools import chain
from operator import itemgetter
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


_SEP = "\x00"


def packed_encode(time: int, batch: list[Any], codec: MsgpackCodec) -> bytes:
    """``(time, batch)`` of exact tuples of one arity as packed columns (see the module doc)."""
    n = len(batch)
    parts: list[bytes] = []
    spec: list[tuple[str, int]] = []
    for i in range(len(batch[0])):
        column = list(map(itemgetter(i), batch))
        types = list(map(type, column))
        if types.count(str) == n:
            joined = _SEP.join(column)
            if joined.count(_SEP) == n - 1:  # no value holds the separator
                part = joined.encode()
                spec.append(("s", len(part)))
                parts.append(part)
                continue
        if types.count(int) == n:
            try:
                part = array("q", column).tobytes()
            except OverflowError:
                pass
            else:
                spec.append(("q", len(part)))
                parts.append(part)
                continue
        part = codec.encode(column)
        spec.append(("m", len(part)))
        parts.append(part)
    head: bytes = msgpack.packb([time, n, spec])
    return len(head).to_bytes(4, "little") + head + b"".join(parts)


def packed_decode(data: bytes, codec: MsgpackCodec) -> tuple[int, list[Any]]:
    """The ``(time, batch)`` of :func:`packed_encode`."""
    view = memoryview(data)
    size = int.from_bytes(view[:4], "little")
    time, _, spec = msgpack.unpackb(view[4 : 4 + size])
    at = 4 + size
    columns: list[list[Any]] = []
    for kind, length in spec:
        chunk = view[at : at + length]
        at += length
        if kind == "s":
            columns.append(str(chunk, "utf-8").split(_SEP))
        elif kind == "q":
            ints = array("q")
            ints.frombytes(chunk)
            columns.append(ints.tolist())
        else:
            columns.append(codec.decode(chunk))
    return time, list(zip(*columns, strict=True))


#: Field types msgspec gives back exactly as sent (ints within 64 bits).
_MSGSPEC_EXACT = frozenset({str, int, float, bool, bytes, type(None)})


def _tuples_of_one_arity(batch: list[Any]) -> bool:
    return (
        bool(batch)
        and all(type(record) is tuple for record in batch)
        and len({len(record) for record in batch}) == 1
    )


def _exact(value: Any, expected: Any) -> bool:
    """``value == expected`` with the same types all the way down (lists, tuples, dicts)."""
    if type(value) is not type(expected):
        return False
    if isinstance(value, (list, tuple)):
        return len(value) == len(expected) and all(map(_exact, value, expected))
    if isinstance(value, dict):
        return value.keys() == expected.keys() and all(_exact(value[k], expected[k]) for k in value)
    return bool(value == expected)


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
    if _tuples_of_one_arity(batch):
        candidates["packed columns"] = lambda: packed_decode(packed_encode(0, batch, msg), msg)
        if not _exact(candidates["packed columns"](), (0, batch)):
            raise AssertionError("packed columns do not round-trip the batch exactly")
    if importlib.util.find_spec("msgspec") is not None:
        import msgspec  # type: ignore[import-not-found,unused-ignore]

        encoder = msgspec.msgpack.Encoder()
        decoder = msgspec.msgpack.Decoder(tuple[Any, list[tuple]])  # type: ignore[type-arg]
        candidates["msgspec typed"] = lambda: decoder.decode(encoder.encode((0, batch)))
        try:
            exact = _exact(candidates["msgspec typed"](), (0, batch))
        except (TypeError, ValueError, msgspec.DecodeError):
            exact = False
        if not exact:
            del candidates["msgspec typed"]  # (types would not come back as sent)
        elif _tuples_of_one_arity(batch):
            # What makes msgspec exact for any batch, timed with it: the checks
            # that no field is a container, a buffer or a subclass (msgspec writes
            # lists, tuples, sets, bytearrays and str subclasses alike).
            n = len(batch)

            def checked() -> Any:
                if list(map(type, batch)).count(tuple) != n:
                    raise AssertionError("not a batch of tuples")
                if not set(map(type, chain.from_iterable(batch))) <= _MSGSPEC_EXACT:
                    raise AssertionError("a field msgspec would not give back as sent")
                return decoder.decode(encoder.encode((0, batch)))

            candidates["msgspec typed, checked"] = checked
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
