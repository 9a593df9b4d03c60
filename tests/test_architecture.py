"""The layers of docs/architecture.md, checked by reading every module's imports.

Each module of ``timelypy`` and ``timelypy_spark`` belongs to one layer and
may import only from its own layer and the layers below it (type-only
imports under ``if TYPE_CHECKING:`` included: a layer must make sense
without the ones above it).  The graph of runtime imports (those outside
``TYPE_CHECKING``, wherever in the module they are, function bodies
included) has no cycle.  Only ``timelypy_spark`` imports pyspark, and the
progress core imports nothing outside the standard library.
"""

from __future__ import annotations

import ast
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("timelypy", "timelypy_spark")

#: Layer of each module, by longest matching prefix; a module may import its
#: own layer and the layers listed for it.
BASE = (
    "timelypy.errors",
    "timelypy.order",
    "timelypy.events",
    "timelypy.hashing",
    "timelypy.result",
)
LAYERS: dict[str, tuple[str, ...]] = {
    "base": (),
    "progress": ("base",),
    "communication": ("base",),
    "dataflow": ("base", "progress", "communication"),
    "worker": ("base", "progress", "communication", "dataflow"),
    "execute": ("base", "progress", "communication", "dataflow", "worker"),
    "recovery": ("base",),
    # beside the package: the optional extras' modules (a flow serves its metrics)
    "metrics": ("base", "progress", "communication", "dataflow", "worker", "execute"),
    "flow": (
        "base",
        "progress",
        "communication",
        "dataflow",
        "worker",
        "execute",
        "recovery",
        "metrics",
    ),
    "top": (
        "base",
        "progress",
        "communication",
        "dataflow",
        "worker",
        "execute",
        "recovery",
        "metrics",
        "flow",
    ),
    "spark": (
        "base",
        "progress",
        "communication",
        "dataflow",
        "worker",
        "execute",
        "recovery",
        "metrics",
        "flow",
        "top",
    ),
    "testing": (
        "base",
        "progress",
        "communication",
        "dataflow",
        "worker",
        "execute",
        "recovery",
        "flow",
    ),
}
#: Third-party packages each layer may import (the standard library is always allowed).
THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "base": (),
    "progress": (),
    "communication": ("zmq", "msgpack", "cloudpickle"),
    "dataflow": (),
    "worker": (),
    "execute": (),
    "recovery": (),
    # the connectors' clients, each in an optional extra and imported where it is used
    "flow": ("cloudpickle", "msgpack", "psycopg", "redis", "pyarrow"),
    "top": (),
    "spark": ("pyspark", "pyarrow", "zmq", "cloudpickle", "py4j"),  # Arrow: DESIGN §1
    "metrics": ("prometheus_client",),
    "testing": ("hypothesis",),
}


def layer_of(module: str) -> str:
    if module in BASE:
        return "base"
    for prefix, layer in (
        ("timelypy_spark", "spark"),
        ("timelypy.progress", "progress"),
        ("timelypy.communication", "communication"),
        ("timelypy.dataflow", "dataflow"),
        ("timelypy.worker", "worker"),
        ("timelypy.live", "worker"),
        ("timelypy.execute", "execute"),
        ("timelypy.recovery", "recovery"),
        ("timelypy.flow", "flow"),
        ("timelypy.metrics", "metrics"),
        ("timelypy.testing", "testing"),
    ):
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return "top"  # the package itself, the launcher


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    type_only: bool


def module_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


FILES = module_files()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[Import]:
    path = FILES[module]
    tree = ast.parse(path.read_text(), str(path))
    found: list[Import] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, alias.name, node.lineno, type_only))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, is_package)
            for alias in node.names:
                # ``from pkg import mod`` depends on the module pkg.mod when it is one.
                candidate = f"{target}.{alias.name}"
                name = candidate if candidate in FILES else target
                found.append(Import(module, name, node.lineno, type_only))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return found


ALL_IMPORTS = [imp for module in FILES for imp in imports_of(module)]


def own(target: str) -> bool:
    return target.split(".")[0] in PACKAGES


def test_every_module_has_a_layer_and_the_layers_are_known():
    assert {layer_of(m) for m in FILES} <= set(LAYERS)
    assert layer_of("timelypy.progress.reachability") == "progress"
    assert layer_of("timelypy.communication.cluster") == "communication"
    assert layer_of("timelypy.events") == "base"


def test_imports_only_point_down_the_layers():
    violations = []
    for imp in ALL_IMPORTS:
        if not own(imp.target):
            continue
        source, target = layer_of(imp.source), layer_of(imp.target)
        if target != source and target not in LAYERS[source]:
            kind = "type-only import" if imp.type_only else "import"
            violations.append(
                f"{FILES[imp.source].relative_to(ROOT)}:{imp.line}: {source} layer "
                f"({imp.source}) has an {kind} of {imp.target} ({target} layer)"
            )
    assert not violations, "\n".join(violations)


def test_third_party_imports_stay_in_their_layers():
    stdlib = set(sys.stdlib_module_names)
    violations = []
    for imp in ALL_IMPORTS:
        top = imp.target.split(".")[0]
        if own(imp.target) or top in stdlib or top == "__future__":
            continue
        layer = layer_of(imp.source)
        if top not in THIRD_PARTY[layer]:
            violations.append(
                f"{FILES[imp.source].relative_to(ROOT)}:{imp.line}: {layer} layer "
                f"({imp.source}) imports {top}"
            )
    assert not violations, "\n".join(violations)


