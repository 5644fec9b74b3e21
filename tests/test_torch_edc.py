"""The differentiable EDC loss against the Rust EDC distance."""

from __future__ import annotations

import numpy as np
import pytest

from agl_fast import room

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SR = 16000


def _irs(seed: int, t60: float, n: int = 8000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    return (rng.standard_normal((3, 2, n)) * np.exp(-6.9 / t60 * t)).astype(np.float32)


def test_loss_matches_rust_distance() -> None:
    from agl_fast.torch import edc_loss

    pred, ref = _irs(1, 0.4), _irs(2, 0.6)
    rust = room.edc_distance(pred, ref, SR, method="none", floor_db=-60.0)
    got = edc_loss(
        torch.from_numpy(pred).double(), torch.from_numpy(ref).double(), reduction="none"
    )
    assert tuple(got.shape) == rust.shape
    # float64 on both sides: 1e-6 dB.
    np.testing.assert_allclose(got.numpy(), rust, atol=1e-6)
    mean = edc_loss(torch.from_numpy(pred).double(), torch.from_numpy(ref).double())
    assert float(mean) == pytest.approx(float(rust.mean()), abs=1e-6)


def test_loss_is_differentiable_and_zero_at_the_reference() -> None:
    from agl_fast.torch import edc_loss

    ref = torch.from_numpy(_irs(3, 0.5)).double()
    pred = (ref * 0.5 + 0.01 * torch.randn_like(ref)).requires_grad_(True)
    loss = edc_loss(pred, ref)
    loss.backward()
    assert pred.grad is not None and torch.isfinite(pred.grad).all()
    assert float(edc_loss(ref, ref)) == 0.0
