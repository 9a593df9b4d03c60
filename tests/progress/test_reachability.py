"""Reachability Builder/Tracker: ports of Timely's tests and a brute-force model.

The model: a location's implications are the minimal times that any
positive pointstamp could result in there, along any path (the fixed point of
pushing every pointstamp through every edge and summary).  The tracker must
agree after every ``propagate_all``, however updates are split into batches.
"""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import TIME_KINDS, batches
from timelypy.errors import CycleError, PortError, SummaryError, TimelyError, TimestampError
from timelypy.order import Product, ProductType, is_identity_summary, results_in
from timelypy.progress import (
    Antichain,
    Builder,
    Location,
    MutableAntichain,
    Source,
    Target,
)


def three_cycle() -> Builder:
    builder = Builder(int)
    builder.add_node(0, 1, 1, [{0: [0]}])
    builder.add_node(1, 1, 1, [{0: [0]}])
    builder.add_node(2, 1, 1, [{0: [1]}])
    builder.add_edge(Source(0, 0), Target(1, 0))
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(0, 0))
    return builder


def test_three_cycle_implications():
    # Port of the doctest in Timely's reachability.rs.
    tracker, _ = three_cycle().build()
    tracker.update_source(Source(0, 0), 17, 1)
    tracker.propagate_all()
    pushed = dict(tracker.pushed())
    targets = {(loc.node, t): d for (loc, t), d in pushed.items() if loc.is_target}
    assert targets == {(0, 0 + 18): 1, (1, 17): 1, (2, 17): 1}
    assert tracker.target_implications(Target(0, 0)).frontier() == (18,)
    assert tracker.tracking_anything()
    # Retracting the pointstamp retracts every implication.
    tracker.update_source(Source(0, 0), 17, -1)
    tracker.propagate_all()
    retracted = {(loc, t): d for (loc, t), d in tracker.pushed()}
    assert {d for d in retracted.values()} == {-1}
    assert len(retracted) == len(pushed)
    assert not tracker.tracking_anything()


def diamond(width: int = 2) -> Builder:
    """Node 1 fans out to nodes 2..width+1, which all feed node width+2."""
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])
    last = width + 2
    for mid in range(2, last):
        builder.add_node(mid, 1, 1, [{0: [0]}])
        builder.add_edge(Source(1, 0), Target(mid, 0))
    builder.add_node(last, width, 0, [{} for _ in range(width)])
    for port, mid in enumerate(range(2, last)):
        builder.add_edge(Source(mid, 0), Target(last, port))
    return builder


def test_diamond_moves_frontier_along_every_branch():
    builder = diamond(3)
    tracker, _ = builder.build()
    tracker.update_source(Source(1, 0), 1, 1)
    tracker.propagate_all()
    tracker.pushed()
    # Moving the capability from 1 to 2 must move every input of the sink,
    # even though three paths carry the same change to it.
    tracker.update_source(Source(1, 0), 1, -1)
    tracker.update_source(Source(1, 0), 2, 1)
    tracker.propagate_all()
    for port in range(3):
        assert tracker.target_implications(Target(5, port)).frontier() == (2,)


def test_opposite_moves_meeting_at_a_merge_cancel_exactly():
    # Two sources feed a concat-like node (both inputs connected to its one
    # output).  In one batch, source 1 moves 1 -> 2 while source 2 moves 2 -> 1:
    # at the merge the -1 and +1 at time 1 must be summed, not applied apart.
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])
    builder.add_node(2, 0, 1, [])
    builder.add_node(3, 2, 1, [{0: [0]}, {0: [0]}])
    builder.add_node(4, 1, 0, [{}])
    builder.add_edge(Source(1, 0), Target(3, 0))
    builder.add_edge(Source(2, 0), Target(3, 1))
    builder.add_edge(Source(3, 0), Target(4, 0))
    tracker, _ = builder.build()
    tracker.update_source(Source(1, 0), 1, 1)
    tracker.update_source(Source(2, 0), 2, 1)
    tracker.propagate_all()
    assert tracker.target_implications(Target(4, 0)).frontier() == (1,)
    tracker.update_source(Source(1, 0), 1, -1)
    tracker.update_source(Source(1, 0), 2, 1)
    tracker.update_source(Source(2, 0), 2, -1)
    tracker.update_source(Source(2, 0), 1, 1)
    tracker.propagate_all()
    assert tracker.target_implications(Target(4, 0)).frontier() == (1,)
    tracker.update_source(Source(2, 0), 1, -1)
    tracker.propagate_all()
    assert tracker.target_implications(Target(4, 0)).frontier() == (2,)


