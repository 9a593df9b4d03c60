"""Peers: reference implementations that timelypy's benchmarks are compared with.

Each peer takes the workload's input and returns a result that the benchmark
checks against the plain-Python result, so peers are verified, not only timed.

- ``plain``: the same work as a plain Python loop, with no framework. This is
  the limit for a pure-Python engine (DESIGN.md section 3): the cost of calling
  the user's functions once per record.
- ``bytewax_peer``: bytewax 0.21.1 (Python on Rust Timely), one worker through
  ``bytewax.testing.run_main``. Needs ``pip install -e '.[bench]'``.
- ``pyspark_peer``: PySpark RDD and DataFrame wordcount over the corpus files.
  Needs ``pip install -e '.[spark]'`` and Java 17.

The submodules import their frameworks lazily, so importing this package never
needs bytewax or PySpark.
"""
