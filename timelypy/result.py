"""``Ok`` and ``Err``: the two outcomes of a fallible computation, as records.

They are Timely's ``Result`` for Python: ``ok_err`` splits a stream by them
and the ``map_ok``/``map_err`` family transforms them (see
:mod:`timelypy.dataflow.operators.ok_err`).  They live in this dependency-free
module so that the wire codec can carry them between processes.

``Ok`` sorts before ``Err``, as Rust's ``Result`` does, so mixed streams can
be sorted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Ok", "Err"]


class _Result:
    """Shared behaviour of :class:`Ok` and :class:`Err`: immutable, hashable, ordered."""

    __slots__ = ("value",)
    __match_args__ = ("value",)
    _rank = 0

    value: Any

    def __init__(self, value: Any) -> None:
        _set_value(self, value)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__name__ not in ("Ok", "Err") or cls.__module__ != __name__:
            raise TypeError(f"{cls.__name__}: Ok and Err cannot be subclassed")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return (type(self), (self.value,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return bool(self.value == other.value)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if type(other) is type(self):
            return bool(self.value != other.value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.value))

    def _key(self, other: object) -> tuple[int, int] | None:
        if isinstance(other, _Result):
            return self._rank, other._rank
        return None

    def __lt__(self, other: object) -> bool:
        ranks = self._key(other)
        if ranks is None:
            return NotImplemented
        if ranks[0] != ranks[1]:
            return ranks[0] < ranks[1]
        return bool(self.value < other.value)  # type: ignore[attr-defined]

    def __le__(self, other: object) -> bool:
        ranks = self._key(other)
        if ranks is None:
            return NotImplemented
        if ranks[0] != ranks[1]:
            return ranks[0] < ranks[1]
        return bool(self.value <= other.value)  # type: ignore[attr-defined]

    def __gt__(self, other: object) -> bool:
        ranks = self._key(other)
        if ranks is None:
            return NotImplemented
        if ranks[0] != ranks[1]:
            return ranks[0] > ranks[1]
        return bool(self.value > other.value)  # type: ignore[attr-defined]

    def __ge__(self, other: object) -> bool:
        ranks = self._key(other)
        if ranks is None:
            return NotImplemented
        if ranks[0] != ranks[1]:
            return ranks[0] > ranks[1]
        return bool(self.value >= other.value)  # type: ignore[attr-defined]


# The slot's own setter: immutability blocks ``self.value = ...``, and calling
# the descriptor directly is the cheapest way around it (one C call per record).
# (Looked up in the class's namespace: ``_Result.value`` reads as the annotation.)
_set_value: Callable[[_Result, Any], None] = _Result.__dict__["value"].__set__


class Ok(_Result):
    """A successful result carrying :attr:`value`.

    >>> Ok(3), Ok(3) == Ok(3), Ok(3) == Err(3), Ok(9) < Err(0)
    (Ok(3), True, False, True)
    """

    __slots__ = ()
    _rank = 0

    def is_ok(self) -> bool:
        """True: this is an ``Ok``."""
        return True

    def is_err(self) -> bool:
        """False: this is an ``Ok``."""
        return False


class Err(_Result):
    """A failed result carrying :attr:`value` (the error).

    >>> Err("bad").value
    'bad'
    """

    __slots__ = ()
    _rank = 1

    def is_ok(self) -> bool:
        """False: this is an ``Err``."""
        return False

    def is_err(self) -> bool:
        """True: this is an ``Err``."""
        return True