def test_is_global():
    tracker, _ = three_cycle().build()
    tracker.update_source(Source(0, 0), 17, 1)
    tracker.update_target(Target(1, 0), 20, 1)
    tracker.propagate_all()
    assert tracker.is_global(Location.new_source(0, 0), 17)
    assert not tracker.is_global(Location.new_target(1, 0), 20)  # implied by 17


def test_zero_summary_cycle_is_rejected_naming_nodes():
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 1, 1, [{0: [0]}])
    builder.add_node(2, 1, 1, [{0: [0]}])
    builder.add_node(3, 1, 1, [{0: [0]}])
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(3, 0))
    builder.add_edge(Source(3, 0), Target(1, 0))
    with pytest.raises(CycleError) as info:
        builder.build()
    assert sorted(info.value.nodes) == [1, 2, 3]
    assert "nodes" in str(info.value) and "feedback" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_cycle_detection_names_only_the_cycle():
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 1, 1, [{0: [0]}])
    builder.add_node(2, 1, 2, [{0: [0], 1: [0]}])
    builder.add_node(3, 1, 0, [{}])  # downstream of the cycle, not on it
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(1, 0))
    builder.add_edge(Source(2, 1), Target(3, 0))
    with pytest.raises(CycleError) as info:
        builder.build()
    assert sorted(info.value.nodes) == [1, 2]


def test_bad_ports_and_summaries():
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 1, 1, [{0: [0]}])
    with pytest.raises(PortError, match="does not exist"):
        builder.add_edge(Source(1, 1), Target(1, 0))
    with pytest.raises(PortError, match="does not exist"):
        builder.add_edge(Source(1, 0), Target(5, 0))
    with pytest.raises(PortError, match="1 output"):
        builder.add_node(2, 1, 1, [{3: [0]}])
    with pytest.raises(PortError, match="inputs"):
        builder.add_node(2, 2, 1, [{0: [0]}])
    with pytest.raises(SummaryError, match="does not fit int"):
        builder.add_node(2, 1, 1, [{0: [Product(0, 1)]}])
    with pytest.raises(SummaryError, match="Product"):
        Builder(ProductType(int, int)).add_node(0, 1, 1, [{0: [1]}])
    tracker, _ = builder.build()
    with pytest.raises(PortError, match="does not exist"):
        tracker.update_target(Target(1, 3), 0, 1)
    with pytest.raises(PortError, match="does not exist"):
        tracker.update_source(Source(7, 0), 0, 1)


def test_mixed_timestamps_in_tracker():
    tracker, _ = three_cycle().build()
    tracker.update_source(Source(0, 0), 1, 1)
    tracker.update_source(Source(1, 0), Product(0, 0), 1)
    with pytest.raises(TimestampError):
        tracker.propagate_all()


def test_scope_summary_and_output_changes():
    # A scope with one input and one output; inside, input -> op1 -> output, and
    # a loop op1 -> op2 -> op1 that increments the inner coordinate.
    ttype = ProductType(int, int)
    builder = Builder(ttype)
    builder.add_node(0, 1, 1, [{}])  # node 0: 1 scope output (target), 1 scope input (source)
    builder.add_node(1, 2, 1, [{0: [Product(0, 0)]}, {0: [Product(0, 0)]}])
    builder.add_node(2, 1, 1, [{0: [Product(0, 1)]}])
    builder.add_edge(Source(0, 0), Target(1, 0))
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(1, 1))
    builder.add_edge(Source(1, 0), Target(0, 0))
    tracker, summary = builder.build()
    assert summary == [{0: Antichain([Product(0, 0)])}]
    # A capability at op2's output implies times at the scope output.
    tracker.update_source(Source(2, 0), Product(3, 1), 1)
    tracker.propagate_all()
    (out,) = tracker.pushed_output()
    assert dict(out) == {Product(3, 1): 1}


