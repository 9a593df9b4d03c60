"""The graph of a runtime dataflow, as one worker builds it.

:func:`runtime_graph` takes the function a program passes to
``worker.dataflow(build)`` and builds the dataflow on one thread worker
(``timelypy.execute(Config.thread(), ...)``) with the worker's ``"timely"``
event stream subscribed (:mod:`timelypy.events`):

* each :class:`~timelypy.events.OperatesEvent` is an operator or a scope,
  at its address (the dataflow's index, then child indices);
* each :class:`~timelypy.events.ChannelsEvent` is an edge inside the scope
  at ``scope_addr``, from ``(node, output port)`` to ``(node, input port)``,
  where node ``k > 0`` is the child at ``(*scope_addr, k)`` and node ``0``
  is the scope's own boundary: a source ``(0, p)`` is the scope's input
  ``p`` (a stream that entered), a target ``(0, p)`` its output ``p`` (a
  stream that leaves).  In the parent scope the same ports appear as the
  nested scope's node: ``(scope index, p)``.

The events say nothing of pacts or loops, so those are read from what was
built, through the :class:`~timelypy.dataflow.as_worker.AsWorker` protocol
the dataflow layer builds against.  The worker ``build`` sees records
every channel the worker allocates: an operator input whose pact asks for
a channel between workers (``Exchange``) gets one while the input is being
added, so that input is the reader's next port; an operator input that
gets none is a ``Pipeline``.  The dataflow it builds is handed back
instead of installed, so it never runs: drawing a dataflow has none of its
side effects (no ``inspect`` prints, no input is read) and ends even for a
dataflow that never would.  Its built scopes give the rest: which children
are nested scopes, which inputs advance every time they pass on (a loop's
feedback input: their incoming edges are the loop's feedback edges), and
the number of each scope's inputs and outputs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from timelypy.communication.config import Config
from timelypy.dataflow.scope import Scope, build_dataflow
from timelypy.events import ChannelsEvent, OperatesEvent, Registry
from timelypy.execute import execute
from timelypy.order import is_identity_summary
from timelypy.progress.operate import Operate
from timelypy.progress.subgraph import Subgraph
from timelypy.visualize.graph import Cluster, Edge, Graph, Node
from timelypy.worker import Worker

if TYPE_CHECKING:
    from timelypy.dataflow.as_worker import Closable, Push

__all__ = ["runtime_graph"]


def runtime_graph(
    build: Callable[[Scope], Any], *, name: str | None = None, timestamp_type: Any = int
) -> Graph:
    """The graph of the dataflow that ``build(scope)`` builds (built on one worker, not run).

    ``build`` is what a program passes to ``worker.dataflow(build)``;
    ``name`` and ``timestamp_type`` are ``worker.dataflow``'s.  Operators
    are keyed ``n`` and their address (``n0_3``), nested scopes ``s`` and
    theirs (``s0_2``), a nested scope's input and output ports
    ``n<address>_in<port>`` and ``n<address>_out<port>``.

    >>> def build(scope):
    ...     scope.to_stream(range(5)).map(lambda x: x * 2).exchange(lambda x: x).probe()
    >>> graph = runtime_graph(build)
    >>> [(node.key, node.name) for node in graph.nodes]
    [('n0_1', 'ToStream'), ('n0_2', 'Map'), ('n0_3', 'Exchange'), ('n0_4', 'Probe')]
    >>> [(edge.source, edge.target, edge.pact) for edge in graph.edges]
    [('n0_1', 'n0_2', 'Pipeline'), ('n0_2', 'n0_3', 'Exchange'), ('n0_3', 'n0_4', 'Pipeline')]
    """
    if not callable(build):
        raise TypeError(
            f"runtime_graph needs the function that builds a dataflow, build(scope), got {build!r}"
        )
    events: list[tuple[float, Any]] = []

    def program(worker: Worker) -> _RecordingWorker:
        registry = worker.log_register()
        registry.insert("timely", events.extend)
        recording = _RecordingWorker(worker)
        try:
            build_dataflow(recording, build, name=name, timestamp_type=timestamp_type)
        finally:
            registry.remove("timely")  # delivers what is buffered
        return recording

    (recording,) = execute(Config.thread(), program)
    dataflow = recording.dataflow
    if dataflow is None:  # pragma: no cover - build_dataflow always installs
        raise RuntimeError("the dataflow was built but never handed to the worker")
    return _Assembly(dataflow, recording.exchanges).graph(
        [event for _, event in events if isinstance(event, OperatesEvent)],
        [event for _, event in events if isinstance(event, ChannelsEvent)],
    )


class _RecordingWorker:
    """An ``AsWorker`` around a real worker that records channels and installs nothing.

    Everything is the real worker's (identifiers, channels, logging), except
    that ``allocate`` remembers which operator input each channel feeds and
    ``install_dataflow`` keeps the built dataflow instead of scheduling it.
    """

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        #: ``(reader, input port)`` of every channel allocated for an operator.
        self.exchanges: list[tuple[Operate, int]] = []
        #: The built dataflow, once ``install_dataflow`` was called.
        self.dataflow: Subgraph | None = None

    @property
    def index(self) -> int:
        """The worker's index."""
        return self._worker.index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self._worker.peers

    @property
    def config(self) -> Config:
        """The computation's configuration."""
        return self._worker.config

    def new_identifier(self) -> int:
        """The worker's next identifier."""
        return self._worker.new_identifier()

    def allocate_dataflow_index(self) -> int:
        """The worker's next dataflow index."""
        return self._worker.allocate_dataflow_index()

    def allocate(self, channel: int, reader: Operate) -> tuple[list[Push], deque[Any]]:
        """Allocate on the worker; remember the reader's input the channel will feed.

        A pact connects before its input is added (``Pact.connect(scope,
        operator, input_index)`` with ``input_index = operator.inputs``), so
        the channel feeds the reader's next input.  Scopes allocate their
        progress channel for themselves; that is not an input.
        """
        if not isinstance(reader, Subgraph):
            self.exchanges.append((reader, reader.inputs))
        return self._worker.allocate(channel, reader)

    def flush_sends(self) -> None:
        """Have the worker send what it buffered."""
        self._worker.flush_sends()

    @property
    def remote_flush(self) -> Callable[[], None] | None:
        """The worker's :attr:`~timelypy.Worker.remote_flush`."""
        return self._worker.remote_flush

    def activator_for(self, address: tuple[int, ...]) -> Callable[[], None]:
        """The worker's activator (there is none for a dataflow it never installed)."""
        return self._worker.activator_for(address)

    def activate_after(self, activate: Callable[[], None], delay: float) -> None:
        """Ask the worker for a delayed activation."""
        self._worker.activate_after(activate, delay)

    def log_register(self) -> Registry:
        """The worker's event streams."""
        return self._worker.log_register()

    def install_dataflow(self, index: int, dataflow: Subgraph) -> None:
        """Keep the built dataflow; do not schedule it."""
        self.dataflow = dataflow

    def register_input(self, handle: Closable) -> None:
        """Let the worker close an input the program leaves open, as it always does."""
        self._worker.register_input(handle)


