"""Moving records and progress between workers; knows nothing of workers or dataflows.

``config`` (:class:`~timelypy.communication.config.Config` and Timely's
``-w/-n/-p/-h``), ``allocator`` (channels between worker threads of one
process), ``transport`` (a process's allocators and the lifecycle around
its workers' run), ``codec`` (records on the wire), and the cluster over
ZeroMQ: ``cluster`` (allocator and transport), ``network``, ``wire``,
``secret`` and ``watchdog``.  :func:`timelypy.execute.initialize_from` wraps
workers around a transport's allocators.
"""

__all__: list[str] = []  # the names live in the submodules
