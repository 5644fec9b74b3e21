"""Shared fixtures: the real AGL1K data beside the checkout, seeded signals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
AGL1K = SHARED / "agl1k"
REAL_MP3 = sorted(AGL1K.glob("*.mp3")) if AGL1K.is_dir() else []


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` of the checkout; tests using it skip only when absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared (the AGL1K data) is not beside this checkout")
    return SHARED


@pytest.fixture(scope="session")
def real_stereo_32k(shared_dir: Path) -> list[np.ndarray]:
    """First 20 s of each real Aporee recording, decoded by soundfile and
    resampled to 32 kHz by soxr, as ``[2, n]`` float32."""
    sf = pytest.importorskip("soundfile")
    soxr = pytest.importorskip("soxr")
    out = []
    for path in sorted((shared_dir / "agl1k").glob("*.mp3")):
        data, sr = sf.read(path, dtype="float32", frames=20 * 44100, always_2d=True)
        y = soxr.resample(data, sr, 32000).astype(np.float32)
        out.append(np.ascontiguousarray(y.T))
    assert len(out) == 2, "expected the two real recordings in ../shared/agl1k"
    return out


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240207)
