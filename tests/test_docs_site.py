"""The documentation site: ``mkdocs build --strict`` over docs/ and the API reference.

The build runs once per session (a few seconds), as a subprocess with this
interpreter, into a temporary directory; the tests then read what it wrote.
Skipped where the ``docs`` extra (mkdocs, mkdocstrings) is not installed.
"""

from __future__ import annotations

import ast
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
pytest.importorskip(
    "mkdocstrings_handlers.python",
    reason="mkdocstrings' python handler is not installed (pip install -e '.[docs]')",
)

ROOT = Path(__file__).resolve().parents[1]
GUIDES = sorted(path.stem for path in (ROOT / "docs").glob("*.md") if path.stem != "index")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (
        "mkdocs build --strict failed; each WARNING below is an error:\n"
        + result.stdout
        + result.stderr
    )
    assert "WARNING" not in result.stderr, result.stderr
    return out


def page(site: Path, name: str) -> str:
    path = site / name / "index.html"
    assert path.exists(), f"the site has no page {name}/ (is it in mkdocs.yml's nav?)"
    return path.read_text()


def main_text(page_html: str) -> str:
    """The page's article, without its code blocks."""
    article = page_html[page_html.index('role="main"') : page_html.index("<footer")]
    return re.sub(r"<pre.*?</pre>", "", article, flags=re.S)


def test_home_page_and_every_guide_are_built(site):
    assert "Timely Dataflow" in (site / "index.html").read_text()
    assert "runtime" in GUIDES
    for guide in GUIDES:
        page(site, guide)


def test_guides_links_to_examples_reach_published_copies(site):
    assert (site / "examples" / "flow_wordcount.py").read_text() == (
        ROOT / "examples" / "flow_wordcount.py"
    ).read_text()
    assert 'href="../examples/flow_wordcount.py"' in page(site, "flow")


def test_flow_api_page_documents_dataflow_and_its_steps(site):
    flow = page(site, "api/flow")
    assert 'id="timelypy.flow.dataflow.Dataflow"' in flow
    assert 'id="timelypy.flow.dataflow.Dataflow.reduce_epoch"' in flow
    assert 'id="timelypy.flow.inputs.AdvanceTo"' in flow


def package_exports(relative: str) -> list[str]:
    tree = ast.parse((ROOT / relative).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return [element.value for element in node.value.elts]
    raise AssertionError(f"{relative} has no __all__")


@pytest.mark.parametrize(
    ("init", "api_page"),
    [
        ("timelypy/__init__.py", "api/timelypy"),
        ("timelypy/flow/__init__.py", "api/flow"),
        ("timelypy/dataflow/__init__.py", "api/dataflow"),
        ("timelypy_spark/__init__.py", "api/spark"),
    ],
)
def test_package_page_links_every_export_to_its_documentation(site, init, api_page):
    text = page(site, api_page)
    exports = text[text.index("<strong>Exports:</strong>") :]
    exports = exports[: exports.index("</p>")]
    linked = re.findall(r'<a [^>]*href="[^"]+"[^>]*><code>([^<]+)</code></a>', exports)
    assert linked == package_exports(init)


def test_docstring_markup_is_rendered_not_shown(site):
    for path in sorted((site / "api").glob("*/index.html")):
        text = html.unescape(main_text(path.read_text()))
        assert not re.search(r":(class|func|meth|mod|attr|data):`", text), path
        assert ">>>" not in text, f"{path}: a doctest outside a code block"
    operators = page(site, "api/operators")
    assert '<code class="language-pycon">&gt;&gt;&gt; import timelypy' in operators


def test_cross_references_in_docstrings_are_links(site):
    codec = main_text(page(site, "api/communication"))
    assert re.search(r'href="\.\./order/#timelypy\.order\.Product"><code>Product</code>', codec)


def test_api_pages_hold_no_python_blocks():
    # tests/test_repository.py runs the python blocks of docs/*.md, not of docs/api/.
    for path in sorted((ROOT / "docs" / "api").glob("*.md")):
        assert "```python" not in path.read_text(), f"{path}: use ```text (it would not run)"
