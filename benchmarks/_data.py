"""Benchmark inputs: the deterministic wordcount corpus, generated on demand.

Every wordcount benchmark (timelypy and its peers, here and on Spark) reads the
same corpus: 200,000 lines of 10 words (2,000,000 words) drawn with Zipf(s=1)
frequencies from a 5,000-word vocabulary, seeded with ``random.Random(42)`` and
written as two files of 100,000 lines, ``part-0.txt`` and ``part-1.txt``.

This module reproduces, byte for byte, the reference generator kept at
``shared/bench-data/gen_words.py`` beside the repository (which a fresh clone
may not have), so the md5s below are the ones that script documents:

- ``part-0.txt`` 99f5fcd2298418106aef264f4a8e8cdd
- ``part-1.txt`` f477160506a8bbef6aa138b827e2465b

Why it is faster than the reference (about 1 s instead of 20 s): the reference
calls ``rng.choices(vocab, weights, k=10)``, which rebuilds the 5,000 cumulative
weights on every call. ``random.choices`` documents that weights are turned into
cumulative weights internally, so passing the same ``itertools.accumulate`` of
the same floats once, as ``cum_weights``, draws exactly the same words from the
same stream of ``rng.random()`` calls.

The files are generated once into ``<repo>/.bench-data/wc`` (git-ignored). A
marker file records each file's md5 together with its size and mtime, so later
runs trust an unchanged file without hashing it again.

Run ``python -m benchmarks._data --check`` to regenerate into a temporary
directory and verify the documented md5s.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import os
import random
import string
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "LINES",
    "WORDS_PER_LINE",
    "VOCAB",
    "PARTS",
    "SEED",
    "PART_NAMES",
    "EXPECTED_MD5",
    "DEFAULT_DIR",
    "generate_parts",
    "write_parts",
    "file_md5",
    "words_dir",
    "part_paths",
    "load_lines",
    "load_words",
]

logger = logging.getLogger(__name__)

LINES, WORDS_PER_LINE, VOCAB, PARTS = 200_000, 10, 5_000, 2
SEED = 42
PART_NAMES: tuple[str, ...] = tuple(f"part-{p}.txt" for p in range(PARTS))
EXPECTED_MD5: dict[str, str] = {
    "part-0.txt": "99f5fcd2298418106aef264f4a8e8cdd",
    "part-1.txt": "f477160506a8bbef6aa138b827e2465b",
}

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO_ROOT / ".bench-data" / "wc"
_MARKER = ".md5-verified.json"


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Draw ``size`` distinct lowercase words of 3..10 letters, then shuffle them.

    The shuffled order is the Zipf rank: the first word is the most frequent.
    """
    vocab: set[str] = set()
    while len(vocab) < size:
        vocab.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))))
    ranked = sorted(vocab)
    rng.shuffle(ranked)
    return ranked


def generate_parts(
    lines: int = LINES,
    parts: int = PARTS,
    *,
    vocab_size: int = VOCAB,
    words_per_line: int = WORDS_PER_LINE,
    seed: int = SEED,
) -> list[list[str]]:
    """Generate the corpus in memory: one list of lines (no newlines) per part.

    With the defaults this is exactly the benchmark corpus. Smaller ``lines``
    keep the same vocabulary and random stream, so with ``parts=1`` the result
    is a prefix of the full ``part-0.txt``.

    >>> [part[:1] for part in generate_parts(lines=2, parts=2, vocab_size=20, words_per_line=3)]
    [['ahft fai oss'], ['fai fai fai']]
    """
    rng = random.Random(seed)
    vocab = _vocabulary(rng, vocab_size)
    cum_weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(vocab_size)))
    choices = rng.choices
    per_part = lines // parts
    k = words_per_line
    return [
        [" ".join(choices(vocab, cum_weights=cum_weights, k=k)) for _ in range(per_part)]
        for _ in range(parts)
    ]


