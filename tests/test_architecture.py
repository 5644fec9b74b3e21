"""The project's structure rules, checked over the source tree.

Python (``python/agl_fast``):

* No module takes a ``_private`` object from another module (``from .x
  import _helper``, or ``x._helper``), ``_internal``'s modules included. A
  ``_private`` module belongs to its package: no other package imports it,
  except ``agl_fast._internal`` (shared infrastructure) and
  ``agl_fast._native`` (the compiled core), the package's own private layers.
* The packages (``agl_fast.<name>``, a subpackage or a top-level module) form
  no import cycle, counting imports inside functions too. The root
  ``agl_fast/__init__.py`` is the public facade and is left out.
* No source file is longer than 600 lines and no function longer than 80.

Rust (``rust/``):

* No ``too_many_arguments`` allowance anywhere (a parameter struct instead).
* No file longer than 1,000 lines.
* No function longer than 80 lines (from ``fn`` to its closing brace) unless
  a comment line ``// Long: <the reason>`` stands among the comment and
  attribute lines directly above it.
* The modules of a crate form no cycle through ``crate::``, ``super::`` and
  ``self::`` paths. A module's own submodules (``mod x;``) and its
  ``#[cfg(test)]`` modules are left out: a module owns what it declares, and
  a test may check one module against another.

What stands today against the Rust rules is listed by name below; a rule
fails on anything new and on a listed entry that no longer applies, so the
lists only shrink.
"""

from __future__ import annotations

import ast
import collections
import functools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python" / "agl_fast"
SHARED_PRIVATE = {"_internal", "_native"}
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

RUST = Path(__file__).resolve().parents[1] / "rust"
RUST_CRATES = ("agl-core/src", "agl-py/src")
MAX_RUST_FILE_LINES = 1000
MAX_RUST_FUNCTION_LINES = 80
LONG_REASON = "// Long:"

#: Python modules that still take private names from a sibling module.
PRIVATE_IMPORTS_TO_REMOVE: set[str] = set()
#: Files that still allow ``clippy::too_many_arguments``.
RUST_ALLOWANCES_TO_REMOVE: set[str] = set()
#: Files over 1,000 lines, to split.
RUST_LONG_FILES_TO_SPLIT: set[str] = set()
#: Functions over 80 lines, to split (or to give their reason).
RUST_LONG_FUNCTIONS_TO_SPLIT: set[str] = set()
#: Module cycles, to break (each a group of one crate's modules).
RUST_CYCLES_TO_BREAK: list[list[str]] = []


