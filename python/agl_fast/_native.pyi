# Type stubs of the compiled module agl_fast._native (checked by
# mypy.stubtest in the test suite). One section per feature family.
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, disjoint_base

from .dsp.params import MelParams

__version__: str
MAX_SAMPLE_RATE: int
MAX_RATIO: float
CORRUPT_LEVEL: float
SR_RANGE: tuple[float, float]
MAX_POWER: float
CLIP_LEVEL: float
QUALITY_N_FFT: int
PRESET_N_FFT: int
FP_ANALYSIS_SR: int
FP_HOP: int
FP_N_FFT: int
FP_HASH_BITS: int
FP_MIN_DISTINCT: int
FP_MIN_SCORE: float
FP_MIN_MATCHES: int
FP_MAX_POSTINGS: int
__all__ = [
    "CLIP_LEVEL",
    "CORRUPT_LEVEL",
    "FP_ANALYSIS_SR",
    "FP_HASH_BITS",
    "FP_HOP",
    "FP_MAX_POSTINGS",
    "FP_MIN_DISTINCT",
    "FP_MIN_MATCHES",
    "FP_MIN_SCORE",
    "FP_N_FFT",
    "MAX_POWER",
    "MAX_RATIO",
    "MAX_SAMPLE_RATE",
    "PRESET_N_FFT",
    "QUALITY_N_FFT",
    "SR_RANGE",
    "Framing",
    "__version__",
    "acoustic_complexity",
    "bat",
    "check_count",
    "default_hop_length",
    "default_threads",
    "edc",
    "edc_distance",
    "efficientat",
    "fftconvolve",
    "fingerprint_many",
    "geo_summary",
    "geodesic",
    "geoscore",
    "hash_counts",
    "haversine",
    "ipd",
    "kaldi_mel_filterbank",
    "levels",
    "load",
    "load_many",
    "max_threads",
    "mel_filterbank",
    "melspectrogram",
    "pair",
    "pcen",
    "probe",
    "quality_metrics",
    "resample_array",
    "resample_poly",
    "rms",
    "room_parameters",
    "spectral_flatness",
    "spectrogram",
    "stft",
    "to_db",
]

_Out = tuple[
    npt.NDArray[Any],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
]

def default_threads() -> int: ...
def max_threads() -> int: ...

# --- features -------------------------------------------------------------
@disjoint_base
class Framing:
    NATIVE_PAD_MODES: tuple[str, str]
    NUMPY_PAD_MODES: list[str]
    def __new__(
        cls,
        n_fft: Any,
        hop_length: Any,
        win_length: Any,
        window: Any,
        center: Any,
        pad_mode: Any,
        coefficients: Any = None,
    ) -> Self: ...
    def padded(self) -> Framing: ...
    def n_frames(self, n_samples: Any) -> int: ...
    @property
    def outside_pad(self) -> str | None: ...
    @property
    def n_fft(self) -> int: ...
    @property
    def hop_length(self) -> int: ...
    @property
    def win_length(self) -> int: ...
    @property
    def window(self) -> Any: ...
    @property
    def center(self) -> bool: ...
    @property
    def pad_mode(self) -> str: ...

