"""A flow whose function lives in a module only the driver can import; report how it failed.

    python missing_module.py --master MASTER OUTPUT.json

The module is written to a fresh directory put on the driver's ``sys.path``
after the session started, so executors (separate JVMs on a
``local-cluster``) cannot import it.  ``run_flow`` to an RDD (a shuffle
map stage, which Spark would retry) must fail once: the JSON has the
error's type and message, the seconds the call took, and every stage of
the run's Spark job group with its attempt number and failed tasks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the driver imports the repository's timelypy

import timelypy_spark  # noqa: E402
from timelypy.flow import Dataflow  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("output")
    args = parser.parse_args()
    spark = timelypy_spark.session(args.master, "timelypy-missing-module-test")
    sc = spark.sparkContext
    report: dict = {}
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "driver_only_helpers.py").write_text(
            "def double(x):\n    return 2 * x\n"
        )
        sys.path.insert(0, directory)
        helpers = importlib.import_module("driver_only_helpers")
        flow = Dataflow()
        flow.map(helpers.double)
        flow.capture()
        started = time.monotonic()
        try:
            timelypy_spark.run_flow(spark, flow, sc.parallelize(range(100), 2), workers=2)
        except Exception as exc:
            report["error"] = type(exc).__name__
            report["message"] = str(exc)
            report["notes"] = list(getattr(exc, "__notes__", []))
        report["elapsed"] = time.monotonic() - started
    group = next(
        (note.rsplit(" ", 1)[-1] for note in report.get("notes", []) if "job group" in note), None
    )
    tracker = sc.statusTracker()
    time.sleep(1.0)  # the listener bus reports the cancelled stages a moment later
    stages = []
    for job in tracker.getJobIdsForGroup(group) if group else []:
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            if info is not None:
                stages.append([stage, info.currentAttemptId, info.numFailedTasks])
    report["stages"] = stages
    Path(args.output).write_text(json.dumps(report))
    spark.stop()


if __name__ == "__main__":
    main()
