"""Transports: allocators plus lifecycle, and a communication layer that knows no workers.

Ported behaviour: Timely's split between the communication crate, which
builds allocators (``CommunicationConfig::try_build``), and
``initialize_from``, which wraps workers around them.  Nothing under
``timelypy/communication`` may import the layers above it, not even lazily
inside a function: that is what keeps the cluster from orchestrating
workers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from timelypy.communication.allocator import ProcessAllocator, ProcessShared
from timelypy.communication.transport import ProcessTransport, Transport
from timelypy.errors import ConfigError

COMMUNICATION = Path(__file__).resolve().parents[2] / "timelypy" / "communication"
#: The layers above communication (DESIGN.md 1): it must import none of them.
ABOVE = ("timelypy.worker", "timelypy.execute", "timelypy.dataflow", "timelypy.flow")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it, with the line number."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


@pytest.mark.parametrize("path", sorted(COMMUNICATION.glob("*.py")), ids=lambda path: path.name)
def test_communication_imports_nothing_above_it(path):
    offending = [
        f"{path.name}:{line}: {module}"
        for line, module in imported_modules(path)
        if module.startswith(ABOVE) or module in ("timelypy.Worker", "timelypy.execute")
    ]
    assert offending == []


def test_process_transport_has_one_allocator_per_worker_sharing_one_failure():
    transport = ProcessTransport(3)
    assert isinstance(transport, Transport)
    assert [type(a) for a in transport.allocators] == [ProcessAllocator] * 3
    assert [a.index for a in transport.allocators] == [0, 1, 2]
    assert transport.failure is None
    error = ValueError("worker 1 failed")
    transport.allocators[1].abort(error)
    assert transport.failure is error
    # in-process lifecycle: nothing to wait for, nobody to tell, nothing to release
    transport.start()
    transport.fail(error)
    transport.finish()
    transport.close()


def test_finish_sends_what_the_allocators_buffer_and_close_closes_them():
    calls: list[str] = []

    class Buffering(ProcessAllocator):
        def release(self) -> None:
            calls.append(f"release {self.index}")

        def close(self) -> None:
            calls.append(f"close {self.index}")
            raise OSError("already closed")  # logged, never raised by Transport.close

    shared = ProcessShared(2)
    transport = Transport([Buffering(shared, 0), Buffering(shared, 1)], shared)
    transport.finish()
    transport.close()
    assert calls == ["release 0", "release 1", "close 0", "close 1"]


@pytest.mark.parametrize("workers", [0, -1])
def test_a_process_needs_a_worker(workers):
    with pytest.raises(ConfigError, match="at least one worker thread"):
        ProcessTransport(workers)
