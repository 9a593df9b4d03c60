"""A griffe extension: timelypy's reST-flavoured docstrings as Markdown for mkdocstrings.

The docstrings are written for readers of the source (and for doctest), in
the reST idiom: ``:class:`~timelypy.order.Product``` roles, ``>>>`` doctest
blocks, paragraphs ending in ``::`` before a literal block, a ``..
warning::`` directive, simple tables framed by ``====`` rules.
mkdocstrings renders docstrings as Markdown, where the roles would show
as literal text, doctests as nested block quotes and a table's rules as
headings.  This extension rewrites each docstring of the two packages
once, when griffe has loaded them, and changes nothing in the code:

* a role becomes a link (an *autoref*) to the object's API entry, its name
  resolved the way Python would from where the docstring is (the ``~``
  form shows only the last component); a name outside timelypy, or one
  that does not resolve, stays plain code;
* a doctest block becomes a fenced ``pycon`` block;
* ``text::`` and its indented block become ``text:`` and a fenced block,
  as does a simple table;
* ``.. warning::`` and ``.. note::`` become admonitions;
* an attribute with no docstring but ``#:`` comment lines above it (or a
  trailing ``#:`` comment), Sphinx's way of documenting attributes, gets
  their text as its docstring.

It also gives each package's docstring an *Exports* list: every name in
its ``__all__``, linked to where that object is documented.  Those links
are required ones, so ``mkdocs build --strict`` fails when a re-exported
name is documented nowhere on the site.

mkdocs.yml names this file in the handler's ``extensions``; it is not a
page (``exclude_docs``).
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any

import griffe

PACKAGES = ("timelypy", "timelypy_spark")

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|mod|data|exc|obj|const):`(?P<body>[^`]+)`"
)
TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")
TABLE_RULE = re.compile(r"^=+( +=+)+$")
DIRECTIVE = re.compile(
    r"^\.\. (?P<kind>warning|note|tip|important|caution|danger)::\s*(?P<rest>.*)$"
)
DOC_COMMENT = re.compile(r"^\s*#:(?: (?P<text>.*))?$")
DOC_COMMENT_AFTER = re.compile(r"\S.*\s#: (?P<text>.*)$")
FENCE = re.compile(r"^\s*(```|~~~)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the block of lines indented more than ``indent`` from ``start``."""
    end = start
    last = start
    while end < len(lines):
        line = lines[end]
        if line.strip():
            if _indent(line) <= indent:
                break
            last = end + 1
        end += 1
    return last


def _fenced(body: list[str], lang: str, indent: int) -> list[str]:
    pad = " " * indent
    text = textwrap.dedent("\n".join(body)).splitlines()
    return [f"{pad}```{lang}", *(f"{pad}{line}" if line else "" for line in text), f"{pad}```"]


