"""Bad input gives a clear, typed error (never a panic or a crash)."""

from __future__ import annotations

import numpy as np
import pytest

import agl_fast
from agl_fast import bands, geo
from agl_fast.exceptions import NonFiniteError, ParameterError, ShapeError

MONO_KERNELS = [
    lambda y, **k: agl_fast.stft(y, n_fft=512, **k),
    lambda y, **k: agl_fast.melspectrogram(y, sr=16000, n_fft=512, **k),
    lambda y, **k: agl_fast.logmel(y, sr=16000, n_fft=512, **k),
    lambda y, **k: agl_fast.efficientat(y, **k),
]
STEREO_KERNELS = [
    lambda y, **k: agl_fast.bat(y, **k),
    lambda y, **k: agl_fast.ipd_features(y, **k),
]


@pytest.mark.parametrize("fn", MONO_KERNELS)
def test_mono_bad_inputs(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ShapeError, match="empty"):
        fn(np.zeros(0, np.float32))
    with pytest.raises(NonFiniteError, match="not finite"):
        fn(np.array([0.0, np.nan, 1.0] * 400, np.float32))
    with pytest.raises(NonFiniteError, match="not finite"):
        fn(np.array([0.0, np.inf] * 600, np.float32))
    with pytest.raises(ParameterError, match="dtype"):
        fn(np.zeros(2000, np.complex64))
    with pytest.raises(ParameterError, match="dtype"):
        fn(np.array(["a"] * 10))
    with pytest.raises(ParameterError, match="needs a copy"):
        fn(np.zeros((2, 4000), np.float32)[:, ::2], allow_copy=False)
    with pytest.raises(ParameterError, match="needs a copy"):
        fn(np.zeros((2, 8000), np.float64)[:, ::2], allow_copy=False)
    with pytest.raises(ShapeError, match="empty"):
        fn([])


def test_three_d_input_to_a_mono_preset() -> None:
    with pytest.raises(ShapeError, match="3-D"):
        agl_fast.efficientat(np.zeros((2, 2, 4000), np.float32))


def test_too_short_for_one_frame() -> None:
    with pytest.raises(ShapeError, match="too large for an input signal of length=100"):
        agl_fast.stft(np.zeros(100, np.float32), n_fft=512, center=False)
    with pytest.raises(ShapeError, match="pre-emphasis needs at least 2"):
        agl_fast.efficientat(np.zeros(1, np.float32))


def test_bad_parameters() -> None:
    y = np.zeros(4000, np.float32)
    with pytest.raises(ParameterError, match=r"n_fft must be >= win_length.*n_fft=512"):
        agl_fast.stft(y, n_fft=512, win_length=800)
    with pytest.raises(ParameterError, match="hop_length must be a positive integer, got 0"):
        agl_fast.stft(y, n_fft=512, hop_length=0)
    with pytest.raises(ParameterError, match="n_fft must be a positive integer, got 0"):
        agl_fast.stft(y, n_fft=0, hop_length=1, win_length=None)
    with pytest.raises(ParameterError, match="window"):
        agl_fast.stft(y, window="kaiser")
    with pytest.raises(ParameterError, match="pad_mode"):
        agl_fast.stft(y, pad_mode="wrap")
    with pytest.raises(ParameterError, match="fmax"):
        agl_fast.mel_filterbank(sr=16000, n_fft=512, fmin=9000, fmax=8000)
    with pytest.raises(ParameterError, match="sr"):
        agl_fast.mel_filterbank(sr=0, n_fft=512)
    with pytest.raises(ParameterError, match="power"):
        agl_fast.spectrogram(y, power=0)
    with pytest.raises(ParameterError, match="amin"):
        agl_fast.power_to_db(np.ones(4, np.float32), amin=0)
    with pytest.raises(ParameterError, match="n_threads"):
        agl_fast.stft(y, n_threads=0)
    with pytest.raises(ParameterError, match="output"):
        agl_fast.stft(y, output="xml")  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", STEREO_KERNELS)
def test_mono_where_stereo_is_required(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ShapeError, match="stereo input required"):
        fn(np.zeros(32000, np.float32))
    with pytest.raises(ShapeError, match="stereo input required"):
        fn(np.zeros((1, 32000), np.float32))
    with pytest.raises(ShapeError, match="stereo input required"):
        fn(np.zeros((4, 3, 32000), np.float32))
    with pytest.raises(ShapeError, match="stereo input required"):
        fn([np.zeros((3, 100), np.float32)])
    with pytest.raises(ShapeError, match="stereo input required"):
        fn(np.zeros((1, 1, 2, 100), np.float32))
    bad = np.zeros((2, 32000), np.float32)
    bad[1, 5] = np.nan
    with pytest.raises(NonFiniteError, match="channel 1"):
        fn(bad)


