"""A deterministic multi-worker run of one dataflow: :func:`simulate`.

``simulate(build, inputs, workers=n, schedule=turns)`` builds the dataflow
``build(stream)`` on ``n`` hand-stepped workers
(:func:`~timelypy.testing.stepping.stepped_workers`), feeds each input's
``(epoch, records)`` batches through an
:class:`~timelypy.dataflow.input.InputHandle` per worker, captures what
``build`` returns on every worker, and runs to completion, all from the
calling thread.  Nothing depends on a clock or on thread scheduling: the
same arguments give the same run, step for step.

**How inputs are dealt.**  Batch ``i`` of an input is sent by worker
``i % n``.  An input's epochs must never decrease, so each worker's share
never goes back either.  A worker advances its handle to a batch's epoch
when it sends that batch (a batch with no records only advances), and
closes the handle after its last batch, so an epoch stays open on a worker
until that worker moves past it.

**How workers interleave.**  A *schedule* is a list of :class:`Turn`:
``Turn(worker, feeds)`` makes worker ``worker % n`` do ``feeds`` feed
actions (send its next batch, or close an input it has finished; inputs
take turns) and then step once; a plain ``int`` ``w`` means ``Turn(w)``.
When the schedule runs out, the workers take turns round-robin, one feed
action and one step each, until everything is fed, and then step until
every dataflow has completed (or fail naming what holds it; see
:func:`~timelypy.testing.stepping.run_to_completion`).  The empty schedule
is therefore a plain round-robin run.  :mod:`timelypy.testing.strategies`
draws inputs, worker counts and schedules with hypothesis; because the run
is deterministic, a failing example hypothesis prints is a complete
reproduction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from timelypy.dataflow.input import InputHandle
from timelypy.dataflow.operators.capture import CaptureQueue
from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream
from timelypy.testing.batches import Batch, EpochFeed, check_batches, extract_all
from timelypy.testing.stepping import run_to_completion, stepped_workers

__all__ = ["Turn", "Simulation", "simulate", "normalize_schedule"]


class Turn(NamedTuple):
    """One turn of a schedule: worker ``worker`` (modulo the worker count) feeds, then steps.

    ``feeds`` is how many feed actions it takes first: each sends its next
    batch of an input, or closes an input whose batches it has all sent.

    >>> Turn(1)
    Turn(worker=1, feeds=1)
    """

    worker: int
    feeds: int = 1


def normalize_schedule(schedule: Sequence[Turn | int | tuple[int, int]]) -> list[Turn]:
    """``schedule`` as a list of :class:`Turn` (an ``int`` ``w`` is ``Turn(w)``).

    >>> normalize_schedule([0, (1, 0), Turn(2, 3)])
    [Turn(worker=0, feeds=1), Turn(worker=1, feeds=0), Turn(worker=2, feeds=3)]
    """
    if isinstance(schedule, (str, bytes)) or not isinstance(schedule, Sequence):
        raise TypeError(f"a schedule is a list of Turn (or worker ints), got {schedule!r}")
    turns: list[Turn] = []
    for position, entry in enumerate(schedule):
        if isinstance(entry, int) and not isinstance(entry, bool):
            turn = Turn(entry)
        elif isinstance(entry, tuple) and len(entry) == 2:
            turn = Turn(*entry)
        else:
            raise TypeError(
                f"schedule entry {position} must be a Turn(worker, feeds) or a worker int, "
                f"got {entry!r}"
            )
        for field, value in zip(Turn._fields, turn, strict=True):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"schedule entry {position}: {field} must be an int >= 0, got {value!r}"
                )
        turns.append(turn)
    return turns


@dataclasses.dataclass
class Simulation:
    """What :func:`simulate` captured, and how to run it again.

    ``queues[output][worker]`` is the :class:`~timelypy.CaptureQueue` of
    output ``output`` (in the order ``build`` returned them) on worker
    ``worker``.
    """

    workers: int
    inputs: list[list[tuple[Any, list[Any]]]]
    schedule: list[Turn]
    queues: list[list[CaptureQueue[Any]]]

    def extract(self, output: int = 0) -> list[tuple[Any, list[Any]]]:
        """Output ``output``'s records of every worker: ``[(time, sorted records)]``, sorted.

        As :meth:`CaptureQueue.extract <timelypy.CaptureQueue.extract>`, over
        all workers; times with no records are left out.
        """
        return extract_all(self._queues_of(output))

    def by_worker(self, output: int = 0) -> list[list[tuple[Any, list[Any]]]]:
        """Output ``output``'s ``extract()`` of each worker, by worker index."""
        return [queue.extract() for queue in self._queues_of(output)]

    def _queues_of(self, output: int) -> list[CaptureQueue[Any]]:
        if not isinstance(output, int) or not 0 <= output < len(self.queues):
            raise IndexError(
                f"output {output!r} does not exist: the dataflow has {len(self.queues)} "
                "captured output(s), numbered from 0"
            )
        return self.queues[output]

    def reproduction(self, build_name: str = "build") -> str:
        """The :func:`simulate` call that repeats this run, as Python source."""
        inputs = "".join(f", {batches!r}" for batches in self.inputs)
        return f"simulate({build_name}{inputs}, workers={self.workers}, schedule={self.schedule!r})"

    def assert_output(self, expected: Sequence[tuple[Any, Sequence[Any]]], output: int = 0) -> None:
        """Fail unless :meth:`extract` equals ``expected``, naming each time that differs.

        ``expected`` is ``[(time, records)]`` as from a plain-Python model;
        records are compared sorted, and times with no records are ignored.
        The message ends with the call that reproduces the run.
        """
        got = dict(self.extract(output))
        wanted: dict[Any, list[Any]] = {}
        for time, records in expected:
            if records:
                wanted.setdefault(time, []).extend(records)
        wanted = {time: sorted(records) for time, records in wanted.items()}
        if got == wanted:
            return
        lines = []
        for time in sorted(set(got) | set(wanted)):
            if got.get(time) != wanted.get(time):
                lines.append(
                    f"  time {time!r}: expected {wanted.get(time, 'nothing')!r}, "
                    f"got {got.get(time, 'nothing')!r}"
                )
        raise AssertionError(
            f"output {output} differs from the expected records at {len(lines)} time(s):\n"
            + "\n".join(lines)
            + f"\n(on {self.workers} worker(s); by worker: {self.by_worker(output)!r})"
            + f"\nreproduce with: {self.reproduction()}"
        )


