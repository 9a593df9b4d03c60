"""Operators attach themselves to :class:`Stream` and :class:`Scope`.

Timely defines each operator as an *extension trait* implemented for
streams: ``use timely::dataflow::operators::Map;`` and every stream has
``.map``.  timelypy does the same: the module of an operator defines it as
a plain function whose first argument is the stream (or scope) and attaches
it as a method::

    @stream_method
    def map(stream: Stream[T], func: Callable[[T], U]) -> Stream[U]: ...

so ``stream.py`` imports no operator, and the operator modules form no
import cycle with it.  For type checkers, ``Stream`` and ``Scope`` name each
attached function in an ``if TYPE_CHECKING:`` block (one line each; the
signature lives only with the operator), and a test checks that the two
lists agree.  A user's operator can attach itself the same way, or simply
stay a function taking a stream.

(The decorators are plain functions, not decorator factories: type checkers
then see through them even across the import cycle that the
``TYPE_CHECKING`` declarations make.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from timelypy.dataflow.scope import Scope
from timelypy.dataflow.stream import Stream

__all__ = ["stream_method", "scope_method", "attach"]

F = TypeVar("F", bound=Callable[..., Any])


def attach(cls: type, name: str, func: Callable[..., Any]) -> None:
    """Attach ``func`` to ``cls`` as the method ``name``.

    Two different operators cannot claim one name: the second raises
    ``TypeError`` naming the first (re-importing the same module may).
    """
    existing = cls.__dict__.get(name)
    if existing is not None and (
        getattr(existing, "__module__", None),
        getattr(existing, "__qualname__", None),
    ) != (func.__module__, func.__qualname__):
        raise TypeError(f"{cls.__name__}.{name} is already defined by {existing!r}")
    setattr(cls, name, func)


def stream_method(func: F) -> F:
    """Attach the decorated function to :class:`Stream` as a method of the same name."""
    attach(Stream, func.__name__, func)
    return func


def scope_method(func: F) -> F:
    """Attach the decorated function to :class:`Scope` as a method of the same name."""
    attach(Scope, func.__name__, func)
    return func
