"""The top-level functions of ``agl_fast.compat.librosa`` (``stft``,
``load``, ``resample``, ``power_to_db``...), served by the package's
``__getattr__`` so that importing the package, :func:`install` and ``python
-m agl_fast.compat.librosa`` load none of this (numpy, the native module)
until a function is used or a librosa module is patched.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import features as _f
from ..._internal import args as _args
from ...dsp.params import CENTER as _CENTER
from ...dsp.params import N_FFT as _N_FFT
from ...dsp.params import PAD_MODE as _PAD_MODE
from ...dsp.params import WINDOW as _WINDOW
from ...dsp.params import StftParams as _StftParams
from ...dsp.params import default_hop_length
from ...dsp.stft import pad_signal as _pad_signal
from ...dsp.stft import stft_double as _stft_double
from ...exceptions import AudioDecodeError
from ...exceptions import ParameterError as _ParameterError
from . import _accept, _db, _version
from ._errors import HandOver, librosa_api
from ._fallback import handed_over
from ._resample import resample_poly as _resample_poly

__all__ = ["amplitude_to_db", "get_duration", "istft", "load", "pcen", "power_to_db",
           "resample", "stft", "to_mono"]  # fmt: skip

# Every res_type librosa.resample knows (0.10); another name is refused here
# instead of reaching librosa's fall-through import of an optional backend.
LIBROSA_RES_TYPES = (
    "soxr_vhq",
    "soxr_hq",
    "soxr_mq",
    "soxr_lq",
    "soxr_qq",
    "kaiser_best",
    "kaiser_fast",
    "fft",
    "scipy",
    "polyphase",
    "linear",
    "zero_order_hold",
    "sinc_best",
    "sinc_medium",
    "sinc_fastest",
)


def _count(name: str, value: Any, *, allow_none: bool = False) -> int | None:
    """A positive integer parameter as librosa checks it."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer() and value > 0:
            return int(value)
        raise _ParameterError(f"{name}={value!r} must be a positive integer")
    if value <= 0:
        raise _ParameterError(f"{name}={value} must be a positive integer")
    return int(value)


