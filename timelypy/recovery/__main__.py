"""``python -m timelypy.recovery``: create, inspect and garbage-collect recovery stores.

python -m timelypy.recovery create DIR --partitions N
python -m timelypy.recovery show DIR
python -m timelypy.recovery gc DIR

``DIR`` defaults to ``TIMELYPY_RECOVERY_DIRECTORY`` (the variable
``python -m timelypy.flow -r`` reads too).  A failure prints one line and
exits 2; ``--traceback`` (or ``TIMELYPY_TRACEBACK=1``) prints the whole
traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from timelypy.errors import RecoveryError
from timelypy.recovery.store import RecoveryStore, create_store, describe


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m timelypy.recovery",
        description="timelypy.flow recovery stores",
        epilog="DIR defaults to TIMELYPY_RECOVERY_DIRECTORY.",
    )
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=bool(os.environ.get("TIMELYPY_TRACEBACK")),
        help="print the whole traceback of a failure (TIMELYPY_TRACEBACK=1)",
    )
    directory = os.environ.get("TIMELYPY_RECOVERY_DIRECTORY") or None
    store_help = "the store's directory (default: TIMELYPY_RECOVERY_DIRECTORY)"
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create an empty store of N partitions")
    create.add_argument("directory", nargs="?", default=directory, help=store_help)
    create.add_argument("--partitions", "-p", type=int, default=1)
    show = commands.add_parser("show", help="executions, frontiers and the next resume epoch")
    show.add_argument("directory", nargs="?", default=directory, help=store_help)
    gc = commands.add_parser("gc", help="delete snapshots no resume can need")
    gc.add_argument("directory", nargs="?", default=directory, help=store_help)
    args = parser.parse_args(argv)
    if args.directory is None:
        parser.error("name the store's DIR (or set TIMELYPY_RECOVERY_DIRECTORY)")
    try:
        if args.command == "create":
            store = create_store(args.directory, args.partitions)
            print(f"created {store.directory} with {store.partitions} partition(s)")
        elif args.command == "show":
            print("\n".join(describe(RecoveryStore(args.directory))))
        else:
            deleted = RecoveryStore(args.directory).collect_garbage()
            print(f"deleted {deleted} snapshot(s)")
    except (RecoveryError, OSError) as exc:
        if args.traceback:
            traceback.print_exc()
        else:
            print(f"timelypy.recovery: {args.command} {args.directory}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
