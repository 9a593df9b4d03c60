"""Partially ordered timestamps and the path summaries that advance them.

A *timestamp* labels every record and every capability.  Timestamps are only
*partially* ordered: two times may be incomparable, and progress tracking
reasons about sets of mutually incomparable times (antichains, see
:mod:`timelypy.progress.frontier`).  A timestamp type must also have a
*total* order, given by Python's ``<``, that extends the partial order; it is
used for sorting and for heaps, never for deciding completeness.

Built-in timestamps:

* ``int`` -- non-negative integers with unsigned 64-bit semantics.  Its path
  summaries are ``int`` as well: a summary ``s`` takes ``t`` to ``t + s``, and
  a result past ``2**64 - 1`` is ``None`` (the record is dropped, exactly as
  Timely's ``checked_add`` does).
* :class:`Product` -- ``Product(outer, inner)`` with the product partial order
  (both coordinates ``<=``) and the lexicographic total order.  It is the
  timestamp of iterative scopes: ``outer`` is the enclosing scope's time and
  ``inner`` counts iterations.  Products nest: ``Product(Product(a, b), c)``.
  A ``Product`` of summaries is the summary of ``Product`` times, applied
  coordinate by coordinate.

User timestamp types implement the :class:`Timestamp` protocol (a
``less_equal`` method, ``__lt__``/``__eq__``/``__hash__`` consistent with it,
and class methods ``minimum()`` and ``identity_summary()``) and provide
summaries implementing :class:`PathSummary`.

The module-level functions (:func:`less_equal`, :func:`results_in`,
:func:`followed_by`, :func:`minimum`, ...) work uniformly on ``int``,
:class:`Product` and user types; the rest of timelypy only uses them.
Comparing timestamps of different types raises
:class:`~timelypy.errors.TimestampError`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from timelypy.errors import SummaryError, TimestampError

__all__ = [
    "U64_MAX",
    "PartialOrder",
    "Timestamp",
    "PathSummary",
    "Product",
    "ProductType",
    "less_equal",
    "less_than",
    "results_in",
    "followed_by",
    "minimum",
    "identity_summary",
    "is_identity_summary",
]

#: The largest ``int`` timestamp; ``int`` summaries whose result passes it yield ``None``.
U64_MAX = 2**64 - 1

T = TypeVar("T")
S = TypeVar("S")


@runtime_checkable
class PartialOrder(Protocol):
    """A partially ordered value.

    ``less_than(other)`` must mean ``less_equal(other) and self != other``.
    """

    def less_equal(self, other: Any) -> bool:
        """Return whether ``self`` is less than or equal to ``other``."""
        ...

    def less_than(self, other: Any) -> bool:
        """Return whether ``self`` is strictly less than ``other``."""
        ...


@runtime_checkable
class PathSummary(Protocol):
    """How a timestamp can advance along a path through the dataflow.

    ``results_in(t)`` is the least time a record at ``t`` can have after the
    path, or ``None`` if the path cannot be taken (the record is dropped).
    ``followed_by(s)`` composes this summary with ``s``; it returns ``None``
    exactly when no time survives both.  Both must be monotone, and the
    identity summary (``Timestamp.identity_summary()``) must change nothing.
    """

    def results_in(self, time: Any) -> Any | None:
        """Return the time after taking this path from ``time``, or ``None``."""
        ...

    def followed_by(self, other: Any) -> Any | None:
        """Return the summary of this path followed by ``other``, or ``None``."""
        ...

    def less_equal(self, other: Any) -> bool:
        """Return whether this summary advances times no further than ``other``."""
        ...


@runtime_checkable
class Timestamp(PartialOrder, Protocol):
    """A timestamp type: partially ordered, hashable, totally ordered by ``<``.

    The class methods give the type's least element and the summary that
    changes nothing.
    """

    @classmethod
    def minimum(cls) -> Any:
        """Return the least timestamp of this type."""
        ...

    @classmethod
    def identity_summary(cls) -> Any:
        """Return the path summary that leaves every timestamp unchanged."""
        ...


def _type_name(value: object) -> str:
    return type(value).__name__


def _mixed(a: object, b: object, exc: Exception | None = None) -> TimestampError:
    err = TimestampError(
        f"cannot compare timestamps {a!r} ({_type_name(a)}) and {b!r} ({_type_name(b)}): "
        "all timestamps in one scope must have the same type "
        "(int, Product, or one class implementing less_equal)"
    )
    if exc is not None:
        err.__cause__ = exc
    return err


def _check_coordinate(value: Any, which: str) -> None:
    kind = type(value)
    if kind is int:
        if value < 0:
            raise TimestampError(
                f"a Product's {which} coordinate must be >= 0, got {value}: timestamps start at 0"
            )
        return
    if (
        kind is bool
        or kind is float
        or kind is str
        or kind is bytes
        or not hasattr(value, "less_equal")
    ):
        raise TimestampError(
            f"a Product's {which} coordinate must be a timestamp (an int >= 0, a Product, or a "
            f"type with less_equal), got {value!r} ({kind.__name__})"
        )


class Product(tuple[Any, Any]):
    """A pair of timestamps ordered coordinate by coordinate.

    ``Product(a, b).less_equal(Product(c, d))`` iff ``a <= c`` and ``b <= d``
    (in their own partial orders): that, and ``less_than``, are the order
    progress tracking uses.  Python's ``<``, ``<=``, ``>``, ``>=`` are a
    tuple's *lexicographic* order, a total order that extends the product
    order: use them to sort, never to decide whether one time is done before
    another (``Product(1, 9) < Product(2, 0)`` although the two are
    incomparable).  A ``Product`` is an
    immutable, hashable 2-tuple, so it is cheap to create, compare and hash.

    >>> Product(1, 5).less_equal(Product(2, 5))
    True
    >>> Product(1, 5).less_equal(Product(2, 4))  # incomparable
    False
    >>> sorted([Product(2, 0), Product(1, 9)])
    [(1, 9), (2, 0)]
    >>> Product(Product(0, 1), 2).outer.inner
    1

    A ``Product`` of summaries advances a ``Product`` time coordinate-wise:

    >>> Product(0, 1).results_in(Product(3, 4))
    (3, 5)
    """

    __slots__ = ()

    def __new__(cls, outer: Any, inner: Any) -> Product:
        """Create ``Product(outer, inner)``; each coordinate a timestamp (an ``int >= 0``...).

        A coordinate is an ``int >= 0`` (not a ``bool``), a ``Product``, or an
        object with ``less_equal`` (a timestamp type of your own); anything
        else is a :class:`~timelypy.errors.TimestampError`, as a bad ``int``
        time is.
        """
        if not (type(outer) is int and outer >= 0 and type(inner) is int and inner >= 0):
            _check_coordinate(outer, "outer")
            _check_coordinate(inner, "inner")
        return tuple.__new__(cls, (outer, inner))

    def __getnewargs__(self) -> tuple[Any, Any]:
        return (self[0], self[1])

    @property
    def outer(self) -> Any:
        """The enclosing scope's coordinate."""
        return self[0]

    @property
    def inner(self) -> Any:
        """The nested scope's coordinate (for iterative scopes, the iteration)."""
        return self[1]

    def less_equal(self, other: Any) -> bool:
        """Return whether both coordinates are ``<=`` those of ``other``."""
        try:
            a0, a1 = self
            b0, b1 = other
            if type(a0) is int and type(b0) is int:
                if a0 > b0:
                    return False
            elif not a0.less_equal(b0):
                return False
            if type(a1) is int and type(b1) is int:
                return a1 <= b1
            return bool(a1.less_equal(b1))
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, TimestampError):
                raise
            raise _mixed(self, other, exc) from exc

    def less_than(self, other: Any) -> bool:
        """Return whether ``self`` is ``<=`` ``other`` and different from it."""
        return self.less_equal(other) and self != other

    # -- as a path summary of Product times ---------------------------------

    def results_in(self, time: Any) -> Product | None:
        """Apply this summary to a ``Product`` time, coordinate by coordinate."""
        if not isinstance(time, Product):
            raise SummaryError(
                f"the Product summary {self!r} cannot be applied to {time!r} "
                f"({_type_name(time)}); a Product summary applies to Product times"
            )
        outer = results_in(self[0], time[0])
        if outer is None:
            return None
        inner = results_in(self[1], time[1])
        if inner is None:
            return None
        return Product(outer, inner)

    def followed_by(self, other: Any) -> Product | None:
        """Compose with another ``Product`` summary, coordinate by coordinate."""
        if not isinstance(other, Product):
            raise SummaryError(
                f"cannot compose the Product summary {self!r} with {other!r} ({_type_name(other)})"
            )
        outer = followed_by(self[0], other[0])
        if outer is None:
            return None
        inner = followed_by(self[1], other[1])
        if inner is None:
            return None
        return Product(outer, inner)


