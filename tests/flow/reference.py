"""A plain-Python model of timelypy.flow's step semantics, for property tests.

It processes epochs in order and computes each epoch's output as a
``Counter``; only operations whose per-epoch output multiset does not depend
on the order of items within an epoch are modelled (the flow makes no
promise about that order).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from operator import add
from typing import Any

from timelypy.flow import Dataflow


def build_flow(steps: list[tuple[str, int]]) -> Dataflow:
    """The flow of ``steps`` (see tests.strategies.FLOW_STEP_KINDS), ending in a capture."""
    flow = Dataflow()
    for i, (kind, p) in enumerate(steps):
        if kind == "map":
            flow.map(lambda kv, p=p: (kv[0], kv[1] * p + 1))
        elif kind == "filter":
            flow.filter(lambda kv, p=p: kv[1] % (p + 1) != 0)
        elif kind == "flat_map":
            flow.flat_map(lambda kv, p=p: [(kv[0], kv[1] + j) for j in range(p % 3)])
        elif kind == "filter_map":
            flow.filter_map(lambda kv, p=p: None if kv[1] % (p + 2) == 1 else (kv[0], kv[1] - 1))
        elif kind == "reduce_epoch":
            flow.reduce_epoch(add)
        elif kind == "stateful_count":
            # output: how many values the key has seen so far (order-free as a multiset)
            flow.stateful_map(f"count_{i}", lambda key: 0, lambda n, v: (n + 1, n + 1))
        elif kind == "reduce_count":
            flow.map(lambda kv: (kv[0], 1))
            flow.reduce(f"groups_{i}", add, lambda acc, p=p: acc >= p + 1)
        elif kind == "inspect_epoch":
            flow.inspect_epoch(lambda epoch, kv: None)
        else:
            raise AssertionError(kind)
    flow.capture()
    return flow


def expected(steps: list[tuple[str, int]], pairs: list[tuple[int, Any]]) -> dict[int, Counter]:
    """Each epoch's output multiset for ``pairs`` through ``steps``."""
    by_epoch: dict[int, list[Any]] = defaultdict(list)
    for epoch, item in pairs:
        by_epoch[epoch].append(item)
    states: dict[int, dict[str, int]] = defaultdict(dict)
    out: dict[int, Counter] = {}
    for epoch in sorted(by_epoch):
        items = by_epoch[epoch]
        for i, (kind, p) in enumerate(steps):
            if kind == "map":
                items = [(k, v * p + 1) for k, v in items]
            elif kind == "filter":
                items = [(k, v) for k, v in items if v % (p + 1) != 0]
            elif kind == "flat_map":
                items = [(k, v + j) for k, v in items for j in range(p % 3)]
            elif kind == "filter_map":
                items = [(k, v - 1) for k, v in items if v % (p + 2) != 1]
            elif kind == "reduce_epoch":
                sums: dict[str, int] = {}
                for k, v in items:
                    sums[k] = sums.get(k, 0) + v
                items = list(sums.items())
            elif kind == "stateful_count":
                state = states[i]
                result = []
                for k, _ in items:
                    state[k] = state.get(k, 0) + 1
                    result.append((k, state[k]))
                items = result
            elif kind == "reduce_count":
                state = states[i]
                result = []
                for k, _ in items:
                    state[k] = state.get(k, 0) + 1
                    if state[k] >= p + 1:
                        del state[k]
                        result.append((k, p + 1))
                items = result
        if items:
            out[epoch] = Counter(items)
    return out


def per_epoch(results: list[tuple[int, Any]]) -> dict[int, Counter]:
    """Group ``(epoch, item)`` results into a multiset per epoch."""
    grouped: dict[int, Counter] = defaultdict(Counter)
    for epoch, item in results:
        grouped[epoch][item] += 1
    return dict(grouped)