def _module_parts(path: Path, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """The dotted module and its package, as lists of names."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return parts, parts
    return parts, parts[:-1]


@functools.cache
def _nodes(path: Path) -> list[ast.AST]:
    """Every node of a file's syntax tree (read once per run)."""
    return list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _imports(path: Path, root: Path = ROOT) -> Iterator[tuple[list[str], int]]:
    """Every ``agl_fast`` name imported by a file: (dotted name, line)."""
    _, package = _module_parts(path, root)
    for node in _nodes(path):
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


def _is_module(name: list[str], root: Path) -> bool:
    path = root.parent.joinpath(*name)
    return any(
        p.is_file()
        for p in (path.with_suffix(".py"), path.with_suffix(".pyi"), path / "__init__.py")
    )


def _split(name: list[str], root: Path) -> tuple[list[str], list[str]]:
    """A dotted name as (its longest module prefix, the names inside that module)."""
    for k in range(len(name), 0, -1):
        if _is_module(name[:k], root):
            return name[:k], name[k:]
    return name[:1], name[1:]


def _private(names: list[str]) -> bool:
    return any(n.startswith("_") and not n.startswith("__") for n in names)


def _module_aliases(path: Path, root: Path) -> dict[str, list[str]]:
    """Local names bound to an ``agl_fast`` module: ``from . import x as y``,
    ``import agl_fast.a as m``."""
    _, package = _module_parts(path, root)
    aliases: dict[str, list[str]] = {}
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name.split(".")
                if name[0] == "agl_fast":
                    aliases[alias.asname or "agl_fast"] = name if alias.asname else ["agl_fast"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = base + (node.module.split(".") if node.module else [])
            else:
                module = (node.module or "").split(".")
            for alias in node.names:
                if module[:1] == ["agl_fast"] and _is_module([*module, alias.name], root):
                    aliases[alias.asname or alias.name] = [*module, alias.name]
    return aliases


def _attributes(path: Path, root: Path = ROOT) -> Iterator[tuple[list[str], int]]:
    """Every ``agl_fast`` name reached as an attribute of an imported module
    (``shape.obj``, ``agl_fast.a.b.f``): (dotted name, line)."""
    aliases = _module_aliases(path, root)
    for node in _nodes(path):
        chain: list[str] = []
        value: ast.expr = node if isinstance(node, ast.Attribute) else ast.Constant(None)
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if chain and isinstance(value, ast.Name) and value.id in aliases:
            yield [*aliases[value.id], *chain], node.lineno


def private_imports(root: Path = ROOT) -> list[str]:
    """``file:line name`` for each private name a module takes from another.

    A private object (``_helper`` in ``from .x import _helper``, or reached as
    ``x._helper``) belongs to its module alone. A private module belongs to
    its package: another package may not import it, except the shared layers
    in ``SHARED_PRIVATE``."""
    found = set()
    for path in _sources(root):
        module, _ = _module_parts(path, root)
        for name, line in [*_imports(path, root), *_attributes(path, root)]:
            owner, inside = _split(name, root)
            foreign_module = _private(owner[1:]) and owner[1] not in SHARED_PRIVATE
            if (_private(inside) and owner != module) or (
                foreign_module and owner[:2] != module[:2]
            ):
                found.add(f"{path.relative_to(root.parent)}:{line} {'.'.join(name)}")
    return sorted(found)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of a graph with more than one node
    (each holds a cycle), sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in order:
            visit(v)
    return sorted(groups)


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
    return cycles(edges)


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
        for node in _nodes(path):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(
                        f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}: {n} lines"
                    )
    return out


# ---------------------------------------------------------------- Rust

_IDENT = r"[A-Za-z_]\w*"
_RAW_STRING = re.compile(r'b?r(#*)"')
_CHAR = re.compile(r"b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'")
_FN = re.compile(rf"\bfn\s+({_IDENT})")
_USE = re.compile(r"\buse\s+([^;]*);")
_PATH = re.compile(rf"(?<![\w:])((?:crate|super|self)(?:\s*::\s*{_IDENT})+)")
_INLINE_MOD = re.compile(rf"(#\[cfg\(test\)\]\s*)?\bmod\s+({_IDENT})\s*\{{")
_DECLARED_MOD = re.compile(rf"\bmod\s+({_IDENT})\s*;")


def rust_code(text: str) -> str:
    """A Rust source with its comments, strings and character literals
    blanked out (line breaks kept, so line numbers hold)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        start = i
        ident_before = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                step = text[i : i + 2]
                depth += (step == "/*") - (step == "*/")
                i += 2 if step in ("/*", "*/") else 1
        elif not ident_before and (m := _RAW_STRING.match(text, i)):
            close = text.find('"' + m.group(1), m.end())
            i = n if close < 0 else close + 1 + len(m.group(1))
        elif text[i] == '"' or (not ident_before and text.startswith('b"', i)):
            i += 2 if text[i] == "b" else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif not ident_before and (m := _CHAR.match(text, i)):
            i = m.end()
        else:
            out.append(text[i])  # code, or the ' of a lifetime or label
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[start:i]))
    return "".join(out)


def _block_end(code: str, brace: int) -> int:
    """The index of the ``}`` that closes the ``{`` at ``brace``."""
    level = 0
    for k in range(brace, len(code)):
        level += (code[k] == "{") - (code[k] == "}")
        if level == 0:
            return k
    return len(code) - 1


def rust_functions(text: str) -> Iterator[tuple[str, int, int]]:
    """(name, first line, last line) of every ``fn`` with a body: from the
    ``fn`` to its closing brace, nested functions counted on their own."""
    code = rust_code(text)
    for m in _FN.finditer(code):
        depth, j = 0, m.end()
        while j < len(code) and not (depth == 0 and code[j] in "{;"):
            depth += (code[j] in "([") - (code[j] in ")]")
            j += 1
        if j == len(code) or code[j] == ";":
            continue  # a declaration (trait method, extern fn)
        first = code.count("\n", 0, m.start()) + 1
        yield m.group(1), first, code.count("\n", 0, _block_end(code, j)) + 1


def _has_reason(lines: list[str], first: int) -> bool:
    """Whether a ``// Long:`` line with a reason stands in the comment and
    attribute lines directly above line ``first`` (1-based)."""
    k = first - 2
    while k >= 0 and lines[k].strip().startswith(("//", "#[")):
        line = lines[k].strip()
        if line.startswith(LONG_REASON) and line[len(LONG_REASON) :].strip():
            return True
        k -= 1
    return False


def _rust_sources(root: Path = RUST) -> list[Path]:
    return sorted(p for p in root.rglob("*.rs") if "target" not in p.relative_to(root).parts)


def rust_allowances(root: Path = RUST, workspace: Path = RUST.parent) -> set[str]:
    """Files that allow ``too_many_arguments`` or raise its threshold: the
    crates' code and manifests, and the workspace's lint tables."""
    paths = [*_rust_sources(root), *root.rglob("Cargo.toml"), *root.rglob("*clippy.toml")]
    top = [workspace / name for name in ("Cargo.toml", "clippy.toml", ".clippy.toml")]
    return {
        str(p.relative_to(root) if p.is_relative_to(root) else p.relative_to(workspace))
        for p in [*paths, *(t for t in top if t.is_file())]
        if re.search(r"too[_-]many[_-]arguments", p.read_text(encoding="utf-8"))
    }


def long_rust_files(root: Path = RUST) -> dict[str, str]:
    """``file`` -> ``file: N lines`` for each file over the limit."""
    out = {}
    for path in _rust_sources(root):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_RUST_FILE_LINES:
            out[str(path.relative_to(root))] = f"{path.relative_to(root)}: {n} lines"
    return out


def long_rust_functions(root: Path = RUST) -> dict[str, str]:
    """``file name`` -> ``file:line name: N lines`` for each function over
    the limit without a written reason."""
    out = {}
    for path in _rust_sources(root):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        rel = path.relative_to(root)
        for name, first, last in rust_functions(text):
            n = last - first + 1
            if n > MAX_RUST_FUNCTION_LINES and not _has_reason(lines, first):
                out[f"{rel} {name}"] = f"{rel}:{first} {name}: {n} lines"
    return out


def _rust_module(path: Path, src: Path) -> tuple[str, ...]:
    parts = path.relative_to(src).with_suffix("").parts
    if parts in (("lib",), ("main",)):
        return ()
    return parts[:-1] if parts[-1] == "mod" else parts


def _use_paths(tree: str, prefix: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The paths a use tree names: ``a::{b, c::d as e, f::*}`` gives
    ``[a, b]``, ``[a, c, d]``, ``[a, f]``."""
    tree = tree.strip()
    if tree.startswith("{"):
        depth, part = 0, ""
        for ch in tree[1:-1] + ",":
            if ch == "," and depth == 0:
                if part.strip():
                    yield from _use_paths(part, prefix)
                part = ""
                continue
            depth += (ch == "{") - (ch == "}")
            part += ch
        return
    head, sep, rest = tree.partition("::")
    head = head.split(" as ")[0].strip()
    if sep:
        yield from _use_paths(rest, (*prefix, head))
    elif head in ("*", "self"):
        yield list(prefix)
    else:
        yield [*prefix, head]


def _module_refs(code: str, here: tuple[str, ...]) -> Iterator[list[str]]:
    """The absolute module paths a file's code names (``crate::``,
    ``super::``, ``self::`` and its declared submodules), outside its
    ``#[cfg(test)]`` modules."""
    inline = [
        (m.end() - 1, _block_end(code, m.end() - 1), m.group(2), bool(m.group(1)))
        for m in _INLINE_MOD.finditer(code)
    ]
    children = set(_DECLARED_MOD.findall(code))
    refs = [(m.start(), path) for m in _USE.finditer(code) for path in _use_paths(m.group(1))]
    refs += [(m.start(), re.split(r"\s*::\s*", m.group(1))) for m in _PATH.finditer(code)]
    if children:
        child = re.compile(rf"(?<![\w:])({'|'.join(sorted(children))})\s*::")
        refs += [(m.start(), [m.group(1)]) for m in child.finditer(code)]
    for pos, path in refs:
        around = [(name, test) for a, b, name, test in inline if a <= pos <= b]
        if any(test for _, test in around):
            continue
        cur = [*here, *(name for name, _ in around)]
        if path[0] == "crate":
            yield path[1:]
        elif path[0] in ("super", "self"):
            while path and path[0] in ("super", "self"):
                cur = cur[:-1] if path[0] == "super" else cur
                path = path[1:]
            yield [*cur, *path]
        elif path[0] in children:
            yield [*cur, *path]


def rust_module_edges(src: Path) -> dict[str, set[str]]:
    """One crate's module graph: file module -> the file modules it names,
    leaving out its own submodules."""
    files = {_rust_module(p, src) for p in src.rglob("*.rs")}
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for path in sorted(src.rglob("*.rs")):
        here = _rust_module(path, src)
        for target in _module_refs(rust_code(path.read_text(encoding="utf-8")), here):
            owner = next(
                tuple(target[:k]) for k in range(len(target), -1, -1) if tuple(target[:k]) in files
            )
            if owner[: len(here)] != here:  # not itself nor one of its own submodules
                edges["::".join(here) or "crate"].add("::".join(owner) or "crate")
    return edges


def rust_cycles(root: Path = RUST) -> dict[str, str]:
    """Module cycles of each crate: the group (``crate: module | ...``) ->
    the group with the paths that close it."""
    out = {}
    for crate in RUST_CRATES:
        name = crate.split("/")[0]
        edges = rust_module_edges(root / crate)
        for group in cycles(edges):
            inside = [f"{a} -> {b}" for a in group for b in sorted(edges[a]) if b in group]
            key = " | ".join(f"{name}: {m}" for m in group)
            out[key] = f"{key} ({'; '.join(inside)})"
    return out


# ---------------------------------------------------------------- the rules


def _against(found: dict[str, str] | Iterable[str], listed: set[str]) -> list[str]:
    """What breaks a rule beyond its list, and the list's entries that no
    longer apply (to be removed from it)."""
    found = found if isinstance(found, dict) else {k: k for k in found}
    new = [v for k, v in sorted(found.items()) if k not in listed]
    return new + [f"listed but mended (remove it): {k}" for k in sorted(listed - set(found))]


def test_no_private_names_across_modules() -> None:
    found = {f"{f.split(':')[0]} {name}": f"{f} {name}" for f, name in (
        entry.split(" ") for entry in private_imports()
    )}  # fmt: skip
    assert _against(found, PRIVATE_IMPORTS_TO_REMOVE) == []


def test_no_import_cycles_between_packages() -> None:
    assert package_cycles() == []


def test_no_file_over_600_lines() -> None:
    assert long_files() == []


def test_no_function_over_80_lines() -> None:
    assert long_functions() == []


def test_no_too_many_arguments_allowance_in_rust() -> None:
    assert _against(rust_allowances(), RUST_ALLOWANCES_TO_REMOVE) == []


def test_no_rust_file_over_1000_lines() -> None:
    assert _against(long_rust_files(), RUST_LONG_FILES_TO_SPLIT) == []


def test_no_rust_function_over_80_lines_without_a_reason() -> None:
    assert _against(long_rust_functions(), RUST_LONG_FUNCTIONS_TO_SPLIT) == []


def test_no_rust_module_cycles() -> None:
    assert _against(rust_cycles(), {" | ".join(g) for g in RUST_CYCLES_TO_BREAK}) == []


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
            "_internal/args.py": "def _ok(): pass\ndef ok(): pass\n",
            "a/__init__.py": "",
            "a/_own.py": "",
            "a/x.py": "from ..b.y import _helper\nfrom .._internal.args import _ok, ok\n",
            "a/z.py": (
                "from .x import _local\nfrom . import _own\nfrom ..b import _theirs\n"
                "from .._internal import args\nargs._ok()\nargs.ok()\n"
                "import agl_fast.b.y as y\ny._helper()\n"
            ),
            "b/__init__.py": "",
            "b/_theirs.py": "",
            "b/y.py": "def f():\n    from agl_fast.a import x\n",
        },
    )
    assert private_imports(root) == [
        "agl_fast/a/x.py:1 agl_fast.b.y._helper",
        "agl_fast/a/x.py:2 agl_fast._internal.args._ok",
        "agl_fast/a/z.py:1 agl_fast.a.x._local",
        "agl_fast/a/z.py:3 agl_fast.b._theirs",
        "agl_fast/a/z.py:5 agl_fast._internal.args._ok",
        "agl_fast/a/z.py:8 agl_fast.b.y._helper",
    ]
    assert package_cycles(root) == [["a", "b"]]


