"""Real servers for connector tests: each test module starts its own, on 127.0.0.1.

:func:`redis` runs ``redis-server`` (Debian's ``redis-server`` package)
without persistence on a free port.  :func:`postgres` runs ``initdb`` and
``pg_ctl`` from Debian's ``postgresql`` package in a temporary directory, on
a free port, as the ``postgres`` user when the tests run as root
(``initdb`` refuses root).  :func:`postgres_server` and
:func:`redis_server` hand out the server itself, to stop, kill and restart
it mid-run (the reconnect tests).
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

__all__ = ["PostgresServer", "RedisServer", "postgres", "postgres_server", "redis", "redis_server"]


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


class PostgresServer:
    """A PostgreSQL server in a temporary directory, on 127.0.0.1 and a free port."""

    def __init__(self, bindir: Path, root: Path, as_postgres: list[str], port: int) -> None:
        self.bindir, self.root, self.as_postgres, self.port = bindir, root, as_postgres, port
        self.data, self.log = root / "data", root / "log"
        #: the connection string of the server
        self.dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        subprocess.run(
            [*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            check=check,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off"
        self._pg_ctl("-l", str(self.log), "-o", options, "-w", "start")

    def stop(self) -> None:
        """Stop at once (``-m immediate``: every backend is killed, as in a crash)."""
        self._pg_ctl("-m", "immediate", "stop", check=False)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A running :class:`PostgresServer` for the duration of the ``with``; stopped after it."""
    pytest.importorskip("psycopg", reason="needs psycopg 3: pip install -e '.[test]'")
    bindir = _bindir()
    if bindir is None:
        pytest.skip("needs PostgreSQL's server: apt-get install postgresql (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="timelypy-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root needs runuser to start PostgreSQL as postgres")
        as_postgres = [runuser, "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        root.chmod(0o700)
    (port,) = free_ports(1)
    server = PostgresServer(bindir, root, as_postgres, port)
    initdb = [str(bindir / "initdb"), "-D", str(server.data), "-U", "postgres", "-A", "trust"]
    subprocess.run(
        [*as_postgres, *initdb],
        check=True,
        capture_output=True,
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL server for the duration of the ``with``; yields its DSN."""
    with postgres_server() as server:
        yield server.dsn


class RedisServer:
    """A redis-server in a temporary directory, on 127.0.0.1 and a free port.

    ``persistent``: an append-only file synced at every write, so that a
    restart keeps every entry the server acknowledged.
    """

    def __init__(self, executable: str, root: Path, port: int, persistent: bool) -> None:
        self.executable, self.root, self.port = executable, root, port
        self.persistent = persistent
        #: ``redis.Redis`` keyword arguments for the server
        self.address: dict[str, object] = {"host": "127.0.0.1", "port": port}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it answers (bounded)."""
        client = pytest.importorskip("redis")
        durability = ["--appendonly", "yes", "--appendfsync", "always"]
        durability = durability if self.persistent else ["--appendonly", "no"]
        where = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root)]
        process = self.process = subprocess.Popen(
            [self.executable, *where, "--save", "", *durability],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                client.Redis(**self.address).ping()
                return
            except (client.ConnectionError, client.BusyLoadingError):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        """Stop the server (SIGTERM)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextlib.contextmanager
def redis_server(persistent: bool = False) -> Iterator[RedisServer]:
    """A running :class:`RedisServer` for the duration of the ``with``; stopped after it."""
    pytest.importorskip("redis", reason="needs redis-py: pip install -e '.[test]'")
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("needs redis-server: apt-get install redis-server (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="timelypy-redis-"))
    (port,) = free_ports(1)
    server = RedisServer(executable, root, port, persistent)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def redis() -> Iterator[dict[str, object]]:
    """A redis-server (no persistence) for the duration of the ``with``; yields its address."""
    with redis_server() as server:
        yield server.address