# -- the brute-force model --------------------------------------------------------


def closure(builder: Builder, pointstamps: dict, exclude_node0: bool = False) -> dict:
    """Minimal reachable times at every location, by exhaustive pushing."""
    succ: dict[Location, list[tuple[Location, object]]] = {}
    for node, outputs in enumerate(builder.edges):
        for output, targets in enumerate(outputs):
            for t in targets:
                succ.setdefault(Location.new_source(node, output), []).append(
                    (Location.from_target(t), None)
                )
    for node, connectivity in enumerate(builder.nodes):
        for i, port_conn in enumerate(connectivity):
            for o, antichain in port_conn.items():
                for s in antichain:
                    succ.setdefault(Location.new_target(node, i), []).append(
                        (Location.new_source(node, o), s)
                    )
    result: dict[Location, Antichain] = {}
    work = deque(
        (loc, t)
        for (loc, t), c in pointstamps.items()
        if c > 0 and not (exclude_node0 and loc.node == 0)
    )
    while work:
        loc, t = work.popleft()
        if result.setdefault(loc, Antichain()).insert(t):
            for nxt, s in succ.get(loc, ()):
                nt = t if s is None else results_in(s, t)
                if nt is not None:
                    work.append((nxt, nt))
    return result


@st.composite
def graphs(draw, kind: str):
    ttype, times, summaries, increment = TIME_KINDS[kind]
    n = draw(st.integers(1, 6))
    shapes = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(n)]
    connectivity = []
    for ins, outs in shapes:
        per_node = []
        for _ in range(ins):
            port = {}
            for o in range(outs):
                if draw(st.integers(0, 3)):  # connected three times in four
                    port[o] = draw(st.lists(summaries, min_size=1, max_size=2))
            per_node.append(port)
        connectivity.append(per_node)
    sources = [(n_, o) for n_, (_, outs) in enumerate(shapes) for o in range(outs)]
    targets = [(n_, i) for n_, (ins, _) in enumerate(shapes) for i in range(ins)]
    edges = []
    if sources and targets:
        edges = draw(
            st.lists(st.tuples(st.sampled_from(sources), st.sampled_from(targets)), max_size=12)
        )

    def make() -> Builder:
        builder = Builder(ttype)
        for node, (ins, outs) in enumerate(shapes):
            builder.add_node(node, ins, outs, connectivity[node])
        for (sn, sp), (tn, tp) in edges:
            builder.add_edge(Source(sn, sp), Target(tn, tp))
        return builder

    # Repair every cycle that does not advance time by making one of its
    # internal (input -> output) steps increment.
    builder = make()
    while (cycle := builder.find_cycle()) is not None:
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            if a.is_target and b.is_source and a.node == b.node:
                port = connectivity[a.node][a.port.index]
                port[b.port.index] = [
                    increment if is_identity_summary(s) else s for s in port[b.port.index]
                ]
                break
        builder = make()
    locations = [Location.new_source(n_, o) for n_, o in sources]
    locations += [Location.new_target(n_, i) for n_, i in targets]
    return builder, locations, times


@pytest.mark.parametrize("kind", sorted(TIME_KINDS))
@given(data=st.data())
def test_tracker_matches_closure(kind, data):
    builder, locations, times = data.draw(graphs(kind))
    tracker, _ = builder.build()
    if not locations:
        return
    ups = data.draw(
        st.lists(st.tuples(st.sampled_from(locations), times, st.integers(-2, 3)), max_size=25)
    )
    counts: dict = {}
    replay: dict = {}
    scope_outputs = builder.shape[0][0]
    outputs = [MutableAntichain() for _ in range(scope_outputs)]
    for batch in batches(ups, data):
        for loc, t, d in batch:
            tracker.update(loc, t, d)
            counts[(loc, t)] = counts.get((loc, t), 0) + d
        tracker.propagate_all()
        for key, d in tracker.pushed():
            replay[key] = replay.get(key, 0) + d
        for o, changes in enumerate(tracker.pushed_output()):
            outputs[o].update_iter(changes)

        expected = closure(builder, counts)
        for loc in locations:
            state = tracker.node_state(loc.node)
            ports = state.targets if loc.is_target else state.sources
            got = set(ports[loc.port.index].implications.frontier())
            want = set(expected.get(loc, Antichain()).elements())
            assert got == want, (loc, got, want)
            # the pushed changes replay to exactly the implications frontier
            assert {t for (l2, t), c in replay.items() if l2 == loc and c} == want
        assert all(c in (0, 1) for c in replay.values())
        # what the scope outputs may still see excludes pointstamps at node 0
        without_node0 = closure(builder, counts, exclude_node0=True)
        for o in range(scope_outputs):
            want = set(without_node0.get(Location.new_target(0, o), Antichain()).elements())
            assert set(outputs[o].frontier()) == want
        assert tracker.tracking_anything() == any(c > 0 for c in counts.values())