class ProductType:
    """The type of ``Product(outer, inner)`` timestamps for given coordinate types.

    Python cannot recover ``Product``'s coordinate types from the class
    alone, so scopes describe their timestamp type with one of these (or with
    ``int``, or a user class).  It also provides the conversions an iterative
    scope needs between its times and its parent's.

    >>> pt = ProductType(int, int)
    >>> pt.minimum(), pt.identity_summary()
    ((0, 0), (0, 0))
    >>> pt.to_inner(7), pt.to_outer(Product(7, 3)), pt.summarize(Product(1, 4))
    ((7, 0), 7, 1)
    """

    __slots__ = ("inner", "outer")

    def __init__(self, outer: Any, inner: Any) -> None:
        self.outer = outer
        self.inner = inner

    def minimum(self) -> Product:
        """Return the least Product: both coordinates at their minimum."""
        return Product(minimum(self.outer), minimum(self.inner))

    def identity_summary(self) -> Product:
        """Return the ``Product`` of both coordinates' identity summaries."""
        return Product(identity_summary(self.outer), identity_summary(self.inner))

    def to_inner(self, outer_time: Any) -> Product:
        """Embed a time of the enclosing scope: ``Product(t, minimum(inner))``."""
        return Product(outer_time, minimum(self.inner))

    @staticmethod
    def to_outer(time: Product) -> Any:
        """Project a time of this scope onto the enclosing scope."""
        return time[0]

    @staticmethod
    def summarize(summary: Product) -> Any:
        """Project a summary of this scope onto the enclosing scope."""
        return summary[0]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ProductType)
            and self.outer == other.outer
            and self.inner == other.inner
        )

    def __hash__(self) -> int:
        return hash((ProductType, self.outer, self.inner))

    def __repr__(self) -> str:
        return f"Product[{_tname(self.outer)}, {_tname(self.inner)}]"


