"""``benchmarks/epoch_path.py``: the epoch round trip's critical path, from real processes."""

from __future__ import annotations

from benchmarks.epoch_path import (
    PERIOD,
    STRETCHES,
    count_lines,
    medians,
    orders,
    split,
    trace_events,
)

#: Two workers' traces.  They start with epoch 4's record (its stretches need epoch 3's
#: pass: skipped).  Epoch 5: passed 4 at 100, record sent at 110, delivered at 130, ack
#: sent at 150 (after an unrelated send at 120), delivered at 175 (after an unrelated
#: receipt at 105), probe passed at 190.
W0 = [
    ("send", 50, 52, "B"),
    ("recv", 80, 81, "P"),
    ("passed", 100, 100, 4),
    ("recv", 105, 106, "P"),
    ("send", 110, 112, "B"),
    ("send", 113, 114, "P"),
    ("recv", 175, 177, "P"),
    ("passed", 190, 190, 5),
]
W1 = [
    ("recv", 60, 61, "B"),
    ("send", 70, 71, "P"),
    ("send", 120, 121, "P"),
    ("recv", 130, 131, "BP"),
    ("send", 150, 152, "P"),
]


def test_split_follows_the_record_and_its_acknowledgement() -> None:
    got = split(W0, W1)
    assert [got[name] for name in STRETCHES] == [[10], [20], [20], [25], [15]]
    assert got[PERIOD] == [90]


def test_orders_names_each_epochs_sends_and_receipts_between_markers() -> None:
    # Each epoch's order runs from one marker to the next (the last epoch, with no
    # next marker, is not counted); events are put in time order first, and a
    # "passed" is not a message.
    assert orders(W0, "sB") == {("sB", "rP", "rP"): 1}
    assert orders(list(reversed(W0)), "sB") == {("sB", "rP", "rP"): 1}
    assert orders([*W1, ("recv", 200, 201, "B")], "rB") == {("rB", "sP", "sP", "rBP", "sP"): 1}
    assert orders(W1, "rBP") == {}


def test_a_real_run_has_every_stretch_and_counts_lines_in_the_cluster_path() -> None:
    events = trace_events(300, 60.0)
    found = medians(split(events[0], events[1]))
    assert set(found) == {*STRETCHES, PERIOD}
    assert all(value > 0 for value in found.values()), found
    # Every epoch worker 1 acknowledges its record, and worker 0 hears progress back.
    for worker, marker, must in ((0, "sB", "rP"), (1, "rB", "sP")):
        counted = orders(events[worker], marker)
        assert sum(counted.values()) >= 250, counted
        assert all(any(name.startswith(must) for name in order) for order in counted), counted
    results = {r["worker"]: r for r in count_lines(100, 60.0)}
    for worker, stretch in (
        (0, "w0 first receipt -> probe passed"),
        (1, "w1 record received -> acknowledgement sent"),
    ):
        assert results[worker]["lines"][stretch] > 0
        functions = {f[1] for f in results[worker]["functions"] if f[0] == stretch}
        # the delivery the hooks wrap ran inside the stretch it opens
        assert "network.py:_deliver" in functions, sorted(functions)
