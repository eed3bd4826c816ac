"""The rooms import each other in one order (docs/architecture.md): every import of every module of the package,
at its top, under TYPE_CHECKING or inside a function, goes to a module of its own room or of a room below, and no
modules import each other in a circle. Read from the source with ast, so an import a function hides counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hook" / "gpuhook"

# lowest first; "base" is the modules at the package's top (errors, frozen, edits, config, ...)
ROOMS = ("base", "request", "host", "simulator", "vendors", "plan", "apply", "tuning", "metrics", "kubernetes",
         "engines", "testing", "gpu_path", "cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules `name` imports, wherever in the file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *([base] if base
                                                                                                   else [])])
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def room(module: str) -> str:
    """The room a module sits in: its subpackage, or "base" for the package's top-level modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "base"


def test_every_room_has_its_place() -> None:
    assert {room(m) for m in MODULES} - {"base"} <= set(ROOMS), {room(m) for m in MODULES} - set(ROOMS)


def test_imports_go_down_the_rooms_only() -> None:
    against = sorted(f"{m} ({room(m)}) imports {d} ({room(d)})" for m, deps in GRAPH.items() for d in deps
                     if room(d) != "base" or room(m) == "base"
                     if ROOMS.index(room(d)) > ROOMS.index(room(m)))
    assert against == [], "\n".join(against)


def _vendor_package(module: str) -> str | None:
    """The vendor package a module sits in (gpuhook.vendors.<name>), None for any other module."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) > 3 and parts[1] == "vendors" else None


def test_only_the_registry_imports_a_vendors_modules() -> None:
    """A vendor is reached through vendors/registry.py alone (its parts by name): no other room imports a module of
    vendors/<name>/; a vendor's own modules may import each other's (Hygon's build on AMD's)."""
    against = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() for d in deps
                     if _vendor_package(d) and not _vendor_package(m) and m != "gpuhook.vendors.registry")
    assert against == [], "\n".join(against)


def _cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(GRAPH):
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert _cycles() == [], _cycles()


@pytest.mark.parametrize(("graph", "circles"), [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
], ids=["a circle of three", "a line"])
def test_the_circle_finder_finds_circles(graph: dict[str, set[str]], circles: list[list[str]],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__import__(__name__, fromlist=["GRAPH"]), "GRAPH", graph)
    assert _cycles() == circles