def test_retraction_on_a_cycle_terminates_and_clears():
    # A pointstamp on a cycle implies itself one time later on every lap; its
    # retraction must clear every implication (and terminate).
    tracker, _ = three_cycle().build()
    for time in (17, 40, 3):
        tracker.update_source(Source(0, 0), time, 1)
        tracker.propagate_all()
        tracker.update_source(Source(0, 0), time, -1)
        tracker.propagate_all()
        for node in range(3):
            assert tracker.target_implications(Target(node, 0)).is_empty()
            assert tracker.source_implications(Source(node, 0)).is_empty()
    assert not tracker.tracking_anything()


# -- shared frontiers (Tracker.alias, used by operator fusion) --------------------------


def _line(nodes: int) -> Builder:
    """Node 1 (a source) feeding nodes 2..nodes, one after the other, unchanged times."""
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])
    for node in range(2, nodes + 1):
        builder.add_node(node, 1, 1, [{0: [0]}])
        builder.add_edge(Source(node - 1, 0), Target(node, 0))
    return builder


def _frontiers(tracker, nodes: int) -> list[tuple]:
    return [
        (
            tuple(tracker.target_implications(Target(n, 0)).frontier()),
            tuple(tracker.source_implications(Source(n, 0)).frontier()),
        )
        for n in range(2, nodes + 1)
    ]


def test_aliased_locations_follow_the_location_before_them():
    """Joined along a chain, every location has the frontier it had unjoined, with fewer updates."""
    plain, _ = _line(4).build()
    joined, _ = _line(4).build()
    links = [(Location.new_target(n, 0), Location.new_source(n, 0)) for n in (2, 3, 4)]
    links += [(Location.new_source(n, 0), Location.new_target(n + 1, 0)) for n in (2, 3)]
    assert joined.alias(links) == []
    assert joined.target_implications(Target(4, 0)) is joined.target_implications(Target(2, 0))
    for tracker in (plain, joined):
        tracker.update_source(Source(1, 0), 0, 1)
        tracker.propagate_all()
        tracker.update_target(Target(2, 0), 0, 1)  # a message in flight to node 2: not aliased
        tracker.update_source(Source(1, 0), 0, -1)
        tracker.update_source(Source(1, 0), 5, 1)
        tracker.propagate_all()
    assert _frontiers(joined, 4) == _frontiers(plain, 4) == [((0,), (0,))] * 3
    # the watched changes are reported for the aliased locations too
    assert dict(joined.pushed()) == dict(plain.pushed())


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 6), st.integers(-2, 3)), min_size=1, max_size=4),
        max_size=12,
    )
)
def test_a_chain_joined_to_a_mirrored_source_sees_what_it_saw_unjoined(steps):
    """A line joined from the mirrored source on: the same frontiers, reports and counts.

    Node 1's output is mirrored (nothing reaches it); joining node 2's input
    to it makes the whole line share its antichain, whose counts are the
    pointstamps' (several at one time, as several workers' capabilities).
    After every propagation each location shows the frontier, the
    implication counts and the reported changes it shows unjoined.
    """
    plain, _ = _line(4).build()
    joined, _ = _line(4).build()
    links = [(Location.new_source(1, 0), Location.new_target(2, 0))]
    links += [(Location.new_target(n, 0), Location.new_source(n, 0)) for n in (2, 3, 4)]
    links += [(Location.new_source(n, 0), Location.new_target(n + 1, 0)) for n in (2, 3)]
    assert joined.alias(links) == []
    assert joined.target_implications(Target(4, 0)) is joined.source_implications(Source(1, 0))
    held: dict[int, int] = {}
    for updates in steps:
        for time, diff in updates:
            diff = max(diff, -held.get(time, 0))  # never below zero capabilities
            held[time] = held.get(time, 0) + diff
            for tracker in (plain, joined):
                tracker.update_source(Source(1, 0), time, diff)
        for tracker in (plain, joined):
            tracker.propagate_all()
        assert _frontiers(joined, 4) == _frontiers(plain, 4)
        assert dict(joined.pushed()) == dict(plain.pushed())
        for n in range(2, 5):
            for state in (joined.node_state(n), plain.node_state(n)):
                assert state.targets[0].implication_counts() == dict.fromkeys(
                    plain.target_implications(Target(n, 0)).frontier(), 1
                )


