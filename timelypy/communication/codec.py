"""The wire codec: how messages become bytes between worker processes.

Within one process batches move by reference; a codec is only involved when a
message crosses a process boundary (the cluster allocator, over ZeroMQ).  Two
codecs exist, chosen by name with :func:`make_codec`:

* :class:`MsgpackCodec` (``"msgpack"``, the default) carries plain data --
  ``None``, ``bool``, ``int`` of any size, ``float``, ``str``, ``bytes``,
  ``bytearray``, ``memoryview`` (of a native single-character format),
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
seconds), a ``timedelta`` ext 88 (microseconds), a ``bytearray`` ext 89
(its bytes), a ``memoryview`` ext 79 (``[readonly, format, shape, bytes]``,
packed); a registered type becomes
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
cores; ranges over three runs, before the buffer check below): time relative to plain
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

Why a second packer for buffers
-------------------------------
msgpack's C packer writes a ``bytearray`` or ``memoryview`` as ``bin``, like
``bytes``, even in strict mode, and never shows them to the hook: they would
arrive as ``bytes``, while a thread next door receives the object itself.
Checking every value's type before packing would cost more than packing, so
the check runs after it, and only where it can matter: a buffer always leaves
a ``bin`` header (byte 0xc4, 0xc5 or 0xc6) in the document, and a ``memchr``
for those three bytes is nearly free. Only a document holding one of them
(``bytes`` values, or numbers whose bytes happen to include one) is walked
for buffers, a level at a time with ``gc.get_referents`` (C), and only a
message that really holds one is packed again by msgpack's pure-Python
packer with a hook for them (slow, but exact).  The walk first tries two C
calls on a group of values, ``sum`` and ``"".join``: among the types the
codec carries only numbers add to 0 and only strs join, so columns and lists
of numbers or strs are cleared at a few nanoseconds a value.

What the check costs, encode + decode against the same module without it
(loaded from git), side by side in one run, median of 9 rounds: 4096
``(str, int)`` tuples 1.04-1.09x over three runs, 1024 ``(str, int)``
1.06-1.12x, 4096 ``int`` below 2**40 1.37x, 4096 ``float`` 1.28x, 1024
nested dicts 1.16x, 1024 ``(bytes, int)`` 1.16x, a three-update progress
message 1.00x.  After it, ``codec_bench.py`` gives
MsgpackCodec 1.19x on 4096 ``(str, int)``, 1.14x on 1024 and 1.44x on 4096
``int`` against plain msgpack.

Known limits: a user value of type ``msgpack.ExtType`` is passed through and
must not use codes 79-99; strings holding lone surrogates cannot be encoded
(UTF-8).
"""

from __future__ import annotations

import abc
import collections
import datetime
import gc
import inspect
import io
import pickle
import struct
import threading
from collections.abc import Callable
from operator import itemgetter
from typing import Any, ClassVar

from msgpack import ExtType, Packer, packb, unpackb
from msgpack import version as _msgpack_version
from msgpack.fallback import Packer as _PythonPacker

from timelypy.errors import ConfigError, SerializationError, short_repr, type_label
from timelypy.order import Product
from timelypy.result import Err, Ok

