"""Places in a dataflow graph where timestamps can be held.

A scope's operators are numbered ``1..n``; node ``0`` is the scope itself seen
from inside: its *outputs* (sources) are the scope's inputs and its *inputs*
(targets) are the scope's outputs.

* :class:`Target` -- an operator input, ``Target(node, port)``.  Messages in
  flight towards it are counted there.
* :class:`Source` -- an operator output, ``Source(node, port)``.  The
  operator's capabilities to send on it are counted there.
* :class:`Location` -- either, as ``Location(node, Port)`` with a
  :class:`Port` that says which kind and which index.  Targets order before
  sources at the same node, as in Timely.

``Source`` and ``Target`` are distinct types: ``Source(0, 0) != Target(0, 0)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

__all__ = ["PortKind", "Port", "Location", "Source", "Target"]


class PortKind(IntEnum):
    """Whether a port is an operator input (target) or output (source)."""

    TARGET = 0
    SOURCE = 1


class Port(NamedTuple):
    """An input or output port of some node: ``Port.target(i)`` or ``Port.source(i)``."""

    kind: PortKind
    # The field shadows tuple.index(); Port is never searched, and the name is public API.
    index: int  # type: ignore[assignment]

    @classmethod
    def target(cls, index: int) -> Port:
        """Return the port of input ``index``."""
        return cls(PortKind.TARGET, index)

    @classmethod
    def source(cls, index: int) -> Port:
        """Return the port of output ``index``."""
        return cls(PortKind.SOURCE, index)

    @property
    def is_target(self) -> bool:
        """Whether this is an input port."""
        return self.kind is PortKind.TARGET

    @property
    def is_source(self) -> bool:
        """Whether this is an output port."""
        return self.kind is PortKind.SOURCE

    def __repr__(self) -> str:
        return f"{'Target' if self.kind == PortKind.TARGET else 'Source'}({self.index})"


class Location(NamedTuple):
    """A node and one of its ports.

    >>> Location.new_source(2, 0), Location.from_target(Target(3, 1))
    (Location(2, Source(0)), Location(3, Target(1)))
    """

    node: int
    port: Port

    @classmethod
    def new_target(cls, node: int, port: int) -> Location:
        """Return the location of input ``port`` of ``node``."""
        return cls(node, Port(PortKind.TARGET, port))

    @classmethod
    def new_source(cls, node: int, port: int) -> Location:
        """Return the location of output ``port`` of ``node``."""
        return cls(node, Port(PortKind.SOURCE, port))

    @classmethod
    def from_target(cls, target: Target) -> Location:
        """Return the location of an operator input."""
        return cls(target.node, Port(PortKind.TARGET, target.port))

    @classmethod
    def from_source(cls, source: Source) -> Location:
        """Return the location of an operator output."""
        return cls(source.node, Port(PortKind.SOURCE, source.port))

    @property
    def is_target(self) -> bool:
        """Whether this is an operator input."""
        return self.port.kind is PortKind.TARGET

    @property
    def is_source(self) -> bool:
        """Whether this is an operator output."""
        return self.port.kind is PortKind.SOURCE

    def __repr__(self) -> str:
        return f"Location({self.node}, {self.port!r})"


class Source:
    """An operator output: ``Source(node, port)``."""

    __slots__ = ("node", "port")

    def __init__(self, node: int, port: int) -> None:
        self.node = node
        self.port = port

    def __eq__(self, other: object) -> bool:
        return type(other) is Source and self.node == other.node and self.port == other.port

    def __lt__(self, other: Source) -> bool:
        return (self.node, self.port) < (other.node, other.port)

    def __hash__(self) -> int:
        return hash((1, self.node, self.port))

    def __iter__(self) -> Iterator[int]:
        return iter((self.node, self.port))

    def __repr__(self) -> str:
        return f"Source({self.node}, {self.port})"


class Target:
    """An operator input: ``Target(node, port)``."""

    __slots__ = ("node", "port")

    def __init__(self, node: int, port: int) -> None:
        self.node = node
        self.port = port

    def __eq__(self, other: object) -> bool:
        return type(other) is Target and self.node == other.node and self.port == other.port

    def __lt__(self, other: Target) -> bool:
        return (self.node, self.port) < (other.node, other.port)

    def __hash__(self) -> int:
        return hash((0, self.node, self.port))

    def __iter__(self) -> Iterator[int]:
        return iter((self.node, self.port))

    def __repr__(self) -> str:
        return f"Target({self.node}, {self.port})"
