"""Capabilities: the right to send data at a time.

An operator may send a record at time ``t`` on an output only while it
holds a *capability* for that output at a time ``<= t``.  Progress tracking
counts capabilities: a time stays incomplete downstream while any
capability that could produce it is held.  So capabilities must be released
promptly, and never used after release.

Rust releases a capability when it is dropped.  Python has no destructors
to rely on, so timelypy uses an explicit protocol:

* A capability minted while an operator's constructor or activation runs is
  **borrowed**: it is released automatically when that constructor or
  activation returns -- unless you call :meth:`Capability.retain`, which
  makes it **owned**.  This makes the common patterns safe: a temporary
  ``output.session(cap.delayed(t))`` cannot leak, and a constructor that
  ignores its initial capability releases it, as in Rust.
* An owned capability lives until you call :meth:`Capability.drop` (or hand
  it to something that takes ownership: ``notificator.notify_at(cap)``,
  ``CapabilitySet.insert(cap)``).  :meth:`Capability.downgrade` moves it to a
  later time in place.
* A capability handed to a notificator or a :class:`CapabilitySet` is
  **held** by it: you may still read its time, mint from it or send with it,
  but only its holder releases it -- ``drop``, ``downgrade`` or ``retain`` on
  it raise.  The notificator gives it back (borrowed) when it delivers.
  A holder of your own uses the same three public methods the built-in ones
  use: :meth:`Capability.hold`, :meth:`Capability.release_held` and
  :meth:`Capability.lend`.
* An :class:`InputCapability` (paired with each input message) is valid
  only during the activation that received it.  ``retain()`` turns it into
  an owned :class:`Capability`; ``delayed(t)`` into a borrowed one at a
  later time.

Any misuse -- using a released capability, delaying to an earlier time,
minting for an output the input cannot reach -- raises
:class:`~timelypy.errors.CapabilityError` naming the operator, worker and
times, before any count changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from timelypy.errors import CapabilityError, TimestampError
from timelypy.order import less_equal, results_in

if TYPE_CHECKING:
    from timelypy.dataflow.operator import LeafOperator

__all__ = ["Capability", "InputCapability", "CapabilitySet"]

_BORROWED, _OWNED, _RELEASED, _HELD = 0, 1, 2, 3


def _where(op: LeafOperator) -> str:
    return f"operator {op.name!r} (worker {op.worker_index})"


class Capability:
    """The right to send on one output at :attr:`time` and later times.

    >>> # inside an operator: cap.delayed(5) mints a capability at 5,
    >>> # cap.downgrade(6) moves one, cap.retain() keeps one past the activation,
    >>> # cap.drop() releases one.
    """

    __slots__ = ("_op", "_output", "_state", "_time")

    def __init__(self, op: LeafOperator, output: int, time: Any, state: int) -> None:
        self._op = op
        self._output = output
        self._time = time
        self._state = state

    @classmethod
    def initial(cls, op: LeafOperator, output: int, time: Any) -> Capability:
        """The capability an operator's constructor receives for ``output`` (borrowed).

        It is this worker's share of the capabilities every operator starts
        with (counted by the scope without communication), so minting it
        changes no count.
        """
        return cls(op, output, time, _BORROWED)

    @classmethod
    def _mint(cls, op: LeafOperator, output: int, time: Any) -> Capability:
        """Create a capability, counting it; borrowed if an activation is running."""
        internal = op.internals[output]
        internal[time] = internal.get(time, 0) + 1
        borrowed = op.borrowed
        if borrowed is None:
            cap = cls(op, output, time, _OWNED)
            op.changed_outside()
        else:
            cap = cls(op, output, time, _BORROWED)
            borrowed.append(cap)
        return cap

    @property
    def time(self) -> Any:
        """The time this capability allows sending at."""
        return self._time

    @property
    def output(self) -> int:
        """The index of the output this capability is for."""
        return self._output

    @property
    def is_valid(self) -> bool:
        """Whether the capability has not been released."""
        return self._state != _RELEASED

    @property
    def is_retained(self) -> bool:
        """Whether the capability is owned (survives the current activation)."""
        return self._state == _OWNED

    def _check(self, action: str) -> None:
        if self._state == _RELEASED:
            raise CapabilityError(
                f"{_where(self._op)}: cannot {action} a capability at time {self._time!r} "
                "that was already released (borrowed capabilities are released at the end "
                "of the activation that made them; call retain() to keep one)"
            )

    def _check_mine(self, action: str) -> None:
        self._check(action)
        if self._state == _HELD:
            raise CapabilityError(
                f"{_where(self._op)}: cannot {action} the capability at time {self._time!r}: "
                "a notificator or CapabilitySet holds it and will release it itself"
            )

    def _check_time(self, new_time: Any, action: str) -> None:
        try:
            ok = less_equal(self._time, new_time)
        except TypeError as exc:
            raise CapabilityError(
                f"{_where(self._op)}: cannot {action} the capability at {self._time!r} "
                f"to {new_time!r}: {exc}"
            ) from exc
        if not ok:
            raise CapabilityError(
                f"{_where(self._op)}: attempted to {action} the capability at "
                f"{self._time!r} to {new_time!r}, which is not beyond the capability's time"
            )
        if type(new_time) is int and new_time < 0:
            raise TimestampError(f"{_where(self._op)}: time {new_time} is negative")

    def delayed(self, new_time: Any) -> Capability:
        """Mint a new capability at ``new_time``, which must be ``>=`` :attr:`time`.

        The new capability is borrowed if an activation is running.
        """
        self._check("delay")
        self._check_time(new_time, "delay")
        return Capability._mint(self._op, self._output, new_time)

    def try_delayed(self, new_time: Any) -> Capability | None:
        """Like :meth:`delayed`, but return ``None`` instead of raising."""
        if self._state == _RELEASED:
            return None
        try:
            ok = less_equal(self._time, new_time)
        except TypeError:
            return None
        return Capability._mint(self._op, self._output, new_time) if ok else None

    def downgrade(self, new_time: Any) -> None:
        """Move this capability to ``new_time`` (``>=`` :attr:`time`) in place."""
        old = self._time
        # The checks in full, unless an int moves forward on a capability one may move.
        if not (
            type(new_time) is int
            and type(old) is int
            and old <= new_time
            and self._state < _RELEASED
        ):
            self._check_mine("downgrade")
            self._check_time(new_time, "downgrade")
        if new_time == old:
            return
        op = self._op
        internal = op.internals[self._output]
        internal[old] = internal.get(old, 0) - 1
        internal[new_time] = internal.get(new_time, 0) + 1
        self._time = new_time
        if op.borrowed is None:
            op.changed_outside()

    def retain(self) -> Capability:
        """Keep this capability beyond the current activation; return it."""
        self._check_mine("retain")
        self._state = _OWNED
        return self

    def drop(self) -> None:
        """Release this capability."""
        self._check_mine("drop")
        self.release_held()

    release = drop

    def release_held(self) -> None:
        """Release, whoever holds it; nothing if already released (a holder's release)."""
        if self._state == _RELEASED:
            return
        op = self._op
        internal = op.internals[self._output]
        internal[self._time] = internal.get(self._time, 0) - 1
        self._state = _RELEASED
        if op.borrowed is None:
            op.changed_outside()

    def lend(self) -> Capability:
        """Hand a held capability to the running activation, which then borrows it.

        A holder delivering a capability (a notificator) lends it: it is
        released when the activation ends unless the logic retains it.
        Outside an activation it becomes owned by whoever receives it.
        """
        borrowed = self._op.borrowed
        if borrowed is None:
            if self._state == _HELD:
                self._state = _OWNED
        elif self._state in (_OWNED, _HELD):
            self._state = _BORROWED
            borrowed.append(self)
        return self

    def hold(self, action: str) -> None:
        """Take this capability from its user on behalf of a holder (a notificator, a set).

        Afterwards only the holder releases it (:meth:`release_held`); the
        user's ``drop``, ``downgrade`` and ``retain`` raise.  ``action`` names
        what the holder does, for the error if the capability cannot be held.
        """
        self._check_mine(action)
        self._state = _HELD

    def end_borrow(self) -> None:
        """Release the capability if it is still borrowed (its activation ended)."""
        if self._state == _BORROWED:
            internal = self._op.internals[self._output]
            internal[self._time] = internal.get(self._time, 0) - 1
            self._state = _RELEASED

    def allows(self, op: LeafOperator, output: int) -> bool:
        """Whether this capability lets ``op`` send on ``output`` (an output handle asks)."""
        return self._state != _RELEASED and self._op is op and self._output == output

    def why_not(self, op: LeafOperator, output: int) -> str:
        """Why :meth:`allows` said no, for the error message."""
        if self._state == _RELEASED:
            return "it was released (borrowed capabilities end with their activation)"
        if self._op is not op:
            return f"it belongs to operator {self._op.name!r}"
        return f"it is for output {self._output}"

    def __repr__(self) -> str:
        state = ("borrowed", "owned", "released", "held")[self._state]
        return f"Capability(time={self._time!r}, output={self._output}, {state})"


class InputCapability:
    """The time of an input message, valid during the activation that received it.

    It lets the operator send at that time on outputs its input reaches
    without a change of time (``output.session(input_cap)``), and mint
    capabilities through the operator's path summaries.
    """

    __slots__ = ("_activation", "_input", "_op", "_time")

    def __init__(self, op: LeafOperator, input_index: int, time: Any) -> None:
        self._op = op
        self._input = input_index
        self._time = time
        self._activation = op.activation

    @property
    def time(self) -> Any:
        """The time of the message."""
        return self._time

    def _check(self, action: str) -> None:
        op = self._op
        if self._activation != op.activation or op.borrowed is None:
            raise CapabilityError(
                f"{_where(op)}: cannot {action} the input capability at {self._time!r} "
                "outside the activation that received its message; call retain() "
                "during that activation to keep a capability"
            )

    def reaches(self, op: LeafOperator, output: int) -> bool:
        """Whether ``op`` may send at this time on ``output`` now (an output handle asks)."""
        return (
            self._activation == op.activation
            and op.borrowed is not None
            and self._op is op
            and output in op.identity_paths[self._input]
        )

    def why_not(self, op: LeafOperator, output: int) -> str:
        """Why :meth:`reaches` said no, for the error message."""
        if self._activation != op.activation or op.borrowed is None or self._op is not op:
            return "input capabilities are only valid during the activation that received them"
        return (
            f"input {self._input} does not reach this output without changing the time; "
            "use cap.delayed(time, output) to mint a capability"
        )

    def valid_for_output(self, output: int) -> bool:
        """Whether this capability allows sending at its own time on ``output``."""
        return output in self._op.identity_paths[self._input]

    def delayed(self, new_time: Any, output: int = 0) -> Capability:
        """Mint a borrowed capability at ``new_time`` on ``output``.

        Some path summary ``s`` from this input to ``output`` must have
        ``s.results_in(time) <= new_time``.
        """
        self._check("delay")
        op = self._op
        if not 0 <= output < op.outputs:
            raise CapabilityError(
                f"{_where(op)}: output {output} does not exist (the operator has "
                f"{op.outputs} output(s))"
            )
        summaries = op.connectivity[self._input].get(output)
        if not summaries:
            raise CapabilityError(
                f"{_where(op)}: input {self._input} is not connected to output {output}; "
                f"cannot mint a capability there from the input capability at {self._time!r}"
            )
        try:
            ok = any(
                (t := results_in(s, self._time)) is not None and less_equal(t, new_time)
                for s in summaries
            )
        except TypeError as exc:
            raise CapabilityError(f"{_where(op)}: cannot delay to {new_time!r}: {exc}") from exc
        if not ok:
            raise CapabilityError(
                f"{_where(op)}: cannot delay the input capability at {self._time!r} to "
                f"{new_time!r} on output {output}: it is not greater or equal to the "
                f"operator's input-output summary ({list(summaries)!r})"
            )
        return Capability._mint(op, output, new_time)

    def retain(self, output: int = 0) -> Capability:
        """Mint an owned capability at this time on ``output``."""
        return self.delayed(self._time, output).retain()

    def hold(self, action: str) -> NoReturn:
        """Refuse: notificators and sets keep capabilities, and an input capability is not one."""
        raise CapabilityError(
            f"{_where(self._op)}: cannot {action} an InputCapability (time {self._time!r}): it "
            "is only valid during this activation; pass input_cap.retain() (or "
            "input_cap.delayed(time)) instead"
        )

    def __repr__(self) -> str:
        return f"InputCapability(time={self._time!r}, input={self._input})"


class CapabilitySet:
    """A minimal set of owned capabilities for one output.

    Inserting a capability that an existing one already covers releases the
    new one; inserting one that covers existing ones releases those.
    """

    def __init__(self, capabilities: Iterable[Capability] = ()) -> None:
        self._elements: list[Capability] = []
        for cap in capabilities:
            self.insert(cap)

    def _live(self) -> list[Capability]:
        """The elements not released behind the set's back (a user's ``drop``)."""
        elements = self._elements
        if any(c._state == _RELEASED for c in elements):
            elements = self._elements = [c for c in elements if c._state != _RELEASED]
        return elements

    def insert(self, capability: Capability | InputCapability) -> None:
        """Take ownership of ``capability``, keeping the set minimal.

        An :class:`InputCapability` is refused with a clear error (it is only
        good during its activation): insert ``input_cap.retain()`` instead.
        """
        if not isinstance(capability, Capability):
            capability.hold("insert into a CapabilitySet")  # raises
        if any(c is capability for c in self._live()):
            return
        capability.hold("insert into a CapabilitySet")
        time = capability.time
        if any(less_equal(c.time, time) for c in self._elements):
            capability.release_held()
            return
        keep = []
        for c in self._elements:
            if less_equal(time, c.time):
                c.release_held()
            else:
                keep.append(c)
        keep.append(capability)
        self._elements = keep

    def delayed(self, time: Any) -> Capability:
        """Mint a capability at ``time`` from an element ``<=`` it."""
        for cap in self._live():
            if less_equal(cap.time, time):
                return cap.delayed(time)
        op_name = _where(self._elements[0]._op) if self._elements else "capability set"
        raise CapabilityError(
            f"{op_name}: failed to create a delayed capability at {time!r}: no element of "
            f"the set {[c.time for c in self._elements]!r} is less or equal to it"
        )

    def try_delayed(self, time: Any) -> Capability | None:
        """Like :meth:`delayed`, but return ``None`` if no element is ``<=`` ``time``."""
        for cap in self._live():
            if less_equal(cap.time, time):
                return cap.delayed(time)
        return None

    def downgrade(self, frontier: Iterable[Any]) -> None:
        """Replace the set by capabilities at the elements of ``frontier``.

        Every element must be ``>=`` some current element.  An empty
        frontier releases everything.
        """
        times = list(frontier)
        elements = self._live()
        for time in times:
            if not any(less_equal(c.time, time) for c in elements):
                where = _where(elements[0]._op) if elements else "capability set"
                raise CapabilityError(
                    f"{where}: cannot downgrade the capability set "
                    f"{[c.time for c in elements]!r} to {times!r}: {time!r} is not beyond any "
                    "element"
                )
        new = [self.delayed(t) for t in times]
        for cap in self._elements:
            cap.release_held()
        self._elements = []
        for cap in new:
            self.insert(cap)

    def first(self) -> Capability | None:
        """Return some element, or ``None`` if the set is empty."""
        elements = self._live()
        return elements[0] if elements else None

    def clear(self) -> None:
        """Release every capability."""
        for cap in self._elements:
            cap.release_held()
        self._elements = []

    def is_empty(self) -> bool:
        """Whether the set holds no capability."""
        return not self._live()

    def times(self) -> list[Any]:
        """The times of the held capabilities."""
        return [c.time for c in self._live()]

    def __iter__(self) -> Iterator[Capability]:
        return iter(list(self._live()))

    def __len__(self) -> int:
        return len(self._live())

    def __repr__(self) -> str:
        return f"CapabilitySet({self.times()!r})"
