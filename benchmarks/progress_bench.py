"""Cost of ``Tracker.propagate_all`` as graphs grow: it should grow linearly.

Two shapes, from 10 to 10,000 nodes:

* ``chain``   -- node i feeds node i+1;
* ``diamond`` -- a chain of diamonds: a split node feeding two branch nodes
  that meet again at a two-input join node.

Each measured *update* moves one capability at the head of the graph from
time ``t`` to ``t + 1`` (two pointstamp changes) and calls ``propagate_all``,
which must move the frontier of every downstream input.  The work is
therefore proportional to the number of nodes; the benchmark prints the
median microseconds per update, per node, and the exponent ``k`` of a
least-squares fit ``time ~ nodes**k`` (1.0 is linear).

    python benchmarks/progress_bench.py [--quick] [--product]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timelypy.order import Product, ProductType
from timelypy.progress import Builder, Source, Target, Tracker


def chain(n: int, ttype: object, zero: object) -> tuple[Tracker, Source, Target]:
    """A chain of ``n`` operators: node 1 (a source) feeds 2, ..., n."""
    builder = Builder(ttype)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])
    for node in range(2, n + 1):
        builder.add_node(node, 1, 1, [{0: [zero]}])
        builder.add_edge(Source(node - 1, 0), Target(node, 0))
    tracker, _ = builder.build()
    return tracker, Source(1, 0), Target(n, 0)


def diamonds(n: int, ttype: object, zero: object) -> tuple[Tracker, Source, Target]:
    """A chain of diamonds with about ``n`` operators (4 nodes per diamond)."""
    builder = Builder(ttype)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])
    last = 1
    node = 2
    while node + 3 <= n + 1:
        split, left, right, join = node, node + 1, node + 2, node + 3
        builder.add_node(split, 1, 2, [{0: [zero], 1: [zero]}])
        builder.add_node(left, 1, 1, [{0: [zero]}])
        builder.add_node(right, 1, 1, [{0: [zero]}])
        builder.add_node(join, 2, 1, [{0: [zero]}, {0: [zero]}])
        builder.add_edge(Source(last, 0), Target(split, 0))
        builder.add_edge(Source(split, 0), Target(left, 0))
        builder.add_edge(Source(split, 1), Target(right, 0))
        builder.add_edge(Source(left, 0), Target(join, 0))
        builder.add_edge(Source(right, 0), Target(join, 1))
        last = join
        node += 4
    tracker, _ = builder.build()
    return tracker, Source(1, 0), Target(last, 0)


def time_updates(
    tracker: Tracker, head: Source, tail: Target, updates: int, product: bool
) -> float:
    """Median seconds per capability move, after checking the tail sees each move."""

    def at(t: int) -> object:
        return Product(t, 0) if product else t

    tracker.update_source(head, at(0), 1)
    tracker.propagate_all()
    tracker.pushed()
    samples = []
    for t in range(updates):
        start = time.perf_counter()
        tracker.update_source(head, at(t), -1)
        tracker.update_source(head, at(t + 1), 1)
        tracker.propagate_all()
        samples.append(time.perf_counter() - start)
        tracker.pushed()
    assert tracker.target_implications(tail).frontier() == (at(updates),)
    return statistics.median(samples)


def fit_exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) against log(sizes)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the benchmark and print a table; return the fitted exponents per shape."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 1,000 only")
    parser.add_argument("--product", action="store_true", help="Product(int, int) timestamps")
    args = parser.parse_args(argv)
    sizes = [10, 100, 1_000] if args.quick else [10, 100, 1_000, 10_000]
    ttype: object = ProductType(int, int) if args.product else int
    zero: object = Product(0, 0) if args.product else 0
    kind = "Product" if args.product else "int"
    print(f"propagate_all cost, {kind} timestamps (median of repeated capability moves)")
    print(f"{'shape':<8} {'nodes':>7} {'us/update':>11} {'us/update/node':>15}")
    exponents = {}
    for name, make in (("chain", chain), ("diamond", diamonds)):
        seconds = []
        for n in sizes:
            tracker, head, tail = make(n, ttype, zero)
            updates = max(5, min(200, 20_000 // n))
            per_update = time_updates(tracker, head, tail, updates, args.product)
            seconds.append(per_update)
            print(f"{name:<8} {n:>7} {per_update * 1e6:>11.1f} {per_update * 1e6 / n:>15.3f}")
        exponents[name] = fit_exponent(sizes, seconds)
        # the fit over the larger sizes is what "grows linearly" is about
        tail_fit = fit_exponent(sizes[1:], seconds[1:])
        print(f"{name:<8} growth exponent k = {exponents[name]:.2f} (sizes >= 100: {tail_fit:.2f})")
    return exponents


if __name__ == "__main__":
    main()
