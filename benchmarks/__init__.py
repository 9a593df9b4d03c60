"""Benchmarks: timelypy against its peers, measured side by side in one run.

Every figure a benchmark prints comes from the run that prints it, and is
quoted as a median and as a ratio to the plain-Python limit measured in the
same run (DESIGN.md section 3). ``_data`` makes the shared inputs, ``_harness``
times and tabulates, ``peers`` holds the reference implementations (plain
Python, bytewax, PySpark).
"""
