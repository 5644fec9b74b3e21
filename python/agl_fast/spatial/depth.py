"""Panoramic depth images of simulated scenes, seen from the listener's head.

OWL pairs every binaural RIR of BiDepth with a panoramic depth image taken at
the receiver. Here the scenes are shoebox rooms (:mod:`.simulate`), so the
depth is computed exactly by casting one ray per pixel against the six
room surfaces.

:func:`depth_panorama`
    Equirectangular image ``[height, width]`` float32 in metres. Column
    ``j`` looks along the BAT azimuth ``(j + 0.5) * 360 / width`` degrees
    (counter-clockwise from the listener's right: 90 is ahead, 180 left,
    270 behind; the label convention of :func:`.simulate.bat_labels`), row
    ``i`` along the elevation ``90 - (i + 0.5) * 180 / height`` (the top
    row looks up). The value is the distance from the centre of the head to
    the first surface along the ray.
:func:`depth_views`
    The paper's variant: the receiver turned in ``view_deg`` (20 degree)
    steps, one pinhole depth image of ``view_deg`` horizontal field of view
    per step, the views concatenated side by side ``[height, n_views *
    view_width]``. View ``k`` looks along the azimuth ``(k + 0.5) *
    view_deg`` and its columns run the way the panorama's do (towards larger
    azimuths), so the concatenation is column-aligned with
    :func:`depth_panorama`. Values are planar depth (the distance along the
    view's optical axis, what a depth camera reports).

Doors (:class:`.simulate.Door`): a ray through an open door's opening goes on
into the adjoining room the source stands in, modelled as a box behind the
wall :data:`ADJOINING_DEPTH` deep, :data:`ADJOINING_HALF_WIDTH` either side
of the door centre along the wall and as high as the room (the simulator
places door sources up to 4 m behind the wall and 2 m to either side); a
closed door is part of the wall. The simulator places no furniture or other
obstacle, so there is none to draw.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..exceptions import ParameterError
from .scene import Door, SceneSpec, head_frame

__all__ = [
    "ADJOINING_DEPTH",
    "ADJOINING_HALF_WIDTH",
    "PANORAMA_SHAPE",
    "VIEWS_SHAPE",
    "VIEW_DEG",
    "depth_panorama",
    "depth_views",
    "panorama_directions",
    "ray_depth",
]

PANORAMA_SHAPE = (64, 256)  # rows (elevation), columns (azimuth)
VIEW_DEG = 20.0
VIEW_WIDTH = 16  # columns per view
VIEW_VFOV_DEG = 90.0
VIEWS_SHAPE = (64, round(360 / VIEW_DEG) * VIEW_WIDTH)
ADJOINING_DEPTH = 4.5
ADJOINING_HALF_WIDTH = 2.5

_WALL_AXIS = {"east": (0, 1.0), "west": (0, -1.0), "north": (1, 1.0), "south": (1, -1.0)}


def _check_shape(height: int, width: int) -> None:
    for name, v in (("height", height), ("width", width)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ParameterError(f"{name} must be a positive integer, got {name}={v!r}")


def panorama_directions(height: int, width: int) -> np.ndarray:
    """Unit ray directions ``[height, width, 3]`` in the head frame (front,
    left, up) of the panorama's pixel centres."""
    _check_shape(height, width)
    az = np.radians((np.arange(width) + 0.5) * 360.0 / width)
    el = np.radians(90.0 - (np.arange(height) + 0.5) * 180.0 / height)
    ce = np.cos(el)[:, None]
    front = ce * np.sin(az)[None]
    left = -ce * np.cos(az)[None]
    up = np.broadcast_to(np.sin(el)[:, None], front.shape)
    return np.stack([front, left, up], axis=-1)


