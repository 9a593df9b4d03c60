"""Operator metrics for Prometheus: records, activations, time and frontier lag, scraped live.

:meth:`Worker.metrics <timelypy.worker.Worker.metrics>` gives any program
the numbers as a dict.  This module serves them over HTTP in Prometheus's
text format, with the optional ``metrics`` extra (``pip install
'timelypy[metrics]'``, which installs ``prometheus_client``).

A flow asks for it with one argument: ``run(flow, metrics_port=9464)``
(also :func:`~timelypy.flow.run_cluster`,
:func:`~timelypy.flow.testing.run_main`, the ``cluster_main`` functions),
or ``python -m timelypy.flow app:flow --metrics-port 9464`` (or
``TIMELYPY_METRICS_PORT=9464``).  Process ``I`` of a cluster serves on
``port + I``, so the processes of one machine do not collide.  A program
written against workers calls :func:`serve` itself::

    def program(worker):
        timelypy.metrics.serve(worker, port=9464)   # on 127.0.0.1 unless host= says
        ...

Every worker of the process that calls :func:`serve` is scraped through
one endpoint (the first call for a port starts it).  The numbers are read
from the workers at scrape time, nothing is pushed: serving costs nothing
between scrapes.

Metrics (labels ``worker``, ``dataflow``, ``operator`` -- the operator's
name -- and ``address``):

``timelypy_operator_activations_total``
    how often the operator ran;
``timelypy_operator_records_in_total``, ``timelypy_operator_records_out_total``
    records it consumed and produced;
``timelypy_operator_seconds_total``
    seconds in the operator (its logic and its bookkeeping; counted from the
    first :func:`serve` on);
``timelypy_operator_frontier``
    the first time still possible at its inputs (``int`` times only);
``timelypy_dataflow_frontier_lag`` (labels ``worker``, ``dataflow``)
    how many epochs the slowest operator's frontier trails the fastest's.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

from timelypy.errors import ConfigError
from timelypy.progress.metrics import time_operators
from timelypy.worker import Worker

__all__ = [
    "serve",
    "start",
    "MetricsServer",
]

#: The port :func:`serve` and :func:`start` use unless told (Prometheus's
#: range for exporters).
DEFAULT_PORT = 9464

_OPERATOR_LABELS = ["worker", "dataflow", "operator", "address"]
_COUNTERS = (
    ("activations", "activations", "How often the operator ran."),
    ("records_in", "records_in", "Records the operator consumed."),
    ("records_out", "records_out", "Records the operator produced."),
    ("seconds", "seconds", "Seconds spent in the operator (logic and bookkeeping)."),
)

_lock = threading.Lock()
_servers: dict[tuple[str, int], MetricsServer] = {}
#: Every worker of this process that asked to be served (one collector per registry).
_workers: weakref.WeakSet[Worker] = weakref.WeakSet()
_registered: list[Any] = []


class MetricsServer:
    """One HTTP endpoint of this process and the workers it reports (see :func:`start`)."""

    def __init__(self, host: str, port: int, registry: Any) -> None:
        prometheus = _prometheus()
        #: How many :func:`start` calls hold it open (:meth:`close` gives one back).
        self._users = 0
        self.registry = registry if registry is not None else prometheus.REGISTRY
        if not any(known is self.registry for known in _registered):
            self.registry.register(_Collector(_workers))
            _registered.append(self.registry)
        try:
            server, self._thread = prometheus.start_http_server(
                port, addr=host, registry=self.registry
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc}; choose another port"
            ) from exc
        self._server = server
        #: The address it listens on (the port the system chose when asked for 0).
        self.host, self.port = host, int(server.server_port)

    @property
    def url(self) -> str:
        """Where Prometheus scrapes it: ``http://host:port/metrics``."""
        return f"http://{self.host}:{self.port}/metrics"

    def add(self, worker: Worker) -> None:
        """Report ``worker`` too (it is dropped when it is garbage)."""
        with _lock:
            _workers.add(worker)

    def close(self) -> None:
        """Give back one :func:`start`; the last one stops listening."""
        with _lock:
            self._users -= 1
            if self._users > 0:
                return
            for key in [key for key, server in _servers.items() if server is self]:
                del _servers[key]
        self._server.shutdown()
        self._server.server_close()