@librosa_api
def stft(
    y: np.ndarray,
    *,
    n_fft: int = _N_FFT,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = _WINDOW,
    center: bool = _CENTER,
    dtype: Any = None,
    pad_mode: str = _PAD_MODE,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``librosa.stft``: complex STFT ``[shape=(..., 1 + n_fft // 2, t)]``.

    The transform runs in double precision, as librosa's (which frames
    float32 audio against a float64 window); the result is complex64 for
    float32 input and complex128 for float64, as librosa. ``out``
    follows librosa's rules: its leading axes must match, it may have more
    frames than needed (the returned array is then a view of its first
    frames), and it must be complex.
    """
    y = _accept.valid_audio(y)
    center = _accept.flag(center)
    pad_mode = _args.text("pad_mode", pad_mode)
    if dtype is not None:
        _args.dtype("dtype", dtype)
    n_fft = _count("n_fft", n_fft)  # type: ignore[assignment]
    win_length = _count("win_length", win_length, allow_none=True)
    hop_length = _count("hop_length", hop_length, allow_none=True)
    if hop_length is None:
        hop_length = default_hop_length(n_fft, win_length, None)
        if hop_length < 1:
            raise _ParameterError(f"hop_length={hop_length} must be a positive integer")
    if center and pad_mode in _f.REFUSED_PAD_MODES:
        raise _ParameterError(
            f"pad_mode='{pad_mode}' is not supported by librosa.stft; use one of "
            f"{', '.join(_f.NATIVE_PAD_MODES + _f.NUMPY_PAD_MODES)}"
        )
    if center and n_fft > y.shape[-1]:
        warnings.warn(
            f"n_fft={n_fft} is too large for input signal of length={y.shape[-1]}",
            UserWarning,
            stacklevel=3,
        )
    # librosa frames float32 audio against a float64 window, so its FFT runs
    # in double precision whatever the input; the float64 kernel does the
    # same (reading float32 samples as they are, widened exactly) and writes
    # the input's complex type (complex64: rounded once).
    if dtype is None:
        dtype = np.complex64 if y.dtype.itemsize <= 4 else np.complex128
    wide = y if y.dtype == np.float32 else y.astype(np.float64, copy=False)
    frame = _StftParams(n_fft, hop_length, win_length, window, center, pad_mode)
    wide, framing = _pad_signal(wide, frame)
    S = _stft_double(wide, framing, None, single=np.dtype(dtype) == np.complex64)
    S = S.astype(dtype, copy=False)
    if out is None:
        return S  # type: ignore[no-any-return]
    if not isinstance(out, np.ndarray):
        raise _ParameterError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape[:-1] != S.shape[:-1] or out.shape[-1] < S.shape[-1]:
        raise _ParameterError(
            f"Shape mismatch for provided output array out.shape={out.shape} "
            f"and target shape={S.shape}"
        )
    if not np.iscomplexobj(out):
        raise _ParameterError(f"output with dtype={out.dtype} is not of complex type")
    target = out if out.shape == S.shape else out[..., : S.shape[-1]]
    target[...] = S
    return target


@librosa_api
def power_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
) -> Any:
    """``librosa.power_to_db`` (0.10, 0.11) over the whole array; scalars,
    0-d arrays and Python numbers give a numpy scalar, float64 in gives float64
    out. librosa 1.0's form, with ``axes=``, is :func:`._v1.power_to_db`."""
    return _db.whole("power_to_db", S, ref, amin, top_db)


@librosa_api
def amplitude_to_db(
    S: Any,
    *,
    ref: float | Callable[..., Any] = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
) -> Any:
    """``librosa.amplitude_to_db`` (0.10, 0.11) over the whole array (see
    :func:`power_to_db`)."""
    return _db.whole("amplitude_to_db", S, ref, amin, top_db)


def _is_path(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike))


def _file_like(path: Any) -> None:
    """Refuse a source that is neither a path nor a readable object. An
    integer would reach soundfile as a file descriptor, which it reads and
    then closes: ``load(True)`` would close the process's standard output."""
    if not hasattr(path, "read") and not hasattr(path, "read_data"):
        raise _ParameterError(
            "path must be a file path, a file-like object or an audioread object, "
            f"got a {type(path).__name__}"
        )


#: File extensions of the containers the drop-in decodes natively: those
#: librosa reads through soundfile (libsndfile) whose native decode agrees
#: with libsndfile's within the tolerance of librosa's own tests. librosa
#: reads other containers (MP4/M4A, Matroska, ...) with audioread (another
#: decoder) until 0.11 and not at all from 1.0; the native Vorbis decoder's
#: samples differ from libvorbis's by up to 2e-7, which librosa 1.0's own
#: tests (``stream`` against ``load``) do not accept: such files go to
#: librosa (:func:`_native_container`).
NATIVE_EXTENSIONS = (".wav", ".wave", ".flac", ".mp3")


def _native_container(path: Any) -> None:
    """Raise :class:`HandOver` for a file the drop-in leaves to librosa."""
    name = os.fsdecode(path).lower()
    if name.endswith(NATIVE_EXTENSIONS):
        return
    if name.endswith((".ogg", ".oga")):
        raise HandOver(
            "Ogg Vorbis: the native decoder's samples differ from libvorbis's by up to 2e-7"
        )
    raise HandOver(f"librosa reads {os.fspath(path)!r} without soundfile, or not at all")


@librosa_api
def load(
    path: Any,
    *,
    sr: float | None = 22050,
    mono: bool = True,
    offset: float = 0.0,
    duration: float | None = None,
    dtype: Any = np.float32,
    res_type: str = "soxr_hq",
) -> tuple[np.ndarray, float]:
    """``librosa.load`` decoded in Rust: ``(y, sr)`` with ``y``
    ``[shape=(n,)]`` (mono) or ``[shape=(channels, n)]``.

    A file at another rate than ``sr`` is decoded at its own rate, then
    converted by :func:`resample` (``polyphase`` natively, the ``soxr_*``
    types and the rest by librosa, as librosa's loader does). Inputs that are
    not a path (``soundfile.SoundFile``, file-like or audioread objects) and
    containers the decoder does not read go to librosa's own loader.
    """
    from ... import audio

    mono = _accept.flag(mono)
    target = sr  # returned as given, as librosa does
    sr = _accept.opt_real("sr", sr)
    offset = _accept.real("offset", offset)
    duration = _accept.opt_real("duration", duration)
    _args.dtype("dtype", dtype)
    res_type = _args.choice("res_type", res_type, LIBROSA_RES_TYPES)
    if not _is_path(path):
        _file_like(path)
        raise HandOver(f"a {type(path).__name__} input is not a file path")
    if offset < 0:
        raise HandOver("a negative offset (from the end of the file in librosa 1.0)")
    _native_container(path)
    kwargs = {
        "sr": sr,
        "mono": mono,
        "offset": offset,
        "duration": duration,
        "dtype": dtype,
        "res_type": res_type,
    }
    if sr is not None and (not np.isfinite(sr) or sr <= 0):
        raise _ParameterError(f"sr={sr} must be a positive, finite sample rate")
    try:
        y, out_sr = audio.load(
            path,
            sr=None,
            mono=mono,
            offset=float(offset),
            duration=None if duration is None else float(duration),
        )
    except AudioDecodeError as exc:
        if not os.path.isfile(path):  # a special file is no fallback case
            raise
        return handed_over("load", f"the decoder cannot read {os.fspath(path)!r} ({exc})")(  # type: ignore[no-any-return]
            path, **kwargs
        )
    if sr is not None and out_sr != sr:
        y = resample(y, orig_sr=out_sr, target_sr=sr, res_type=res_type)
    return y.astype(dtype, copy=False), out_sr if target is None else target


def _check_conversion(orig_sr: float, target_sr: float) -> None:
    """agl-fast's limits on a rate conversion (``agl_fast.audio``'s
    ``MAX_SAMPLE_RATE`` on both rates, ``MAX_RATIO`` on the factor), checked
    before any resampler, librosa's included, allocates its output."""
    from ... import audio

    for name, rate in (("orig_sr", orig_sr), ("target_sr", target_sr)):
        if rate > audio.MAX_SAMPLE_RATE:
            raise _ParameterError(
                f"{name}={rate!r} Hz is above the {audio.MAX_SAMPLE_RATE} Hz agl-fast accepts"
            )
    factor = max(orig_sr / target_sr, target_sr / orig_sr)
    if factor > audio.MAX_RATIO:
        raise _ParameterError(
            f"resampling {orig_sr!r} Hz to {target_sr!r} Hz changes the rate by {factor:.4g}x, "
            f"above the factor of {audio.MAX_RATIO:g} agl-fast accepts"
        )


def _resample_hand_over(
    y: np.ndarray, orig_sr: float, target_sr: float, res_type: str, keywords: bool
) -> str:
    """Why :func:`resample` hands this call to librosa ("" when it does not)."""
    from ... import audio

    if res_type.startswith("soxr_"):
        return f"res_type={res_type!r} is soxr's own filter: librosa's call gives its exact output"
    if res_type != "polyphase":
        return f"res_type={res_type!r} has no equivalent agl-fast filter"
    if not (float(orig_sr).is_integer() and float(target_sr).is_integer()) or keywords:
        return "non-integer rates or fix_length keywords are not accelerated"
    if y.dtype not in (np.float32, np.float64):
        return f"polyphase on {y.dtype} data is not accelerated"
    if max(orig_sr, target_sr) > audio.MAX_SAMPLE_RATE:
        # the filter has 20 taps per unit of the larger reduced rate
        return f"polyphase above {audio.MAX_SAMPLE_RATE} Hz is not accelerated"
    return ""


@librosa_api
def resample(
    y: np.ndarray,
    *,
    orig_sr: float,
    target_sr: float,
    res_type: str = "soxr_hq",
    fix: bool = True,
    scale: bool = False,
    axis: int = -1,
    **kwargs: Any,
) -> np.ndarray:
    """``librosa.resample``. ``polyphase`` with integer rates runs scipy's
    ``resample_poly`` filter natively (see :mod:`._resample`); every other
    ``res_type`` is librosa's own (librosa must be installed), the default
    ``soxr_hq`` included: soxr's filter is its own design, and only soxr
    gives its output to the bit. Each such call is counted as handed over
    (see :func:`coverage`)."""
    # The values are scanned below, or by librosa on a hand-over.
    y = _accept.valid_audio(y, finite=False)
    orig_sr = _accept.real("orig_sr", orig_sr)
    target_sr = _accept.real("target_sr", target_sr)
    res_type = _args.choice("res_type", res_type, LIBROSA_RES_TYPES)
    fix = _accept.flag(fix)
    scale = _accept.flag(scale)
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise _ParameterError(f"axis must be an integer, got axis={axis!r}")
    if not -y.ndim <= axis < y.ndim:
        raise _ParameterError(f"axis={axis} is out of range for an array of {y.ndim} dimensions")
    for name, rate in (("orig_sr", orig_sr), ("target_sr", target_sr)):
        if not np.isfinite(rate) or rate <= 0:
            raise _ParameterError(f"{name}={rate!r} must be a positive, finite sample rate")
    if orig_sr == target_sr:
        return y
    _check_conversion(orig_sr, target_sr)
    reason = _resample_hand_over(y, orig_sr, target_sr, res_type, bool(kwargs))
    if reason:
        return handed_over("resample", reason)(  # type: ignore[no-any-return]
            y,
            orig_sr=orig_sr,
            target_sr=target_sr,
            res_type=res_type,
            fix=fix,
            scale=scale,
            axis=axis,
            **kwargs,
        )
    _accept.valid_audio(y)
    x = np.moveaxis(y, axis, -1)
    lead = x.shape[:-1]
    rows = np.ascontiguousarray(x.reshape(int(np.prod(lead)), x.shape[-1]))
    out = _resample_poly(rows, int(orig_sr), int(target_sr))
    ratio = float(target_sr) / float(orig_sr)
    n_samples = int(np.ceil(x.shape[-1] * ratio))
    if fix and out.shape[-1] != n_samples:
        fixed = np.zeros((out.shape[0], n_samples), dtype=out.dtype)
        m = min(n_samples, out.shape[-1])
        fixed[:, :m] = out[:, :m]
        out = fixed
    if scale:
        out = out / np.sqrt(ratio)
    out = out.reshape(*lead, out.shape[-1])
    return np.asarray(np.moveaxis(out, -1, axis), dtype=y.dtype)


class _Deprecated:
    """The default of an argument librosa deprecated (``filename``)."""

    def __repr__(self) -> str:
        return "<DEPRECATED parameter>"


_DEPRECATED = _Deprecated()


@librosa_api
def get_duration(
    *,
    y: np.ndarray | None = None,
    sr: float = 22050,
    S: np.ndarray | None = None,
    n_fft: int = _N_FFT,
    hop_length: int = 512,
    center: bool = _CENTER,
    path: Any = None,
    filename: Any = _DEPRECATED,
) -> float:
    """``librosa.get_duration`` (0.10, 0.11) of a file (from its header
    where that states the length, else decoded here; a container librosa
    does not read with soundfile goes to librosa), a spectrogram or a
    buffer. The deprecated ``filename`` is handed to librosa, which warns.
    librosa 1.0's form is :func:`._v1.get_duration`."""
    if filename is not _DEPRECATED:
        if not _is_path(filename):
            _file_like(filename)
        raise HandOver("the deprecated filename= argument")
    return duration_of(y, sr, S, n_fft, hop_length, center, path)


def duration_of(
    y: Any, sr: Any, S: Any, n_fft: Any, hop_length: Any, center: Any, path: Any
) -> float:
    """The seconds of ``get_duration`` (every librosa release)."""
    from ... import audio

    sr = _accept.real("sr", sr)
    center = _accept.flag(center)
    if path is not None:
        if not _is_path(path):
            _file_like(path)
            raise HandOver(f"a {type(path).__name__} input is not a file path")
        _native_container(path)
        try:
            return audio.duration(path)
        except AudioDecodeError as exc:
            if not os.path.isfile(path):
                raise
            return handed_over(  # type: ignore[no-any-return]
                "get_duration", f"the decoder cannot read {os.fspath(path)!r} ({exc})"
            )(path=path)
    if y is None:
        if S is None:
            raise _ParameterError("At least one of (y, sr), S, or path must be provided")
        S = _args.array("S", S, complex_ok=True)
        if S.ndim < 1:
            raise _ParameterError(f"S must be a spectrogram [..., t], got shape {S.shape}")
        n_samples = n_fft + hop_length * (S.shape[-1] - 1)
        if center:
            n_samples -= 2 * (n_fft // 2)
    else:
        y = _args.array("y", y)
        if y.ndim < 1:
            raise _ParameterError(f"y must be an audio buffer [..., n], got shape {y.shape}")
        n_samples = y.shape[-1]
    if not np.isfinite(sr) or sr <= 0:
        raise _ParameterError(f"sr={sr!r} must be a positive, finite sample rate")
    return float(n_samples) / sr


from ._istft import istft  # noqa: E402
from ._utility import pcen, to_mono  # noqa: E402

if _version.at_least(1, 0):
    # librosa 1.0's forms of the names whose signature or meaning changed
    from . import _v1

    power_to_db = _v1.power_to_db  # type: ignore[assignment]
    amplitude_to_db = _v1.amplitude_to_db  # type: ignore[assignment]
    to_mono = _v1.to_mono  # type: ignore[assignment]
    get_duration = _v1.get_duration  # type: ignore[assignment]

# The functions defined here are the package's public names (served by its
# __getattr__): they say so, as they did when they lived in __init__.
for _name in __all__:
    if getattr(globals()[_name], "__module__", None) == __name__:
        globals()[_name].__module__ = __package__
