"""Physical figures of the simulated scenes (the tables of docs/spatial.md).

* interaural coherence of the late tail (from 30 ms after the direct sound,
  0.5 s) of 20 default rooms per receiver, spectra pooled over the rooms,
  against the diffuse-field model, octave bands 125 Hz-4 kHz;
* RT60 by octave band of a six-material room against Eyring's formula as
  ``pyroomacoustics`` computes it, and of one-material rooms against
  ``pyroomacoustics``' hybrid (image sources + ray tracing) simulation of the
  same room, materials and air, both measured with ``band_rt60``;
* the RT60 distribution of the default rooms (formula, 1,000 rooms; T30 of
  40 simulated BRIRs).

Usage::

    python benches/spatial_physics.py
"""

from __future__ import annotations

import numpy as np
import pyroomacoustics as pra

from agl_fast.spatial import acoustics as ac
from agl_fast.spatial import simulate as sim

SR = 32000
MATERIALS = ("plasterboard", "brickwork", "wooden_lining", "glass_window",
             "carpet_cotton", "ceiling_fissured_tile")  # fmt: skip


def _row(name: str, values: np.ndarray) -> None:
    print(f"{name:28s}", " ".join(f"{v:7.3f}" for v in values[:6]))


def coherence() -> None:
    for receiver in ("hrtf", "two_mic"):
        path = sim.find_sofa()
        if receiver == "hrtf" and path is None:
            print("hrtf: no SOFA file found, skipped")
            continue
        hrtf = sim.load_sofa(path) if receiver == "hrtf" and path else None
        segs = []
        for i in range(20):
            spec = sim.sample_scene(np.random.default_rng(100 + i))
            h, _ = sim.simulate_brir(spec, spec.sources[0], receiver=receiver, hrtf=hrtf,
                                     rt_seed=i)  # fmt: skip
            onset = int(np.argmax(np.max(np.abs(h), 0) > 0.1 * np.abs(h).max()))
            seg = np.zeros((2, 16000))
            x = h[:, onset + int(0.03 * SR) :][:, :16000]
            seg[:, : x.shape[1]] = x
            segs.append(seg)
        x = np.stack(segs)
        f = np.fft.rfftfreq(x.shape[-1], 1 / SR)
        model = ac.band_coherence(x, SR, coherence=ac.diffuse_coherence(f, hrtf=hrtf))
        got = ac.band_coherence(x, SR)
        _row(f"{receiver} coherence model", model)
        _row(f"{receiver} coherence measured", got)
        _row(f"{receiver} |difference|", np.abs(got - model))


def rt60_vs_formula() -> None:
    spec = sim.SceneSpec((7.0, 5.0, 3.0), (0.2,) * 6, 0.3, (3.0, 2.5, 1.5), 0.0,
                         [(5.0, 3.2, 1.6)], materials=MATERIALS)  # fmt: skip
    coeffs = sim.wall_absorption(spec)
    weights = [15, 15, 21, 21, 35, 35]
    ref = np.array([pra.rt60_eyring(142, 105.0, float(np.average(coeffs[:, b], weights=weights)),
                                    0.0, ac.SPEED_OF_SOUND) for b in range(8)])  # fmt: skip
    got = np.mean([ac.band_rt60(sim.simulate_brir(spec, spec.sources[0], receiver="two_mic",
                                                  rt_seed=s, air=False)[0], SR)
                   for s in range(3)], axis=(0, 1))  # fmt: skip
    _row("pra.rt60_eyring", ref)
    _row("simulated T30", got)
    _row("relative difference", np.abs(got - ref) / ref)


def rt60_vs_ray_tracing() -> None:
    for mat in ("wooden_lining", "plasterboard"):
        spec = sim.SceneSpec((6.0, 5.0, 3.0), (0.2,) * 6, 0.5, (3.0, 2.5, 1.5), 0.0,
                             [(4.5, 3.0, 1.6)], materials=(mat,) * 6)  # fmt: skip
        pra.random.seed(0)
        mats = {w: pra.Material({"coeffs": list(c), "center_freqs": list(ac.BAND_CENTRES)}, 0.5)
                for w, c in zip(sim.WALLS, sim.wall_absorption(spec), strict=True)}  # fmt: skip
        room = pra.ShoeBox([6, 5, 3], fs=SR, materials=mats, max_order=3, air_absorption=True,
                           ray_tracing=True)  # fmt: skip
        # The same air as the simulator (ISO 9613-1, 20 degrees C, 50 % RH).
        room.set_air_absorption([float(x) for x in ac.air_absorption()])
        room.set_ray_tracing(n_rays=20000, receiver_radius=0.5, energy_thres=1e-7)
        room.add_source([4.5, 3.0, 1.6])
        room.add_microphone([3.0, 2.5, 1.5])
        room.compute_rir()
        ref = ac.band_rt60(room.rir[0][0], SR)
        got = np.mean([ac.band_rt60(sim.simulate_brir(spec, spec.sources[0], receiver="two_mic",
                                                      rt_seed=s)[0], SR)
                       for s in range(4)], axis=(0, 1))  # fmt: skip
        _row(f"{mat} pyroomacoustics", ref)
        _row(f"{mat} simulated", got)
        _row(f"{mat} relative difference", np.abs(got - ref) / ref)


def rt60_distribution() -> None:
    rng = np.random.default_rng(11)
    air = ac.air_absorption()
    rt = []
    for _ in range(1000):
        s = sim.sample_scene(rng)
        rt.append(float(np.mean(ac.eyring_rt60(s.room_dim, sim.wall_absorption(s), air)[2:4])))
    q = np.percentile(rt, [5, 25, 50, 75, 95])
    inside = np.mean((np.array(rt) >= 0.1) & (np.array(rt) <= 0.4))
    print("formula RT60 percentiles 5/25/50/75/95:", q.round(3), f"in 0.1-0.4 s: {inside:.3f}")
    meas = []
    for seed in range(40):
        s = sim.sample_scene(np.random.default_rng(seed))
        h, _ = sim.simulate_brir(s, s.sources[0], receiver="two_mic", rt_seed=seed)
        meas.append(float(np.mean(ac.band_rt60(h, SR)[:, 2:4])))
    m = np.array(meas)
    print("simulated T30 percentiles 5/50/95:", np.percentile(m, [5, 50, 95]).round(3),
          f"in 0.1-0.4 s: {np.mean((m >= 0.1) & (m <= 0.4)):.3f}")  # fmt: skip


if __name__ == "__main__":
    coherence()
    rt60_vs_formula()
    rt60_vs_ray_tracing()
    rt60_distribution()