def _outputs(result: object) -> list[Stream[Any]]:
    if isinstance(result, Stream):
        return [result]
    if result is None:
        return []
    if isinstance(result, (list, tuple)) and all(isinstance(s, Stream) for s in result):
        return list(result)
    raise TypeError(
        "simulate's build must return the Stream to capture, a list or tuple of Streams, "
        f"or None; it returned {result!r}"
    )


def simulate(
    build: Callable[..., Any],
    *inputs: Sequence[Batch[Any]],
    workers: int = 1,
    schedule: Sequence[Turn | int | tuple[int, int]] = (),
    limit: int = 2000,
    timestamp_type: Any = int,
) -> Simulation:
    """Run ``build(*streams)`` on ``workers`` hand-stepped workers; return what it output.

    ``build`` gets one stream per input (each a list of ``(epoch, records)``
    batches) and returns the stream to capture (or several, or ``None``).
    See the module documentation for how batches are dealt to workers and
    how ``schedule`` interleaves them; ``limit`` bounds the rounds of
    stepping after the schedule.  An operator that raises stops the run
    with its exception (a note names the worker and turn, and whether it was
    feeding the inputs or stepping); one that never
    completes fails with :class:`AssertionError` naming what holds it.

    >>> def double(stream):
    ...     return stream.map(lambda x: 2 * x)
    >>> run = simulate(double, [(0, [1, 2]), (1, [3])], workers=2, schedule=[1, 1, 0])
    >>> run.extract()
    [(0, [2, 4]), (1, [6])]
    >>> run.by_worker()
    [[(0, [2, 4])], [(1, [6])]]
    """
    if not callable(build):
        raise TypeError(f"simulate needs a callable build(*streams), got {build!r}")
    if not inputs:
        raise TypeError(
            "simulate needs at least one input (a list of (epoch, records) batches); a "
            "dataflow without inputs can be run with stepped_workers and run_to_completion"
        )
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"simulate: workers must be an int >= 1, got {workers!r}")
    dealt = [check_batches(batches, f"input {k}") for k, batches in enumerate(inputs)]
    turns = normalize_schedule(schedule)
    team = stepped_workers(workers)
    feeds: list[list[EpochFeed[Any]]] = []
    queues: list[list[CaptureQueue[Any]]] = []
    for worker in team:
        handles: list[InputHandle[Any]] = [InputHandle() for _ in dealt]

        def dataflow(scope: Scope, handles: list[InputHandle[Any]] = handles) -> list[Any]:
            streams = [scope.input_from(handle) for handle in handles]
            return [stream.capture() for stream in _outputs(build(*streams))]

        captured = worker.dataflow(dataflow, name="simulate", timestamp_type=timestamp_type)
        if queues and len(captured) != len(queues):
            raise ValueError(
                f"simulate's build returned {len(queues)} stream(s) on worker 0 but "
                f"{len(captured)} on worker {worker.index}; every worker must build the same"
            )
        if not queues:
            queues = [[] for _ in captured]
        for output, queue in enumerate(captured):
            queues[output].append(queue)
        index = worker.index
        feeds.append(
            [
                EpochFeed(handle, batches[index::workers], f"input {k} on worker {index}")
                for k, (handle, batches) in enumerate(zip(handles, dealt, strict=True))
            ]
        )
    cursors = [0] * workers

    def feed_once(index: int, where: str) -> None:
        # Feeding runs the operators fused after the inputs (timelypy.dataflow.fusion).
        mine = feeds[index]
        try:
            for offset in range(len(mine)):
                position = (cursors[index] + offset) % len(mine)
                if mine[position].feed_next():
                    cursors[index] = (position + 1) % len(mine)
                    return
        except Exception as exc:
            exc.add_note(f"in simulate: feeding worker {index} of {workers} ({where})")
            raise

    def step(index: int, where: str) -> None:
        try:
            team[index].step()
        except Exception as exc:
            exc.add_note(f"in simulate: stepping worker {index} of {workers} ({where})")
            raise

    for position, turn in enumerate(turns):
        index = turn.worker % workers
        where = f"schedule turn {position}: {turn!r}"
        for _ in range(turn.feeds):
            feed_once(index, where)
        step(index, where)
    while any(not feed.done for mine in feeds for feed in mine):
        for index in range(workers):
            where = "round-robin after the schedule"
            feed_once(index, where)
            step(index, where)
    try:
        run_to_completion(team, limit)
    except Exception as exc:
        exc.add_note(
            f"in simulate: running {workers} worker(s) to completion after the schedule {turns!r}"
        )
        raise
    return Simulation(workers, dealt, turns, queues)
