"""Seed 004's programs, as written there with only the imports changed."""

from __future__ import annotations

import re
from collections import Counter
from operator import add

import pytest

from tests.flow.reference import per_epoch
from tests.flow.seed_004 import HAMLET, ONE_EPOCH, SEED_INSPECTING_EPOCHS
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig


def lower(line):
    return line.lower()


def tokenize(line):
    return re.findall(r'[^\s!,.?":;0-9]+', line)


def initial_count(word):
    return word, 1


def wordcount_flow():
    flow = Dataflow()
    flow.map(lower)
    flow.flat_map(tokenize)
    flow.map(initial_count)
    flow.reduce_epoch(add)
    flow.capture()
    return flow


@pytest.fixture
def wordcount_txt(tmp_path, monkeypatch):
    (tmp_path / "wordcount.txt").write_text(HAMLET)
    monkeypatch.chdir(tmp_path)


def one_epoch_input():
    for line in open("wordcount.txt"):
        yield 1, line


def per_line_input():
    for i, line in enumerate(open("wordcount.txt")):  # noqa: UP028 - as seed 004 writes it
        yield i, line


def test_wordcount_one_epoch(wordcount_txt, capsys):
    flow = wordcount_flow()
    for epoch, item in run(flow, one_epoch_input()):  # noqa: B007 - as seed 004 writes it
        print(item)
    printed = capsys.readouterr().out.splitlines()
    assert Counter(printed) == Counter(repr(item) for item in ONE_EPOCH)


def test_wordcount_one_epoch_per_line(wordcount_txt, capsys):
    flow = wordcount_flow()
    for epoch, item in run(flow, per_line_input()):
        print(epoch, item)
    printed = capsys.readouterr().out.splitlines()
    assert Counter(printed) == Counter(SEED_INSPECTING_EPOCHS.splitlines())


def test_capture_of_enumerate(capsys):
    flow = Dataflow()
    flow.capture()
    for epoch, item in run(flow, enumerate(range(6))):
        print(epoch, item)
    assert sorted(capsys.readouterr().out.splitlines()) == [f"{i} {i}" for i in range(6)]


def test_run_under_the_hood_input_builder(wordcount_txt):
    # seed 004 "A closer look at epochs": run() is a ManualInputConfig around inp
    inp = list(per_line_input())

    def input_builder(worker_index, worker_count, resume_epoch):
        assert worker_index == 0
        for epoch, input in inp:
            if epoch < resume_epoch:
                continue
            yield AdvanceTo(epoch)
            yield Emit(input)

    expected = per_epoch(list(run(wordcount_flow(), inp)))
    assert per_epoch(list(run(wordcount_flow(), ManualInputConfig(input_builder)))) == expected


@pytest.mark.parametrize(("procs", "workers"), [(1, 1), (1, 2), (2, 2)], ids=["1x1", "1x2", "2x2"])
def test_wordcount_is_the_same_on_threads_and_processes(wordcount_txt, procs, workers):
    one = per_epoch(list(run(wordcount_flow(), per_line_input())))
    assert one == per_epoch(run_cluster(wordcount_flow(), per_line_input(), procs, workers))
    single = per_epoch(list(run(wordcount_flow(), one_epoch_input())))
    assert single == {1: Counter(ONE_EPOCH)}
    assert single == per_epoch(run_cluster(wordcount_flow(), one_epoch_input(), procs, workers))
