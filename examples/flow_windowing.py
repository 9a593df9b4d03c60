"""Windowing: two clocks and two windowers in one flow.

    python examples/flow_windowing.py          # one worker
    python examples/flow_windowing.py -w 3     # three worker threads: the same output

Three temperature sensors report ``(sensor, (time, celsius))`` readings,
slightly out of order (the network reorders them by up to 20 seconds).
The flow

1. averages each sensor's readings per minute: ``fold_window`` with an
   event clock that waits 30 s for stragglers and 1-minute tumbling
   windows, folding ``(sum, count)``;
2. turns each minute into ``(sensor, (minute, average))``;
3. keeps, per sensor, the warmest minute of every 5 minutes:
   ``reduce_window`` with a second event clock (on the minute's start)
   and 5-minute tumbling windows.

One reading arrives far too late (more than the 30 s wait behind its
sensor's newest reading): it is not averaged in, and the step's ``late``
output reports it. It prints::

    late: sensor-b 12:01:21 (arrived after 12:02:21)
    12:00-12:05 sensor-a warmest minute 12:02 19.85 C
    12:00-12:05 sensor-b warmest minute 12:01 20.74 C
    ...
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from timelypy.flow import Dataflow, run_cluster
from timelypy.flow.window import EventClockConfig, TumblingWindowConfig, WindowMetadata

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SENSORS = ["sensor-a", "sensor-b", "sensor-c"]


def readings() -> list[tuple[str, tuple[datetime, float]]]:
    """Ten minutes of readings every 10 s per sensor, reordered by up to 20 s; one straggler."""
    out = []
    for n, sensor in enumerate(SENSORS):
        for step in range(60):
            at = START + timedelta(seconds=10 * step + n)
            celsius = round(18 + n + 3 * ((step * 7 + n * 5) % 11) / 10, 1)
            out.append((sensor, (at, celsius)))
    # the network swaps neighbours: readings arrive up to 20 s out of order
    for i in range(0, len(out) - 2, 3):
        out[i], out[i + 2] = out[i + 2], out[i]

    # ... and one reading of sensor-b from 12:01:21 arrives a minute late
    def of_b(seconds: int) -> int:
        at = START + timedelta(seconds=seconds)
        return next(i for i, r in enumerate(out) if r[0] == "sensor-b" and r[1][0] >= at)

    straggler = out.pop(of_b(71))
    out.insert(of_b(125) + 1, straggler)
    return out


def reading_time(reading: tuple[datetime, float]) -> datetime:
    """When a reading was taken."""
    return reading[0]


def add_reading(acc: tuple[float, int], reading: tuple[datetime, float]) -> tuple[float, int]:
    """Fold a reading into ``(sum, count)``."""
    return acc[0] + reading[1], acc[1] + 1


def zero() -> tuple[float, int]:
    """A minute with no readings yet."""
    return 0.0, 0


def minute_average(item: Any) -> tuple[str, tuple[datetime, float]]:
    """``(sensor, (WindowMetadata, (sum, count)))`` -> ``(sensor, (minute, average))``."""
    sensor, (meta, (total, count)) = item
    return sensor, (meta.open_time, round(total / count, 2))


def warmer(a: tuple[datetime, float], b: tuple[datetime, float]) -> tuple[datetime, float]:
    """The warmer of two minutes (the earlier one on a tie)."""
    return b if b[1] > a[1] else a


def make_flow(late: list[Any]) -> Dataflow:
    """The flow; late readings are appended to ``late``."""
    frozen = lambda: START  # noqa: E731 - a constant "system" time: deterministic output
    per_minute = EventClockConfig(reading_time, timedelta(seconds=30), now_getter=frozen)
    per_five = EventClockConfig(reading_time, timedelta(minutes=1), now_getter=frozen)
    flow = Dataflow()
    flow.fold_window(
        "minute",
        per_minute,
        TumblingWindowConfig(timedelta(minutes=1)),
        zero,
        add_reading,
        window_meta=True,
        late=lambda epoch, item: late.append(item),
    )
    flow.map(minute_average)
    flow.reduce_window(
        "warmest",
        per_five,
        TumblingWindowConfig(timedelta(minutes=5)),
        warmer,
        window_meta=True,
    )
    flow.capture()
    return flow


def label(meta: WindowMetadata) -> str:
    """``12:00-12:05``."""
    return f"{meta.open_time:%H:%M}-{meta.close_time:%H:%M}"


def main(argv: Sequence[str] | None = None) -> list[str]:
    """Run the flow; return (and print) the lines it prints."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-w", "--workers", type=int, default=1)
    args = parser.parse_args(argv)
    late: list[Any] = []
    data = readings()
    pairs = [(i // 30, reading) for i, reading in enumerate(data)]  # an epoch per 30 readings
    output = run_cluster(make_flow(late), pairs, 1, args.workers)
    lines = []
    for sensor, (at, _) in late:
        newest = max(r[1][0] for r in data[: data.index((sensor, (at, _)))] if r[0] == sensor)
        lines.append(f"late: {sensor} {at:%H:%M:%S} (arrived after {newest:%H:%M:%S})")
    for _, (sensor, (meta, (minute, celsius))) in sorted(output):
        lines.append(f"{label(meta)} {sensor} warmest minute {minute:%H:%M} {celsius} C")
    lines.sort(key=lambda line: (not line.startswith("late"), line))
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    main()
