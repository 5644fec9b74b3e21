"""The portable scalar kernels agree with the AVX2/AVX-512 ones.

``AGL_FAST_SIMD=off`` (read once per process by the Rust core) forces the
scalar code paths and RustFFT's scalar planner; each case below runs in a
child process with and without it, on the same seeded inputs, and the
results are compared within the tolerance each kernel states: resampling is
a fixed-order sum (FMA against separate multiply-adds: a few float32 ulp of
the signal's scale), the FFT and everything built on it a relative 1e-5 of
the largest magnitude, the presets those of their parity tests.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CHILD = r"""
import sys
import numpy as np
import agl_fast

rng = np.random.default_rng(0)
t = np.arange(3 * 44100) / 44100
tone = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 1234.5 * t + 1)])
y44 = (0.3 * tone + 0.05 * rng.standard_normal(tone.shape)).astype(np.float32)
y32 = agl_fast.resample(y44, orig_sr=44100, target_sr=32000, res_type="hq")
ir = (rng.standard_normal(16000) * np.exp(-np.arange(16000) / 1600)).astype(np.float32)
out = {
    "resample_hq": y32,
    "resample_fast": agl_fast.resample(y44, orig_sr=44100, target_sr=32000, res_type="fast"),
    "resample_vhq": agl_fast.resample(y44[0], orig_sr=44100, target_sr=16000, res_type="vhq"),
    "stft": agl_fast.stft(y32[0], n_fft=1024, hop_length=320),
    "logmel_db": agl_fast.logmel(y32[0], sr=32000, n_fft=1024, hop_length=320),
    "bat_db": agl_fast.bat(y32)[:2],
    "bat_ipd": agl_fast.bat(y32)[2:],
    "efficientat_db": agl_fast.efficientat(y32[0]),
    "edc_db": agl_fast.schroeder_edc(ir, 16000, db=True),
}
q = agl_fast.quality_metrics(y32, 32000)
for k, v in q.items():
    out["quality_" + k] = np.asarray(v, dtype=np.float64)
np.savez(sys.argv[1], **out)
"""


#: absolute tolerances of the presets' parity tests (tests/test_presets.py)
ATOL = {
    "bat_db": 2e-3,
    "bat_ipd": 2e-4,
    "efficientat_db": 2e-4,
    "logmel_db": 1e-3,
    "edc_db": 1e-3,
}


def _run(tmp: Path, simd: bool) -> dict[str, np.ndarray]:
    env = dict(os.environ)
    env.pop("AGL_FAST_SIMD", None)
    if not simd:
        env["AGL_FAST_SIMD"] = "off"
    path = tmp / ("simd.npz" if simd else "scalar.npz")
    subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, check=True, cwd=tmp)
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _has_avx2() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        return " avx2 " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


def test_scalar_paths_match_simd(tmp_path: Path) -> None:
    simd, scalar = _run(tmp_path, True), _run(tmp_path, False)
    assert simd.keys() == scalar.keys()
    for name, a in simd.items():
        b = scalar[name]
        assert a.shape == b.shape and a.dtype == b.dtype, name
        scale = float(np.nanmax(np.abs(a))) if a.size else 0.0
        if name in ATOL:
            np.testing.assert_allclose(b, a, atol=ATOL[name], rtol=0, err_msg=name)
        elif name.startswith("resample"):
            np.testing.assert_allclose(b, a, atol=4e-7 * max(scale, 1.0), rtol=0, err_msg=name)
        elif name.startswith("quality_"):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_allclose(b, a, atol=1e-5 * scale, rtol=0, err_msg=name)
    if _has_avx2():
        # the variable took effect: some result differs in its last bits
        assert any(not np.array_equal(simd[k], scalar[k]) for k in simd)


@pytest.mark.parametrize("value", ["off", "OFF", " 0 ", "scalar"])
def test_the_variable_spellings(tmp_path: Path, value: str) -> None:
    code = (
        "import numpy as np, agl_fast, sys; "
        "y = np.random.default_rng(1).standard_normal(32000).astype(np.float32); "
        # the resampler's vector path rounds differently from its scalar one
        # (the STFT engines give the same bits on both)
        "np.save(sys.argv[1], agl_fast.resample(y, orig_sr=32000, target_sr=16000))"
    )
    got = []
    for v in (None, value, "off"):
        env = dict(os.environ)
        env.pop("AGL_FAST_SIMD", None)
        if v is not None:
            env["AGL_FAST_SIMD"] = v
        out = tmp_path / f"{len(got)}.npy"
        subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True, cwd=tmp_path)
        got.append(np.load(out))
    np.testing.assert_array_equal(got[1], got[2])
    if _has_avx2():
        assert not np.array_equal(got[0], got[1])
