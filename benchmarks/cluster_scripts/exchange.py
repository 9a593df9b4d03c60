"""Exchange throughput: every worker routes its records by key, half of them to the other.

    python -m timelypy.launch -n 2 -w 1 benchmarks/cluster_scripts/exchange.py [words=N] [reps=R]

Worker ``i`` holds ``(word, position)`` records for the first ``words``
words of ``part-i.txt`` (``_common.exchange_records``).  Per rep, at a
fresh epoch, it feeds them in batches of ``CHUNK`` through an input handle
(``send_batch``, then one ``worker.step()``, as ``to_stream`` does) into a
``Keep`` operator whose input pact is ``Exchange(itemgetter(1))`` (the
position: with two workers every other record crosses to the other
process) and which only keeps the batches it receives; then it advances
and steps until its probe passes the epoch.  The clock runs from the
synchronised start of the epoch until the probe has passed it: every record
has been routed, encoded, sent, received, decoded and delivered.

Checked after every rep: the worker received exactly the records whose
position it owns, each with its word, at the rep's time.

``gc=0`` switches the garbage collector off while timed (for diagnosis
only: a worker that keeps what it receives pays for collections that scan
it, and ``cluster_bench.py`` always runs with the collector on).
"""

from __future__ import annotations

import gc
import sys
from operator import itemgetter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Profiler, chunks, exchange_records, parse, run_and_emit, sync, timed_epoch

import timelypy
from benchmarks._data import part_paths
from timelypy.dataflow import Exchange

DEFAULTS = {"words": 1_000_000, "reps": 3, "profile": "", "gc": 1}


def main() -> None:
    config, params = parse(sys.argv, DEFAULTS)
    n, reps = params["words"], params["reps"]
    profiler = Profiler(params["profile"], config.process_index)
    position = itemgetter(1)

    def program(worker: timelypy.Worker) -> dict:
        index, peers = worker.index, worker.peers
        parts = [p.read_text(encoding="ascii").split()[:n] for p in part_paths()]
        everyone = [exchange_records(parts[w % len(parts)], w) for w in range(peers)]
        batches = chunks(everyone[index])
        sent_remote = sum(1 for r in everyone[index] if r[1] % peers != index)
        expected = sorted(
            (r for recs in everyone for r in recs if r[1] % peers == index), key=position
        )
        del everyone, parts

        handle = timelypy.InputHandle()
        probe = timelypy.ProbeHandle()
        received: list[tuple[int, list]] = []

        def keep(cap, info):
            def logic(inp, out) -> None:
                for cap, data in inp:
                    received.append((cap.time, data))

            return logic

        worker.dataflow(
            lambda scope: (
                scope.input_from(handle).unary(Exchange(position), "Keep", keep).probe_with(probe)
            )
        )
        epoch = 0
        times = []
        for rep in range(reps + 1):  # rep 0 warms up
            gc.collect()
            epoch += 1
            sync(worker, handle, probe, epoch)
            epoch += 1
            if not params["gc"]:
                gc.disable()
            with profiler.timed(enabled=rep > 0):
                timer = timed_epoch(worker, handle, probe, batches, epoch)
            gc.enable()
            got = sorted((r for _, data in received for r in data), key=position)
            wrong_time = sum(1 for t, _ in received if t != epoch - 1)
            if got != expected or wrong_time:
                raise AssertionError(
                    f"worker {index} rep {rep}: received {len(got)} records "
                    f"({wrong_time} batches at a wrong time), expected {len(expected)}"
                )
            received.clear()
            if rep:
                times.append(timer.as_dict())
        return {
            "worker": index,
            "times": times,
            "records": sum(map(len, batches)),
            "batches": len(batches),
            "sent_remote": sent_remote,
            "received": len(expected),
            "checked": True,
        }

    run_and_emit(config, program, profiler)


if __name__ == "__main__":
    main()
