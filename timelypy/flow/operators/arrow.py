"""Arrow-native steps: streams whose items are ``pyarrow.RecordBatch``es.

A stream of record batches carries its rows in Arrow's columnar memory;
the steps here hand each batch whole to your function, which works on it
with ``pyarrow.compute`` (kernels written in C++), so no row becomes a
Python object on the way:

* :func:`map_arrow` -- one batch in, one batch out;
* :func:`flat_map_arrow` -- one batch in, any number of batches out;
* :func:`filter_arrow` -- keep the rows where your function's boolean
  mask is true;
* :func:`aggregate_arrow` -- group by key columns and combine
  (``sum``, ``count``, ``count_all``, ``min``, ``max``) per epoch, in
  Arrow: each worker aggregates its own batches
  (``pyarrow.Table.group_by(...).aggregate(...)``), splits the partial
  result by key owner, sends each owner its part, and the owners combine
  the parts and emit the epoch's totals as record batches when it closes.

**A record batch is one item.**  Progress, exchange and the engine's
batches count record batches, not their rows: a step's function is
called once per record batch, a stateless step's output batch is one
item per record batch it returns, and a batch of the flow (what the
runtime moves between operators) holds whole record batches.  Rows never
cross a step one by one.

**Exact types.**  Every item of an Arrow step's input must be a
``pyarrow.RecordBatch`` (not a ``Table``: ``table.to_batches()`` gives
its batches), and so must everything your function returns; anything else
stops the flow with a :class:`~timelypy.errors.StepError` naming the
step, the worker and the epoch.

**Epochs.**  A stateless step keeps each batch in its epoch;
:func:`aggregate_arrow` emits an epoch's totals once the epoch has closed
on every worker (as ``reduce_epoch`` does), each key once per epoch, on
the worker that owns it (``stable_hash`` of the key, as keyed steps route
a ``str`` state key), so the totals do not depend on the number of
workers.

On Spark, ``timelypy_spark.run_flow(..., row_type="arrow")`` feeds a
DataFrame's own Arrow batches into the flow and, with a DataFrame result,
writes the record batches the flow captures as the result's batches
(``docs/arrow.md``).

pyarrow is an optional dependency: ``pip install 'timelypy[arrow]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from timelypy.errors import FlowError, StepError
from timelypy.flow._graph import BatchFn, RuntimeSpec, StatelessSpec
from timelypy.flow.dataflow import Dataflow, Stream
from timelypy.flow.steps import step_error
from timelypy.hashing import stable_hash

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "map_arrow",
    "flat_map_arrow",
    "filter_arrow",
    "aggregate_arrow",
    "AGGREGATIONS",
]

#: The aggregation functions :func:`aggregate_arrow` combines across batches and
#: workers, with the function that combines their partial results.
AGGREGATIONS: dict[str, str] = {
    "sum": "sum",
    "count": "sum",
    "count_all": "sum",
    "min": "min",
    "max": "max",
}

#: Partial rows an aggregation holds per epoch before it combines them again.
COMPACT_ROWS = 1 << 16

_INSTALL = (
    "Arrow-native steps need pyarrow, which is not importable here ({error}); "
    "install it with `pip install 'timelypy[arrow]'`"
)


def _pyarrow() -> Any:
    """``pyarrow``, or an ImportError that names the extra to install."""
    try:
        import pyarrow
        import pyarrow.compute
    except ImportError as exc:
        raise ImportError(_INSTALL.format(error=exc)) from exc
    return pyarrow


def _flow(up: Stream[Any], step_id: str, operator: str) -> Dataflow:
    if not isinstance(up, Stream):
        raise FlowError(f"step {step_id!r} ({operator}) takes a Stream as its upstream, got {up!r}")
    return up.flow


def _callable(func: object, what: str, step_id: str, operator: str) -> None:
    if not callable(func):
        raise FlowError(f"step {step_id!r} ({operator}) needs a callable {what}, got {func!r}")


def _check_in(items: list[Any], batch_type: type, step_id: str, operator: str) -> None:
    """Raise if an item is not a ``RecordBatch`` (one C pass over the types)."""
    if list(map(type, items)).count(batch_type) != len(items):
        bad = next(item for item in items if type(item) is not batch_type)
        hint = " (a Table's batches are table.to_batches())" if hasattr(bad, "to_batches") else ""
        raise TypeError(
            f"step {step_id!r} ({operator}) takes pyarrow.RecordBatch items, got a "
            f"{type(bad).__name__}{hint}"
        )


def _check_out(results: list[Any], batch_type: type, what: str) -> None:
    if list(map(type, results)).count(batch_type) != len(results):
        bad = next(item for item in results if type(item) is not batch_type)
        hint = "; a Table's batches are table.to_batches()" if hasattr(bad, "to_batches") else ""
        raise TypeError(f"{what} must return pyarrow.RecordBatch, got a {type(bad).__name__}{hint}")


def _stateless(operator: str, step_id: str, up: Stream[Any], fn: BatchFn, what: str) -> Stream[Any]:
    flow = _flow(up, step_id, operator)
    spec = StatelessSpec(lambda worker, full: fn, what)
    return flow.add_step(operator, step_id, [up], options=spec)[0]


def map_arrow(
    step_id: str, up: Stream[pa.RecordBatch], mapper: Callable[[pa.RecordBatch], pa.RecordBatch]
) -> Stream[pa.RecordBatch]:
    """Replace each record batch with ``mapper(batch)``, a record batch.

    >>> import pyarrow as pa, pyarrow.compute as pc
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> batches = op.input("inp", flow, TestingSource([pa.record_batch({"x": [1, 2]})]))
    >>> out = map_arrow("double", batches, lambda b: pa.record_batch({"x": pc.multiply(b["x"], 2)}))
    >>> [batch.to_pydict() for batch in run_to_list(out)]
    [{'x': [2, 4]}]
    """
    _callable(mapper, "mapper", step_id, "map_arrow")
    batch_type = _pyarrow().RecordBatch
    name = getattr(mapper, "__name__", "the mapper")

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        _check_in(items, batch_type, step_id, "map_arrow")
        results = list(map(mapper, items))
        _check_out(results, batch_type, f"the mapper {name!r} of step {step_id!r}")
        return results

    return _stateless("map_arrow", step_id, up, fn, "the mapper")


def flat_map_arrow(
    step_id: str,
    up: Stream[pa.RecordBatch],
    mapper: Callable[[pa.RecordBatch], Iterable[pa.RecordBatch]],
) -> Stream[pa.RecordBatch]:
    """Replace each record batch with every record batch of ``mapper(batch)``.

    Empty record batches are dropped.

    >>> import pyarrow as pa
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> batches = op.input("inp", flow, TestingSource([pa.record_batch({"x": [1, 2, 3]})]))
    >>> halves = flat_map_arrow("halves", batches, lambda b: [b.slice(0, 2), b.slice(2)])
    >>> [batch.num_rows for batch in run_to_list(halves)]
    [2, 1]
    """
    _callable(mapper, "mapper", step_id, "flat_map_arrow")
    batch_type = _pyarrow().RecordBatch
    name = getattr(mapper, "__name__", "the mapper")

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        _check_in(items, batch_type, step_id, "flat_map_arrow")
        results = [out for batch in items for out in mapper(batch)]
        _check_out(results, batch_type, f"the mapper {name!r} of step {step_id!r}")
        return [batch for batch in results if batch.num_rows]

    return _stateless("flat_map_arrow", step_id, up, fn, "the mapper")


def filter_arrow(
    step_id: str, up: Stream[pa.RecordBatch], predicate: Callable[[pa.RecordBatch], Any]
) -> Stream[pa.RecordBatch]:
    """Keep the rows of each record batch where ``predicate(batch)`` (a boolean array) is true.

    A null in the mask drops its row; a batch left with no rows is dropped.

    >>> import pyarrow as pa, pyarrow.compute as pc
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> batches = op.input("inp", flow, TestingSource([pa.record_batch({"x": [1, 2, 3]})]))
    >>> odd = filter_arrow("odd", batches, lambda b: pc.equal(pc.bit_wise_and(b["x"], 1), 1))
    >>> [batch.to_pydict() for batch in run_to_list(odd)]
    [{'x': [1, 3]}]
    """
    _callable(predicate, "predicate", step_id, "filter_arrow")
    pa = _pyarrow()
    batch_type = pa.RecordBatch

    def fn(epoch: int, items: list[Any]) -> list[Any]:
        _check_in(items, batch_type, step_id, "filter_arrow")
        out = []
        for batch in items:
            mask = predicate(batch)
            kind = getattr(mask, "type", None)
            if kind != pa.bool_():
                raise TypeError(
                    f"the predicate of step {step_id!r} must return a boolean pyarrow array "
                    f"(a mask of the batch's rows), got {type(mask).__name__}"
                    + ("" if kind is None else f" of {kind}")
                )
            kept = batch.filter(mask)
            if kept.num_rows:
                out.append(kept)
        return out

    return _stateless("filter_arrow", step_id, up, fn, "the predicate")


# -- aggregate_arrow ---------------------------------------------------------------


class _Aggregation:
    """How one :func:`aggregate_arrow` step groups, combines and names its columns."""

    def __init__(
        self, step_id: str, keys: Sequence[str], aggregations: Sequence[tuple[Any, str]]
    ) -> None:
        self.step_id = step_id
        self.keys = list(keys)
        # each batch's aggregates, and those that combine partial results
        self.partial: list[tuple[Any, str]] = []
        self.combine: list[tuple[str, str]] = []
        self.names: list[str] = []
        for entry in aggregations:
            if not (isinstance(entry, tuple) and len(entry) == 2):
                raise FlowError(
                    f"step {step_id!r} (aggregate_arrow): an aggregation is a (column, function) "
                    f"pair such as ('count', 'sum') or ([], 'count_all'), got {entry!r}"
                )
            column, function = entry
            if function not in AGGREGATIONS:
                raise FlowError(
                    f"step {step_id!r} (aggregate_arrow): {function!r} cannot be combined "
                    f"across batches and workers; use one of {sorted(AGGREGATIONS)} (a mean is "
                    "a sum and a count, divided after the step)"
                )
            if function == "count_all":
                if column not in ([], (), None):
                    raise FlowError(
                        f"step {step_id!r} (aggregate_arrow): count_all counts rows and takes "
                        f"no column: write ([], 'count_all'), not {entry!r}"
                    )
                column, name = [], "count_all"
            elif isinstance(column, str):
                name = f"{column}_{function}"
            else:
                raise FlowError(
                    f"step {step_id!r} (aggregate_arrow): the column of {entry!r} must be a "
                    "column name (str)"
                )
            if name in self.names or name in self.keys:
                raise FlowError(
                    f"step {step_id!r} (aggregate_arrow): two output columns would be named "
                    f"{name!r}"
                )
            self.partial.append((column, function))
            self.combine.append((name, AGGREGATIONS[function]))
            self.names.append(name)

    def of_batch(self, batch: Any) -> Any:
        """``batch``'s partial result: a ``Table`` of the keys, then one column per aggregate."""
        pa = _pyarrow()
        missing = [key for key in self.keys if key not in batch.schema.names]
        if missing:
            raise KeyError(
                f"the batch has no column {missing[0]!r} to group by (its columns: "
                f"{batch.schema.names})"
            )
        table = pa.Table.from_batches([batch])
        grouped = table.group_by(self.keys, use_threads=False).aggregate(self.partial)
        return grouped.select([*self.keys, *self.names])

    def merge(self, tables: list[Any]) -> Any:
        """Partial results (of the same keys) combined into one."""
        pa = _pyarrow()
        if len(tables) == 1:
            return tables[0]
        table = pa.concat_tables(tables)
        grouped = table.group_by(self.keys, use_threads=False).aggregate(self.combine)
        # a combined column is named "{name}_{function}": give it its own name back
        renamed = [f"{name}_{function}" for name, function in self.combine]
        return grouped.select([*self.keys, *renamed]).rename_columns([*self.keys, *self.names])

    def owners(self, table: Any, peers: int) -> list[int]:
        """Each row's owner: the worker a keyed step would route its key to."""
        columns = [table.column(key).to_pylist() for key in self.keys]
        if len(columns) == 1:
            return [stable_hash(value) % peers for value in columns[0]]
        return [stable_hash(row) % peers for row in zip(*columns, strict=True)]


