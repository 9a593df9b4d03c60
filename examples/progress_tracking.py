"""Progress tracking on a loop, step by step (no runtime needed).

A source feeds a loop body whose output goes around a feedback edge that
adds one per round.  The script injects pointstamps the way a running
dataflow would (a capability at the source, messages circulating in the loop),
propagates, and prints what each input may still see after every step.

    python examples/progress_tracking.py
"""

from __future__ import annotations

from timelypy.progress import Builder, Source, Target


def frontiers(tracker, inputs):
    """Format the frontier of each named input."""
    return ", ".join(
        f"{name}: {list(tracker.target_implications(target).frontier())}"
        for name, target in inputs.items()
    )


def main() -> None:
    builder = Builder(int)
    builder.add_node(0, 0, 0, [])
    builder.add_node(1, 0, 1, [])  # source
    builder.add_node(2, 2, 1, [{0: [0]}, {0: [0]}])  # body (data in, loop in)
    builder.add_node(3, 1, 1, [{0: [1]}])  # feedback: +1
    builder.add_node(4, 1, 0, [{}])  # sink after the body
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(3, 0))
    builder.add_edge(Source(3, 0), Target(2, 1))
    builder.add_edge(Source(2, 0), Target(4, 0))
    tracker, _ = builder.build()
    inputs = {"body": Target(2, 0), "loop": Target(2, 1), "sink": Target(4, 0)}

    steps = [
        ("source holds a capability at 0", [(Source(1, 0), 0, 1)]),
        (
            "source sends a message at 0 and moves to 1",
            [(Target(2, 0), 0, 1), (Source(1, 0), 0, -1), (Source(1, 0), 1, 1)],
        ),
        (
            "body consumes it and sends it round the loop at 0",
            [(Target(2, 0), 0, -1), (Target(3, 0), 0, 1), (Target(4, 0), 0, 1)],
        ),
        (
            "feedback forwards it as 1; the sink consumes its copy",
            [(Target(3, 0), 0, -1), (Target(2, 1), 1, 1), (Target(4, 0), 0, -1)],
        ),
        ("source closes (releases its capability)", [(Source(1, 0), 1, -1)]),
        ("body drops the looping message", [(Target(2, 1), 1, -1)]),
    ]
    print(f"start: {frontiers(tracker, inputs)}")
    for what, updates in steps:
        for location, time, diff in updates:
            if isinstance(location, Source):
                tracker.update_source(location, time, diff)
            else:
                tracker.update_target(location, time, diff)
        tracker.propagate_all()
        print(f"{what}:\n    {frontiers(tracker, inputs)}")
    print("complete" if not tracker.tracking_anything() else "still tracking")


if __name__ == "__main__":
    main()
