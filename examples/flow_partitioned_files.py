"""A partitioned input over several log files, and a partitioned output, on several workers.

    python examples/flow_partitioned_files.py            # 3 worker threads
    python examples/flow_partitioned_files.py -w 2 -n 2  # 2 processes of 2 workers

Three web servers each wrote an access log (``web-a.csv``, ``web-b.csv``,
``web-c.csv``: ``time,path`` rows in time order).  :class:`AccessLogs` is a
:class:`~timelypy.flow.PartitionedInputConfig` whose partitions are the
files: ``list_parts`` lists the files a worker can reach (here every worker
reaches the whole directory), the first worker assigns each file to one
worker (its *primary*), and that worker alone reads it with ``build_part``.
The epoch of a row is its minute since 12:00, taken from the data, so every
file (and every worker) means the same thing by "epoch 2": rows of
12:02:xx.

The flow counts the hits per path and minute (``reduce_epoch``) and writes
each ``(path, hits)`` to one of two files chosen by the path's stable hash
(:class:`HitFiles`, a :class:`~timelypy.flow.PartitionedOutputConfig`),
then captures them for the caller too.  It prints::

    read web-a.csv 1 time(s)
    read web-b.csv 1 time(s)
    read web-c.csv 1 time(s)
    12:00 /cart 1
    12:00 /home 3
    ...
    hits-0.csv: ...
    hits-1.csv: ...

The files are each read exactly once whatever ``-w`` and ``-n`` are, so the
counts are the same; which worker reads which file, and the order in which
results arrive, are not fixed (the program sorts what it prints).
"""

from __future__ import annotations

import datetime
import os
import sys
import tempfile
from collections.abc import Iterator
from operator import add

from timelypy.flow import Dataflow, PartitionedInputConfig, PartitionedOutputConfig, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, InputItem
from timelypy.flow.outputs import OutputWriter

#: The access logs: file name -> rows of ``time,path``, in time order.
LOGS = {
    "web-a.csv": [
        "12:00:05,/home",
        "12:00:40,/cart",
        "12:01:10,/home",
        "12:01:55,/checkout",
        "12:02:30,/home",
    ],
    "web-b.csv": [
        "12:00:12,/home",
        "12:00:59,/home",
        "12:01:30,/cart",
        "12:03:01,/home",
    ],
    "web-c.csv": [
        "12:00:30,/login",
        "12:02:00,/home",
        "12:02:45,/cart",
        "12:03:30,/checkout",
    ],
}

#: Epoch 0 starts here; epoch ``e`` is the minute ``START + e``.
START = datetime.datetime(2024, 5, 1, 12, 0)


def minute_of(clock: str) -> int:
    """The epoch of a row's ``HH:MM:SS`` time: whole minutes since :data:`START`."""
    at = datetime.datetime.combine(START.date(), datetime.time.fromisoformat(clock))
    return int((at - START).total_seconds() // 60)


class AccessLogs(PartitionedInputConfig):
    """One partition per ``*.csv`` file of ``directory``; items are the rows' paths."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def list_parts(self, worker_index: int, worker_count: int) -> list[str]:
        """The files this worker can reach: all of them, on one machine."""
        return sorted(name for name in os.listdir(self.directory) if name.endswith(".csv"))

    def build_part(self, part: str, resume_epoch: int) -> Iterator[InputItem]:
        """Read file ``part``: ``AdvanceTo`` each new minute, ``Emit`` each row's path."""
        # Note the read (a file, so that every process of a cluster can append to it).
        with open(os.path.join(self.directory, "reads.log"), "a") as log:
            log.write(part + "\n")
        current = None
        with open(os.path.join(self.directory, part)) as rows:
            next(rows)  # the header
            for row in rows:
                clock, path = row.rstrip("\n").split(",")
                epoch = minute_of(clock)
                if epoch < resume_epoch:
                    continue  # done by an earlier execution
                if epoch != current:
                    yield AdvanceTo(epoch)
                    current = epoch
                yield Emit(path)


class HitFiles(PartitionedOutputConfig):
    """Two files of ``minute,path,hits`` lines; a path always goes to the same one."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def list_parts(self, worker_index: int, worker_count: int) -> list[str]:
        """Every worker can write both files."""
        return ["hits-0.csv", "hits-1.csv"]

    def build_part(self, part: str) -> OutputWriter:
        """A writer for ``part``, called only on its primary worker."""
        target = os.path.join(self.directory, part)

        def write(epoch: int, item: tuple[str, int]) -> None:
            path, hits = item
            with open(target, "a") as out:
                out.write(f"{label(epoch)},{path},{hits}\n")

        return write


def label(epoch: int) -> str:
    """``HH:MM`` of the minute ``epoch``."""
    return (START + datetime.timedelta(minutes=epoch)).strftime("%H:%M")


def build_flow(logs: str, results: str) -> Dataflow:
    """Hits per path and minute, from the logs in ``logs``, written to ``results``."""
    flow = Dataflow()
    flow.input("access_logs", AccessLogs(logs))
    flow.map(lambda path: (path, 1), step_id="one_hit")
    flow.reduce_epoch(add, step_id="hits_per_minute")
    flow.capture(HitFiles(results), step_id="hit_files")
    flow.capture(step_id="to_caller")
    return flow


def write_logs(directory: str) -> None:
    """Write :data:`LOGS` into ``directory``, one CSV file per server."""
    for name, rows in LOGS.items():
        with open(os.path.join(directory, name), "w") as out:
            out.write("time,path\n")
            out.writelines(row + "\n" for row in rows)


def main(argv: list[str]) -> None:
    workers, processes = 3, 1
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in ("-w", "-n") and args:
            value = int(args.pop(0))
            workers, processes = (value, processes) if flag == "-w" else (workers, value)
        else:
            sys.exit(f"usage: {sys.argv[0]} [-w WORKERS_PER_PROCESS] [-n PROCESSES]")
    with tempfile.TemporaryDirectory() as logs, tempfile.TemporaryDirectory() as results:
        write_logs(logs)
        captured = run_cluster(
            build_flow(logs, results), proc_count=processes, worker_count_per_proc=workers
        )
        with open(os.path.join(logs, "reads.log")) as log:
            reads = log.read().split()
        for name in sorted(LOGS):
            print(f"read {name} {reads.count(name)} time(s)")
        for epoch, (path, hits) in sorted(captured):
            print(f"{label(epoch)} {path} {hits}")
        for part in sorted(os.listdir(results)):
            with open(os.path.join(results, part)) as lines:
                print(f"{part}: " + " ".join(sorted(lines.read().split())))


if __name__ == "__main__":
    main(sys.argv[1:])
