"""Run the ``timelypy.flow`` examples as programs and compare what they print.

``flow_wordcount.py`` is seed 004's program; what it prints is compared with
what the seed shows, as a multiset: the seed itself says there is no order
within an epoch (and its own listings are in no particular order).
``flow_partitioned_files.py`` sorts what it prints, so it is compared
exactly, with the answer computed here in plain Python from its data.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.flow.seed_004 import SEED_INSPECTING_EPOCHS, SEED_MULTIPLE_EPOCHS, SEED_ONE_EPOCH
from tests.test_examples import ROOT, run

# -- Seed 004's wordcount -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "seed"),
    [
        ((), SEED_ONE_EPOCH),
        (("--per-line",), SEED_MULTIPLE_EPOCHS),
        (("--per-line", "--show-epochs"), SEED_INSPECTING_EPOCHS),
    ],
    ids=["one-epoch", "multiple-epochs", "inspecting-epochs"],
)
def test_wordcount_prints_what_the_seed_prints(tmp_path, args, seed):
    # No wordcount.txt in the working directory: the example uses the seed's text.
    lines = run("flow_wordcount.py", *args, cwd=tmp_path)
    assert Counter(lines) == Counter(seed.splitlines())
    assert not (tmp_path / "wordcount.txt").exists()


def test_wordcount_reads_the_working_directory_s_wordcount_txt(tmp_path):
    # As the seed's open("wordcount.txt") does.
    (tmp_path / "wordcount.txt").write_text("b a b\nA\n")
    assert sorted(run("flow_wordcount.py", cwd=tmp_path)) == ["('a', 2)", "('b', 2)"]
    per_line = run("flow_wordcount.py", "--per-line", "--show-epochs", cwd=tmp_path)
    assert sorted(per_line) == ["0 ('a', 1)", "0 ('b', 2)", "1 ('a', 1)"]


def test_wordcount_rejects_unknown_flags(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "flow_wordcount.py"), "--bogus"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "--bogus" in result.stderr


# -- Partitioned input and output over files ---------------------------------------------


def load_example(name: str):
    """Import ``examples/<name>.py`` as a module (its ``main`` does not run)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def partitioned_files_output() -> list[str]:
    """What the example prints, computed in plain Python from its logs."""
    example = load_example("flow_partitioned_files")
    hits: Counter[tuple[int, str]] = Counter()
    for rows in example.LOGS.values():
        for row in rows:
            clock, path = row.split(",")
            hits[example.minute_of(clock), path] += 1
    printed = [f"read {name} 1 time(s)" for name in sorted(example.LOGS)]
    printed += [f"{example.label(e)} {path} {n}" for (e, path), n in sorted(hits.items())]
    # Each path's lines are in exactly one of the two files.
    files: dict[str, list[str]] = {}
    for (e, path), n in hits.items():
        part = example.HitFiles("").part_for(path, ["hits-0.csv", "hits-1.csv"])
        files.setdefault(part, []).append(f"{example.label(e)},{path},{n}")
    printed += [f"{part}: " + " ".join(sorted(lines)) for part, lines in sorted(files.items())]
    return printed


def test_partitioned_files_expected_output_is_the_one_in_the_docstring():
    expected = partitioned_files_output()
    assert expected[:5] == [
        "read web-a.csv 1 time(s)",
        "read web-b.csv 1 time(s)",
        "read web-c.csv 1 time(s)",
        "12:00 /cart 1",
        "12:00 /home 3",
    ]
    assert [line.split(":")[0] for line in expected[-2:]] == ["hits-0.csv", "hits-1.csv"]


@pytest.mark.parametrize(
    "args", [("-w", "1"), (), ("-w", "2", "-n", "2")], ids=["1x1", "1x3", "2x2"]
)
def test_partitioned_files_reads_each_file_once(tmp_path, args):
    # Whatever the number of workers and processes, each file has exactly one primary:
    # it is read once, and the counts are those of a single plain-Python pass.
    assert run("flow_partitioned_files.py", *args, cwd=tmp_path) == partitioned_files_output()


# -- flow_recovery.py: start, kill, resume -------------------------------------------------