def test_alias_skips_what_is_not_a_chain_and_waits_for_held_pointstamps():
    tracker, _ = _line(3).build()
    a, b = Location.new_target(2, 0), Location.new_source(2, 0)
    not_chain = (Location.new_target(2, 0), Location.new_target(3, 0))
    tracker.update_source(Source(2, 0), 0, 1)  # node 2 holds a capability
    tracker.propagate_all()
    assert tracker.alias([not_chain, (a, b)]) == [(a, b)]  # tried again later
    tracker.update_source(Source(2, 0), 0, -1)
    tracker.propagate_all()
    assert tracker.alias([(a, b)]) == []
    # a pointstamp at an aliased location breaks the promise: a clear error
    tracker.update_source(Source(2, 0), 3, 1)
    with pytest.raises(TimelyError, match="never hold a capability"):
        tracker.propagate_all()


# -- mirrored sources (a source nothing reaches, in an acyclic scope) -------------------


def test_a_source_nothing_reaches_keeps_one_antichain_for_both():
    tracker, _ = _line(3).build()
    source = tracker.node_state(1).sources[0]
    assert source.mirrored and source.implications is source.pointstamps
    # node 2's output is reached from node 1: its implications are its own
    assert not tracker.node_state(2).sources[0].mirrored
    # a cyclic scope mirrors nothing: its propagation takes another path
    cyclic, _ = three_cycle().build()
    assert not any(port.mirrored for port in cyclic.node_state(0).sources)


def test_a_mirrored_source_is_global_however_many_pointstamps_share_its_time():
    """is_global counts implications, one per frontier element, not the pointstamps."""
    tracker, _ = _line(2).build()
    here = Location.new_source(1, 0)
    tracker.update_source(Source(1, 0), 4, 3)  # three capabilities at 4 (say, three workers')
    tracker.propagate_all()
    assert tracker.source_implications(Source(1, 0)).frontier() == (4,)
    assert tracker.is_global(here, 4)
    tracker.update_source(Source(1, 0), 2, 1)
    tracker.propagate_all()
    assert not tracker.is_global(here, 4)  # implied by 2
    assert tracker.is_global(here, 2)
    # downstream, an implication both ways: the counts there are the model's
    assert tracker.target_implications(Target(2, 0)).count_for(2) == 1


def test_a_mirrored_source_joins_a_chain_while_counted_more_than_once():
    """alias compares implication counts: one per frontier element at a mirrored source."""
    tracker, _ = _line(3).build()
    tracker.update_source(Source(2, 0), 0, 1)
    tracker.update_source(Source(1, 0), 0, 2)  # two workers' initial capabilities
    tracker.propagate_all()
    tracker.update_source(Source(2, 0), 0, -1)
    tracker.propagate_all()
    link = (Location.new_source(1, 0), Location.new_target(2, 0))
    assert tracker.alias([link]) == []
    assert tracker.target_implications(Target(2, 0)) is tracker.source_implications(Source(1, 0))
    # behind its mirrored head, the member reads the shared counts as the head does
    member = tracker.node_state(2).targets[0]
    assert member.mirrored and member.implication_counts() == {0: 1}
    assert member.is_global(0) and not member.is_global(1)
    tracker.update_source(Source(1, 0), 0, -2)
    tracker.update_source(Source(1, 0), 3, 1)
    tracker.propagate_all()
    assert tracker.target_implications(Target(3, 0)).frontier() == (3,)
