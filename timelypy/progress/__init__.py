"""The progress-tracking model, independent of any runtime.

* :mod:`~timelypy.progress.frontier` -- :class:`Antichain`, :class:`MutableAntichain`
* :mod:`~timelypy.progress.change_batch` -- :class:`ChangeBatch`
* :mod:`~timelypy.progress.location` -- :class:`Location`, :class:`Source`,
  :class:`Target`, :class:`Port`
* :mod:`~timelypy.progress.reachability` -- :class:`Builder`, :class:`Tracker`

This package depends only on the standard library and :mod:`timelypy.order`
(timestamps and summaries), so it can be read and tested on its own.
"""

from timelypy.progress.change_batch import ChangeBatch
from timelypy.progress.frontier import Antichain, MutableAntichain
from timelypy.progress.location import Location, Port, PortKind, Source, Target
from timelypy.progress.reachability import Builder, PortInformation, Tracker

__all__ = [
    "Antichain",
    "MutableAntichain",
    "ChangeBatch",
    "Location",
    "Port",
    "PortKind",
    "Source",
    "Target",
    "Builder",
    "Tracker",
    "PortInformation",
]
