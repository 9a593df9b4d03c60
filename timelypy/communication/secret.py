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

* **Admission** (:func:`admit_only`): CURVE alone lets any client that knows
  the server's public key connect, with a key pair of its own; a ZAP handler
  on every listening socket admits only clients presenting the cluster's
  own public key, so joining needs the secret itself, not just values
  derived from it.

The keys are derived without key stretching, so the secret must be long and
random: at least :data:`MIN_SECRET_LENGTH` characters (``secrets.token_hex(32)``,
as the launcher makes, is 64), of at least :data:`MIN_DISTINCT` different
characters, and not one short string repeated (``"x" * 32`` is refused).

>>> secret = load_secret({SECRET_ENV: "7c1f0a9e4b2d8c3a6e5f1b0d9a8c7e2f"})
>>> curve_keys(secret, run_tag(secret, "")) == curve_keys(secret, run_tag(secret, ""))
True
>>> run_tag(secret, "") != run_tag(secret, "tomorrow")
True
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq
from zmq.utils import z85

from timelypy.errors import ConfigError

__all__ = [
    "SECRET_ENV",
    "SECRET_FILE_ENV",
    "RUN_ENV",
    "MIN_SECRET_LENGTH",
    "MIN_DISTINCT",
    "load_secret",
    "check_secret",
    "run_tag",
    "curve_keys",
    "admit_only",
]

#: The shortest secret accepted, in bytes: 32 hex digits are 128 random bits.
MIN_SECRET_LENGTH = 32
#: The fewest different characters a secret may have (32 random hex digits have about 14).
MIN_DISTINCT = 8

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

    >>> value = "q8Zr4LkV2mXw9NcT7bYs5HdJ3fGp6AeU"
    >>> load_secret({SECRET_ENV: value, SECRET_FILE_ENV: "/nowhere"}) == value.encode()
    True
    """
    env = os.environ if environ is None else environ
    value = env.get(SECRET_ENV)
    if value:
        return check_secret(value.encode(), SECRET_ENV)
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
        return check_secret(data, f"the cluster secret file {path!r}")
    raise ConfigError(
        "a multi-process run needs a shared secret so that peers can prove they belong to "
        f"the cluster: start it with `python -m timelypy.launch`, or set {SECRET_ENV} (or "
        f"{SECRET_FILE_ENV}) to the same value in every process"
    )


def check_secret(secret: bytes, where: str) -> bytes:
    """``secret`` if it is long and varied enough to resist guessing, else a :class:`ConfigError`.

    >>> check_secret(b"abc", "TIMELYPY_SECRET")
    Traceback (most recent call last):
    ...
    timelypy.errors.ConfigError: the cluster secret in TIMELYPY_SECRET is 3 bytes long; ...
    >>> check_secret(b"ab" * 20, "TIMELYPY_SECRET")
    Traceback (most recent call last):
    ...
    timelypy.errors.ConfigError: the cluster secret in TIMELYPY_SECRET is 'ab' repeated; ...
    """
    make = "make one with python -c 'import secrets; print(secrets.token_hex(32))'"
    if len(secret) >= MIN_SECRET_LENGTH:
        for period in range(1, len(secret) // 2 + 1):
            if len(secret) % period == 0 and secret == secret[:period] * (len(secret) // period):
                unit = secret[:period].decode(errors="replace")
                shown = repr(unit) if period <= 8 else f"a string of {period} characters"
                raise ConfigError(
                    f"the cluster secret in {where} is {shown} repeated; a secret must be "
                    f"random to resist guessing (the keys are derived from it without "
                    f"stretching): {make}"
                )
        if len(set(secret)) < MIN_DISTINCT:
            raise ConfigError(
                f"the cluster secret in {where} has only {len(set(secret))} different "
                f"characters; a random secret of {len(secret)} has many more (at least "
                f"{MIN_DISTINCT} are required): {make}"
            )
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"the cluster secret in {where} is {len(secret)} bytes long; a secret must be at "
            f"least {MIN_SECRET_LENGTH} random characters to resist guessing (the keys are "
            "derived from it without stretching): make one with python -c 'import secrets; "
            "print(secrets.token_hex(32))'"
        )
    return secret


def admit_only(context: zmq.Context[Any], public_key: bytes) -> Any:
    """Start a ZAP handler in ``context`` that admits only CURVE clients with ``public_key``.

    Returns the authenticator; call its ``stop()`` before terminating the
    context.  Bind listening sockets after this call: libzmq asks the
    handler about every CURVE handshake on them.
    """
    from zmq.auth.thread import ThreadAuthenticator

    auth = ThreadAuthenticator(context, log=logging.getLogger("timelypy.zap"))
    auth.start()
    auth.configure_curve_callback(domain="*", credentials_provider=_OnlyKey(public_key))
    return auth


class _OnlyKey:
    """A ZAP credentials provider: admits exactly one client public key (Z85)."""

    def __init__(self, public_key: bytes) -> None:
        self.public_key = public_key

    def callback(self, domain: str, key: bytes) -> bool:
        return hmac.compare_digest(key, self.public_key)


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
