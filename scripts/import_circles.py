"""Import circles between the modules of ``agl_fast`` (imports inside
functions included), one line per circle, then their count.

``tests/test_architecture.py`` forbids circles between packages; this looks
one level down, at modules within a package::

    python scripts/import_circles.py [PYTHON_SOURCE_DIR]
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def modules(root: Path) -> dict[str, tuple[Path, list[str]]]:
    """Dotted module name -> (file, the package its relative imports start from)."""
    out = {}
    for path in sorted((root / "agl_fast").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            out[".".join(parts)] = (path, parts)
        else:
            out[".".join(parts)] = (path, parts[:-1])
    return out


def edges(mods: dict[str, tuple[Path, list[str]]]) -> dict[str, set[str]]:
    """Module -> the ``agl_fast`` modules it imports (the root facade left out)."""

    def resolve(name: list[str]) -> str | None:
        for k in range(len(name), 0, -1):
            if ".".join(name[:k]) in mods:
                return ".".join(name[:k])
        return None

    graph: dict[str, set[str]] = defaultdict(set)
    for module, (path, package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[list[str]] = []
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                where = base + (node.module.split(".") if node.module else [])
                names = [[*where, alias.name] for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name.split(".") for alias in node.names]
            for name in names:
                target = resolve(name) if name[:1] == ["agl_fast"] else None
                if target not in (None, module, "agl_fast"):
                    graph[module].add(str(target))
    return graph


def circles(graph: dict[str, set[str]], nodes: list[str]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in nodes:
        if v not in order:
            visit(v)
    return found


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "python"
    mods = modules(root)
    found = circles(edges(mods), list(mods))
    for group in found:
        print(" <-> ".join(group))
    print(f"circles: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
