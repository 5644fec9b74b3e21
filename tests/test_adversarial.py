"""Adversarial matrix over the public API.

Every public function is called with hostile parameter values (negative,
zero, huge, fractional, NaN, infinite, boolean, wrong type) and hostile
inputs (empty, ragged, Arrow, big-endian, float16). Each call must either
return a value or raise an :mod:`agl_fast.exceptions` error whose message
names the parameter; never ``OverflowError``, ``PanicException``, a panic
``RuntimeError``, a numpy/pyarrow exception, or an abort. The huge counts
(the calls that could abort the process) run in a child interpreter.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import agl_fast
from agl_fast import audio, bands, features, geo, presets, quality, room
from agl_fast.exceptions import AglError, InternalError

SR = 16000
_rng = np.random.default_rng(0)
Y = (0.1 * _rng.standard_normal(4000)).astype(np.float32)
Y2 = (0.1 * _rng.standard_normal((2, 4000))).astype(np.float32)
IR = (_rng.standard_normal(4000) * np.exp(-np.arange(4000) / 400.0)).astype(np.float32)
S = np.abs(_rng.standard_normal((65, 20))).astype(np.float32) + 1e-3
LAT = np.array([10.0, 20.0])
LON = np.array([30.0, 40.0])

# One row per (function, parameter): a call taking the hostile value.
Call = Callable[[Any], Any]
PARAMS: list[tuple[str, str, Call]] = [
    ("stft", "n_fft", lambda v: features.stft(Y, n_fft=v)),
    ("stft", "hop_length", lambda v: features.stft(Y, n_fft=256, hop_length=v)),
    ("stft", "win_length", lambda v: features.stft(Y, n_fft=256, win_length=v)),
    ("stft", "n_threads", lambda v: features.stft(Y, n_fft=256, n_threads=v)),
    ("stft", "window", lambda v: features.stft(Y, n_fft=256, window=v)),
    ("stft", "pad_mode", lambda v: features.stft(Y, n_fft=256, pad_mode=v)),
    ("spectrogram", "power", lambda v: features.spectrogram(Y, n_fft=256, power=v)),
    ("spectrogram", "n_fft", lambda v: features.spectrogram(Y, n_fft=v)),
    ("melspectrogram", "sr", lambda v: features.melspectrogram(Y, sr=v, n_fft=256)),
    ("melspectrogram", "n_fft", lambda v: features.melspectrogram(Y, sr=SR, n_fft=v)),
    ("melspectrogram", "hop_length", lambda v: features.melspectrogram(Y, sr=SR, hop_length=v)),
    ("melspectrogram", "n_mels", lambda v: features.melspectrogram(Y, sr=SR, n_mels=v)),
    ("melspectrogram", "fmin", lambda v: features.melspectrogram(Y, sr=SR, fmin=v)),
    ("melspectrogram", "fmax", lambda v: features.melspectrogram(Y, sr=SR, fmax=v)),
    ("melspectrogram", "power", lambda v: features.melspectrogram(Y, sr=SR, power=v)),
    ("melspectrogram", "norm", lambda v: features.melspectrogram(Y, sr=SR, norm=v)),
    ("logmel", "ref", lambda v: features.logmel(Y, sr=SR, ref=v)),
    ("logmel", "amin", lambda v: features.logmel(Y, sr=SR, amin=v)),
    ("logmel", "top_db", lambda v: features.logmel(Y, sr=SR, top_db=v)),
    ("mel_filterbank", "sr", lambda v: features.mel_filterbank(sr=v, n_fft=512)),
    ("mel_filterbank", "n_fft", lambda v: features.mel_filterbank(sr=SR, n_fft=v)),
    ("mel_filterbank", "n_mels", lambda v: features.mel_filterbank(sr=SR, n_fft=512, n_mels=v)),
    ("mel_filterbank", "fmin", lambda v: features.mel_filterbank(sr=SR, n_fft=512, fmin=v)),
    ("mel_filterbank", "fmax", lambda v: features.mel_filterbank(sr=SR, n_fft=512, fmax=v)),
    ("kaldi_mel_filterbank", "sr", lambda v: features.kaldi_mel_filterbank(sr=v, n_fft=512)),
    ("kaldi_mel_filterbank", "n_fft", lambda v: features.kaldi_mel_filterbank(sr=SR, n_fft=v)),
    (
        "kaldi_mel_filterbank",
        "n_mels",
        lambda v: features.kaldi_mel_filterbank(sr=SR, n_fft=512, n_mels=v),
    ),
    (
        "kaldi_mel_filterbank",
        "fmin",
        lambda v: features.kaldi_mel_filterbank(sr=SR, n_fft=512, fmin=v),
    ),
    (
        "kaldi_mel_filterbank",
        "fmax",
        lambda v: features.kaldi_mel_filterbank(sr=SR, n_fft=512, fmax=v),
    ),
    ("power_to_db", "ref", lambda v: features.power_to_db(S, ref=v)),
    ("power_to_db", "amin", lambda v: features.power_to_db(S, amin=v)),
    ("power_to_db", "top_db", lambda v: features.power_to_db(S, top_db=v)),
    ("amplitude_to_db", "ref", lambda v: features.amplitude_to_db(S, ref=v)),
    ("amplitude_to_db", "amin", lambda v: features.amplitude_to_db(S, amin=v)),
    ("ipd_features", "sr", lambda v: features.ipd_features(Y2, sr=v)),
    ("ipd_features", "n_fft", lambda v: features.ipd_features(Y2, n_fft=v)),
    ("ipd_features", "n_mels", lambda v: features.ipd_features(Y2, n_mels=v)),
    ("ipd_features", "fmax", lambda v: features.ipd_features(Y2, fmax=v)),
    ("n_frames", "n_samples", lambda v: features.n_frames(v, n_fft=512)),
    ("n_frames", "n_fft", lambda v: features.n_frames(4000, n_fft=v)),
    ("n_frames", "hop_length", lambda v: features.n_frames(4000, n_fft=512, hop_length=v)),
    ("bat", "sr", lambda v: presets.bat(Y2, sr=v)),
    ("bat", "n_fft", lambda v: presets.bat(Y2, n_fft=v)),
    ("bat", "hop_length", lambda v: presets.bat(Y2, hop_length=v)),
    ("bat", "n_mels", lambda v: presets.bat(Y2, n_mels=v)),
    ("bat", "fmin", lambda v: presets.bat(Y2, fmin=v)),
    ("bat", "fmax", lambda v: presets.bat(Y2, fmax=v)),
    ("bat", "amin", lambda v: presets.bat(Y2, amin=v)),
    ("bat", "loudness_dbfs", lambda v: presets.bat(Y2, loudness_dbfs=v)),
    ("efficientat", "sr", lambda v: presets.efficientat(Y, sr=v)),
    ("efficientat", "n_fft", lambda v: presets.efficientat(Y, n_fft=v)),
    ("efficientat", "win_length", lambda v: presets.efficientat(Y, win_length=v)),
    ("efficientat", "hop_length", lambda v: presets.efficientat(Y, hop_length=v)),
    ("efficientat", "n_mels", lambda v: presets.efficientat(Y, n_mels=v)),
    ("efficientat", "fmin", lambda v: presets.efficientat(Y, fmin=v)),
    ("efficientat", "fmax", lambda v: presets.efficientat(Y, fmax=v)),
    ("efficientat", "preemphasis", lambda v: presets.efficientat(Y, preemphasis=v)),
    ("librosa_logmel", "sr", lambda v: presets.librosa_logmel(Y, sr=v)),
    ("preset", "name", lambda v: presets.preset(v, Y)),
    ("StftParams", "n_fft", lambda v: agl_fast.StftParams(n_fft=v)),
    ("StftParams", "hop_length", lambda v: agl_fast.StftParams(hop_length=v)),
    ("StftParams", "win_length", lambda v: agl_fast.StftParams(win_length=v)),
    ("StftParams", "center", lambda v: agl_fast.StftParams(center=v)),
    ("StftParams", "pad_mode", lambda v: agl_fast.StftParams(pad_mode=v)),
    ("get_recipe", "name", lambda v: presets.get_recipe(v)),
    ("register_recipe", "recipe", lambda v: presets.register_recipe(v)),
    ("mono_input", "y", lambda v: presets.mono_input(v)),
    ("levels", "threshold", lambda v: quality.levels(Y, threshold=v)),
    ("quality_metrics", "sr", lambda v: quality.quality_metrics(Y, v)),
    ("quality_metrics", "welch_nperseg", lambda v: quality.quality_metrics(Y, SR, welch_nperseg=v)),
    ("quality_metrics", "amin", lambda v: quality.quality_metrics(Y, SR, amin=v)),
    (
        "quality_metrics",
        "full_scale_threshold",
        lambda v: quality.quality_metrics(Y, SR, full_scale_threshold=v),
    ),
    ("quality_metrics", "n_fft", lambda v: quality.quality_metrics(Y, SR, n_fft=v)),
    ("quality_metrics", "hop_length", lambda v: quality.quality_metrics(Y, SR, hop_length=v)),
    ("quality_filter", "rms_floor", lambda v: quality.quality_filter(Y, SR, rms_floor=v)),
    ("rms", "frame_length", lambda v: quality.rms(Y, frame_length=v)),
    ("rms", "hop_length", lambda v: quality.rms(Y, hop_length=v)),
    ("rms", "pad_mode", lambda v: quality.rms(Y, pad_mode=v)),
    ("spectral_flatness", "n_fft", lambda v: quality.spectral_flatness(Y, n_fft=v)),
    ("spectral_flatness", "amin", lambda v: quality.spectral_flatness(Y, amin=v)),
    ("spectral_flatness", "power", lambda v: quality.spectral_flatness(Y, power=v)),
    ("schroeder_edc", "sr", lambda v: room.schroeder_edc(IR, v)),
    ("schroeder_edc", "method", lambda v: room.schroeder_edc(IR, SR, method=v)),
    ("room_parameters", "sr", lambda v: room.room_parameters(IR, v)),
    ("room_parameters", "direct_ms", lambda v: room.room_parameters(IR, SR, direct_ms=v)),
    ("room_parameters", "method", lambda v: room.room_parameters(IR, SR, method=v)),
    ("edc_distance", "sr", lambda v: room.edc_distance(IR, IR, v)),
    ("edc_distance", "floor_db", lambda v: room.edc_distance(IR, IR, SR, floor_db=v)),
    ("edc_distance", "method", lambda v: room.edc_distance(IR, IR, SR, method=v)),
    ("fftconvolve", "mode", lambda v: room.fftconvolve(Y, IR, mode=v)),
    ("fftconvolve", "n_threads", lambda v: room.fftconvolve(Y, IR, n_threads=v)),
    ("band_room_parameters", "sr", lambda v: bands.band_room_parameters(IR, v)),
    ("band_room_parameters", "fmin", lambda v: bands.band_room_parameters(IR, SR, fmin=v)),
    ("band_room_parameters", "fmax", lambda v: bands.band_room_parameters(IR, SR, fmax=v)),
    ("band_room_parameters", "bands", lambda v: bands.band_room_parameters(IR, SR, bands=v)),
    (
        "band_room_parameters",
        "direct_ms",
        lambda v: bands.band_room_parameters(IR, SR, direct_ms=v),
    ),
    ("band_centres", "fmin", lambda v: bands.band_centres(fmin=v)),
    ("band_filter", "sr", lambda v: bands.band_filter(IR, v)),
    ("haversine", "radius", lambda v: geo.haversine(LAT, LON, LON, LAT, radius=v)),
    ("haversine", "on_invalid", lambda v: geo.haversine(LAT, LON, LON, LAT, on_invalid=v)),
    ("haversine", "n_threads", lambda v: geo.haversine(LAT, LON, LON, LAT, n_threads=v)),
    ("geodesic", "a", lambda v: geo.geodesic(LAT, LON, LON, LAT, a=v)),
    ("geodesic", "f", lambda v: geo.geodesic(LAT, LON, LON, LAT, f=v)),
    ("geoscore", "scale", lambda v: geo.geoscore(LAT, scale=v)),
    ("geoscore", "max_score", lambda v: geo.geoscore(LAT, max_score=v)),
    ("summarize", "scale", lambda v: geo.summarize(LAT, scale=v)),
    ("summarize", "thresholds", lambda v: geo.summarize(LAT, thresholds=(v,))),
    ("summarize", "quantiles", lambda v: geo.summarize(LAT, quantiles=(v,))),
    ("resample", "orig_sr", lambda v: audio.resample(Y, orig_sr=v, target_sr=8000)),
    ("resample", "target_sr", lambda v: audio.resample(Y, orig_sr=SR, target_sr=v)),
    ("resample", "res_type", lambda v: audio.resample(Y, orig_sr=SR, target_sr=8000, res_type=v)),
]

# Values that stay in-process; the huge counts run in a child (below).
SAFE_VALUES: list[Any] = [-1, 0, 2.5, math.nan, math.inf, -math.inf, True, "x", None, 1e-300]
HUGE_VALUES: list[Any] = [2**31, 2**62, 2**64, -(2**64), 1e300]

# Where NaN or Inf in a result is the documented answer, not garbage.
NON_FINITE_OK = {
    "haversine",
    "geodesic",
    "geoscore",
    "summarize",
    "n_frames",
    # Room parameters are NaN where a decay is not measurable (documented).
    "schroeder_edc",
    "room_parameters",
    "edc_distance",
    "band_room_parameters",
}


def _scan(x: Any) -> bool:
    """Whether every float in a result is finite."""
    if isinstance(x, dict):
        return all(_scan(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return all(_scan(v) for v in x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return bool(np.isfinite(x).all())
    if isinstance(x, float):
        return math.isfinite(x)
    return True


def check(fn_name: str, param: str, call: Callable[[], Any]) -> str | None:
    """None when the call behaves; otherwise what went wrong."""
    try:
        out = call()
    except InternalError as e:
        return f"InternalError: {e}"
    except AglError as e:
        if param not in str(e):
            return f"{type(e).__name__} without {param!r}: {e}"
        return None
    except BaseException as e:
        return f"{type(e).__module__}.{type(e).__name__}: {e}"
    if fn_name not in NON_FINITE_OK and not _scan(out):
        return "a result with NaN or Inf"
    return None


def _rows(values: list[Any]) -> list[tuple[str, str, Call, Any]]:
    return [(f, p, c, v) for f, p, c in PARAMS for v in values]


def _id(row: tuple[str, str, Call, Any]) -> str:
    return f"{row[0]}-{row[1]}-{row[3]!r}"


@pytest.mark.parametrize("row", _rows(SAFE_VALUES), ids=_id)
def test_hostile_parameter(row: tuple[str, str, Call, Any]) -> None:
    fn_name, param, call, value = row
    problem = check(fn_name, param, lambda: call(value))
    assert problem is None, f"{fn_name}({param}={value!r}): {problem}"


def _variants(base: np.ndarray) -> dict[str, Any]:
    """Hostile forms of a valid input ``base``."""
    rows = base.reshape(-1, base.shape[-1])
    return {
        "big_endian": base.astype(">f4"),
        "float16": base.astype(np.float16),
        "float64": base.astype(np.float64),
        "int16": (base * 1000).astype(np.int16),
        "strided": np.repeat(base, 2, axis=-1)[..., ::2],
        "empty": np.zeros((*base.shape[:-1], 0), np.float32),
        "empty_list": [],
        "list_with_empty": [np.zeros(0, np.float32)],
        "ragged_lists": [[0.1] * 600, [0.2] * 300],
        "arrow": pa.array([r.tolist() for r in rows], type=pa.list_(pa.float32())),
        "arrow_f64": pa.array([r.tolist() for r in rows], type=pa.list_(pa.float64())),
        "arrow_with_null": pa.array([rows[0].tolist(), None], type=pa.list_(pa.float32())),
        "scalar": 0.5,
        "none": None,
        "text": "abc",
        "objects": np.array([object(), object()]),
        "nan": np.full(base.shape, np.nan, np.float32),
        "complex": base.astype(np.complex64),
        "four_d": np.zeros((1, 1, 1, *base.shape), np.float32),
    }


INPUTS: list[tuple[str, np.ndarray, Callable[[Any], Any]]] = [
    ("stft", Y, lambda v: features.stft(v, n_fft=256)),
    ("spectrogram", Y, lambda v: features.spectrogram(v, n_fft=256)),
    ("melspectrogram", Y, lambda v: features.melspectrogram(v, sr=SR, n_fft=256)),
    ("logmel", Y, lambda v: features.logmel(v, sr=SR, n_fft=256)),
    ("power_to_db", S, features.power_to_db),
    ("amplitude_to_db", S, features.amplitude_to_db),
    ("ipd_features", Y2, lambda v: features.ipd_features(v, n_fft=256, hop_length=128)),
    ("bat", Y2, presets.bat),
    ("efficientat", Y, presets.efficientat),
    ("librosa_logmel", Y, presets.librosa_logmel),
    ("levels", Y, quality.levels),
    ("quality_metrics", Y, lambda v: quality.quality_metrics(v, SR)),
    ("quality_filter", Y, lambda v: quality.quality_filter(v, SR)),
    ("rms", Y, lambda v: quality.rms(v, frame_length=256, hop_length=128)),
    ("spectral_flatness", Y, lambda v: quality.spectral_flatness(v, n_fft=256)),
    ("acoustic_complexity_index", S, quality.acoustic_complexity_index),
    ("schroeder_edc", IR, lambda v: room.schroeder_edc(v, SR)),
    ("room_parameters", IR, lambda v: room.room_parameters(v, SR)),
    ("edc_distance", IR, lambda v: room.edc_distance(v, v, SR)),
    ("edc_distance_mixed", IR, lambda v: room.edc_distance(v, IR, SR)),
    ("fftconvolve_sources", Y, lambda v: room.fftconvolve(v, IR)),
    ("fftconvolve_irs", IR, lambda v: room.fftconvolve(Y, v)),
    ("band_room_parameters", IR, lambda v: bands.band_room_parameters(v, SR)),
    ("band_filter", IR, lambda v: bands.band_filter(v, SR)),
    ("haversine", LAT, lambda v: geo.haversine(v, v, v, v)),
    ("geodesic", LAT, lambda v: geo.geodesic(v, LON, LAT, LON)),
    ("geoscore", LAT, geo.geoscore),
    ("summarize", LAT, geo.summarize),
    ("resample", Y, lambda v: audio.resample(v, orig_sr=SR, target_sr=8000)),
]


def _input_rows() -> list[tuple[str, str, Callable[[], Any]]]:
    rows = []
    for fn_name, base, call in INPUTS:
        for kind, value in _variants(base).items():
            rows.append((fn_name, kind, lambda c=call, v=value: c(v)))
    return rows


@pytest.mark.parametrize("row", _input_rows(), ids=lambda r: f"{r[0]}-{r[1]}")
def test_hostile_input(row: tuple[str, str, Callable[[], Any]]) -> None:
    fn_name, kind, call = row
    try:
        call()
    except InternalError as e:
        pytest.fail(f"{fn_name}({kind}): InternalError: {e}")
    except AglError as e:
        assert str(e), f"{fn_name}({kind}): {type(e).__name__} without a message"
    except BaseException as e:
        pytest.fail(f"{fn_name}({kind}): {type(e).__module__}.{type(e).__name__}: {e}")


def test_public_functions_are_all_in_the_matrix() -> None:
    """A new public function joins the matrix (or this list says why not)."""
    covered = {f for f, _, _ in PARAMS} | {
        f.split("_sources")[0].split("_irs")[0] for f, _, _ in INPUTS
    }
    covered |= {"edc_distance"}
    # Loaders are covered by the decoding tests (hostile files, rates,
    # channels); the rest take no tunable parameter.
    elsewhere = {
        "load",
        "load_arrays",
        "load_many",
        "get_num_threads",
        "set_num_threads",
        "quality_filter",
        "PRESETS",
        "exceptions",
        "quality",
        "room",
        "__version__",
    }
    missing = set(agl_fast.__all__) - covered - elsewhere
    assert not missing, f"public functions outside the adversarial matrix: {sorted(missing)}"


def _child_main() -> None:
    """Run the huge-value rows, one JSON line per row, flushing as it goes
    so an abort names the row it died on."""
    for fn_name, param, call, value in _rows(HUGE_VALUES):
        sys.stdout.write(json.dumps([fn_name, param, repr(value)]) + "\n")
        sys.stdout.flush()
        problem = check(fn_name, param, lambda c=call, v=value: c(v))
        sys.stdout.write(json.dumps({"problem": problem}) + "\n")
        sys.stdout.flush()


def test_huge_parameters_in_a_child_process() -> None:
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('adversarial', {__file__!r}); "
        "t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t); t._child_main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    lines = proc.stdout.splitlines()
    problems = []
    for head, tail in zip(lines[::2], lines[1::2], strict=False):
        verdict = json.loads(tail)["problem"]
        if verdict is not None:
            problems.append(f"{json.loads(head)}: {verdict}")
    if proc.returncode != 0:
        last = lines[-1] if lines else "(no row started)"
        problems.append(f"child died with {proc.returncode} at {last}: {proc.stderr[-2000:]}")
    assert not problems, "\n".join(problems)


APPLICATION_PACKAGES = (
    "alm",
    "remote",
    "spatial",
    "sage",
    "owl",
    "torch",
    "pipeline",
    "evaluate",
    "tagging",
    "localizability",
    "game",
)


def test_application_packages_raise_within_the_exception_tree() -> None:
    """Application code raises agl_fast errors (which still derive from the
    matching builtin), and its own error classes derive from AglError."""
    import re
    from pathlib import Path

    root = Path(agl_fast.__file__).parent
    builtin_raise = re.compile(r"raise (ValueError|RuntimeError|TypeError)\b")
    bare_class = re.compile(r"^class \w+\((Exception|ValueError|RuntimeError|TypeError)\)", re.M)
    found = []
    for pkg in APPLICATION_PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for pattern in (builtin_raise, bare_class):
                for m in pattern.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    found.append(f"{path.relative_to(root)}:{line}: {m.group(0)}")
    assert not found, "\n".join(found)


def test_provider_error_is_an_agl_error() -> None:
    from agl_fast.alm.protocol import ProviderError

    assert issubclass(ProviderError, AglError)


# ---------------------------------------------------------------------------
# The full matrix: every parameter of every public function (agl_fast.__all__,
# the public modules' __all__ and the drop-in compat layer) x absurd values,
# run in child processes with a per-case time bound.
# ---------------------------------------------------------------------------


class _ArrowRaises:
    """An Arrow-looking object whose export raises its own exception."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        raise ZeroDivisionError("broken export")


