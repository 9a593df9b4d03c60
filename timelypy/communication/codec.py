"""The wire codec: how messages become bytes between worker processes.

Within one process batches move by reference; a codec is only involved when a
message crosses a process boundary (the cluster allocator, over ZeroMQ).  Two
codecs exist, chosen by name with :func:`make_codec`:

* :class:`MsgpackCodec` (``"msgpack"``, the default) carries plain data --
  ``None``, ``bool``, ``int`` of any size, ``float``, ``str``, ``bytes``,
  ``tuple``, ``list``, ``dict``, ``set``, ``frozenset``,
  :class:`~timelypy.order.Product`, ``datetime`` and ``timedelta``, and the
  types registered with :func:`register_marked` (the flow layer's
  ``WindowMetadata``), nested freely -- and gives back *exactly* the types
  it was given (a ``datetime`` keeps its UTC offset, not its zone object).  Anything else raises
  :class:`~timelypy.errors.SerializationError` on the sending side.
* :class:`PickleCodec` (``"pickle"``, opt-in) carries any Python object, with
  cloudpickle.  Unpickling runs code: authenticated connections only.

Wire format (MsgpackCodec)
--------------------------
A message is one *tag* byte followed by one msgpack document::

    tag = kind | marked          kind: 0 value, 2 rows, 4 batch, 6 batch of rows
    value:          <obj>
    rows:           [n, column_0, ..., column_k-1]     -> a list of n k-tuples
    batch:          [time, records]                     -> (time, records)
    batch of rows:  [time, n, column_0, ..., column_k-1] -> (time, n k-tuples)

msgpack has one array type, so tuples need marking.  Values are packed with
``strict_types=True``: exact ``list``, ``dict``, ``str``, ``int``... pack
natively in C, and every other type reaches one ``default`` hook.  The hook
turns a ``tuple`` into the array ``[*items, TUPLE]``, a ``Product`` into
``[outer, inner, PRODUCT]``, a set into ``[*items, SET]`` (or ``FROZENSET``),
where the trailing marker is an empty ext value (codes 81-86; ``Ok(v)``
and ``Err(v)`` become ``[v, OK]`` and ``[v, ERR]``); an ``int``
outside the 64-bit range becomes ext 80 holding its two's-complement
big-endian bytes; a ``datetime`` becomes ext 87 (microseconds since
1970-01-01 UTC, or since 1970-01-01 for a naive one, and its UTC offset in
seconds), a ``timedelta`` ext 88 (microseconds); a registered type becomes
``[*fields, MARK]`` with its own marker code (90 and up).  Anything else is
an error.  On decode, ext markers become
sentinel objects and a ``list_hook`` rebuilds any array that ends in one.  The
``marked`` bit (1) says whether the document holds any marker at all; without
one the decoder skips the ``list_hook`` and msgpack runs at full C speed.
Dict keys of any supported hashable type (tuples, Products, frozensets) work
because the ``list_hook`` runs before the key is inserted.

Why columns
-----------
The common data message is a batch of flat tuples, ``[("word", 1), ...]``.  A
hook call per record costs several times plain ``msgpack.packb``, and checking
every field's type in Python costs more than packing.  Instead, when every
record is an exact ``tuple`` of one arity (checked by C-level passes:
``list(map(type, records)).count(tuple)`` and ``sum(map(len, records))``), the
batch is sent as its ``k`` columns, ``list(map(itemgetter(i), records))``,
packed strictly, so the packer itself checks every field in C and still
routes nested tuples, Products, big ints and unsupported values through the
hook.  The receiver rebuilds the records with ``list(zip(*columns))``.
Columns need no per-record array header, which pays for the transposition.
A list that is not uniform, or shorter than four, goes value by value.

Measured with ``.venv/bin/python benchmarks/codec_bench.py`` (encode + decode,
median of 9 interleaved rounds, garbage collector on as in a worker, 2 noisy
cores; ranges over three runs): time relative to plain
``msgpack.unpackb(msgpack.packb(batch), use_list=False)`` on the same batch in
the same run, which loses types (lists, tuples and Products all come back as
tuples):

==================================  =============  ============  ============
batch                               plain (lists)  MsgpackCodec  PickleCodec
==================================  =============  ============  ============
4096 ``(str, int)`` tuples          1.04-1.09x     1.18x         0.95-0.98x
1024 ``(str, int)`` tuples          1.26-1.31x     1.20-1.24x    1.02-1.05x
4096 ``int``                        1.03-1.04x     1.11-1.14x    1.81-1.95x
1024 dicts with a tuple key, a      n/a            3.06-3.18x    6.28-6.58x
list of 3 Products, a str, a float
==================================  =============  ============  ============

``plain (lists)`` is the default ``unpackb`` (arrays as lists); against it
the codec is about 1.1x on 4096 and 0.95x on 1024 ``(str, int)`` records.
(pickle memoises repeated strings, hence its speed on those batches.)

Alternatives measured side by side in one exploratory run (best of 15, same
4096-record ``(str, int)`` batch; this codec 1.22x there): a ``default`` hook
returning ``ExtType(code, packb(list(t)))`` per tuple 9.5x; this module's
marker hook without columns 3.6x; rows packed natively after a Python-level
scan of every field's type (``set(map(type, chain.from_iterable(records)))``)
1.5x; columns built with ``zip(*records)`` 1.35x (one live iterator per
record, so extra garbage collection).  An ``ExtType`` of two packed int64s for
``Product(int, int)`` measured slower than the marker (``ExtType`` and
``Product.__new__`` run Python code) and was dropped.

Known limits: msgpack's packer handles ``bytearray`` and ``memoryview``
natively even in strict mode, so they arrive as ``bytes``; a user value of
type ``msgpack.ExtType`` is passed through and must not use codes 80-86;
strings holding lone surrogates cannot be encoded (UTF-8).
"""

