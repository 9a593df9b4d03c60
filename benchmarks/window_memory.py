r"""Memory of a window step whose keys come and go: timelypy.flow against bytewax 0.21.1.

    python -m benchmarks.window_memory [--keys 100000 1000000] [--repeat N]
                                       [--no-bytewax] [--no-recovery]

A flow keyed by session id, the shape that grows without bound when a
stateful step keeps what it no longer needs: every event has a key of its
own (``"s0000001"`` ...), one value, and event ``i``'s time is ``T0 + i
ms``; ``fold_window`` sums it in a 100 ms tumbling window on an event clock
that waits 0 s and reads the machine's clock as its system time, so a
key's window closes about 100 ms after its value came (the watermark moves
with the system time). Every window closes and is emitted; nothing more
will ever come for any key. The events are made by the source as it goes
(one partition, batches of 1,000), so the input holds no memory of its own.

Each candidate runs in a fresh Python process per key count and round
(``--repeat`` rounds, default 3, interleaved), and reports the medians of:

- ``rss growth``: the process's resident memory after the run (its input
  ended, every window emitted, the flow's objects still alive) minus before
  the run (after imports and building the flow), in MB;
- ``peak``: the largest resident memory the process reached, in MB;
- ``store``: with recovery (timelypy only, on by default), the size of the
  recovery store's files after the run, in MB: SQLite keeps the pages a
  run freed for reuse, so this is the high-water mark of what the store
  held at once (noisy: it follows the commit backlog);
- ``live``: the store's pages in use after the run, in MB.

The goal (issue: windows and keyed state for long-running flows): growth
and store flat, within 10%, between 100,000 and 1,000,000 keys. Python does
not give every freed page back to the system, so the ratio to watch is
growth at 1M over growth at 100k; a step that kept each key's state would
show ~10x.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

T0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
BATCH = 1000


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def event_time(value: tuple[datetime.datetime, int]) -> datetime.datetime:
    """The event's time."""
    return value[0]


def zero() -> int:
    """The fold's builder."""
    return 0


def fold_sum(acc: int, value: tuple[datetime.datetime, int]) -> int:
    """Add the event's value."""
    return acc + value[1]


def _sources(api: str, keys: int) -> object:
    if api == "timelypy":
        from timelypy.flow.sources import FixedPartitionedSource, StatefulSourcePartition
    else:
        from bytewax.inputs import (  # type: ignore[import-not-found,no-redef]
            FixedPartitionedSource,
            StatefulSourcePartition,
        )

    class Part(StatefulSourcePartition):  # type: ignore[misc,valid-type]
        def __init__(self, start: int) -> None:
            self.i = start

        def next_batch(self) -> list[tuple[str, tuple[datetime.datetime, int]]]:
            i = self.i
            if i >= keys:
                raise StopIteration()
            end = min(i + BATCH, keys)
            self.i = end
            ms = datetime.timedelta(milliseconds=1)
            return [(f"s{j:07d}", (T0 + j * ms, 1)) for j in range(i, end)]

        def snapshot(self) -> int:
            return self.i

    class Sessions(FixedPartitionedSource):  # type: ignore[misc,valid-type]
        def list_parts(self) -> list[str]:
            return ["one"]

        def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Part:
            return Part(resume_state or 0)

    return Sessions()