def runtime_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in FILES}
    for imp in ALL_IMPORTS:
        if imp.type_only or imp.target not in FILES or imp.target == imp.source:
            continue
        graph[imp.source].add(imp.target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; returns the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_strongly_connected_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_runtime_imports_have_no_cycle():
    cycles = strongly_connected(runtime_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_layer_check_catches_an_upward_import(tmp_path, monkeypatch):
    # The checker itself can fail: a progress module importing the dataflow layer.
    planted = Import("timelypy.progress.frontier", "timelypy.dataflow.stream", 1, True)
    source, target = layer_of(planted.source), layer_of(planted.target)
    assert target not in LAYERS[source]


# -- operators attach themselves; the type checker's declarations agree ----------


def declared_methods(module_name: str, class_name: str) -> dict[str, tuple[str, str]]:
    """``name -> (module, function)`` from the class's ``if TYPE_CHECKING:`` block."""
    path = FILES[module_name]
    tree = ast.parse(path.read_text())
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                if isinstance(child, ast.ImportFrom):
                    target = _resolve(module_name, child, False)
                    for alias in child.names:
                        aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
    declared = {}
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    for node in cls.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                if isinstance(child, ast.Assign):
                    (target,) = child.targets
                    value = child.value
                    assert isinstance(target, ast.Name) and isinstance(value, ast.Attribute)
                    assert isinstance(value.value, ast.Name)
                    declared[target.id] = (aliases[value.value.id], value.attr)
    return declared


@pytest.mark.parametrize(
    ("module_name", "class_name"),
    [("timelypy.dataflow.stream", "Stream"), ("timelypy.dataflow.scope", "Scope")],
)
def test_attached_operators_match_the_type_declarations(module_name, class_name):
    import timelypy  # noqa: F401  (attaches every operator)

    cls = getattr(importlib.import_module(module_name), class_name)
    declared = declared_methods(module_name, class_name)
    assert declared, f"{class_name} declares no attached operator"
    for name, (module, function) in declared.items():
        expected = getattr(importlib.import_module(module), function)
        assert cls.__dict__.get(name) is expected, (
            f"{class_name}.{name} is declared as {module}.{function} but "
            f"{cls.__dict__.get(name)!r} is attached"
        )
    # Users may attach operators of their own (the docs do); timelypy's are all declared.
    attached = {
        name
        for name, value in vars(cls).items()
        if callable(value)
        and getattr(value, "__module__", module_name) != module_name
        and getattr(value, "__module__", "").startswith("timelypy.")
    }
    undeclared = attached - set(declared)
    assert not undeclared, f"attached to {class_name} but not declared for type checkers: " + (
        ", ".join(sorted(undeclared))
    )


# -- no module reaches into another's private names -------------------------------

#: Where reaching into another module's private names is checked: every package.
#: (Built-ins use what a user's operator can use; the dataflow layer uses only
#: AsWorker; a scope drives its Tracker through the Tracker's documented interface.)
PRIVATE_CHECKED = PACKAGES
#: The one module whose job is reading a library's internals (py4j's gateway,
#: msgpack's packer), each behind a version check with a clear error.
GUARDED_INTERNALS = frozenset({"timelypy_spark._compat"})
#: Names with a leading underscore that are public API of the standard library
#: (a namedtuple's ``_fields``, ``_asdict``, ``_replace``, ``_make``).
NAMEDTUPLE_API = frozenset({"_fields", "_asdict", "_replace", "_make"})


def private_names_defined(tree: ast.AST) -> set[str]:
    """Private attribute and method names a module defines itself."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
    for node in ast.walk(tree):
        # __slots__ declare attributes too
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            for element in ast.walk(node.value):
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    names.add(element.value)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


#: ``sys`` functions with a leading underscore that the Python docs document for
#: use (``sys._current_frames``: what a stuck worker thread is running).
DOCUMENTED_SYS = frozenset({"_current_frames"})


def foreign_private_accesses(module: str) -> list[str]:
    path = FILES[module]
    tree = ast.parse(path.read_text())
    mine = private_names_defined(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            and node.attr not in mine
            and not (
                isinstance(node.value, ast.Name)
                and node.value.id == "sys"
                and node.attr in DOCUMENTED_SYS
            )
            and node.attr not in NAMEDTUPLE_API
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    return found


def test_the_private_name_check_catches_a_planted_access(tmp_path, monkeypatch):
    planted = tmp_path / "planted.py"
    planted.write_text("def f(tracker):\n    return tracker._total_counts\n")
    monkeypatch.setitem(FILES, "timelypy.planted", planted)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert foreign_private_accesses("timelypy.planted") == ["planted.py:2: ._total_counts"]


def test_no_module_uses_another_modules_private_names():
    checked = [m for m in FILES if m.startswith(PRIVATE_CHECKED) and m not in GUARDED_INTERNALS]
    assert "timelypy.progress.subgraph" in checked and "timelypy.flow.driver" in checked
    found = [line for module in checked for line in foreign_private_accesses(module)]
    assert not found, "private names of other modules used:\n" + "\n".join(found)