def convert_blocks(text: str) -> str:
    """Doctests, literal blocks, simple tables and directives as Markdown."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = _indent(line)
        if FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        if stripped.startswith(">>>") and (not out or not out[-1].strip()):
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            out.extend(_fenced(lines[i:end], "pycon", indent))
            i = end
            continue
        directive = DIRECTIVE.match(stripped)
        if directive:
            end = _block_end(lines, i + 1, indent)
            body = textwrap.dedent("\n".join(lines[i + 1 : end])).strip("\n").splitlines()
            if directive["rest"]:
                body = [directive["rest"], *body]
            pad = " " * indent
            out.append(f"{pad}!!! {directive['kind']}")
            out.append("")
            out.extend(f"{pad}    {b}" if b else "" for b in body)
            i = end
            continue
        if TABLE_RULE.match(stripped) and (not out or not out[-1].strip()):
            # A simple table: rules of ``=`` around the header and at the end.
            end = i + 1
            while end < len(lines) and not (
                TABLE_RULE.match(lines[end].strip())
                and (end + 1 == len(lines) or not lines[end + 1].strip())
            ):
                end += 1
            out.extend(_fenced(lines[i : end + 1], "text", indent))
            i = end + 1
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            # reST: "text::", a blank line, then an indented literal block (or a doctest).
            head = line.rstrip()[:-1]
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            doctest = j < len(lines) and lines[j].strip().startswith(">>>")
            if j < len(lines) and _indent(lines[j]) > indent:
                end = _block_end(lines, j, indent)
                if head.strip() != ":":
                    out.extend([head, ""])
                out.extend(_fenced(lines[j:end], "pycon" if doctest else "text", indent))
                i = end
                continue
            if doctest:  # the doctest branch above fences it
                out.append(head)
                i += 1
                continue
        out.append(line)
        i += 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _attribute(obj: griffe.Object, name: str, *, module: bool) -> str | None:
    """The path ``obj.name`` refers to.

    A package may import a function with the name of one of its modules
    (``timelypy.flow`` imports ``run`` from ``timelypy.flow.run``, ``timelypy``
    ``execute`` from ``timelypy.execute``).  Python then gives the function,
    but a docstring's ``timelypy.execute.initialize_from`` or
    ``:mod:`timelypy.execute``` means the module: ``module`` says which the
    reference wants.
    """
    member = obj.members.get(name)
    if module and member is not None and not member.is_alias and member.is_module:
        return member.path
    if name in obj.imports:
        return obj.imports[name]
    if member is not None:
        return member.target_path if member.is_alias else member.path
    return None


def _resolve(obj: griffe.Object, target: str, *, module: bool = False) -> str | None:
    """The full path ``target`` names from ``obj``'s scope, or None.

    ``module``: the last name of ``target`` should be a module (a ``:mod:`` role).
    """
    head, *rest = target.lstrip(".").split(".")
    path: str | None = head if head in PACKAGES else None
    scope: griffe.Object | None = obj
    while path is None and scope is not None:
        path = _attribute(scope, head, module=module or bool(rest))
        if path is None and scope.name == head:
            path = scope.path
        scope = scope.parent
    if path is None:
        return None
    for index, name in enumerate(rest, 1):
        try:
            here = obj.modules_collection.get_member(path)
            here = here.final_target if here.is_alias else here
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            here = None
        inner = module or index < len(rest)
        found = _attribute(here, name, module=inner) if here is not None else None
        path = found or f"{path}.{name}"
    return path


def _final_path(near: griffe.Object, path: str) -> str:
    """Where the object at ``path`` is defined, following re-exports."""
    try:
        obj = near.modules_collection.get_member(path)
        return obj.final_target.path if obj.is_alias else obj.path
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return path


def convert_roles(obj: griffe.Object, text: str) -> str:
    """``:class:`~x.Y``` and friends as autorefs (or as code, outside timelypy)."""

    def link(match: re.Match[str]) -> str:
        body = match["body"].strip()
        titled = TITLED.match(body)
        if titled:
            title, target = titled["title"], titled["target"]
        else:
            target = body.lstrip("!")
            short = target.startswith("~")
            target = target.lstrip("~")
            title = target.rsplit(".", 1)[-1] if short else target
        if match["role"] in ("func", "meth") and not title.endswith(")"):
            title += "()"
        path = _resolve(obj, target, module=match["role"] == "mod")
        if path is not None:
            path = _final_path(obj, path)
        code = f"<code>{html.escape(title)}</code>"
        if path is None or path.split(".", 1)[0] not in PACKAGES:
            return code
        # Optional: a docstring may name an internal object the site does not show.
        return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'

    out = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        out.append(line if in_fence else ROLE.sub(link, line))
    return "\n".join(out)


def exports(pkg: griffe.Module) -> str:
    """An *Exports* list: the package's ``__all__``, each linked to its documentation.

    The links are required ones: a name documented nowhere fails the strict build.
    """
    items = []
    for name in pkg.exports or ():
        path = _resolve(pkg, name) or f"{pkg.path}.{name}"
        items.append(f"[`{name}`][{_final_path(pkg, path)}]")
    return "**Exports:** " + ", ".join(items) + "." if items else ""


class RestDocstrings(griffe.Extension):
    """Rewrite the docstrings of timelypy and timelypy_spark as Markdown (see the module)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite every docstring of ``pkg`` once it is loaded (griffe's hook)."""
        if pkg.name not in PACKAGES:
            return
        self._lines = loader.lines_collection
        self._parser = loader.docstring_parser, loader.docstring_options
        self._rewrite(pkg, seen=set())

    def _rewrite(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is None and obj.is_attribute:
            self._doc_comment(obj)
        if obj.docstring is not None:
            text = convert_roles(obj, convert_blocks(obj.docstring.value))
            if obj.is_module and obj.is_init_module and obj.exports:
                text = f"{text}\n\n{exports(obj)}"
            obj.docstring.value = text
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member, seen)

    def _doc_comment(self, attr: griffe.Object) -> None:
        """Give ``attr`` the text of its ``#:`` comment lines (Sphinx's attribute docs)."""
        if attr.filepath is None or attr.lineno is None:
            return
        try:
            lines = self._lines[attr.filepath]
        except KeyError:
            return
        line = attr.lineno - 1
        trailing = DOC_COMMENT_AFTER.search(lines[line]) if line < len(lines) else None
        if trailing:
            first, found = line, [trailing["text"]]
        else:
            first = line
            while first > 0 and DOC_COMMENT.match(lines[first - 1]):
                first -= 1
            found = [DOC_COMMENT.match(text)["text"] or "" for text in lines[first:line]]
        if found:
            attr.docstring = griffe.Docstring(
                "\n".join(found),
                lineno=first + 1,
                endlineno=attr.lineno,
                parent=attr,
                parser=self._parser[0],
                parser_options=self._parser[1],
            )
