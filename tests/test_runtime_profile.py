"""``benchmarks.runtime_profile`` runs against ``runtime_bench``'s workloads as they are."""

from __future__ import annotations

import pytest

from benchmarks import runtime_profile


def test_the_profiler_profiles_the_epoch_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    """It builds its workload through ``runtime_bench.build_workloads`` (a signature
    change there once broke it unnoticed) and prints calls per epoch."""
    assert runtime_profile.main(["--quick", "--workload", "epoch_round_trip", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "epoch_round_trip: top 3 by own time" in out
    assert "per input epoch" in out