def _tname(ttype: Any) -> str:
    return ttype.__name__ if isinstance(ttype, type) else repr(ttype)


def less_equal(a: Any, b: Any) -> bool:
    """Return whether timestamp (or summary) ``a`` is ``<=`` ``b`` in the partial order.

    >>> less_equal(3, 5), less_equal(Product(1, 2), Product(2, 1))
    (True, False)
    """
    if type(a) is int:
        if type(b) is int:
            return a <= b
        raise _mixed(a, b)
    try:
        return bool(a.less_equal(b))
    except AttributeError as exc:
        raise TimestampError(
            f"{a!r} ({_type_name(a)}) is not a timestamp: timestamps are int, Product, "
            "or a class implementing the Timestamp protocol (less_equal, minimum, ...)"
        ) from exc


def less_than(a: Any, b: Any) -> bool:
    """Return whether ``a`` is ``<=`` ``b`` and not equal to it."""
    return less_equal(a, b) and a != b


def _int_le(a: int, b: Any) -> bool:
    if type(b) is not int:
        raise _mixed(a, b)
    return a <= b


def less_equal_fn(sample: Any) -> Callable[[Any, Any], bool]:
    """Return a fast two-argument ``less_equal`` for timestamps of ``sample``'s type.

    Containers such as :class:`~timelypy.progress.MutableAntichain` call this
    once, on the first timestamp they see, and then compare with the returned
    function.  For ``int`` it is ``operator.le``; comparing an ``int`` with
    another type raises :class:`~timelypy.errors.TimestampError`.
    """
    kind = type(sample)
    if kind is int:
        return operator.le
    if kind is Product:
        return Product.less_equal
    method: Callable[[Any, Any], bool] | None = getattr(kind, "less_equal", None)
    if method is None:
        raise TimestampError(
            f"{sample!r} ({kind.__name__}) is not a timestamp: timestamps are int, Product, "
            "or a class implementing the Timestamp protocol (less_equal, minimum, ...)"
        )
    return method