def test_recovery_demo_resumes_a_killed_execution_to_the_failure_free_output(tmp_path):
    lines = run("flow_recovery.py", cwd=tmp_path)
    killed = int(lines[0].split("epochs before ")[1].split()[0])
    resumed = int(lines[1].split("resumed from epoch ")[1].split()[0])
    assert killed >= 5 and resumed == killed, lines
    path = ROOT / "examples" / "flow_recovery.py"
    spec = importlib.util.spec_from_file_location("flow_recovery", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    final = example.expected()[example.EPOCHS - 1]
    assert lines[2] == f"totals after epoch {example.EPOCHS - 1}: " + ", ".join(
        f"{name} {final[name]}" for name in sorted(final)
    )
    assert lines[3] == "the output equals a run without the failure: True"


# -- flow_windowing.py: two clocks and windowers in one flow --------------------------------


def windowing_expected() -> list[str]:
    """What flow_windowing.py prints, computed in plain Python from its data."""
    path = ROOT / "examples" / "flow_windowing.py"
    spec = importlib.util.spec_from_file_location("flow_windowing", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    data = example.readings()
    newest: dict = {}
    late, kept = [], []
    for sensor, (at, celsius) in data:
        if sensor in newest and at < newest[sensor] - timedelta(seconds=30):
            late.append(f"late: {sensor} {at:%H:%M:%S} (arrived after {newest[sensor]:%H:%M:%S})")
            continue
        newest[sensor] = max(newest.get(sensor, at), at)
        kept.append((sensor, at, celsius))
    minutes: dict = {}
    for sensor, at, celsius in kept:
        minute = at.replace(second=0)
        total, count = minutes.get((sensor, minute), (0.0, 0))
        minutes[(sensor, minute)] = (total + celsius, count + 1)
    best: dict = {}
    for (sensor, minute), (total, count) in sorted(minutes.items()):
        five = minute.replace(minute=minute.minute - minute.minute % 5)
        average = round(total / count, 2)
        if (sensor, five) not in best or average > best[(sensor, five)][1]:
            best[(sensor, five)] = (minute, average)
    lines = [
        f"{five:%H:%M}-{five + timedelta(minutes=5):%H:%M} {sensor} warmest minute "
        f"{minute:%H:%M} {average} C"
        for (sensor, five), (minute, average) in best.items()
    ]
    return sorted(late) + sorted(lines)


@pytest.mark.parametrize("args", [(), ("-w", "3")], ids=["1 worker", "3 workers"])
def test_windowing_example_prints_the_plain_python_answer(tmp_path, args):
    expected = windowing_expected()
    assert expected[0].startswith("late: sensor-b")
    assert run("flow_windowing.py", *args, cwd=tmp_path) == expected


# -- Lines from sockets, epochs by the clock ---------------------------------------------


def test_socket_wordcount_counts_every_line_once_over_several_epochs():
    example = load_example("flow_socket_wordcount")
    n = example.LINES_PER_SERVER
    errors = sum(1 for i in range(n) if i % 3 == 0) + sum(1 for i in range(n) if i % 4 == 0)
    lines = run("flow_socket_wordcount.py")
    assert lines[-1] == f"total: error {errors}, ok {2 * n - errors}"
    epochs = [line for line in lines[:-1] if line.startswith("epoch ")]
    assert len(epochs) == len(lines) - 1 >= 2  # the servers send for ~1.5 s, epochs are 0.5 s
    summed: Counter[str] = Counter()
    for line in epochs:
        for part in line.split(": ", 1)[1].split(", "):
            word, count = part.split()
            summed[word] += int(count)
    assert summed == Counter({"error": errors, "ok": 2 * n - errors})


# -- First programs: wordcount from a file, per-sensor running means with alerts ----------
#
# Each runs for real, as a script (one worker) and through `python -m timelypy.flow`
# (the default `:flow`, a factory call picking the file, several workers, two processes),
# on generated data; the expected output is computed here in plain Python.


def run_first(args: list[str], cwd) -> list[str]:
    """Run ``python ARGS`` in ``cwd``; its stdout lines (it must exit 0, silent on stderr).

    The CLI's ``--processes`` prefixes each line with ``[I] ``; that is taken off.
    """
    command = [sys.executable, *args]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    if "--processes" in args or "-n" in args:
        assert all(re.match(r"\[[01]\] ", line) for line in lines), lines[:5]
        assert {line[:3] for line in lines} == {"[0]", "[1]"}  # both processes had keys
        lines = [line.split(" ", 1)[1] for line in lines]
    return lines


FIRST_WORDCOUNT = str(ROOT / "examples" / "first_wordcount.py")
FIRST_RUNNING_MEAN = str(ROOT / "examples" / "first_running_mean.py")


def cli(*args: str) -> list[str]:
    return ["-m", "timelypy.flow", *args]


def generated_text(seed: int = 36, lines: int = 2500) -> str:
    """Lines of mixed-case words, punctuation and blank lines (over two 1000-line batches)."""
    rng = random.Random(seed)
    vocabulary = ["To", "be", "OR", "not", "'tis", "o'er", "Ophélie", "question", "2nd", "the"]
    punctuation = [" ", " ", ", ", ". ", "! ", " -- ", ": ", '"', "? "]
    text = []
    for _ in range(lines):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 9))]
        text.append("".join(word + rng.choice(punctuation) for word in words).rstrip())
    return "\n".join(text) + "\n"


