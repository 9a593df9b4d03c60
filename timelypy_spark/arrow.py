"""DataFrames in and out of timelypy workers as Arrow batches.

When both the source and the result of :func:`timelypy_spark.run` or
:func:`timelypy_spark.run_flow` are DataFrames, the barrier stage is
``frame.mapInArrow(task, schema, barrier=True)`` instead of
``frame.rdd.barrier().mapPartitions(task)``: the rows reach each task as
``pyarrow.RecordBatch``es and leave it as ``RecordBatch``es, with no
per-row pickling on either side.  This module is the conversion at the two
ends, done a batch at a time:

* :class:`BatchReader` turns each input batch into the plain Python values
  the row path gives (``tuple(row)``, ``row.asDict()`` or the ``Row``):
  one ``to_pylist()`` per column and a ``zip``, with a per-value fix only
  where Arrow's Python values differ from PySpark's (a ``TimestampType`` is
  a naive datetime in the task's local time, a nested struct a ``Row``, a
  map a ``dict``), using PySpark's own ``fromInternal``;
* :class:`BatchWriter` turns a list of output records (tuples or lists by
  position, dicts by field name, as ``createDataFrame`` takes them) into one
  ``RecordBatch`` of the output schema's Arrow types, column by column;
* :class:`RecordBatchWriter` passes on the ``RecordBatch``es an
  Arrow-native flow emits (``run_flow(..., row_type="arrow")``,
  :mod:`timelypy.flow.operators.arrow`) as the result's batches: a
  leading epoch column added, each column cast to the schema's type, no
  row ever a Python object;
* :func:`output_schema` reads the ``schema`` argument (a ``StructType``, a
  DDL string, or one atomic type such as ``"string"``, whose records are
  the values of one column ``value``);
* :func:`infer_schema` is Spark's own inference (``createDataFrame``) over a
  sample of output records, for ``output="frame"`` without a ``schema``,
  and a :class:`~timelypy.errors.ConfigError` that says how to pass
  ``schema=`` where it cannot decide.

Both ends run inside the task: the reader in the worker's thread as it
reads its input, the writer in the worker's thread as it emits (so a record
that does not fit the schema fails the worker like any user error, named
and re-raised on the driver), one ``STREAM_RECORDS`` piece at a time
(:mod:`timelypy_spark.task`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, repeat
from typing import Any

from timelypy.errors import ConfigError

__all__ = [
    "BatchReader",
    "BatchWriter",
    "RecordBatchWriter",
    "is_record_batch",
    "output_schema",
    "infer_schema",
    "struct_of",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICROSECOND = datetime.timedelta(microseconds=1)


def struct_of(spark: Any, schema: Any) -> Any:
    """``schema`` (a ``StructType``, another ``DataType`` or a DDL string) as a ``StructType``.

    An atomic type is one column named ``value``, as ``createDataFrame``
    makes it.  A DDL string is parsed as ``createDataFrame`` parses it
    (``_parse_datatype_string``), without making an empty DataFrame
    (tens of milliseconds of the JVM's time); one that does not parse is
    left to ``createDataFrame``, whose error names it.
    """
    from pyspark.sql.types import DataType, StructField, StructType

    if isinstance(schema, str):
        try:
            from pyspark.sql.types import _parse_datatype_string

            schema = _parse_datatype_string(schema)
        except Exception:
            return spark.createDataFrame([], schema).schema
    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, DataType):
        return StructType([StructField("value", schema, True)])
    raise ConfigError(
        f"schema must be a StructType or a DDL string such as 'word string, count long', "
        f"not {schema!r}"
    )


def output_schema(spark: Any, schema: Any) -> tuple[Any, bool]:
    """The result's ``StructType`` and whether records are bare values of one atomic column.

    ``schema="string"`` (or ``StringType()``) makes records the column's
    values, as ``createDataFrame(rdd, "string")`` does; a struct schema
    takes tuples, lists or dicts.
    """
    from pyspark.sql.types import DataType, StructType

    atomic = isinstance(schema, DataType) and not isinstance(schema, StructType)
    if isinstance(schema, str):
        try:
            from pyspark.sql.types import _parse_datatype_string

            atomic = not isinstance(_parse_datatype_string(schema), StructType)
        except Exception:  # left to struct_of, which names the schema
            atomic = False
    return struct_of(spark, schema), atomic


def _needs_fix(dtype: Any) -> bool:
    """Whether Arrow's ``to_pylist`` value of ``dtype`` differs from PySpark's row value."""
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType

    if isinstance(dtype, (TimestampType, StructType, MapType)):
        return True
    if isinstance(dtype, ArrayType):
        return _needs_fix(dtype.elementType)
    return False


def _from_arrow(dtype: Any) -> Callable[[Any], Any]:
    """A function from Arrow's Python value of ``dtype`` to the row path's (None stays None)."""
    from pyspark.sql.types import ArrayType, MapType, Row, StructType, TimestampType

    if isinstance(dtype, TimestampType):
        to_local = dtype.fromInternal

        def timestamp(value: Any) -> Any:
            if value is None:
                return None
            return to_local((value - _EPOCH) // _MICROSECOND)

        return timestamp
    if isinstance(dtype, StructType):
        names = dtype.names
        factory = Row(*names)
        fixes = [_from_arrow(field.dataType) for field in dtype.fields]

        def struct(value: Any) -> Any:
            if value is None:
                return None
            return factory(*(fix(value[name]) for name, fix in zip(names, fixes, strict=True)))

        return struct
    if isinstance(dtype, MapType):
        key = _from_arrow(dtype.keyType)
        item = _from_arrow(dtype.valueType)
        return lambda pairs: None if pairs is None else {key(k): item(v) for k, v in pairs}
    if isinstance(dtype, ArrayType) and _needs_fix(dtype.elementType):
        element = _from_arrow(dtype.elementType)
        return lambda values: None if values is None else [element(v) for v in values]
    return _same


def _same(value: Any) -> Any:
    return value


class BatchReader:
    """Records (as the row path gives them) from a task's ``pyarrow.RecordBatch``es.

    ``schema`` is the input DataFrame's ``StructType``; ``row_type`` is
    ``"tuple"``, ``"dict"`` or ``"row"``.  Shipped to every task.
    """

    def __init__(self, schema: Any, row_type: str = "tuple") -> None:
        if row_type not in ("tuple", "dict", "row"):
            raise ConfigError(f"row_type must be 'tuple', 'dict' or 'row', not {row_type!r}")
        self.schema = schema
        self.row_type = row_type

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        """The records of ``batches``, in order."""
        columns = self._columns()
        return chain.from_iterable(self.records(batch, columns) for batch in batches)

    def _columns(self) -> list[Callable[[Any], list[Any]]]:
        from pyspark.sql.types import TimestampType

        readers: list[Callable[[Any], list[Any]]] = []
        for field in self.schema.fields:
            dtype = field.dataType
            if isinstance(dtype, TimestampType):
                readers.append(_timestamps(dtype))
            elif _needs_fix(dtype):
                readers.append(_fixed(_from_arrow(dtype)))
            else:
                readers.append(_pylist)
        return readers

    def records(
        self, batch: Any, columns: list[Callable[[Any], list[Any]]] | None = None
    ) -> list[Any]:
        """The records of one batch: a ``to_pylist()`` per column, zipped into rows."""
        readers = self._columns() if columns is None else columns
        if batch.num_columns != len(readers):
            raise ConfigError(
                f"an input batch has {batch.num_columns} columns, the DataFrame's schema "
                f"{len(readers)}"
            )
        values = [read(column) for read, column in zip(readers, batch.columns, strict=True)]
        if not values:
            return [()] * batch.num_rows if self.row_type == "tuple" else []
        if self.row_type == "tuple":
            return list(zip(*values, strict=True))
        names = self.schema.names
        if self.row_type == "dict":
            return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]
        from pyspark.sql.types import Row

        factory = Row(*names)
        return [factory(*row) for row in zip(*values, strict=True)]


def _pylist(column: Any) -> list[Any]:
    return column.to_pylist()  # type: ignore[no-any-return]


def _fixed(fix: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    return lambda column: [fix(value) for value in column.to_pylist()]


def _timestamps(dtype: Any) -> Callable[[Any], list[Any]]:
    """A timestamp column as the row path gives it: naive datetimes in the task's local time."""
    import pyarrow as pa

    to_local = dtype.fromInternal

    def read(column: Any) -> list[Any]:
        micros = column.cast(pa.timestamp("us", "UTC")).cast(pa.int64()).to_pylist()
        return [None if value is None else to_local(value) for value in micros]

    return read


def _to_arrow(dtype: Any) -> Callable[[Any], Any] | None:
    """A function from a record's value of ``dtype`` to one ``pyarrow.array`` takes, or None.

    Timestamps follow ``createDataFrame``: a naive datetime is local time,
    an aware one its own; structs take tuples, lists or dicts.
    """
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType

    if isinstance(dtype, TimestampType):
        to_internal = dtype.toInternal
        return lambda value: None if value is None else to_internal(value)
    if isinstance(dtype, StructType):
        names = dtype.names
        fixes = [_to_arrow(field.dataType) or _same for field in dtype.fields]

        def struct(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, dict):
                items: Iterable[Any] = (value.get(name) for name in names)
            elif isinstance(value, (tuple, list)):
                items = value
            elif hasattr(value, "__dict__"):
                items = (value.__dict__.get(name) for name in names)
            else:
                raise TypeError(f"a struct value must be a tuple, list or dict, not {value!r}")
            return {name: fix(item) for name, fix, item in zip(names, fixes, items, strict=False)}

        return struct
    if isinstance(dtype, MapType):
        key = _to_arrow(dtype.keyType) or _same
        item = _to_arrow(dtype.valueType) or _same
        return lambda value: (
            None if value is None else [(key(k), item(v)) for k, v in dict(value).items()]
        )
    if isinstance(dtype, ArrayType):
        element = _to_arrow(dtype.elementType)
        if element is not None:
            return lambda values: None if values is None else [element(v) for v in values]
    return None


class BatchWriter:
    """One ``pyarrow.RecordBatch`` of ``schema`` from a list of output records.

    Records are tuples or lists (by position), dicts (by field name, a
    missing one null) or objects with those attributes, as
    ``createDataFrame(rdd, schema)`` takes them; with ``atomic`` each record
    is the value of the only column.  A record that does not fit raises a
    ``TypeError`` naming it, the column and the schema.  Shipped to every
    task.
    """

    def __init__(self, schema: Any, atomic: bool = False) -> None:
        self.schema = schema
        self.atomic = atomic
        self._arrow: Any = None

    def arrow_schema(self) -> Any:
        """The Arrow schema of the batches (the types Spark's ``mapInArrow`` expects)."""
        if self._arrow is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            self._arrow = to_arrow_schema(self.schema, timezone="UTC")
            self._fixes = [_to_arrow(field.dataType) for field in self.schema.fields]
        return self._arrow

    def __call__(self, records: list[Any]) -> Any:
        """The batch of ``records``."""
        import pyarrow as pa

        arrow = self.arrow_schema()
        names = self.schema.names
        columns = self._columns(records, names)
        arrays = []
        for name, fix, field, values in zip(names, self._fixes, arrow, columns, strict=True):
            try:
                if fix is not None:
                    values = [fix(value) for value in values]
                arrays.append(pa.array(values, type=field.type, from_pandas=False))
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                raise self._misfit(name, field, values, exc) from exc
        return pa.RecordBatch.from_arrays(arrays, schema=arrow)

    def _columns(self, records: list[Any], names: list[str]) -> list[Any]:
        width = len(names)
        if self.atomic:
            return [records]
        if not records:
            return [[] for _ in names]
        kinds = set(map(type, records))
        if all(issubclass(kind, (tuple, list)) for kind in kinds):
            lengths = set(map(len, records))
            if lengths == {width}:
                return list(zip(*records, strict=True))
            bad = next(record for record in records if len(record) != width)
            raise TypeError(
                f"the output record {bad!r} has {len(bad)} fields, but the output schema has "
                f"{width} ({', '.join(names)}); return records that match schema="
            )
        if all(issubclass(kind, dict) for kind in kinds):
            return [list(map(dict.get, records, repeat(name))) for name in names]
        rows = [self._row(record, names) for record in records]
        return list(zip(*rows, strict=True))

    def _row(self, record: Any, names: list[str]) -> tuple[Any, ...]:
        if isinstance(record, dict):
            return tuple(record.get(name) for name in names)
        if isinstance(record, (tuple, list)) and len(record) == len(names):
            return tuple(record)
        if hasattr(record, "__dict__") and not isinstance(record, (tuple, list)):
            return tuple(record.__dict__.get(name) for name in names)
        raise TypeError(
            f"the output record {record!r} does not fit the output schema "
            f"({', '.join(names)}): return tuples or lists of {len(names)} fields, or dicts "
            "by field name (or give an atomic schema such as 'string' for bare values)"
        )

    def _misfit(self, name: str, field: Any, values: Any, error: BaseException) -> TypeError:
        """A clear error for a column that Arrow refused, naming the first bad value."""
        import pyarrow as pa

        bad: Any = "?"
        for value in values:
            try:
                pa.array([value], type=field.type, from_pandas=False)
            except Exception:
                bad = value
                break
        return TypeError(
            f"an output value {bad!r} does not fit the column {name!r} "
            f"({self.schema[name].dataType.simpleString()}) of the output schema "
            f"{self.schema.simpleString()}: {error}; return values of the column's type or "
            "pass another schema="
        )


def is_record_batch(item: object) -> bool:
    """Whether ``item`` is a ``pyarrow.RecordBatch`` (without importing pyarrow for others)."""
    kind = type(item)
    return kind.__name__ == "RecordBatch" and kind.__module__.startswith("pyarrow")


class RecordBatchWriter:
    """The result's batches from ``(epoch, RecordBatch)`` pairs: no row leaves Arrow.

    ``schema`` is the result's ``StructType``; with an ``epoch_column`` its
    first field is that column, filled with each batch's epoch.  The
    batch's other columns are taken by name, in the schema's order, and
    cast to the schema's Arrow types (a column missing, or one that does
    not cast, raises a ``TypeError`` naming it).  Several pairs give one
    batch, their rows in order.  Shipped to every task.
    """

    def __init__(self, schema: Any, epoch_column: str | None) -> None:
        self.schema = schema
        self.epoch_column = epoch_column
        self._arrow: Any = None

    def arrow_schema(self) -> Any:
        """The Arrow schema of the batches (the types Spark's ``mapInArrow`` expects)."""
        if self._arrow is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            self._arrow = to_arrow_schema(self.schema, timezone="UTC")
        return self._arrow

    def __call__(self, pairs: list[tuple[int, Any]]) -> Any:
        """One ``RecordBatch`` of the result's schema from the pairs' batches."""
        import pyarrow as pa

        target = self.arrow_schema()
        batches = [self._one(epoch, batch, target) for epoch, batch in pairs]
        if len(batches) == 1:
            return batches[0]
        return pa.Table.from_batches(batches, target).combine_chunks().to_batches()[0]

    def _one(self, epoch: int, batch: Any, target: Any) -> Any:
        import pyarrow as pa

        if not is_record_batch(batch):
            raise TypeError(
                f"row_type='arrow' writes the flow's output items as the result's Arrow "
                f"batches: each must be a pyarrow.RecordBatch, got a {type(batch).__name__} "
                "(return record batches from the flow's last step, or leave row_type)"
            )
        names = batch.schema.names
        arrays = []
        for field in target:
            if field.name == self.epoch_column:
                arrays.append(pa.repeat(pa.scalar(epoch, field.type), batch.num_rows))
                continue
            if field.name not in names:
                raise TypeError(
                    f"an output record batch has no column {field.name!r} of the output schema "
                    f"{self.schema.simpleString()} (its columns: {names}); name the batch's "
                    "columns as the schema does"
                )
            column = batch.column(field.name)
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowException, TypeError, ValueError) as exc:
                    raise TypeError(
                        f"the output column {field.name!r} ({column.type}) does not cast to "
                        f"{field.type}, its type in the output schema "
                        f"{self.schema.simpleString()}: {exc}"
                    ) from exc
            arrays.append(column)
        return pa.RecordBatch.from_arrays(arrays, schema=target)


