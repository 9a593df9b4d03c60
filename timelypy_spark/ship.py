"""Making timelypy importable on executors.

Executors run tasks in their own Python processes (``PYSPARK_PYTHON``).
They need the ``timelypy`` and ``timelypy_spark`` packages, in one of two
ways:

1. **Installed** in the executors' Python, like any dependency
   (``pip install timelypy[spark]`` on every node, or a shared virtualenv
   that ``PYSPARK_PYTHON`` points to).  Required anyway for pyzmq, msgpack
   and cloudpickle, which have compiled parts.
2. **Shipped** by the driver with :func:`ship_package`, which zips the two
   pure-Python packages and adds the archive with ``SparkContext.addPyFile``;
   every task of the session can then import them.  Use this when the
   executors have the dependencies but not (this version of) timelypy.

>>> # timelypy_spark.ship_package(spark)   # before the first timelypy_spark call
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import timelypy

__all__ = ["ship_package", "build_archive"]

_lock = threading.Lock()
#: This process's one directory for archives (removed when the process exits).
_directory: list[Path] = []
#: Archive paths already added, by Spark application id.
_shipped: dict[str, Path] = {}


def _ship_directory() -> Path:
    """The process's directory for archives: made once, removed at exit.

    Spark's file server sends an added file to executors from its path on the
    driver whenever one asks, so the archive must outlive the call (and the
    context): it goes when the driver's process ends.
    """
    with _lock:
        if not _directory:
            path = Path(tempfile.mkdtemp(prefix="timelypy-ship-"))
            atexit.register(shutil.rmtree, path, True)
            _directory.append(path)
        return _directory[0]


def build_archive(directory: str | Path | None = None) -> Path:
    """Zip the ``timelypy`` and ``timelypy_spark`` packages; return the archive's path.

    The archive goes into ``directory``, or into a directory of this process
    that is removed when it exits (never one left behind per call).
    """
    if timelypy.__file__ is None:
        raise ImportError(
            "cannot ship timelypy: it is not imported from files (a namespace package?); "
            "install timelypy on the executors instead"
        )
    # This module lives in timelypy_spark: no need to import the package it belongs to.
    roots = (Path(timelypy.__file__).resolve().parent, Path(__file__).resolve().parent)
    target = Path(directory or _ship_directory()) / "timelypy.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for root in roots:
            for path in sorted(root.rglob("*")):
                if path.is_file() and path.suffix in (".py", ".typed"):
                    archive.write(path, Path(root.name) / path.relative_to(root))
    return target


def ship_package(spark: Any) -> Path:
    """Add an archive of timelypy to the session with ``addPyFile``; return its path.

    Once per SparkContext: a second call returns the archive the first added.
    """
    sc = getattr(spark, "sparkContext", spark)
    application = str(sc.applicationId)
    with _lock:
        known = _shipped.get(application)
    if known is not None:
        return known
    archive = build_archive()
    sc.addPyFile(str(archive))
    with _lock:
        _shipped[application] = archive
    return archive
