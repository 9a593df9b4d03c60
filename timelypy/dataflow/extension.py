"""Operators attach themselves to :class:`Stream` and :class:`Scope`.

Timely defines each operator as an *extension trait* implemented for
streams: ``use timely::dataflow::operators::Map;`` and every stream has
``.map``.  timelypy does the same with :func:`extends`: the module of an
operator defines it as a plain function whose first argument is the stream
(or scope) and attaches it as a method::

    @extends(Stream)
    def map(stream: Stream[T], func: Callable[[T], U]) -> Stream[U]: ...

so ``stream.py`` imports no operator and no operator module imports another
through ``Stream``.  For type checkers, ``Stream`` and ``Scope`` name each
attached function in an ``if TYPE_CHECKING:`` block (one line each; the
signature lives only with the operator), and a test checks that the two
lists agree.  A user's operator can attach itself the same way, or simply
stay a function taking a stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["extends"]

F = TypeVar("F", bound=Callable[..., Any])


def extends(cls: type, name: str | None = None) -> Callable[[F], F]:
    """Attach the decorated function to ``cls`` as a method named ``name`` (default: its own).

    Two different operators cannot claim one name: the second raises
    ``TypeError`` naming the first (re-importing the same module may).
    """

    def attach(func: F) -> F:
        method = name or func.__name__
        existing = cls.__dict__.get(method)
        if existing is not None and (
            getattr(existing, "__module__", None),
            getattr(existing, "__qualname__", None),
        ) != (func.__module__, func.__qualname__):
            raise TypeError(f"{cls.__name__}.{method} is already defined by {existing!r}")
        setattr(cls, method, func)
        return func

    return attach
