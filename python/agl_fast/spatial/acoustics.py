"""Octave-band room acoustics of the simulator: materials, air, decay, diffuse tail.

* :func:`material_absorption`: octave-band energy absorption of a named
  material of ``pyroomacoustics``' database (``pra.materials_data``, read at
  run time; the database's sources are the tables of Vorländer,
  *Auralization*, 2008, appendix), on :data:`BAND_CENTRES`.
* :func:`air_absorption`: ISO 9613-1 (1993) attenuation of sound in air,
  returned as the energy coefficient ``m`` (1/m) that Eyring's formula takes.
* :func:`eyring_rt60`: reverberation time per octave band of a shoebox from
  the per-wall band absorption and the air, ``T = 24 ln(10) V / (c (-S
  ln(1 - a) + 4 m V))`` with ``a`` the area-weighted mean absorption.
* :func:`band_masks`: complementary octave-band masks on an FFT grid (flat
  inside each band, raised-cosine crossovers a quarter octave wide at the
  band edges, summing to one at every frequency): the analysis bands of the
  measurements.
* :func:`synthesis_masks`: the band model of the simulator, how octave-band
  values spread over frequency: amplitude-complementary crossovers of half
  overlap (Antoni's orthogonal-like octave filters, the bands with which
  ``pyroomacoustics`` renders its octave-band damping), so one absorption
  table gives the same spectrum in both simulators.
* :func:`diffuse_coherence`: the interaural coherence of a diffuse field at
  the receiver: computed from an HRIR set averaged over its directions
  (weighted for uniform coverage of the sphere), or the free-field
  ``sinc(2 pi f d / c)`` of two omnidirectional microphones ``d`` apart.
* :func:`diffuse_tail`: a binaural late tail, two independent noises per
  octave band mixed to the band's target coherence and shaped by the band's
  exponential decay, at the energy that statistical room acoustics gives
  (``4 pi c / V`` per second for a source whose direct sound is ``1 / r``),
  entering where the image sources stop carrying the energy.
* :func:`band_rt60`: T30 (else T20) per octave band of impulse responses, on
  the same band masks, with :func:`agl_fast.room_parameters`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from ..room import room_parameters

__all__ = [
    "BAND_CENTRES",
    "SPEED_OF_SOUND",
    "air_absorption",
    "band_coherence",
    "band_masks",
    "band_rt60",
    "diffuse_coherence",
    "diffuse_tail",
    "eyring_rt60",
    "material_absorption",
    "pra_module",
    "synthesis_masks",
]

#: Octave-band centres (Hz): ``pyroomacoustics``' bands at 32 kHz.
BAND_CENTRES = 125.0 * 2.0 ** np.arange(8)
SPEED_OF_SOUND = 343.0
#: Crossover width between neighbouring analysis bands (octaves).
_CROSSOVER = 0.25
#: Overlap of the synthesis bands: the half-width of each crossover as a
#: share of the distance from the upper band's centre to its upper edge
#: (Antoni's overlap ratio; 0.5 is ``pyroomacoustics``' default).
_SYNTHESIS_OVERLAP = 0.5


def pra_module() -> Any:
    """``pyroomacoustics``, or an ImportError naming the extra that installs it."""
    try:
        import pyroomacoustics as pra
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "scene simulation needs pyroomacoustics: pip install 'agl-fast[spatial]'"
        ) from exc
    return pra


def material_absorption(name: str) -> np.ndarray:
    """Octave-band energy absorption ``[8]`` of a ``pyroomacoustics`` material.

    The database gives 6 or 7 bands (125 Hz to 4 or 8 kHz); the bands above
    take the highest given value.
    """
    return np.array(_material(str(name)))


@functools.lru_cache(maxsize=512)
def _material(name: str) -> tuple[float, ...]:
    pra = pra_module()
    for table in pra.materials_data["absorption"].values():
        if name in table:
            c = [float(x) for x in table[name]["coeffs"]]
            return tuple((c + [c[-1]] * len(BAND_CENTRES))[: len(BAND_CENTRES)])
    raise ParameterError(f"unknown material {name!r} (pyroomacoustics' materials database)")


def air_absorption(
    freqs: Any = BAND_CENTRES,
    *,
    temperature: float = 20.0,
    humidity: float = 50.0,
    pressure_kpa: float = 101.325,
) -> np.ndarray:
    """Energy attenuation coefficient of air ``m`` (1/m) after ISO 9613-1.

    Parameters
    ----------
    freqs : array_like
        Frequencies (Hz).
    temperature : float
        Air temperature (degrees Celsius).
    humidity : float
        Relative humidity (%).
    pressure_kpa : float
        Atmospheric pressure (kPa).

    Returns
    -------
    np.ndarray
        ``m`` per frequency; the pressure of a wave falls as ``exp(-m r / 2)``
        and ISO's attenuation in dB/m is ``10 log10(e) m``.
    """
    f = np.asarray(freqs, dtype=np.float64)
    t = temperature + 273.15
    pr, t0, t01 = 101.325, 293.15, 273.16
    pa = pressure_kpa / pr
    h = humidity * 10 ** (-6.8346 * (t01 / t) ** 1.261 + 4.6151) / pa  # molar %, water vapour
    fro = pa * (24 + 4.04e4 * h * (0.02 + h) / (0.391 + h))
    frn = pa * (t / t0) ** -0.5 * (9 + 280 * h * math.exp(-4.170 * ((t / t0) ** (-1 / 3) - 1)))
    alpha_db = 8.686 * f**2 * (
        1.84e-11 / pa * (t / t0) ** 0.5
        + (t / t0) ** -2.5
        * (0.01275 * math.exp(-2239.1 / t) / (fro + f**2 / fro)
           + 0.1068 * math.exp(-3352.0 / t) / (frn + f**2 / frn))
    )  # fmt: skip
    return np.asarray(alpha_db / (10 * math.log10(math.e)))


def eyring_rt60(
    room_dim: Any, absorption: Any, air: Any = None, *, c: float = SPEED_OF_SOUND
) -> np.ndarray:
    """Eyring's reverberation time (s) per band of a shoebox.

    Parameters
    ----------
    room_dim : sequence of 3 float
        Length, width, height (m).
    absorption : array_like [shape=(6, B)]
        Energy absorption of the walls east, west, north, south, floor,
        ceiling (walls at ``x = L``, ``x = 0``, ``y = W``, ``y = 0``).
    air : array_like [shape=(B,)] or None
        Air attenuation ``m`` (1/m, :func:`air_absorption`); None: none.
    """
    lx, ly, lz = (float(x) for x in room_dim)
    a = np.asarray(absorption, dtype=np.float64)
    areas = np.array([ly * lz, ly * lz, lx * lz, lx * lz, lx * ly, lx * ly])
    s, v = float(areas.sum()), lx * ly * lz
    mean = np.clip(areas @ a / s, 1e-6, 1 - 1e-9)
    m = np.zeros_like(mean) if air is None else np.asarray(air, dtype=np.float64)
    return np.asarray(24 * math.log(10) * v / (c * (-s * np.log1p(-mean) + 4 * m * v)))


def band_masks(n_fft: int, sr: float) -> np.ndarray:
    """Octave-band masks ``[8, n_fft // 2 + 1]`` summing to one at every bin.

    Band ``b`` is centred on ``BAND_CENTRES[b]``; the first band reaches down
    to DC and the last up to Nyquist.
    """
    f = np.fft.rfftfreq(n_fft, 1.0 / sr)
    x = np.log2(np.maximum(f, 1e-3) / BAND_CENTRES[0])
    nb = len(BAND_CENTRES)
    up = np.zeros((nb - 1, f.size))  # share of the upper band at each crossover
    for b in range(nb - 1):
        t = np.clip((x - (b + 0.5)) / _CROSSOVER + 0.5, 0.0, 1.0)
        up[b] = np.sin(0.5 * math.pi * t) ** 2
    masks = np.ones((nb, f.size))
    for b in range(nb):
        if b > 0:
            masks[b] *= up[b - 1]
        if b < nb - 1:
            masks[b] *= 1.0 - up[b]
    return masks


def synthesis_masks(n_fft: int, sr: float) -> np.ndarray:
    """Octave-band synthesis masks ``[8, n_fft // 2 + 1]`` summing to one at every bin.

    The band model of the simulator: what an octave-band value (wall
    damping, air attenuation, decay) means between the band centres. The
    crossover from band ``b - 1`` to band ``b`` is centred on the band edge
    ``f_b / sqrt(2)`` and is ``(sqrt(2) - 1) f_b`` wide (linear in
    frequency, ``sin^2`` in amplitude): from ``f_b / 2`` to ``0.914 f_b``.
    These are the amplitude responses (squared windows) of J. Antoni's
    orthogonal-like octave filters with half overlap (J. Acoust. Soc. Am.
    127(2), 2010), with which ``pyroomacoustics`` renders both its image
    sources and its ray-traced tail, so one absorption table gives the same
    spectrum in both simulators. The first band reaches down to DC and the
    last up to Nyquist.
    """
    f = np.fft.rfftfreq(n_fft, 1.0 / sr)
    nb = len(BAND_CENTRES)
    masks = np.ones((nb, f.size))
    for b in range(1, nb):
        centre = float(BAND_CENTRES[b])
        half = _SYNTHESIS_OVERLAP * (math.sqrt(2.0) - 1.0) * centre
        phi = np.clip((f - centre / math.sqrt(2.0)) / half, -1.0, 1.0)
        up = np.sin(0.25 * math.pi * (phi + 1.0)) ** 2  # share of band b
        masks[b] *= up
        masks[b - 1] *= 1.0 - up
    return masks


def diffuse_coherence(
    freqs: Any, *, hrtf: Any = None, spacing: float = 0.18, c: float = SPEED_OF_SOUND
) -> np.ndarray:
    """Interaural coherence (real part) of a diffuse field at the receiver.

    With ``hrtf`` (:class:`.hrtf.Hrtf`): its ``coherence``
    (:func:`.hrtf.diffuse_field_coherence`, the set averaged over its
    directions), interpolated to ``freqs``. Without: two
    omnidirectional microphones ``spacing`` metres apart in free field,
    ``sin(k d) / (k d)``.
    """
    f = np.asarray(freqs, dtype=np.float64)
    if hrtf is None:
        return np.asarray(np.sinc(2 * f * spacing / c))
    gamma = hrtf.coherence
    if not np.size(gamma):
        from .hrtf import diffuse_field_coherence

        gamma = diffuse_field_coherence(hrtf.directions, hrtf.irs)
    n_fft = 4 * hrtf.irs.shape[-1]
    return np.interp(f, np.fft.rfftfreq(n_fft, 1.0 / hrtf.sr), gamma)


def band_coherence(x: np.ndarray, sr: float, coherence: Any = None) -> np.ndarray:
    """Octave-band interaural coherence ``[8]`` of binaural signals.

    ``x`` is ``[2, n]`` or ``[k, 2, n]`` (cross- and auto-spectra summed
    over the ``k`` signals): ``Re sum S_LR / sqrt(sum S_LL sum S_RR)`` over
    each band's bins. With ``coherence`` (a model on the FFT grid of ``x``,
    ``[n // 2 + 1]``) the same band average of the model is returned instead,
    weighted by the signals' auto-spectra, so measurement and model are
    compared band for band.
    """
    y = np.asarray(x, dtype=np.float64)
    y = y[None] if y.ndim == 2 else y
    spec = np.fft.rfft(y, axis=-1)
    masks = band_masks(y.shape[-1], sr) ** 2
    ll = (np.abs(spec[:, 0]) ** 2).sum(0)
    rr = (np.abs(spec[:, 1]) ** 2).sum(0)
    cross = np.real(spec[:, 0] * np.conj(spec[:, 1])).sum(0)
    if coherence is not None:
        cross = np.asarray(coherence) * np.sqrt(ll * rr)
    num = masks @ cross
    return np.asarray(num / np.sqrt(np.maximum((masks @ ll) * (masks @ rr), 1e-300)))


def _orthogonal_noise(rng: np.random.Generator, n: int, masks: np.ndarray) -> np.ndarray:
    """Spectra ``[2, n // 2 + 1]`` of two white noises made orthogonal (and of
    equal energy) within every band, so that a mix hits its coherence exactly."""
    spec = np.fft.rfft(rng.standard_normal((2, n)), axis=-1)
    a, b = spec
    for m in masks > 0.5:
        proj = np.vdot(a[m], b[m]) / max(np.vdot(a[m], a[m]).real, 1e-30)
        b[m] = b[m] - proj * a[m]
        b[m] *= math.sqrt(np.vdot(a[m], a[m]).real / max(np.vdot(b[m], b[m]).real, 1e-30))
    return spec


def diffuse_tail(
    rt60: Any,
    coherence: Any,
    early_energy: np.ndarray,
    volume: float,
    *,
    sr: int,
    onset: int,
    offset: int,
    rng: np.random.Generator,
    c: float = SPEED_OF_SOUND,
) -> np.ndarray:
    """Binaural late tail ``[2, n]`` of a room (``1 / r`` direct-sound scale).

    Parameters
    ----------
    rt60 : array_like [shape=(8,)]
        Reverberation time per octave band (s).
    coherence : callable
        ``coherence(freqs) -> [F]``: the target interaural coherence.
    early_energy : np.ndarray [shape=(8, n)]
        Energy per sample and band of the image sources already rendered
        (omnidirectional, at the head centre); sets the tail's length ``n``.
    volume : float
        Room volume (m^3).
    sr : int
    onset : int
        Sample of the direct sound; the tail is zero before it.
    offset : int
        Sample of time zero (emission): the decay runs from there.
    rng : np.random.Generator

    Notes
    -----
    The expected energy per sample of band ``b`` is ``4 pi c / (V sr)
    exp(-6 ln(10) t / T_b)``; its share already carried by the image
    sources (their energy smoothed over 8 ms) is left out, so the tail
    fills in where the images thin out.
    """
    nb, n = early_energy.shape
    masks = synthesis_masks(n, sr)
    t = (np.arange(n) - offset) / sr
    expected = (
        4
        * math.pi
        * c
        / (volume * sr)
        * np.exp(
            -6 * math.log(10) * np.maximum(t, 0)[None] / np.asarray(rt60, dtype=np.float64)[:, None]
        )
    )
    win = max(1, round(0.008 * sr))
    kernel = np.ones(win) / win
    smooth = np.stack([np.convolve(e, kernel, mode="same") for e in early_energy])
    share = np.clip(1.0 - smooth / np.maximum(expected, 1e-300), 0.0, 1.0)
    share[:, :onset] = 0.0
    gains = np.sqrt(expected * share)
    spec = _orthogonal_noise(rng, n, masks)
    gamma = np.clip(np.asarray(coherence(np.fft.rfftfreq(n, 1.0 / sr))), -1.0, 1.0)
    left, right = spec[0], gamma * spec[0] + np.sqrt(1.0 - gamma**2) * spec[1]
    out = np.zeros((2, n))
    for b in range(nb):
        band = np.fft.irfft(np.stack([left, right]) * masks[b], n, axis=-1)
        out += band * gains[b]
    return out


def band_rt60(ir: Any, sr: float) -> np.ndarray:
    """T30 (T20 where T30 is not measurable) per octave band, ``[..., 8]`` (s).

    Each channel of ``ir`` (``[L]`` or ``[channels, L]``) is split with
    :func:`band_masks` and measured with :func:`agl_fast.room_parameters`
    (plain Schroeder integration).
    """
    h = np.asarray(ir, dtype=np.float64)
    flat = h.reshape(-1, h.shape[-1])
    n_fft = 1 << math.ceil(math.log2(flat.shape[-1] + 1))
    spec = np.fft.rfft(flat, n_fft, axis=-1)
    bands = np.fft.irfft(spec[:, None] * band_masks(n_fft, sr)[None], n_fft, axis=-1)
    p = room_parameters(bands[..., : flat.shape[-1]].astype(np.float32), sr, method="none")
    t30, t20 = np.asarray(p["t30"]), np.asarray(p["t20"])
    return np.where(np.isnan(t30), t20, t30).reshape(*h.shape[:-1], len(BAND_CENTRES))
