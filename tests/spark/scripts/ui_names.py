"""Run a flow on a session with the Spark UI on; print the UI's jobs and stages as JSON.

    python ui_names.py OUTPUT.json

What the Spark UI's REST API says about the barrier job timelypy ran: its
description and the name of its stages, read while the application runs.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import timelypy_spark  # noqa: E402
from timelypy.flow import Dataflow  # noqa: E402


def main() -> None:
    spark = timelypy_spark.session("local[2]", "timelypy-ui-test", spark__ui__port="0")
    try:
        flow = Dataflow()
        flow.map(lambda x: x + 1, "plus_one")
        flow.capture()
        rdd = spark.sparkContext.parallelize(range(10), 2)
        timelypy_spark.run_flow(spark, flow, rdd, workers=2, collect=True)
        ui = spark.sparkContext.uiWebUrl
        app = spark.sparkContext.applicationId
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs", timeout=30) as r:
            jobs = json.load(r)
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages", timeout=30) as r:
            stages = json.load(r)

        def named(entries: list[dict]) -> list[dict]:
            return [{"name": e.get("name"), "description": e.get("description")} for e in entries]

        Path(sys.argv[1]).write_text(json.dumps({"jobs": named(jobs), "stages": named(stages)}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
