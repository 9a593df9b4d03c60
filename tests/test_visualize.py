"""Pictures of dataflows: the graph of real dataflows, and its Mermaid and DOT text parsed back.

Each runtime dataflow is built by ``runtime_graph`` on a real thread worker;
the tests then parse the Mermaid and the DOT the renderers write (with the
small parsers below, for the subset the renderers emit: node declarations
with their shapes, ``subgraph``/``cluster`` nesting, edges with their
style and label) and compare them with the graph the dataflow must have,
written out by hand from the order operators are built in: node names and
addresses, edge endpoints and ports, nesting, feedback edges and pacts.
The command line runs as a real process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from operator import add
from pathlib import Path
from typing import Any

import pytest

import timelypy
import timelypy.flow.operators as op
from timelypy import Exchange, OperatorBuilder, Pipeline
from timelypy.flow import AdvanceTo, Dataflow, Emit, ManualInputConfig
from timelypy.flow.dataflow import operator
from timelypy.flow.testing import TestingSink, TestingSource, run_main
from timelypy.visualize import Graph, flow_graph, runtime_graph, to_dot, to_mermaid

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(60)


# -- parsers for the text the renderers write ------------------------------------------


@dataclass
class Parsed:
    """What a picture says: nodes (label, shape, parent), clusters (title, parent), edges."""

    nodes: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    clusters: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: (source, target, dashed, label)
    edges: list[tuple[str, str, bool, str | None]] = field(default_factory=list)

    def labels(self) -> dict[str, str]:
        return {key: label for key, (label, _, _) in self.nodes.items()}

    def parents(self) -> dict[str, str | None]:
        return {key: parent for key, (_, _, parent) in self.nodes.items()}

    def shapes(self) -> dict[str, str]:
        return {key: shape for key, (_, shape, _) in self.nodes.items()}


MERMAID_ENTITIES = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}


def mermaid_unescape(text: str) -> str:
    def entity(match: re.Match[str]) -> str:
        name = match.group(1)
        return chr(int(name)) if name.isdigit() else MERMAID_ENTITIES[name]

    return re.sub(r"#(\w+);", entity, text)


MERMAID_SHAPES = {'["': "box", '[("': "cylinder", '[/"': "input", '[\\"': "output", '(("': "circle"}
MERMAID_CLOSING = {"[": "]", "[(": ")]", "((": "))", "[/": "/]", "[\\": "\\]"}
MERMAID_NODE = re.compile(r'^(\w+)(\[\(|\(\(|\[/|\[\\|\[)"([^"]*)"(\)\]|\)\)|/\]|\\\]|\])$')
MERMAID_EDGE = re.compile(r'^(\w+) (-->|-\.->)(?:\|"([^"]*)"\|)? (\w+)$')
MERMAID_SUBGRAPH = re.compile(r'^subgraph (\w+)\["([^"]*)"\]$')


def parse_mermaid(text: str) -> Parsed:
    lines = text.splitlines()
    assert lines[0] == "flowchart TD", lines[0]
    parsed = Parsed()
    stack: list[str] = []
    edges_started = False
    for raw in lines[1:]:
        line = raw.strip()
        if match := MERMAID_SUBGRAPH.match(line):
            assert not edges_started, "a subgraph after the edges"
            key, title = match.groups()
            assert key not in parsed.clusters
            parsed.clusters[key] = (mermaid_unescape(title), stack[-1] if stack else None)
            stack.append(key)
        elif line == "end":
            stack.pop()
        elif match := MERMAID_EDGE.match(line):
            edges_started = True
            source, arrow, label, target = match.groups()
            assert source in parsed.nodes and target in parsed.nodes, line
            text = None if label is None else mermaid_unescape(label)
            parsed.edges.append((source, target, arrow == "-.->", text))
        elif match := MERMAID_NODE.match(line):
            assert not edges_started, "a node declared after the edges"
            key, opening, label, closing = match.groups()
            assert key not in parsed.nodes, f"{key} declared twice"
            assert MERMAID_CLOSING[opening] == closing, line
            parsed.nodes[key] = (
                mermaid_unescape(label),
                MERMAID_SHAPES[opening + '"'],
                stack[-1] if stack else None,
            )
        else:
            raise AssertionError(f"not Mermaid this renderer writes: {raw!r}")
    assert not stack, "unclosed subgraph"
    return parsed


DOT_STRING = r'"((?:[^"\\]|\\.)*)"'
DOT_NODE = re.compile(rf"^(\w+) \[label={DOT_STRING}, shape=(\w+)\];$")
DOT_EDGE = re.compile(r"^(\w+) -> (\w+)(?: \[(.*)\])?;$")
DOT_CLUSTER = re.compile(r"^subgraph cluster_(\w+) \{$")
DOT_LABEL = re.compile(rf"^label={DOT_STRING};$")


def dot_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), text)


def parse_dot(text: str) -> tuple[str, Parsed]:
    lines = text.splitlines()
    header = re.match(rf"^digraph {DOT_STRING} \{{$", lines[0])
    assert header, lines[0]
    assert lines[-1] == "}"
    parsed = Parsed()
    stack: list[str] = []
    for raw in lines[1:-1]:
        line = raw.strip()
        if line == "node [shape=box];":
            continue
        if match := DOT_CLUSTER.match(line):
            key = match.group(1)
            parsed.clusters[key] = ("", stack[-1] if stack else None)
            stack.append(key)
        elif match := DOT_LABEL.match(line):
            assert stack, "a graph label outside a cluster"
            key = stack[-1]
            parsed.clusters[key] = (dot_unescape(match.group(1)), parsed.clusters[key][1])
        elif line == "}":
            stack.pop()
        elif match := DOT_NODE.match(line):
            key, label, shape = match.groups()
            assert key not in parsed.nodes
            parsed.nodes[key] = (dot_unescape(label), shape, stack[-1] if stack else None)
        elif match := DOT_EDGE.match(line):
            source, target, attributes = match.groups()
            assert source in parsed.nodes and target in parsed.nodes, line
            attrs = {k: v for k, v, _ in re.findall(rf"(\w+)=({DOT_STRING}|\w+)", attributes or "")}
            assert set(attrs) <= {"style", "label"}, attrs
            label = attrs.get("label")
            parsed.edges.append(
                (
                    source,
                    target,
                    attrs.get("style") == "dashed",
                    None if label is None else dot_unescape(label[1:-1]),
                )
            )
        else:
            raise AssertionError(f"not DOT this renderer writes: {raw!r}")
    assert not stack, "unclosed cluster"
    return dot_unescape(header.group(1)), parsed


def both(graph: Graph) -> list[Parsed]:
    """The graph drawn in both languages, parsed back."""
    name, dot = parse_dot(to_dot(graph))
    assert name == graph.name
    return [parse_mermaid(to_mermaid(graph)), dot]


def check_pictures(
    graph: Graph,
    labels: dict[str, str],
    edges: list[tuple[str, str, bool, str | None]],
    clusters: dict[str, tuple[str, str | None]] | None = None,
    parents: dict[str, str] | None = None,
) -> None:
    """Both pictures show exactly these nodes, edges (in order), clusters and nesting."""
    for picture in both(graph):
        assert picture.labels() == labels
        assert picture.edges == edges
        assert picture.clusters == (clusters or {})
        expected_parents = {key: None for key in labels} | (parents or {})
        assert picture.parents() == expected_parents


def test_the_parsers_reject_what_they_do_not_know():
    with pytest.raises(AssertionError):
        parse_mermaid("flowchart TD\n    a --> b")  # edge between undeclared nodes
    with pytest.raises(AssertionError):
        parse_mermaid('flowchart TD\n    subgraph s["x"]\n    a["y"]')  # unclosed
    with pytest.raises(AssertionError):
        parse_dot('digraph "g" {\n    a -> b;\n}')


# -- runtime dataflows ----------------------------------------------------------------


def test_a_map_filter_chain_is_built_but_not_run():
    seen: list[int] = []

    def build(scope: Any) -> None:
        scope.to_stream(range(5)).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).inspect(
            seen.append
        ).probe()

    graph = runtime_graph(build)
    assert seen == []  # drawn, not run: the inspect never saw a record
    assert graph.name == "Dataflow0"
    assert [(n.address, n.name, n.kind) for n in graph.nodes] == [
        ((0, 1), "ToStream", "operator"),
        ((0, 2), "Map", "operator"),
        ((0, 3), "Filter", "operator"),
        ((0, 4), "Inspect", "operator"),
        ((0, 5), "Probe", "operator"),
    ]
    assert {edge.pact for edge in graph.edges} == {"Pipeline"}
    check_pictures(
        graph,
        {
            "n0_1": "ToStream [0, 1]",
            "n0_2": "Map [0, 2]",
            "n0_3": "Filter [0, 3]",
            "n0_4": "Inspect [0, 4]",
            "n0_5": "Probe [0, 5]",
        },
        [
            ("n0_1", "n0_2", False, None),
            ("n0_2", "n0_3", False, None),
            ("n0_3", "n0_4", False, None),
            ("n0_4", "n0_5", False, None),
        ],
    )
    for picture in both(graph):
        assert set(picture.shapes().values()) == {"box"}


def test_exchange_edges_carry_their_pact_per_input_port():
    def build(scope: Any) -> None:
        numbers = scope.to_stream(range(4))
        exchanged = numbers.exchange(lambda x: x)
        # An operator reading one input through a pipeline and one through an exchange.
        builder = OperatorBuilder("Mixed", scope)
        first = builder.new_input(exchanged, Pipeline())
        second = builder.new_input(numbers, Exchange(lambda x: x + 1))
        builder.new_output()

        def constructor(caps: Any) -> Any:
            def logic(frontiers: Any) -> None:
                first.discard()
                second.discard()

            return logic

        builder.build(constructor)

    graph = runtime_graph(build, name="Mixing")
    assert graph.name == "Mixing"
    assert [(e.source, e.target, e.target_port, e.pact) for e in graph.edges] == [
        ("n0_1", "n0_2", 0, "Exchange"),
        ("n0_2", "n0_3", 0, "Pipeline"),
        ("n0_1", "n0_3", 1, "Exchange"),
    ]
    check_pictures(
        graph,
        {"n0_1": "ToStream [0, 1]", "n0_2": "Exchange [0, 2]", "n0_3": "Mixed [0, 3]"},
        [
            ("n0_1", "n0_2", False, "Exchange"),
            ("n0_2", "n0_3", False, None),
            ("n0_1", "n0_3", False, "Exchange"),
        ],
    )


def test_binary_and_concat_have_one_edge_per_input_port():
    def build(scope: Any) -> None:
        a = scope.to_stream([1, 2])
        b = scope.to_stream([3])
        both_streams = a.concat(b)

        def constructor(cap: Any, info: Any) -> Any:
            def logic(input1: Any, input2: Any, output: Any) -> None:
                input1.discard()
                input2.discard()

            return logic

        a.binary(both_streams, Pipeline(), Exchange(lambda x: x), "Join", constructor).probe()

    graph = runtime_graph(build)
    assert [(e.source, e.source_port, e.target, e.target_port, e.pact) for e in graph.edges] == [
        ("n0_1", 0, "n0_3", 0, "Pipeline"),
        ("n0_2", 0, "n0_3", 1, "Pipeline"),
        ("n0_1", 0, "n0_4", 0, "Pipeline"),
        ("n0_3", 0, "n0_4", 1, "Exchange"),
        ("n0_4", 0, "n0_5", 0, "Pipeline"),
    ]
    check_pictures(
        graph,
        {
            "n0_1": "ToStream [0, 1]",
            "n0_2": "ToStream [0, 2]",
            "n0_3": "Concatenate [0, 3]",
            "n0_4": "Join [0, 4]",
            "n0_5": "Probe [0, 5]",
        },
        [
            ("n0_1", "n0_3", False, None),
            ("n0_2", "n0_3", False, None),
            ("n0_1", "n0_4", False, None),
            ("n0_3", "n0_4", False, "Exchange"),
            ("n0_4", "n0_5", False, None),
        ],
    )


def collatz_with_a_region(scope: Any) -> Any:
    """The book's Collatz loop in an iterative scope, with a region nested inside it."""

    def loop(inner: Any) -> Any:
        handle, cycle = inner.feedback(1)
        start = scope.to_stream([6, 7]).enter(inner)
        halved = inner.region(
            lambda region: start.enter(region).map(lambda n: n).leave(), name="Tidy"
        )
        step = halved.concat(cycle).map(lambda n: n // 2 if n % 2 == 0 else 3 * n + 1)
        step.filter(lambda n: n != 1).connect_loop(handle)
        return step.leave()

    return scope.iterative(loop).capture()


def test_an_iterate_loop_draws_its_scopes_ports_and_feedback_edge():
    # Build order: Iterative (0, 1) holds Feedback 1, then (in the root) ToStream
    # (0, 2), then the region Tidy (0, 1, 2) with its Map, Concatenate, Map, Filter;
    # Capture (0, 3) comes last.
    graph = runtime_graph(collatz_with_a_region)

    iterative, region = graph.clusters
    assert (
        iterative.key,
        iterative.name,
        iterative.address,
        iterative.parent,
        iterative.iterative,
    ) == ("s0_1", "Iterative", (0, 1), None, True)
    assert (region.key, region.name, region.address, region.parent, region.iterative) == (
        "s0_1_2",
        "Tidy",
        (0, 1, 2),
        "s0_1",
        False,
    )
    feedback = [edge for edge in graph.edges if edge.feedback]
    assert [(e.source, e.target, e.scope, e.pact) for e in feedback] == [
        ("n0_1_5", "n0_1_1", "s0_1", "Pipeline")
    ]
    labels = {
        "n0_1_in0": "input 0",
        "n0_1_out0": "output 0",
        "n0_1_1": "Feedback [0, 1, 1]",
        "n0_2": "ToStream [0, 2]",
        "n0_1_2_in0": "input 0",
        "n0_1_2_out0": "output 0",
        "n0_1_2_1": "Map [0, 1, 2, 1]",
        "n0_1_3": "Concatenate [0, 1, 3]",
        "n0_1_4": "Map [0, 1, 4]",
        "n0_1_5": "Filter [0, 1, 5]",
        "n0_3": "Capture [0, 3]",
    }
    edges = [
        ("n0_2", "n0_1_in0", False, None),  # enter the iterative scope
        ("n0_1_in0", "n0_1_2_in0", False, None),  # ... and the region inside it
        ("n0_1_2_in0", "n0_1_2_1", False, None),
        ("n0_1_2_1", "n0_1_2_out0", False, None),  # leave the region
        ("n0_1_2_out0", "n0_1_3", False, None),
        ("n0_1_1", "n0_1_3", False, None),  # the loop's stream into the concat
        ("n0_1_3", "n0_1_4", False, None),
        ("n0_1_4", "n0_1_5", False, None),
        ("n0_1_5", "n0_1_1", True, None),  # connect_loop: the feedback edge
        ("n0_1_4", "n0_1_out0", False, None),  # leave the iterative scope
        ("n0_1_out0", "n0_3", False, None),
    ]
    clusters = {"s0_1": ("Iterative [0, 1]", None), "s0_1_2": ("Tidy [0, 1, 2]", "s0_1")}
    parents = {key: "s0_1" for key in labels if key.startswith("n0_1_")} | {
        key: "s0_1_2" for key in labels if key.startswith("n0_1_2_")
    }
    check_pictures(graph, labels, edges, clusters, parents)
    assert {(e.target, e.pact) for e in graph.edges if e.target.endswith(("_in0", "_out0"))} == {
        ("n0_1_in0", None),
        ("n0_1_2_in0", None),
        ("n0_1_2_out0", None),
        ("n0_1_out0", None),
    }
    for picture in both(graph):
        shapes = picture.shapes()
        assert shapes["n0_1_in0"] == shapes["n0_1_2_out0"] != shapes["n0_1_1"]


def test_a_loop_in_the_root_scope_has_a_feedback_edge_too():
    def build(scope: Any) -> None:
        handle, cycle = scope.feedback(1)
        scope.to_stream([3]).concat(cycle).filter(lambda x: x > 100).connect_loop(handle)

    graph = runtime_graph(build)
    assert graph.clusters == ()
    assert [(e.source, e.target, e.feedback) for e in graph.edges] == [
        ("n0_2", "n0_3", False),
        ("n0_1", "n0_3", False),
        ("n0_3", "n0_4", False),
        ("n0_4", "n0_1", True),
    ]
    for picture in both(graph):
        assert [edge[2] for edge in picture.edges] == [False, False, False, True]


def test_labels_with_quotes_and_markup_survive_both_languages():
    name = 'say "hi" <b>#1 & `x` \\ y'

    def build(scope: Any) -> None:
        numbers = scope.to_stream([1])
        builder = OperatorBuilder(name, scope)
        inp = builder.new_input(numbers)
        builder.build(lambda caps: lambda frontiers: inp.discard())

    graph = runtime_graph(build, name='Data "flow"')
    assert graph.node("n0_2").label == f"{name} [0, 2]"
    for picture in both(graph):
        assert picture.labels()["n0_2"] == f"{name} [0, 2]"
    assert parse_dot(to_dot(graph))[0] == 'Data "flow"'
    # A newline cannot stand in a Mermaid label: it becomes a space there.
    two_lines = runtime_graph(
        lambda scope: scope.to_stream([1]).unary(
            Pipeline(), "two\nlines", lambda cap, info: lambda i, o: i.discard()
        )
    )
    assert parse_mermaid(to_mermaid(two_lines)).labels()["n0_2"] == "two lines [0, 2]"
    assert parse_dot(to_dot(two_lines))[1].labels()["n0_2"] == "two\nlines [0, 2]"


def test_the_build_functions_errors_reach_the_caller():
    def build(scope: Any) -> None:
        raise ValueError("no such stream")

    with pytest.raises(ValueError, match="no such stream"):
        runtime_graph(build)
    with pytest.raises(TypeError, match="build\\(scope\\)"):
        runtime_graph("not a function")  # type: ignore[arg-type]


def test_an_input_handle_left_open_does_not_keep_it_waiting():
    handle = timelypy.InputHandle()
    graph = runtime_graph(lambda scope: scope.input_from(handle).probe())
    assert [node.name for node in graph.nodes] == ["Input", "Probe"]


# -- flows -----------------------------------------------------------------------------


def words(worker_index: int, worker_count: int, resume_epoch: int) -> Any:
    yield AdvanceTo(0)
    yield Emit("a b")


def test_a_flow_is_a_chain_of_its_steps():
    flow = Dataflow()
    flow.input("lines", ManualInputConfig(words))
    flow.flat_map(str.split)
    flow.map(lambda word: (word, 1), step_id="pairs")
    flow.stateful_map("running", lambda key: 0, lambda total, n: (total + n, total + n))
    flow.reduce_epoch(add, step_id="count")
    flow.capture()
    graph = flow_graph(flow, name="wordcount")
    assert graph.name == "wordcount"
    assert [(n.step_id, n.operator, n.kind, n.stateful) for n in graph.nodes] == [
        ("lines", "input", "input", False),
        ("flat_map", "flat_map", "step", False),
        ("pairs", "map", "step", False),
        ("running", "stateful_map", "step", True),
        ("count", "reduce_epoch", "step", True),
        ("capture", "capture", "output", False),
    ]
    keys = [f"step_{i}" for i in range(6)]
    check_pictures(
        graph,
        dict(
            zip(
                keys,
                [
                    "lines (input)",
                    "flat_map (flat_map)",
                    "pairs (map)",
                    "running (stateful_map)",
                    "count (reduce_epoch)",
                    "capture (capture)",
                ],
                strict=True,
            )
        ),
        [(a, b, False, None) for a, b in pairwise(keys)],
    )
    mermaid, dot = both(graph)
    assert list(mermaid.shapes().values()) == [
        "input",
        "box",
        "box",
        "cylinder",
        "cylinder",
        "output",
    ]
    assert list(dot.shapes().values()) == [
        "invhouse",
        "box",
        "box",
        "cylinder",
        "cylinder",
        "house",
    ]


def test_a_windowing_step_is_stateful_and_named_by_its_operator():
    from datetime import timedelta

    from timelypy.flow import SystemClockConfig, TumblingWindowConfig

    flow = Dataflow()
    flow.count_window(
        "count", SystemClockConfig(), TumblingWindowConfig(length=timedelta(seconds=1))
    )
    flow.capture()
    (count, _) = flow_graph(flow).nodes
    assert (count.label, count.stateful) == ("count (count_window)", True)


def test_a_chain_flow_draws_exactly_as_before_graph_flows_were_drawn():
    # The text a chain flow was drawn as when every flow was a chain: graph flows
    # changed nothing of it (no labels, no clusters, no edge into a chain that starts
    # at the input ``run`` is given, a capture passing its items on).
    flow = Dataflow("chained")
    flow.map(str.upper, step_id="upper")
    flow.capture(step_id="middle")
    flow.reduce_epoch(add, step_id="count")
    flow.capture()
    graph = flow_graph(flow)
    assert to_mermaid(graph) == "\n".join(
        [
            "flowchart TD",
            '    step_0["upper (map)"]',
            '    step_1[\\"middle (capture)"\\]',
            '    step_2[("count (reduce_epoch)")]',
            '    step_3[\\"capture (capture)"\\]',
            "    step_0 --> step_1",
            "    step_1 --> step_2",
            "    step_2 --> step_3",
        ]
    )
    assert to_dot(graph) == "\n".join(
        [
            'digraph "flow" {',
            "    node [shape=box];",
            '    step_0 [label="upper (map)", shape=box];',
            '    step_1 [label="middle (capture)", shape=house];',
            '    step_2 [label="count (reduce_epoch)", shape=cylinder];',
            '    step_3 [label="capture (capture)", shape=house];',
            "    step_0 -> step_1;",
            "    step_1 -> step_2;",
            "    step_2 -> step_3;",
            "}",
        ]
    )
    assert graph.clusters == ()
    assert [(e.source_port, e.target_port, e.stream, e.label) for e in graph.edges] == [
        (0, 0, "upper.down", None),
        (0, 0, "middle.down", None),
        (0, 0, "count.down", None),
    ]


def branch_and_join_flow(evens: list[Any], everything: list[Any], rights: list[Any]) -> Dataflow:
    """Two inputs; ``left`` branched by parity, its evens joined with ``right``, merged back.

    ``right`` is read twice (by the join and by an output of its own); the
    branch's falses go straight into the join, so that edge has two labels.
    """
    flow = Dataflow("g")
    left = op.input("left", flow, TestingSource([("a", 1), ("b", 2), ("a", 3)]))
    right = op.input("right", flow, TestingSource([("a", 10), ("b", 20)]))
    odd = op.branch("odd", left, lambda item: item[1] % 2 == 1)
    matched = op.join("matched", odd.falses, right)
    every = op.merge("every", odd.trues, matched)
    op.output("out", every, TestingSink(everything))
    op.output("rights", right, TestingSink(rights))
    op.output("evens", op.key_rm("values", matched), TestingSink(evens))
    return flow


def test_a_graph_flow_draws_its_branch_merge_join_and_outputs():
    evens: list[Any] = []
    everything: list[Any] = []
    rights: list[Any] = []
    flow = branch_and_join_flow(evens, everything, rights)
    run_main(flow)  # the flow drawn is one that runs
    assert sorted(everything) == [("a", 1), ("a", 3), ("b", (2, 20))]
    assert evens == [(2, 20)] and sorted(rights) == [("a", 10), ("b", 20)]

    graph = flow_graph(flow, name="g")
    assert [(n.key, n.step_id, n.operator, n.kind, n.stateful) for n in graph.nodes] == [
        ("step_0", "g.left", "input", "input", False),
        ("step_1", "g.right", "input", "input", False),
        ("step_2", "g.odd", "branch", "step", False),
        ("step_3", "g.matched", "join", "step", True),
        ("step_4", "g.every", "merge", "step", False),
        ("step_5", "g.out", "output", "output", False),
        ("step_6", "g.rights", "output", "output", False),
        ("step_7", "g.values", "key_rm", "step", False),
        ("step_8", "g.evens", "output", "output", False),
    ]
    assert [(e.source, e.source_port, e.target, e.target_port, e.stream) for e in graph.edges] == [
        ("step_0", 0, "step_2", 0, "g.left.down"),
        ("step_2", 1, "step_3", 0, "g.odd.falses"),  # the join's side 0
        ("step_1", 0, "step_3", 1, "g.right.down"),  # ... and side 1
        ("step_2", 0, "step_4", 0, "g.odd.trues"),  # the merge's two inputs
        ("step_3", 0, "step_4", 1, "g.matched.down"),
        ("step_4", 0, "step_5", 0, "g.every.down"),
        ("step_1", 0, "step_6", 0, "g.right.down"),  # right, read a second time
        ("step_3", 0, "step_7", 0, "g.matched.down"),  # matched, read a second time
        ("step_7", 0, "step_8", 0, "g.values.down"),
    ]
    assert {e.pact for e in graph.edges} == {None}
    labels = {
        "step_0": "g.left (input)",
        "step_1": "g.right (input)",
        "step_2": "g.odd (branch)",
        "step_3": "g.matched (join)",
        "step_4": "g.every (merge)",
        "step_5": "g.out (output)",
        "step_6": "g.rights (output)",
        "step_7": "g.values (key_rm)",
        "step_8": "g.evens (output)",
    }
    edges = [
        ("step_0", "step_2", False, None),
        ("step_2", "step_3", False, "falses, side 0"),
        ("step_1", "step_3", False, "side 1"),
        ("step_2", "step_4", False, "trues"),
        ("step_3", "step_4", False, None),
        ("step_4", "step_5", False, None),
        ("step_1", "step_6", False, None),
        ("step_3", "step_7", False, None),
        ("step_7", "step_8", False, None),
    ]
    check_pictures(graph, labels, edges)
    mermaid, dot = both(graph)
    assert list(mermaid.shapes().values()) == [
        "input",
        "input",
        "box",
        "cylinder",
        "box",
        "output",
        "output",
        "box",
        "output",
    ]
    assert list(dot.shapes().values()) == [
        "invhouse",
        "invhouse",
        "box",
        "cylinder",
        "box",
        "house",
        "house",
        "box",
        "house",
    ]


@operator
def clean(step_id: str, up: Any) -> Any:
    """A composite of two steps."""
    return op.filter("nonempty", op.map("strip", up, str.strip), bool)


@operator
def tidy(step_id: str, up: Any) -> Any:
    """A composite holding a step and a composite."""
    return op.map("lower", clean("clean", up), str.lower)


def test_a_composite_operators_steps_are_drawn_as_a_cluster():
    flow = Dataflow("c")
    lines = op.input("lines", flow, TestingSource([" A ", " ", "b"]))
    first = tidy("tidy", lines)
    second = clean("again", first)
    out: list[str] = []
    op.output("out", second, TestingSink(out))
    run_main(flow)
    assert out == ["a", "b"]

    graph = flow_graph(flow)
    assert [(c.key, c.label, c.name, c.parent) for c in graph.clusters] == [
        ("composite_0", "c.tidy", "c.tidy", None),
        ("composite_1", "c.tidy.clean", "c.tidy.clean", "composite_0"),
        ("composite_2", "c.again", "c.again", None),
    ]
    labels = {
        "step_0": "c.lines (input)",
        "step_1": "c.tidy.clean.strip (map)",
        "step_2": "c.tidy.clean.nonempty (filter)",
        "step_3": "c.tidy.lower (map)",
        "step_4": "c.again.strip (map)",
        "step_5": "c.again.nonempty (filter)",
        "step_6": "c.out (output)",
    }
    edges = [(f"step_{i}", f"step_{i + 1}", False, None) for i in range(6)]
    clusters = {
        "composite_0": ("c.tidy", None),
        "composite_1": ("c.tidy.clean", "composite_0"),
        "composite_2": ("c.again", None),
    }
    parents = {
        "step_1": "composite_1",
        "step_2": "composite_1",
        "step_3": "composite_0",
        "step_4": "composite_2",
        "step_5": "composite_2",
    }
    check_pictures(graph, labels, edges, clusters, parents)
    mermaid = to_mermaid(graph).splitlines()
    assert mermaid[:13] == [
        "flowchart TD",
        '    step_0[/"c.lines (input)"/]',
        '    step_6[\\"c.out (output)"\\]',
        '    subgraph composite_0["c.tidy"]',
        '        step_3["c.tidy.lower (map)"]',
        '        subgraph composite_1["c.tidy.clean"]',
        '            step_1["c.tidy.clean.strip (map)"]',
        '            step_2["c.tidy.clean.nonempty (filter)"]',
        "        end",
        "    end",
        '    subgraph composite_2["c.again"]',
        '        step_4["c.again.strip (map)"]',
        '        step_5["c.again.nonempty (filter)"]',
    ]


def test_a_composite_in_a_flow_without_an_id_and_a_chain_beside_a_graph():
    flow = Dataflow()
    flow.map(str.upper, step_id="shout")  # an epoch chain, from the input run is given
    flow.capture()
    cleaned = clean("tidy", op.input("lines", flow, TestingSource(["x"])))
    op.output("out", cleaned, TestingSink([]))
    graph = flow_graph(flow)
    assert [(n.step_id, n.parent) for n in graph.nodes] == [
        ("shout", None),
        ("capture", None),
        ("lines", None),
        ("tidy.strip", "composite_0"),
        ("tidy.nonempty", "composite_0"),
        ("out", None),
    ]
    assert [(c.key, c.label) for c in graph.clusters] == [("composite_0", "tidy")]
    assert [(e.source, e.target) for e in graph.edges] == [
        ("step_0", "step_1"),
        ("step_2", "step_3"),
        ("step_3", "step_4"),
        ("step_4", "step_5"),
    ]


def test_flow_graph_wants_a_flow():
    with pytest.raises(TypeError, match=r"timelypy\.flow\.Dataflow"):
        flow_graph(lambda scope: None)  # type: ignore[arg-type]


# -- the command line -------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "timelypy.visualize", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_draws_a_flow_as_mermaid():
    from tests.visualize_fixtures import flow

    result = cli("tests.visualize_fixtures:flow")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == to_mermaid(flow_graph(flow)) + "\n"
    picture = parse_mermaid(result.stdout)
    assert list(picture.labels().values()) == [
        "lines (input)",
        "words (flat_map)",
        "pairs (map)",
        "count (reduce_epoch)",
        "capture (capture)",
    ]


def test_the_cli_draws_a_graph_flow_as_dot():
    from tests.visualize_fixtures import graph_flow

    result = cli("tests.visualize_fixtures:graph_flow", "--format", "dot")
    assert result.returncode == 0, result.stderr
    assert result.stdout == to_dot(flow_graph(graph_flow, name="graph_flow")) + "\n"
    name, picture = parse_dot(result.stdout)
    assert name == "graph_flow"
    assert list(picture.labels().values()) == [
        "numbers.numbers (input)",
        "numbers.names (input)",
        "numbers.odd (branch)",
        "numbers.evens (output)",
        "numbers.name (join)",
        "numbers.named (output)",
    ]
    assert picture.edges == [
        ("step_0", "step_2", False, None),
        ("step_2", "step_3", False, "falses"),
        ("step_2", "step_4", False, "trues, side 0"),
        ("step_1", "step_4", False, "side 1"),
        ("step_4", "step_5", False, None),
    ]


def test_the_cli_draws_a_build_function_as_dot_into_a_file(tmp_path):
    target = tmp_path / "build.dot"
    result = cli("tests.visualize_fixtures:build", "--format", "dot", "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    name, picture = parse_dot(target.read_text())
    assert name == "Dataflow0"
    assert list(picture.labels().values()) == [
        "ToStream [0, 1]",
        "Map [0, 2]",
        "Exchange [0, 3]",
        "Probe [0, 4]",
    ]
    assert [edge[3] for edge in picture.edges] == [None, "Exchange", None]


def test_the_cli_follows_a_dotted_attribute():
    result = cli("tests.visualize_fixtures:Holder.flow", "--format", "dot")
    assert result.returncode == 0, result.stderr
    assert parse_dot(result.stdout)[0] == "Holder.flow"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.visualize_fixtures", "is not MODULE:ATTRIBUTE"),
        (":flow", "is not MODULE:ATTRIBUTE"),
        ("tests.no_such_module:flow", "cannot import module 'tests.no_such_module'"),
        ("tests.visualize_fixtures:nothing", "has no attribute 'nothing'"),
        ("tests.visualize_fixtures:number", "is 42 (int), not a timelypy.flow.Dataflow"),
        ("tests.visualize_fixtures:Holder", "is a class (Holder)"),
        ("tests.visualize_fixtures:no_arguments", "cannot be called as build(scope)"),
    ],
)
def test_the_cli_names_a_bad_target(target, message):
    result = cli(target)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("timelypy.visualize: ")
    assert message in result.stderr


