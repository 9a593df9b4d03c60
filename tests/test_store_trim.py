"""The snapshot writer's trim keeps a long run's store bounded by what a resume needs."""

from __future__ import annotations

from timelypy.recovery.store import create_store


def test_a_discarded_key_leaves_the_store_during_the_run(tmp_path):
    """A key snapshotted, then discarded, is gone from the store once no resume can need it.

    Before, a key was trimmed once, at the first trim after it was written:
    if its latest row was not yet before the resume epoch then, both its
    rows stayed until the next execution (a store growing with every key a
    long run ever saw: session ids, request ids).
    """
    store = create_store(tmp_path / "store", 2)
    execution = store.begin_execution(1)
    writer = store.writer(execution.ex_num, 0)

    def commit(frontier: int) -> None:
        writer._next_trim = 0.0  # trim at this commit (normally once a second)
        writer.commit(frontier)

    keys = [f"k{i}" for i in range(20)]  # on both partitions
    writer.snapshot("step", 0, [(key, 1) for key in keys])
    commit(1)  # trims at resume epoch 0: the epoch-0 rows are needed
    writer.snapshot("step", 1, [(key, None) for key in keys])  # every key is discarded
    commit(2)  # trims at 1: epoch 0's rows are the latest before it, still needed
    assert {key for _, key, _, _ in store.snapshots("step")} == set(keys)
    commit(3)  # trims at 2: a resume starts at 2, where no key has state
    assert store.snapshots("step") == []
    writer.close()
