"""timelypy: Timely Dataflow's progress-tracking model in pure Python.

The package is layered (see ``docs/``):

* :mod:`timelypy.order` -- timestamps and path summaries;
* :mod:`timelypy.progress` -- antichains, change batches, reachability;
* higher layers (runtime, cluster, Spark backend) build on those.
"""

from timelypy.order import Product, ProductType

__all__ = ["Product", "ProductType"]

__version__ = "0.1.0"
