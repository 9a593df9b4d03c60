"""Timely's ``simple``: the smallest dataflow, a stream of ten numbers and an inspector.

    python examples/simple.py

prints ``seen: 0`` through ``seen: 9``, one per line.  Like Timely's
``timely::example``, :func:`timelypy.example` runs one worker and ignores the
command line.
"""

import timelypy


def build(scope: timelypy.Scope) -> None:
    scope.to_stream(range(10)).inspect(lambda x: print(f"seen: {x!r}", flush=True))


if __name__ == "__main__":
    timelypy.example(build)
