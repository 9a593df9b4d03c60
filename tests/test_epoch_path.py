"""``benchmarks/epoch_path.py``: the epoch round trip's critical path, from real processes."""

from __future__ import annotations

from benchmarks.epoch_path import PERIOD, STRETCHES, count_lines, split, trace_once


def test_split_follows_the_record_and_its_acknowledgement() -> None:
    # The trace starts with epoch 4's record (its stretches need epoch 3's pass: skipped).
    # Epoch 5: passed 4 at 100, record sent at 110, delivered at 130, ack sent at 150
    # (after an unrelated send at 120), delivered at 175 (after an unrelated receipt
    # at 105), probe passed at 190.
    w0 = [
        ("send", 50, 52, "B"),
        ("recv", 80, 81, "P"),
        ("passed", 100, 100, 4),
        ("recv", 105, 106, "P"),
        ("send", 110, 112, "B"),
        ("send", 113, 114, "P"),
        ("recv", 175, 177, "P"),
        ("passed", 190, 190, 5),
    ]
    w1 = [
        ("recv", 60, 61, "B"),
        ("send", 70, 71, "P"),
        ("send", 120, 121, "P"),
        ("recv", 130, 131, "BP"),
        ("send", 150, 152, "P"),
    ]
    got = split(w0, w1)
    assert [got[name] for name in STRETCHES] == [[10], [20], [20], [25], [15]]
    assert got[PERIOD] == [90]


def test_a_real_run_has_every_stretch_and_counts_lines_in_the_cluster_path() -> None:
    medians = trace_once(300, 60.0)
    assert set(medians) == {*STRETCHES, PERIOD}
    assert all(value > 0 for value in medians.values()), medians
    results = {r["worker"]: r for r in count_lines(100, 60.0)}
    for worker, stretch in (
        (0, "w0 first receipt -> probe passed"),
        (1, "w1 record received -> acknowledgement sent"),
    ):
        assert results[worker]["lines"][stretch] > 0
        functions = {f[1] for f in results[worker]["functions"] if f[0] == stretch}
        # the delivery the hooks wrap ran inside the stretch it opens
        assert "network.py:_deliver" in functions, sorted(functions)
