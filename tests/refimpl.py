"""Straightforward numpy transcriptions of the feature recipes, written from
their formulas, used as the reference in parity tests and benchmarks."""

from __future__ import annotations

import numpy as np
import scipy.fft
import scipy.signal


def frames(y: np.ndarray, n_fft: int, hop: int, center: bool, pad_mode: str) -> np.ndarray:
    """``[t, n_fft]`` strided frames of a 1-D signal, librosa's framing."""
    if center:
        y = np.pad(y, n_fft // 2, mode=pad_mode)
    t = 1 + (len(y) - n_fft) // hop
    return np.lib.stride_tricks.as_strided(
        y, shape=(t, n_fft), strides=(y.strides[0] * hop, y.strides[0]), writeable=False
    )


def padded_window(name: str, win_length: int, n_fft: int, periodic: bool = True) -> np.ndarray:
    w = scipy.signal.get_window(name, win_length, fftbins=periodic)
    lpad = (n_fft - win_length) // 2
    out = np.zeros(n_fft)
    out[lpad : lpad + win_length] = w
    return out


def slaney_mel(sr: float, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """Slaney-scale, area-normalised triangles, from the formulas."""

    def hz_to_mel(f: np.ndarray) -> np.ndarray:
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / (np.log(6.4) / 27)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m: np.ndarray) -> np.ndarray:
        lin = m * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    freqs = np.arange(n_fft // 2 + 1) * sr / n_fft
    lo, ce, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    tri = np.maximum(0, np.minimum((freqs - lo) / (ce - lo), (hi - freqs) / (hi - ce)))
    return tri * (2.0 / (hi - lo))


def kaldi_mel(sr: float, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """Kaldi mel banks over n_fft/2 bins plus a zero Nyquist column."""

    def mel(f: np.ndarray | float) -> np.ndarray:
        return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)

    lo, hi = mel(fmin), mel(fmax)
    delta = (hi - lo) / (n_mels + 1)
    b = np.arange(n_mels)[:, None]
    left, center, right = lo + b * delta, lo + (b + 1) * delta, lo + (b + 2) * delta
    m = mel(sr / n_fft * np.arange(n_fft // 2))[None, :]
    bank = np.maximum(0, np.minimum((m - left) / (center - left), (right - m) / (right - center)))
    return np.pad(bank, ((0, 0), (0, 1)))


def bat_numpy(y: np.ndarray, sr: float = 32000) -> np.ndarray:
    """BAT recipe for one ``[2, n]`` clip -> ``[4, t, 128]``, float64 math."""
    win = padded_window("hann", 1024, 1024)
    mel = slaney_mel(sr, 1024, 128, 50.0, 14000.0)
    spec = [
        scipy.fft.rfft(frames(ch.astype(np.float64), 1024, 320, True, "reflect") * win, axis=-1)
        for ch in y
    ]
    logmel = [10 * np.log10(np.maximum(np.abs(s) @ mel.T, 1e-10)) for s in spec]
    ipd = np.angle(spec[1]) - np.angle(spec[0])
    return np.stack([*logmel, np.cos(ipd) @ mel.T, np.sin(ipd) @ mel.T]).astype(np.float32)


def bat_fast_transcription(y: np.ndarray, mel: np.ndarray, win: np.ndarray) -> np.ndarray:
    """The best plain-Python BAT transcription: float32, ``scipy.fft.rfft``
    over strided frames, matmul with the mel matrix, IPD from the normalised
    cross-spectrum. ``y`` is ``[2, n]`` float32; returns ``[4, t, n_mels]``."""
    win32 = win.astype(np.float32)
    melT = np.ascontiguousarray(mel.T.astype(np.float32))
    left = scipy.fft.rfft(frames(y[0], 1024, 320, True, "reflect") * win32, axis=-1)
    right = scipy.fft.rfft(frames(y[1], 1024, 320, True, "reflect") * win32, axis=-1)
    ml, mr = np.abs(left), np.abs(right)
    cross = right * np.conj(left)
    denom = ml * mr
    ok = denom > 0
    cos = np.where(ok, cross.real / np.where(ok, denom, 1), 1.0).astype(np.float32)
    sin = np.where(ok, cross.imag / np.where(ok, denom, 1), 0.0).astype(np.float32)
    return np.stack(
        [
            10 * np.log10(np.maximum(ml @ melT, 1e-10)),
            10 * np.log10(np.maximum(mr @ melT, 1e-10)),
            cos @ melT,
            sin @ melT,
        ]
    )


def efficientat_numpy(y: np.ndarray, sr: float = 32000) -> np.ndarray:
    """EfficientAT eval front end for one clip -> ``[128, t]``, float64."""
    y = y.astype(np.float64)
    pre = y[1:] - 0.97 * y[:-1]
    win = padded_window("hann", 800, 1024, periodic=False)
    power = np.abs(scipy.fft.rfft(frames(pre, 1024, 320, True, "reflect") * win, axis=-1)) ** 2
    mel = kaldi_mel(sr, 1024, 128, 0.0, 15000.0)
    return ((np.log(power @ mel.T + 1e-5) + 4.5) / 5.0).T.astype(np.float32)
