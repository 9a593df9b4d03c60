"""The part of a :func:`timelypy.flow.run_cluster` that runs in one of its other processes.

``run_cluster`` starts its other processes one of two ways (see
:func:`timelypy.flow.run.spawn_cluster`):

* **fork** -- a copy of the calling process, which already holds the flow
  and every module it needs, runs :func:`run_part` directly;
* **spawn** -- ``python -m timelypy.flow.child`` reads from standard input
  an 8-byte length, a pickled header (the parent's ``sys.path``, the
  cluster's addresses, this process's index, the workers per process and
  the shared secret: plain data from the parent that started it, over a
  pipe only the two share) and then the cloudpickled flow and input
  config, and runs :func:`run_part`.

Either way captured items go to worker 0, in the parent.
"""

from __future__ import annotations

from typing import Any


def run_part(
    flow: Any,
    source: Any,
    recovery_config: Any,
    epoch_interval: float,
    metrics: tuple[int | None, str],
    addresses: list[str],
    proc_id: int,
    workers: int,
    secret: bytes,
) -> None:
    """Run process ``proc_id``'s workers of a ``run_cluster`` whose process 0 is the parent."""
    from timelypy.communication.cluster import ClusterTransport
    from timelypy.communication.config import Config
    from timelypy.communication.network import ClusterNetwork
    from timelypy.execute import initialize_from
    from timelypy.flow._metrics import built_hook, start_metrics
    from timelypy.flow.driver import flow_program

    metrics_port, metrics_host = metrics
    config = Config.cluster(workers, len(addresses), proc_id, addresses)
    transport = ClusterTransport(ClusterNetwork(config, secret))
    server = start_metrics(metrics_port, metrics_host, proc_id)

    def collected_on_worker_0(epoch: int, items: list[Any]) -> None:
        raise AssertionError("run_cluster collects captured items on worker 0")

    initialize_from(
        transport,
        config,
        flow_program(
            flow,
            source,
            collected_on_worker_0,
            collect_on=0,
            recovery_config=recovery_config,
            epoch_interval=epoch_interval,
            on_built=built_hook(server),
        ),
    )
