"""bytewax's batch API as a benchmark peer: the same answers as plain Python, at any batch size."""

from __future__ import annotations

import pytest

from benchmarks import _data
from benchmarks.peers import bytewax_peer, plain


@pytest.mark.parametrize("batch_size", [1, 7, *bytewax_peer.BATCH_SIZES])
def test_the_batch_api_peers_agree_with_plain_python(batch_size):
    pytest.importorskip("bytewax")
    ints = list(range(3_000))
    triple, even = (lambda x: 3 * x), (lambda y: y % 2 == 0)
    assert bytewax_peer.map_filter_batch(ints, triple, even, batch_size=batch_size) == (
        plain.map_filter(ints, triple, even)
    )
    lines = _data.load_lines()[:2_500]
    assert bytewax_peer.wordcount_batch(lines, batch_size=batch_size) == plain.wordcount(lines)


def test_the_quoted_batch_sizes_are_bytewaxs_default_and_ten_times_it():
    assert bytewax_peer.BATCH_SIZES == (bytewax_peer.DEFAULT_BATCH_SIZE, 10 * 1_000)