class _Pending:
    """One epoch's partial results on one worker, combined again as they grow."""

    __slots__ = ("cap", "merged_rows", "rows", "tables")

    def __init__(self, cap: Any) -> None:
        self.cap = cap
        self.tables: list[Any] = []
        self.rows = 0
        self.merged_rows = 0

    def add(self, table: Any, aggregation: _Aggregation) -> None:
        self.tables.append(table)
        self.rows += table.num_rows
        # combined again once the new rows outgrow what was combined: O(n log n) in all
        if self.rows > max(COMPACT_ROWS, 2 * self.merged_rows):
            self.result(aggregation)

    def result(self, aggregation: _Aggregation) -> Any:
        """The epoch's partial results so far, combined into one ``Table`` (or ``None``)."""
        if not self.tables:
            return None
        merged = aggregation.merge(self.tables)
        self.tables = [merged]
        self.rows = self.merged_rows = merged.num_rows
        return merged


def _to_ipc(table: Any) -> bytes:
    """A table as Arrow IPC stream bytes (what a process exchange carries)."""
    pa = _pyarrow()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _from_ipc(data: Any) -> Any:
    pa = _pyarrow()
    if isinstance(data, pa.Table):
        return data
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _closed(pending: dict[int, _Pending], frontier: Any) -> list[int]:
    """The epochs of ``pending`` that the input frontier has passed, in order."""
    done = []
    for epoch in sorted(pending):
        if frontier.less_equal(epoch):
            break
        done.append(epoch)
    return done


