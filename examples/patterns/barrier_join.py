"""Timely's barrier pattern: a two-input operator that joins each time once it is complete.

    python examples/patterns/barrier_join.py [-w N]

``barrier_join`` is built with :class:`~timelypy.OperatorBuilder`: two inputs,
one output.  It routes both inputs by key (so matching records meet on one
worker), stashes each time's records from both sides together with a
capability for that time, and joins a time only when *both* input frontiers
have passed it -- when no record of that time can arrive on either input,
from any worker.  Then it sends every ``(key, left, right)`` match at that
time, drops the capability, and forgets the time.

Worker 0 feeds quantities (left) and prices (right), each epoch in two
installments with worker steps in between, so the records of one time
arrive in several batches and activations.  It prints the matches of each
epoch, sorted within the epoch::

    joined at 0: ('apple', 3, 50)
    joined at 0: ('apple', 4, 50)
    joined at 0: ('banana', 2, 20)
    joined at 1: ('apple', 1, 55)
    joined at 2: ('cherry', 5, 70)
    joined at 2: ('cherry', 5, 75)

With ``-w N`` each key's matches are printed by the worker the key is routed
to; epochs still complete in order (the driver waits for each), but the lines
of different workers within an epoch interleave freely.

Why the Rust sketch this example ports is wrong:

* It joins a time as soon as *both buffers hold some data* for it, and then
  forgets it.  Records of that time that arrive later -- in a later batch,
  from another worker, in a later activation -- start fresh buffers and are
  only joined with what arrives after them: here ``('apple', 4)``, sent in the
  second installment, would never meet the price ``('apple', 50)`` of the
  first, and ``('apple', 3, 50)`` would be the only apple of epoch 0.  A time
  may only be joined once the frontiers say it is complete.
* It sends with ``output.session(&time)`` using a bare time: it never keeps a
  capability for the time, so it has no right to send there (Timely needs a
  capability; ``timelypy`` refuses anything else).  Here each time's buffers
  hold a retained capability, dropped after the join.
* A time seen on only one input stays buffered forever; here it is dropped
  (with its capability) when it completes.
* It reads both inputs with ``Pipeline``: with several workers, matching
  records on different workers never meet.  Here both inputs exchange by key.
"""

import sys
from collections.abc import Callable
from typing import Any

import timelypy
from timelypy.dataflow import Capability, Exchange, Frontier, OperatorBuilder, OperatorInput

Record = tuple[str, int]

#: Per epoch, installments of (left records, right records), all sent by worker 0.
EPOCHS: list[list[tuple[list[Record], list[Record]]]] = [
    [([("apple", 3)], [("apple", 50)]), ([("apple", 4), ("banana", 2)], [("banana", 20)])],
    [([("apple", 1)], []), ([], [("apple", 55), ("cherry", 70)])],
    [([], [("cherry", 70)]), ([("cherry", 5)], [("cherry", 75)])],
]


def barrier_join(left: timelypy.Stream, right: timelypy.Stream) -> timelypy.Stream:
    """Join ``(key, value)`` records of ``left`` and ``right`` with equal key and time."""
    builder = OperatorBuilder("BarrierJoin", left.scope)
    by_key = Exchange(lambda record: timelypy.stable_hash(record[0]))
    input1 = builder.new_input(left, by_key)
    input2 = builder.new_input(right, by_key)
    output, joined = builder.new_output()

    def constructor(_caps: list[Capability]) -> Callable[[list[Frontier]], None]:
        # time -> (capability for it, left records, right records)
        stash: dict[Any, tuple[Capability, list[Record], list[Record]]] = {}

        def read(input: OperatorInput, side: int) -> None:
            for cap, data in input:
                entry = stash.get(cap.time)
                if entry is None:
                    entry = stash[cap.time] = (cap.retain(), [], [])
                entry[side].extend(data)

        def logic(frontiers: list[Frontier]) -> None:
            read(input1, 1)
            read(input2, 2)
            for time in sorted(stash):
                if any(frontier.less_equal(time) for frontier in frontiers):
                    continue  # records at ``time`` may still arrive on some input
                cap, lefts, rights = stash.pop(time)
                right_by_key: dict[str, list[int]] = {}
                for key, value in rights:
                    right_by_key.setdefault(key, []).append(value)
                matches = [(key, a, b) for key, a in lefts for b in right_by_key.get(key, ())]
                output.session(cap).give_batch(sorted(matches))
                cap.drop()

        return logic

    builder.build(constructor)
    return joined


def show(time: int, record: tuple[str, int, int]) -> None:
    # One write per line: print() writes the text and its newline separately, and
    # another worker's thread could write in between.
    print(f"joined at {time}: {record!r}\n", end="", flush=True)


def program(worker: timelypy.Worker) -> None:
    lefts, rights = timelypy.InputHandle(), timelypy.InputHandle()
    probe = timelypy.ProbeHandle()

    def build(scope: timelypy.Scope) -> None:
        joined = barrier_join(scope.input_from(lefts), scope.input_from(rights))
        joined.inspect_time(show).probe_with(probe)

    worker.dataflow(build)
    for epoch, installments in enumerate(EPOCHS):
        if worker.index == 0:
            for left_records, right_records in installments:
                lefts.send_batch(list(left_records))
                rights.send_batch(list(right_records))
                lefts.flush()
                rights.flush()
                # Let the installment travel on its own before the next one is sent.
                for _ in range(3):
                    worker.step()
        lefts.advance_to(epoch + 1)
        rights.advance_to(epoch + 1)
        while probe.less_than(lefts.time):
            worker.step()


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
