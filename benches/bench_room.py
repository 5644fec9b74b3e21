"""Room acoustics: agl-fast against pyrato, pyroomacoustics and scipy.

Same data, same run:

* ``EDC + EDT/T20/T30``: synthetic stereo RIRs (1 s, 16 kHz). agl-fast's
  :func:`agl_fast.room_parameters` (``method='none'``; it also computes T60,
  DRR, C50, C80, D50 and Ts) against ``pyrato.edc.schroeder_integration`` +
  ``pyrato.parameters.reverberation_time_linear_regression`` for EDT, T20
  and T30, and against ``pyroomacoustics.experimental.measure_rt60`` (T30)
  per channel.
* ``EDC + T20, Lundeby+Chu``: agl-fast ``method='lundeby_chu'`` against
  ``pyrato.edc.energy_decay_curve_chu_lundeby`` + the T20 regression
  (on a tenth of the RIRs: pyrato loops in Python).
* ``numba peer``: the same RIRs against a numba loop a skilled user writes
  (``@njit(fastmath=True)``, no ``parallel``: peak and ISO 3382-1 onset,
  Schroeder backward integration in float64, ``10 log10`` once per sample
  of the fit ranges, then the EDT, T20 and T30 least-squares sums), compiled and its
  EDT/T20/T30 checked against agl-fast ``method='none'`` first; agl-fast
  ``method='none'`` and ``'lundeby_chu'`` (all nine parameters) and the
  peer take turns in every round, best of ``--repeat`` rounds in process
  CPU seconds, one thread.
* ``convolution``: 10 s mono sources with 2 x 1 s RIRs, agl-fast
  :func:`agl_fast.fftconvolve` against ``scipy.signal.fftconvolve`` per source
  (both channels in one call), full mode.

Prints RIR channels (or seconds of audio) per second per core and the ratio.
One-thread rows are timed in process CPU seconds (best of three in quick
mode), so other jobs on the machine do not skew the ratio. The
pytest-benchmark suite (``benches/test_room.py``) gates the one-thread
ratios of the EDC rows against pyrato and the lower of the two ratios to the
numba peer. The pyroomacoustics row is not gated: ``measure_rt60`` reads
T30 from two level crossings of one vectorised EDC, while agl-fast computes
the nine parameters.

Usage::

    python benches/bench_room.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable

# One-thread references: keep BLAS/OpenMP pools at one thread.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from _timing import best_time, best_times_interleaved  # noqa: E402

SR = 16000


def make_rirs(n: int, seed: int = 0) -> np.ndarray:
    """``[n, 2, SR]`` decays with T60 in 0.2-1.5 s and noise at -60 dB."""
    rng = np.random.default_rng(seed)
    t = np.arange(SR) / SR
    t60 = rng.uniform(0.2, 1.5, (n, 1, 1))
    h = rng.standard_normal((n, 2, SR)) * np.exp(-6.9 / t60 * t)
    h += 1e-3 * rng.standard_normal(h.shape)
    return h.astype(np.float32)


def pyrato_decay_times(rirs: np.ndarray) -> list[np.ndarray]:
    """EDT, T20 and T30 of ``[n, 2, SR]`` RIRs by pyrato (Schroeder
    integration, normalised, then its linear regression): three ``[n, 2]``
    arrays in seconds."""
    import pyfar as pf
    from pyrato.edc import schroeder_integration
    from pyrato.parameters import reverberation_time_linear_regression

    edc = schroeder_integration(pf.Signal(rirs.astype(np.float64), SR))
    edc = pf.TimeData(edc.time / edc.time[..., :1], edc.times)
    return [reverberation_time_linear_regression(edc, t) for t in ("EDT", "T20", "T30")]


def pyrato_lundeby_t20(rirs: np.ndarray) -> list[np.ndarray]:
    """T20 of each ``[2, SR]`` RIR by pyrato's Lundeby + Chu EDC (a Python
    loop over RIRs, as pyrato runs it): one ``[2]`` array per RIR."""
    import pyfar as pf
    from pyrato.edc import energy_decay_curve_chu_lundeby
    from pyrato.parameters import reverberation_time_linear_regression

    out = []
    for h in rirs:
        edc = energy_decay_curve_chu_lundeby(pf.Signal(h.astype(np.float64), SR))
        out.append(reverberation_time_linear_regression(edc, "T20"))
    return out


def _numba_rt() -> Callable[[np.ndarray, float], np.ndarray] | None:
    """EDT, T20 and T30 of ``[n, L]`` float32 curves as a compiled loop
    (``[n, 3]`` seconds, NaN where a level is not reached), or None without
    numba."""
    try:
        import numba
    except ImportError:
        return None

    # fastmath lets LLVM vectorise the regression sums (the faster variant
    # here; results agree with agl-fast to 1e-13).
    @numba.njit(parallel=False, fastmath=True, cache=False)
    def rt(h, sr):  # type: ignore[no-untyped-def]
        n, m = h.shape
        out = np.full((n, 3), np.nan)
        e = np.empty(m)
        y = np.empty(m)
        for c in range(n):
            x = h[c]
            pk = 0.0
            for i in range(m):
                a = abs(np.float64(x[i]))
                if a > pk:
                    pk = a
            if pk == 0.0:
                continue
            o = 0
            while np.float64(x[o]) ** 2 < 0.01 * pk * pk:
                o += 1
            acc = 0.0
            for i in range(m - 1, o - 1, -1):
                acc += np.float64(x[i]) ** 2
                e[i] = acc
            e0 = e[o]
            # First samples at or below -5, -10, -25 and -35 dB.
            k = o
            ends = [0, 0, 0, 0]
            for j, level in enumerate((-5.0, -10.0, -25.0, -35.0)):
                t = e0 * 10.0 ** (level / 10.0)
                while k < m and e[k] > t:
                    k += 1
                ends[j] = k
            inv = 1.0 / e0
            for i in range(o, min(max(ends[1], ends[3]), m - 1) + 1):
                y[i] = 10.0 * np.log10(e[i] * inv)
            # EDT 0..-10 dB, T20 -5..-25 dB, T30 -5..-35 dB, ends included.
            for r, (a0, b0) in enumerate(((o, ends[1]), (ends[0], ends[2]), (ends[0], ends[3]))):
                if b0 < m and b0 >= a0 + 2:
                    sx = sy = sxx = sxy = 0.0
                    for i in range(a0, b0 + 1):
                        xr = np.float64(i - a0)
                        sx += xr
                        sy += y[i]
                        sxx += xr * xr
                        sxy += xr * y[i]
                    nn = b0 - a0 + 1.0
                    slope = (nn * sxy - sx * sy) / (nn * sxx - sx * sx)
                    if slope < 0.0:
                        out[c, r] = -60.0 / (slope * sr)
        return out

    return rt  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="500 RIRs and 20 sources")
    ap.add_argument("--repeat", type=int, default=5, help="alternating rounds (numba peer)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    import pyroomacoustics as pra
    import scipy.signal

    import agl_fast

    n_rirs = 500 if args.quick else 10_000
    repeat = 3 if args.quick else 1
    n_src = 20 if args.quick else 1000
    rirs = make_rirs(n_rirs)
    curves = n_rirs * 2

    def ref_pyrato() -> None:
        pyrato_decay_times(rirs)

    def ref_pra() -> None:
        for h in rirs.reshape(-1, SR):
            pra.experimental.measure_rt60(h, SR, decay_db=30)

    sub = rirs[: max(1, n_rirs // 10)]

    def ref_lundeby() -> None:
        pyrato_lundeby_t20(sub)

    def ours(n: int, x: np.ndarray = rirs, method: str = "none") -> None:
        agl_fast.room_parameters(x, SR, method=method, n_threads=n)

    sources = np.random.default_rng(1).standard_normal((n_src, 10 * SR)).astype(np.float32)
    conv_irs = rirs[0]

    def ref_conv() -> None:
        for x in sources:
            scipy.signal.fftconvolve(x[None, :], conv_irs, axes=-1)

    def ours_conv(n: int) -> None:
        agl_fast.fftconvolve(sources, conv_irs, n_threads=n)

    ours(1, rirs[:2])
    ours_conv(1)
    rows = []
    cases: list[tuple[str, str, float, Callable[[], None], Callable[[int], None]]] = [
        ("EDC + EDT/T20/T30 vs pyrato", "channels", curves, ref_pyrato, ours),
        ("EDC + T30 vs pyroomacoustics", "channels", curves, ref_pra, ours),
        (
            "EDC + T20, Lundeby+Chu vs pyrato",
            "channels",
            2 * len(sub),
            ref_lundeby,
            lambda n: ours(n, sub, "lundeby_chu"),
        ),
        ("convolution vs scipy", "audio s", 10.0 * n_src, ref_conv, ours_conv),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, unit, amount, ref, mine in cases:
            t_ref = best_time(ref, repeat)
            t1 = best_time(lambda mine=mine: mine(1), repeat)
            tn = best_time(lambda mine=mine: mine(args.threads), repeat, args.threads)
            ratio = t_ref / t1
            rows.append(
                (name, unit, amount / t_ref, amount / t1, amount / tn / args.threads, ratio)
            )

    print(f"\nRoom acoustics: {n_rirs} stereo RIRs (1 s, 16 kHz), {n_src} x 10 s sources\n")
    print(
        "| task | unit | reference (/s) | agl-fast 1 thread (/s) | "
        f"agl-fast {args.threads} threads (/s/core) | ratio (1 thread) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for name, unit, r, a1, an, ratio in rows:
        print(f"| {name} | {unit} | {r:,.0f} | {a1:,.0f} | {an:,.0f} | {ratio:.1f}x |")

    nb = _numba_rt()
    if nb is None:
        print("\nnumba is not installed: no numba row")
        return 0
    flat = np.ascontiguousarray(rirs.reshape(-1, SR))
    # Outputs first: the peer's EDT/T20/T30 are agl-fast's (method='none').
    got = nb(flat, float(SR))
    p = agl_fast.room_parameters(flat, SR, method="none", n_threads=1)
    ref = np.stack([p["edt"], p["t20"], p["t30"]], axis=1)
    if not np.array_equal(np.isnan(got), np.isnan(ref)) or not np.allclose(
        got, ref, rtol=1e-9, atol=0, equal_nan=True
    ):
        err = np.nanmax(np.abs(got - ref) / np.abs(ref))
        print(f"\nFAIL: the numba peer differs from agl-fast (relative {err:.3g})")
        return 1
    t = best_times_interleaved(
        {
            "numba": lambda: nb(flat, float(SR)),
            "none": lambda: agl_fast.room_parameters(flat, SR, method="none", n_threads=1),
            "lundeby_chu": lambda: agl_fast.room_parameters(
                flat, SR, method="lundeby_chu", n_threads=1
            ),
        },
        args.repeat,
    )
    print(
        f"\n{curves} one-second RIR channels, one thread, process CPU time "
        f"(best of {args.repeat} alternating rounds)\n"
    )
    print("| implementation | computes | RIRs/s per core | ratio to numba |")
    print("|---|---|---:|---:|")
    what = {
        "numba": "EDT, T20, T30",
        "none": "9 parameters, no noise handling",
        "lundeby_chu": "9 parameters, Lundeby+Chu",
    }
    for k, v in t.items():
        name = "numba peer" if k == "numba" else f"agl-fast method='{k}'"
        print(f"| {name} | {what[k]} | {curves / v:,.0f} | {t['numba'] / v:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
