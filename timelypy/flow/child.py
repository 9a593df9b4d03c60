"""A helper process of :func:`timelypy.flow.run_cluster` (``python -m timelypy.flow.child``).

It reads from standard input an 8-byte length, a pickled header (the
parent's ``sys.path``, the cluster's addresses, this process's index, the
workers per process and the shared secret: plain data from the parent that
started it, over a pipe only the two share) and then the cloudpickled flow
and input config, and runs its part of the cluster.  Captured items go to
worker 0, in the parent.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any


def main() -> None:
    """Run this process's workers of the parent's ``run_cluster``."""
    data = sys.stdin.buffer.read()
    length = int.from_bytes(data[:8], "big")
    path, addresses, proc_id, workers, secret = pickle.loads(data[8 : 8 + length])
    sys.path[:] = [entry for entry in path if entry not in sys.path] + sys.path
    import cloudpickle

    from timelypy.communication.cluster import ClusterTransport
    from timelypy.communication.config import Config
    from timelypy.communication.network import ClusterNetwork
    from timelypy.execute import initialize_from
    from timelypy.flow._metrics import built_hook, start_metrics
    from timelypy.flow.driver import flow_program

    flow, source, recovery_config, epoch_interval, (metrics_port, metrics_host) = cloudpickle.loads(
        data[8 + length :]
    )
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


if __name__ == "__main__":
    main()
