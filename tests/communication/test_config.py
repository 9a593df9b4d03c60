"""Config: validation, Timely's command-line arguments, host files.

Ported behaviour: Timely's ``CommunicationConfig``/``Config`` and the
``-w``/``--threads``, ``-n``/``--processes``, ``-p``/``--process``,
``-h``/``--hostfile`` and ``--progress-mode`` options (``-h`` is the host
file, so help is ``--help``).  Everything here only parses: no process or
socket is started.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from timelypy import Config, ConfigError, TimelyError
from timelypy.communication.config import (
    DEFAULT_BASE_PORT,
    MAX_PARK_SPIN,
    PARK_SPIN,
    PARK_SPIN_ENV,
    USAGE,
    Arguments,
    parse_address,
    parse_arguments,
    parse_hostfile,
)

# -- the dataclass -----------------------------------------------------------------------


def test_defaults_and_constructors():
    assert Config() == Config.thread()
    default = Config.thread()
    assert (default.workers, default.processes, default.process_index) == (1, 1, 0)
    assert (default.serializer, default.progress_mode, default.addresses) == (
        "msgpack",
        "eager",
        None,
    )
    assert default.peers == 1
    assert Config.process(4).peers == 4 and Config.process(4).processes == 1
    cluster = Config.cluster(2, 3, 1, progress_mode="demand")
    assert (cluster.peers, cluster.process_index, cluster.progress_mode) == (6, 1, "demand")
    assert cluster.resolved_addresses() == tuple(
        f"localhost:{DEFAULT_BASE_PORT + i}" for i in range(3)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.workers = 2  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -1, True, "2", 1.5, None])
@pytest.mark.parametrize("field", ["workers", "processes"])
def test_workers_and_processes_must_be_positive_ints(field, bad):
    with pytest.raises(ConfigError, match=f"{field} must be a positive int"):
        Config(**{field: bad})


@pytest.mark.parametrize(("processes", "index"), [(1, 1), (3, 3), (3, -1), (2, "0"), (2, None)])
def test_process_index_must_be_in_range(processes, index):
    with pytest.raises(ConfigError, match="out of range"):
        Config(processes=processes, process_index=index)


def test_unknown_serializer_or_progress_mode():
    with pytest.raises(ConfigError, match=r"unknown serializer 'json'.*msgpack, pickle"):
        Config(serializer="json")
    with pytest.raises(ConfigError, match="unknown progress mode 'lazy'"):
        Config(progress_mode="lazy")
    assert Config(serializer="pickle", progress_mode="demand").serializer == "pickle"


@pytest.mark.parametrize("bad", [-0.001, float("nan"), float("inf"), 0.5, True, "0.001", None])
def test_park_spin_must_be_a_short_number_of_seconds(bad):
    with pytest.raises(ConfigError, match=r"park_spin must be a number of seconds in 0\.\.0\.1"):
        Config(park_spin=bad)


@pytest.mark.parametrize(("text", "spin"), [("0", 0.0), (" 0.001 ", 0.001), ("", PARK_SPIN)])
def test_park_spin_default_comes_from_the_environment(monkeypatch, text, spin):
    monkeypatch.setenv(PARK_SPIN_ENV, text)
    assert Config().park_spin == spin
    assert Config.cluster(1, 2, 1).park_spin == spin
    assert Config(park_spin=0.002).park_spin == 0.002  # an explicit value wins


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", r"TIMELYPY_PARK_SPIN='fast' is not a number of seconds"),
        ("1", r"park_spin must be .* \(Config.park_spin or TIMELYPY_PARK_SPIN\), got 1.0"),
    ],
)
def test_a_bad_park_spin_in_the_environment_is_a_config_error(monkeypatch, text, message):
    monkeypatch.setenv(PARK_SPIN_ENV, text)
    with pytest.raises(ConfigError, match=message):
        Config()


def test_park_spin_defaults_to_a_fraction_of_a_millisecond_and_zero_turns_it_off(monkeypatch):
    monkeypatch.delenv(PARK_SPIN_ENV, raising=False)
    assert Config().park_spin == PARK_SPIN
    assert 0 < PARK_SPIN < 0.001
    assert Config(park_spin=0).park_spin == 0
    assert Config(park_spin=MAX_PARK_SPIN).park_spin == MAX_PARK_SPIN
    assert "park_spin" not in repr(Config())  # a tuning knob, not the cluster's shape


def test_addresses_are_validated_and_trimmed_to_the_processes():
    config = Config(processes=2, addresses=("a:1", "[::1]:2", "c:3"))
    assert config.addresses == ("a:1", "[::1]:2")
    assert config.resolved_addresses() == ("a:1", "[::1]:2")
    with pytest.raises(ConfigError, match="3 processes need 3 addresses, but only 2"):
        Config(processes=3, addresses=("a:1", "b:2"))
    for bad in ("nohost", "host:port", "host:0", "host:65536", ":80", "host:"):
        with pytest.raises(ConfigError, match="address"):
            Config(addresses=(bad,))


def test_config_error_is_a_value_error_and_a_timely_error():
    with pytest.raises(ValueError):
        Config(workers=0)
    with pytest.raises(TimelyError):
        Config(workers=0)


# -- addresses -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:2101", ("localhost", 2101)),
        ("  10.0.0.7:65535 ", ("10.0.0.7", 65535)),
        ("[::1]:9000", ("::1", 9000)),
        ("host.example.org:1", ("host.example.org", 1)),
    ],
)
def test_parse_address(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("localhost", "host:port"),
        (":2101", "host:port"),
        ("host:http", "is not a number"),
        ("host:0", "out of range"),
        ("host:99999", "out of range"),
    ],
)
def test_parse_address_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_address(text)


# -- from_args -------------------------------------------------------------------------------


def parse(*args: str, strict: bool = True) -> tuple[Config, list[str]]:
    """``Config.from_args`` with a program name in front."""
    return Config.from_args(["prog", *args], strict=strict)


def test_no_arguments_give_the_default():
    assert parse() == (Config(), [])


@pytest.mark.parametrize(
    "args",
    [
        ["-w", "4"],
        ["-w4"],
        ["--workers", "4"],
        ["--workers=4"],
        ["--threads", "4"],
        ["--threads=4"],
    ],
)
def test_worker_threads(args):
    config, rest = parse(*args)
    assert config.workers == 4 and rest == []


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "3", "-p", "2"],
        ["-n3", "-p2"],
        ["--processes", "3", "--process", "2"],
        ["--processes=3", "--process=2"],
        ["-p", "2", "-n", "3"],  # order does not matter
    ],
)
def test_processes_and_process_index(args):
    config, _ = parse(*args)
    assert (config.processes, config.process_index) == (3, 2)
    assert config.peers == 3


@pytest.mark.parametrize(
    "args",
    [
        ["--serializer", "pickle", "--progress-mode", "demand"],
        ["--serializer=pickle", "--progress-mode=demand"],
    ],
)
def test_serializer_and_progress_mode(args):
    config, _ = parse(*args)
    assert (config.serializer, config.progress_mode) == ("pickle", "demand")


def test_free_arguments_are_returned_in_order():
    config, rest = parse("input.txt", "-w", "2", "-5", "-", "-1.5", "output.txt")
    assert config.workers == 2
    assert rest == ["input.txt", "-5", "-", "-1.5", "output.txt"]  # numbers and "-" are free


def test_everything_after_double_dash_is_free():
    config, rest = parse("-w", "2", "--", "-w", "3", "--bogus", "--")
    assert config.workers == 2
    assert rest == ["-w", "3", "--bogus", "--"]


@pytest.mark.parametrize("args", [["--bogus"], ["-x"], ["-v", "1"], ["--verbose=1"]])
def test_unknown_options_are_errors_with_usage(args):
    with pytest.raises(ConfigError) as info:
        parse(*args)
    assert f"unknown option {args[0]!r}" in str(info.value)
    assert USAGE in str(info.value)


def test_unknown_options_are_left_alone_when_not_strict():
    config, rest = parse("--bogus", "-w", "2", "-x", strict=False)
    assert config.workers == 2
    assert rest == ["--bogus", "-x"]


def test_help_raises_the_usage():
    with pytest.raises(ConfigError) as info:
        parse("-w", "2", "--help")
    assert str(info.value) == USAGE
    assert "-h, --hostfile" in USAGE and "--help" in USAGE


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w"], "option -w needs a value"),
        (["--hostfile"], "option --hostfile needs a value"),
        (["-w", "two"], "-w needs an integer, got 'two'"),
        (["-w=3"], "-w needs an integer, got '=3'"),
        (["--processes=x"], "-n needs an integer"),
        (["-p", "1.0"], "-p needs an integer"),
        (["-w", "0"], "workers must be a positive int"),
        (["-w", "-3"], "workers must be a positive int"),
        (["-n", "2", "-p", "2"], "out of range"),
        (["--serializer", "json"], "unknown serializer"),
        (["--progress-mode=lazy"], "unknown progress mode"),
    ],
)
def test_bad_values_are_config_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        parse(*args)


# -- parse_arguments: the one parser (programs and the launcher) ----------------------------


def test_parse_arguments_keeps_what_was_given_and_nothing_else():
    given = parse_arguments(["-w2", "in.txt", "--serializer=pickle", "-h", "hosts"])
    assert given == Arguments(workers=2, serializer="pickle", hostfile="hosts", free=("in.txt",))
    assert given.processes is None and given.process_index is None and not given.help
    assert parse_arguments([]) == Arguments()


def test_stop_at_free_passes_everything_after_the_first_free_argument_verbatim():
    given = parse_arguments(
        ["-n", "3", "script.py", "-w", "2", "--", "--bogus", "-p", "1"], stop_at_free=True
    )
    assert (given.processes, given.workers) == (3, None)
    assert given.free == ("script.py", "-w", "2", "--", "--bogus", "-p", "1")
    assert parse_arguments(["-n2", "--", "-script.py", "x"], stop_at_free=True).free == (
        "-script.py",
        "x",
    )


def test_help_stops_parsing_where_it_stands():
    assert parse_arguments(["-w", "2", "--help", "--bogus"]).help
    with pytest.raises(ConfigError, match="needs an integer, got '--help'"):
        parse_arguments(["-w", "--help"])


def test_errors_end_with_the_callers_usage():
    with pytest.raises(ConfigError) as info:
        parse_arguments(["--bogus"], usage="usage: mine")
    assert str(info.value) == "unknown option '--bogus'\nusage: mine"
    with pytest.raises(ConfigError, match="option -n needs a value\nusage: mine"):
        parse_arguments(["-n"], usage="usage: mine")


def test_arguments_make_the_config_they_describe(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("a:1\nb:2\nc:3\n")
    config = Arguments(processes=2, process_index=1, hostfile=str(hosts)).config()
    assert config == Config.cluster(1, 2, 1, ["a:1", "b:2"])
    assert Arguments().config() == Config()


# -- host files ----------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    """Write a host file; return its path."""
    path = tmp_path / "hosts.txt"
    path.write_text(text)
    return str(path)


HOSTS = """\
# the cluster
alpha:2101

