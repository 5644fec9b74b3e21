"""Location of the shared reference data (``../shared`` of the checkout)."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
AGL1K = SHARED / "agl1k"
MP3S = sorted(AGL1K.glob("*.mp3")) if AGL1K.is_dir() else []