def check_count(name: str, value: Any) -> int: ...
def default_hop_length(win_length: int) -> int: ...
def mel_filterbank(n_fft: int, mel: MelParams) -> npt.NDArray[np.float32]: ...
def kaldi_mel_filterbank(
    sr: float, n_fft: int, n_mels: int, fmin: float, fmax: float
) -> npt.NDArray[np.float32]: ...
@overload
def stft(
    signals: Any,
    framing: Framing,
    extent: int | None = None,
    n_threads: int | None = None,
    double: Literal[False] = False,
    single: bool = False,
    frame_major: bool = False,
) -> _Out: ...
@overload
def stft(
    signals: npt.NDArray[np.float64] | npt.NDArray[np.float32],
    framing: Framing,
    extent: None = None,
    n_threads: int | None = None,
    *,
    double: Literal[True],
    single: bool = False,
    frame_major: bool = False,
) -> tuple[int, npt.NDArray[np.complexfloating[Any, Any]]]: ...
def spectrogram(
    signals: Any,
    framing: Framing,
    power: float = 2.0,
    extent: int | None = None,
    n_threads: int | None = None,
    mel: MelParams | None = None,
    frame_major: bool = False,
) -> Any: ...  # _Out for a float32 batch; (frames, float64 data) for float64 rows
def melspectrogram(
    signals: Any,
    framing: Framing,
    mel: MelParams,
    power: float = 2.0,
    db: Mapping[str, Any] | None = None,
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def ipd(
    signals: Any,
    framing: Framing,
    mel: MelParams,
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def bat(
    signals: Any,
    recipe: Mapping[str, Any],
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def efficientat(
    signals: Any,
    recipe: Mapping[str, Any],
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def to_db(
    x: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    db_ref: float | None = ...,
    amin: float = 1e-10,
    top_db: float | None = ...,
    amplitude: bool = False,
    n_threads: int | None = None,
) -> Any: ...  # an array of the dtype of x

# --- geo --------------------------------------------------------------------
def haversine(
    lat1: npt.NDArray[np.float64],
    lon1: npt.NDArray[np.float64],
    lat2: npt.NDArray[np.float64],
    lon2: npt.NDArray[np.float64],
    radius: float = ...,
    n_threads: int | None = None,
) -> tuple[npt.NDArray[np.float64], int, int | None]: ...
def geodesic(
    lat1: npt.NDArray[np.float64],
    lon1: npt.NDArray[np.float64],
    lat2: npt.NDArray[np.float64],
    lon2: npt.NDArray[np.float64],
    a: float = 6378137.0,
    f: float = ...,
    n_threads: int | None = None,
) -> tuple[npt.NDArray[np.float64], int, int | None]: ...
def geoscore(
    d: npt.NDArray[np.float64], scale: float = ..., max_score: float = ...
) -> npt.NDArray[np.float64]: ...
def geo_summary(
    d: npt.NDArray[np.float64],
    thresholds: list[float],
    quantiles: list[float],
    scale: float = ...,
    max_score: float = ...,
    n_threads: int | None = None,
) -> tuple[int, int, float, float, npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...

# --- audio ----------------------------------------------------------------
def load(
    path: str | os.PathLike[str] | bytes,
    options: Mapping[str, Any],
    format: str | None = None,
) -> tuple[npt.NDArray[np.float32], int, int, int, bool]: ...
def load_many(
    paths: Sequence[str | os.PathLike[str] | bytes],
    options: Mapping[str, Any],
    n_threads: int | None = None,
    join: bool = True,
    formats: Sequence[str | None] | None = None,
) -> tuple[
    npt.NDArray[np.float32] | list[npt.NDArray[np.float32] | None],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
    list[int],
    list[int],
    list[int],
    list[bool],
    list[str | None],
    list[str | None],
    npt.NDArray[np.float64],
    list[int],
    list[int | None],
]: ...
def probe(
    path: str | os.PathLike[str] | bytes, format: str | None = None
) -> tuple[int, int, int | None]: ...
def resample_array(
    y: npt.NDArray[np.float32], orig_sr: int, target_sr: int, res_type: str = "hq"
) -> npt.NDArray[np.float32]: ...

# --- quality --------------------------------------------------------------
def levels(
    signals: Any, threshold: float = ..., n_threads: int | None = None
) -> npt.NDArray[np.float64]: ...
def quality_metrics(
    signals: Any,
    params: Mapping[str, Any],
    n_threads: int | None = None,
    clip_stats: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]: ...
def rms(
    signals: Any,
    frame_length: int,
    hop_length: int,
    center: bool,
    pad_mode: str,
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def spectral_flatness(
    signals: Any,
    framing: Framing,
    amin: float = 1e-10,
    power: float = 2.0,
    extent: int | None = None,
    n_threads: int | None = None,
) -> _Out: ...
def acoustic_complexity(s: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]: ...

# --- fingerprint ----------------------------------------------------------
def fingerprint_many(
    ys: Sequence[npt.NDArray[np.float32]],
    srs: npt.NDArray[np.int64],
    n_threads: int | None = None,
) -> list[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], int, int]]: ...

_FpSide = tuple[
    Sequence[npt.NDArray[np.uint32]], Sequence[npt.NDArray[np.uint32]], npt.NDArray[np.uint32]
]

def hash_counts(
    hashes: Sequence[npt.NDArray[np.uint32]],
    times: Sequence[npt.NDArray[np.uint32]],
    n_threads: int | None = None,
) -> npt.NDArray[np.uint32]: ...
def pair(
    clips: _FpSide,
    min_score: float,
    min_matches: int,
    n_threads: int | None = None,
    others: _FpSide | None = None,
    counts: npt.NDArray[np.uint32] | None = None,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint32],
]: ...

# --- room -----------------------------------------------------------------
def edc(
    curves: Any,
    sr: float,
    method: str = "lundeby_chu",
    normalize: bool = True,
    db: bool = False,
    n_threads: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint64]]: ...
def room_parameters(
    curves: Any,
    sr: float,
    method: str = "lundeby_chu",
    direct_ms: float = 2.5,
    n_threads: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]: ...
def edc_distance(
    pred: Any,
    reference: Any,
    sr: float,
    method: str = "none",
    floor_db: float = ...,
    n_threads: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]: ...
def fftconvolve(
    sources: Any,
    irs: Any,
    channels: npt.NDArray[np.uint64],
    mode: str = "full",
    n_threads: int | None = None,
) -> tuple[
    npt.NDArray[np.float32],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
]: ...

# --- compat.librosa -------------------------------------------------------
def pcen(
    s: npt.NDArray[np.float64], zi: npt.NDArray[np.float64], options: Mapping[str, Any]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def resample_poly(
    x: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    h: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    up: int,
    down: int,
    offset: int,
    n_out: int,
) -> Any: ...  # an array of the dtype of x
