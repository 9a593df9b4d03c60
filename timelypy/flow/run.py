"""Running a flow: ``run``, ``run_cluster``, ``cluster_main``.

* :func:`run` -- one worker; yields ``(epoch, item)`` for every captured
  item as its batch is captured, so an unending input streams results.
* :func:`run_cluster` -- ``proc_count`` processes of
  ``worker_count_per_proc`` worker threads on this machine, talking over
  ZeroMQ on 127.0.0.1 with a fresh shared secret; this process is process
  0 (its worker 0 reads ``inp`` and gathers the captured items), the
  others are started for the run and stopped after it.  Returns the
  captured ``(epoch, item)`` pairs.
* :func:`cluster_main` -- one process of a cluster you start yourself (on
  several machines: ``addresses`` lists every process's ``host:port``, the
  same list in each); captures must have output configs.

All three run the same program on every worker
(:func:`timelypy.flow.driver.flow_program`) through :func:`timelypy.execute`.
A user function that raises on any worker stops every worker and is
re-raised here, with notes naming the step and the worker.

``metrics_port=PORT`` serves the operators' metrics to Prometheus while the
flow runs (:mod:`timelypy.metrics`): process ``I`` of a cluster at
``http://127.0.0.1:PORT+I/metrics`` (``metrics_host`` to listen elsewhere);
``0`` lets the system choose (:attr:`FlowRun.metrics_port` says which).
"""

from __future__ import annotations

import datetime
import gc
import logging
import multiprocessing
import os
import pickle
import secrets
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import cloudpickle

from timelypy.communication.cluster import ClusterTransport
from timelypy.communication.config import Config, free_ports
from timelypy.communication.network import ClusterNetwork
from timelypy.communication.transport import ProcessTransport, Transport
from timelypy.errors import ClusterError, ConfigError, FlowError
from timelypy.execute import execute, initialize_from
from timelypy.flow._metrics import built_hook, start_metrics
from timelypy.flow._part import run_part
from timelypy.flow.dataflow import Dataflow
from timelypy.flow.driver import (
    EPOCH_INTERVAL,
    FlowCancelled,
    PairsInput,
    flow_program,
)
from timelypy.flow.inputs import InputConfig
from timelypy.recovery import RecoveryConfig

__all__ = ["run", "run_cluster", "cluster_main", "cli_main", "FlowRun"]

log = logging.getLogger("timelypy.flow")

#: Captured items waiting for the caller of ``run`` before the workers wait for it.
QUEUE_ITEMS = 65_536
#: Seconds the helper processes of ``run_cluster`` get to exit after the run.
CHILD_EXIT_SECONDS = 10.0
#: Seconds process 0 of a completed run_cluster waits for its helper processes to end
#: (their workers' last commits), saying so every CHILD_FINISH_WARN_SECONDS.
CHILD_FINISH_SECONDS = 300.0
CHILD_FINISH_WARN_SECONDS = 10.0

_DONE = object()


