"""Real servers for connector tests: each test module starts its own, on 127.0.0.1.

:func:`redis` runs ``redis-server`` (Debian's ``redis-server`` package)
without persistence on a free port.  :func:`postgres` runs ``initdb`` and
``pg_ctl`` from Debian's ``postgresql`` package in a temporary directory, on
a free port, as the ``postgres`` user when the tests run as root
(``initdb`` refuses root); the caller stops it.
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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from timelypy.communication.config import free_ports

__all__ = ["postgres", "redis"]


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


@contextlib.contextmanager
def redis() -> Iterator[dict[str, object]]:
    """A redis-server (no persistence) for the duration of the ``with``; yields its address."""
    client = pytest.importorskip("redis", reason="needs redis-py: pip install -e '.[test]'")
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("needs redis-server: apt-get install redis-server (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="timelypy-redis-"))
    (port,) = free_ports(1)
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = {"host": "127.0.0.1", "port": port}
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.Redis(**address).ping()
                break
            except client.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield address
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(root, ignore_errors=True)
