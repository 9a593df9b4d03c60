"""Connectors: sources and sinks of real systems for stream-graph flows.

* :mod:`~timelypy.flow.connectors.stdio` -- :class:`~timelypy.flow.connectors.stdio.StdOutSink`;
* :mod:`~timelypy.flow.connectors.files` -- lines of files (``FileSource``,
  ``DirSource``), resumed at their byte offsets.
"""
