"""What runs inside each Spark task: one long-lived timelypy worker.

A barrier stage starts one task per worker, all at once.  Each task:

1. binds its cluster socket on a free port (on the address that routes to
   the driver) and registers it with the driver's :class:`Rendezvous`;
2. receives the ordered table of every worker's endpoint;
3. runs its worker with :func:`timelypy.execute.initialize_from` on a
   :class:`~timelypy.communication.cluster.ClusterTransport`, as process
   ``partition`` of ``workers`` processes of one worker each -- exactly the
   multi-process cluster, authenticated with the run's secret, so a task of
   an earlier execution cannot join;
4. yields the worker's results as the partition's output, and tells the
   driver ``done``.

If anything fails, the task sends the exception to the driver (which
cancels the whole gang and re-raises it) and then fails itself.

Functions and options travel to executors inside :class:`TaskSpec`, pickled
by Spark with the rest of the task.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from timelypy.communication.cluster import ClusterTransport
from timelypy.communication.config import Config
from timelypy.communication.network import ClusterNetwork
from timelypy.errors import ClusterError
from timelypy.execute import initialize_from
from timelypy_spark.rendezvous import TaskChannel, execution_tag, local_ip_towards

__all__ = ["TaskSpec", "barrier_task"]


@dataclass
class TaskSpec:
    """Everything a task needs, shipped with it by Spark."""

    run: str
    execution: int
    secret: bytes
    driver: str
    workers: int
    serializer: str = "msgpack"
    connect_timeout: float = 60.0
    #: ``program(worker, partition_iterator) -> result``
    program: Callable[[Any, Iterator[Any]], Any] | None = None
    #: Yield the program's result's items (True) or the result itself (False).
    flatten: bool = False
    options: dict[str, Any] = field(default_factory=dict)


def barrier_task(spec: TaskSpec) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The function Spark runs on every partition of the barrier stage."""

    def run_partition(partition: Iterable[Any]) -> Iterator[Any]:
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        index = context.partitionId()
        channel = TaskChannel(spec.driver, spec.secret, spec.run, spec.execution, index)
        reported: list[BaseException] = []

        def report(error: BaseException) -> None:
            if not reported:
                reported.append(error)
                channel.send_error(error, "".join(traceback.format_exception(error)))

        try:
            try:
                result = _run(spec, index, channel, iter(partition), report)
            except BaseException as exc:
                report(exc)
                raise
            channel.send("done")
        finally:
            channel.close()
        if spec.flatten:
            yield from result
        else:
            yield (index, result)

    return run_partition


def _run(
    spec: TaskSpec,
    index: int,
    channel: TaskChannel,
    partition: Iterator[Any],
    report: Callable[[BaseException], Any],
) -> Any:
    config = Config.cluster(
        workers=1, processes=spec.workers, process=index, serializer=spec.serializer
    )
    host = local_ip_towards(spec.driver.rpartition(":")[0])
    network = ClusterNetwork(
        config,
        spec.secret,
        run=execution_tag(spec.run, spec.execution),
        connect_timeout=spec.connect_timeout,
        bind=f"{host}:0",
    )
    try:
        channel.send("register", network.endpoint)
        deadline = time.monotonic() + spec.connect_timeout
        table = None
        while table is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ClusterError(
                    f"worker {index} got no peer table from the driver at {spec.driver} "
                    f"within {spec.connect_timeout:g} s"
                )
            message = channel.receive(min(remaining, 0.5))
            if message is not None and message.kind == "table":
                table = message.body
        network.connect(table)
    except BaseException:
        network.close()
        raise
    program = spec.program
    assert program is not None
    results = initialize_from(
        ClusterTransport(network), config, lambda worker: program(worker, partition), report
    )
    return results[0]
