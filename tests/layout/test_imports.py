"""The layout rules of DESIGN.md, read from the code's own imports.

- no import cycle between packages (a top-level module counts as its own package);
- ``model`` imports nothing of ours;
- the roles (``workers``, ``binder``, ``controllers``) are imported only by ``cli``,
  ``bench`` and ``replay`` (the what-if tool, which runs the roles like the bench does),
  and by themselves;
- nothing but ``cli`` (whose ``distsched bench`` runs it) imports ``bench``;
- only the plugins import ``framework/plugins/helpers``.

Imports inside functions and under TYPE_CHECKING count too: they still tie two packages.
``KNOWN_CYCLES`` lists cycles tolerated while they are being broken; it is empty (the
snapshot and the plugins moved into framework/), so the test fails on any cycle, and on
a listed one that is gone, so that the list can only shrink.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "distsched"
ROLES = {"workers", "binder", "controllers", "bridge"}
ROLE_IMPORTERS = {"cli", "bench", "replay"}
KNOWN_CYCLES: set[frozenset[str]] = set()


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "distsched" or len(parts) < 2:
        return None
    return parts[1]


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def package_imports() -> dict[str, set[str]]:
    """package -> the other packages of ours it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        source_package = _package_of(".".join(rel.parts))
        if source_package is None or source_package in {"__init__", "__main__"}:
            continue
        graph.setdefault(source_package, set())
        for name in _imported_modules(path):
            target = _package_of(name)
            if target is not None and target != source_package:
                graph[source_package].add(target)
    return graph


def _cycle(graph: dict[str, set[str]], allowed: set[frozenset[str]]) -> list[str] | None:
    """A cycle of ``graph`` whose packages are not all inside one ``allowed`` group."""
    allowed_edges = {
        (a, b) for group in allowed for a in group for b in graph.get(a, ()) if b in group
    }
    graph = {a: {b for b in targets if (a, b) not in allowed_edges} for a, targets in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_cycle_between_packages() -> None:
    graph = package_imports()
    cycle = _cycle(graph, KNOWN_CYCLES)
    assert cycle is None, " -> ".join(cycle or [])
    for group in KNOWN_CYCLES:
        inner = {a: graph[a] & group for a in group}
        assert _cycle(inner, set()) is not None, f"{sorted(group)} no longer form a cycle"


def test_model_imports_nothing_of_ours() -> None:
    assert package_imports()["model"] == set()


def test_roles_are_imported_only_by_cli_and_the_tools() -> None:
    offenders = {
        (source, target)
        for source, targets in package_imports().items()
        for target in targets & ROLES
        if source not in ROLE_IMPORTERS | ROLES
    }
    assert not offenders


def test_only_the_cli_imports_bench() -> None:
    importers = {src for src, targets in package_imports().items() if "bench" in targets}
    assert importers <= {"cli"}


def test_plugin_helpers_serve_only_the_plugins() -> None:
    """What workers and controllers share with the plugins is model-level matching and
    lives in ``model`` (kube's component-helpers); ``framework/plugins/helpers`` is the
    plugins' own machinery."""
    helpers = "distsched.framework.plugins.helpers"
    plugins = ROOT / "framework" / "plugins"
    offenders = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if not path.is_relative_to(plugins)
        and any(m == helpers or m.startswith(helpers + ".") for m in _imported_modules(path))
    )
    assert not offenders