def _children(subgraph: Subgraph) -> dict[tuple[int, ...], Operate]:
    """Every operator and scope in ``subgraph`` (itself included), by address."""
    found: dict[tuple[int, ...], Operate] = {subgraph.path: subgraph}
    for index, child in enumerate(subgraph.children):
        if index == 0 or child is None:
            continue
        if isinstance(child, Subgraph):
            found.update(_children(child))
        else:
            found[(*subgraph.path, index)] = child
    return found


def _key(prefix: str, address: tuple[int, ...]) -> str:
    return prefix + "_".join(str(i) for i in address)


def _label(name: str, address: tuple[int, ...]) -> str:
    return f"{name} [{', '.join(str(i) for i in address)}]"


def _advances_time(operator: Operate, port: int) -> bool:
    """Whether input ``port`` reaches outputs only through summaries that advance the time."""
    summaries = [s for antichain in operator.connectivity[port].values() for s in antichain]
    return bool(summaries) and not any(is_identity_summary(s) for s in summaries)


class _Assembly:
    """Turns a built dataflow and its events into a :class:`Graph`."""

    def __init__(self, dataflow: Subgraph, exchanges: list[tuple[Operate, int]]) -> None:
        self.root = dataflow
        self.built = _children(dataflow)
        self.exchanges = {(id(reader), port) for reader, port in exchanges}

    def cluster_key(self, address: tuple[int, ...]) -> str | None:
        """The key of the scope at ``address`` (``None`` for the root)."""
        return None if address == self.root.path else _key("s", address)

    def operator(self, address: tuple[int, ...]) -> Operate:
        found = self.built.get(address)
        if found is None:
            raise RuntimeError(
                f"the events name {address}, but the built dataflow has nothing there"
            )
        return found

    def graph(self, operates: list[OperatesEvent], channels: list[ChannelsEvent]) -> Graph:
        nodes: list[Node] = []
        clusters: list[Cluster] = []
        name = self.root.name
        for event in operates:
            address = event.addr
            if address == self.root.path:
                name = event.name
                continue
            built = self.operator(address)
            parent = self.cluster_key(address[:-1])
            if isinstance(built, Subgraph):
                enclosing = self.operator(address[:-1])
                assert isinstance(enclosing, Subgraph)
                key = _key("s", address)
                clusters.append(
                    Cluster(
                        key=key,
                        label=_label(event.name, address),
                        name=event.name,
                        address=address,
                        parent=parent,
                        iterative=built.timestamp_type != enclosing.timestamp_type,
                    )
                )
                for port in range(built.inputs):
                    nodes.append(self.port_node(built, event.name, "in", port))
                for port in range(built.outputs):
                    nodes.append(self.port_node(built, event.name, "out", port))
            else:
                nodes.append(
                    Node(
                        key=_key("n", address),
                        label=_label(event.name, address),
                        kind="operator",
                        name=event.name,
                        address=address,
                        parent=parent,
                    )
                )
        edges = [self.edge(event) for event in channels]
        return Graph(name, tuple(nodes), tuple(edges), tuple(clusters))

    def port_node(self, scope: Subgraph, name: str, side: str, port: int) -> Node:
        direction = "input" if side == "in" else "output"
        return Node(
            key=f"{_key('n', scope.path)}_{side}{port}",
            label=f"{direction} {port}",
            kind="scope_input" if side == "in" else "scope_output",
            name=name,
            address=scope.path,
            port=port,
            parent=self.cluster_key(scope.path),
        )

    def endpoint(self, scope: tuple[int, ...], node: int, port: int, side: str) -> str:
        """The node key of ``(node, port)`` in ``scope``; ``side`` is ``"out"`` for a source."""
        if node == 0:
            # the scope's own boundary: a source is one of its inputs, a target an output
            return f"{_key('n', scope)}_{'in' if side == 'out' else 'out'}{port}"
        address = (*scope, node)
        if isinstance(self.operator(address), Subgraph):
            # a nested scope: a source is one of its outputs, a target one of its inputs
            return f"{_key('n', address)}_{side}{port}"
        return _key("n", address)

    def edge(self, event: ChannelsEvent) -> Edge:
        scope = event.scope_addr
        (source_node, source_port), (target_node, target_port) = event.source, event.target
        pact: str | None = None
        feedback = False
        if target_node != 0:
            target = self.operator((*scope, target_node))
            if not isinstance(target, Subgraph):
                exchanged = (id(target), target_port) in self.exchanges
                pact = "Exchange" if exchanged else "Pipeline"
                feedback = _advances_time(target, target_port)
        return Edge(
            source=self.endpoint(scope, source_node, source_port, "out"),
            target=self.endpoint(scope, target_node, target_port, "in"),
            source_port=source_port,
            target_port=target_port,
            scope=self.cluster_key(scope),
            pact=pact,
            feedback=feedback,
        )