def test_arrow_inputs_with_wrong_types() -> None:
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(ParameterError, match="Arrow input must be"):
        agl_fast.efficientat(pa.array(["a", "b"]))
    with pytest.raises(ParameterError, match="null"):
        agl_fast.efficientat(pa.array([[0.1] * 4000, None], type=pa.list_(pa.float32())))
    with pytest.raises(ShapeError, match="stereo input required"):
        agl_fast.bat(pa.array([[[0.0] * 1000]], type=pa.list_(pa.list_(pa.float32()))))


def test_errors_are_catchable_as_builtins() -> None:
    with pytest.raises(ValueError):
        agl_fast.stft(np.zeros(0, np.float32))
    assert issubclass(agl_fast.exceptions.AudioDecodeError, OSError)


@pytest.mark.parametrize("value", [-1, 0, 2.5, True, np.bool_(True), 2**64, -(2**70), None])
@pytest.mark.parametrize(
    ("fn", "name"),
    [
        (lambda y, v: agl_fast.stft(y, n_fft=v), "n_fft"),
        (lambda y, v: agl_fast.stft(y, n_fft=64, hop_length=v), "hop_length"),
        (lambda y, v: agl_fast.spectrogram(y, n_fft=64, win_length=v), "win_length"),
        (lambda y, v: agl_fast.melspectrogram(y, n_fft=64, n_mels=v), "n_mels"),
        (lambda y, v: agl_fast.stft(y, n_fft=64, n_threads=v), "n_threads"),
        (lambda y, v: agl_fast.quality.rms(y, frame_length=v), "frame_length"),
    ],
)
def test_counts_are_checked_once_with_the_parameter_named(fn, name, value) -> None:  # type: ignore[no-untyped-def]
    """A count that is negative, zero, fractional, boolean or beyond 64 bits
    is a ParameterError naming the parameter, never an OverflowError,
    TypeError or panic. (``None`` is the default where one exists.)"""
    y = np.zeros(4000, np.float32)
    if value is None:
        if name in ("hop_length", "win_length", "n_threads"):
            fn(y, value)
            return
        with pytest.raises(ParameterError, match=name):
            fn(y, value)
        return
    with pytest.raises(
        ParameterError, match=f"{name} must be (a positive integer|an integer between 1 and)"
    ):
        fn(y, value)


def test_plan_sizes_have_a_ceiling() -> None:
    y = np.zeros(4000, np.float32)
    with pytest.raises(ParameterError, match="n_fft must be <="):
        agl_fast.stft(y, n_fft=2**62)
    with pytest.raises(ParameterError, match="frame_length must be <="):
        agl_fast.quality.rms(y, frame_length=2**31)


# --- one validation layer: the cases the adversarial run reported ---------

_Y = np.sin(np.arange(4000, dtype=np.float32) / 10.0) * np.float32(0.1)
_Y2 = np.stack([_Y, _Y[::-1].copy()])


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda v: agl_fast.stft(_Y, n_fft=256, center=v), "center"),
        (lambda v: agl_fast.spectrogram(_Y, n_fft=256, center=v), "center"),
        (lambda v: agl_fast.melspectrogram(_Y, sr=16000, n_fft=256, center=v), "center"),
        (lambda v: agl_fast.melspectrogram(_Y, sr=16000, n_fft=256, htk=v), "htk"),
        (lambda v: agl_fast.logmel(_Y, sr=16000, n_fft=256, center=v), "center"),
        (lambda v: agl_fast.logmel(_Y, sr=16000, n_fft=256, htk=v), "htk"),
        (lambda v: agl_fast.ipd_features(_Y2, n_fft=256, center=v), "center"),
        (lambda v: agl_fast.ipd_features(_Y2, n_fft=256, htk=v), "htk"),
        (lambda v: agl_fast.mel_filterbank(sr=16000, n_fft=512, htk=v), "htk"),
        (lambda v: agl_fast.n_frames(4000, n_fft=512, center=v), "center"),
        (lambda v: agl_fast.schroeder_edc(_Y, 16000, normalize=v), "normalize"),
        (lambda v: agl_fast.schroeder_edc(_Y, 16000, db=v), "db"),
    ],
)
@pytest.mark.parametrize("value", [2, "yes", None, 1.0])
def test_booleans_must_be_bool(call, name, value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=f"{name} must be True or False"):
        call(value)


def test_numpy_bool_is_a_bool() -> None:
    a = agl_fast.stft(_Y, n_fft=256, center=np.bool_(False))
    b = agl_fast.stft(_Y, n_fft=256, center=False)
    assert np.array_equal(a, b)


