"""Timely's ``capture_send`` / ``capture_recv`` pair, in one program and without TCP.

    python examples/capture_replay.py [-w N]

Every worker builds two dataflows.  The first (``capture_send``) turns
``0..9`` into a stream on each worker and captures it: the stream's records
and its frontier changes become events in a :class:`timelypy.CaptureQueue`,
one queue per source worker.  The second (``capture_recv``) replays those
queues with :func:`timelypy.replay_into` -- worker ``w`` replays the sources
``i`` with ``i % peers == w``, as Timely's receiver divides the source
workers -- and prints each replayed record.  The replayed stream's frontier
follows the recorded one, so the second dataflow completes exactly when the
first has finished and its events have been read.

It prints ``replayed: 0`` ... ``replayed: 9`` once per source worker (``N``
times with ``-w N``).  Each worker prints its source's records in order, but
the lines of different workers interleave freely.

Timely's pair sends the events over TCP between two programs; here the
queues are plain shared objects, so all workers must be threads of this one
process (``-n`` is refused).
"""

import sys
from collections.abc import Sequence

import timelypy


def program(worker: timelypy.Worker, queues: Sequence[timelypy.CaptureQueue]) -> None:
    index, peers = worker.index, worker.peers

    def send(scope: timelypy.Scope) -> None:
        scope.to_stream(range(10)).capture_into(queues[index])

    def recv(scope: timelypy.Scope) -> None:
        mine = [queue for source, queue in enumerate(queues) if source % peers == index]
        # One write per line: print() writes the text and its newline separately, and
        # another worker's thread could write in between.
        timelypy.replay_into(mine, scope).inspect(
            lambda x: print(f"replayed: {x!r}\n", end="", flush=True)
        )

    worker.dataflow(send)
    worker.dataflow(recv)


def main(argv: Sequence[str]) -> None:
    config, _ = timelypy.Config.from_args(argv)
    if config.processes > 1:
        raise SystemExit("capture_replay shares its queues between threads: use -w, not -n")
    queues = [timelypy.CaptureQueue() for _ in range(config.peers)]
    timelypy.execute(config, lambda worker: program(worker, queues))


if __name__ == "__main__":
    main(sys.argv)
