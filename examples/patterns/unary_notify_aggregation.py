"""A Timely pattern: count records by key, per time, with ``unary_notify``.

    python examples/patterns/unary_notify_aggregation.py [-w N]

``count_by_key`` exchanges ``(key, value)`` records by key, so all records
of a key meet on one worker, counts them per time, and asks its notificator
to be told when each time is complete.  Only then -- when no record of that
time can still arrive from any worker -- does it send ``(key, count)`` for
the time's keys, at that time, and forget them.

Every worker sends the Rust sketch's records ``("apple", 1), ("banana", 1),
("apple", 2)``; with one worker it prints::

    Key: apple, Count: 2
    Key: banana, Count: 1

With ``-w N`` the counts are ``N`` times larger and each key is printed by
the worker it is routed to; the lines of different workers interleave freely.
Within a time a worker sends its keys in sorted order (the Rust
sketch's ``HashMap`` order is arbitrary).

Fixes to the Rust sketch this example ports:

* Its state (``let mut state = HashMap::new()``) is created *inside* the
  logic closure, so it is a fresh, empty map at every activation.  The
  notification for a time always comes in a later activation than the
  time's last records (their consumption is reported when the activation
  that read them ends; until then the time is not complete), so the counts
  are gone by then and that operator never sends anything.  Here the
  state lives in the enclosing function and survives across activations.
* It keys its state by key alone, keeping only the latest time a key was
  seen: records of one key at two times not yet complete would be merged and
  reported once, at the later time.  Here the state is per time, then per key.
* It routes by key *length* (``x.0.len()``), which is correct but sends all
  keys of one length to the same worker; here keys are routed by
  :func:`timelypy.stable_hash` (never Python's salted ``hash``).
* Its ``vec![]`` argument is commented "Initial frontier"; it is the list of
  times to be notified at without any input (none here).
"""

import sys
from typing import Any

import timelypy
from timelypy.dataflow import Exchange, Notificator, OperatorInput, OperatorOutput

#: The records every worker sends (the Rust sketch's).
RECORDS = [("apple", 1), ("banana", 1), ("apple", 2)]


def count_by_key(stream: timelypy.Stream) -> timelypy.Stream:
    """``(key, value)`` records to one ``(key, count)`` per key, per complete time."""
    counts_by_time: dict[Any, dict[str, int]] = {}

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for cap, data in input:
            counts = counts_by_time.get(cap.time)
            if counts is None:
                counts = counts_by_time[cap.time] = {}
                # Ask once per time; the notificator takes ownership of the capability.
                notificator.notify_at(cap.retain())
            for key, _value in data:
                counts[key] = counts.get(key, 0) + 1
        for cap, _count in notificator:
            counts = counts_by_time.pop(cap.time)
            output.session(cap).give_batch(sorted(counts.items()))

    return stream.unary_notify(
        Exchange(lambda record: timelypy.stable_hash(record[0])), "CountByKey", [], logic
    )


def show(record: tuple[str, int]) -> None:
    key, count = record
    # One write per line: print() writes the text and its newline separately, and
    # another worker's thread could write in between.
    print(f"Key: {key}, Count: {count}\n", end="", flush=True)


def program(worker: timelypy.Worker) -> None:
    worker.dataflow(lambda scope: count_by_key(scope.to_stream(RECORDS)).inspect(show))


if __name__ == "__main__":
    timelypy.execute_from_args(sys.argv, program)
