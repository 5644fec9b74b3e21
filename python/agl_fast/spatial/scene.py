"""Scene geometry: rooms, listener, sources, doors and their BAT labels.

What a scene *is*, apart from how it sounds: :func:`sample_scene` draws one
from a random generator, :func:`bat_labels` labels a source as seen by the
listener, and :func:`head_frame` is the listener's frame of reference.
:mod:`agl_fast.spatial.simulate` renders scenes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..exceptions import InternalError, ParameterError
from .acoustics import air_absorption, eyring_rt60, material_absorption
from .defaults import MAX_DISTANCE, RT60_RANGE

__all__ = [
    "CEILING_MATERIALS",
    "FLOOR_MATERIALS",
    "WALL_MATERIALS",
    "WALL_NORMALS",
    "Door",
    "Scene",
    "SceneSpec",
    "bat_labels",
    "head_frame",
    "sample_scene",
]


def bat_labels(listener: Any, yaw_deg: float, source: Any) -> dict[str, Any]:
    """BAT labels of a source seen from a listener facing ``yaw_deg``.

    ``yaw_deg`` is the facing direction in the room's horizontal plane,
    counter-clockwise from the room's +x axis.
    """
    v = np.asarray(source, dtype=np.float64) - np.asarray(listener, dtype=np.float64)
    yaw = math.radians(yaw_deg)
    front = v[0] * math.cos(yaw) + v[1] * math.sin(yaw)
    left = -v[0] * math.sin(yaw) + v[1] * math.cos(yaw)
    up = float(v[2])
    d = float(np.linalg.norm(v))
    az = (round(math.degrees(math.atan2(front, -left))) + 360) % 360
    el = (round(math.degrees(math.atan2(up, math.hypot(front, left)))) + 90) % 180
    return {
        "azimuth": int(az),
        "elevation": int(el),
        "distance_class": int(min(max(round(2 * d), 0), 20)),
        "distance_m": d,
    }


@dataclass
class Door:
    """An opening in a side wall through which a source outside the room is heard.

    A ``pyroomacoustics`` shoebox is one closed box: it cannot hold two
    connected rooms or a wall with a hole. A source in an adjoining room is
    therefore rendered as two paths (:func:`simulate_brir`):

    * through the opening: the door re-radiates what reaches it, as a
      secondary source just inside the room (5 cm from the wall) simulated
      in the room like any other, delayed by the source-to-door travel time
      and scaled so that the bent direct path spreads as ``1 / (d1 + d2)``
      (``d1`` source to door, ``d2`` door to listener) times
      ``diffraction_gain`` (0.5: the -6 dB of an edge at the shadow
      boundary); the adjoining room's own reverberation is not modelled;
    * through the wall: the free-field direct sound from the true source
      direction, ``transmission_loss_db`` below ``1 / d`` (no reflections).

    A closed door (``open=False``) keeps only the path through the wall.

    Attributes
    ----------
    wall : {'east', 'west', 'north', 'south'}
        The wall at ``x = L_x``, ``x = 0``, ``y = L_y`` or ``y = 0``.
    centre : tuple of float
        Centre of the opening on the wall plane (m).
    width, height : float
        Size of the opening (m); its bottom is on the floor.
    transmission_loss_db : float
        Broadband loss of the wall around the door (dB).
    diffraction_gain : float
        Amplitude factor of the path through the opening.
    open : bool
    """

    wall: str
    centre: tuple[float, float, float]
    width: float = 0.9
    height: float = 2.0
    transmission_loss_db: float = 35.0
    diffraction_gain: float = 0.5
    open: bool = True


@dataclass
class SceneSpec:
    """Geometry and materials of one scene (metres, degrees).

    ``doors`` holds, per source, the :class:`Door` it is heard through when
    it stands in an adjoining room (``None`` for a source in the room); an
    empty list means every source is in the room. ``materials`` names each
    wall's material in ``pyroomacoustics``' database (octave-band absorption,
    :func:`agl_fast.spatial.acoustics.material_absorption`); then
    ``absorption`` holds their means over 125 Hz-4 kHz, for reference. An
    empty tuple: ``absorption`` is each wall's absorption in every band.
    """

    room_dim: tuple[float, float, float]
    absorption: tuple[float, ...]  # east, west, north, south, floor, ceiling
    scattering: float
    listener: tuple[float, float, float]
    yaw_deg: float
    sources: list[tuple[float, float, float]]
    doors: list[Door | None] = field(default_factory=list)
    materials: tuple[str, ...] = ()

    def door(self, k: int) -> Door | None:
        """The door source ``k`` is heard through, if any."""
        return self.doors[k] if k < len(self.doors) else None


@dataclass
class Scene:
    """A simulated scene: BRIRs, geometry, labels and room acoustics."""

    spec: SceneSpec
    brirs: list[np.ndarray]  # one [2, L] float32 per source
    sr: int
    receiver: str
    labels: list[dict[str, Any]]
    acoustics: list[dict[str, float]] = field(default_factory=list)


def head_frame(yaw_deg: float) -> np.ndarray:
    """The listener's head frame facing ``yaw_deg``.

    Parameters
    ----------
    yaw_deg : float
        Facing direction, counter-clockwise from the room's +x axis (degrees).

    Returns
    -------
    np.ndarray [shape=(3, 3)]
        Rows: front, left, up in room coordinates.
    """
    y = math.radians(yaw_deg)
    return np.array(
        [[math.cos(y), math.sin(y), 0.0], [-math.sin(y), math.cos(y), 0.0], [0, 0, 1.0]]
    )


#: Side walls: (axis of the wall normal, direction out of the room).
WALL_NORMALS = {"east": (0, 1.0), "west": (0, -1.0), "north": (1, 1.0), "south": (1, -1.0)}


def _sample_door(
    rng: np.random.Generator, dim: tuple[float, float, float], listener: np.ndarray,
    max_distance: float,
) -> tuple[Door, tuple[float, float, float]] | None:  # fmt: skip
    """A door in a random side wall and a source 0.5-4 m behind that wall
    (within 2 m sideways of the door, 1-1.8 m high), or ``None`` if the
    source would be farther than ``max_distance``."""
    wall = str(rng.choice(list(WALL_NORMALS)))
    axis, sign = WALL_NORMALS[wall]
    along = 1 - axis
    width, height = 0.9, min(2.0, dim[2] - 0.1)
    c = [0.0, 0.0, height / 2]
    c[axis] = dim[axis] if sign > 0 else 0.0
    c[along] = float(rng.uniform(0.6, dim[along] - 0.6))
    src = [0.0, 0.0, float(rng.uniform(1.0, min(1.8, dim[2] - 0.2)))]
    src[axis] = c[axis] + sign * float(rng.uniform(0.5, 4.0))
    src[along] = c[along] + float(rng.uniform(-2.0, 2.0))
    if np.linalg.norm(np.asarray(src) - listener) > max_distance:
        return None
    door = Door(wall, (c[0], c[1], c[2]), width, height, float(rng.uniform(30.0, 45.0)))
    return door, (src[0], src[1], src[2])


#: Materials (``pyroomacoustics``' database) drawn for the side walls.
WALL_MATERIALS = (
    "plasterboard", "brickwork", "rough_concrete", "wooden_lining", "glass_window",
    "smooth_brickwork_10mm_pointing", "curtains_velvet", "curtains_cotton_0.5",
    "curtains_densely_woven", "gypsum_board", "rockwool_50mm_80kgm3",
    "panel_fabric_covered_8pcf", "acoustical_plaster_25mm", "fibre_absorber_1",
)  # fmt: skip
#: Materials drawn for the floor.
FLOOR_MATERIALS = (
    "linoleum_on_concrete", "concrete_floor", "marble_floor", "wood_16mm", "carpet_cotton",
    "carpet_tufted_9.5mm", "carpet_tufted_9m", "carpet_hairy", "carpet_6mm_open_cell_foam",
    "carpet_1.35_kg_m2",
)  # fmt: skip
#: Materials drawn for the ceiling.
CEILING_MATERIALS = (
    "ceiling_plasterboard", "ceiling_fibre_absorber", "ceiling_fissured_tile",
    "ceiling_perforated_gypsum_board", "ceiling_melamine_foam", "ceiling_metal_panel",
    "plasterboard",
)  # fmt: skip
_MAX_ROOM_DRAWS = 2000


def _sample_room(
    rng: np.random.Generator, rt60_range: tuple[float, float]
) -> tuple[tuple[float, float, float], tuple[str, ...], tuple[float, ...]]:
    """Dimensions, surface materials and their mean absorption (125 Hz-4 kHz)
    of a room whose mid-frequency RT60 follows ``rt60_range`` (see
    :func:`sample_scene`)."""
    lo, hi = (float(x) for x in rt60_range)
    if not 0 < lo <= hi:
        raise ParameterError(f"rt60_range must be 0 < low <= high, got {rt60_range}")
    target = float(rng.uniform(lo, hi))
    air = air_absorption()
    fallback = None
    for _ in range(_MAX_ROOM_DRAWS):
        dim = (float(rng.uniform(3, 12)), float(rng.uniform(3, 12)), float(rng.uniform(2.5, 4.0)))
        walls = [str(x) for x in rng.choice(WALL_MATERIALS, size=4)]
        mats = (*walls, str(rng.choice(FLOOR_MATERIALS)), str(rng.choice(CEILING_MATERIALS)))
        coeffs = np.stack([material_absorption(m) for m in mats])
        t = float(np.mean(eyring_rt60(dim, coeffs, air)[2:4]))
        absorption = tuple(float(x) for x in coeffs[:, :6].mean(axis=1))
        if abs(t - target) <= 0.025 and lo <= t <= hi:
            return dim, mats, absorption
        if fallback is None and lo <= t <= hi:
            fallback = (dim, mats, absorption)
    if fallback is None:
        raise ParameterError(f"no room with a mid-frequency RT60 in {rt60_range} s was drawn")
    return fallback


def sample_scene(
    rng: np.random.Generator,
    *,
    n_sources: int = 1,
    max_distance: float = MAX_DISTANCE,
    through_door: float = 0.0,
    rt60_range: tuple[float, float] = RT60_RANGE,
) -> SceneSpec:
    """Draw a room, a listener and sources.

    Rooms 3-12 m by 3-12 m by 2.5-4 m with a material of ``pyroomacoustics``'
    database per surface (:data:`WALL_MATERIALS`, :data:`FLOOR_MATERIALS`,
    :data:`CEILING_MATERIALS`), drawn so that the room's mid-frequency
    reverberation time (Eyring with air absorption, mean of the 500 Hz and
    1 kHz bands) is spread uniformly over ``rt60_range`` (BiDepth's 0.1-0.4
    s): a target is drawn uniformly in the range and rooms are drawn until
    one in the range lies within 0.025 s of it (any room in the range after
    2000 draws);
    scattering 0.05-0.5; listener at ear height 1.2-1.8 m, at least
    0.5 m from every wall, facing a uniform direction. Sources: azimuth
    uniform, elevation normal around the horizontal (sd 12 degrees, within
    +-60), distance log-normal with its mode at 1.8 m (within 0.3 m and
    ``max_distance``), redrawn until inside the room (0.2 m from the walls).
    With probability ``through_door`` a source is instead placed in an
    adjoining room behind a side wall with a door (:class:`Door`), 0.5-4 m
    behind the wall; no random number is drawn for doors when
    ``through_door`` is 0, so such scenes are unchanged.
    """
    dim, materials, absorption = _sample_room(rng, rt60_range)
    scattering = float(rng.uniform(0.05, 0.5))
    listener = (
        rng.uniform(0.5, dim[0] - 0.5),
        rng.uniform(0.5, dim[1] - 0.5),
        rng.uniform(1.2, min(1.8, dim[2] - 0.5)),
    )
    yaw = float(rng.uniform(0, 360))
    sigma = 0.5
    mu = math.log(1.8) + sigma**2
    sources: list[tuple[float, float, float]] = []
    doors: list[Door | None] = []
    while len(sources) < n_sources:
        if through_door > 0 and rng.random() < through_door:
            for _ in range(100):
                placed = _sample_door(rng, dim, np.array(listener), max_distance)
                if placed is not None:
                    doors.append(placed[0])
                    sources.append(placed[1])
                    break
            if placed is not None:
                continue
        doors.append(None)
        for _ in range(1000):
            az = math.radians(rng.uniform(0, 360))
            el = math.radians(float(np.clip(rng.normal(0, 12), -60, 60)))
            d = float(np.clip(rng.lognormal(mu, sigma), 0.3, max_distance))
            p = np.array(listener) + d * np.array(
                [math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)]
            )
            if np.all(p > 0.2) and np.all(p < np.array(dim) - 0.2):
                sources.append((float(p[0]), float(p[1]), float(p[2])))
                break
        else:  # pragma: no cover - a room always has space within 0.3 m
            raise InternalError("could not place a source in the room")
    return SceneSpec(
        tuple(float(x) for x in dim),  # type: ignore[arg-type]
        absorption,
        scattering,
        tuple(float(x) for x in listener),  # type: ignore[arg-type]
        yaw,
        sources,
        doors if any(d is not None for d in doors) else [],
        materials,
    )