_BAD_RUST = {
    "agl-core/Cargo.toml": "[lints.clippy]\ntoo_many_arguments = 'allow'\n",
    "agl-core/src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
    # a and b name each other; c and its submodule c::d do too, as a module
    # and what it declares may
    "agl-core/src/a.rs": (
        "use crate::b::{self, B as _};\n"
        'const S: &str = "fn fake() { { {";\n'
        "const C: char = '{';\n"
        'const R: &str = r#"}"#;\n'
        "fn short<'a>(x: &'a [u8; 4]) -> &'a [u8; 4] {\n    x\n}\n"
        "// Long: one table, read top to bottom.\n#[inline]\n"
        "fn reasoned() {\n" + "    let _ = 1;\n" * 80 + "}\n"
        "/// Long: not a reason (a doc comment).\n"
        "fn long() {\n" + "    let _ = 1;\n" * 79 + "}\n"
    ),
    "agl-core/src/b.rs": "pub struct B;\nfn f() { super::a::short(&[0; 4]); }\n",
    "agl-core/src/c.rs": (
        "mod d;\npub struct C;\nfn g() { d::h() }\n"
        "#[cfg(test)]\nmod tests {\n    use crate::a::short;\n}\n"
    ),
    "agl-core/src/c/d.rs": "pub fn h() { let _ = super::C; }\n",
    "agl-core/tests/big.rs": "//\n" * 1001,
    "agl-py/src/lib.rs": "",
}


def test_the_rust_rules_fail_on_a_bad_tree(tmp_path: Path) -> None:
    """The Rust checks find what they look for, past strings, characters,
    comments and lifetimes that hold braces or look like code."""
    for name, text in _BAD_RUST.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "clippy.toml").write_text("too-many-arguments-threshold = 12\n", encoding="utf-8")
    assert rust_allowances(tmp_path, tmp_path) == {"agl-core/Cargo.toml", "clippy.toml"}
    assert long_rust_files(tmp_path) == {
        "agl-core/tests/big.rs": "agl-core/tests/big.rs: 1001 lines"
    }
    assert long_rust_functions(tmp_path) == {
        "agl-core/src/a.rs long": "agl-core/src/a.rs:93 long: 81 lines"
    }
    assert rust_cycles(tmp_path) == {
        "agl-core: a | agl-core: b": "agl-core: a | agl-core: b (a -> b; b -> a)"
    }
    assert [f[0] for f in rust_functions(_BAD_RUST["agl-core/src/a.rs"])] == [
        "short",
        "reasoned",
        "long",
    ]
