"""The cluster's shared secret, and the keys and tags derived from it.

Every process of a cluster must know the cluster's shared secret
(``TIMELYPY_SECRET``, or the file named by ``TIMELYPY_SECRET_FILE``; the
launcher makes one per run).  Nothing secret ever travels: each process
derives the same values from it.

* The **run tag** (:func:`run_tag`): 8 bytes from the secret and the run's
  name (``TIMELYPY_RUN``, empty by default; the Spark backend names every
  execution).  It prefixes every routing id, so a message of another run is
  recognised and dropped, and it salts the keys.
* The **CURVE key pair** (:func:`curve_keys`): derived from the secret and
  the run tag, the same in every process.  Every socket of the cluster,
  listening or connecting, requires it, so a connection without the secret
  fails its handshake inside libzmq -- before a single byte of it reaches
  Python, let alone a decoder.

The keys are derived without key stretching, so the secret must be long and
random (``secrets.token_hex(32)``, as the launcher makes).

>>> secret = load_secret({SECRET_ENV: "s3cret"})
>>> curve_keys(secret, run_tag(secret, "")) == curve_keys(secret, run_tag(secret, ""))
True
>>> run_tag(secret, "") != run_tag(secret, "tomorrow")
True
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import zmq
from zmq.utils import z85

from timelypy.errors import ConfigError

__all__ = ["SECRET_ENV", "SECRET_FILE_ENV", "RUN_ENV", "load_secret", "run_tag", "curve_keys"]

#: Environment variable holding the cluster's shared secret.
SECRET_ENV = "TIMELYPY_SECRET"
#: Environment variable naming a file that holds the shared secret.
SECRET_FILE_ENV = "TIMELYPY_SECRET_FILE"
#: Environment variable naming the run; its tag salts the keys and routing ids
#: (the Spark backend passes ``run=`` per execution instead).
RUN_ENV = "TIMELYPY_RUN"


def load_secret(environ: Mapping[str, str] | None = None) -> bytes:
    """Read the cluster secret from ``TIMELYPY_SECRET`` or ``TIMELYPY_SECRET_FILE``.

    ``environ`` defaults to :data:`os.environ`; the variable wins when both
    are set, and a file's surrounding whitespace is stripped.

    >>> load_secret({SECRET_ENV: "s3cret", SECRET_FILE_ENV: "/nowhere"})
    b's3cret'
    """
    env = os.environ if environ is None else environ
    value = env.get(SECRET_ENV)
    if value:
        return value.encode()
    path = env.get(SECRET_FILE_ENV)
    if path:
        try:
            data = Path(path).read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the cluster secret file {path!r} ({SECRET_FILE_ENV}): "
                f"{exc.strerror or exc}"
            ) from None
        if not data:
            raise ConfigError(f"the cluster secret file {path!r} is empty")
        return data
    raise ConfigError(
        "a multi-process run needs a shared secret so that peers can prove they belong to "
        f"the cluster: start it with `python -m timelypy.launch`, or set {SECRET_ENV} (or "
        f"{SECRET_FILE_ENV}) to the same value in every process"
    )


def run_tag(secret: bytes, run: str) -> bytes:
    """The 8-byte tag of a run (and execution): it prefixes routing ids and salts the keys.

    >>> len(run_tag(b"s3cret", "run-1"))
    8
    """
    return hashlib.sha256(b"timelypy-run\0" + run.encode() + b"\0" + secret).digest()[:8]


def curve_keys(secret: bytes, tag: bytes) -> tuple[bytes, bytes]:
    """A CURVE key pair ``(public, secret)`` from the shared secret and run tag, Z85-encoded.

    Every process of a run derives the same pair, so each socket can both
    present it and require it of its peer.

    >>> public, private = curve_keys(b"s3cret", run_tag(b"s3cret", ""))
    >>> (len(public), len(private))
    (40, 40)
    """
    seed = hashlib.sha256(b"timelypy-curve-v1\0" + tag + b"\0" + secret).digest()
    secret_key = z85.encode(seed)
    return zmq.curve_public(secret_key), secret_key
