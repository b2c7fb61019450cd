"""The worker layer does not import ``celery_dgs.dgs`` (which installs the
worker hooks): no module reachable from ``celery_dgs.worker.hooks`` imports
it, counting imports inside functions and ``TYPE_CHECKING`` blocks."""

from __future__ import annotations

import ast
from pathlib import Path

import celery_dgs

PACKAGE = Path(celery_dgs.__file__).parent


def module_path(name: str) -> Path | None:
    parts = name.split(".")[1:]
    if not parts:
        return PACKAGE / "__init__.py"
    rel = Path(*parts)
    for candidate in (PACKAGE / rel / "__init__.py", PACKAGE / rel.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def imports_of(name: str) -> set[str]:
    """Every celery_dgs module ``name`` imports, anywhere in its source."""
    path = module_path(name)
    assert path is not None, name
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("celery_dgs"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - (node.level - 1)]
                target = ".".join(parent + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("celery_dgs"):
                continue
            found.add(target)
            for alias in node.names:  # "from . import x" may name a module
                if module_path(f"{target}.{alias.name}") is not None:
                    found.add(f"{target}.{alias.name}")
    return {m for m in found if module_path(m) is not None}


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(imports_of(name))
    return seen


def test_the_worker_hooks_do_not_import_dgs() -> None:
    assert "celery_dgs.worker.hooks" in imports_of("celery_dgs.dgs")  # the one direction
    assert "celery_dgs.dgs" not in reachable("celery_dgs.worker.hooks")


def test_the_import_walk_sees_type_checking_and_function_level_imports() -> None:
    # celery_dgs/__init__.py imports DGS both under TYPE_CHECKING and in a function.
    assert "celery_dgs.dgs" in imports_of("celery_dgs")
    # dgs.py imports the hooks inside DGS.__init__ only.
    assert "celery_dgs.worker.hooks" in imports_of("celery_dgs.dgs")
