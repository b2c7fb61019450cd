"""No module of celery_dgs imports, directly or through others, a module that imports it;
and the layers keep their direction: the status page (``web``) imports no CLI
module, the operations layer (``ops``) neither the CLI nor the page.

Every module is parsed with :mod:`ast` (nothing is imported). Its imports of
package modules are edges of a graph: top-level ones, those inside functions
and ``if TYPE_CHECKING:`` blocks, ``import celery_dgs.x``, ``from .x import y``
and ``from . import x`` (an edge to the module ``x``). An edge goes to the
imported module itself, not to its parent packages. Any cycle fails the test,
printed as ``a -> b -> a``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "celery_dgs"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under ``root`` (a package's
    ``__init__.py`` is the package's own name)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(module: str, is_package: bool, tree: ast.AST) -> Iterator[str]:
    """Every module name ``tree`` imports, resolved to absolute names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            yield from (f"{target}.{alias.name}" for alias in node.names)


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports (itself left out)."""
    files = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = {
            name for name in _imported(module, is_package, tree) if name in files and name != module
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component of more
    than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return [_cycle_in(graph, set(c), c[0]) for c in sorted(components)]


def _cycle_in(graph: dict[str, set[str]], component: set[str], start: str) -> list[str]:
    """The shortest path ``start -> ... -> start`` inside ``component`` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in no cycle of {sorted(component)}")


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def paths_into(graph: dict[str, set[str]], source: str, target: str) -> list[list[str]]:
    """For each module of package ``target`` that a module of package
    ``source`` imports, directly or through others, one shortest import path
    to it (breadth first from ``source``'s modules)."""
    starts = sorted(m for m in graph if _in_package(m, source))
    previous: dict[str, str | None] = dict.fromkeys(starts)
    frontier = starts
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    paths = []
    for module in sorted(previous):
        if not _in_package(module, target):
            continue
        path = [module]
        while (parent := previous[path[-1]]) is not None:
            path.append(parent)
        paths.append(path[::-1])
    return paths


def test_the_status_page_imports_no_cli_module() -> None:
    found = paths_into(import_graph(), "celery_dgs.web", "celery_dgs.cli")
    assert not found, "web imports cli:\n" + "\n".join(" -> ".join(p) for p in found)


def test_the_operations_layer_imports_neither_cli_nor_web() -> None:
    graph = import_graph()
    found = paths_into(graph, "celery_dgs.ops", "celery_dgs.cli")
    found += paths_into(graph, "celery_dgs.ops", "celery_dgs.web")
    assert not found, "ops imports cli or web:\n" + "\n".join(" -> ".join(p) for p in found)


def test_the_layer_check_follows_imports_through_other_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    for folder in ("web", "cli", "ops"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "web" / "page.py").write_text("from ..ops import act\n")
    (pkg / "ops" / "act.py").write_text("def f():\n    from ..cli import out\n")
    (pkg / "cli" / "out.py").write_text("")
    graph = import_graph(pkg, "pkg")
    assert paths_into(graph, "pkg.web", "pkg.cli") == [
        ["pkg.web.page", "pkg.ops.act", "pkg.cli"],
        ["pkg.web.page", "pkg.ops.act", "pkg.cli.out"],
    ]
    assert paths_into(graph, "pkg.ops", "pkg.web") == []


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_sees_every_form_of_import(tmp_path: Path) -> None:
    """Function-level, ``TYPE_CHECKING`` and ``from . import x`` imports all count."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g\n",  # function level
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
        "c.py": "import pkg.sub.d\n",
        "sub/__init__.py": "",
        "sub/d.py": "from .. import c\n",  # from .. import module
        "e.py": "from .sub import d\n",  # no cycle: d does not import e
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.e"] == {"pkg.sub", "pkg.sub.d"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.c", "pkg.sub.d", "pkg.c"]]