def _child(api: str, keys: int, store: str | None) -> dict[str, float]:
    """Run one candidate in this process; return its figures."""
    emitted = [0]
    window = datetime.timedelta(milliseconds=100)
    if api == "timelypy":
        import timelypy.flow.operators as op
        from timelypy.flow.dataflow import Dataflow
        from timelypy.flow.operators import windowing as w
        from timelypy.flow.recovery import RecoveryConfig, init_db_dir
        from timelypy.flow.sinks import DynamicSink, StatelessSinkPartition
        from timelypy.flow.testing import run_main
    else:
        import bytewax.operators as op  # type: ignore[import-not-found,no-redef]
        from bytewax.dataflow import Dataflow  # type: ignore[import-not-found,no-redef]
        from bytewax.operators import windowing as w  # type: ignore[import-not-found,no-redef]
        from bytewax.outputs import (  # type: ignore[import-not-found,no-redef]
            DynamicSink,
            StatelessSinkPartition,
        )
        from bytewax.testing import run_main  # type: ignore[import-not-found,no-redef]

    class Count(StatelessSinkPartition):  # type: ignore[misc,valid-type]
        def write_batch(self, items: list[object]) -> None:
            emitted[0] += len(items)

    class Counter(DynamicSink):  # type: ignore[misc,valid-type]
        def build(self, *args: object) -> Count:
            return Count()

    flow = Dataflow("memory")
    events = op.input("in", flow, _sources(api, keys))
    clock = w.EventClock(event_time, datetime.timedelta(0))
    windower = w.TumblingWindower(window, T0)
    sums = w.fold_window("sum", events, clock, windower, zero, fold_sum, lambda a, b: a + b)
    op.output("out", sums.down, Counter())
    kwargs: dict[str, object] = {"epoch_interval": datetime.timedelta(milliseconds=200)}
    if store is not None:
        init_db_dir(store, 1)
        kwargs["recovery_config"] = RecoveryConfig(store)
    before = _rss_mb()
    run_main(flow, **kwargs)
    after = _rss_mb()
    if emitted[0] != keys:
        raise AssertionError(f"{api}: {emitted[0]} windows emitted for {keys} keys")
    size = live = 0.0
    if store:
        size = sum(p.stat().st_size for p in Path(store).iterdir()) / 1e6
        for path in Path(store).glob("*.sqlite3"):
            conn = sqlite3.connect(path)
            pages, free, page = (
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("page_count", "freelist_count", "page_size")
            )
            conn.close()
            live += (pages - free) * page / 1e6
    return {"growth": after - before, "peak": _peak_mb(), "store": size, "live": live}


def _run(api: str, keys: int, recovery: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store") if recovery else ""
        if store:
            Path(store).mkdir()
        result = subprocess.run(
            [sys.executable, "-m", "benchmarks.window_memory", "--child", api, str(keys), store],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parents[1],
        )
    if result.returncode != 0:
        raise SystemExit(f"{api} with {keys} keys failed:\n{result.stderr}")
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1] if __doc__ else None)
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-bytewax", action="store_true")
    parser.add_argument("--no-recovery", action="store_true", help="timelypy without a store")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        api, keys, store = args.child
        print(json.dumps(_child(api, int(keys), store or None)))
        return
    candidates = [("timelypy", not args.no_recovery)]
    if not args.no_bytewax:
        try:
            import bytewax  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            print("bytewax is not installed (pip install -e '.[bench]'): timelypy only")
        else:
            candidates.append(("bytewax", False))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for api, recovery in candidates:
            for keys in args.keys:
                runs.setdefault((api, keys), []).append(_run(api, keys, recovery))
    rows = {
        api: [
            {f: statistics.median(run[f] for run in runs[api, keys]) for f in runs[api, keys][0]}
            for keys in args.keys
        ]
        for api, _ in candidates
    }
    print(f"medians of {args.repeat} round(s); load: {os.getloadavg()[0]:.2f}")
    header = f"{'candidate':<10} {'keys':>9} {'rss growth MB':>14} {'peak MB':>8}"
    print(f"{header} {'store MB':>9} {'live MB':>8}")
    for api, figures in rows.items():
        for keys, f in zip(args.keys, figures, strict=True):
            if api == "timelypy" and not args.no_recovery:
                store = f"{f['store']:9.1f} {f['live']:8.2f}"
            else:
                store = f"{'-':>9} {'-':>8}"
            print(f"{api:<10} {keys:>9,} {f['growth']:>14.1f} {f['peak']:>8.1f} {store}")
    if len(args.keys) >= 2:
        print()
        for api, figures in rows.items():
            low, high = figures[0], figures[-1]
            growth = high["growth"] / low["growth"] if low["growth"] > 1 else float("nan")
            line = f"{api}: growth x{growth:.2f}, peak x{high['peak'] / low['peak']:.2f}"
            if api == "timelypy" and not args.no_recovery and low["store"]:
                line += f", store x{high['store'] / low['store']:.2f}"
            print(f"{line} from {args.keys[0]:,} to {args.keys[-1]:,} keys")


if __name__ == "__main__":
    main()