def _exit_distance(origin: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Any:
    """Distance along unit rays ``d`` ``[n, 3]`` from points inside the box
    ``[lo, hi]`` to its boundary, and the axis of the face hit."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d > 0, (hi - origin) / d, np.where(d < 0, (lo - origin) / d, np.inf))
    axis = np.argmin(t, axis=1)
    return t[np.arange(len(d)), axis], axis


def _through_door(
    origin: np.ndarray, d: np.ndarray, t: np.ndarray, axis: np.ndarray, door: Door,
    room: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """``t`` lengthened for the rays that leave through the door's opening."""
    wall_axis, sign = _WALL_AXIS[door.wall]
    along = 1 - wall_axis
    hit = origin + t[:, None] * d
    centre = np.asarray(door.centre, dtype=np.float64)
    wall_at = room[wall_axis] if sign > 0 else 0.0
    through = (
        (axis == wall_axis)
        & (np.sign(d[:, wall_axis]) == sign)
        & (np.abs(hit[:, along] - centre[along]) < door.width / 2)
        & (hit[:, 2] < door.height)
    )
    if not np.any(through):
        return t
    lo = np.zeros(3)
    hi = room.astype(np.float64).copy()
    lo[along] = centre[along] - ADJOINING_HALF_WIDTH
    hi[along] = centre[along] + ADJOINING_HALF_WIDTH
    if sign > 0:
        lo[wall_axis], hi[wall_axis] = wall_at, wall_at + ADJOINING_DEPTH
    else:
        lo[wall_axis], hi[wall_axis] = wall_at - ADJOINING_DEPTH, wall_at
    idx = np.nonzero(through)[0]
    # Restart just past the wall plane, inside the adjoining box.
    eps = 1e-9
    start = hit[idx] + eps * d[idx]
    start = np.clip(start, lo + eps, hi - eps)
    extra, _ = _exit_distance(start, d[idx], lo, hi)
    out = t.copy()
    out[idx] = t[idx] + extra
    return out


def ray_depth(spec: SceneSpec, directions: Any) -> np.ndarray:
    """Distance (m) from the listener's head to the first surface along rays.

    Parameters
    ----------
    spec : SceneSpec
        The scene (room size, listener position and yaw, doors).
    directions : array_like [shape=(..., 3)]
        Ray directions in the head frame (front, left, up); need not be unit.

    Returns
    -------
    np.ndarray [shape=(...), dtype=float64]
        Distance along each ray (in units of the direction's length: metres
        for unit vectors).
    """
    d = np.asarray(directions, dtype=np.float64)
    if d.shape[-1:] != (3,):
        raise ParameterError(f"directions must be [..., 3], got shape {d.shape}")
    room = np.asarray(spec.room_dim, dtype=np.float64)
    origin = np.asarray(spec.listener, dtype=np.float64)
    if np.any(origin <= 0) or np.any(origin >= room):
        raise ParameterError(
            f"listener must be inside the room, got listener={spec.listener}, "
            f"room_dim={spec.room_dim}"
        )
    flat = d.reshape(-1, 3)
    norm = np.linalg.norm(flat, axis=1)
    if np.any(norm == 0) or not np.all(np.isfinite(norm)):
        raise ParameterError("directions must be finite and non-zero")
    world = (flat / norm[:, None]) @ head_frame(spec.yaw_deg)
    t, axis = _exit_distance(np.broadcast_to(origin, world.shape), world, np.zeros(3), room)
    for door in {id(x): x for x in spec.doors if x is not None and x.open}.values():
        t = _through_door(origin[None], world, t, axis, door, room)
    return (t / norm).reshape(d.shape[:-1])


def depth_panorama(
    spec: SceneSpec, height: int = PANORAMA_SHAPE[0], width: int = PANORAMA_SHAPE[1]
) -> np.ndarray:
    """Equirectangular depth image ``[height, width]`` float32 (metres) of a
    scene from the listener (see the module docs for the axes)."""
    return ray_depth(spec, panorama_directions(height, width)).astype(np.float32)


def depth_views(
    spec: SceneSpec,
    *,
    view_deg: float = VIEW_DEG,
    view_width: int = VIEW_WIDTH,
    height: int = VIEWS_SHAPE[0],
    vfov_deg: float = VIEW_VFOV_DEG,
) -> np.ndarray:
    """Pinhole depth views at ``view_deg`` steps, concatenated
    ``[height, (360 / view_deg) * view_width]`` float32 (planar depth, m)."""
    n_views = 360.0 / view_deg if view_deg > 0 else 0.0
    if not (0 < view_deg < 180) or abs(n_views - round(n_views)) > 1e-9:
        raise ParameterError(f"view_deg must divide 360 and be in (0, 180), got {view_deg}")
    if not (0 < vfov_deg < 180):
        raise ParameterError(f"vfov_deg must be in (0, 180), got {vfov_deg}")
    _check_shape(height, view_width)
    n = round(n_views)
    s = math.tan(math.radians(view_deg) / 2) * (
        (2 * (np.arange(view_width) + 0.5) / view_width) - 1
    )
    v = math.tan(math.radians(vfov_deg) / 2) * (1 - 2 * (np.arange(height) + 0.5) / height)
    out = np.empty((height, n * view_width), dtype=np.float32)
    for k in range(n):
        az = math.radians((k + 0.5) * view_deg)
        axis = np.array([math.sin(az), -math.cos(az), 0.0])  # front, left, up
        side = np.array([math.cos(az), math.sin(az), 0.0])  # towards larger azimuth
        rays = axis + s[None, :, None] * side + v[:, None, None] * np.array([0.0, 0.0, 1.0])
        # ``rays`` has unit length along ``axis``: the distance in units of
        # its length is the planar depth.
        out[:, k * view_width : (k + 1) * view_width] = ray_depth(spec, rays)
    return out