def word_counts(text: str) -> dict[str, int]:
    """The words of ``text``, lower-cased, split at white space and punctuation, counted."""
    spaces = str.maketrans({c: " " for c in ',.!?:;"-'})
    return Counter(text.lower().translate(spaces).split())


@pytest.mark.parametrize(
    ("file", "args"),
    [
        ("words.txt", [FIRST_WORDCOUNT, "words.txt"]),
        ("wordcount.txt", cli(f"{FIRST_WORDCOUNT}:flow")),
        ("words.txt", cli(f"{FIRST_WORDCOUNT}:wordcount('words.txt')", "-w", "2")),
        ("words.txt", cli(f"{FIRST_WORDCOUNT}:wordcount('words.txt')", "--processes", "2")),
    ],
    ids=["script", "cli-default-file", "cli-2-workers", "cli-2-processes"],
)
def test_first_wordcount_counts_every_word_once(tmp_path, file, args):
    text = generated_text()
    (tmp_path / file).write_text(text)
    expected = word_counts(text)
    assert expected["'tis"] > 0 and expected["ophélie"] > 0 and "To" not in expected
    printed = [ast.literal_eval(line) for line in run_first(args, tmp_path)]
    assert len(printed) == len(expected)  # one line per word
    assert dict(printed) == expected


def generated_events(seed: int = 36, count: int = 1500) -> list[dict]:
    """Sensor readings in quarters (their sums are exact), with a few outliers."""
    rng = random.Random(seed)
    sensors = ["a", "b", "kitchen", "cellar-2"]
    events = []
    for _ in range(count):
        value = rng.randint(40, 60) / 4 if rng.random() > 0.05 else rng.randint(-400, 400) / 4
        events.append({"sensor": rng.choice(sensors), "value": value})
    return events


def running_means(events: list[dict], threshold: float) -> tuple[dict, dict]:
    """Per sensor, in event order: the mean lines, and the alert lines."""
    seen: dict[str, list[float]] = defaultdict(list)
    means: dict[str, list[str]] = defaultdict(list)
    alerts: dict[str, list[str]] = defaultdict(list)
    for event in events:
        sensor, value = event["sensor"], event["value"]
        earlier = seen[sensor]
        deviation = value - sum(earlier) / len(earlier) if earlier else 0.0
        if abs(deviation) > threshold:
            alerts[sensor].append(f"ALERT {sensor}: {value} is {deviation:+.2f} off its mean")
        earlier.append(value)
        means[sensor].append(f"{sensor} mean {sum(earlier) / len(earlier):.2f}")
    return means, alerts


