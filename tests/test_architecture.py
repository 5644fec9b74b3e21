"""The package's structure rules, checked over the source tree.

* No module imports a ``_private`` name (a module or an object) that belongs
  to another package: a subpackage of ``agl_fast`` or one of its top-level
  modules. ``agl_fast._internal`` (shared infrastructure) and
  ``agl_fast._native`` (the compiled core) are the package's own private
  layers and may be imported by any of its modules.
* The packages (``agl_fast.<name>``, a subpackage or a top-level module) form
  no import cycle, counting imports inside functions too. The root
  ``agl_fast/__init__.py`` is the public facade and is left out.
* No source file is longer than 600 lines and no function longer than 80.
"""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python" / "agl_fast"
SHARED_PRIVATE = {"_internal", "_native"}
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def _module_parts(path: Path, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """The dotted module and its package, as lists of names."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return parts, parts
    return parts, parts[:-1]


def _imports(path: Path, root: Path = ROOT) -> Iterator[tuple[list[str], int]]:
    """Every ``agl_fast`` name imported by a file: (dotted name, line)."""
    _, package = _module_parts(path, root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = base + (node.module.split(".") if node.module else [])
            else:
                module = (node.module or "").split(".")
            if module[:1] == ["agl_fast"]:
                for alias in node.names:
                    yield [*module, alias.name], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name.split(".")
                if name[:1] == ["agl_fast"]:
                    yield name, node.lineno


def _sources(root: Path = ROOT) -> list[Path]:
    return sorted(root.rglob("*.py"))


def private_imports(root: Path = ROOT) -> list[str]:
    """``file:line name`` for each private name taken from another package."""
    found = []
    for path in _sources(root):
        module, _ = _module_parts(path, root)
        for name, line in _imports(path, root):
            private = [c for c in name[1:] if c.startswith("_") and not c.startswith("__")]
            if not private or name[1] in SHARED_PRIVATE:
                continue
            if name[:2] != module[:2]:
                found.append(f"{path.relative_to(root.parent)}:{line} {'.'.join(name)}")
    return found


def package_cycles(root: Path = ROOT) -> list[list[str]]:
    """Strongly connected groups of packages (each a cycle)."""
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for path in _sources(root):
        module, _ = _module_parts(path, root)
        if len(module) < 2:
            continue  # the root facade
        for name, _line in _imports(path, root):
            if len(name) >= 2 and name[1] != module[1] and name[1] not in SHARED_PRIVATE:
                edges[module[1]].add(name[1])
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in list(edges):
        if v not in order:
            visit(v)
    return groups


def long_files() -> list[str]:
    out = []
    for path in _sources():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            out.append(f"{path.relative_to(ROOT.parent)}: {n} lines")
    return out


def long_functions() -> list[str]:
    out = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(
                        f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}: {n} lines"
                    )
    return out


def test_no_private_names_across_packages() -> None:
    assert private_imports() == []


def test_no_import_cycles_between_packages() -> None:
    assert package_cycles() == []


def test_no_file_over_600_lines() -> None:
    assert long_files() == []


def test_no_function_over_80_lines() -> None:
    assert long_functions() == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "agl_fast"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_rules_fail_on_a_bad_tree(tmp_path: Path) -> None:
    """The checks find what they look for (so the tests above can fail)."""
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "_internal/__init__.py": "",
            "_internal/args.py": "def _ok(): pass\n",
            "a/__init__.py": "",
            "a/x.py": "from ..b.y import _helper\nfrom .._internal.args import _ok\n",
            "a/z.py": "from .x import _local\n",
            "b/__init__.py": "",
            "b/y.py": "def f():\n    from agl_fast.a import x\n",
        },
    )
    assert private_imports(root) == ["agl_fast/a/x.py:1 agl_fast.b.y._helper"]
    assert package_cycles(root) == [["a", "b"]]
