"""Rewrite the librosa coverage table of ``docs/compat-librosa.md`` from the one table in
``agl_fast.compat.librosa._coverage`` (``tests/test_librosa_dropin.py``
checks that they agree).

    python scripts/compat_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from agl_fast.compat.librosa._coverage import markdown_table  # noqa: E402

START, END = "<!-- compat-table -->", "<!-- /compat-table -->"


def main() -> int:
    path = ROOT / "docs" / "compat-librosa.md"
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{markdown_table()}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