def test_none_where_a_value_is_required(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import soundfile as sf

    wav = tmp_path / "tone.wav"
    sf.write(wav, _Y, 16000)
    with pytest.raises(ParameterError, match="pad_mode must be a string"):
        agl_fast.ipd_features(_Y2, n_fft=256, pad_mode=None)
    with pytest.raises(ParameterError, match="res_type must be a string"):
        agl_fast.load(wav, res_type=None)
    with pytest.raises(ParameterError, match="res_type must be a string"):
        agl_fast.load_many([wav], res_type=None)
    with pytest.raises(ParameterError, match="thresholds must be a sequence"):
        geo.summarize(np.array([1.0, 2.0]), thresholds=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"quantiles\[1\] must be a real number"):
        geo.summarize(np.array([1.0, 2.0]), quantiles=(0.5, "x"))  # type: ignore[arg-type]


class _ExportRaises:
    def __arrow_c_array__(self, requested_schema=None):  # type: ignore[no-untyped-def]
        raise KeyError("exporter is broken")


class _ExportGarbage:
    def __arrow_c_array__(self, requested_schema=None):  # type: ignore[no-untyped-def]
        return "not a pair of capsules"


@pytest.mark.parametrize("bad", [_ExportRaises(), _ExportGarbage()])
def test_malformed_arrow_export_names_the_argument(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=r"^y: its Arrow export") as info:
        agl_fast.stft(bad, n_fft=256)
    assert info.value.__cause__ is not None
    with pytest.raises(ParameterError, match=r"^y: its Arrow export"):
        agl_fast.ipd_features(bad, n_fft=256)
    with pytest.raises(ParameterError, match=r"^sources: its Arrow export"):
        agl_fast.fftconvolve(bad, _Y)
    if isinstance(bad, _ExportRaises):
        assert isinstance(info.value.__cause__, KeyError)


def test_valid_arrow_input_is_unchanged() -> None:
    import pyarrow as pa

    arr = pa.array([_Y.tolist()], type=pa.list_(pa.float32()))
    got = agl_fast.spectrogram(arr, n_fft=256, output="numpy")
    assert np.array_equal(got[0], agl_fast.spectrogram(_Y, n_fft=256))


# An array where a name or a flag is expected: `x in ("a", "b")` and `if x:`
# would raise numpy's ambiguous-truth ValueError instead of naming the
# parameter.
_GRID = np.zeros((2, 2))
_ONES = np.ones(2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: agl_fast.stft(_Y, n_fft=256, output=_GRID), "output must be one of"),
        (
            lambda: agl_fast.spectrogram(_Y.astype(np.float64), n_fft=256, output=_GRID),
            "output must be one of",
        ),
        (lambda: agl_fast.logmel(_Y, sr=16000, n_fft=256, output=_GRID), "output must be one of"),
        (lambda: agl_fast.fftconvolve(_Y, _Y, mode=_GRID), "mode must be 'full'"),
        (lambda: agl_fast.schroeder_edc(_Y, 16000, method=_GRID), "method must be one of"),
        (
            lambda: agl_fast.edc_distance(_Y, _Y, 16000, return_status=_GRID),
            "return_status must be True or False",
        ),
        (
            lambda: geo.haversine(_ONES, _ONES, _ONES, _ONES, on_invalid=_GRID),
            "on_invalid must be 'nan' or 'raise'",
        ),
        (lambda: bands.band_centres(bands=_GRID), "bands must be 'octave' or 'third'"),
        (lambda: agl_fast.power_to_db(_ONES, per_item=_GRID), "per_item must be True or False"),
        (lambda: agl_fast.amplitude_to_db(_ONES, per_item=2), "per_item must be True or False"),
    ],
)
def test_an_array_for_a_name_or_flag_is_a_parameter_error(call, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=match):
        call()


@pytest.mark.parametrize("window", [(), ("kaiser",), ("no-such-window", 3.0)])
def test_a_malformed_window_tuple_is_a_parameter_error(window) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=r"window=.* is not a known window"):
        agl_fast.stft(_Y, n_fft=256, window=window)


def test_compat_checks_flags_and_names() -> None:
    from agl_fast.compat import librosa as compat

    y = _Y.astype(np.float64)
    # a flag is read by its truth value, as librosa reads it: an array of
    # several values has none (librosa's ValueError, as a ParameterError)
    with pytest.raises(ParameterError, match="truth value of an array"):
        compat.stft(y, n_fft=256, center=_GRID)
    with pytest.raises(ParameterError, match="pad_mode must be a string"):
        compat.stft(y, n_fft=256, pad_mode=None)
    with pytest.raises(ParameterError, match="dct_type=5 must be 1, 2, 3 or 4"):
        compat.feature.mfcc(y=y, sr=16000, n_fft=256, dct_type=5)
    with pytest.raises(ParameterError, match="dct_type=True must be 1, 2, 3 or 4"):
        compat.feature.mfcc(y=y, sr=16000, n_fft=256, dct_type=True)
    with pytest.raises(ParameterError, match="norm must be a string"):
        compat.feature.mfcc(y=y, sr=16000, n_fft=256, norm=_GRID)
    # Valid non-default DCTs still go through scipy.
    got = compat.feature.mfcc(y=y, sr=16000, n_fft=256, dct_type=3, norm=None)
    assert got.shape[0] == 20
