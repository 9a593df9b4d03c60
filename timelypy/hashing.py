"""Stable hashing for routing records between workers.

Python's built-in ``hash`` of strings and bytes is salted per process
(``PYTHONHASHSEED``), so two processes would send the same key to different
workers.  :func:`stable_hash` is the same in every process and run: CRC-32
of a canonical byte encoding, so it is fast (C code) and portable.

>>> stable_hash("apple") == stable_hash("apple")
True
>>> stable_hash(7)
7
>>> stable_hash(("a", 1)) == stable_hash(("a", 1))
True
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["stable_hash"]

crc32 = zlib.crc32


def stable_hash(value: Any) -> int:
    """A non-negative ``int`` that depends only on ``value``, in every process.

    ``int`` values hash to themselves (modulo 2**64); ``str`` and ``bytes`` by
    CRC-32; tuples combine their items; ``None``, ``bool`` and ``float`` are
    supported too.  Other types raise ``TypeError``.
    """
    kind = type(value)
    if kind is str:
        try:
            return crc32(value.encode())
        except UnicodeEncodeError:  # lone surrogates: same bytes as surrogatepass gives
            return crc32(value.encode("utf-8", "surrogatepass"))
    if kind is int:
        masked: int = value & 0xFFFF_FFFF_FFFF_FFFF
        return masked
    if kind is bytes:
        return zlib.crc32(value)
    if kind is tuple or isinstance(value, tuple):
        h = 0x345678
        for item in value:
            h = ((h * 1_000_003) ^ stable_hash(item)) & 0xFFFF_FFFF_FFFF_FFFF
        return h
    if value is None:
        return 0
    if kind is bool:
        return int(value)
    if kind is float:
        return zlib.crc32(repr(value).encode())
    raise TypeError(
        f"stable_hash does not know how to hash {kind.__name__}; hash a str, bytes, int or "
        "tuple of those instead"
    )
