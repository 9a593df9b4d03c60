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

import tempfile
import zipfile
from pathlib import Path
from typing import Any

import timelypy

__all__ = ["ship_package", "build_archive"]


def build_archive(directory: str | Path | None = None) -> Path:
    """Zip the ``timelypy`` and ``timelypy_spark`` packages; return the archive's path."""
    if timelypy.__file__ is None:
        raise ImportError(
            "cannot ship timelypy: it is not imported from files (a namespace package?); "
            "install timelypy on the executors instead"
        )
    # This module lives in timelypy_spark: no need to import the package it belongs to.
    roots = (Path(timelypy.__file__).resolve().parent, Path(__file__).resolve().parent)
    target = Path(directory or tempfile.mkdtemp(prefix="timelypy-ship-")) / "timelypy.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for root in roots:
            for path in sorted(root.rglob("*")):
                if path.is_file() and path.suffix in (".py", ".typed"):
                    archive.write(path, Path(root.name) / path.relative_to(root))
    return target


def ship_package(spark: Any) -> Path:
    """Add an archive of timelypy to the session with ``addPyFile``; return its path."""
    sc = getattr(spark, "sparkContext", spark)
    archive = build_archive()
    sc.addPyFile(str(archive))
    return archive