def infer_schema(spark: Any, records: list[Any], what: str = "run()") -> tuple[Any, bool]:
    """The ``StructType`` Spark infers for ``records``, and whether they are bare values.

    Spark's own inference: ``createDataFrame(records).schema`` (tuples give
    columns ``_1``, ``_2``...; dicts their keys, which Spark orders by
    name).  Records that are not tuples, lists, dicts or ``Row`` objects are
    one column, ``value``, and the second result is ``True``.  No records,
    or values Spark cannot type (only ``None`` values, types that do not merge,
    or a column Spark widened to strings that its other values do not fit),
    raise a :class:`ConfigError` that says to pass ``schema=``.
    """
    if not records:
        raise ConfigError(
            f"{what} cannot infer the output schema: the sample of the input gave no output "
            "records; pass schema= (a DDL string such as 'word string, count long', or a "
            "StructType)"
        )
    rows = records
    if not all(isinstance(record, (tuple, list, dict)) for record in records):
        if any(isinstance(record, (tuple, list, dict)) for record in records):
            raise ConfigError(
                f"{what} cannot infer the output schema: the sample's output records mix "
                f"rows and bare values ({_kinds(records)}); pass schema="
            )
        rows = [(record,) for record in records]
    try:
        struct = spark.createDataFrame(rows).schema
    except Exception as exc:
        raise ConfigError(
            f"{what} cannot infer the output schema from {len(records)} output records of a "
            f"sample of the input ({_kinds(records)}): {_first_line(exc)}; pass schema= (a "
            "DDL string such as 'word string, count long', or a StructType)"
        ) from None
    if rows is not records:
        from pyspark.sql.types import StructField, StructType

        struct = StructType([StructField("value", struct.fields[0].dataType, True)])
    atomic = rows is not records
    try:  # Spark widens mixed values to a string column, which then refuses the others
        BatchWriter(struct, atomic)(records)
    except TypeError as exc:
        raise ConfigError(
            f"{what} cannot infer the output schema: Spark inferred {struct.simpleString()} "
            f"from a sample of the output, but {_first_line(exc).split(':')[0]}: a column "
            "holds values of different types; pass schema="
        ) from None
    return struct, atomic


def _kinds(records: list[Any]) -> str:
    names = sorted({type(record).__name__ for record in records})
    return "records of type " + ", ".join(names)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