from __future__ import annotations

import abc
import datetime
import pickle
import struct
import threading
from collections.abc import Callable
from operator import itemgetter
from typing import Any, ClassVar

from msgpack import ExtType, Packer, unpackb

from timelypy.errors import ConfigError, SerializationError
from timelypy.order import Product
from timelypy.result import Err, Ok

__all__ = [
    "Codec",
    "MsgpackCodec",
    "PickleCodec",
    "make_codec",
    "register_marked",
    "CODEC_NAMES",
]

#: Bytes-like objects a codec decodes (ZeroMQ frames arrive as ``memoryview``).
Buffer = bytes | bytearray | memoryview

# -- wire constants (MsgpackCodec) --------------------------------------------

_MARKED = 1
_KIND_VALUE = 0
_KIND_ROWS = 2
_KIND_BATCH = 4
_KIND_BATCH_ROWS = 6
_HEADERS = tuple(bytes((tag,)) for tag in range(8))

#: Lists shorter than this go row by row: the column checks cost more than they save.
_MIN_COLUMNS = 4

_EXT_BIGINT = 80
_EXT_TUPLE = 81
_EXT_PRODUCT = 82
_EXT_SET = 83
_EXT_FROZENSET = 84
_EXT_OK = 85
_EXT_ERR = 86
_EXT_DATETIME = 87
_EXT_TIMEDELTA = 88
#: The first ext code for types registered with :func:`register_marked`.
_EXT_REGISTERED = 90
_NAIVE = -(2**31)  # the offset field of a naive datetime
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_ONE_US = datetime.timedelta(microseconds=1)
_DATETIME = struct.Struct(">qi")

_TUPLE_MARK = ExtType(_EXT_TUPLE, b"")
_PRODUCT_MARK = ExtType(_EXT_PRODUCT, b"")
_SET_MARK = ExtType(_EXT_SET, b"")
_FROZENSET_MARK = ExtType(_EXT_FROZENSET, b"")
_OK_MARK = ExtType(_EXT_OK, b"")
_ERR_MARK = ExtType(_EXT_ERR, b"")

