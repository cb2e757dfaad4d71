"""The server's engine package stays one-way, and its objects talk through public methods.

Issue 47, item 6: ``worker.py``, ``worker_retry.py`` and ``worker_stream.py`` imported each
other (the last two under TYPE_CHECKING) and the two helpers used ``WorkerService``'s
private members 14 times: methods cut out of a class, not modules with a job. The
supervisor now owns the child and the calls on it, and the retry policy and the stream
use its public methods. These read the source, so a new circle or a reach into another
object's ``_private`` member fails here rather than in a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yomiage.server.engine as engine

PACKAGE = "yomiage.server.engine"
SOURCE = Path(engine.__file__).parent
# Underscored names that are another module's public API, not an object's private state.
PUBLIC_UNDERSCORED = {("os", "_exit")}


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text("utf-8")) for path in sorted(SOURCE.glob("*.py"))}


def _imports(tree: ast.Module, names: set[str]) -> set[str]:
    """The package's modules that ``tree`` imports anywhere (TYPE_CHECKING and functions too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == PACKAGE:
                found.update(alias.name for alias in node.names if alias.name in names)
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module[len(PACKAGE) + 1 :].split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name[len(PACKAGE) + 1 :].split(".")[0])
    return found & names


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle in ``graph`` (module -> the modules it imports), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := walk(start)):
            return found
    return []


def test_the_server_engine_imports_form_no_circle() -> None:
    modules = _modules()
    names = set(modules)
    graph = {name: _imports(tree, names) - {name} for name, tree in modules.items()}
    assert "worker_calls" in graph["worker_retry"]  # the reader sees the imports
    assert _circle(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_engine_module_reaches_into_another_objects_private_members() -> None:
    reaches = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__"):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else ast.unparse(node.value)
            if owner not in ("self", "cls") and (owner, attr) not in PUBLIC_UNDERSCORED:
                reaches.append(f"{name}.py:{node.lineno}: {owner}.{attr}")
    assert reaches == []
