r"""Event-time windows: timelypy.flow's ``fold_window`` against bytewax 0.21.1 and plain Python.

    python -m benchmarks.window_bench [--quick] [--repeat N] [--markdown]
                                      [--no-bytewax] [--windower NAME ...]
                                      [--profile [--top N]]

Every candidate does the same work on the same events in the same run; they
are timed interleaved (one untimed warm-up round, then ``--repeat`` rounds,
``gc.collect()`` before each call), and the results of the warm-up and of
the last timed round of every candidate are checked against plain Python's
before any time is quoted (``flow_bench.FlowWorkload``: order-free
fingerprints of the multiset of ``(key, window open, window close, sum)``).
Quote the medians and their ratios, not the absolute times.

The inputs are built, then frozen out of the garbage collector
(``gc.freeze()``): they stand for what a flow reads from a source, and three
lists of a million events each would otherwise be traversed again by every
full collection of every candidate, a cost that grows with the benchmark's
own data and not with the candidate's work. The collector stays on during
each call, for bytewax as for timelypy, so each pays for its own objects.

The events. 1,000,000 events (``--quick``: 100,000), built before timing:
``(key, (timestamp, value))`` with 1,000 keys (``"k000"`` ...) drawn at
random, ``value`` a random int in ``[0, 100)``, and event ``i``'s timestamp
``T0 + i * 2 ms + jitter``, the jitter random in ``[0, 2 s)`` (seeded, so
every run has the same events). Each key sees an event every 2 s on average,
out of order by up to 2 s. The clock is an event clock that waits 5 s, with
a constant "system" time (``now_getter``) on both engines, so a key's
watermark is exactly the largest timestamp it has seen minus 5 s: no event
is late (the jitter is less than the wait), and windows close only when a
later event of the same key, or the end of the input, moves the watermark
past them, never because the machine was slow. A window's sum is checked to
include every event: plain Python's windows must add up to the sum of all
values times the windows per event (1 tumbling, 3 sliding, 1 session).

Windowers (``window_meta=True``, windows aligned to 1970-01-01 UTC,
timelypy's default ``start_at``, which bytewax gets as ``align_to``):

- ``tumbling``: 10 s windows (200 per key at full size, about 5 events each);
- ``sliding``: 30 s windows every 10 s (each event is in 3 windows);
- ``session``: a 5 s gap (a key's events more than 5 s apart start a new
  session: about 8% of its gaps).

The user's functions are module-level: ``event_time`` (the timestamp),
``zero`` (the builder), ``fold_sum`` (``acc + value``) and ``add_sums`` (the
merger, for sessions that an event joins).

Candidates:

- ``plain`` (the limit): one loop over the events in arrival order, per key
  its watermark and its open windows, calling the same four functions; a
  key's windows are closed (emitted) as soon as its watermark passes them,
  checked per event against the end of its earliest open window, and the rest
  when the input ends. It is what the engines do minus the engine.
- ``timelypy`` (the headline): ``fold_window("sum", EventClockConfig(event_time,
  5 s, now_getter=frozen_now), windower, zero, fold_sum, add_sums,
  window_meta=True)`` then ``capture()``, run with ``run(flow, pairs)`` on one
  worker, event ``i`` in epoch ``i // 1,000`` (1,000 epochs; ``--quick``:
  100). This is the streaming shape: epochs close as the input goes on, so
  each window's result comes out at the epoch whose events closed it and
  anything downstream that waits for epochs (``reduce_epoch``, a recovery
  snapshot) can proceed. It is the slower of the two layouts, so a goal met
  by it is met by both.
- ``timelypy 1 epoch``: the same flow with every event in epoch 0. Windows
  still close as the watermark moves (the step folds a frontier epoch's
  items eagerly), but all results are at epoch 0.
- ``bytewax fold_window, batch 1,000`` (``bytewax`` for short): ``op.input``
  over ``bytewax_peer.list_source`` (1,000-event batches), then
  ``bytewax.operators.windowing.fold_window("sum", s, EventClock(event_time,
  5 s, now_getter=frozen_now, to_system_utc=never_wake), windower, zero,
  fold_sum, add_sums, ordered=False)`` (``TumblingWindower(10 s, align_to)``,
  ``SlidingWindower(30 s, 10 s, align_to)``, ``SessionWindower(5 s)``), its
  ``.down`` (``(key, (window_id, sum))``) and ``.meta`` (``(key, (window_id,
  WindowMetadata))``) each to a ``TestingSink``, run with
  ``bytewax.testing.run_main`` (one worker). The window ids are mapped to
  their metadata (open and close time) to compare.
- ``timelypy graph``: that bytewax program with its imports renamed to
  ``timelypy.flow`` (``operators.windowing.fold_window(..., ordered=False)``
  on the stream graph, a ``TestingSource`` of 1,000-event batches, the
  clock's default ``to_system_utc``: timelypy's windows wake a key when its
  watermark will reach a window, so a frozen clock needs nothing more), run
  with ``timelypy.flow.testing.run_main``; ``timelypy graph ordered`` with
  ``ordered=True``. Their goal is the same 3x.
- ``bytewax fold_window, batch 10,000``: the same fed 10,000-event batches
  (bytewax 0.21 has no batch form of its windowing operators, so this is
  its fastest way to run them; its per-batch cost is large enough that
  sessions ran 1.6x faster than at 1,000 in a first run).
  The graph's goal is shown against it too, and against
  ``timelypy graph, batch 10,000``, the graph fed the same batches.
- ``bytewax fold_window ordered, batch 1,000``: the same with bytewax's
  default ``ordered=True`` (values are queued and folded in timestamp order
  once the watermark passes them), for scale. The goal is judged against
  ``bytewax fold_window, batch 1,000`` (called ``bytewax`` below).

Semantic differences worked around (details in ``docs/performance.md``):

- **ordered**: timelypy folds a window's values in arrival order; bytewax's
  default sorts them by timestamp first. ``ordered=False`` is the same work
  as timelypy's (a sum does not depend on the order, so both agree).
- **wake-ups**: bytewax asks its runtime to wake each key at
  ``to_system_utc(earliest window close)``, compared with the *real* system
  time. With a frozen ``now_getter`` and 2024 timestamps the default
  (identity) puts every wake-up in the past, so bytewax re-checks every key
  with an open window on every activation without closing anything (about
  1.6-1.9x slower at ``--quick`` size in a first try). timelypy computes its
  timer from its own clock (the system time at which the watermark reaches
  the window's end, ``now_getter``'s included), which with a frozen clock
  never comes. ``to_system_utc=never_wake`` (``None``: "close on new items
  or at the end only") is bytewax's equivalent.
- **outputs**: timelypy emits ``(key, (WindowMetadata, acc))``; bytewax
  emits the sum and the metadata on two streams keyed by a per-key window
  id (for sessions a counter, for merged sessions the id of the one merged
  into). Both give a session's close time as its last event's time, a
  sliding window's as its exclusive end.
- **sessions**: bytewax extends one session and then merges overlapping
  ones; timelypy joins every session within the gap at once; the windows
  and sums are the same (checked).

The table is ``runtime_bench``'s: median time, events/s at the median,
**speed vs plain** (plain's median / the candidate's), **vs bytewax**
(``bytewax``'s median / the candidate's), the same two by CPU time of this
process, and the spread. The goals table sets the window issue's goal,
timelypy >= 3x bytewax's throughput, next to each windower's figure for both
timelypy layouts (met or not by the wall-clock medians).

``--profile`` runs timelypy's headline candidate of each windower once under
cProfile (after a warm-up) instead of timing, in both threads ``run`` uses
(``flow_bench.print_profiles``); calls are quoted per 1,024-event input pull.

What dominates (``--quick --profile``, 2026-11-24) is the step's per-key
bookkeeping after each batch, not the fold. For every key a batch touched
(0.74 per event: 1,000 keys share each 1,024-event pull) the step runs
``close`` -> ``due`` (a ``sorted`` of the key's open windows, even when none
is due) and ``schedule`` -> ``system_deadline`` -> ``next_close`` (a ``min``
of them again, for a timer that a frozen clock never reaches): 36-41% of the
worker thread inclusive (tumbling: ``close`` 26.6%, ``schedule`` 14.4%). The
per-event loop of ``run_items`` is 14-17% own, ``insert`` 18-30% inclusive
(sliding: 3 windows per event), ``times_of`` (``dt_getter`` and datetime to
microseconds) 7-8%, the user's fold (``fold_window``'s ``add`` wrapper and
``fold_sum``) 4-9%, ``from_micros`` for the ``WindowMetadata`` 1-3%; the
calling thread only waits (99% in ``lock.acquire``). The plain loop makes
the same decision with one comparison per event, against the end of the
key's earliest open window; a cached next-close watermark per key in
``timelypy/flow/window_ops.py`` would let the step skip ``due`` and
``schedule`` for keys with nothing to close (reported, not changed here).
"""