class _Handoff:
    """Captured batches from the worker thread to the caller's, bounded by item count.

    A :class:`queue.Queue` takes two locks and a notify per batch, which is
    most of the cost of one-item epochs; here a batch is a ``deque.append``
    (atomic under the GIL) and the events are touched only when the other
    side is asleep.  Each side clears its event, checks again, then waits,
    so a wake-up is never lost.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.batches: deque[Any] = deque()
        # Items put and items taken: each written by one thread only, so no lock.
        self.put_items = 0
        self.got_items = 0
        self.ready = threading.Event()
        self.room = threading.Event()

    def put(self, message: Any, size: int, cancelled: threading.Event) -> bool:
        """Queue ``message``; wait while too many items are queued. False if cancelled."""
        self.batches.append(message)
        self.put_items += size
        if not self.ready.is_set():
            self.ready.set()
        while self.put_items - self.got_items > self.limit:
            if cancelled.is_set():
                return False
            self.room.clear()
            if self.put_items - self.got_items > self.limit:
                self.room.wait(0.1)
        return not cancelled.is_set()

    def get(self, timeout: float) -> Any:
        """The next message, or ``_EMPTY`` after ``timeout`` seconds without one."""
        batches = self.batches
        if not batches:
            self.ready.clear()
            if not batches and not self.ready.wait(timeout):
                return _EMPTY
            if not batches:
                return _EMPTY
        message = batches.popleft()
        if type(message) is tuple:
            self.got_items += len(message[1])
        if not self.room.is_set() and self.put_items - self.got_items <= self.limit // 2:
            self.room.set()
        return message


_EMPTY = object()


def _input(flow: Dataflow, inp: Any) -> InputConfig | PairsInput | None:
    """The input of ``flow``'s chain: ``inp`` (an input config or pairs) or the chain's own.

    ``None`` for a flow without a chain: its inputs are its ``op.input`` steps.
    """
    if not isinstance(flow, Dataflow):
        raise FlowError(f"expected a timelypy.flow.Dataflow, got {flow!r}")
    own = flow.input_config
    if not flow.has_chain:
        if inp is not None:
            raise FlowError(
                "this flow has no chain for an input to feed: its inputs are its op.input "
                "steps; run it without one (run(flow))"
            )
        return None
    if inp is None:
        if own is None:
            raise FlowError(
                "the flow has no input: pass one (an iterable of (epoch, item), or an input "
                "config) or start the flow with flow.input(step_id, input_config)"
            )
        return own
    if own is not None:
        raise FlowError(
            "the flow already has an input step; run it without another input (run(flow))"
        )
    if isinstance(inp, InputConfig):
        return inp
    if isinstance(inp, (str, bytes)) or not isinstance(inp, Iterable):
        raise FlowError(
            f"the input must be an iterable of (epoch, item) pairs or an input config, got {inp!r}"
        )
    return PairsInput(inp)


def _epoch_interval(value: Any) -> float:
    if value is None:
        return EPOCH_INTERVAL
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else value
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        raise FlowError(f"epoch_interval must be a timedelta >= 0, got {value!r}")
    return float(seconds)


def _positive(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")
    return value


class FlowRun(Iterator[tuple[int, Any]]):
    """A running flow's captured ``(epoch, item)`` pairs; what :func:`run` returns.

    The flow starts running when this is made, in a background thread (and
    helper processes), and runs to its end whether or not the items are
    read: a ``FlowRun`` dropped before anything was read from it waits for
    the flow to finish (discarding the items), so ``run(flow)`` as a
    statement runs the flow.  Once you start reading, dropping it (or
    :meth:`close`) stops the flow instead: ``for ... in run(flow): break``
    ends an unending input.  :meth:`wait` runs the flow to its end and
    raises its error, if it failed.
    """

    #: The port this process serves the flow's metrics on (``None`` without ``metrics_port``).
    metrics_port: int | None = None

    def __init__(
        self,
        flow: Dataflow,
        inp: Any,
        proc_count: int,
        worker_count_per_proc: int,
        recovery_config: RecoveryConfig | None,
        epoch_interval: Any = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        start_method: str = "auto",
    ) -> None:
        self._closed = True
        self._reading = False
        source = _input(flow, inp)
        _positive(proc_count, "proc_count")
        _positive(worker_count_per_proc, "worker_count_per_proc")
        _check_start_method(start_method)  # on one process too: a typo is found at once
        interval = _epoch_interval(epoch_interval)
        _recovery(recovery_config)
        self._metrics = start_metrics(metrics_port, metrics_host)
        if self._metrics is not None:
            self.metrics_port = self._metrics.port
        captured = self._captured = _Handoff(QUEUE_ITEMS)
        cancelled = self._cancelled = threading.Event()

        def collect(epoch: int, items: list[Any]) -> None:
            if not captured.put((epoch, items), len(items), cancelled):
                raise FlowCancelled("the caller stopped reading the flow's output")

        program = flow_program(
            flow,
            source,
            collect,
            collect_on=0,
            cancelled=cancelled,
            recovery_config=recovery_config,
            epoch_interval=interval,
            on_built=built_hook(self._metrics),
        )
        self._children: list[_Helper] = []
        self._watching = threading.Event()
        self._watcher: threading.Thread | None = None
        transport: Transport
        if proc_count == 1:
            config = Config.process(worker_count_per_proc)
            transport = ProcessTransport(worker_count_per_proc)
        else:
            try:
                config, secret, self._children = spawn_cluster(
                    flow,
                    source,
                    proc_count,
                    worker_count_per_proc,
                    recovery_config,
                    interval,
                    metrics_port=metrics_port,
                    metrics_host=metrics_host,
                    start_method=start_method,
                )
            except BaseException:
                if self._metrics is not None:
                    self._metrics.close()
                raise
            network = ClusterNetwork(config, secret)
            transport = ClusterTransport(network)
            self._watcher = threading.Thread(
                target=_watch_children,
                args=(self._children, network, self._watching),
                daemon=True,
            )
            self._watcher.start()

        def hand_over(message: Any) -> None:
            captured.put(message, 0, cancelled)

        # not self: the thread must not keep this object alive, or a caller that stops
        # reading (and drops it) never reaches __del__, which stops the flow
        children = self._children

        def body() -> None:
            try:
                initialize_from(transport, config, program)
                _await_children(children)
                hand_over(_DONE)
            except BaseException as exc:  # handed to the caller's thread
                hand_over(exc)

        self._thread = threading.Thread(target=body, name="timelypy-flow", daemon=True)
        self._closed = False
        self._thread.start()
        self._items: Iterator[tuple[int, Any]] | None = None

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        # a generator: resuming one costs less than a __next__ call per item
        self._reading = True
        if self._items is None:
            self._items = self._generate()
        return self._items

    def __next__(self) -> tuple[int, Any]:
        return next(iter(self))

    def _generate(self) -> Iterator[tuple[int, Any]]:
        captured = self._captured
        while not self._closed:
            message = captured.get(0.25)
            if message is _EMPTY:
                continue
            if message is _DONE:
                self.close()
                return
            if isinstance(message, BaseException):
                self.close()
                if isinstance(message, FlowCancelled):
                    return
                raise message
            epoch, items = message
            for item in items:
                yield epoch, item

    def wait(self) -> None:
        """Run the flow to its end, discarding the items not read yet; raise its error."""
        while not self._closed:
            message = self._captured.get(0.25)
            if message is _EMPTY:
                continue
            if message is _DONE or isinstance(message, BaseException):
                self.close()
                if isinstance(message, BaseException) and not isinstance(message, FlowCancelled):
                    raise message

    def close(self) -> None:
        """Stop the flow (if it still runs) and its helper processes."""
        if self._closed:
            return
        self._closed = True
        self._cancelled.set()
        if threading.current_thread() is not self._thread:  # (a collection in the flow's thread)
            self._thread.join(5.0)
        self._watching.set()
        if self._watcher is not None:
            self._watcher.join(1.0)  # gone, so the next run_cluster may fork again
        _reap(self._children)
        if self._metrics is not None:
            self._metrics.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        if not self._reading:
            try:
                self.wait()
            except BaseException:
                log.exception("the flow failed, and its result was never read")
        self.close()


def _stream(
    flow: Dataflow,
    inp: Any,
    proc_count: int,
    worker_count_per_proc: int,
    recovery_config: RecoveryConfig | None = None,
    epoch_interval: Any = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    start_method: str = "auto",
) -> FlowRun:
    """Run the flow in a background thread (and helper processes); iterate what it captures."""
    return FlowRun(
        flow,
        inp,
        proc_count,
        worker_count_per_proc,
        recovery_config,
        epoch_interval,
        metrics_port,
        metrics_host,
        start_method,
    )


def _recovery(config: Any) -> None:
    if config is not None and not isinstance(config, RecoveryConfig):
        raise FlowError(
            f"recovery_config must be a timelypy.recovery.RecoveryConfig, got {config!r}"
        )


def run(
    flow: Dataflow,
    inp: Any = None,
    *,
    recovery_config: RecoveryConfig | None = None,
    epoch_interval: datetime.timedelta | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> FlowRun:
    """Run ``flow`` on one worker; iterate ``(epoch, item)`` for each captured item.

    ``inp`` is an iterable of ``(epoch, item)`` pairs (see the helpers in
    :mod:`timelypy.flow.inputs`), or an input config; leave it out if the
    flow starts with an ``input`` step, or has only stream-graph inputs.
    Items come out as they are captured, in no particular order within an
    epoch.  The flow runs to its end even if nothing is read (see
    :class:`FlowRun`).  ``epoch_interval`` is the epoch length of the
    stream graph's sources (default 10 s).  ``metrics_port`` serves the
    operators' metrics to Prometheus while the flow runs (see
    :mod:`timelypy.metrics`).

    >>> from operator import add
    >>> from timelypy.flow import Dataflow, run
    >>> flow = Dataflow()
    >>> flow.flat_map(str.split)
    >>> flow.map(lambda word: (word, 1))
    >>> flow.reduce_epoch(add)
    >>> flow.capture()
    >>> for epoch, item in sorted(run(flow, [(0, "to be or not to be"), (1, "to do")])):
    ...     print(epoch, item)
    0 ('be', 2)
    0 ('not', 1)
    0 ('or', 1)
    0 ('to', 2)
    1 ('do', 1)
    1 ('to', 1)
    """
    return _stream(flow, inp, 1, 1, recovery_config, epoch_interval, metrics_port, metrics_host)


def run_cluster(
    flow: Dataflow,
    inp: Any = None,
    proc_count: int = 1,
    worker_count_per_proc: int = 1,
    *,
    recovery_config: RecoveryConfig | None = None,
    epoch_interval: datetime.timedelta | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    start_method: str = "auto",
) -> list[tuple[int, Any]]:
    """Run ``flow`` on ``proc_count`` local processes of ``worker_count_per_proc`` workers each.

    Returns every captured ``(epoch, item)`` (gathered on worker 0).  With
    ``proc_count`` 1 the workers are threads of this process; otherwise the
    extra processes are started here and stopped when the run ends or
    fails.  ``start_method``: ``"fork"`` copies this process (milliseconds;
    Linux, and only while this process runs one thread), ``"spawn"``
    starts a new interpreter and sends it the flow and its input config
    with cloudpickle (a few tenths of a second), ``"auto"`` forks where
    that is safe (see :func:`timelypy.flow.run.spawn_cluster`).
    ``inp`` as for :func:`run`: pairs are read by worker 0 only.
    ``metrics_port``: process ``I`` serves its metrics on ``metrics_port + I``.

    >>> from timelypy.flow import Dataflow, run_cluster
    >>> flow = Dataflow(); flow.map(lambda x: x + 1); flow.capture()
    >>> sorted(run_cluster(flow, enumerate(range(4)), worker_count_per_proc=2))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    """
    return list(
        _stream(
            flow,
            inp,
            proc_count,
            worker_count_per_proc,
            recovery_config,
            epoch_interval,
            metrics_port,
            metrics_host,
            start_method,
        )
    )


def cluster_main(
    flow: Dataflow,
    input_config: InputConfig | None = None,
    addresses: Sequence[str] | None = None,
    proc_id: int = 0,
    worker_count_per_proc: int = 1,
    *,
    recovery_config: RecoveryConfig | None = None,
    epoch_interval: datetime.timedelta | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    """Run this process's part (``proc_id``) of a cluster of ``len(addresses)`` processes.

    Start one such process per address, with the same ``addresses`` and
    the cluster's shared secret in ``TIMELYPY_SECRET`` (or
    ``TIMELYPY_SECRET_FILE``).  Every ``capture`` needs an output config:
    each worker writes its own items.  ``input_config`` may be left out if
    the flow starts with an ``input`` step.  ``metrics_port``: this process
    serves its metrics on ``metrics_port + proc_id``.
    """
    source = _input(flow, input_config)
    if isinstance(source, PairsInput):
        raise FlowError(
            "cluster_main needs an input config (ManualInputConfig or a PartitionedInputConfig), "
            "not an iterable of pairs"
        )
    _positive(worker_count_per_proc, "worker_count_per_proc")
    addresses = list(addresses) if addresses else []
    if len(addresses) > 1:
        config = Config.cluster(worker_count_per_proc, len(addresses), proc_id, addresses)
    else:
        if proc_id != 0:
            raise ConfigError(f"proc_id {proc_id} is out of range for a single process")
        config = Config.process(worker_count_per_proc)
    _recovery(recovery_config)
    interval = _epoch_interval(epoch_interval)
    server = start_metrics(metrics_port, metrics_host, proc_id)
    try:
        execute(
            config,
            flow_program(
                flow,
                source,
                None,
                collect_on=None,
                recovery_config=recovery_config,
                epoch_interval=interval,
                on_built=built_hook(server),
            ),
        )
    finally:
        if server is not None:
            server.close()


def cli_main(
    flow: Dataflow,
    *,
    workers_per_process: int = 1,
    process_id: int | None = None,
    addresses: Sequence[str] | None = None,
    epoch_interval: datetime.timedelta | None = None,
    recovery_config: RecoveryConfig | None = None,
    metrics_port: int | None = None,
) -> None:
    """Run ``flow`` as ``python -m timelypy.flow`` would (bytewax's ``bytewax.run.cli_main``).

    ``workers_per_process`` worker threads; with ``process_id`` and
    ``addresses`` (every process's ``host:port``), this process of a
    cluster, whose shared secret is in ``TIMELYPY_SECRET``.
    ``metrics_port`` as for :func:`cluster_main`.
    """
    from timelypy.flow.testing import cluster_main as run_process

    if process_id is None:
        if addresses:
            raise ConfigError("cli_main: addresses need a process_id")
        run_process(
            flow,
            [],
            0,
            epoch_interval=epoch_interval,
            recovery_config=recovery_config,
            worker_count_per_proc=workers_per_process,
            metrics_port=metrics_port,
        )
        return
    run_process(
        flow,
        list(addresses or []),
        process_id,
        epoch_interval=epoch_interval,
        recovery_config=recovery_config,
        worker_count_per_proc=workers_per_process,
        metrics_port=metrics_port,
    )


#: How ``run_cluster`` may start its other processes (see :func:`spawn_cluster`).
START_METHODS = ("auto", "fork", "spawn")
#: Seconds to wait for threads that have ended in Python to leave the operating system's
#: list before fork is judged unsafe.
THREADS_SETTLE_SECONDS = 0.05


def threads_now() -> int:
    """Count this process's operating-system threads (libzmq's and the JVM's too), on Linux.

    ``threading.active_count()`` sees only Python's threads; ``/proc`` sees
    every one.  Returns 0 where ``/proc`` cannot say (not Linux).
    """
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _check_start_method(requested: object) -> None:
    if requested not in START_METHODS:
        raise ConfigError(
            f"start_method must be one of {', '.join(map(repr, START_METHODS))}, got {requested!r}"
        )


def _start_method(requested: str) -> str:
    """``"fork"`` or ``"spawn"``: what ``requested`` means in this process, now."""
    _check_start_method(requested)
    if requested == "spawn":
        return "spawn"
    threads = threads_now()
    # A thread that Python has just joined may still be leaving the kernel's list: with
    # no other Python thread alive, give such stragglers a moment before spawning.
    settle = time.monotonic() + THREADS_SETTLE_SECONDS
    while threads > 1 and threading.active_count() == 1 and time.monotonic() < settle:
        time.sleep(0.001)
        threads = threads_now()
    if threads == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    if requested == "fork":
        raise ConfigError(
            "run_cluster(start_method='fork') needs a process with a single thread, "
            + (
                f"and this one has {threads} (a copy made by fork would hold only the calling "
                "thread, and locks other threads held would stay locked in it)"
                if threads
                else "which only Linux's /proc can confirm"
            )
            + "; use start_method='spawn' (or 'auto', which chooses)"
        )
    return "spawn"


class _Helper(Protocol):
    """What ``run_cluster`` needs of a helper process: ``subprocess.Popen``'s own names."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class _Forked:
    """A helper process made by ``fork``, with the part of ``Popen``'s interface we use."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process
        self._pid = process.pid or 0

    @property
    def pid(self) -> int:
        """The process ID."""
        return self._pid

    def poll(self) -> int | None:
        """The exit code (negative: the signal that ended it), or None while it runs."""
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Wait at most ``timeout`` seconds for the exit code; raise TimeoutExpired after."""
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"run_cluster process {self.pid}", timeout or 0.0)
        return code

    def terminate(self) -> None:
        """Send SIGTERM."""
        self._process.terminate()

    def kill(self) -> None:
        """Send SIGKILL."""
        self._process.kill()


def _forked_part(*args: Any) -> None:
    """The body of a forked helper: its inherited objects leave the garbage collector's view."""
    gc.freeze()  # the parent's heap, shared copy-on-write: never traversed here
    run_part(*args)


def spawn_cluster(
    flow: Dataflow,
    source: InputConfig | PairsInput | None,
    proc_count: int,
    worker_count_per_proc: int,
    recovery_config: RecoveryConfig | None = None,
    epoch_interval: float = EPOCH_INTERVAL,
    *,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    start_method: str = "auto",
) -> tuple[Config, bytes, list[_Helper]]:
    """Start processes ``1..proc_count-1`` of a local cluster; return process 0's config.

    ``start_method``:

    * ``"fork"`` -- each is a copy of this process (Linux, with this
      process on one thread): it holds the flow and every module already,
      so it starts in milliseconds, where a new interpreter takes a few
      tenths of a second to import timelypy.  Nothing is pickled.
    * ``"spawn"`` -- each is ``python -m timelypy.flow.child``; the flow,
      its input config, ``sys.path``, the addresses (fresh ports on
      127.0.0.1) and a fresh shared secret reach it through its standard
      input, never the environment or the command line.  Functions defined
      in your script travel by value (cloudpickle), so a script needs no
      ``if __name__ == "__main__"`` guard.
    * ``"auto"`` (the default) -- fork where that is safe (Linux, one
      thread in this process: no Spark gateway, metrics server or other
      thread whose locks a copy would inherit), else spawn.

    The children send their captures to worker 0, in this process.  With
    ``metrics_port``, process ``I`` serves its metrics on ``metrics_port + I``.
    """
    method = _start_method(start_method)
    ports = free_ports(proc_count)
    addresses = [f"127.0.0.1:{port}" for port in ports]
    secret = secrets.token_bytes(32)
    child_source: InputConfig | PairsInput | None = (
        PairsInput(()) if isinstance(source, PairsInput) else source
    )
    part = (child_source, recovery_config, epoch_interval, (metrics_port, metrics_host))
    children: list[_Helper] = []
    try:
        if method == "fork":
            context = multiprocessing.get_context("fork")
            for proc_id in range(1, proc_count):
                process = context.Process(
                    target=_forked_part,
                    args=(flow, *part, addresses, proc_id, worker_count_per_proc, secret),
                    name=f"run_cluster process {proc_id}",
                )
                process.start()
                children.append(_Forked(process))
        else:
            _spawn(flow, part, addresses, worker_count_per_proc, secret, children)
    except BaseException:
        _reap(children)
        raise
    config = Config.cluster(worker_count_per_proc, proc_count, 0, addresses)
    return config, secret, children


def _spawn(
    flow: Dataflow,
    part: tuple[Any, ...],
    addresses: list[str],
    workers: int,
    secret: bytes,
    children: list[_Helper],
) -> None:
    """Start ``python -m timelypy.flow.child`` for processes ``1..``, appending to ``children``."""
    try:
        program = cloudpickle.dumps((flow, *part))
    except Exception as exc:
        raise FlowError(
            f"run_cluster sends the flow and its input config to its other processes with "
            f"cloudpickle, which failed: {exc}"
        ) from exc
    for proc_id in range(1, len(addresses)):
        header = pickle.dumps((list(sys.path), addresses, proc_id, workers, secret))
        child = subprocess.Popen(
            [sys.executable, "-m", "timelypy.flow.child"], stdin=subprocess.PIPE
        )
        children.append(child)
        assert child.stdin is not None
        child.stdin.write(len(header).to_bytes(8, "big") + header + program)
        child.stdin.close()


def _watch_children(
    children: list[_Helper], network: ClusterNetwork, stop: threading.Event
) -> None:
    """Stop the run within a second if a helper process exits with an error."""
    while not stop.wait(0.2):
        for proc_id, child in enumerate(children, start=1):
            code = child.poll()
            if code is not None and code != 0:
                network.lose_peer(
                    proc_id,
                    ClusterError(
                        f"process {proc_id} of run_cluster exited with code {code} "
                        "(its error is printed above)"
                    ),
                )
                return


def _await_children(children: list[_Helper]) -> None:
    """The run completed here: wait for the helper processes to end, as they finish committing.

    Success is reported only once every helper ended with success: a helper
    still in its last recovery commit must not be stopped (the next
    execution would redo what that commit covers), nor its failure hidden.
    """
    deadline = time.monotonic() + CHILD_FINISH_SECONDS
    for proc_id, child in enumerate(children, start=1):
        while True:
            try:
                code = child.wait(min(CHILD_FINISH_WARN_SECONDS, deadline - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise ClusterError(
                        f"process {proc_id} of run_cluster did not end within "
                        f"{CHILD_FINISH_SECONDS:g} s of the flow's completion"
                    ) from None
                log.warning("process %d of run_cluster is still finishing; waiting", proc_id)
        if code != 0:
            raise ClusterError(
                f"process {proc_id} of run_cluster exited with code {code} after the flow "
                "completed (its error is printed above)"
            )


def _reap(children: list[_Helper]) -> None:
    """Wait a bounded time for ``run_cluster``'s helper processes; kill any that linger."""
    deadline = time.monotonic() + CHILD_EXIT_SECONDS
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("process %s of run_cluster did not exit; terminating it", child.pid)
            child.terminate()
            try:
                child.wait(2.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(2.0)


if __name__ == "__main__":  # ``python -m timelypy.flow.run``, as bytewax's ``-m bytewax.run``
    from timelypy.flow.__main__ import main

    sys.exit(main())