def results_in(summary: Any, time: Any) -> Any | None:
    """Apply a path summary to a time; ``None`` if the path cannot be taken.

    >>> results_in(1, 5), results_in(1, U64_MAX), results_in(Product(0, 1), Product(2, 2))
    (6, None, (2, 3))
    """
    if type(summary) is int:
        if type(time) is not int:
            raise SummaryError(
                f"the int summary {summary!r} cannot be applied to {time!r} "
                f"({_type_name(time)}); int summaries apply to int times"
            )
        result = time + summary
        return result if result <= U64_MAX else None
    try:
        method = summary.results_in
    except AttributeError:
        raise SummaryError(
            f"{summary!r} ({_type_name(summary)}) is not a path summary "
            "(it has no results_in method)"
        ) from None
    return method(time)


def followed_by(first: Any, second: Any) -> Any | None:
    """Compose two summaries: the path of ``first`` then ``second``.

    >>> followed_by(2, 3), followed_by(U64_MAX, 1)
    (5, None)
    """
    if type(first) is int:
        if type(second) is not int:
            raise SummaryError(
                f"cannot compose the int summary {first!r} with {second!r} ({_type_name(second)})"
            )
        result = first + second
        return result if result <= U64_MAX else None
    try:
        method = first.followed_by
    except AttributeError:
        raise SummaryError(
            f"{first!r} ({_type_name(first)}) is not a path summary (it has no followed_by method)"
        ) from None
    return method(second)


def minimum(ttype: Any) -> Any:
    """Return the least timestamp of a timestamp type.

    >>> minimum(int), minimum(ProductType(int, ProductType(int, int)))
    (0, (0, (0, 0)))
    """
    if ttype is int:
        return 0
    try:
        return ttype.minimum()
    except AttributeError:
        raise TimestampError(
            f"{ttype!r} is not a timestamp type: use int, ProductType(...), "
            "or a class with a minimum() class method"
        ) from None


def identity_summary(ttype: Any) -> Any:
    """Return the summary of a timestamp type that changes nothing."""
    if ttype is int:
        return 0
    try:
        return ttype.identity_summary()
    except AttributeError:
        raise TimestampError(
            f"{ttype!r} is not a timestamp type: use int, ProductType(...), "
            "or a class with an identity_summary() class method"
        ) from None


def is_identity_summary(summary: Any) -> bool:
    """Return whether ``summary`` leaves every time unchanged.

    For user summaries this asks ``summary.is_identity()`` when defined, and
    otherwise compares with ``type(summary)()`` (the Rust ``Default``).
    """
    if type(summary) is int:
        return summary == 0
    if isinstance(summary, Product):
        return is_identity_summary(summary[0]) and is_identity_summary(summary[1])
    method = getattr(summary, "is_identity", None)
    if method is not None:
        return bool(method())
    try:
        return bool(summary == type(summary)())
    except TypeError:
        return False


def timestamp_type_of(time: Any) -> Any:
    """Return the timestamp type describing ``time`` (``int``, a ProductType, or its class).

    >>> timestamp_type_of(Product(3, Product(1, 2)))
    Product[int, Product[int, int]]
    """
    if type(time) is Product:
        return ProductType(timestamp_type_of(time[0]), timestamp_type_of(time[1]))
    return type(time)


def check_timestamp(time: Any, ttype: Any, what: str = "timestamp") -> Any:
    """Validate that ``time`` belongs to timestamp type ``ttype``; return it.

    Used where user-supplied times enter the system (``advance_to``, capability
    delays), so mistakes are reported where they are made.

    >>> check_timestamp(-1, int)
    Traceback (most recent call last):
    ...
    timelypy.errors.TimestampError: timestamp -1 is negative; int timestamps are in [0, 2**64-1]
    """
    if ttype is int:
        if type(time) is not int:
            raise TimestampError(
                f"{what} {time!r} ({_type_name(time)}) has the wrong type: this scope's "
                "timestamps are int"
            )
        if time < 0 or time > U64_MAX:
            raise TimestampError(
                f"{what} {time!r} is {'negative' if time < 0 else 'too large'}; "
                "int timestamps are in [0, 2**64-1]"
            )
        return time
    if isinstance(ttype, ProductType):
        if type(time) is not Product:
            raise TimestampError(
                f"{what} {time!r} ({_type_name(time)}) has the wrong type: this scope's "
                f"timestamps are {ttype!r}"
            )
        check_timestamp(time[0], ttype.outer, what)
        check_timestamp(time[1], ttype.inner, what)
        return time
    if isinstance(ttype, type) and not isinstance(time, ttype):
        raise TimestampError(
            f"{what} {time!r} ({_type_name(time)}) has the wrong type: this scope's "
            f"timestamps are {ttype.__name__}"
        )
    return time