from __future__ import annotations

import gc
import logging
import math
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fmt_ratio, peer_parser, peer_run
from benchmarks.flow_bench import FlowWorkload, Normalized, print_profiles
from benchmarks.peers import bytewax_peer
from benchmarks.runtime_bench import machine, print_report
from timelypy.flow import Dataflow, run
from timelypy.flow.driver import PULL_LIMIT
from timelypy.flow.window import (
    UTC_EPOCH,
    EventClockConfig,
    SessionWindowConfig,
    SlidingWindowConfig,
    TumblingWindowConfig,
    WindowConfig,
)

logger = logging.getLogger("benchmarks.window_bench")

EVENTS = 1_000_000
KEYS = 1_000
EVENTS_PER_EPOCH = 1_000
#: Where the events' time starts, and the constant "system" time of both clocks.
T0 = datetime(2024, 1, 1, tzinfo=UTC)
#: Event ``i`` is at ``T0 + i * STEP + jitter``, the jitter in ``[0, JITTER)``.
STEP = timedelta(milliseconds=2)
JITTER = timedelta(seconds=2)
#: The event clock's ``wait_for_system_duration``: more than the jitter, so nothing is late.
WAIT = timedelta(seconds=5)
#: Where windows are aligned: timelypy's default ``start_at``, bytewax's ``align_to``.
ALIGN = UTC_EPOCH
TUMBLE = timedelta(seconds=10)
SLIDE_LENGTH = timedelta(seconds=30)
SLIDE_OFFSET = timedelta(seconds=10)
GAP = timedelta(seconds=5)
WINDOWERS = ("tumbling", "sliding", "session")
#: The window issue's goal: timelypy's throughput >= GOAL x bytewax's.
GOAL = 3.0
SEED = 20261124

