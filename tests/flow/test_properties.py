"""Random flows against a plain-Python reference (tests/flow/reference.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.flow.reference import build_flow, expected, per_epoch
from tests.strategies import flow_inputs, flow_steps
from timelypy.flow import run, run_cluster


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=flow_steps, pairs=flow_inputs)
def test_one_worker_matches_the_reference(steps, pairs):
    flow = build_flow(steps)
    assert per_epoch(list(run(flow, pairs))) == expected(steps, pairs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=flow_steps, pairs=flow_inputs)
def test_three_worker_threads_match_the_reference(steps, pairs):
    flow = build_flow(steps)
    result = run_cluster(flow, pairs, proc_count=1, worker_count_per_proc=3)
    assert per_epoch(result) == expected(steps, pairs)