@pytest.mark.parametrize(
    ("file", "threshold", "args"),
    [
        ("readings.jsonl", 12, [FIRST_RUNNING_MEAN, "readings.jsonl", "12"]),
        ("events.jsonl", 10, cli(FIRST_RUNNING_MEAN)),
        ("readings.jsonl", 12, cli(f"{FIRST_RUNNING_MEAN}:running_mean('readings.jsonl', 12)")),
        (
            "readings.jsonl",
            7.5,
            cli(f"{FIRST_RUNNING_MEAN}:running_mean('readings.jsonl', 7.5)", "-n", "2", "-w", "2"),
        ),
    ],
    ids=["script", "cli-default-file", "cli-factory", "cli-2-processes-2-workers"],
)
def test_first_running_mean_prints_each_sensor_s_means_and_alerts_in_order(
    tmp_path, file, threshold, args
):
    events = generated_events()
    (tmp_path / file).write_text("".join(json.dumps(event) + "\n" for event in events))
    means, alerts = running_means(events, threshold)
    assert 0 < sum(map(len, alerts.values())) < len(events) // 10
    printed = run_first(args, tmp_path)
    expected = [line for lines in [*means.values(), *alerts.values()] for line in lines]
    assert Counter(printed) == Counter(expected)
    for sensor in means:  # a sensor's state is on one worker, which prints its lines in order
        assert [line for line in printed if line.startswith(f"{sensor} mean ")] == means[sensor]
        assert [line for line in printed if line.startswith(f"ALERT {sensor}:")] == alerts[sensor]


FIRST_TUMBLING_SUMS = str(ROOT / "examples" / "first_tumbling_sums.py")


def generated_user_events(seed: int = 37, count: int = 1200) -> list[dict[str, Any]]:
    """Events of five users, a few seconds apart and a few out of order; one in 40 very late."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    clock, events = 0.0, []
    for _ in range(count):
        clock += rng.choice([0.5, 1, 2, 3])
        at = clock - (rng.choice([0, 0, 1, 2, 4]) if rng.random() > 1 / 40 else 95)
        events.append(
            {
                "user": rng.choice(["ana", "bob", "cy", "dee", "eve"]),
                "at": (start + timedelta(seconds=max(at, 0))).isoformat(),
                "amount": float(rng.randint(1, 9)),
            }
        )
    return events


def tumbling_sums(events: list[dict[str, Any]]) -> tuple[Counter[str], list[dict[str, Any]]]:
    """The example's output by hand: the sums' lines, and the late events.

    A user's watermark trails their latest time by 10 s (the system time
    that passes while the example runs moves it on by milliseconds only,
    and no event is that close to the limit).
    """
    align = datetime(2024, 1, 1, tzinfo=UTC)
    latest: dict[str, datetime] = {}
    sums: dict[tuple[str, int], float] = defaultdict(float)
    late = []
    for event in events:
        user, at = event["user"], datetime.fromisoformat(event["at"])
        if user in latest and at < latest[user] - timedelta(seconds=10):
            late.append(event)
            continue
        latest[user] = max(latest.get(user, at), at)
        sums[(user, (at - align) // timedelta(minutes=1))] += event["amount"]
    lines = Counter(
        f"{user} {(align + timedelta(minutes=window)):%H:%M} {total:g}"
        for (user, window), total in sums.items()
    )
    return lines, late


@pytest.mark.parametrize(
    "args",
    [
        [FIRST_TUMBLING_SUMS, "events.jsonl"],
        cli(f"{FIRST_TUMBLING_SUMS}:sums('events.jsonl')", "-w", "2"),
        cli(f"{FIRST_TUMBLING_SUMS}:sums('events.jsonl')", "--processes", "2"),
    ],
    ids=["script", "cli-2-workers", "cli-2-processes"],
)
def test_first_tumbling_sums_sums_each_user_s_minutes_and_shows_late_events(tmp_path, args):
    events = generated_user_events()
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    lines = run_first(args, tmp_path)
    want_sums, want_late = tumbling_sums(events)
    assert want_late, "the data has late events"
    assert Counter(line for line in lines if not line.startswith("late ")) == want_sums
    got_late = [ast.literal_eval(line[5:])[1][1] for line in lines if line.startswith("late ")]
    assert sorted(map(repr, got_late)) == sorted(map(repr, want_late))