_PICKLE_HINT = (
    "--serializer pickle on the command line, Config(serializer=\"pickle\"), or "
    "serializer=\"pickle\" for timelypy_spark"
)
_SUPPORTED = (
    "None, bool, int, float, str, bytes, tuple, list, dict, set, frozenset, Product, Ok, Err, "
    "datetime, timedelta and the registered types"
)


class _Marker:
    """What an ext marker decodes to: remembers how to rebuild its array."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[[list[Any]], Any]) -> None:
        self.build = build


_new_tuple = tuple.__new__


def _build_product(items: list[Any]) -> Product:
    if len(items) != 2:
        raise ValueError(f"a Product needs 2 coordinates, the message has {len(items)}")
    return _new_tuple(Product, items)  # what Product(outer, inner) does, one call less


def _build_ok(items: list[Any]) -> Ok:
    (value,) = items
    return Ok(value)


def _build_err(items: list[Any]) -> Err:
    (value,) = items
    return Err(value)


_MARKERS = {
    _EXT_TUPLE: _Marker(tuple),
    _EXT_PRODUCT: _Marker(_build_product),
    _EXT_SET: _Marker(set),
    _EXT_FROZENSET: _Marker(frozenset),
    _EXT_OK: _Marker(_build_ok),
    _EXT_ERR: _Marker(_build_err),
}


# type -> (marker, fields of a value) for register_marked
_REGISTERED: dict[type, tuple[ExtType, Callable[[Any], list[Any]]]] = {}


def register_marked(
    kind: type, code: int, fields: Callable[[Any], list[Any]], build: Callable[[list[Any]], Any]
) -> None:
    """Let :class:`MsgpackCodec` carry ``kind`` as ``[*fields(value), MARK]``, rebuilt by ``build``.

    ``code`` (0-9) picks the type's marker among the registered ones; every
    process must register the same types with the same codes (register at
    import time of the module defining the type).  Registering a type again
    with the same code is a no-op.
    """
    if not 0 <= code <= 9:
        raise ConfigError(f"register_marked takes a code 0-9, got {code}")
    ext = _EXT_REGISTERED + code
    known = _MARKERS.get(ext)
    if known is not None and _REGISTERED.get(kind, (None,))[0] != ExtType(ext, b""):
        raise ConfigError(f"codec marker {code} is taken already")
    _MARKERS[ext] = _Marker(build)
    _REGISTERED[kind] = (ExtType(ext, b""), fields)


def _pack_datetime(value: datetime.datetime) -> ExtType:
    offset = value.utcoffset()
    if offset is None:
        us = (value - _EPOCH_NAIVE) // _ONE_US
        seconds = _NAIVE
    else:
        us = (value - _EPOCH_UTC) // _ONE_US
        seconds = offset // datetime.timedelta(seconds=1)
    return ExtType(_EXT_DATETIME, _DATETIME.pack(us, seconds))


def _unpack_datetime(data: bytes) -> datetime.datetime:
    us, seconds = _DATETIME.unpack(data)
    if seconds == _NAIVE:
        return _EPOCH_NAIVE + datetime.timedelta(microseconds=us)
    at = _EPOCH_UTC + datetime.timedelta(microseconds=us)
    if seconds == 0:
        return at
    return at.astimezone(datetime.timezone(datetime.timedelta(seconds=seconds)))


class _Unsupported(TypeError):
    """Raised inside the pack hook; turned into a SerializationError with context."""

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value


class _Encoder:
    """A strict msgpack packer with the marking hook; one per thread (not reentrant).

    Reusing the packer saves building one per message, a third of the cost of
    a small progress message.  ``marked`` records whether the last ``pack``
    emitted any marker.
    """

    __slots__ = ("marked", "pack_obj")

    def __init__(self) -> None:
        self.marked = 0
        packer = Packer(default=self._default, strict_types=True, use_bin_type=True)
        self.pack_obj = packer.pack

    def pack(self, obj: Any) -> tuple[bytes, int]:
        """Pack ``obj`` strictly; return the document and whether it holds markers."""
        self.marked = 0
        body = self.pack_obj(obj)  # the packer resets its buffer if this raises
        return body, self.marked

    def _default(self, value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            self.marked = _MARKED
            return [*value, _TUPLE_MARK]
        if kind is Product:
            self.marked = _MARKED
            return [value[0], value[1], _PRODUCT_MARK]
        if kind is int:  # only ints outside msgpack's 64-bit range get here
            return ExtType(
                _EXT_BIGINT, value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
            )
        if kind is set:
            self.marked = _MARKED
            return [*value, _SET_MARK]
        if kind is frozenset:
            self.marked = _MARKED
            return [*value, _FROZENSET_MARK]
        if kind is Ok:
            self.marked = _MARKED
            return [value.value, _OK_MARK]
        if kind is Err:
            self.marked = _MARKED
            return [value.value, _ERR_MARK]
        if kind is datetime.datetime:
            return _pack_datetime(value)
        if kind is datetime.timedelta:
            # 9 bytes: a timedelta reaches 8.6e19 microseconds, past int64
            return ExtType(_EXT_TIMEDELTA, (value // _ONE_US).to_bytes(9, "big", signed=True))
        registered = _REGISTERED.get(kind)
        if registered is not None:
            self.marked = _MARKED
            return [*registered[1](value), registered[0]]
        raise _Unsupported(value)


def _ext_hook(code: int, data: bytes) -> Any:
    marker = _MARKERS.get(code)
    if marker is not None:
        return marker
    if code == _EXT_BIGINT:
        return int.from_bytes(data, "big", signed=True)
    if code == _EXT_DATETIME:
        return _unpack_datetime(data)
    if code == _EXT_TIMEDELTA:
        return datetime.timedelta(microseconds=int.from_bytes(data, "big", signed=True))
    return ExtType(code, data)


def _list_hook(items: list[Any]) -> Any:
    if items:
        last = items[-1]
        if type(last) is _Marker:
            del items[-1]
            return last.build(items)
    return items


def _columns(records: list[Any]) -> list[list[Any]] | None:
    """Return the columns of a non-empty list of exact tuples of one arity, else None.

    Only C-level passes, and none that allocates an object per record: a
    ``zip(*records)`` transposition would hold one live iterator per record,
    and the garbage collector's passes over them cost more than the transposition.
    """
    first = records[0]
    if type(first) is not tuple:
        return None
    n = len(records)
    k = len(first)
    if list(map(type, records)).count(tuple) != n or sum(map(len, records)) != n * k:
        return None
    try:  # each record has >= k fields, and they sum to n * k: each has exactly k
        return [list(map(itemgetter(i), records)) for i in range(k)]
    except IndexError:
        return None


def _rows(n: int, columns: list[list[Any]]) -> list[tuple[Any, ...]]:
    if columns:
        return list(zip(*columns, strict=True))
    return [()] * n


def _prefix(context: str | None) -> str:
    return f"{context}: " if context else ""


def _type_label(value: object) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _short_repr(value: object, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{_type_label(value)} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Codec(abc.ABC):
    """Turns messages into bytes and back, for workers in different processes.

    A codec keeps no state between messages and may be shared by threads.
    ``encode``/``decode`` carry any message (progress updates are lists of
    small tuples); ``encode_batch``/``decode_batch`` carry a data message
    ``(time, records)`` and may be faster for it.  ``context`` (e.g. ``"operator 'Exchange' on
    worker 1"``) prefixes error messages, so the user learns where a record
    could not be carried.
    """

    #: The name :func:`make_codec` knows this codec by.
    name: ClassVar[str]

    @abc.abstractmethod
    def encode(self, obj: Any, *, context: str | None = None) -> bytes:
        """Return the bytes of ``obj``; raise SerializationError if it cannot be carried."""

    @abc.abstractmethod
    def decode(self, data: Buffer, *, context: str | None = None) -> Any:
        """Return the object encoded in ``data`` by :meth:`encode` or :meth:`encode_batch`."""

    def encode_batch(self, time: Any, records: list[Any], *, context: str | None = None) -> bytes:
        """Return the bytes of the data message ``(time, records)``."""
        return self.encode((time, records), context=context)

    def decode_batch(self, data: Buffer, *, context: str | None = None) -> tuple[Any, list[Any]]:
        """Return the ``(time, records)`` encoded by :meth:`encode_batch`."""
        message = self.decode(data, context=context)
        if type(message) is not tuple or len(message) != 2:
            raise SerializationError(
                f"{_prefix(context)}expected a data message (time, records), "
                f"got {_type_label(message)}"
            )
        return message

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class MsgpackCodec(Codec):
    """The default codec: msgpack, exact for plain data, fast for batches of tuples.

    Types come back exactly as sent (a tuple stays a tuple, a ``Product`` a
    ``Product``, ``True`` stays ``bool``).  See the module docstring for the
    wire format.

    >>> codec = MsgpackCodec()
    >>> codec.decode(codec.encode({(1, "a"): [Product(0, 2), 2**80, {3}]}))
    {(1, 'a'): [(0, 2), 1208925819614629174706176, {3}]}
    >>> codec.decode_batch(codec.encode_batch(Product(3, 0), [("word", 1), ("other", 2)]))
    ((3, 0), [('word', 1), ('other', 2)])
    >>> codec.encode([object()], context="operator 'Exchange' on worker 1")
    Traceback (most recent call last):
    ...
    timelypy.errors.SerializationError: operator 'Exchange' on worker 1: cannot serialise ...
    """

    name: ClassVar[str] = "msgpack"

    def __init__(self) -> None:
        self._local = threading.local()

    def _encoder(self) -> _Encoder:
        try:
            return self._local.encoder  # type: ignore[no-any-return]
        except AttributeError:
            encoder = self._local.encoder = _Encoder()
            return encoder

    def __reduce__(self) -> tuple[type[MsgpackCodec], tuple[()]]:
        return (type(self), ())  # per-thread packers are rebuilt, not pickled

    def encode(self, obj: Any, *, context: str | None = None) -> bytes:
        """Return the bytes of ``obj``.

        A list of at least four tuples of one length travels as columns;
        anything else as one strictly packed value.
        """
        columns = _columns(obj) if type(obj) is list and len(obj) >= _MIN_COLUMNS else None
        try:
            if columns is None:
                body, marked = self._encoder().pack(obj)
                return _HEADERS[_KIND_VALUE | marked] + body
            body, marked = self._encoder().pack([len(obj), *columns])
            return _HEADERS[_KIND_ROWS | marked] + body
        except Exception as exc:
            raise _encode_error(exc, context) from exc

    def encode_batch(self, time: Any, records: list[Any], *, context: str | None = None) -> bytes:
        """Return the bytes of the data message ``(time, records)``.

        >>> codec = MsgpackCodec()
        >>> codec.decode_batch(codec.encode_batch(7, [1, "two", (3,)]))
        (7, [1, 'two', (3,)])
        """
        columns = (
            _columns(records) if type(records) is list and len(records) >= _MIN_COLUMNS else None
        )
        try:
            if columns is None:
                body, marked = self._encoder().pack([time, records])
                return _HEADERS[_KIND_BATCH | marked] + body
            body, marked = self._encoder().pack([time, len(records), *columns])
            return _HEADERS[_KIND_BATCH_ROWS | marked] + body
        except Exception as exc:
            raise _encode_error(exc, context) from exc

    def decode(self, data: Buffer, *, context: str | None = None) -> Any:
        """Return the object in ``data``; a batch decodes to ``(time, records)``."""
        return _decode(data, context)


def _decode(data: Buffer, context: str | None) -> Any:
    try:
        view = memoryview(data)
        tag = view[0]
        message = unpackb(
            view[1:],
            ext_hook=_ext_hook,
            list_hook=_list_hook if tag & _MARKED else None,
            strict_map_key=False,
        )
        kind = tag & ~_MARKED
        if kind == _KIND_BATCH_ROWS:
            time, n, *columns = message
            return time, _rows(n, columns)
        if kind == _KIND_BATCH:
            time, records = message
            return time, records
        if kind == _KIND_VALUE:
            return message
        if kind == _KIND_ROWS:
            n, *columns = message
            return _rows(n, columns)
        raise ValueError(f"unknown message tag {tag}")
    except Exception as exc:
        raise SerializationError(
            f"{_prefix(context)}cannot decode a msgpack message ({type(exc).__name__}: {exc}); "
            "are both ends running the same timelypy version and serializer?"
        ) from exc


def _encode_error(exc: Exception, context: str | None) -> SerializationError:
    prefix = _prefix(context)
    if isinstance(exc, _Unsupported):
        value = exc.value
        return SerializationError(
            f"{prefix}cannot serialise record of type {_type_label(value)} "
            f"({_short_repr(value)}) with the msgpack codec, which carries {_SUPPORTED}. "
            "Convert it to those types, or choose the pickle serializer to send any Python "
            "object with cloudpickle (trusted, authenticated peers only): "
            f"{_PICKLE_HINT}."
        )
    return SerializationError(
        f"{prefix}cannot serialise a message with the msgpack codec: "
        f"{type(exc).__name__}: {exc}. "
        f"The pickle serializer sends any Python object with cloudpickle: {_PICKLE_HINT}."
    )


class PickleCodec(Codec):
    """Opt-in codec for any Python object: cloudpickle to encode, pickle to decode.

    .. warning::
       **Only use this codec on authenticated connections between processes
       you trust.**  Unpickling runs arbitrary code chosen by the sender: a
       peer that can send you bytes can run anything in your worker.

    cloudpickle pickles functions, lambdas and classes defined in ``__main__``
    by value, so they arrive in another process; ``cloudpickle`` is imported
    the first time something is encoded.

    >>> codec = PickleCodec()
    >>> codec.decode(codec.encode((lambda x: x + 1, [Product(1, 2)])))[0](41)
    42
    """

    name: ClassVar[str] = "pickle"

    def encode(self, obj: Any, *, context: str | None = None) -> bytes:
        """Return the cloudpickle bytes of ``obj``."""
        import cloudpickle

        try:
            data: bytes = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            return data
        except Exception as exc:
            raise SerializationError(
                f"{_prefix(context)}cannot pickle a message ({_type_label(obj)}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def decode(self, data: Buffer, *, context: str | None = None) -> Any:
        """Unpickle ``data``.  This runs code chosen by the sender: trusted peers only."""
        try:
            return pickle.loads(data)
        except Exception as exc:
            raise SerializationError(
                f"{_prefix(context)}cannot unpickle a message ({type(exc).__name__}: {exc}); "
                "is the record's class importable in every worker process?"
            ) from exc


_CODECS: dict[str, type[Codec]] = {
    MsgpackCodec.name: MsgpackCodec,
    PickleCodec.name: PickleCodec,
}

#: The names :func:`make_codec` accepts.
CODEC_NAMES = tuple(_CODECS)


def make_codec(name: str) -> Codec:
    """Return the codec called ``name``: ``"msgpack"`` (default) or ``"pickle"``.

    >>> make_codec("msgpack")
    MsgpackCodec()
    >>> make_codec("json")
    Traceback (most recent call last):
    ...
    timelypy.errors.ConfigError: unknown serializer 'json': choose one of 'msgpack', 'pickle'
    """
    try:
        return _CODECS[name]()
    except (KeyError, TypeError):
        choices = ", ".join(repr(known) for known in CODEC_NAMES)
        raise ConfigError(f"unknown serializer {name!r}: choose one of {choices}") from None
