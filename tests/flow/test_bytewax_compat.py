# ruff: noqa: E501 - the programs are kept as a user writes them, one step a line
"""bytewax 0.21 programs, run by bytewax and, imports renamed, by timelypy: the same output.

Each program below is written against bytewax 0.21.1's API.  The test runs
it with bytewax (skipped when bytewax is not installed: ``pip install -e
'.[bench]'``) and again after replacing ``bytewax`` with ``timelypy.flow``
in its text, and compares what each printed (sorted, as neither promises
an order across keys).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("bytewax.operators", reason="needs bytewax 0.21.1 (pip install -e '.[bench]')")

PROGRAMS = {
    "stateless": """
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main

        flow = Dataflow("f")
        s = op.input("inp", flow, TestingSource(["a b", "c", "", "dd ee"], batch_size=2))
        words = op.flat_map("split", s, str.split)
        out = []
        op.output("o1", op.map("up", words, str.upper), TestingSink(out))
        op.output("o2", op.filter("short", words, lambda w: len(w) == 1), TestingSink(out))
        op.output("o3", op.filter_map("fm", words, lambda w: w * 2 if w != "c" else None), TestingSink(out))
        op.output("o4", op.flatten("fl", op.map("ch", words, list)), TestingSink(out))
        keyed = op.key_on("k", words, lambda w: w[0])
        op.output("o5", op.map_value("mv", keyed, len), TestingSink(out))
        op.output("o6", op.filter_value("fv", keyed, lambda w: w > "b"), TestingSink(out))
        op.output("o7", op.flat_map_value("fmv", keyed, list), TestingSink(out))
        op.output("o8", op.filter_map_value("fmv2", keyed, lambda w: None if w == "a" else w), TestingSink(out))
        op.output("o9", op.key_rm("rm", keyed), TestingSink(out))
        run_main(flow)
        for x in sorted(map(repr, out)):
            print(x)
    """,
    "branch_merge_finals": """
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main

        flow = Dataflow("f")
        nums = op.input("inp", flow, TestingSource(list(range(30)), batch_size=4))
        b = op.branch("even", nums, lambda x: x % 2 == 0)
        merged = op.merge("m", op.map("neg", b.trues, lambda x: -x), b.falses)
        keyed = op.key_on("k", merged, lambda x: str(abs(x) % 3))
        out = []
        op.output("c", op.count_final("count", merged, lambda x: str(x % 4)), TestingSink(out))
        op.output("f", op.fold_final("fold", keyed, list, lambda a, x: sorted(a + [x])), TestingSink(out))
        op.output("r", op.reduce_final("red", keyed, lambda a, b: a + b), TestingSink(out))
        op.output("mx", op.max_final("max", keyed), TestingSink(out))
        op.output("mn", op.min_final("min", keyed, by=abs), TestingSink(out))
        run_main(flow)
        for x in sorted(map(repr, out)):
            print(x)
    """,
    "stateful": """
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.operators import StatefulLogic
        from bytewax.testing import TestingSink, TestingSource, run_main

        class Count(StatefulLogic):
            def __init__(self, state):
                self.n = state or 0
            def on_item(self, value):
                self.n += 1
                return [(value, self.n)], self.n >= 3
            def on_eof(self):
                return [("eof", self.n)], StatefulLogic.DISCARD
            def snapshot(self):
                return self.n

        flow = Dataflow("f")
        s = op.input("inp", flow, TestingSource([("a", i) for i in range(5)] + [("b", 9)]))
        out = []
        op.output("o_sm", op.stateful_map("sm", s, lambda st, v: ((st or 0) + v, (st or 0) + v)), TestingSink(out))
        op.output("o_sfm", op.stateful_flat_map("sfm", s, lambda st, v: (None, [v, v])), TestingSink(out))
        op.output("o_st", op.stateful("st", s, Count), TestingSink(out))
        run_main(flow)
        for x in sorted(map(repr, out)):
            print(x)
    """,
    "join_modes": """
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main

        for insert in ("first", "last", "product"):
            for emit in ("complete", "final", "running"):
                flow = Dataflow("f")
                a = op.input("a", flow, TestingSource([("k", 1), ("k", 2), ("x", 9), ("k", 3)]))
                b = op.input("b", flow, TestingSource([("k", "A"), ("k", "B")]))
                out = []
                op.output("o", op.join("j", a, b, insert_mode=insert, emit_mode=emit), TestingSink(out))
                run_main(flow)
                if emit != "running":
                    for x in sorted(map(repr, out)):
                        print(insert, emit, x)
                else:
                    print(insert, emit, len(out), repr(out[-1]) if out else None)
    """,
    "collect_and_inspect": """
        from datetime import timedelta
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.testing import TestingSink, TestingSource, run_main

        flow = Dataflow("f")
        s = op.input("inp", flow, TestingSource([("k", 1), ("k", 2), ("k", 3), ("j", 1)]))
        out = []
        op.output("o", op.collect("c", s, timedelta(seconds=10), 2), TestingSink(out))
        op.inspect("see", s)
        run_main(flow)
        for x in sorted(map(repr, out)):
            print(x)
    """,
    "sources_and_sinks": """
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
        from bytewax.outputs import FixedPartitionedSink, StatefulSinkPartition
        from bytewax.testing import run_main

        class Part(StatefulSourcePartition):
            def __init__(self, name, at):
                self.name, self.at = name, at or 0
            def next_batch(self):
                if self.at >= 3:
                    raise StopIteration()
                self.at += 1
                return [(self.name, self.at)]
            def snapshot(self):
                return self.at

        class Source(FixedPartitionedSource):
            def list_parts(self):
                return ["p", "q"]
            def build_part(self, step_id, for_part, resume_state):
                return Part(for_part, resume_state)

        written = []

        class SinkPart(StatefulSinkPartition):
            def __init__(self, name):
                self.name = name
            def write_batch(self, values):
                written.extend((self.name, v) for v in values)
            def snapshot(self):
                return None

        class Sink(FixedPartitionedSink):
            def list_parts(self):
                return ["s0", "s1", "s2"]
            def build_part(self, step_id, for_part, resume_state):
                return SinkPart(for_part)

        flow = Dataflow("f")
        op.output("o", op.map_value("str", op.input("inp", flow, Source()), str), Sink())
        run_main(flow)
        for x in sorted(map(repr, written)):
            print(x)
    """,
    "windows": """
        import random
        from datetime import datetime, timedelta, timezone
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.operators import windowing as w
        from bytewax.testing import TestingSink, TestingSource, run_main

        ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)
        rng = random.Random(SEED)
        t = 0
        events = []
        for i in range(120):
            t += rng.choice([0, 1, 2, 5, 30]) - (rng.random() < 0.2) * rng.randint(0, 40)
            events.append((rng.choice("abc"), (ALIGN + timedelta(seconds=max(t, 0)), i)))
        windowers = {
            "tumbling": w.TumblingWindower(timedelta(seconds=10), ALIGN),
            "sliding": w.SlidingWindower(timedelta(seconds=10), timedelta(seconds=4), ALIGN),
            "session": w.SessionWindower(timedelta(seconds=6)),
        }
        for name, windower in windowers.items():
            for ordered in (True, False):
                flow = Dataflow("f")
                s = op.input("inp", flow, TestingSource(events, batch_size=BATCH))
                clock = w.EventClock(lambda v: v[0], timedelta(seconds=WAIT), now_getter=lambda: ALIGN)
                outs = {
                    "fold": w.fold_window("fold", s, clock, windower, list, lambda a, v: a + [v[1]], lambda a, b: a + b, ordered=ordered),
                    "collect": w.collect_window("collect", s, clock, windower, ordered=ordered),
                    "count": w.count_window("count", op.key_rm("rm", s), clock, windower, lambda v: str(v[1] % 2)),
                    "max": w.max_window("max", op.map_value("n", s, lambda v: v), clock, windower, by=lambda v: v[1]),
                    "reduce": w.reduce_window("reduce", op.map_value("n2", s, lambda v: (v[0], [v[1]])), clock, windower, lambda a, b: (max(a[0], b[0]), a[1] + b[1])),
                }
                sink = []
                for kind, out in outs.items():
                    for stream_name in ("down", "late", "meta"):
                        labelled = op.map(f"{kind}_{stream_name}", getattr(out, stream_name), lambda kv, k=kind, n=stream_name: (k, n, kv))
                        op.output(f"o_{kind}_{stream_name}", labelled, TestingSink(sink))
                run_main(flow)
                for kind, stream_name, (key, (window_id, obj)) in sink:
                    if stream_name == "meta":
                        obj = (obj.open_time.isoformat(), obj.close_time.isoformat(), sorted(obj.merged_ids))
                    print(name, ordered, kind, stream_name, key, window_id, repr(obj))
    """,
}


def _run(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=120,
    )


CASES = {name: program for name, program in PROGRAMS.items() if name != "windows"}
# the windowing program on random streams: seed, batch size, the event clock's wait
for seed, batch, wait in [(1, 1, 0), (2, 3, 5), (3, 7, 20), (4, 1, 12), (5, 50, 3)]:
    CASES[f"windows_{seed}"] = (
        PROGRAMS["windows"]
        .replace("SEED", str(seed))
        .replace("BATCH", str(batch))
        .replace("WAIT", str(wait))
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bytewax_program_renamed_gives_bytewax_output(name):
    program = CASES[name]
    theirs = _run(program)
    assert theirs.returncode == 0, theirs.stderr
    ours = _run(program.replace("bytewax", "timelypy.flow"))
    assert ours.returncode == 0, ours.stderr
    assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines())
    assert theirs.stdout.strip(), "the program printed something to compare"
