"""BiDepth-style binaural scene simulation in shoebox rooms.

Rooms come from ``pyroomacoustics`` (the ``spatial`` extra): random
dimensions, one random energy absorption and scattering coefficient per wall,
image sources up to ``max_order`` plus ray tracing for the late tail.

Binaural receiver (``receiver``):

``'hrtf'``
    A measured head-related transfer function set read from a SOFA file
    (HDF5, read with ``h5py``); by default the MIT KEMAR set that Debian's
    ``libmysofa1`` installs (``/usr/share/libmysofa/MIT_KEMAR_normal_pinna.sofa``).
    Every image source up to ``max_order`` is rendered through the HRIR of
    its direction (nearest measured direction, in the head frame) with the
    image's wall damping and ``1 / distance`` spreading, delayed by its
    travel time; the ray-traced tail (the energy of the reflections of
    higher order, which ``pyroomacoustics`` computes apart from the image
    sources) is picked up by two omnidirectional microphones at the ears and
    filtered by the diffuse-field HRIR of each ear.
    HRIRs are resampled to ``sr`` and scaled to unit mean energy over
    directions and ears.
``'two_mic'``
    The fallback when no SOFA file is available: two omnidirectional
    microphones 0.18 m apart on the interaural axis (so the interaural time
    difference is physical), and a head-shadow filter on each ear from the
    direction of the direct sound (the one-pole, one-zero spherical-head
    model of Brown and Duda, head radius 0.09 m).
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
from .defaults import MAX_ORDER, SR
from .hrtf import Hrtf, load_sofa
from .mix import spatialize
from .scene import WALL_NORMALS as _WALL_NORMALS
from .scene import Door, Scene, SceneSpec, bat_labels, sample_scene
from .scene import head_frame as _head_frame

_log = logging.getLogger("agl_fast.spatial")

__all__ = [
    "DEFAULT_SOFA",
    "Door",
    "Hrtf",
    "Scene",
    "SceneSpec",
    "bat_labels",
    "find_sofa",
    "load_sofa",
    "sample_scene",
    "simulate_brir",
    "simulate_scene",
    "spatialize",
]

DEFAULT_SOFA = (
    Path("/usr/share/libmysofa/MIT_KEMAR_normal_pinna.sofa"),
    Path("/usr/share/libmysofa/default.sofa"),
)
SPEED_OF_SOUND = 343.0
EAR_SPACING = 0.18
_FDL2 = 40  # half of pyroomacoustics' fractional-delay filter (81 taps)


def _pra() -> Any:
    try:
        import pyroomacoustics as pra
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "scene simulation needs pyroomacoustics: pip install 'agl-fast[spatial]'"
        ) from exc
    return pra


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


_WALLS = ("east", "west", "north", "south", "floor", "ceiling")


def _room(spec: SceneSpec, sr: int, source: Any, mics: np.ndarray, hybrid: bool, order: int) -> Any:
    pra = _pra()
    mats = {
        w: pra.Material(float(a), float(spec.scattering))
        for w, a in zip(_WALLS, spec.absorption, strict=True)
    }
    room = pra.ShoeBox(
        list(spec.room_dim),
        fs=sr,
        materials=mats,
        max_order=order,
        ray_tracing=hybrid,
        air_absorption=False,
    )
    room.add_source(list(source))
    room.add_microphone_array(mics)
    if hybrid:
        room.set_ray_tracing(n_rays=4000, receiver_radius=0.5, energy_thres=1e-7)
    room.compute_rir()
    return room


def _pad_stack(a: list[np.ndarray], n: int | None = None) -> np.ndarray:
    n = n or max(len(x) for x in a)
    out = np.zeros((len(a), n))
    for i, x in enumerate(a):
        out[i, : min(n, len(x))] = x[:n]
    return out


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
) -> tuple[np.ndarray, str]:
    """Binaural room impulse response ``[2, L]`` (float32) and the receiver used.

    ``rt_seed`` seeds the ray tracer (``pyroomacoustics.random.seed``, a
    global of that library) for a repeatable tail. With ``door``, the source
    stands outside the room and is heard through that door and through the
    wall (see :class:`Door`).
    """
    if door is not None:
        return _through_door(spec, source, door, sr=sr, receiver=receiver, hrtf=hrtf,
                             max_order=max_order, ray_tracing=ray_tracing,
                             rt_seed=rt_seed)  # fmt: skip
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
    ears = np.stack([centre + frame[1] * EAR_SPACING / 2, centre - frame[1] * EAR_SPACING / 2], 1)
    if rt_seed is not None and hasattr(_pra(), "random"):
        _pra().random.seed(int(rt_seed))
    full = _room(spec, sr, source, ears, ray_tracing, max_order)
    full_rir = _pad_stack([full.rir[0][0], full.rir[1][0]])
    if mode == "two_mic":
        v = frame @ (np.asarray(source, dtype=np.float64) - centre)
        v /= np.linalg.norm(v)
        h = np.stack([_head_shadow(full_rir[0], v[1], sr), _head_shadow(full_rir[1], -v[1], sr)])
        return h.astype(np.float32), mode
    assert hrtf is not None
    if ray_tracing:
        ism = _room(spec, sr, source, ears, False, max_order)
        ism_rir = _pad_stack([ism.rir[0][0], ism.rir[1][0]], full_rir.shape[1])
        tail = full_rir - ism_rir
        if hrtf.diffuse.shape[-1]:
            tail = np.stack(
                [np.convolve(tail[e], hrtf.diffuse[e])[: tail.shape[1]] for e in range(2)]
            )
        images, damping = ism.sources[0].images, ism.sources[0].damping[0]
    else:
        tail = np.zeros((2, 0))
        images, damping = full.sources[0].images, full.sources[0].damping[0]
    v = (images - centre[:, None]).T @ frame.T  # [K, 3] head frame
    dist = np.linalg.norm(v, axis=1)
    delay = np.round(dist / SPEED_OF_SOUND * sr).astype(np.int64) + _FDL2
    hrirs = hrtf.nearest(v) * (damping / dist)[:, None, None]
    n = max(int(delay.max()) + hrtf.irs.shape[-1], tail.shape[1])
    out = np.zeros((2, n))
    for k in range(len(delay)):
        out[:, delay[k] : delay[k] + hrirs.shape[-1]] += hrirs[k]
    out[:, : tail.shape[1]] += tail
    return out.astype(np.float32), mode


def _through_door(
    spec: SceneSpec, source: Any, door: Door, *, sr: int, receiver: str, hrtf: Hrtf | None,
    max_order: int, ray_tracing: bool, rt_seed: int | None,
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
        ray_tracing=ray_tracing, rt_seed=rt_seed,
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
    that seed also seeds the ray tracer unless ``rt_seed`` is given).

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
