"""Errors raised in a flow's steps: what your function raised, named by its step.

Every operator of :mod:`timelypy.flow.steps` that runs your functions turns
what they raise into the error the user sees, the same way:

* in a stream-graph step, a :class:`~timelypy.errors.StepError` naming the
  step, the worker and the epoch, whose ``__cause__`` is your exception;
* in an epoch-chain step, your exception itself, with a note naming the
  step and the epoch;
* a batch function's refused return
  (:class:`~timelypy.flow._batch.BatchRefused`), a
  :class:`~timelypy.errors.FlowError` naming the step, the worker and the
  epoch; a :class:`~timelypy.errors.StateKeyError` (already named) as it is.

In a fused run of steps (:class:`~timelypy.flow._fused.FusedRun`) the step
is the one whose line the traceback stops at.
"""

from __future__ import annotations

from typing import Any

from timelypy.errors import FlowError, StateKeyError, StepError
from timelypy.flow._batch import BatchRefused
from timelypy.flow._fused import FusedRun
from timelypy.flow.dataflow import Step

__all__ = ["step_error", "noted", "failure", "raise_from"]


def noted(exc: BaseException, step_id: str, operator: str, what: str) -> None:
    """Add a note to ``exc`` naming the step (``in step 'count' (reduce_epoch): what``)."""
    exc.add_note(f"in step {step_id!r} ({operator}): {what}")


def step_error(step_id: str, worker: int, epoch: Any, what: str, exc: BaseException) -> StepError:
    """The :class:`StepError` for ``exc`` raised by the user's ``what`` in ``step_id``."""
    return StepError(
        f"step {step_id!r} on worker {worker}, epoch {epoch}: {what} raised "
        f"{type(exc).__name__}: {exc}"
    )


def failure(step: Step | None, fn: Any, worker: int, epoch: int, exc: Exception) -> Exception:
    """The error to raise for ``exc``, raised by ``fn`` of ``step`` at ``epoch``.

    A refused return (:class:`~timelypy.flow._batch.BatchRefused`) becomes a
    :class:`FlowError` naming the step, the worker and the epoch; in a
    stream-graph step, a user function's exception becomes a
    :class:`StepError` whose cause it is; in a chain step it stays itself,
    with a note naming the step.  A :class:`StateKeyError` (already named)
    stays as it is.
    """
    if isinstance(exc, BatchRefused):
        where = "" if step is None else f"step {step.step_id!r} ({step.operator}) "
        error = FlowError(f"{where}on worker {worker}, epoch {epoch}: {exc}")
        error.__cause__ = None
        error.__suppress_context__ = True
        return error
    if step is None or isinstance(exc, StateKeyError):
        return exc
    if step.form == "graph":
        what = getattr(fn, "what", None) or getattr(step.options, "what", "your function")
        failed = step_error(step.step_id, worker, epoch, str(what), exc)
        failed.__cause__ = exc
        return failed
    noted(exc, step.step_id, step.operator, f"your function raised at epoch {epoch}")
    return exc


def raise_from(
    current: Step | FusedRun | None, fn: Any, worker: int, epoch: int, exc: Exception
) -> None:
    """Raise the error for ``exc`` raised by ``current`` (a step, or a fused run of them)."""
    step: Step | None
    if isinstance(current, FusedRun):
        owner, _ = current.owner(exc)
        step = owner if isinstance(owner, Step) else current.steps[0]
        fn = None
    else:
        step = current
    error = failure(step, fn, worker, epoch, exc)
    if error is exc:
        raise exc
    raise error
