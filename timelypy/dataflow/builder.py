"""``OperatorBuilder``: operators with any number of inputs and outputs.

This is Timely's ``builder_rc`` and the single way operators are made: the
generic operators (``unary``, ``binary``, ``source``, ``sink``, ...) and every
built-in are written with it, exactly as a user's operator would be.

1. ``builder = OperatorBuilder("Name", scope)``;
2. ``input = builder.new_input(stream, pact)`` for each input,
   ``output, stream = builder.new_output()`` for each output; optional
   ``connection`` arguments give path summaries other than "every input
   reaches every output without changing the time";
3. ``builder.build(constructor)``: ``constructor(capabilities)`` receives one
   capability per output (borrowed: released when it returns, unless
   retained) and returns ``logic(frontiers)``, called at every activation
   with the input frontiers.

>>> import timelypy
>>> from timelypy.dataflow import OperatorBuilder, Pipeline
>>> def build(scope):
...     numbers = scope.to_stream(range(5))
...     builder = OperatorBuilder("Double", scope)
...     inp = builder.new_input(numbers, Pipeline())
...     out, doubled = builder.new_output()
...     def constructor(caps):
...         def logic(frontiers):
...             for cap, data in inp:
...                 out.session(cap).give_batch([2 * x for x in data])
...         return logic
...     builder.build(constructor)
...     return doubled.capture()
>>> timelypy.example(build).extract()
[(0, [0, 2, 4, 6, 8])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from timelypy.dataflow.channels import Pact, Pipeline, Tee
from timelypy.dataflow.handles import Frontier, OperatorInfo, OperatorInput, OperatorOutput
from timelypy.dataflow.operator import LeafOperator, Logic
from timelypy.dataflow.stream import Stream
from timelypy.errors import PortError
from timelypy.order import identity_summary
from timelypy.progress.frontier import Antichain, MutableAntichain
from timelypy.progress.operate import ChangeSink, FrontierInterest
from timelypy.progress.reachability import normalize_connectivity

if TYPE_CHECKING:
    from timelypy.dataflow.capability import Capability
    from timelypy.dataflow.scope import Scope

__all__ = ["OperatorBuilder"]

T = TypeVar("T")


class OperatorBuilder:
    """Builds one operator in ``scope``; see the module documentation."""

    def __init__(self, name: str, scope: Scope) -> None:
        self.scope = scope
        worker = scope.worker
        self.index = scope.subgraph.allocate_child_index()
        self.global_id = worker.new_identifier()
        self.address = (*scope.subgraph.path, self.index)
        self._op = LeafOperator(name, worker.index, worker.peers, scope.minimum)
        self._identity = identity_summary(scope.timestamp_type)
        # per input: output -> list of summaries
        self._connection: list[dict[int, list[Any]]] = []
        self._built = False
        scope.log_operates(self.global_id, self.address, name)

    @property
    def name(self) -> str:
        """The operator's name."""
        return self._op.name

    @property
    def info(self) -> OperatorInfo:
        """Facts about the operator (address, worker, activator)."""
        return OperatorInfo(self._op, self.address, self.global_id, self.scope.worker)

    def shape(self) -> tuple[int, int]:
        """``(inputs, outputs)`` so far."""
        return self._op.inputs, self._op.outputs

    def new_input(
        self,
        stream: Stream[T],
        pact: Pact | None = None,
        connection: Mapping[int, Any] | None = None,
        interest: FrontierInterest = FrontierInterest.ALWAYS,
        *,
        frontier_changes: ChangeSink | None = None,
        frontier_reader: Callable[[MutableAntichain[Any]], None] | None = None,
    ) -> OperatorInput[T]:
        """Add an input reading ``stream`` through ``pact`` (default :class:`Pipeline`).

        ``connection`` maps output index to the path summaries from this
        input to it; by default the input reaches every existing output
        without changing the time.  ``interest`` says when a change of the
        input's frontier schedules the operator.  ``frontier_changes``, if
        given, is a list (or any object with ``append``) that receives every
        change to the input's frontier as a ``(time, diff)`` pair while the
        scope propagates progress, before the operator runs (probes and
        captures keep their own copy of the frontier this way).
        ``frontier_reader``, if given, is called with the input's live frontier
        (the scope's own antichain: read it, never change it) when the
        dataflow is built, and again if the scope replaces it; every
        enclosing scope keeps it current, so it can be read between worker
        steps without the operator being told of each change (probes do).
        """
        self._check_open()
        if stream.scope is not self.scope:
            raise PortError(
                f"operator {self.name!r}: the stream {stream!r} belongs to scope "
                f"{stream.scope.name!r}, not {self.scope.name!r}; use enter()/leave() "
                "to move streams between scopes"
            )
        pact = Pipeline() if pact is None else pact
        if not isinstance(pact, Pact):
            raise TypeError(f"operator {self.name!r}: {pact!r} is not a pact (Pipeline, Exchange)")
        op = self._op
        push, queue, _ = pact.connect(self.scope, op, op.inputs)
        handle: OperatorInput[T] = op.add_input(queue, interest)
        if frontier_changes is not None:
            op.watch_frontier(handle.index, frontier_changes)
        if frontier_reader is not None:
            op.read_frontier(handle.index, frontier_reader)
        stream.connect_to((self.index, handle.index), push)
        if connection is None:
            summaries = {o: [self._identity] for o in range(op.outputs)}
        else:
            summaries = {int(o): _as_list(s) for o, s in connection.items()}
        self._connection.append(summaries)
        return handle

    def new_output(
        self, connection: Mapping[int, Any] | None = None
    ) -> tuple[OperatorOutput[Any], Stream[Any]]:
        """Add an output; return its handle and the stream it produces.

        ``connection`` maps input index to the path summaries from it to
        this output; by default every existing input reaches it unchanged.
        The record type is the caller's to declare
        (``out: OperatorOutput[str]; out, words = builder.new_output()``).
        """
        self._check_open()
        op = self._op
        tee = Tee()
        handle = op.add_output(tee)
        output = handle.index
        if connection is None:
            # Every input reaches the new output unchanged -- unless the input
            # already declared a summary for it.
            for summaries in self._connection:
                summaries.setdefault(output, [self._identity])
        else:
            for i, summary in connection.items():
                if not 0 <= int(i) < len(self._connection):
                    raise PortError(
                        f"operator {self.name!r}: new_output connection names input {i}, "
                        f"but the operator has {len(self._connection)} input(s)"
                    )
                self._connection[int(i)][output] = _as_list(summary)
        return handle, Stream(self.scope, (self.index, output), tee)

    def set_notify_for(self, input_index: int, interest: FrontierInterest) -> None:
        """Choose when frontier changes on ``input_index`` schedule the operator."""
        self._op.notify[input_index] = interest

    def set_fuse(self, fuse: Callable[[Any, list[Any]], Any]) -> None:
        """Declare the operator fusible: ``fuse(time, records)`` does what its logic does.

        Only for an operator with one ``Pipeline`` input and at most one
        output whose logic treats each batch on its own, consumes every batch
        and keeps no capability: ``fuse`` must do to one batch exactly what an
        activation does with it and return the records sent on (or ``None``).
        See :mod:`timelypy.dataflow.fusion`.
        """
        self._op.fuse = fuse

    def set_passes_through(self) -> None:
        """Declare that the operator's output frontier is always its input's.

        Only for an operator with one input and one output, connected with
        the default (identity) summary, whose logic sends only under its
        input's capabilities and keeps no capability (an exchange's logic:
        ``output.forward(input)``).  Where
        the scope fuses operators, it then updates one frontier for both
        (:mod:`timelypy.dataflow.fusion`); a capability held at the output
        anyway is an error, raised when progress is propagated.
        """
        op = self._op
        if op.inputs != 1 or op.outputs != 1:
            raise PortError(
                f"operator {self.name!r}: only an operator with one input and one output "
                f"passes its input's frontier through (it has {op.inputs} and {op.outputs})"
            )
        op.passes_through = True

    def build_passive(self, constructor: Callable[[list[Capability]], Any]) -> None:
        """Finish an operator with no logic: only code outside it sends and moves capabilities.

        ``constructor(caps)`` runs once (retain the capabilities you will use);
        its result is ignored.  When such an operator's progress changes, the
        scope takes the counts in its next pass without scheduling it (an
        :class:`~timelypy.dataflow.input.InputHandle`'s operator is built so).
        """

        def passive(caps: list[Capability]) -> Callable[[list[Frontier]], Any]:
            constructor(caps)
            return _no_logic

        self._op.passive = True
        self._build(passive, reschedule=False)

    def build(
        self, constructor: Callable[[list[Capability]], Callable[[list[Frontier]], Any]]
    ) -> None:
        """Finish the operator: ``constructor(caps)`` returns ``logic(frontiers)``."""
        self._build(constructor, reschedule=False)

    def build_reschedule(
        self, constructor: Callable[[list[Capability]], Callable[[list[Frontier]], bool]]
    ) -> None:
        """Like :meth:`build`, but ``logic`` returns whether to run again in the next step."""
        self._build(constructor, reschedule=True)

    def _build(self, constructor: Callable[[list[Capability]], Logic], reschedule: bool) -> None:
        self._check_open()
        op = self._op
        connectivity = normalize_connectivity(
            self._connection, op.inputs, op.outputs, self.index, self.scope.timestamp_type
        )
        op.finish_shape(connectivity)
        op.reschedule = reschedule
        self.scope.subgraph.add_child(op, self.index)
        logic = op.run_constructor(constructor)
        if not callable(logic):
            raise TypeError(
                f"operator {self.name!r}: the constructor must return the operator's logic "
                f"(a function of the input frontiers), not {logic!r}"
            )
        op.logic = logic
        self._built = True

    def _check_open(self) -> None:
        if self._built:
            raise RuntimeError(f"operator {self.name!r} is already built")

    def __repr__(self) -> str:
        return f"OperatorBuilder({self.name!r}, address={self.address})"


def _as_list(summaries: Any) -> list[Any]:
    if isinstance(summaries, Antichain):
        return list(summaries)
    if summaries is None:
        return []
    if isinstance(summaries, Iterable) and not isinstance(summaries, tuple):
        return list(summaries)
    return [summaries]


def _no_logic(frontiers: list[Frontier]) -> None:
    """The logic of a passive operator: nothing."""
    return None
