"""A process that takes no part in any cluster: process 1 fails at once, the others linger.

    python linger.py TIMELY-ARGS

Process 1 prints ``process 1 failing`` and exits with code 4.  Every other
process prints ``process P lingering`` and waits up to :data:`LINGER_SECONDS`
without ever noticing, so only the launcher can stop it.
"""

from __future__ import annotations

import sys
import threading

import timelypy

#: How long the other processes wait (bounded, so nothing outlives a broken test for long).
LINGER_SECONDS = 60.0


def main(argv: list[str]) -> int:
    """Fail as process 1, linger otherwise."""
    config, _free = timelypy.Config.from_args(argv)
    process = config.process_index
    if process == 1:
        print("process 1 failing", flush=True)
        return 4
    print(f"process {process} lingering", flush=True)
    threading.Event().wait(LINGER_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
