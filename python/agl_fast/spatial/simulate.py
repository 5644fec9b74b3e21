"""BiDepth-style binaural scene simulation in shoebox rooms.

Shoebox rooms (``pyroomacoustics``, the ``spatial`` extra, gives the image
sources and their per-band wall damping): octave-band materials per wall
and air absorption (:mod:`.acoustics`), image sources up to ``max_order``,
then a statistical binaural late tail with Eyring's decay per band and the
interaural coherence of a diffuse field at the receiver
(:func:`.acoustics.diffuse_tail`).

Binaural receiver (``receiver``):

``'hrtf'``
    A measured head-related transfer function set read from a SOFA file
    (HDF5, read with ``h5py``); by default the MIT KEMAR set that Debian's
    ``libmysofa1`` installs (``/usr/share/libmysofa/MIT_KEMAR_normal_pinna.sofa``).
    Every image source up to ``max_order`` is rendered through the HRIR of
    its direction (nearest measured direction, in the head frame) with the
    image's wall damping and air attenuation per octave band and ``1 /
    distance`` spreading, delayed by its travel time; the late tail has the
    diffuse-field coherence computed from the HRIR set and is filtered by
    the diffuse-field HRIR of each ear.
    HRIRs are resampled to ``sr`` and scaled to unit mean energy over
    directions and ears.
``'two_mic'``
    The fallback when no SOFA file is available: two omnidirectional
    microphones 0.18 m apart on the interaural axis (so the interaural time
    difference is physical), and a head-shadow filter on each ear from the
    direction of the direct sound (the one-pole, one-zero spherical-head
    model of Brown and Duda, head radius 0.09 m) on the image sources; the
    late tail has the free-field coherence of the two microphones.
``'auto'``
    ``'hrtf'`` when a SOFA file is found, else ``'two_mic'``.

Labels follow BAT / Spatial-AST: azimuth in whole degrees ``0..359``
counter-clockwise from the listener's right (straight ahead is 90, left 180,
behind 270); elevation ``0..179`` with the horizontal plane at 90 (up is
larger); distance class ``round(2 * d)`` clipped to ``0..20`` (0.5 m steps up
to 10 m).

The scene geometry (:class:`SceneSpec`, :func:`sample_scene`,
:func:`bat_labels`) lives in :mod:`agl_fast.spatial.scene`, HRIR sets in
:mod:`agl_fast.spatial.hrtf` and mixing in :mod:`agl_fast.spatial.mix`; their
public names are importable from here too.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from ..room import room_parameters
from .acoustics import (
    BAND_CENTRES,
    SPEED_OF_SOUND,
    air_absorption,
    diffuse_coherence,
    diffuse_tail,
    eyring_rt60,
    material_absorption,
    pra_module,
    synthesis_masks,
)
from .defaults import MAX_ORDER, SR
from .hrtf import Hrtf, load_sofa
from .mix import spatialize
from .scene import WALL_NORMALS as _WALL_NORMALS
from .scene import Door, Scene, SceneSpec, bat_labels, sample_scene
from .scene import head_frame as _head_frame

_log = logging.getLogger("agl_fast.spatial")

__all__ = [
    "DEFAULT_SOFA",
    "WALLS",
    "Door",
    "Hrtf",
    "Scene",
    "SceneSpec",
    "bat_labels",
    "find_sofa",
    "load_sofa",
    "rir_pool",
    "sample_scene",
    "simulate_brir",
    "simulate_scene",
    "spatialize",
    "wall_absorption",
]

DEFAULT_SOFA = (
    Path("/usr/share/libmysofa/MIT_KEMAR_normal_pinna.sofa"),
    Path("/usr/share/libmysofa/default.sofa"),
)
EAR_SPACING = 0.18
_FDL2 = 40  # half of pyroomacoustics' fractional-delay filter (81 taps)


def _pra() -> Any:
    return pra_module()


def find_sofa() -> Path | None:
    """The SOFA file to use: ``$AGL_FAST_SOFA``, else one a package installed."""
    env = os.environ.get("AGL_FAST_SOFA")
    if env:
        return Path(env)
    return next((p for p in DEFAULT_SOFA if p.is_file()), None)


_warned_two_mic = False


def _sofa_or_warn(receiver: str) -> Path | None:
    """:func:`find_sofa`; with ``receiver="auto"`` and no file, a warning
    (once per process) that scenes fall back to two free-field microphones."""
    global _warned_two_mic
    path = find_sofa()
    if path is None and receiver == "auto" and not _warned_two_mic:
        _warned_two_mic = True
        _log.warning(
            "no HRTF (SOFA) file found: simulating two free-field microphones instead of "
            "a head; set AGL_FAST_SOFA to a SimpleFreeFieldHRIR file for binaural scenes"
        )
    return path


#: The order of a scene's surfaces in ``absorption`` and ``materials``.
WALLS = ("east", "west", "north", "south", "floor", "ceiling")


def wall_absorption(spec: SceneSpec) -> np.ndarray:
    """Octave-band energy absorption ``[6, 8]`` of a scene's walls: from its
    named materials (:func:`.acoustics.material_absorption`), else each wall's
    broadband ``absorption`` in every band."""
    if spec.materials:
        if len(spec.materials) != len(WALLS):
            raise ParameterError(f"materials must name 6 walls, got {len(spec.materials)}")
        return np.stack([material_absorption(m) for m in spec.materials])
    return np.repeat(np.asarray(spec.absorption, dtype=np.float64)[:, None], len(BAND_CENTRES), 1)


def _images(spec: SceneSpec, sr: int, source: Any, order: int, coeffs: np.ndarray) -> Any:
    """Image sources ``[3, K]`` and their band damping ``[8, K]`` (``pyroomacoustics``)."""
    pra = _pra()
    mats = {
        w: pra.Material({"coeffs": [float(x) for x in a], "center_freqs": list(BAND_CENTRES)},
                        float(spec.scattering))
        for w, a in zip(WALLS, coeffs, strict=True)
    }  # fmt: skip
    room = pra.ShoeBox(list(spec.room_dim), fs=sr, materials=mats, max_order=order,
                       air_absorption=False)  # fmt: skip
    room.add_source(list(source))
    room.add_microphone(np.asarray(spec.listener, dtype=np.float64))
    room.image_source_model()
    damping = np.asarray(room.sources[0].damping, dtype=np.float64)
    rows = [damping[min(b, damping.shape[0] - 1)] for b in range(len(BAND_CENTRES))]
    return np.asarray(room.sources[0].images, dtype=np.float64), np.stack(rows)


def _head_shadow(h: np.ndarray, cos_theta: float, sr: int) -> np.ndarray:
    """Brown-Duda spherical-head shadow for an ear at angle theta to the source."""
    from scipy.signal import bilinear, lfilter

    theta = math.degrees(math.acos(max(-1.0, min(1.0, cos_theta))))
    alpha = 1.05 + 0.95 * math.cos(math.radians(theta * 180.0 / 150.0))
    w0 = SPEED_OF_SOUND / (EAR_SPACING / 2)
    b, a = bilinear([alpha / (2 * w0), 1.0], [1 / (2 * w0), 1.0], fs=sr)
    return np.asarray(lfilter(b, a, h))


def _door_point(spec: SceneSpec, door: Door, inset: float) -> np.ndarray:
    """The door centre moved ``inset`` metres into the room."""
    axis, sign = _WALL_NORMALS[door.wall]
    p = np.asarray(door.centre, dtype=np.float64).copy()
    p[axis] -= sign * inset
    return p


def _free_field(
    spec: SceneSpec, source: np.ndarray, mode: str, hrtf: Hrtf | None, sr: int
) -> np.ndarray:
    """Binaural free-field direct sound ``[2, L]`` of a point source (1 / d)."""
    frame = _head_frame(spec.yaw_deg)
    centre = np.asarray(spec.listener, dtype=np.float64)
    v = frame @ (source - centre)
    if mode == "hrtf" and hrtf is not None:
        d = float(np.linalg.norm(v))
        delay = round(d / SPEED_OF_SOUND * sr) + _FDL2
        out = np.zeros((2, delay + hrtf.irs.shape[-1]))
        out[:, delay:] = hrtf.nearest(v[None])[0] / d
        return out
    ears = [centre + frame[1] * EAR_SPACING / 2, centre - frame[1] * EAR_SPACING / 2]
    dists = [float(np.linalg.norm(source - e)) for e in ears]
    out = np.zeros((2, round(max(dists) / SPEED_OF_SOUND * sr) + _FDL2 + 1))
    for e, d in enumerate(dists):
        out[e, round(d / SPEED_OF_SOUND * sr) + _FDL2] = 1.0 / d
    u = v / np.linalg.norm(v)
    return np.stack([_head_shadow(out[0], u[1], sr), _head_shadow(out[1], -u[1], sr)])


def _add(a: np.ndarray, b: np.ndarray, shift: int = 0) -> np.ndarray:
    out = np.zeros((2, max(a.shape[1], shift + b.shape[1])))
    out[:, : a.shape[1]] += a
    out[:, shift : shift + b.shape[1]] += b
    return out


def simulate_brir(
    spec: SceneSpec,
    source: Any,
    *,
    sr: int = SR,
    receiver: str = "auto",
    hrtf: Hrtf | None = None,
    max_order: int = MAX_ORDER,
    ray_tracing: bool = True,
    rt_seed: int | None = None,
    door: Door | None = None,
    air: bool = True,
) -> tuple[np.ndarray, str]:
    """Binaural room impulse response ``[2, L]`` (float32) and the receiver used.

    Image sources up to ``max_order`` (octave-band wall damping,
    :func:`wall_absorption`, and air absorption after ISO 9613-1 when
    ``air``), then, with ``ray_tracing`` (the name kept from the ray-traced
    tail it replaces), the binaural diffuse tail of
    :func:`.acoustics.diffuse_tail`: per octave band, Eyring's decay and the
    interaural coherence of a diffuse field at the receiver. ``rt_seed``
    seeds the tail's noise. With ``door``, the source stands outside the
    room and is heard through that door and through the wall (see
    :class:`Door`).
    """
    if door is not None:
        return _through_door(spec, source, door, sr=sr, receiver=receiver, hrtf=hrtf,
                             max_order=max_order, ray_tracing=ray_tracing,
                             rt_seed=rt_seed, air=air)  # fmt: skip
    if receiver not in ("auto", "hrtf", "two_mic"):
        raise ParameterError(f"receiver must be 'auto', 'hrtf' or 'two_mic', got {receiver!r}")
    if receiver != "two_mic" and hrtf is None:
        path = _sofa_or_warn(receiver)
        if path is not None:
            hrtf = load_sofa(path, sr)
        elif receiver == "hrtf":
            raise ParameterError("receiver='hrtf' needs a SOFA file: set AGL_FAST_SOFA")
    mode = "hrtf" if receiver != "two_mic" and hrtf is not None else "two_mic"
    frame = _head_frame(spec.yaw_deg)
    centre = np.asarray(spec.listener, dtype=np.float64)
    coeffs = wall_absorption(spec)
    m_air = air_absorption() if air else np.zeros(len(BAND_CENTRES))
    src = np.asarray(source, dtype=np.float64)
    images, damping = _images(spec, sr, src, max_order, coeffs)
    early, energy, onset = _early(spec, images, damping, m_air, mode, hrtf, sr)
    if mode == "two_mic":
        v = frame @ (src - centre)
        v /= np.linalg.norm(v)
        early = np.stack([_head_shadow(early[0], v[1], sr), _head_shadow(early[1], -v[1], sr)])
    if not ray_tracing:
        return early.astype(np.float32), mode
    rt60 = eyring_rt60(spec.room_dim, coeffs, m_air)
    n = max(early.shape[1], _FDL2 + math.ceil(1.5 * float(np.max(rt60)) * sr) + 1)
    energy = np.pad(energy, ((0, 0), (0, n - energy.shape[1])))

    def coherence(f: np.ndarray) -> np.ndarray:
        return diffuse_coherence(f, hrtf=hrtf if mode == "hrtf" else None, spacing=EAR_SPACING)

    tail = diffuse_tail(rt60, coherence, energy, float(np.prod(spec.room_dim)), sr=sr,
                        onset=onset, offset=_FDL2, rng=np.random.default_rng(rt_seed))  # fmt: skip
    if mode == "hrtf" and hrtf is not None and hrtf.diffuse.shape[-1]:
        tail = np.stack([np.convolve(tail[e], hrtf.diffuse[e])[:n] for e in range(2)])
    out = np.zeros((2, max(n, early.shape[1])))
    out[:, : early.shape[1]] += early
    out[:, :n] += tail
    return out.astype(np.float32), mode


def _early(
    spec: SceneSpec, images: np.ndarray, damping: np.ndarray, air: np.ndarray, mode: str,
    hrtf: Hrtf | None, sr: int,
) -> tuple[np.ndarray, np.ndarray, int]:  # fmt: skip
    """The image sources rendered binaurally ``[2, n]`` (each band damped by its
    walls and the air, ``1 / r``), their energy per band and sample at the head
    centre ``[8, n]``, and the sample of the direct sound."""
    frame = _head_frame(spec.yaw_deg)
    centre = np.asarray(spec.listener, dtype=np.float64)
    rel = images - centre[:, None]
    dist = np.linalg.norm(rel, axis=0)
    amp = damping * np.exp(-0.5 * air[:, None] * dist[None]) / dist[None]  # [8, K]
    delay = np.round(dist / SPEED_OF_SOUND * sr).astype(np.int64) + _FDL2
    nb = len(BAND_CENTRES)
    if mode == "hrtf" and hrtf is not None:
        kernels = hrtf.nearest(rel.T @ frame.T).astype(np.float64)  # [K, 2, N]
        ear_delay = np.stack([delay, delay], 1)
    else:
        ears = [centre + frame[1] * EAR_SPACING / 2, centre - frame[1] * EAR_SPACING / 2]
        d_ear = np.stack([np.linalg.norm(images - e[:, None], axis=0) for e in ears], 1)
        ear_delay = np.round(d_ear / SPEED_OF_SOUND * sr).astype(np.int64) + _FDL2
        amp_ear = dist[:, None] / d_ear  # 1 / r at each microphone
        kernels = np.zeros((len(dist), 2, 1))
        kernels[:, :, 0] = amp_ear
    n = int(ear_delay.max()) + kernels.shape[-1]
    acc = np.zeros((nb, 2, n))
    for k in range(len(dist)):
        for e in range(2):
            d0 = int(ear_delay[k, e])
            acc[:, e, d0 : d0 + kernels.shape[-1]] += amp[:, k, None] * kernels[k, e][None]
    n_fft = 1 << math.ceil(math.log2(n + 1))
    spec_acc = np.fft.rfft(acc, n_fft, axis=-1)
    bands = synthesis_masks(n_fft, sr)
    early = np.fft.irfft(np.einsum("bef,bf->ef", spec_acc, bands), n_fft)[:, :n]
    energy = np.zeros((nb, n))
    for b in range(nb):
        np.add.at(energy[b], delay, amp[b] ** 2)
    return early, energy, int(delay.min())


def _through_door(
    spec: SceneSpec, source: Any, door: Door, *, sr: int, receiver: str, hrtf: Hrtf | None,
    max_order: int, ray_tracing: bool, rt_seed: int | None, air: bool,
) -> tuple[np.ndarray, str]:  # fmt: skip
    src = np.asarray(source, dtype=np.float64)
    inside = _door_point(spec, door, 0.05)
    centre = np.asarray(spec.listener, dtype=np.float64)
    if receiver != "two_mic" and hrtf is None:
        path = _sofa_or_warn(receiver)
        hrtf = load_sofa(path, sr) if path is not None else None
    mode = "hrtf" if receiver != "two_mic" and hrtf is not None else "two_mic"
    wall = _free_field(spec, src, mode, hrtf, sr) * 10 ** (-door.transmission_loss_db / 20)
    if not door.open:
        return wall.astype(np.float32), mode
    h_door, mode = simulate_brir(
        spec, inside, sr=sr, receiver=mode, hrtf=hrtf, max_order=max_order,
        ray_tracing=ray_tracing, rt_seed=rt_seed, air=air,
    )  # fmt: skip
    d1 = float(np.linalg.norm(src - np.asarray(door.centre)))
    d2 = float(np.linalg.norm(inside - centre))
    gain = door.diffraction_gain * d2 / (d1 + d2)
    shift = round(d1 / SPEED_OF_SOUND * sr)
    return _add(wall, gain * np.asarray(h_door, np.float64), shift).astype(np.float32), mode


def _acoustics(brir: np.ndarray, sr: int) -> dict[str, float]:
    p = room_parameters(brir, sr, method="none")
    with np.errstate(all="ignore"):
        return {
            "rt60": float(np.nanmean(np.where(np.isnan(p["t30"]), p["t20"], p["t30"]))),
            "edt": float(np.nanmean(p["edt"])),
            "drr": float(np.nanmean(p["drr"])),
        }


def simulate_scene(
    spec_or_seed: SceneSpec | int,
    *,
    n_sources: int = 1,
    sr: int = SR,
    receiver: str = "auto",
    hrtf: Hrtf | None = None,
    max_order: int = MAX_ORDER,
    rt_seed: int | None = None,
    through_door: float = 0.0,
) -> Scene:
    """Simulate every source of a scene (drawn from a seed if an int is given;
    that seed also seeds the late tail's noise unless ``rt_seed`` is given).

    Labels carry ``through_door`` (bool); for sources behind a door also
    ``path_m`` (source to door to listener, m) and ``door_azimuth`` (BAT
    azimuth of the opening, where the sound seems to come from); the
    direction and distance labels are those of the true source position.
    """
    if rt_seed is None and isinstance(spec_or_seed, int):
        rt_seed = spec_or_seed
    spec = (
        sample_scene(
            np.random.default_rng(spec_or_seed), n_sources=n_sources, through_door=through_door
        )
        if isinstance(spec_or_seed, int)
        else spec_or_seed
    )
    if hrtf is None and receiver != "two_mic":
        path = _sofa_or_warn(receiver)
        hrtf = load_sofa(path, sr) if path is not None else None
    brirs, labels, acoustics, mode = [], [], [], "two_mic"
    for k, src in enumerate(spec.sources):
        h, mode = simulate_brir(
            spec,
            src,
            sr=sr,
            receiver=receiver,
            hrtf=hrtf,
            max_order=max_order,
            rt_seed=None if rt_seed is None else rt_seed + 7919 * k,
            door=spec.door(k),
        )
        brirs.append(h)
        lab = bat_labels(spec.listener, spec.yaw_deg, src)
        door = spec.door(k)
        lab["through_door"] = door is not None
        if door is not None:
            lab["door_open"] = door.open
            d1 = float(np.linalg.norm(np.subtract(src, door.centre)))
            lab["path_m"] = d1 + float(np.linalg.norm(np.subtract(door.centre, spec.listener)))
            lab["door_azimuth"] = bat_labels(spec.listener, spec.yaw_deg, door.centre)["azimuth"]
        labels.append(lab)
        acoustics.append(_acoustics(h, sr))
    return Scene(spec, brirs, sr, mode, labels, acoustics)


def rir_pool(
    seeds: list[int], positions: int, **kwargs: Any
) -> tuple[list[np.ndarray], list[dict[str, Any]], list[int]]:
    """A pool of BRIRs for :func:`agl_fast.spatial.qa.qa_from_indices`.

    One room per seed (:func:`simulate_scene` with ``n_sources=positions``
    and ``kwargs``), each with ``positions`` source positions. Returns the
    BRIRs (``[2, L]`` float32), their BAT labels (with the scene's
    ``acoustics`` entries) and the index of the room each belongs to.
    """
    brirs: list[np.ndarray] = []
    labels: list[dict[str, Any]] = []
    rooms: list[int] = []
    for r, seed in enumerate(seeds):
        scene = simulate_scene(int(seed), n_sources=positions, **kwargs)
        for h, lab, ac in zip(scene.brirs, scene.labels, scene.acoustics, strict=True):
            brirs.append(h)
            labels.append({**lab, **ac})
            rooms.append(r)
    return brirs, labels, rooms