Event = tuple[str, tuple[datetime, int]]
#: A closed window as every candidate's result is compared: key, open, close, sum.
Window = tuple[str, datetime, datetime, int]

# -- the events -------------------------------------------------------------------


def make_events(n: int, keys: int = KEYS, seed: int = SEED) -> list[Event]:
    """``n`` events ``(key, (timestamp, value))``, timestamps increasing with jitter.

    >>> events = make_events(3)
    >>> [(key[0], ts >= T0, 0 <= value < 100) for key, (ts, value) in events]
    [('k', True, True), ('k', True, True), ('k', True, True)]
    """
    rng = random.Random(seed)
    names = [f"k{k:03d}" for k in range(keys)]
    step, jitter = STEP // timedelta(microseconds=1), JITTER // timedelta(microseconds=1)
    us = timedelta(microseconds=1)
    events: list[Event] = []
    for i in range(n):
        key = names[rng.randrange(keys)]
        events.append((key, (T0 + (i * step + rng.randrange(jitter)) * us, rng.randrange(100))))
    return events


# -- the user's functions ---------------------------------------------------------


def event_time(value: tuple[datetime, int]) -> datetime:
    """The event's timestamp (``dt_getter`` / ``ts_getter``)."""
    return value[0]


def zero() -> int:
    """A window's empty sum (the builder)."""
    return 0


