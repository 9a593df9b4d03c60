"""A helper process of :func:`timelypy.flow.run_cluster` started by spawn.

``python -m timelypy.flow.child`` reads from standard input an 8-byte
length, a pickled header (the parent's ``sys.path``, the cluster's
addresses, this process's index, the workers per process and the shared
secret: plain data from the parent that started it, over a pipe only the
two share) and then the cloudpickled flow and input config, and runs its
part of the cluster (:func:`timelypy.flow._part.run_part`).  Captured
items go to worker 0, in the parent.
"""

from __future__ import annotations

import pickle
import sys


def main() -> None:
    """Run this process's workers of the parent's ``run_cluster`` (the spawn start)."""
    data = sys.stdin.buffer.read()
    length = int.from_bytes(data[:8], "big")
    path, addresses, proc_id, workers, secret = pickle.loads(data[8 : 8 + length])
    sys.path[:] = [entry for entry in path if entry not in sys.path] + sys.path
    import cloudpickle

    from timelypy.flow._part import run_part

    flow, source, recovery_config, epoch_interval, metrics = cloudpickle.loads(data[8 + length :])
    run_part(
        flow, source, recovery_config, epoch_interval, metrics, addresses, proc_id, workers, secret
    )


if __name__ == "__main__":
    main()
