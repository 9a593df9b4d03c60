"""A flow's Prometheus endpoint: what ``metrics_port=`` and ``--metrics-port`` start.

Every way of running a flow (:func:`~timelypy.flow.run`,
:func:`~timelypy.flow.run_cluster`, the ``cluster_main`` and ``run_main``
functions, ``python -m timelypy.flow``) takes a metrics port and starts the
endpoint of :mod:`timelypy.metrics` before the workers start, so that a
port that is taken is a clear error before anything runs; each worker is
added to it once its dataflow is built (the ``on_built`` hook of
:func:`~timelypy.flow.driver.flow_program`).  Process ``I`` of a cluster
serves on ``port + I``, so the processes of one machine never collide.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from timelypy import metrics
from timelypy.errors import ConfigError
from timelypy.flow.driver import FlowWorker

log = logging.getLogger("timelypy.flow")


def start_metrics(
    port: int | None, host: str = "127.0.0.1", process_index: int = 0
) -> metrics.MetricsServer | None:
    """Start process ``process_index``'s metrics endpoint for a flow (``port + process_index``).

    ``None`` for no ``port``; ``port`` 0 lets the system choose for every
    process.  Give the server back with ``close()`` when the run ends.
    """
    if port is None:
        return None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigError(f"metrics_port must be an int from 0 to 65535, got {port!r}")
    server = metrics.start(port + process_index if port else 0, host)
    log.info("process %d serves its flow's metrics at %s", process_index, server.url)
    return server


def built_hook(
    server: metrics.MetricsServer | None, also: Callable[[FlowWorker], Any] | None = None
) -> Callable[[FlowWorker], Any] | None:
    """The ``on_built`` of :func:`flow_program` that adds each worker to ``server`` (then ``also``).

    ``also`` if there is no server.
    """
    if server is None:
        return also

    def on_built(runner: FlowWorker) -> None:
        server.add(runner.worker)
        if also is not None:
            also(runner)

    return on_built
