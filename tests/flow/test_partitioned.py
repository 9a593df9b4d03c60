"""Partitioned inputs and outputs: every partition read or written by exactly one worker."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.errors import FlowError
from timelypy.flow import Dataflow, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, PartitionedInputConfig
from timelypy.flow.outputs import PartitionedOutputConfig
from timelypy.flow.primaries import assign_primaries


class Parts(PartitionedInputConfig):
    """Partition ``p`` holds items ``(p, 0..size-1)``, epoch ``i // 2``; ``reach`` per worker."""

    def __init__(self, parts, reach, size=5):
        self.parts, self.reach, self.size = parts, reach, size
        self.opened = []

    def list_parts(self, worker_index, worker_count):
        return self.reach(worker_index, worker_count, self.parts)

    def build_part(self, part, resume_epoch):
        self.opened.append(part)
        for i in range(self.size):
            yield AdvanceTo(i // 2)
            yield Emit((part, i))

    def all_parts(self):
        return self.parts


def everyone(index, count, parts):
    return parts


def own_share(index, count, parts):
    return [p for j, p in enumerate(parts) if j % count == index]


def first_only(index, count, parts):
    return parts if index == 0 else []


def read_all(config, procs, workers):
    flow = Dataflow()
    flow.input("files", config)
    flow.capture()
    return run_cluster(flow, None, procs, workers)


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
@pytest.mark.parametrize("reach", [everyone, own_share, first_only])
def test_each_partition_is_read_exactly_once(workers, reach):
    parts = [f"part-{i}" for i in range(4)]
    config = Parts(parts, reach)
    out = read_all(config, 1, workers)
    expected = Counter((i // 2, (p, i)) for p in parts for i in range(5))
    assert Counter(out) == expected
    assert sorted(config.opened) == parts  # threads share the config: one open per partition


def test_each_partition_is_read_exactly_once_across_processes():
    parts = [f"part-{i}" for i in range(5)]
    out = read_all(Parts(parts, everyone, size=3), 2, 2)
    assert Counter(out) == Counter((i // 2, (p, i)) for p in parts for i in range(3))


def test_a_partition_no_worker_lists_is_an_error():
    config = Parts(["a", "b"], lambda index, count, parts: ["a"])
    with pytest.raises(FlowError, match=r"partition 'b' is listed by no worker"):
        read_all(config, 1, 2)


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 5), st.lists(st.sampled_from("abcdefgh"), max_size=8), min_size=1
    )
)
def test_assignment_gives_each_partition_one_worker_that_reaches_it(reports):
    assignment = assign_primaries(reports)
    listed = {part for parts in reports.values() for part in parts}
    assert set(assignment) == listed
    for part, worker in assignment.items():
        assert part in reports[worker]
    # balanced: no worker has two more than another worker that could have taken one
    load = Counter(assignment.values())
    for part, worker in assignment.items():
        for other, parts in reports.items():
            if part in parts:
                assert load[worker] <= load[other] + 1


class KeyFiles(PartitionedOutputConfig):
    """Two partitions, written by whichever worker is their primary."""

    def __init__(self):
        self.written = []

    def list_parts(self, worker_index, worker_count):
        return ["even", "odd"]

    def part_for(self, key, parts):
        return "even" if int(key) % 2 == 0 else "odd"

    def build_part(self, part):
        return lambda epoch, item: self.written.append((part, epoch, item))


def test_partitioned_output_writes_each_item_once_to_its_partition():
    config = KeyFiles()
    flow = Dataflow()
    flow.map(lambda x: (str(x), x))
    flow.capture(config)
    run_cluster(flow, [(0, x) for x in range(10)], 1, 3)
    assert sorted(config.written) == sorted(
        ("even" if x % 2 == 0 else "odd", 0, (str(x), x)) for x in range(10)
    )