beta:2102   # second
   gamma:2103
[::1]:2104
"""


@pytest.mark.parametrize(
    "form",
    [
        lambda f: ["-n", "3", "-h", f],
        lambda f: ["-n", "3", f"-h{f}"],
        lambda f: ["-n", "3", "--hostfile", f],
        lambda f: [f"--hostfile={f}", "--processes=3"],
    ],
)
def test_host_file_from_args(tmp_path, form):
    path = write(tmp_path, HOSTS)
    config, rest = parse(*form(path))
    assert config.addresses == ("alpha:2101", "beta:2102", "gamma:2103")
    assert rest == []


def test_host_file_keeps_the_first_processes_lines(tmp_path):
    path = write(tmp_path, HOSTS)
    assert parse_hostfile(path, 4) == ("alpha:2101", "beta:2102", "gamma:2103", "[::1]:2104")
    assert parse_hostfile(Path(path), 1) == ("alpha:2101",)
    config, _ = parse("-h", path)  # one process by default
    assert config.addresses == ("alpha:2101",)


def test_malformed_host_file_line_names_the_line(tmp_path):
    path = write(tmp_path, "# hosts\nalpha:2101\n\nbeta-without-port\n")
    with pytest.raises(ConfigError, match=r"line 4: address 'beta-without-port'"):
        parse_hostfile(path, 2)
    path = write(tmp_path, "alpha:2101\nbeta:port\n")
    with pytest.raises(ConfigError, match=r"hosts.txt', line 2: .*not a number"):
        parse("-n", "2", "-h", path)


def test_host_file_with_fewer_lines_than_processes(tmp_path):
    path = write(tmp_path, "# two hosts\nalpha:1\n\nbeta:2\n")
    with pytest.raises(ConfigError, match=r"lists 2 address\(es\), but -n asks for 3"):
        parse("-n", "3", "-h", path)
    with pytest.raises(ConfigError, match="lists 0 address"):
        parse_hostfile(write(tmp_path, "# nothing\n\n"), 1)


def test_missing_host_file(tmp_path):
    missing = str(tmp_path / "absent.txt")
    with pytest.raises(ConfigError, match=r"cannot read host file .*absent\.txt"):
        parse("-n", "2", "-h", missing)
    with pytest.raises(ConfigError, match="cannot read host file"):
        parse_hostfile(tmp_path, 1)  # a directory


def test_host_file_with_a_repeated_address_names_both_lines(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2101\n# the second process\n127.0.0.1:2101\nlocalhost:2103\n")
    with pytest.raises(ConfigError, match=r"line 3: '127.0.0.1:2101' repeats the address of l"):
        parse_hostfile(hosts, 2)
    # only the addresses of the processes asked for must differ
    hosts.write_text("localhost:2101\nlocalhost:2102\nlocalhost:2101\n")
    assert parse_hostfile(hosts, 2) == ("localhost:2101", "localhost:2102")


def test_host_file_that_is_not_utf8_is_a_config_error_naming_the_line(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"localhost:2101\nlocalhost:21\xff02\n")
    with pytest.raises(ConfigError, match=r"line 2: not UTF-8 text \(byte 0xff"):
        parse_hostfile(hosts, 2)


def test_config_refuses_two_processes_at_one_address():
    with pytest.raises(ConfigError, match="processes 0 and 1 have the same address"):
        Config.cluster(1, 2, 0, ["localhost:2101", "127.0.0.1:2101"])


def test_a_short_secret_is_refused_with_the_minimum():
    from timelypy.communication.secret import MIN_SECRET_LENGTH, SECRET_ENV, load_secret

    with pytest.raises(ConfigError, match=f"at least {MIN_SECRET_LENGTH} random characters"):
        load_secret({SECRET_ENV: "abc"})
    varied = "q8Zr4LkV2mXw9NcT7bYs5HdJ3fGp6AeU"[:MIN_SECRET_LENGTH]
    assert load_secret({SECRET_ENV: varied}) == varied.encode()


@pytest.mark.parametrize(
    ("secret", "match"),
    [
        ("x" * 32, "is 'x' repeated"),
        ("0123456789abcdef" * 2, "is a string of 16 characters repeated"),
        ("abab" * 10 + "ba", "has only 2 different characters"),
    ],
)
def test_a_long_secret_that_is_not_random_is_refused(secret, match):
    # issue 39: a 32-character secret of one repeated letter was accepted
    from timelypy.communication.secret import SECRET_ENV, load_secret

    with pytest.raises(ConfigError, match=match):
        load_secret({SECRET_ENV: secret})
