"""The README stays a page a newcomer reads in a few minutes, and every page
it (or a page of ``docs/``) links to exists.

The README holds what the project is, the two commands, the three ways in,
one performance table and links; the details live in ``docs/``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_README_LINES = 300
#: ``[text](target)`` outside code; the target up to a ``#anchor``.
LINK = re.compile(r"\]\(([^)#\s]*)(#[^)\s]*)?\)")


def _prose(text: str) -> str:
    """A Markdown text without its fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def local_links(page: Path) -> list[str]:
    """The relative link targets of a Markdown page (web links left out)."""
    targets = [m.group(1) for m in LINK.finditer(_prose(page.read_text(encoding="utf-8")))]
    return [t for t in targets if t and not re.match(r"[a-z]+:", t)]


def broken_links(pages: list[Path]) -> list[str]:
    return [
        f"{page.name} -> {target}"
        for page in pages
        for target in local_links(page)
        if not (page.parent / target).exists()
    ]


def test_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; move details to docs/"


def test_readme_links_the_architecture_page_near_the_top() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert any("(docs/architecture.md)" in line for line in lines[:60])


def test_every_linked_page_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert "docs/performance.md" in local_links(ROOT / "README.md")
    assert broken_links(pages) == []


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\nbash scripts/test.sh\n" in readme
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_broken_links_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("", encoding="utf-8")
    page.write_text(
        "[a](there.md#x) [b](gone.md) [c](https://example.org/x.md) `[d](code.md)`\n"
        "```\n[e](fenced.md)\n```\n",
        encoding="utf-8",
    )
    assert local_links(page) == ["there.md", "gone.md"]
    assert broken_links([page]) == ["page.md -> gone.md"]
