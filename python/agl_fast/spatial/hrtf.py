"""Measured head-related transfer functions (HRIR sets read from SOFA files)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..exceptions import ParameterError
from .defaults import SR

__all__ = ["Hrtf", "diffuse_field_coherence", "load_sofa"]


@dataclass
class Hrtf:
    """A measured HRIR set in the head frame (x front, y left, z up).

    Attributes
    ----------
    directions : np.ndarray [shape=(M, 3)]
        Unit vectors of the measured directions.
    irs : np.ndarray [shape=(M, 2, N), dtype=float32]
        Left/right HRIRs at ``sr``, unit mean energy.
    sr : int
    source : str
        Where the set was read from.
    diffuse : np.ndarray [shape=(2, N), dtype=float32]
        Minimum-phase diffuse-field HRIR of each ear (the root mean square
        magnitude response over directions), applied to the late tail.
    coherence : np.ndarray [shape=(2 N + 1,)]
        Interaural coherence of a diffuse field on the ``rfft`` grid of
        ``4 N`` points at ``sr`` (:func:`diffuse_field_coherence`; empty
        until computed).
    """

    directions: np.ndarray
    irs: np.ndarray
    sr: int
    source: str
    diffuse: np.ndarray = field(default_factory=lambda: np.zeros((2, 0), np.float32))
    coherence: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def nearest(self, v: np.ndarray) -> np.ndarray:
        """HRIRs ``[K, 2, N]`` nearest to the head-frame vectors ``v`` ``[K, 3]``."""
        u = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return self.irs[np.argmax(u @ self.directions.T, axis=1)]


def load_sofa(path: str | Path, sr: int = SR) -> Hrtf:
    """Read a ``SimpleFreeFieldHRIR`` SOFA file and resample it to ``sr``."""
    import h5py
    from scipy.signal import resample_poly

    with h5py.File(path, "r") as f:
        ir = np.asarray(f["Data.IR"], dtype=np.float64)
        pos = np.asarray(f["SourcePosition"], dtype=np.float64)
        sofa_sr = float(np.asarray(f["Data.SamplingRate"]).ravel()[0])
        ptype = f["SourcePosition"].attrs.get("Type", b"spherical")
    if ir.ndim != 3 or ir.shape[1] != 2:
        raise ParameterError(f"{path}: Data.IR must be [M, 2, N], got shape {ir.shape}")
    if (ptype.decode() if isinstance(ptype, bytes) else str(ptype)).lower() == "cartesian":
        dirs = pos[:, :3]
    else:
        az, el = np.radians(pos[:, 0]), np.radians(pos[:, 1])
        dirs = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], 1)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    if round(sofa_sr) != sr:
        g = math.gcd(round(sofa_sr), sr)
        ir = resample_poly(ir, sr // g, round(sofa_sr) // g, axis=-1)
    ir /= math.sqrt(float(np.mean(np.sum(ir**2, axis=-1))))
    n_fft = 4 * ir.shape[-1]
    mag = np.sqrt(np.mean(np.abs(np.fft.rfft(ir, n_fft, axis=-1)) ** 2, axis=0))
    irs = ir.astype(np.float32)
    return Hrtf(dirs, irs, sr, str(path), _min_phase(mag, ir.shape[-1]),
                diffuse_field_coherence(dirs, irs))  # fmt: skip


def diffuse_field_coherence(directions: np.ndarray, irs: np.ndarray) -> np.ndarray:
    """Interaural coherence (real part) of a diffuse field at an HRIR set.

    ``Re sum_d w_d H_L H_R^* / sqrt(sum_d w_d |H_L|^2 sum_d w_d |H_R|^2)``
    over the directions ``[M, 3]`` (unit vectors) of ``irs`` ``[M, 2, N]``,
    each weighted by the inverse of its neighbourhood's density (a von
    Mises kernel about 9 degrees wide) so that the measured part of the
    sphere counts uniformly. Returns ``[2 N + 1]``, the ``rfft`` grid of
    ``4 N`` points.
    """
    u = np.asarray(directions, dtype=np.float64)
    w = 1.0 / np.exp(40.0 * (u @ u.T - 1.0)).sum(axis=1)
    spec = np.fft.rfft(np.asarray(irs, dtype=np.float64), 4 * irs.shape[-1], axis=-1)
    cross = np.real(np.einsum("d,df->f", w, spec[:, 0] * np.conj(spec[:, 1])))
    ll = np.einsum("d,df->f", w, np.abs(spec[:, 0]) ** 2)
    rr = np.einsum("d,df->f", w, np.abs(spec[:, 1]) ** 2)
    return np.asarray(cross / np.sqrt(np.maximum(ll * rr, 1e-30)))


def _min_phase(mag: np.ndarray, n: int) -> np.ndarray:
    """Minimum-phase impulse responses ``[..., n]`` of magnitude responses
    ``[..., n_fft // 2 + 1]`` (folded real cepstrum)."""
    n_fft = 2 * (mag.shape[-1] - 1)
    cep = np.fft.irfft(np.log(np.maximum(mag, 1e-8)), n_fft, axis=-1)
    cep[..., 1 : n_fft // 2] *= 2.0
    cep[..., n_fft // 2 + 1 :] = 0.0
    h = np.fft.irfft(np.exp(np.fft.rfft(cep, axis=-1)), n_fft, axis=-1)[..., :n]
    return h.astype(np.float32)
