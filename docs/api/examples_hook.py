"""An MkDocs hook: the pages' links to ``../examples/*.py`` work on the site too.

The guides in ``docs/`` link the runnable examples as ``../examples/NAME.py``,
which is right when the Markdown is read in the repository.  On the site
those files are outside the documentation, so MkDocs would report every
such link as broken (an error with ``--strict``).  This hook publishes
``examples/*.py`` with the site, at ``examples/NAME.py``, and points the
links of the top-level pages there; MkDocs then checks them like any other
link, so a link to an example that does not exist still fails the build.

mkdocs.yml names this file under ``hooks``; it is not a page
(``exclude_docs``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

EXAMPLE_LINK = re.compile(r"\]\(\.\./examples/")


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add every ``examples/*.py`` of the repository to the site's files."""
    root = Path(config.config_file_path).parent
    for path in sorted((root / "examples").glob("*.py")):
        files.append(
            File(
                f"examples/{path.name}",
                src_dir=str(root),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point a top-level page's ``../examples/`` links at the published copies."""
    if "/" in page.file.src_uri:
        return markdown
    return EXAMPLE_LINK.sub("](examples/", markdown)