class _ArrowGarbage:
    """An Arrow-looking object whose export returns a number."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        return 42


class _ArrowWrongCapsule:
    """An Arrow-looking object whose export returns capsules of other names."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        import ctypes

        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        keep = ctypes.create_string_buffer(64)
        self._keep = keep
        return (
            new(ctypes.addressof(keep), b"not_arrow_schema", None),
            new(ctypes.addressof(keep), b"not_arrow_array", None),
        )


class _ArrowNotTuple:
    """An Arrow-looking object whose export returns a list of three items."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        return [1, 2, 3]


def _absurd_values() -> dict[str, Any]:
    """Name -> absurd value; each is tried for every parameter."""
    return {
        "two": 2,
        "yes": "yes",
        "none": None,
        "nan": math.nan,
        "inf": math.inf,
        "minus_one": -1,
        "zero": 0,
        "2**62": 2**62,
        "huge_str": "x" * 100_000,
        "object": object(),
        "list": [1, "a"],
        "arrow_raises": _ArrowRaises(),
        "arrow_garbage": _ArrowGarbage(),
        "arrow_wrong_capsule": _ArrowWrongCapsule(),
        "arrow_not_tuple": _ArrowNotTuple(),
        "true": True,
        "np_true": np.bool_(True),
        "minus_inf": -math.inf,
        "2**64": 2**64,
        "minus_2**64": -(2**64),
        "1e300": 1e300,
        "half": 0.5,
        "np_nan32": np.float32("nan"),
        "empty_str": "",
        "nul_str": "a\x00b",
        "dict": {"a": 1},
        "empty_tuple": (),
        "complex": 1j,
        # An array where a name or a flag is expected: `x in ("a", "b")`
        # and `if x:` raise numpy's ambiguous-truth ValueError on it.
        "array_2d": np.zeros((2, 2)),
        "np_int64_huge": np.int64(2**62),
        "np_uint64_max": np.uint64(2**64 - 1),
    }


def _valid_calls(wav: str) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """One valid call per public function: qualified name -> (fn, args, kwargs)."""
    from agl_fast.compat import librosa as compat

    y64 = Y.astype(np.float64)
    calls: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {
        "stft": (features.stft, (Y,), {"n_fft": 256}),
        "spectrogram": (features.spectrogram, (Y,), {"n_fft": 256}),
        "melspectrogram": (features.melspectrogram, (Y,), {"sr": SR, "n_fft": 256}),
        "logmel": (features.logmel, (Y,), {"sr": SR, "n_fft": 256}),
        "mel_filterbank": (features.mel_filterbank, (), {"sr": SR, "n_fft": 512}),
        "kaldi_mel_filterbank": (features.kaldi_mel_filterbank, (), {"sr": SR, "n_fft": 512}),
        "power_to_db": (features.power_to_db, (S,), {}),
        "amplitude_to_db": (features.amplitude_to_db, (S,), {}),
        "ipd_features": (features.ipd_features, (Y2,), {"sr": SR, "n_fft": 256}),
        "n_frames": (features.n_frames, (4000,), {"n_fft": 512}),
        "bat": (presets.bat, (Y2,), {}),
        "efficientat": (presets.efficientat, (Y,), {}),
        "librosa_logmel": (presets.librosa_logmel, (Y,), {}),
        "preset": (presets.preset, ("librosa", Y), {}),
        "binaural_input": (presets.binaural_input, (Y2,), {}),
        "get_recipe": (presets.get_recipe, ("bat",), {}),
        "recipe_names": (presets.recipe_names, (), {}),
        "register_recipe": (
            presets.register_recipe,
            (presets.get_recipe("bat"),),
            {"replace": True},
        ),
        "mono_input": (presets.mono_input, (Y2,), {}),
        "levels": (quality.levels, (Y,), {}),
        "quality_metrics": (quality.quality_metrics, (Y, SR), {}),
        "quality_filter": (quality.quality_filter, (Y[None], SR), {}),
        "rms": (quality.rms, (Y,), {"frame_length": 256, "hop_length": 128}),
        "spectral_flatness": (quality.spectral_flatness, (Y,), {"n_fft": 256}),
        "acoustic_complexity_index": (quality.acoustic_complexity_index, (S,), {}),
        "schroeder_edc": (room.schroeder_edc, (IR, SR), {}),
        "room_parameters": (room.room_parameters, (IR, SR), {}),
        "edc_distance": (room.edc_distance, (IR, IR, SR), {}),
        "fftconvolve": (room.fftconvolve, (Y, IR), {}),
        "band_room_parameters": (bands.band_room_parameters, (IR, SR), {}),
        "band_centres": (bands.band_centres, (), {}),
        "band_filter": (bands.band_filter, (IR, SR), {}),
        "haversine": (geo.haversine, (LAT, LON, LON, LAT), {}),
        "geodesic": (geo.geodesic, (LAT, LON, LON, LAT), {}),
        "geoscore": (geo.geoscore, (LAT,), {}),
        "summarize": (geo.summarize, (LAT,), {}),
        "resample": (audio.resample, (Y,), {"orig_sr": SR, "target_sr": 8000}),
        "load": (audio.load, (wav,), {}),
        "duration": (audio.duration, (wav,), {}),
        "load_many": (audio.load_many, ([wav],), {}),
        "load_arrays": (audio.load_arrays, ([wav],), {}),
        "set_num_threads": (agl_fast.set_num_threads, (None,), {}),
        "get_num_threads": (agl_fast.get_num_threads, (), {}),
        "compat.stft": (compat.stft, (y64,), {"n_fft": 256}),
        "compat.power_to_db": (compat.power_to_db, (S,), {}),
        "compat.amplitude_to_db": (compat.amplitude_to_db, (S,), {}),
        "compat.load": (compat.load, (wav,), {}),
        "compat.resample": (compat.resample, (y64,), {"orig_sr": SR, "target_sr": 8000}),
        "compat.get_duration": (compat.get_duration, (), {"y": y64, "sr": SR}),
        "compat.feature.melspectrogram": (
            compat.feature.melspectrogram,
            (),
            {"y": y64, "sr": SR, "n_fft": 256},
        ),
        "compat.feature.mfcc": (compat.feature.mfcc, (), {"y": y64, "sr": SR, "n_fft": 256}),
        "compat.feature.rms": (compat.feature.rms, (), {"y": y64}),
        "compat.feature.spectral_flatness": (
            compat.feature.spectral_flatness,
            (),
            {"y": y64, "n_fft": 256},
        ),
        "compat.filters.mel": (compat.filters.mel, (), {"sr": SR, "n_fft": 512}),
        "compat.feature.spectral_centroid": (
            compat.feature.spectral_centroid,
            (),
            {"y": y64, "n_fft": 256},
        ),
        "compat.feature.spectral_bandwidth": (
            compat.feature.spectral_bandwidth,
            (),
            {"y": y64, "n_fft": 256},
        ),
        "compat.effects.trim": (compat.effects.trim, (y64,), {}),
        "compat.effects.split": (compat.effects.split, (y64,), {}),
        "compat.onset.onset_strength": (compat.onset.onset_strength, (), {"y": y64, "sr": SR}),
        "compat.onset.onset_strength_multi": (
            compat.onset.onset_strength_multi,
            (),
            {"y": y64, "sr": SR},
        ),
        "compat.feature.zero_crossing_rate": (compat.feature.zero_crossing_rate, (y64,), {}),
        "compat.feature.spectral_rolloff": (
            compat.feature.spectral_rolloff,
            (),
            {"y": y64, "n_fft": 256},
        ),
        "compat.istft": (compat.istft, (compat.stft(y64, n_fft=256),), {}),
        "compat.to_mono": (compat.to_mono, (np.stack([y64, y64]),), {}),
        "compat.pcen": (compat.pcen, (S,), {"sr": SR}),
        "compat.feature.delta": (compat.feature.delta, (S,), {}),
        "compat.feature.chroma_stft": (
            compat.feature.chroma_stft,
            (),
            {"y": y64, "sr": SR, "n_fft": 256},
        ),
        "compat.feature.spectral_contrast": (
            compat.feature.spectral_contrast,
            (),
            {"y": y64, "sr": SR, "n_fft": 256},
        ),
        "compat.coverage": (compat.coverage, (), {}),
        "compat.reset_counters": (compat.reset_counters, (), {}),
        "compat.installed": (compat.installed, (), {}),
        "compat.install": (compat.install, (), {}),
        "compat.uninstall": (compat.uninstall, (), {}),
    }
    return calls


def _public_names() -> set[str]:
    """Every public callable the matrix must cover, by its matrix name."""
    import inspect

    from agl_fast.compat import librosa as compat

    names: set[str] = set()
    for mod in (agl_fast, audio, bands, features, geo, presets, quality, room):
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isfunction(obj):
                names.add(name)
    for prefix, mod in (
        ("compat.", compat),
        ("compat.feature.", compat.feature),
        ("compat.onset.", compat.onset),
        ("compat.effects.", compat.effects),
        ("compat.filters.", compat.filters),
    ):
        for name in mod.__all__:
            if inspect.isfunction(getattr(mod, name)):
                names.add(prefix + name)
    return names


def _matrix_cases(wav: str) -> list[tuple[str, str, str, Callable[[], Any]]]:
    """(function, parameter, value name, call) for every parameter and value."""
    import inspect

    cases = []
    for fn_name, (fn, args, kwargs) in sorted(_valid_calls(wav).items()):
        sig = inspect.signature(fn)
        for index, (param, spec) in enumerate(sig.parameters.items()):
            if spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
                continue
            for value_name, value in _absurd_values().items():
                a, kw = list(args), dict(kwargs)
                if index < len(a):
                    a[index] = value
                else:
                    kw[param] = value

                def call(f: Callable[..., Any] = fn, a: Any = a, kw: Any = kw) -> Any:
                    return f(*a, **kw)

                cases.append((fn_name, param, value_name, call))
    return cases


def _matrix_verdict(param: str, call: Callable[[], Any]) -> tuple[str, str] | None:
    """None when the call returns or raises a typed error naming ``param``;
    otherwise ``(kind, what)`` with kind ``"untyped"`` (an exception
    outside :mod:`agl_fast.exceptions`, or InternalError) or ``"unnamed"``
    (a typed error whose message does not name the parameter)."""
    try:
        call()
    except InternalError as e:
        return "untyped", f"InternalError: {str(e)[:200]!r}"
    except AglError as e:
        if param not in str(e):
            return "unnamed", f"{type(e).__name__} without {param!r}: {str(e)[:200]!r}"
        return None
    except BaseException as e:
        return "untyped", f"{type(e).__module__}.{type(e).__name__}: {str(e)[:200]!r}"
    return None


def _matrix_child(start: int) -> None:
    """Run the matrix from case ``start``, two JSON lines per case."""
    import tempfile

    import soundfile as sf

    with tempfile.TemporaryDirectory() as tmp:
        wav = f"{tmp}/tone.wav"
        sf.write(wav, np.stack([Y, Y], axis=1), SR)
        cases = _matrix_cases(wav)
        for i in range(start, len(cases)):
            fn_name, param, value_name, call = cases[i]
            sys.stdout.write(json.dumps({"start": i}) + "\n")
            sys.stdout.flush()
            verdict = _matrix_verdict(param, call)
            row = {"case": i, "fn": fn_name, "param": param, "value": value_name}
            sys.stdout.write(json.dumps({**row, "problem": verdict}) + "\n")
            sys.stdout.flush()
        agl_fast.set_num_threads(None)
        sys.stdout.write(json.dumps({"done": len(cases)}) + "\n")
        sys.stdout.flush()


CASE_TIMEOUT_S = 20.0


def run_matrix() -> tuple[int, list[str]]:
    """Run every case in child interpreters (a crash or a case over
    ``CASE_TIMEOUT_S`` is a problem, and the next child resumes after it);
    ``(number of cases, problems)``."""
    import selectors
    import time

    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('adversarial', {__file__!r}); "
        "t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t); "
        "t._matrix_child(int(sys.argv[1]))"
    )
    problems: list[str] = []
    start, total = 0, None
    while total is None:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(start)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current, deadline = None, time.monotonic() + 120.0  # the import and setup
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                proc.kill()
                proc.wait()
                problems.append(f"hang: case {current}: no answer within {CASE_TIMEOUT_S} s")
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                problems.append(f"crash: case {current}: child died with {proc.returncode}")
                break
            msg = json.loads(line)
            if "start" in msg:
                current = msg["start"]
                deadline = time.monotonic() + CASE_TIMEOUT_S
            elif "done" in msg:
                total = msg["done"]
                proc.wait()
                break
            elif msg["problem"] is not None:
                kind, what = msg["problem"]
                problems.append(f"{kind}: {msg['fn']}({msg['param']}={msg['value']}): {what}")
        sel.close()
        proc.stdout.close()
        if total is None:
            if current is None:
                break
            start = current + 1
    return (total or 0), problems


def test_matrix_covers_every_public_function() -> None:
    covered = set(_valid_calls("unused.wav"))
    missing = _public_names() - covered
    assert not missing, f"public functions outside the full matrix: {sorted(missing)}"


def test_every_parameter_of_every_public_function() -> None:
    """0 untyped errors, crashes and hangs over the whole matrix. (Typed
    errors whose message does not name the parameter, such as a decode
    error naming the file, are counted by ``python tests/test_adversarial.py``
    but do not fail here.)"""
    n, problems = run_matrix()
    assert n > 5000, f"the matrix ran only {n} cases"
    bad = [p for p in problems if not p.startswith("unnamed:")]
    assert not bad, f"{len(bad)} of {n} cases:\n" + "\n".join(bad)


if __name__ == "__main__":
    n_cases, found = run_matrix()
    print("\n".join(found))
    kinds = {k: sum(p.startswith(k + ":") for p in found) for k in ("untyped", "unnamed")}
    kinds["crash/hang"] = len(found) - sum(kinds.values())
    print(f"{n_cases} cases: " + ", ".join(f"{v} {k}" for k, v in kinds.items()))