def write_parts(out: Path, parts: Sequence[Sequence[str]]) -> list[Path]:
    """Write each part as ``part-<i>.txt`` under ``out``, one line per entry.

    Each file is written to a temporary name first and renamed into place, so a
    reader never sees a half-written part.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, part in enumerate(parts):
        path = out / f"part-{i}.txt"
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.write_text("".join(line + "\n" for line in part), encoding="ascii")
        os.replace(tmp, path)
        paths.append(path)
    return paths


def file_md5(path: Path) -> str:
    """Return the hex md5 of a file's bytes."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _verified(directory: Path) -> bool:
    """Return whether every part exists with its documented md5.

    Hashing is skipped for files whose size and mtime match the marker written
    by the last successful check.
    """
    paths = [directory / name for name in PART_NAMES]
    if not all(p.is_file() for p in paths):
        return False
    marker = directory / _MARKER
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        recorded = {}
    if all(
        recorded.get(p.name) == {"md5": EXPECTED_MD5[p.name], "stat": _stat_key(p)} for p in paths
    ):
        return True
    if any(file_md5(p) != EXPECTED_MD5[p.name] for p in paths):
        return False
    try:
        marker.write_text(
            json.dumps({p.name: {"md5": EXPECTED_MD5[p.name], "stat": _stat_key(p)} for p in paths})
        )
    except OSError:  # a read-only data directory: verified, just not remembered
        logger.debug("could not write %s; the md5s will be checked again next time", marker)
    return True


def words_dir(path: Path | str | None = None) -> Path:
    """Return a directory holding the verified ``part-0.txt`` and ``part-1.txt``.

    ``path`` defaults to ``<repo>/.bench-data/wc``. The parts are generated
    there on first use, or when a file is missing or has the wrong md5.

    Raises ``RuntimeError`` if freshly generated files do not have the
    documented md5s (a change in ``random`` would do that).
    """
    directory = Path(path) if path is not None else DEFAULT_DIR
    if _verified(directory):
        return directory
    logger.info("generating the wordcount corpus into %s", directory)
    write_parts(directory, generate_parts())
    (directory / _MARKER).unlink(missing_ok=True)
    if not _verified(directory):
        got = {name: file_md5(directory / name) for name in PART_NAMES}
        raise RuntimeError(
            f"generated wordcount corpus in {directory} has md5s {got}, expected "
            f"{EXPECTED_MD5}; this Python's `random` no longer reproduces the reference "
            "generator (shared/bench-data/gen_words.py): compare the two and fix _data.py"
        )
    return directory


def part_paths(path: Path | str | None = None) -> list[Path]:
    """Return the paths of the parts, in order (see ``words_dir``)."""
    directory = words_dir(path)
    return [directory / name for name in PART_NAMES]


def load_lines(path: Path | str | None = None) -> list[str]:
    """Return all 200,000 lines of both parts, in order, without newlines."""
    lines: list[str] = []
    for p in part_paths(path):
        lines.extend(p.read_text(encoding="ascii").splitlines())
    return lines


def load_words(path: Path | str | None = None) -> list[str]:
    """Return all 2,000,000 words of both parts, in order."""
    words: list[str] = []
    for p in part_paths(path):
        words.extend(p.read_text(encoding="ascii").split())
    return words


def _check() -> int:
    """Regenerate into a temporary directory and compare with the documented md5s."""
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for p in write_parts(Path(tmp), generate_parts()):
            got = file_md5(p)
            good = got == EXPECTED_MD5[p.name]
            ok &= good
            verdict = "ok" if good else f"MISMATCH, expected {EXPECTED_MD5[p.name]}"
            print(f"{p.name}: {got} {verdict}")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--check`` verifies the generator; otherwise print the data dir."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks._data", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--check", action="store_true", help="regenerate into a temp dir and verify the md5s"
    )
    parser.add_argument("--dir", type=Path, default=None, help=f"data directory ({DEFAULT_DIR})")
    args = parser.parse_args(argv)
    if args.check:
        return _check()
    print(words_dir(args.dir))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
