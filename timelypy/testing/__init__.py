"""``timelypy.testing``: a kit for testing your own operators and flows.

Operators you write with ``unary``, ``unary_frontier``, ``binary`` or
:class:`~timelypy.OperatorBuilder`, and flows you build with
:class:`timelypy.flow.Dataflow`, deserve the tests timelypy's own operators
get.  The kit gives them four things:

* **Hand-stepped workers** (:mod:`timelypy.testing.stepping`):
  :func:`stepped_workers` makes ``n`` real workers over the in-memory
  allocators without starting threads; :func:`settle` and
  :func:`run_to_completion` step them from the test's thread.  A dataflow
  that never completes fails with what holds it (an operator keeping a
  capability, an input never closed), not with a hang.
* **Batches in and out** (:mod:`timelypy.testing.batches`): :func:`feed`
  and :class:`EpochFeed` send ``(epoch, records)`` batches through an
  :class:`~timelypy.InputHandle`; ``stream.capture()`` records ``(time,
  records)`` on each worker and :func:`extract_all` merges the workers'
  captures; :func:`records_by_epoch` is where a plain-Python model starts.
* **Deterministic simulation** (:mod:`timelypy.testing.simulation`):
  :func:`simulate` runs a dataflow on ``n`` hand-stepped workers with a
  *schedule* (a list of :class:`Turn`) saying which worker feeds and steps
  next, so one call explores one interleaving, exactly reproducibly.
  :mod:`timelypy.testing.strategies` draws inputs, worker counts and
  schedules with hypothesis (the only module of the kit that needs it).
* **Flow sources and sinks** (:mod:`timelypy.testing.flow`): a list in
  (:class:`TestingSource`), a list out (:class:`TestingSink`), and
  :func:`items_by_epoch` to compare outputs whose order within an epoch is
  not fixed.

An operator, checked against its model on three workers and one
interleaving (``docs/testing.md`` has the property-based version):

>>> from timelypy.dataflow import Exchange
>>> from timelypy.testing import records_by_epoch, simulate
>>> def total(stream):             # everything to worker 0, one sum per time
...     def constructor(cap, info):
...         sums = {}
...         def logic(input, output):
...             for cap, records in input:
...                 if cap.time not in sums:
...                     sums[cap.time] = [cap.retain(), 0]
...                 sums[cap.time][1] += sum(records)
...             for time in sorted(sums):
...                 if not input.frontier.less_equal(time):
...                     held, value = sums.pop(time)
...                     output.session(held).give(value)
...                     held.drop()
...         return logic
...     return stream.unary_frontier(Exchange(lambda x: 0), "Total", constructor)
>>> batches = [(0, [1, 2]), (0, [3]), (2, [4])]
>>> run = simulate(total, batches, workers=3, schedule=[2, 0, 0, 1])
>>> run.assert_output([(e, [sum(r)]) for e, r in records_by_epoch(batches).items()])
>>> run.extract()
[(0, [6]), (2, [4])]
"""

from timelypy.flow.outputs import TestingOutputConfig
from timelypy.testing.batches import (
    Batch,
    EpochFeed,
    check_batches,
    extract_all,
    feed,
    records_by_epoch,
)
from timelypy.testing.flow import TestingSink, TestingSource, items_by_epoch
from timelypy.testing.simulation import Simulation, Turn, normalize_schedule, simulate
from timelypy.testing.stepping import (
    describe_holders,
    run_to_completion,
    settle,
    stepped_workers,
)

__all__ = [
    "stepped_workers",
    "settle",
    "run_to_completion",
    "describe_holders",
    "Batch",
    "EpochFeed",
    "feed",
    "check_batches",
    "extract_all",
    "records_by_epoch",
    "Turn",
    "Simulation",
    "simulate",
    "normalize_schedule",
    "TestingSource",
    "TestingSink",
    "TestingOutputConfig",
    "items_by_epoch",
]
