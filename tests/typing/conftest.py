"""The type-check inputs are read by mypy (tests/test_typing.py), never imported."""

collect_ignore = ["flows_ok.py", "flows_bad.py"]
