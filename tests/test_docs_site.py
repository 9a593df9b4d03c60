"""The documentation site: ``mkdocs build --strict`` over docs/ and the API reference.

The build runs once per session (a few seconds), as a subprocess with this
interpreter, into a temporary directory; the tests then read what it wrote.
Skipped where the ``docs`` extra (mkdocs, mkdocstrings) is not installed.
"""

from __future__ import annotations

import ast
import html
import os
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
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
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
    article = page_html[page_html.index("<article") : page_html.index("</article>")]
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
    assert 'href="../examples/flow_wordcount.py"' in page(site, "flow_epochs")


#: The longest a guide may be, in lines: about 25 screens.  The flow layer's and the
#: runtime's guides were one page of 1,400 lines each; they are four pages each now.
LONGEST_GUIDE = 1000


def test_every_guide_is_short_enough_to_read():
    lengths = {path.name: path.read_text().count("\n") for path in (ROOT / "docs").glob("*.md")}
    assert {"flow.md", "flow_epochs.md", "runtime.md", "runtime_operators.md"} <= set(lengths)
    too_long = {name: n for name, n in lengths.items() if n > LONGEST_GUIDE}
    assert not too_long, f"split these guides by topic (at most {LONGEST_GUIDE} lines): {too_long}"


def test_the_build_fails_on_a_link_to_a_missing_heading(tmp_path):
    # The project's validation settings, on a two-page site with one link to a heading
    # that is not there: --strict must refuse it, as it refuses a missing page.
    config = (ROOT / "mkdocs.yml").read_text()
    validation = re.search(r"(?m)^validation:\n(?:  .*\n)+", config)
    assert validation, "mkdocs.yml has no validation: block"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[there](other.md#no-such-heading)\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: planted\n" + validation.group(0))
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode != 0
    assert "'#no-such-heading'" in result.stderr, result.stderr


def test_the_readmes_links_into_the_docs_reach_a_page_and_heading(site):
    # mkdocs checks the links between pages; README.md is outside docs/, so this does.
    links = re.findall(r"\]\(docs/([\w/]+)\.md(?:#([\w-]+))?\)", (ROOT / "README.md").read_text())
    assert ("runtime_capabilities", "why-is-time-t-not-complete") in links
    for name, heading in links:
        text = page(site, name)
        if heading:
            assert f'id="{heading}"' in text, (
                f"README links to docs/{name}.md#{heading}: no such heading"
            )


#: Where the project names a guide as ``docs/NAME.md`` in prose (docstrings, comments,
#: the README): every name must still be a page after guides are split or renamed.
NAMING_GUIDES = [
    "README.md",
    "CHANGELOG.md",
    "timelypy",
    "timelypy_spark",
    "examples",
    "benchmarks",
]


def test_every_guide_the_code_and_readme_name_exists():
    named, missing = 0, []
    for top in NAMING_GUIDES:
        where = ROOT / top
        paths = [where] if where.is_file() else [*where.rglob("*.py"), *where.rglob("*.md")]
        for path in sorted(paths):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                for name in re.findall(r"\bdocs/([\w/]+\.md)", line):
                    named += 1
                    if not (ROOT / "docs" / name).is_file():
                        missing.append(f"{path.relative_to(ROOT)}:{number}: docs/{name}")
    assert named > 20
    assert not missing, "these name guides that are not in docs/:\n" + "\n".join(missing)


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
    # a doctest is a highlighted pycon block: the prompt, then the code
    assert re.search(
        r'language-pycon highlight"><pre><span></span><code><span class="gp">&gt;&gt;&gt; </span>'
        r'<span class="kn">import</span><span class="w"> </span><span class="nn">timelypy',
        operators,
    )


def test_cross_references_in_docstrings_are_links(site):
    codec = main_text(page(site, "api/communication"))
    assert re.search(r'href="\.\./order/#timelypy\.order\.Product"><code>Product</code>', codec)


def test_api_pages_hold_no_python_blocks():
    # tests/test_repository.py runs the python blocks of docs/*.md, not of docs/api/.
    for path in sorted((ROOT / "docs" / "api").glob("*.md")):
        assert "```python" not in path.read_text(), f"{path}: use ```text (it would not run)"


# -- the built pages in a headless browser ------------------------------------------------------
#
# Each page is loaded by Chromium's headless shell (Debian's chromium-headless-shell; .ci/run
# installs it) through an HTTP proxy run by the test: the proxy serves the built site under a
# made-up host and records every other request the page makes, which it refuses.  A script the
# proxy adds to each page reports, once the page has settled, what a reader sees: how many code
# blocks there are and how many Pygments spans colour them, the code blocks wider than their
# column, and the Mermaid pictures drawn (the theme draws each in a shadow root; the script
# counts the shadow roots that hold an <svg>).

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
HOST = "timelypy-docs.test"
#: Virtual milliseconds a page gets to load and draw before it is read (timers run ahead).
SETTLE_MS = 4000

_BEFORE = """<script>(function () {
  var attach = Element.prototype.attachShadow;
  window.__roots = [];
  Element.prototype.attachShadow = function (init) {
    var root = attach.call(this, init);
    window.__roots.push(root);
    return root;
  };
})();</script>"""

_AFTER = """<script>setTimeout(function () {
  var code = document.querySelectorAll("article pre > code");
  var wide = [];
  code.forEach(function (block) {
    if (block.scrollWidth > block.clientWidth + 1) {
      wide.push(block.textContent.split("\\n").reduce(function (a, b) {
        return b.length > a.length ? b : a;
      }, ""));
    }
  });
  document.body.setAttribute("data-check", JSON.stringify({
    code: code.length,
    python: document.querySelectorAll(
      "article .language-python code, article .language-pycon code").length,
    spans: document.querySelectorAll("article pre > code span[class]").length,
    wide: wide,
    pictures: document.querySelectorAll("article .mermaid").length,
    drawn: window.__roots.filter(function (root) { return root.querySelector("svg"); }).length,
    undrawn: document.querySelectorAll("article pre.mermaid").length
  }));
}, SETTLE_MS);</script>""".replace("SETTLE_MS", str(SETTLE_MS))


def _browser() -> str | None:
    import shutil

    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


class _SiteProxy:
    """An HTTP proxy that serves ``site`` as ``http://HOST/`` and refuses (and records) the rest."""

    def __init__(self, site: Path) -> None:
        import http.server
        import socketserver
        import threading

        self.site = site
        self.foreign: list[str] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_CONNECT(self) -> None:  # https://...: never ours
                proxy.foreign.append(self.path)
                self.send_error(403)

            def do_GET(self) -> None:
                match = re.match(r"http://([^/]+)(/[^?#]*)", self.path)
                if match is None or match.group(1) != HOST:
                    proxy.foreign.append(self.path)
                    self.send_error(403)
                    return
                body, kind = proxy.read(match.group(2))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def read(self, url_path: str) -> tuple[bytes | None, str]:
        path = (self.site / url_path.lstrip("/")).resolve()
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file() or self.site.resolve() not in path.parents:
            return None, ""
        body = path.read_bytes()
        if path.suffix == ".html":
            body = body.replace(b"<head>", b"<head>" + _BEFORE.encode(), 1)
            body = body.replace(b"</body>", _AFTER.encode() + b"</body>", 1)
        kinds = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
        return body, kinds.get(path.suffix, "application/octet-stream")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _seen(browser: str, port: int, name: str) -> dict:
    """What the page ``name`` (a path of the site) shows once it has settled."""
    import json

    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--proxy-server=http://127.0.0.1:{port}",
            "--proxy-bypass-list=<-loopback>",
            "--window-size=1280,900",
            f"--virtual-time-budget={SETTLE_MS * 2}",
            "--dump-dom",
            f"http://{HOST}/{name}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    match = re.search(r'data-check="([^"]*)"', result.stdout)
    assert match, f"{name}: the page never settled\n{result.stderr[-2000:]}"
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.slow
def test_every_page_reads_well_in_a_browser_with_nothing_fetched_from_elsewhere(site):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless Chromium (apt-get install chromium-headless-shell; .ci/run does)")
    pages = ["", *(f"{guide}/" for guide in GUIDES)]
    pages += sorted(f"api/{path.parent.name}/" for path in (site / "api").glob("*/index.html"))
    proxy = _SiteProxy(site)
    try:
        seen = {name: _seen(browser, proxy.port, name) for name in pages}
    finally:
        proxy.close()
    assert proxy.foreign == [], "pages fetched from elsewhere: " + ", ".join(proxy.foreign)
    for name, shown in seen.items():
        where = name or "the home page"
        if shown["python"]:
            assert shown["spans"] > 0, f"{where}: its Python code is not highlighted"
        assert shown["wide"] == [], f"{where}: code wider than the column: {shown['wide']}"
        assert shown["undrawn"] == 0, f"{where}: a Mermaid block shown as text"
        assert shown["drawn"] == shown["pictures"], f"{where}: {shown}"
    assert sum(shown["python"] > 0 for shown in seen.values()) >= len(GUIDES) // 2
    visualize = seen["visualize/"]
    assert visualize["pictures"] >= 3 and visualize["drawn"] == visualize["pictures"], visualize
