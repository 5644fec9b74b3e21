"""Check that the test environment's binary pairs load together.

Run by ``scripts/test.sh`` after it installs (and on every run with a cached
environment): it imports torch with torchaudio and torchvision, transformers
and peft (which import torchaudio themselves) and onnxruntime, and compares
every installed package that ``requirements/constraints.txt`` pins with the
pinned version. On the first failure it prints one line naming the pair and
exits 1, so the suite never starts in an environment that cannot collect.

    python scripts/check_env.py [--no-torch]
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import re
import sys
from pathlib import Path

LOCK = Path(__file__).resolve().parent.parent / "requirements" / "constraints.txt"

# (module to import, the distribution it comes from, the one it must load with)
IMPORTS = [
    ("torch", "torch", None),
    ("torchaudio", "torchaudio", "torch"),
    ("torchvision", "torchvision", "torch"),
    ("transformers", "transformers", "torchaudio"),
    ("peft", "peft", "transformers"),
    ("onnxruntime", "onnxruntime", None),
]
TORCH_FAMILY = {"torch", "torchaudio", "torchvision", "transformers", "peft"}
REMEDY = (
    f"the tested versions are in requirements/{LOCK.name} "
    "(AGL_FAST_REINSTALL=1 bash scripts/test.sh installs them)"
)


def pins() -> dict[str, str]:
    """The exact versions of the lock, by distribution name."""
    out = {}
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#;]+)", line.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def main(argv: list[str]) -> int:
    with_torch = "--no-torch" not in argv
    partner_of = {dist: partner for _, dist, partner in IMPORTS}
    for module, dist, partner in IMPORTS:
        if dist in TORCH_FAMILY and not with_torch:
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure to load is the message
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            print(f"check_env: {pair(dist, partner)} does not load ({detail}); {REMEDY}")
            return 1
    for dist, want in sorted(pins().items()):
        have = version(dist)
        if have is not None and have != want:
            print(
                f"check_env: {pair(dist, partner_of.get(dist))} is installed, but "
                f"{LOCK.name} pins {dist}=={want}; {REMEDY}"
            )
            return 1
    return 0


def pair(dist: str, partner: str | None) -> str:
    """``dist`` and the package it must load with, with their versions."""
    text = f"{dist} {version(dist)}"
    if partner is not None and version(partner) is not None:
        text += f" with {partner} {version(partner)}"
    return text


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