def start(port: int = DEFAULT_PORT, host: str = "127.0.0.1", registry: Any = None) -> MetricsServer:
    """Start the endpoint ``http://host:port/metrics`` of this process (or join it); return it.

    Workers are added with :meth:`MetricsServer.add`; :meth:`MetricsServer.close`
    gives the endpoint back (it stops when every ``start`` gave it back).  It
    switches operator timing on for the process
    (:func:`~timelypy.progress.metrics.time_operators`).  ``port=0`` starts a
    new endpoint on a port the system chooses (read it from the server's
    ``port``).  A ``ConfigError`` says when ``prometheus_client`` is missing,
    the port is not a port, or it is taken.
    """
    return _start(port, host, registry, join_any=False)


def _start(port: int, host: str, registry: Any, join_any: bool) -> MetricsServer:
    """:func:`start`; with ``join_any``, port 0 joins the first endpoint port 0 started."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigError(f"the metrics port must be an int from 0 to 65535, got {port!r}")
    time_operators()  # Prometheus users want the seconds too
    with _lock:
        server = _servers.get((host, port)) if port or join_any else None
        if server is None:
            server = MetricsServer(host, port, registry)
            _servers[(host, server.port)] = server
            if port == 0 and join_any and (host, 0) not in _servers:
                _servers[(host, 0)] = server
        server._users += 1
        return server


def serve(
    worker: Worker, port: int = DEFAULT_PORT, host: str = "127.0.0.1", registry: Any = None
) -> MetricsServer:
    """Serve ``worker``'s operator metrics at ``http://host:port/metrics``; return the server.

    It switches operator timing on for the process
    (:func:`~timelypy.progress.metrics.time_operators`).  The first call for a
    ``(host, port)`` in this process starts the
    endpoint (in a daemon thread) and registers a collector in ``registry``
    (``prometheus_client``'s default registry unless given); later calls add
    their worker to it, so every worker thread of the process may call it.
    ``port=0`` lets the system choose (read it from the server's ``port``;
    the workers that ask for port 0 share one endpoint).  A ``ConfigError``
    says when ``prometheus_client`` is missing or the port is taken.
    """
    if not isinstance(worker, Worker):
        raise ConfigError(f"timelypy.metrics.serve needs a Worker, got {worker!r}")
    server = _start(port, host, registry, join_any=True)
    server.add(worker)
    return server


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "timelypy.metrics needs prometheus_client: pip install 'timelypy[metrics]' "
            "(or read Worker.metrics() yourself)"
        ) from None
    return prometheus_client


class _Collector:
    """Reads the workers' metrics at scrape time (``prometheus_client``'s custom collector)."""

    def __init__(self, workers: weakref.WeakSet[Worker]) -> None:
        self._workers = workers

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counters = {
            key: CounterMetricFamily(f"timelypy_operator_{name}", text, labels=_OPERATOR_LABELS)
            for key, name, text in _COUNTERS
        }
        frontier = GaugeMetricFamily(
            "timelypy_operator_frontier",
            "The first time still possible at the operator's inputs (int times).",
            labels=_OPERATOR_LABELS,
        )
        lag = GaugeMetricFamily(
            "timelypy_dataflow_frontier_lag",
            "Epochs by which the slowest operator's frontier trails the fastest's.",
            labels=["worker", "dataflow"],
        )
        for worker in sorted(list(self._workers), key=lambda w: w.index):
            snapshot = worker.metrics()
            for flow in snapshot["dataflows"]:
                for op in flow["operators"]:
                    labels = [
                        str(op["worker"]),
                        str(op["dataflow"]),
                        op["name"],
                        ".".join(map(str, op["address"])),
                    ]
                    for key, family in counters.items():
                        family.add_metric(labels, op[key])
                    times = op["frontier"]
                    if times and all(type(t) is int for t in times):
                        frontier.add_metric(labels, min(times))
                if flow["frontier_lag"] is not None:
                    lag.add_metric(
                        [str(snapshot["worker"]), str(flow["dataflow"])], flow["frontier_lag"]
                    )
        yield from counters.values()
        yield frontier
        yield lag
