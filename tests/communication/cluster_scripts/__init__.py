"""Programs the cluster tests run as real processes, one per cluster process.

Each is a script (``python SCRIPT ARGS -n N -p I -w W -h HOSTFILE``, or
through ``python -m timelypy.launch``) and, where a test also needs its
logic in-process, an importable module.  Free arguments are ``key=value``
words, since Timely's argument parser rejects unknown ``-x`` options.
"""
