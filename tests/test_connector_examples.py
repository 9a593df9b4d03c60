"""``examples/flow_connectors.py`` as a program: files and Parquet, then PostgreSQL and Redis too.

The totals it prints are computed here in plain Python from its data.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict

import pytest

from tests.servers import postgres, redis
from tests.test_examples import ROOT, run

pytest.importorskip("pyarrow.parquet", reason="needs pyarrow: pip install pyarrow")


def _want(*sinks: str) -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "flow_connectors", ROOT / "examples" / "flow_connectors.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    totals: dict[str, int] = defaultdict(int)
    for i in range(300):
        totals[example.USERS[i % len(example.USERS)]] += i % 7
    return sorted(f"{sink}: {user} {total}" for sink in sinks for user, total in totals.items())


def test_the_example_writes_each_total_once_to_files_and_parquet(tmp_path):
    assert run("flow_connectors.py", "-w", "2", cwd=tmp_path) == _want("dir", "parquet")


@pytest.mark.timeout(120)
def test_the_example_writes_to_postgres_and_redis_too(tmp_path):
    with postgres() as dsn, redis() as address:
        where = f"{address['host']}:{address['port']}"
        lines = run("flow_connectors.py", "--postgres", dsn, "--redis", where, cwd=tmp_path)
        assert lines == _want("dir", "parquet", "postgres", "redis")
        # a second run upserts the same totals and empties the stream first: same output
        again = run("flow_connectors.py", "--postgres", dsn, "--redis", where, cwd=tmp_path)
        assert again == lines
