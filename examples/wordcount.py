"""Timely's ``wordcount``: a running count per word, reported as each round completes.

    python examples/wordcount.py [-w N]

Every worker sends the line ``"round"`` (with count ``1``) in each of ten
rounds.  Lines are split into ``(word, diff)`` pairs, the pairs are exchanged
by word, and a ``WordCount`` operator -- a ``unary_frontier`` operator, as in
Timely -- holds each time's pairs until its input frontier has passed that
time, then adds them to the running counts and sends ``(word, count)`` after
each pair.  With one worker it prints::

    seen: ('round', 1)
    ...
    seen: ('round', 10)

With ``-w N`` every worker sends its own ``"round"`` each round, so the
count climbs to ``10 * N`` (``seen: ('round', 1)`` ... ``seen: ('round',
20)`` for ``-w 2``); every line comes from the one worker the word
``"round"`` is routed to, in increasing order.

Differences from the Rust program, none visible in the output: Timely routes
by the word's *length* (``x.0.len()``); this port routes by
:func:`timelypy.stable_hash` of the word, which spreads words of equal length
too.  Timely visits the completed times in ``HashMap`` order; this port
visits them in time order.  Records are printed with Python's ``repr``, so
the tuple reads ``('round', 1)`` where Rust's ``Debug`` writes ``("round", 1)``.
"""

import sys
from collections.abc import Callable
from typing import Any

import timelypy
from timelypy.dataflow import Capability, Exchange, OperatorInfo, OperatorInput, OperatorOutput


def word_count(
    _cap: Capability, _info: OperatorInfo
) -> Callable[[OperatorInput, OperatorOutput], None]:
    """The ``WordCount`` operator's constructor: returns its logic."""
    # time -> (capability to send at it, the batches of (word, diff) received at it)
    queues: dict[Any, tuple[Capability, list[list[tuple[str, int]]]]] = {}
    counts: dict[str, int] = {}

    def logic(input: OperatorInput, output: OperatorOutput) -> None:
        for cap, data in input:
            queued = queues.get(cap.time)
            if queued is None:
                queues[cap.time] = (cap.retain(), [data])
            else:
                queued[1].append(data)
        frontier = input.frontier
        for time in sorted(queues):
            if frontier.less_equal(time):
                continue
            cap, batches = queues.pop(time)
            session = output.session(cap)
            for batch in batches:
                for word, diff in batch:
                    counts[word] = counts.get(word, 0) + diff
                    session.give((word, counts[word]))
            cap.drop()

    return logic


def wordcount(worker: timelypy.Worker) -> None:
    handle = timelypy.InputHandle()
    probe = timelypy.ProbeHandle()

    def build(scope: timelypy.Scope) -> None:
        (
            scope.input_from(handle)
            .flat_map(lambda line: [(word, line[1]) for word in line[0].split()])
            .unary_frontier(
                Exchange(lambda pair: timelypy.stable_hash(pair[0])), "WordCount", word_count
            )
            .inspect(lambda x: print(f"seen: {x!r}", flush=True))
            .probe_with(probe)
        )

    worker.dataflow(build)
    for round_ in range(10):
        handle.send(("round", 1))
        handle.advance_to(round_ + 1)
        while probe.less_than(handle.time):
            worker.step()


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, wordcount)
