"""Sanity checks for the benchmark peers: the corpus, the harness, and the peers' results.

Fast (a few seconds): the full corpus is generated in memory once (about 1 s)
and compared with the documented md5s; the peers run on small inputs. Spark is
never started here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from datetime import timedelta

import pytest

from benchmarks import _data, flow_bench, flow_graph, runtime_bench
from benchmarks._harness import format_table, measure, measure_interleaved
from benchmarks.peers import bytewax_peer, plain, progress_floor
from benchmarks.peers.plain import is_even, triple


def md5_of(lines: list[str]) -> str:
    return hashlib.md5("".join(line + "\n" for line in lines).encode("ascii")).hexdigest()


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    return _data.generate_parts()


def test_generator_reproduces_the_documented_md5s(corpus):
    assert [len(part) for part in corpus] == [100_000, 100_000]
    assert {f"part-{i}.txt": md5_of(part) for i, part in enumerate(corpus)} == _data.EXPECTED_MD5


def test_smaller_corpus_is_a_prefix_of_the_full_one(corpus):
    (small,) = _data.generate_parts(lines=1_000, parts=1)
    assert small == corpus[0][:1_000]


def test_words_dir_generates_verifies_and_trusts_its_marker(tmp_path, monkeypatch):
    directory = _data.words_dir(tmp_path)
    assert directory == tmp_path
    assert {p.name: _data.file_md5(p) for p in _data.part_paths(tmp_path)} == _data.EXPECTED_MD5
    lines, words = _data.load_lines(tmp_path), _data.load_words(tmp_path)
    assert len(lines) == 200_000 and len(words) == 2_000_000
    assert words[:10] == lines[0].split()

    def no_hashing(path):
        raise AssertionError(f"{path} was hashed again although the marker vouches for it")

    with monkeypatch.context() as m:
        m.setattr(_data, "file_md5", no_hashing)
        assert _data.words_dir(tmp_path) == tmp_path

    (tmp_path / "part-1.txt").write_text("tampered\n")
    _data.words_dir(tmp_path)
    assert _data.file_md5(tmp_path / "part-1.txt") == _data.EXPECTED_MD5["part-1.txt"]


def test_measure_interleaved_runs_round_robin_and_keeps_results():
    calls = []
    stats = measure_interleaved(
        {"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2},
        repeat=2,
        warmup=1,
    )
    assert calls == ["a", "b"] * 3
    assert {name: (len(s.times), s.result) for name, s in stats.items()} == {
        "a": (2, 1),
        "b": (2, 2),
    }
    assert measure(lambda: 7, repeat=3, warmup=0).result == 7
    with pytest.raises(ValueError, match="repeat >= 1"):
        measure(lambda: None, repeat=0)


def test_format_table_aligns_and_renders_markdown():
    rows = [("map", "1.5 s"), ("wordcount", "12 s")]
    assert format_table(rows, ["workload", "median"]).splitlines() == [
        "workload   median",
        "---------  ------",
        "map         1.5 s",
        "wordcount    12 s",
    ]
    assert format_table(rows, ["workload", "median"], markdown=True).splitlines()[1] == "|---|--:|"


def test_plain_peers():
    assert plain.map_filter(range(10), triple, is_even) == [0, 6, 12, 18, 24]
    assert plain.wordcount(["a b", " b  c b "]) == {"a": 1, "b": 3, "c": 1}
    assert plain.epoch_round_trip(4) == [1, 2, 3, 4]
    assert progress_floor.epoch_round_trip(1_000, lambda x: -x) == [-x for x in range(1_000)]


@pytest.mark.parametrize("batch_size", [1, 7, 1_000])
def test_bytewax_agrees_with_plain(corpus, batch_size):
    pytest.importorskip("bytewax")
    ints = list(range(2_000))
    assert bytewax_peer.map_filter(ints, triple, is_even, batch_size=batch_size) == (
        plain.map_filter(ints, triple, is_even)
    )
    lines = corpus[0][:300]
    assert bytewax_peer.wordcount(lines, batch_size=batch_size) == plain.wordcount(lines)


def test_bytewax_round_trip_puts_one_record_in_each_epoch():
    pytest.importorskip("bytewax")
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, run_main

    assert bytewax_peer.epoch_round_trip(50) == plain.epoch_round_trip(50)

    # The same flow as epoch_round_trip, observed: each record has an epoch of its own.
    seen = []
    flow = Dataflow("epochs")
    s = op.input("inp", flow, bytewax_peer.list_source(range(20), batch_size=1))
    s = op.map("map", s, plain.add_one)
    op.inspect_debug("seen", s, lambda _step, x, epoch, _worker: seen.append((x, epoch)))
    op.output("out", s, TestingSink([]))
    run_main(flow, epoch_interval=timedelta(0))
    epochs = [epoch for _, epoch in seen]
    assert [x for x, _ in seen] == list(range(1, 21))
    assert len(set(epochs)) == 20 and epochs == sorted(epochs)


def test_missing_bytewax_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "bytewax.dataflow", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[bench\]'"):
        bytewax_peer.map_filter([1], triple, is_even)


def test_flow_bench_candidates_agree_on_a_tiny_input(corpus):
    has_bytewax = importlib.util.find_spec("bytewax") is not None
    workloads = flow_bench.build_workloads(
        corpus[0][:60], epochs=7, ordered=40, bytewax=has_bytewax, cluster=False, graph_items=150
    )
    assert [w.name for w in workloads] == list(flow_bench.WORKLOADS)
    for w in workloads:
        assert (w.bytewax_name() is not None) == has_bytewax
        w.measure(repeat=1, warmup=0)
        w.check()
    by_name = {w.name: w for w in workloads}
    assert by_name["join_running"].items == 300 and by_name["branch_merge"].items == 150
    assert "timelypy chain" in by_name["stateful_map_graph"].stats
    assert {"timelypy", "timelypy memory", "timelypy chain"} <= set(by_name["wordcount_file"].stats)
    goals = {(row[0], row[1]) for row in flow_bench.goal_rows(workloads)}
    assert ("wordcount_file", "timelypy memory within 10% of timelypy chain") in goals
    for name in ("wordcount_1_epoch", "wordcount_1000_epochs"):  # the batch-level wordcount
        assert {"plain batch", "timelypy batch"} <= set(by_name[name].stats)
        assert (name, "timelypy batch >= 0.850x plain batch's speed") in goals
    (remover,) = {r for w in workloads for r in w.cleanup}  # the wordcount_file corpus
    for w in workloads:
        w.release()
    assert not remover.alive
    (epochs_workload,) = flow_bench.build_workloads(
        corpus[0][:60], epochs=7, bytewax=False, cluster=False, only=["wordcount_1000_epochs"]
    )
    epochs = {epoch for epoch, _ in epochs_workload.candidates["timelypy"]()}
    assert epochs == set(range(8))  # 60 // 7 = 8 lines per epoch: 7 full epochs and 4 lines


def test_flow_bench_check_rejects_a_wrong_result(corpus):
    (w,) = flow_bench.build_workloads(
        corpus[0][:20], bytewax=False, cluster=False, only=["wordcount_1_epoch"]
    )
    w.candidates["timelypy"] = lambda: flow_bench.plain_wordcount([(0, "one more line")])
    w.measure(repeat=1, warmup=0)
    with pytest.raises(AssertionError, match="different result from plain Python"):
        w.check()


def test_flow_bench_join_check_is_order_free_but_not_blind(corpus):
    lines = corpus[0][:20]
    (w,) = flow_bench.build_workloads(
        lines, bytewax=False, cluster=False, only=["join_running"], graph_items=50
    )
    words = [word for line in lines for word in line.split()]
    left, right = flow_graph.join_sides(words, 50)
    expected = flow_graph.from_join_rows(flow_graph.plain_running_join(left, right))
    right_first = flow_graph.plain_running_join(right, left)
    assert flow_graph.from_join_rows([(k, (b, a)) for k, (a, b) in right_first]) == expected
    w.candidates["timelypy"] = lambda: flow_graph.plain_running_join(left[:-1], right)
    w.measure(repeat=1, warmup=0)
    with pytest.raises(AssertionError, match="different result from plain Python"):
        w.check()
    w.release()


@pytest.mark.slow
def test_flow_bench_main_and_profile_run_on_a_tiny_corpus(capsys):
    if importlib.util.find_spec("bytewax") is None:
        args = ["--no-bytewax"]
    else:
        args = []
    assert flow_bench.main(["--scale", "4000", "--repeat", "1", "--no-cluster", *args]) == 0
    out = capsys.readouterr().out
    assert "goals (" in out and "wordcount_1000_epochs" in out
    assert flow_bench.main(["--profile", "--scale", "4000", "--workload", "fully_ordered"]) == 0
    out = capsys.readouterr().out
    assert "fully_ordered, worker thread" in out and "fully_ordered, calling thread" in out
    assert flow_bench.main(["--profile", "--scale", "4000", "--workload", "wordcount_file"]) == 0
    out = capsys.readouterr().out
    assert "wordcount_file, calling thread" in out
    assert "wordcount_file (timelypy memory), calling thread" in out


@pytest.mark.parametrize("sizes", [(1, 7), (1_000, 10_000)])
def test_flow_bench_shows_bytewax_at_each_batch_size_and_in_its_batch_api(corpus, sizes):
    pytest.importorskip("bytewax")
    workloads = flow_bench.build_workloads(
        corpus[0][:60],
        epochs=7,
        ordered=40,
        cluster=False,
        graph_items=150,
        batch_sizes=sizes,
        only=["wordcount_1_epoch", "wordcount_1000_epochs", "stateful_map", "wordcount_file"],
    )
    by_name = {w.name: w for w in workloads}
    for w in workloads:
        w.measure(repeat=1, warmup=0)
        w.check()  # every bytewax row, keyed per epoch or not, counts what plain Python counts
    label = flow_bench.bytewax_label
    per_item, batch_api = flow_bench.PER_ITEM_OPS, flow_bench.BATCH_API_OPS
    for size in sizes:
        assert {label(per_item, size), label(batch_api, size)} <= set(
            by_name["wordcount_1_epoch"].stats
        )
        assert {
            label(f"{per_item} keyed epoch:word", size),
            label(f"{batch_api} keyed epoch:word", size),
        } <= set(by_name["wordcount_1000_epochs"].stats)
        assert label("op.stateful_map", size) in by_name["stateful_map"].stats
        assert label("op.stateful_batch", size) in by_name["stateful_map"].stats
        assert label(f"FileSource+{batch_api}", size) in by_name["wordcount_file"].stats
    goals = [(row[0], row[1]) for row in flow_bench.goal_rows(workloads)]
    # a goal against bytewax has one row per bytewax row it is judged against, each named
    epochs_goals = [g for w, g in goals if w == "wordcount_1000_epochs" and "3.00x bytewax" in g]
    assert len(epochs_goals) == 2 * len(sizes)
    assert all("keyed epoch:word" in g for g in epochs_goals)  # not the window row
    window = [n for n in by_name["wordcount_1000_epochs"].stats if "fold_window" in n]
    assert len(window) == 1 and window[0] in by_name["wordcount_1000_epochs"].describe
    file_goals = [g for w, g in goals if w == "wordcount_file" and "bytewax" in g]
    assert len(file_goals) == 2 * len(sizes) and all("FileSource" in g for g in file_goals)
    (no_window,) = flow_bench.build_workloads(
        corpus[0][:60], epochs=7, only=["wordcount_1000_epochs"], windows=False
    )
    assert not [n for n in no_window.candidates if "fold_window" in n]
    legend = [line for w in workloads for line in w.legend_lines()]
    first = label(per_item, sizes[0])
    # the first bytewax row is what 'vs bytewax' is against; it may also be the fastest
    (line,) = [line for line in legend if line.startswith("wordcount_1_epoch: 'vs bytewax'")]
    assert line.startswith(
        (
            f"wordcount_1_epoch: 'vs bytewax' is against '{first}', ",
            f"wordcount_1_epoch: 'vs bytewax' and 'vs fastest bytewax' are against '{first}'",
        )
    )
    for w in workloads:
        w.release()


def test_runtime_bench_shows_bytewax_at_each_batch_size_and_in_its_batch_api():
    pytest.importorskip("bytewax")
    sizes = (7, 50)
    workloads = runtime_bench.build_workloads(scale=1_000, bytewax=True, batch_sizes=sizes)
    for w in workloads:
        w.measure(repeat=1, warmup=0)
        w.check()
    by_name = {w.name: w for w in workloads}
    label = runtime_bench.bytewax_label
    for size in sizes:
        assert {
            runtime_bench.timelypy_label(size),
            label("op.map+op.filter", size),
            label("op.flat_map_batch", size),
        } <= set(by_name["map_filter"].stats)
        assert {
            label("op.flat_map+op.count_final", size),
            label("op.flat_map_batch+op.reduce_final", size),
        } <= set(by_name["wordcount"].stats)
    assert runtime_bench.ROUND_TRIP_BYTEWAX in by_name["epoch_round_trip"].stats
    goals = [row[1] for row in runtime_bench.goal_rows(workloads) if row[0] == "wordcount"]
    # timelypy against all four bytewax rows; "timelypy batch B" against the two at batch B
    assert len([g for g in goals if g.startswith("timelypy >= ")]) == 4
    for size in sizes:
        mine = [g for g in goals if g.startswith(runtime_bench.timelypy_label(size) + " ")]
        assert len(mine) == 2 and all(g.endswith(f", batch {size}'s speed") for g in mine)
    wc = by_name["wordcount"]
    fastest = wc.fastest_bytewax()
    assert fastest == min(wc.bytewax_names(), key=lambda n: wc.stats[n].median)
    assert fastest in (wc.legend() or "")
    assert [row[1] for row in wc.rows()] == list(wc.stats)


def test_runtime_bench_check_rejects_a_wrong_bytewax_result():
    pytest.importorskip("bytewax")
    (w,) = runtime_bench.build_workloads(
        scale=1_000, bytewax=True, batch_sizes=(10,), only=["wordcount"]
    )
    name = runtime_bench.bytewax_label("op.flat_map_batch+op.reduce_final", 10)
    w.candidates[name] = lambda: {"one": 1}
    w.measure(repeat=1, warmup=0)
    with pytest.raises(AssertionError, match="different result from plain Python"):
        w.check()
