"""Tests for timelypy.communication.codec: exact round trips, fast paths, errors."""

from __future__ import annotations

import array
import collections
import ctypes
import datetime
import decimal
import enum
import fractions
import math
import pickle
import struct
import threading
import uuid
from collections import OrderedDict, namedtuple
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.communication.codec import (
    CODEC_NAMES,
    Codec,
    MsgpackCodec,
    PickleCodec,
    make_codec,
)
from timelypy.errors import ConfigError, SerializationError
from timelypy.order import Product
from timelypy.result import Err, Ok

CONTEXT = "operator 'Exchange' on worker 1"

# Header kinds of MsgpackCodec messages (see the module docstring).
KIND_VALUE, KIND_ROWS, KIND_BATCH, KIND_BATCH_ROWS = 0, 2, 4, 6


def kind_of(data: bytes) -> int:
    return data[0] & ~1


def is_marked(data: bytes) -> bool:
    return bool(data[0] & 1)


# -- exact comparison ----------------------------------------------------------


def assert_same(a: Any, b: Any, path: str = "x") -> None:
    """Assert ``a == b`` with the same type at every level (Product(1, 2) == (1, 2))."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ"
        b_keys = {key: key for key in b}
        for key, value in a.items():
            assert_same(key, b_keys[key], f"{path} key {key!r}")
            assert_same(value, b[key], f"{path}[{key!r}]")
    elif isinstance(a, (set, frozenset)):
        assert a == b, f"{path}: {a!r} != {b!r}"
        b_items = {item: item for item in b}
        for item in a:
            assert_same(item, b_items[item], f"{path} item {item!r}")
    elif isinstance(a, memoryview):
        about = (a.format, a.shape, a.readonly, a.tobytes())
        assert about == (b.format, b.shape, b.readonly, b.tobytes()), f"{path}: views differ"
    elif isinstance(a, (Ok, Err)):
        assert_same(a.value, b.value, f"{path}.value")
    elif isinstance(a, float):
        if math.isnan(a):
            assert math.isnan(b), path
        else:
            assert a == b and math.copysign(1.0, a) == math.copysign(1.0, b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_assert_same_tells_product_from_tuple_and_bool_from_int() -> None:
    with pytest.raises(AssertionError):
        assert_same(Product(1, 2), (1, 2))
    with pytest.raises(AssertionError):
        assert_same([True], [1])
    with pytest.raises(AssertionError):
        assert_same({(1, 2): 0}, {Product(1, 2): 0})
    with pytest.raises(AssertionError):
        assert_same({1}, {True})


# -- strategies -----------------------------------------------------------------

big_ints = st.one_of(
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.integers(min_value=-(2**63) - 2, max_value=-(2**63) + 2),
    st.integers(min_value=-(2**200), max_value=2**200),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    big_ints,
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.datetimes(
        timezones=st.one_of(
            st.none(),
            st.just(datetime.UTC),
            st.integers(-23 * 60, 23 * 60).map(
                lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes))
            ),
        )
    ),
    st.timedeltas(),
)


def views(data: bytes, readonly: bool, fmt: str) -> memoryview:
    """A view of ``data`` (trimmed to whole items) in ``fmt``, as 1 or 2 rows."""
    view = memoryview(data if readonly else bytearray(data))
    size = struct.calcsize(fmt)
    whole = len(data) // size * size
    view = view[:whole].cast(fmt)
    if len(view) % 2 == 0 and len(view) >= 2:
        return view.cast("B").cast(fmt, [2, len(view) // 2])
    return view


buffers = st.one_of(
    st.binary(max_size=8).map(bytearray),
    st.builds(views, st.binary(max_size=24), st.booleans(), st.sampled_from("BbcHiqd?")),
)
# bytes that msgpack writes as bin headers: numbers with them test the memchr shortcut
header_bytes = st.sampled_from([0xC4, 0xC5, 0xC6, 0xC4C4, 0xC6C5C4, -0xC4C4C4C4, 0.0000123])


int_products = st.recursive(
    st.integers(min_value=0, max_value=2**64 - 1),
    lambda inner: st.builds(Product, inner, inner),
    max_leaves=4,
)


def products(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Product]:
    # a Product's coordinates are timestamps: ints >= 0 or Products
    coordinate = st.one_of(st.integers(min_value=0, max_value=2**70), int_products)
    return st.builds(Product, coordinate, coordinate)


hashables = st.recursive(
    st.one_of(scalars, header_bytes),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple),
        products(inner),
        st.frozensets(inner, max_size=3),
    ),
    max_leaves=8,
)
values = st.recursive(
    st.one_of(scalars, hashables, buffers),
    lambda inner: st.one_of(
        st.builds(Ok, inner),
        st.builds(Err, inner),
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        products(inner),
        st.dictionaries(hashables, inner, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
    ),
    max_leaves=20,
)
times = st.one_of(st.integers(min_value=0, max_value=2**64 - 1), int_products)
flat_tuples = st.integers(min_value=0, max_value=4).flatmap(
    lambda arity: st.lists(st.tuples(*[scalars] * arity), max_size=40)
)

CODECS = [MsgpackCodec(), PickleCodec()]


# -- round trips -------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@settings(deadline=None)
@given(value=values)
def test_round_trip_is_exact(codec: Codec, value: Any) -> None:
    assert_same(codec.decode(codec.encode(value)), value)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@settings(deadline=None)
@given(time=times, records=st.lists(values, max_size=8))
def test_batch_round_trip_is_exact(codec: Codec, time: Any, records: list[Any]) -> None:
    assert_same(codec.decode_batch(codec.encode_batch(time, records)), (time, records))


@settings(deadline=None)
@given(time=times, records=flat_tuples)
def test_batches_of_flat_tuples_round_trip(time: Any, records: list[tuple[Any, ...]]) -> None:
    codec = MsgpackCodec()
    data = codec.encode_batch(time, records)
    assert_same(codec.decode_batch(data), (time, records))
    assert_same(codec.decode(data), (time, records))
    assert_same(codec.decode(codec.encode(records)), records)


# fmt: off
@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1,
        2**1000, -(2**1000), 0.0, -0.0, math.inf, "", "é€😀", b"", b"\x00\xff",
        (), [], {}, set(), frozenset(), ((),), [()], ([],), Product(0, 0),
        Product(Product(1, 2), 3), Product(0, 2**80), {(1, 2): "a", Product(1, 2): "b"},
        {frozenset({1}): {2: (3,)}}, {2**70: [2**70]}, [True, 1, 1.0], (1, [2, (3, [4])]),
    ],
    ids=repr,
)
def test_examples_round_trip_exactly(value: Any) -> None:
    codec = MsgpackCodec()
    assert_same(codec.decode(codec.encode(value)), value)
# fmt: on


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    "value",
    [
        bytearray(b"ab"),
        memoryview(b"cd"),
        memoryview(bytearray(b"writable")),
        memoryview(array.array("i", [1, -2, 3])),
        memoryview(array.array("d", [0.5, 2.0])).toreadonly(),
        memoryview(b"abcdefgh").cast("B", [2, 4]),
        memoryview(b"abcdefgh")[::2],  # not contiguous: carried as its items
        [("k", bytearray(b"v"))] * 6,  # the column path
        {"k": [Ok(bytearray(b"x"))], memoryview(b"key"): (b"bytes", bytearray())},
    ],
    ids=lambda v: type(v).__name__,
)
def test_buffers_keep_their_type(codec: Codec, value: Any) -> None:
    # msgpack's C packer writes them as bin, like bytes: the codec notices and packs exactly
    assert_same(codec.decode(codec.encode(value)), value)
    assert_same(codec.decode_batch(codec.encode_batch(1, [value] * 5)), (1, [value] * 5))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_view_of_a_format_the_codecs_cannot_rebuild_is_refused(codec: Codec) -> None:
    chars = memoryview(array.array("B", b"abcd")).cast("c")
    assert_same(codec.decode(codec.encode(chars)), chars)
    big_endian = memoryview(ctypes.c_int32.__ctype_be__(7))  # format '>i'
    with pytest.raises(SerializationError, match=r"memoryview of format '>i'") as info:
        codec.encode([big_endian], context=CONTEXT)
    assert str(info.value).startswith(CONTEXT)
    assert "bytes(view)" in str(info.value)  # says what to send instead


def test_bin_header_bytes_without_buffers_stay_on_the_fast_path() -> None:
    codec = MsgpackCodec()
    records = [(b"\xc4\xc5\xc6", 0xC4C5, 1.0e-5)] * 8
    data = codec.encode_batch(0, records)
    assert b"\xc4" in data  # the shortcut cannot tell: the walk finds no buffer
    assert_same(codec.decode_batch(data), (0, records))


def test_nan_round_trips() -> None:
    codec = MsgpackCodec()
    assert math.isnan(codec.decode(codec.encode(math.nan)))


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview], ids=lambda w: w.__name__)
def test_decodes_any_buffer(wrap: Any) -> None:
    codec = MsgpackCodec()
    data = codec.encode_batch(Product(1, 2), [("a", 1)] * 10)
    assert_same(codec.decode_batch(wrap(data)), (Product(1, 2), [("a", 1)] * 10))


# -- the batch paths ----------------------------------------------------------------


def test_flat_tuples_take_the_column_path_without_markers() -> None:
    codec = MsgpackCodec()
    records = [(f"word{i}", i) for i in range(100)]
    data = codec.encode_batch(5, records)
    assert kind_of(data) == KIND_BATCH_ROWS
    assert not is_marked(data)  # decoded at msgpack's C speed, no list_hook
    assert_same(codec.decode_batch(data), (5, records))


def test_list_of_tuples_takes_the_column_path_in_encode() -> None:
    codec = MsgpackCodec()
    updates = [((0, 1), 5, -1), ((2, 0), 5, 1), ((3, 3), 6, 1), ((4, 0), 6, -1)]
    data = codec.encode(updates)
    assert kind_of(data) == KIND_ROWS
    assert_same(codec.decode(data), updates)


def test_short_batches_go_row_by_row() -> None:
    codec = MsgpackCodec()
    data = codec.encode_batch(0, [("a", 1)])
    assert kind_of(data) == KIND_BATCH
    assert_same(codec.decode_batch(data), (0, [("a", 1)]))


def test_batch_mixing_tuples_and_lists_falls_back() -> None:
    codec = MsgpackCodec()
    records: list[Any] = [("a", 1), ["b", 2], ("c", 3), ["d", 4], ("e", 5)]
    data = codec.encode_batch(0, records)
    assert kind_of(data) == KIND_BATCH
    assert_same(codec.decode_batch(data), (0, records))


@pytest.mark.parametrize(
    "last",
    [("z", [1, 2]), ("z", (1, 2)), ("z", Product(1, 2)), ("z", {"k": [()]}), ("z", 2**80)],
    ids=repr,
)
def test_only_the_last_record_nested(last: tuple[Any, ...]) -> None:
    codec = MsgpackCodec()
    records = [(f"w{i}", i) for i in range(50)] + [last]
    data = codec.encode_batch(0, records)
    assert kind_of(data) == KIND_BATCH_ROWS
    assert_same(codec.decode_batch(data), (0, records))


@pytest.mark.parametrize(
    "records",
    [
        [("a", 1)] * 10 + [("b",)],  # one shorter record
        [("a", 1)] * 10 + [("b", 2, 3)],  # one longer record
        [("a", 1, 2)] * 5 + [("b",)] * 5,  # same total length, different arities
        [("a", 1)] * 10 + [Product(1, 2)],  # a tuple subclass
        [Product(i, i) for i in range(10)],
        [(), (), (), (), ()],
        [(), (), (), (1,)],
        ["ab", "cd", "ef", "gh"],  # iterables that are not tuples
    ],
    ids=repr,
)
def test_irregular_batches_round_trip(records: list[Any]) -> None:
    codec = MsgpackCodec()
    assert_same(
        codec.decode_batch(codec.encode_batch(Product(0, 1), records)), (Product(0, 1), records)
    )
    assert_same(codec.decode(codec.encode(records)), records)


def test_empty_batch() -> None:
    codec = MsgpackCodec()
    assert_same(codec.decode_batch(codec.encode_batch(3, [])), (3, []))


def test_decode_batch_rejects_a_value_message() -> None:
    codec = MsgpackCodec()
    with pytest.raises(SerializationError, match="data message"):
        codec.decode_batch(codec.encode([1, 2, 3]), context=CONTEXT)


# -- errors ---------------------------------------------------------------------------


class Foo:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return type(other) is Foo and other.x == self.x

    __hash__ = None  # type: ignore[assignment]


class Colour(enum.IntEnum):
    RED = 1


class MyStr(str):
    pass


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (Foo(1), "Foo"),
        (lambda: 1, "function"),
        (Colour.RED, "Colour"),
        (MyStr("a"), "MyStr"),
        (Point(1, 2), "Point"),
        (OrderedDict(a=1), "OrderedDict"),
        (object(), "object"),
        (1j, "complex"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
@pytest.mark.parametrize("where", ["record", "field", "batch field", "nested"])
def test_unsupported_records_name_their_type_and_context(
    value: Any, type_name: str, where: str
) -> None:
    codec = MsgpackCodec()
    with pytest.raises(SerializationError) as info:
        if where == "record":
            codec.encode_batch(0, [value], context=CONTEXT)
        elif where == "field":
            codec.encode([("a", 1)] * 5 + [("b", value)], context=CONTEXT)
        elif where == "batch field":
            codec.encode_batch(0, [("a", 1)] * 5 + [("b", value)], context=CONTEXT)
        else:
            codec.encode({"k": [(1, {Product(1, 2): [value]})]}, context=CONTEXT)
    message = str(info.value)
    assert message.startswith(CONTEXT + ": cannot serialise record of type ")
    assert type_name in message
    assert 'Config(serializer="pickle")' in message
    assert isinstance(info.value, TypeError)


BUILT_INS = [
    None,
    True,
    7,
    2**100,
    -(2**70),
    1.5,
    math.inf,
    "text",
    b"bytes",
    bytearray(b"ba"),
    memoryview(b"mv"),
    (1,),
    [1],
    {1: 2},
    {1},
    frozenset({1}),
    Product(1, 2),
    Ok(1),
    Err("e"),
    datetime.datetime(2024, 1, 1, 12),
    datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    datetime.timedelta(days=-1, microseconds=3),
    # what msgpack cannot carry exactly must be refused, never changed
    1j,
    decimal.Decimal("1.1"),
    fractions.Fraction(1, 3),
    datetime.date(2024, 1, 1),
    datetime.time(12),
    range(3),
    slice(1, 2),
    uuid.UUID(int=5),
    collections.deque([1]),
    collections.defaultdict(int, a=1),
    collections.Counter("aa"),
    OrderedDict(a=1),
    array.array("i", [1]),
    Ellipsis,
    int,
    Colour.RED,
    Point(1, 2),
    MyStr("s"),
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("value", BUILT_INS, ids=lambda v: type(v).__name__)
def test_every_built_in_type_arrives_exactly_or_is_refused(codec: Codec, value: Any) -> None:
    for message in (value, [value], [(value, 1)] * 5):
        try:
            data = codec.encode(message, context=CONTEXT)
        except SerializationError as exc:
            assert str(exc).startswith(CONTEXT)
            assert codec.name == "msgpack", f"pickle refused {value!r}"
            continue
        assert_same(codec.decode(data), message)  # the same type at every level


def test_numpy_arrays_are_refused() -> None:
    np = pytest.importorskip("numpy")
    with pytest.raises(SerializationError, match=r"numpy\.ndarray"):
        MsgpackCodec().encode_batch(0, [np.arange(3)], context=CONTEXT)


def test_error_without_context_has_no_prefix() -> None:
    with pytest.raises(SerializationError, match=r"^cannot serialise record of type"):
        MsgpackCodec().encode(Foo(1))


def test_encoder_is_usable_after_an_error() -> None:
    codec = MsgpackCodec()
    with pytest.raises(SerializationError):
        codec.encode([1, 2, (3, Foo(1))])
    assert_same(codec.decode(codec.encode([1, (2,)])), [1, (2,)])


def test_unencodable_strings_and_nesting() -> None:
    codec = MsgpackCodec()
    with pytest.raises(SerializationError, match=CONTEXT):
        codec.encode(["\ud800"], context=CONTEXT)
    deep: Any = []
    for _ in range(2000):
        deep = [deep]
    with pytest.raises(SerializationError, match="recursion"):
        codec.encode(deep)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x07\x91\xc1", b"\x0e\x90", b"\x00\x91\x01\x02"])
def test_garbage_does_not_decode(data: bytes) -> None:
    with pytest.raises(SerializationError, match=f"^{CONTEXT}: cannot decode"):
        MsgpackCodec().decode(data, context=CONTEXT)


# -- PickleCodec ---------------------------------------------------------------------


def test_pickle_round_trips_user_classes_and_lambdas() -> None:
    class Local:  # defined in a function: only cloudpickle can carry it by value
        def __init__(self, value: int) -> None:
            self.value = value

    codec = PickleCodec()
    time, records = codec.decode_batch(
        codec.encode_batch(Product(1, 0), [Foo(3), Local(4), lambda x: x * 2])
    )
    assert time == Product(1, 0) and type(time) is Product
    assert records[0] == Foo(3)
    assert type(records[1]).__name__ == "Local" and records[1].value == 4
    assert records[2](21) == 42
    square = codec.decode(codec.encode(lambda x: x * x))
    assert square(7) == 49


def test_pickle_errors_carry_the_context() -> None:
    codec = PickleCodec()
    with pytest.raises(SerializationError, match=f"^{CONTEXT}: cannot pickle"):
        codec.encode([threading.Lock()], context=CONTEXT)
    with pytest.raises(SerializationError, match=f"^{CONTEXT}: cannot unpickle"):
        codec.decode(b"not a pickle", context=CONTEXT)


def test_pickle_codec_warns_about_trust_in_its_docstring() -> None:
    assert "authenticated" in (PickleCodec.__doc__ or "")


# -- make_codec and sharing ---------------------------------------------------------


def test_make_codec() -> None:
    assert isinstance(make_codec("msgpack"), MsgpackCodec)
    assert isinstance(make_codec("pickle"), PickleCodec)
    assert CODEC_NAMES == ("msgpack", "pickle")
    assert make_codec("msgpack").name == "msgpack"


@pytest.mark.parametrize("name", ["json", "", "MSGPACK", None, ["msgpack"]], ids=repr)
def test_make_codec_rejects_unknown_names(name: Any) -> None:
    expected = r"unknown serializer .*: choose one of 'msgpack', 'pickle'"
    with pytest.raises(ConfigError, match=expected):
        make_codec(name)


def test_codecs_pickle_for_shipping_to_other_processes() -> None:
    codec = MsgpackCodec()
    codec.encode([(1,)])
    clone = pickle.loads(pickle.dumps(codec))
    assert_same(clone.decode(clone.encode((1, [2]))), (1, [2]))


def test_msgpack_codec_is_safe_to_share_between_threads() -> None:
    codec = MsgpackCodec()

    def work(worker: int) -> None:
        for i in range(200):
            records = [(f"w{worker}", i, (worker,))] * (i % 7) + [Product(worker, i)]
            data = codec.encode_batch(Product(worker, i), records)
            assert_same(codec.decode_batch(data), (Product(worker, i), records))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(8)))


def test_ok_and_err_round_trip_exactly():
    from timelypy import Err, Ok

    codec = MsgpackCodec()
    value = [Ok((1, "a")), Err({"why": [Ok(2)]}), (Ok(None), Err(Product(1, 2)))]
    back = codec.decode(codec.encode(value))
    assert back == value
    assert type(back[0]) is Ok and type(back[0].value) is tuple
    assert type(back[1]) is Err and type(back[1].value["why"][0]) is Ok
    time, records = codec.decode_batch(codec.encode_batch(3, [Ok(1), Err(2), Ok(3), Ok(4)]))
    assert time == 3 and records == [Ok(1), Err(2), Ok(3), Ok(4)]
    assert [type(r) for r in records] == [Ok, Err, Ok, Ok]
