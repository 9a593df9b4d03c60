"""User pages speak the user's words: epochs, steps, state keys, the Timely model.

"Seed NNN" is the project's name for its specification documents; a user has
never read them, so the guides, the examples and the docstrings the API
reference shows never cite them ("seed 004's wordcount", "the seeds' epoch
layer").  The benchmarks' own notes (benchmarks/NOTES.md) may.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: "seed 004", "Seed 003's", "the seeds'", "the seed documents", "seed-era", "the seed
#: patterns", "as in the seed," (not a random seed: "seed=7", "the seed of the generator").
CITATION = re.compile(
    r"\bseeds?(?:'s?)?\s+\d{3}|\bseeds'|\bseed(?: documents?|-era|'s| patterns?| examples?)"
    r"|\bthe seeds?\b(?! (?:of|for|value)\b)",
    re.I,
)


def citations(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if CITATION.search(line)
    ]


def test_the_pattern_finds_citations_and_leaves_random_seeds_alone():
    assert CITATION.search("Seed 004's wordcount")
    assert CITATION.search("the seeds' epoch layer")
    assert CITATION.search("as the seed documents say")
    assert CITATION.search("Pattern 3 of the seed patterns: count records")
    assert CITATION.search("As in the seed, the loop lives in the dataflow's own scope")
    assert CITATION.search("Fixes to the seed's version")
    assert not CITATION.search("rng = random.Random(seed)")
    assert not CITATION.search("def generate(seed: int = 7)")
    assert not CITATION.search("seed = hashlib.sha256(tag + secret).digest()")
    assert not CITATION.search("the seed of the random generator")


PAGES = sorted(
    str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
)


def test_every_guide_is_checked():
    assert {"README.md", "docs/spark.md", "docs/recovery.md", "docs/api/index.md"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_guides_do_not_cite_the_spec(page):
    assert citations(ROOT / page) == []


def docstrings(path: Path) -> list[str]:
    """The module's, its classes' and its functions' docstrings that cite the spec."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node) or ""
            found += [
                f"{path.relative_to(ROOT)} ({getattr(node, 'name', 'module')}): {line.strip()}"
                for line in text.splitlines()
                if CITATION.search(line)
            ]
    return found


def test_examples_do_not_cite_the_spec():
    examples = sorted((ROOT / "examples").rglob("*.py"))
    assert ROOT / "examples" / "patterns" / "barrier_join.py" in examples
    assert [line for path in examples for line in citations(path)] == []


@pytest.mark.parametrize("package", ["timelypy", "timelypy_spark"])
def test_docstrings_do_not_cite_the_spec(package):
    found = [line for path in sorted((ROOT / package).rglob("*.py")) for line in docstrings(path)]
    assert found == []
