"""``python -m timelypy.recovery``: create, inspect and garbage-collect recovery stores.

python -m timelypy.recovery create DIR --partitions N
python -m timelypy.recovery show DIR
python -m timelypy.recovery gc DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from timelypy.errors import RecoveryError
from timelypy.recovery.store import RecoveryStore, create_store, describe


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m timelypy.recovery", description="timelypy.flow recovery stores"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create an empty store of N partitions")
    create.add_argument("directory")
    create.add_argument("--partitions", "-p", type=int, default=1)
    show = commands.add_parser("show", help="executions, frontiers and the next resume epoch")
    show.add_argument("directory")
    gc = commands.add_parser("gc", help="delete snapshots no resume can need")
    gc.add_argument("directory")
    args = parser.parse_args(argv)
    try:
        if args.command == "create":
            store = create_store(args.directory, args.partitions)
            print(f"created {store.directory} with {store.partitions} partition(s)")
        elif args.command == "show":
            print("\n".join(describe(RecoveryStore(args.directory))))
        else:
            deleted = RecoveryStore(args.directory).collect_garbage()
            print(f"deleted {deleted} snapshot(s)")
    except RecoveryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