def test_the_cli_reports_a_failing_build_and_bad_options():
    failed = cli("tests.visualize_fixtures:broken")
    assert failed.returncode == 1
    first, hint = failed.stderr.splitlines()
    assert first == (
        "timelypy.visualize: building tests.visualize_fixtures:broken failed: "
        "RuntimeError: broken build function"
    )
    assert "--traceback" in hint and "Traceback" not in failed.stderr
    traced = cli("tests.visualize_fixtures:broken", "--traceback")
    assert traced.returncode == 1
    assert "Traceback" in traced.stderr and "RuntimeError: broken build function" in traced.stderr
    bad_format = cli("tests.visualize_fixtures:flow", "--format", "svg")
    assert bad_format.returncode == 2
    assert "invalid choice: 'svg'" in bad_format.stderr


# -- the docs and the example ---------------------------------------------------------


def test_each_mermaid_block_in_the_docs_is_what_the_code_before_it_draws():
    text = (ROOT / "docs" / "visualize.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    namespace: dict[str, Any] = {}
    checked = 0
    for language, body in blocks:
        if language == "python":
            namespace = {"__name__": "__docs__"}
            exec(compile(body, "docs/visualize.md", "exec"), namespace)
        elif language == "mermaid":
            assert body == namespace["mermaid"] + "\n"
            parse_mermaid(body)
            checked += 1
    assert checked == 3


def example(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "visualize_flow.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_example_prints_the_mermaid_of_its_flow():
    picture = parse_mermaid(example())
    kinds = list(picture.shapes().values())
    assert kinds[0] == "input" and kinds[-1] == "output" and "cylinder" in kinds
    assert picture.clusters == {}


def test_the_example_prints_its_stream_graph_too():
    picture = parse_mermaid(example("--graph"))
    assert picture.clusters == {"composite_0": ("wordcount.count_words", None)}
    assert sorted(label for _, _, _, label in picture.edges if label) == ["falses", "trues"]
    assert "cylinder" in picture.shapes().values()
    name, dot = parse_dot(example("--graph", "--dot"))
    assert name == "wordcount" and dot.edges == picture.edges
