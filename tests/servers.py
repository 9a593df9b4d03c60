"""Real servers for connector tests: each test module starts its own, on 127.0.0.1.

:func:`postgres` runs ``initdb`` and ``pg_ctl`` from Debian's ``postgresql``
package in a temporary directory, on a free port, as the ``postgres`` user
when the tests run as root (``initdb`` refuses root); the caller stops it.
A machine without the package skips those tests with how to install it
(``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from timelypy.communication.config import free_ports

__all__ = ["postgres"]


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL server for the duration of the ``with``; yields its DSN."""
    pytest.importorskip("psycopg", reason="needs psycopg 3: pip install -e '.[test]'")
    bindir = _bindir()
    if bindir is None:
        pytest.skip("needs PostgreSQL's server: apt-get install postgresql (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="timelypy-pg-"))
    data, log = root / "data", root / "log"
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root needs runuser to start PostgreSQL as postgres")
        as_postgres = [runuser, "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        root.chmod(0o700)
    (port,) = free_ports(1)
    subprocess.run(
        [*as_postgres, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -h 127.0.0.1 -k {root} -c fsync=off"
    subprocess.run(
        [
            *as_postgres,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-o",
            options,
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    finally:
        subprocess.run(
            [*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)
