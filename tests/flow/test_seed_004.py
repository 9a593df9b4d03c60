"""Seed 004's programs, as written there with only the imports changed."""

from __future__ import annotations

import re
from collections import Counter
from operator import add

import pytest

from tests.flow.reference import per_epoch
from timelypy.flow import Dataflow, run, run_cluster
from timelypy.flow.inputs import AdvanceTo, Emit, ManualInputConfig

HAMLET = """\
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them.
"""

#: What seed 004 prints for one epoch (order free).
ONE_EPOCH = [
    ("fortune", 1),
    ("a", 1),
    ("whether", 1),
    ("them", 1),
    ("nobler", 1),
    ("'tis", 1),
    ("arrows", 1),
    ("slings", 1),
    ("and", 2),
    ("outrageous", 1),
    ("sea", 1),
    ("by", 1),
    ("or", 2),
    ("not", 1),
    ("opposing", 1),
    ("question", 1),
    ("mind", 1),
    ("that", 1),
    ("to", 4),
    ("end", 1),
    ("arms", 1),
    ("suffer", 1),
    ("take", 1),
    ("in", 1),
    ("against", 1),
    ("is", 1),
    ("of", 2),
    ("the", 3),
    ("be", 2),
    ("troubles", 1),
]

#: What seed 004 prints with one epoch per line, "epoch item" (order free).
PER_LINE = """\
0 ('to', 2)
0 ('question', 1)
0 ('is', 1)
0 ('not', 1)
0 ('that', 1)
0 ('or', 1)
0 ('be', 2)
0 ('the', 1)
1 ("'tis", 1)
1 ('in', 1)
1 ('to', 1)
1 ('suffer', 1)
1 ('whether', 1)
2 ('slings', 1)
2 ('of', 1)
2 ('arrows', 1)
1 ('nobler', 1)
1 ('the', 1)
1 ('mind', 1)
2 ('the', 1)
2 ('and', 1)
2 ('fortune', 1)
2 ('outrageous', 1)
3 ('of', 1)
3 ('arms', 1)
3 ('against', 1)
3 ('to', 1)
3 ('take', 1)
3 ('a', 1)
3 ('sea', 1)
3 ('or', 1)
3 ('troubles', 1)
4 ('and', 1)
4 ('end', 1)
4 ('them', 1)
4 ('by', 1)
4 ('opposing', 1)
"""


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
    assert Counter(printed) == Counter(PER_LINE.splitlines())


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