def _aggregate_runtime(aggregation: _Aggregation) -> Callable[[Any, str, Any], Any]:
    """The runtime operators of one :func:`aggregate_arrow` step, for a worker."""

    def build(stream: Any, step_id: str, worker: Any) -> Any:
        from timelypy.dataflow.channels import Exchange, Pipeline

        pa = _pyarrow()
        batch_type = pa.RecordBatch
        peers = worker.peers

        def failed(exc: Exception, index: int, epoch: int, what: str) -> StepError:
            return step_error(step_id, index, epoch, what, exc)

        def local(cap: Any, info: Any) -> Callable[..., None]:
            # each worker's own batches, grouped and combined per epoch
            pending: dict[int, _Pending] = {}
            index = info.worker_index

            def logic(inp: Any, out: Any) -> None:
                for item_cap, items in inp:
                    epoch = item_cap.time
                    try:
                        _check_in(items, batch_type, step_id, "aggregate_arrow")
                        entry = pending.get(epoch)
                        if entry is None:
                            entry = pending[epoch] = _Pending(item_cap.retain())
                        for batch in items:
                            if batch.num_rows:
                                entry.add(aggregation.of_batch(batch), aggregation)
                    except Exception as exc:
                        raise failed(exc, index, epoch, "the aggregation") from exc
                for epoch in _closed(pending, inp.frontier):
                    entry = pending.pop(epoch)
                    try:
                        table = entry.result(aggregation)
                        parts = [] if table is None else _split(table, index)
                    except Exception as exc:
                        raise failed(exc, index, epoch, "the aggregation") from exc
                    if parts:
                        out.give_batch(entry.cap, parts)
                    entry.cap.drop()

            return logic

        def _split(table: Any, index: int) -> list[tuple[int, Any]]:
            if peers == 1:
                return [(0, table)]
            owners = pa.array(aggregation.owners(table, peers), pa.int64())
            parts = []
            for owner in range(peers):
                part = table.filter(pa.compute.equal(owners, owner))
                if part.num_rows:
                    # to another worker as Arrow IPC bytes (a process exchange carries
                    # bytes), to itself by reference
                    parts.append((owner, part if owner == index else _to_ipc(part)))
            return parts

        def totals(cap: Any, info: Any) -> Callable[..., None]:
            # every worker's partial results of the keys this worker owns, per epoch
            pending: dict[int, _Pending] = {}
            index = info.worker_index

            def logic(inp: Any, out: Any) -> None:
                for item_cap, items in inp:
                    epoch = item_cap.time
                    entry = pending.get(epoch)
                    if entry is None:
                        entry = pending[epoch] = _Pending(item_cap.retain())
                    try:
                        for _, part in items:
                            entry.add(_from_ipc(part), aggregation)
                    except Exception as exc:
                        raise failed(exc, index, epoch, "the aggregation") from exc
                for epoch in _closed(pending, inp.frontier):
                    entry = pending.pop(epoch)
                    try:
                        table = entry.result(aggregation)
                    except Exception as exc:
                        raise failed(exc, index, epoch, "the aggregation") from exc
                    if table is not None and table.num_rows:
                        out.give_batch(entry.cap, table.combine_chunks().to_batches())
                    entry.cap.drop()

            return logic

        partials = stream.unary_frontier(Pipeline(), f"{step_id}.local", local)
        pact = Pipeline() if peers == 1 else Exchange(_owner)
        return partials.unary_frontier(pact, step_id, totals)

    return build