def fold_sum(acc: int, value: tuple[datetime, int]) -> int:
    """Add an event's value to its window's sum (the folder)."""
    return acc + value[1]


def add_sums(a: int, b: int) -> int:
    """Two sessions' sums, when an event joins them (the merger)."""
    return a + b


def frozen_now() -> datetime:
    """The clocks' constant "system" time: the watermark is the largest time seen minus the wait."""
    return T0


def never_wake(close: datetime) -> None:
    """The ``to_system_utc`` of bytewax's clock: no wake-ups, close on new items or at the end."""
    return None


# -- plain Python: the limit ------------------------------------------------------

_MISSING: Any = object()
_NEVER = datetime.max.replace(tzinfo=UTC)


def plain_sliding(
    events: Iterable[Event],
    length: timedelta,
    offset: timedelta,
    align: datetime = ALIGN,
    wait: timedelta = WAIT,
) -> list[Window]:
    """Sliding (tumbling: ``offset == length``) window sums per key, closed as the watermark passes.

    >>> s = lambda seconds: T0 + timedelta(seconds=seconds)
    >>> events = [("a", (s(1), 5)), ("a", (s(12), 1)), ("b", (s(3), 2)), ("a", (s(9), 7))]
    >>> [(k, o - T0, c - T0, v) for k, o, c, v in plain_sliding(events, TUMBLE, TUMBLE)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('a', datetime.timedelta(0), datetime.timedelta(seconds=10), 12),
     ('a', datetime.timedelta(seconds=10), datetime.timedelta(seconds=20), 1),
     ('b', datetime.timedelta(0), datetime.timedelta(seconds=10), 2)]
    """
    out: list[Window] = []
    # key -> [watermark, {window id: sum}, end of its earliest open window]
    states: dict[str, list[Any]] = {}
    get = states.get
    for key, value in events:
        t = event_time(value)
        state = get(key)
        if state is None:
            state = states[key] = [t - wait, {}, _NEVER]
        elif t - wait > state[0]:
            state[0] = t - wait
        mark = state[0]
        if t < mark:
            continue  # late: never folded (none are, with these events)
        accs = state[1]
        since = t - align
        for w in range((since - length) // offset + 1, since // offset + 1):
            acc = accs.get(w, _MISSING)
            if acc is _MISSING:
                acc = zero()
                end = align + w * offset + length
                if end < state[2]:
                    state[2] = end
            accs[w] = fold_sum(acc, value)
        if mark >= state[2]:
            _close_sliding(out, key, state, mark, length, offset, align)
    for key, state in states.items():
        _close_sliding(out, key, state, _NEVER, length, offset, align)
    return out


def _close_sliding(
    out: list[Window],
    key: str,
    state: list[Any],
    mark: datetime,
    length: timedelta,
    offset: timedelta,
    align: datetime,
) -> None:
    accs: dict[int, int] = state[1]
    first_end = _NEVER
    for w in sorted(accs):
        start = align + w * offset
        end = start + length
        if end <= mark:
            out.append((key, start, end, accs.pop(w)))
        elif end < first_end:
            first_end = end
    state[2] = first_end


def plain_session(
    events: Iterable[Event], gap: timedelta = GAP, wait: timedelta = WAIT
) -> list[Window]:
    """Session sums per key (events at most ``gap`` apart), closed as the watermark passes.

    >>> s = lambda seconds: T0 + timedelta(seconds=seconds)
    >>> events = [("a", (s(0), 1)), ("a", (s(8), 2)), ("a", (s(4), 3)), ("a", (s(20), 4))]
    >>> [(k, o - T0, c - T0, v) for k, o, c, v in plain_session(events, wait=s(10) - T0)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('a', datetime.timedelta(0), datetime.timedelta(seconds=8), 6),
     ('a', datetime.timedelta(seconds=20), datetime.timedelta(seconds=20), 4)]
    """
    out: list[Window] = []
    # key -> [watermark, open sessions as [first time, last time, sum]]
    states: dict[str, list[Any]] = {}
    get = states.get
    for key, value in events:
        t = event_time(value)
        state = get(key)
        if state is None:
            state = states[key] = [t - wait, []]
        elif t - wait > state[0]:
            state[0] = t - wait
        mark = state[0]
        if t < mark:
            continue  # late
        sessions: list[list[Any]] = state[1]
        near = [s for s in sessions if s[0] - gap <= t <= s[1] + gap]
        if not near:
            sessions.append([t, t, fold_sum(zero(), value)])
        else:
            into = near[0]
            if len(near) > 1:  # the event joins sessions: merge them in order of start
                near.sort(key=_first)
                into = near[0]
                for other in near[1:]:
                    into[1] = max(into[1], other[1])
                    into[2] = add_sums(into[2], other[2])
                    sessions.remove(other)
            if t < into[0]:
                into[0] = t
            elif t > into[1]:
                into[1] = t
            into[2] = fold_sum(into[2], value)
        limit = mark - gap
        if any(s[1] < limit for s in sessions):
            state[1] = [s for s in sessions if s[1] >= limit]
            out += [(key, s[0], s[1], s[2]) for s in sessions if s[1] < limit]
    for key, state in states.items():
        out += [(key, s[0], s[1], s[2]) for s in state[1]]
    return out


def _first(session: list[Any]) -> datetime:
    return session[0]


# -- timelypy.flow ----------------------------------------------------------------


def window_flow(windower: WindowConfig) -> Dataflow:
    """``fold_window`` summing each key's windows, with their metadata, then ``capture``."""
    flow = Dataflow()
    clock = EventClockConfig(event_time, WAIT, now_getter=frozen_now)
    flow.fold_window("sum", clock, windower, zero, fold_sum, add_sums, window_meta=True)
    flow.capture()
    return flow


def timelypy_windows(windower: WindowConfig, pairs: Sequence[tuple[int, Event]]) -> list[Any]:
    """``list(run(window_flow(windower), pairs))`` on one worker."""
    return list(run(window_flow(windower), pairs))


# -- bytewax 0.21.1 ---------------------------------------------------------------


def bytewax_windower(name: str) -> Any:
    """The bytewax windower for ``name`` (of :data:`WINDOWERS`)."""
    windowing = bytewax_peer._bytewax("operators.windowing")
    if name == "tumbling":
        return windowing.TumblingWindower(length=TUMBLE, align_to=ALIGN)
    if name == "sliding":
        return windowing.SlidingWindower(length=SLIDE_LENGTH, offset=SLIDE_OFFSET, align_to=ALIGN)
    return windowing.SessionWindower(gap=GAP)


#: the bytewax candidates: its ``fold_window`` (no batch form in bytewax 0.21) fed batches
#: of 1,000 events (its default, against which the goal is judged) and of 10,000
BYTEWAX = "bytewax fold_window, batch 1,000"
BYTEWAX_10K = "bytewax fold_window, batch 10,000"
BYTEWAX_ORDERED = "bytewax fold_window ordered, batch 1,000"
#: the graph fed 10,000-event batches, to compare with bytewax's at the same size
GRAPH_10K = "timelypy graph, batch 10,000"


def bytewax_windows(
    name: str, events: Sequence[Event], *, ordered: bool = False, batch_size: int = 1000
) -> tuple[list[Any], list[Any]]:
    """``fold_window`` in bytewax: its ``.down`` and ``.meta`` items, as two lists.

    >>> down, meta = bytewax_windows("tumbling", [("a", (T0, 1)), ("a", (T0, 2))])
    >>> down, [(key, window, m.open_time == T0) for key, (window, m) in meta]
    ([('a', (170406720, 3))], [('a', 170406720, True)])
    """
    dataflow = bytewax_peer._bytewax("dataflow")
    op = bytewax_peer._bytewax("operators")
    testing = bytewax_peer._bytewax("testing")
    windowing = bytewax_peer._bytewax("operators.windowing")
    down: list[Any] = []
    meta: list[Any] = []
    flow = dataflow.Dataflow(f"window_{name}")
    s = op.input("inp", flow, bytewax_peer.list_source(events, batch_size))
    clock = windowing.EventClock(event_time, WAIT, now_getter=frozen_now, to_system_utc=never_wake)
    out = windowing.fold_window(
        "sum", s, clock, bytewax_windower(name), zero, fold_sum, add_sums, ordered=ordered
    )
    op.output("down", out.down, testing.TestingSink(down))
    op.output("meta", out.meta, testing.TestingSink(meta))
    testing.run_main(flow)
    return down, meta


def graph_windows(
    name: str, events: Sequence[Event], *, ordered: bool = False, batch_size: int = 1000
) -> tuple[list[Any], list[Any]]:
    """The stream graph's windows, written as :func:`bytewax_windows` is: ``.down``, ``.meta``.

    The same program with ``timelypy.flow`` for ``bytewax``, and a
    ``TestingSource`` of 1,000-event batches for the list source.
    """
    import timelypy.flow.operators as op
    from timelypy.flow.dataflow import Dataflow as GraphFlow
    from timelypy.flow.operators import windowing
    from timelypy.flow.testing import TestingSink, TestingSource, run_main

    windower = {
        "tumbling": windowing.TumblingWindower(length=TUMBLE, align_to=ALIGN),
        "sliding": windowing.SlidingWindower(
            length=SLIDE_LENGTH, offset=SLIDE_OFFSET, align_to=ALIGN
        ),
        "session": windowing.SessionWindower(gap=GAP),
    }[name]
    down: list[Any] = []
    meta: list[Any] = []
    flow = GraphFlow(f"window_{name}")
    s = op.input("inp", flow, TestingSource(events, batch_size))
    clock = windowing.EventClock(event_time, WAIT, now_getter=frozen_now)
    out = windowing.fold_window(
        "sum", s, clock, windower, zero, fold_sum, add_sums, ordered=ordered
    )
    op.output("down", out.down, TestingSink(down))
    op.output("meta", out.meta, TestingSink(meta))
    run_main(flow)
    return down, meta


# -- normalizing results: a multiset of (key, open, close, sum) -------------------


def from_plain(out: Iterable[Window]) -> Normalized:
    """The plain loops' ``(key, open, close, sum)``."""
    return Counter(out)


def from_timelypy(out: Iterable[tuple[int, tuple[str, Any]]]) -> Normalized:
    """``(epoch, (key, (WindowMetadata, sum)))`` from ``run``; the epoch is dropped."""
    return Counter((key, meta.open_time, meta.close_time, acc) for _, (key, (meta, acc)) in out)


def from_bytewax(out: tuple[list[Any], list[Any]]) -> Normalized:
    """The bytewax ``.down`` ``(key, (window_id, sum))`` joined with ``.meta`` by key and id."""
    down, meta = out
    metas = {(key, window): m for key, (window, m) in meta}
    if len(metas) != len(meta) or len(down) != len(meta):
        raise AssertionError(
            f"bytewax emitted {len(down):,} sums and {len(meta):,} metadata "
            f"({len(metas):,} distinct windows): they must pair up one to one"
        )
    return Counter(
        (key, metas[key, window].open_time, metas[key, window].close_time, acc)
        for key, (window, acc) in down
    )


# -- the workloads ----------------------------------------------------------------


@dataclass(frozen=True)
class Windowing:
    """One windower on both engines and in plain Python."""

    name: str
    timelypy: WindowConfig
    plain: Callable[[Sequence[Event]], list[Window]]
    #: how many windows each event is in (its value is summed that many times)
    per_event: int


def _tumbling(events: Sequence[Event]) -> list[Window]:
    return plain_sliding(events, TUMBLE, TUMBLE)


def _sliding(events: Sequence[Event]) -> list[Window]:
    return plain_sliding(events, SLIDE_LENGTH, SLIDE_OFFSET)


WINDOWINGS = {
    "tumbling": Windowing("tumbling", TumblingWindowConfig(TUMBLE), _tumbling, 1),
    "sliding": Windowing(
        "sliding",
        SlidingWindowConfig(SLIDE_LENGTH, SLIDE_OFFSET),
        _sliding,
        SLIDE_LENGTH // SLIDE_OFFSET,
    ),
    "session": Windowing("session", SessionWindowConfig(GAP), plain_session, 1),
}


def check_plain(windowing: Windowing, events: Sequence[Event]) -> int:
    """Run plain Python once, untimed; raise unless its sums hold every value. Its window count.

    Every event is in ``per_event`` windows, so the windows' sums must add up
    to ``per_event`` times the sum of all values: none was late or lost.
    """
    windows = windowing.plain(events)
    expected = windowing.per_event * sum(value for _, (_, value) in events)
    got = sum(acc for *_, acc in windows)
    if got != expected:
        raise AssertionError(
            f"{windowing.name}: plain Python's windows add up to {got:,}, not {expected:,} "
            f"({windowing.per_event} x the sum of the values): events were late or lost; "
            "check the events' jitter against the wait"
        )
    return len(windows)


def build_workload(
    windowing: Windowing,
    events: Sequence[Event],
    pairs: Sequence[tuple[int, Event]],
    one_epoch: Sequence[tuple[int, Event]],
    *,
    bytewax: bool,
) -> FlowWorkload:
    """Bind every candidate of one windower to the events (timelypy: as ``(epoch, event)``)."""
    config = windowing.timelypy
    candidates: dict[str, Callable[[], Any]] = {
        "plain": lambda: windowing.plain(events),
        "timelypy": lambda: timelypy_windows(config, pairs),
        "timelypy 1 epoch": lambda: timelypy_windows(config, one_epoch),
    }
    normalize: dict[str, Callable[[Any], Normalized]] = {
        "plain": from_plain,
        "timelypy": from_timelypy,
        "timelypy 1 epoch": from_timelypy,
    }
    name = windowing.name
    candidates["timelypy graph"] = lambda: graph_windows(name, events)
    candidates["timelypy graph ordered"] = lambda: graph_windows(name, events, ordered=True)
    normalize["timelypy graph"] = normalize["timelypy graph ordered"] = from_bytewax
    candidates[GRAPH_10K] = lambda: graph_windows(name, events, batch_size=10_000)
    normalize[GRAPH_10K] = from_bytewax
    if bytewax:
        candidates[BYTEWAX] = lambda: bytewax_windows(name, events)
        candidates[BYTEWAX_10K] = lambda: bytewax_windows(name, events, batch_size=10_000)
        candidates[BYTEWAX_ORDERED] = lambda: bytewax_windows(name, events, ordered=True)
        normalize[BYTEWAX] = normalize[BYTEWAX_10K] = normalize[BYTEWAX_ORDERED] = from_bytewax
    pulls = (max(1, math.ceil(len(events) / PULL_LIMIT)), "pull")
    return FlowWorkload(
        windowing.name, len(events), "events", candidates, pulls, normalize=normalize
    )


def goal_rows(workloads: Sequence[FlowWorkload]) -> list[list[str]]:
    """The goal (timelypy >= 3x bytewax's throughput) per windower and timelypy layout."""
    rows = []
    for w in workloads:
        for timely, peer in (
            ("timelypy", BYTEWAX),
            ("timelypy 1 epoch", BYTEWAX),
            ("timelypy graph", BYTEWAX),
            ("timelypy graph", BYTEWAX_10K),
            (GRAPH_10K, BYTEWAX_10K),
        ):
            goal = f"{timely} >= {fmt_ratio(GOAL)} {peer}'s events/s"
            if peer not in w.stats:
                rows.append([w.name, goal, "bytewax not run", "n/a", "n/a"])
                continue
            measured = w.speed_vs(timely, peer)
            by_cpu = fmt_ratio(w.speed_vs(timely, peer, cpu=True))
            met = "met" if measured >= GOAL else "NOT met"
            rows.append([w.name, goal, fmt_ratio(measured), by_cpu, met])
    return rows


# -- command line -----------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the windowing benchmark (or profile it) and print its tables."""
    try:
        return _main(argv)
    finally:
        gc.unfreeze()  # (a caller's process, a test's, gets its collector back whole)


def _main(argv: Sequence[str] | None) -> int:
    parser = peer_parser(
        "benchmarks.window_bench",
        __doc__,
        "100,000 events, 3 repeats",
        "windower",
        WINDOWERS,
        "profile timelypy's candidates instead of timing",
    )
    args = parser.parse_args(argv)
    settings = peer_run(parser, args, logger)
    bytewax, scale, repeat, size = (
        settings.bytewax,
        settings.scale,
        settings.repeat,
        settings.size,
    )
    names = [name for name in WINDOWERS if name in (args.windower or WINDOWERS)]

    logger.info("building %s events", f"{EVENTS // scale:,}")
    events = make_events(EVENTS // scale)
    pairs = [(i // EVENTS_PER_EPOCH, event) for i, event in enumerate(events)]
    one_epoch = [(0, event) for event in events]
    # The inputs (3 lists of up to 1M events) stand for what a flow reads from a
    # source; left to the collector, every full collection of every candidate would
    # traverse them again. Frozen out of it, each candidate's collections see its
    # own objects only (bytewax's as timelypy's; it still runs, as in real use).
    gc.collect()
    gc.freeze()
    epochs = pairs[-1][0] + 1
    description = (
        f"{len(events):,} events, {KEYS:,} keys, {epochs:,} epochs of {EVENTS_PER_EPOCH:,} "
        "events for 'timelypy'"
    )

    workloads: list[FlowWorkload] = []
    for name in names:
        windowing = WINDOWINGS[name]
        w = build_workload(windowing, events, pairs, one_epoch, bytewax=bytewax)
        workloads.append(w)
    if args.profile:
        print(f"fold_window profiles (cProfile), {size} ({description}), 1 worker, {machine()}")
        print_profiles(workloads, args.top, args.markdown)
        return 0

    rows: list[list[str]] = []
    windows: list[str] = []
    checked = 0
    for w in workloads:
        windows.append(f"{w.name} {check_plain(WINDOWINGS[w.name], events):,}")
        logger.info("measuring %s: %s", w.name, ", ".join(w.candidates))
        w.measure(repeat=repeat, warmup=1)
        w.check()
        checked += sum(len(prints) for prints in w.fingerprints.values())
        w.release()
        rows += w.rows()

    print_report(
        f"fold_window, {size} ({description}), 1 worker, median of {repeat} interleaved "
        f"runs, {machine()}" + ("" if bytewax else "; bytewax not run"),
        rows,
        goal_rows(workloads),
        markdown=args.markdown,
    )
    print()
    print(
        f"checked before quoting: {checked} results (the warm-up and last timed round of "
        f"every candidate, equal to plain Python's); windows: {', '.join(windows)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
