"""The msgpack codec overrides msgpack's private ``Packer._pack`` only on checked releases."""

from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest

from timelypy.communication.codec import MSGPACK_CHECKED, MsgpackCodec, check_msgpack_version
from timelypy.errors import ConfigError


def test_the_installed_msgpack_passes_and_is_named():
    installed = ".".join(map(str, msgpack.version))
    assert check_msgpack_version() == installed
    assert check_msgpack_version("1.0.8") == "1.0.8"


@pytest.mark.parametrize("version", ["2.0.0", "0.6.2", "10.1", "3.0.0rc1", "1", "dev", ""])
def test_an_unsupported_msgpack_version_is_a_clear_error(version):
    with pytest.raises(ConfigError) as raised:
        check_msgpack_version(version)
    message = str(raised.value)
    low, high = (".".join(map(str, bound)) for bound in MSGPACK_CHECKED)
    assert f"msgpack {version!r}" in message
    assert f"msgpack>={low},<{high}" in message
    assert "Packer._pack" in message


@pytest.mark.parametrize("version", ["1.0.0", "1.1.1", "1.9.99", "1.0.8rc1"])
def test_every_release_in_the_checked_range_passes(version):
    assert check_msgpack_version(version) == version


def test_buffers_still_round_trip_through_the_guarded_packer():
    codec = MsgpackCodec()
    value = [bytearray(b"ab"), memoryview(b"cd"), b"ef"]
    decoded = codec.decode(codec.encode(value))
    assert [type(item) for item in decoded] == [bytearray, memoryview, bytes]
    assert [bytes(item) for item in decoded] == [b"ab", b"cd", b"ef"]


def test_a_message_with_a_buffer_runs_the_check_first():
    # A fresh interpreter, so the codec has not yet checked the installed msgpack; the
    # checked range is narrowed to exclude it, as a release outside the range would be.
    program = (
        "import timelypy.communication.codec as codec\n"
        "codec.MSGPACK_CHECKED = ((0, 1), (0, 2))\n"
        "plain = codec.MsgpackCodec()\n"
        "assert plain.decode(plain.encode([b'bytes'])) == [b'bytes']\n"
        "plain.encode([bytearray(b'buffer')])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("timelypy.errors.SerializationError: ")
    assert "ConfigError: timelypy's msgpack codec overrides msgpack's private Packer._pack" in last
    assert "install 'msgpack>=0.1,<0.2'" in last