def _owner(item: tuple[int, Any]) -> int:
    return item[0]


def aggregate_arrow(
    step_id: str,
    up: Stream[pa.RecordBatch],
    keys: str | Sequence[str],
    aggregations: Sequence[tuple[Any, str]],
) -> Stream[pa.RecordBatch]:
    """Group each epoch's rows by ``keys`` and aggregate; emit the totals as the epoch closes.

    ``aggregations`` are ``(column, function)`` pairs as
    ``pyarrow.Table.group_by(keys).aggregate`` takes them, with a function
    of :data:`AGGREGATIONS` (``sum``, ``count``, ``min``, ``max``, or
    ``([], "count_all")`` for the rows per key).  The output batches have
    the key columns, then one column per aggregation named as pyarrow
    names it (``"{column}_{function}"``, ``"count_all"``).  Each key's
    total comes out once per epoch, on the worker that owns the key, at
    that epoch.

    >>> import pyarrow as pa
    >>> import timelypy.flow.operators as op
    >>> from timelypy.flow.testing import TestingSource, run_to_list
    >>> flow = Dataflow("doc")
    >>> rows = [pa.record_batch({"word": ["a", "b", "a"], "n": [1, 2, 3]})]
    >>> batches = op.input("inp", flow, TestingSource(rows))
    >>> totals = aggregate_arrow("sum", batches, "word", [("n", "sum"), ([], "count_all")])
    >>> sorted(tuple(row.values()) for b in run_to_list(totals) for row in b.to_pylist())
    [('a', 4, 2), ('b', 2, 1)]
    """
    _pyarrow()
    flow = _flow(up, step_id, "aggregate_arrow")
    names = [keys] if isinstance(keys, str) else list(keys)
    if not names or not all(isinstance(key, str) for key in names):
        raise FlowError(
            f"step {step_id!r} (aggregate_arrow) groups by one or more column names, got {keys!r}"
        )
    if not aggregations:
        raise FlowError(f"step {step_id!r} (aggregate_arrow) needs at least one aggregation")
    aggregation = _Aggregation(step_id, names, list(aggregations))
    spec = RuntimeSpec(_aggregate_runtime(aggregation))
    return flow.add_step("aggregate_arrow", step_id, [up], options=spec)[0]