__all__ = [
    "Codec",
    "MsgpackCodec",
    "PickleCodec",
    "make_codec",
    "register_marked",
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
_EXT_BYTEARRAY = 89
_EXT_MEMORYVIEW = 79
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
    '--serializer pickle on the command line, Config(serializer="pickle"), or '
    'serializer="pickle" for timelypy_spark'
)
_SUPPORTED = (
    "None, bool, int, float, str, bytes, bytearray, memoryview, tuple, list, dict, set, "
    "frozenset, Product, Ok, Err, datetime, timedelta and the registered types"
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


#: memoryview formats that ``memoryview.cast`` can rebuild (native, one character).
_VIEW_FORMATS = frozenset("cbB?hHiIlLqQnNefdP")


def _pack_memoryview(view: memoryview) -> ExtType:
    if view.format not in _VIEW_FORMATS:
        raise _Unsupported(
            view,
            f"a memoryview of format {view.format!r} (the codecs carry native one-character "
            "formats; send bytes(view) or view.tolist())",
        )
    shape = list(view.shape or ())
    if len(shape) > 1 and 0 in shape:
        raise _Unsupported(view, "an empty memoryview of more than one dimension")
    return ExtType(_EXT_MEMORYVIEW, packb([view.readonly, view.format, shape, view.tobytes()]))


def _unpack_memoryview(data: bytes) -> memoryview:
    readonly, fmt, shape, raw = unpackb(data)
    view = memoryview(raw if readonly else bytearray(raw))
    if len(shape) != 1:
        return view.cast(fmt, shape)
    return view if fmt == "B" else view.cast(fmt)  # cast(fmt, [0]) is refused


# Types that hold no other value, and the built-in containers gc.get_referents walks.
_ATOMS = frozenset(
    {type(None), bool, int, float, str, bytes, datetime.datetime, datetime.timedelta}
)
_BUFFERS = frozenset({bytearray, memoryview})
_WALKED = frozenset({list, tuple, dict, set, frozenset}) | _ATOMS


def _numbers_or_strs(items: list[Any]) -> bool:
    """Whether ``items`` (of types the codec carries) are all numbers, or all strs.

    Two C calls that cost a quarter of looking at every item's type: among
    the types the codec carries, only ``int``, ``bool`` and ``float`` add to
    0, and only ``str`` joins.
    """
    try:
        sum(items)
        return True
    except (TypeError, OverflowError):
        pass
    try:
        "".join(items)
        return True
    except TypeError:
        return False


def _holds_buffer(items: list[Any]) -> bool:
    """Whether a ``bytearray`` or ``memoryview`` is among ``items`` or anywhere inside them.

    A group of items at a time, in C where it counts: :func:`_numbers_or_strs`
    or one ``set(map(type, group))``, then the items of the containers in it
    (``gc.get_referents``: a list's or set's items, a dict's values and its
    keys unless they are all ``str``), as one group per container when there
    are few (a message's records stay one group), else as one group.
    """
    groups: list[list[Any]] = [items]
    while groups:
        group = groups.pop()
        if len(group) >= 16 and _numbers_or_strs(group):
            continue
        kinds = set(map(type, group))
        if kinds <= _ATOMS:
            continue
        if not kinds.isdisjoint(_BUFFERS):
            return True
        nested: list[Any] = []
        for item in group if len(group) < 16 or not kinds <= _WALKED else ():
            kind = type(item)
            if kind in _WALKED:
                if kind not in _ATOMS:
                    nested.append(item)
            elif kind is Ok or kind is Err:
                nested.append([item.value])
            else:  # Products hold ints; a registered type is walked by its fields
                registered = _REGISTERED.get(kind)
                if registered is not None:
                    nested.append(registered[1](item))
        if len(group) >= 16 and kinds <= _WALKED:
            groups.append(gc.get_referents(*group))
        else:
            groups.extend(map(gc.get_referents, nested))
    return False


#: msgpack releases whose private ``fallback.Packer._pack`` the buffer packer was
#: checked against: [low, high).
MSGPACK_CHECKED = ((1, 0), (2, 0))


def check_msgpack_version(version: str | None = None) -> str:
    """Raise :class:`ConfigError` unless msgpack ``version`` has the packer hook this codec extends.

    A message holding a ``bytearray`` or ``memoryview`` is packed by a subclass of
    msgpack's pure-Python packer that overrides its ``_pack`` method, which is not
    msgpack's public API: only the releases in :data:`MSGPACK_CHECKED` are accepted,
    and the method must be there.  ``version`` is a release such as ``"1.0.8"``
    (default: the installed msgpack's); it is returned.  The codec runs this check
    the first time a message needs that packer.

    >>> check_msgpack_version("9.0.0")
    Traceback (most recent call last):
      ...
    timelypy.errors.ConfigError: timelypy's msgpack codec overrides msgpack's private ...
    """
    if version is None:
        version = ".".join(map(str, _msgpack_version))
    release: list[int] = []
    for piece in version.split(".")[:2]:
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        release.append(int(digits) if digits else -1)
    low, high = MSGPACK_CHECKED
    hook = getattr(_PythonPacker, "_pack", None)
    if (
        len(release) < 2
        or not low <= tuple(release) < high
        or hook is None
        or "obj" not in inspect.signature(hook).parameters
    ):
        raise ConfigError(
            "timelypy's msgpack codec overrides msgpack's private Packer._pack to carry "
            "bytearray and memoryview values, and was checked against msgpack "
            f"{'.'.join(map(str, low))} to before {'.'.join(map(str, high))}; this is msgpack "
            f"{version!r}: install 'msgpack>={'.'.join(map(str, low))},"
            f"<{'.'.join(map(str, high))}', or send bytes instead of bytearray/memoryview"
        )
    return version


_msgpack_checked: list[str] = []  # the installed version, once check_msgpack_version passed


class _BufferPacker(_PythonPacker):  # type: ignore[misc]
    """msgpack's pure-Python packer, with ``bytearray`` and ``memoryview`` as ext values.

    Build it with :func:`_buffer_packer`, which checks the msgpack release first.
    """

    def _pack(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        kind = type(obj)
        if kind is bytearray:
            obj = ExtType(_EXT_BYTEARRAY, bytes(obj))
        elif kind is memoryview:
            obj = _pack_memoryview(obj)
        return super()._pack(obj, *args, **kwargs)


def _buffer_packer(default: Callable[[Any], Any]) -> _BufferPacker:
    if not _msgpack_checked:
        _msgpack_checked.append(check_msgpack_version())
    return _BufferPacker(default=default, strict_types=True, use_bin_type=True)


class _Unsupported(TypeError):
    """Raised inside the pack hook; turned into a SerializationError with context."""

    def __init__(self, value: object, what: str | None = None) -> None:
        super().__init__(f"the codec cannot carry {what or 'a ' + type_label(value)}")
        self.value = value
        self.what = what


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

    def pack(self, obj: Any, columns: list[list[Any]] | None = None) -> tuple[bytes, int]:
        """Pack ``obj`` strictly; return the document and whether it holds markers.

        ``columns``: the record columns ``obj`` holds besides ints (the column path).
        """
        self.marked = 0
        try:
            body = self.pack_obj(obj)  # the packer resets its buffer if this raises
            # int needles: memchr (a bytes needle costs ten times as much on small messages)
            exact = (0xC4 in body or 0xC5 in body or 0xC6 in body) and (
                _holds_buffer([obj]) if columns is None else any(map(_holds_buffer, columns))
            )
        except BufferError:  # a memoryview the C packer cannot read (not contiguous)
            exact = True
        if exact:
            self.marked = 0
            packer = _buffer_packer(self._default)
            body = packer.pack(obj)
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
    if code == _EXT_BYTEARRAY:
        return bytearray(data)
    if code == _EXT_MEMORYVIEW:
        return _unpack_memoryview(data)
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
                f"got {type_label(message)}"
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
            body, marked = self._encoder().pack([len(obj), *columns], columns)
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
            body, marked = self._encoder().pack([time, len(records), *columns], columns)
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
            f"{prefix}cannot serialise {exc.what or 'record of type ' + type_label(value)} "
            f"({short_repr(value)}) with the msgpack codec, which carries {_SUPPORTED}. "
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

    # A memoryview, which pickle refuses, is carried as MsgpackCodec carries it.

    def encode(self, obj: Any, *, context: str | None = None) -> bytes:
        """Return the cloudpickle bytes of ``obj``."""
        try:
            out = io.BytesIO()
            _pickler_class()(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
            return out.getvalue()
        except Exception as exc:
            raise SerializationError(
                f"{_prefix(context)}cannot pickle a message ({type_label(obj)}): "
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


def _reduce_memoryview(view: memoryview) -> tuple[Callable[[bytes], memoryview], tuple[bytes]]:
    return _unpack_memoryview, (_pack_memoryview(view).data,)


_PICKLER: list[type] = []


def _pickler_class() -> type:
    """The cloudpickle pickler class, with memoryviews carried as MsgpackCodec carries them."""
    if not _PICKLER:
        import cloudpickle  # imported the first time something is pickled

        class _Pickler(cloudpickle.CloudPickler):  # type: ignore[misc]
            dispatch_table: ClassVar[collections.ChainMap[type, Any]] = collections.ChainMap(
                {memoryview: _reduce_memoryview}, cloudpickle.CloudPickler.dispatch_table
            )

        _PICKLER.append(_Pickler)
    return _PICKLER[0]


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
