"""Location of the shared AGL1K data: ``../shared/agl1k`` of the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
AGL1K = SHARED / "agl1k"


def agl1k_dir() -> Path:
    """The data directory; skip only when the shared directory is absent."""
    if not SHARED.is_dir():
        pytest.skip("shared data directory is absent")
    return AGL1K
