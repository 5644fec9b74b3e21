"""The drop-in follows the installed librosa release (0.10, 0.11 or 1.0):
its signatures, its meaning, and the values it accepts or refuses.

Every check compares with the librosa installed in the running environment,
so the file means what it says on each release: CI runs it on librosa 0.11
(the default environment) and on librosa 1.0 (the Python 3.12 environment
of ``scripts/test.sh``). Checks of one release's behaviour name it.

    python -m pytest tests/test_compat_librosa_versions.py
"""

from __future__ import annotations

import importlib
import inspect
import warnings
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import librosa as real
import numpy as np
import pytest

import agl_fast.compat.librosa as librosa
from agl_fast.compat.librosa import _version
from agl_fast.compat.librosa._coverage import ACCELERATED

ON_1_0 = _version.at_least(1, 0)


def _real(qual: str) -> Any:
    path, _, name = qual.rpartition(".")
    return getattr(importlib.import_module("librosa" + (f".{path}" if path else "")), name)


def _compat(qual: str) -> Any:
    """The drop-in's own function (loaded on first use), never librosa's."""
    path, _, name = qual.rpartition(".")
    fn = getattr(getattr(librosa, path) if path else librosa, name)
    assert fn.__module__.startswith("agl_fast."), (qual, fn.__module__)
    return fn


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, str]]:
    """Name, kind and default (by ``repr``: librosa's deprecation sentinel
    has no equality) of each parameter; annotations are typing spelling."""
    return [(p.name, p.kind, repr(p.default)) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("qual", list(ACCELERATED))
def test_signature_is_the_installed_librosas(qual: str) -> None:
    assert _parameters(_compat(qual)) == _parameters(_real(qual))


def test_version_is_read_once_from_the_installed_librosa() -> None:
    assert librosa.__version__ == real.__version__
    major, minor = (int(x) for x in real.__version__.split(".")[:2])
    assert _version.SERIES == min((major, minor), (1, 0))


@pytest.mark.parametrize(
    ("text", "series"),
    [("0.9.2", (0, 10)), ("0.10.2.post1", (0, 10)), ("0.11.0", (0, 11)), ("1.0.0", (1, 0)),
     ("1.0.0rc1", (1, 0)), ("1.2.0", (1, 0)), (None, (1, 0)), ("dev", (1, 0))],
)  # fmt: skip
def test_release_series_followed(text: str | None, series: tuple[int, int]) -> None:
    assert _version._series(text) == series


def _same_outcome(ours: Callable[[], Any], theirs: Callable[[], Any], atol: float = 0.0) -> Any:
    """Both return equal values (within ``atol``), or both raise and ours
    is an instance of librosa's exception type."""
    try:
        expected = theirs()
    except Exception as exc:  # any error librosa raises is the reference
        with pytest.raises(type(exc)):
            ours()
        return None
    got = ours()
    if isinstance(expected, tuple):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, atol=atol, rtol=0)
    else:
        np.testing.assert_allclose(got, expected, atol=atol, rtol=0)
        assert np.shape(got) == np.shape(expected)
        assert type(got) is type(expected) or isinstance(got, np.ndarray)
    return got


@pytest.fixture
def stereo_power(rng: np.random.Generator) -> np.ndarray:
    """A stereo power spectrogram whose channels are 60 dB apart."""
    y = rng.standard_normal((2, 22050)).astype(np.float32)
    y[1] *= 1e-3
    return np.abs(real.stft(y)) ** 2  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "kwargs",
    [{"ref": np.max}, {}, {"ref": np.max, "top_db": None}, {"ref": np.median}, {"ref": 2.0},
     {"ref": np.max, "top_db": 30.0}],
)  # fmt: skip
@pytest.mark.parametrize("name", ["power_to_db", "amplitude_to_db"])
def test_db_of_multichannel_input_follows_the_release(
    stereo_power: np.ndarray, name: str, kwargs: dict[str, Any]
) -> None:
    """0.11 takes ref and top_db over the whole array, 1.0 per channel: the
    drop-in agrees with the installed librosa within 1e-4 dB either way."""
    S = stereo_power if name == "power_to_db" else np.sqrt(stereo_power)
    got = _same_outcome(
        lambda: getattr(librosa, name)(S, **kwargs),
        lambda: getattr(real, name)(S, **kwargs),
        atol=1e-4,
    )
    assert got.dtype == np.float32


@pytest.mark.skipif(not ON_1_0, reason="axes= is librosa 1.0's")
@pytest.mark.parametrize("axes", [None, (-2, -1), (0, 1, 2), (-1,), 1, "auto"])
def test_db_axes_of_librosa_1(stereo_power: np.ndarray, axes: Any) -> None:
    _same_outcome(
        lambda: librosa.power_to_db(stereo_power, ref=np.max, axes=axes),
        lambda: real.power_to_db(stereo_power, ref=np.max, axes=axes),
        atol=1e-4,
    )


def test_db_of_a_scalar_has_the_releases_type() -> None:
    for value in (3.0, np.float32(3.0), np.array(3.0), 7):
        got = _same_outcome(
            lambda v=value: librosa.power_to_db(v), lambda v=value: real.power_to_db(v), 1e-6
        )
        assert type(got) is type(real.power_to_db(value))


def test_reference_function_without_keepdims(stereo_power: np.ndarray) -> None:
    """1.0 calls ref(S, axis=..., keepdims=True) and refuses a function that
    takes no such arguments; 0.11 calls ref(S)."""

    def peak(x: np.ndarray) -> float:
        return float(np.max(x))

    _same_outcome(
        lambda: librosa.power_to_db(stereo_power, ref=peak),
        lambda: real.power_to_db(stereo_power, ref=peak),
        atol=1e-4,
    )
    if ON_1_0:
        with pytest.raises(real.ParameterError):
            librosa.amplitude_to_db(stereo_power, ref=peak)


def test_to_mono_follows_the_release(rng: np.random.Generator) -> None:
    stereo = rng.standard_normal((2, 1000))
    _same_outcome(lambda: librosa.to_mono(stereo), lambda: real.to_mono(stereo))
    empty = np.zeros((2, 0), np.float32)
    _same_outcome(lambda: librosa.to_mono(empty), lambda: real.to_mono(empty))
    if not ON_1_0:
        return
    a, b = rng.standard_normal(1000), rng.standard_normal((2, 700)).astype(np.float32)
    for kwargs in ({}, {"norm": False}, {"pad": False}, {"norm": False, "pad": False}):
        got = _same_outcome(
            lambda k=kwargs: librosa.to_mono(a, b, **k), lambda k=kwargs: real.to_mono(a, b, **k)
        )
        assert got.dtype == np.float64
    for empty in (np.zeros(0), np.zeros((2, 0), np.float32)):
        _same_outcome(lambda e=empty: librosa.to_mono(e), lambda e=empty: real.to_mono(e))
    out = np.full(1000, 5.0)
    assert librosa.to_mono(a, b, norm=False, out=out) is out
    np.testing.assert_array_equal(out, real.to_mono(a, b, norm=False))
    for bad in ((), (a, np.array([1, 2]))):
        with pytest.raises(real.ParameterError):
            librosa.to_mono(*bad)
    with pytest.raises(real.ParameterError):
        librosa.to_mono(a, out=np.zeros(1000, np.float32))
    with pytest.raises(real.ParameterError):
        librosa.to_mono(a, b, np.array([np.nan, 0.0]))


def test_stream_to_stereo_and_to_multi_run_with_install(rng: np.random.Generator) -> None:
    """librosa 1.0 calls to_mono(..., out=...) inside to_stereo and to_multi."""
    if not ON_1_0:
        pytest.skip("to_stereo and to_multi are librosa 1.0's")
    left, right = rng.standard_normal(500), rng.standard_normal((2, 400))
    expected = real.to_stereo(left=left, right=right)
    librosa.install()
    try:
        np.testing.assert_allclose(real.to_stereo(left=left, right=right), expected, atol=1e-15)
        assert librosa.coverage().calls["to_mono"] >= 2
    finally:
        librosa.uninstall()


def _write_wav(path: Path, sr: int = 8000, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    y = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 220 * t)])
    pcm = (y * 32767).astype("<i2").T.copy()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return pcm


@pytest.mark.parametrize("offset", [-0.25, -2.0, 0.25])
def test_load_offsets_follow_the_release(tmp_path: Path, offset: float) -> None:
    """A negative offset counts from the end in 1.0 and is an error before."""
    path = tmp_path / "clip.wav"
    _write_wav(path)
    _same_outcome(
        lambda: librosa.load(path, sr=None, offset=offset),
        lambda: real.load(path, sr=None, offset=offset),
        atol=1e-6,
    )


def test_load_of_a_file_named_as_another_container_is_librosas(tmp_path: Path) -> None:
    """librosa reads Matroska/MP4 with audioread (0.11) or refuses them
    (1.0): the drop-in hands files of those names to librosa (here WAV bytes,
    which soundfile recognises, so librosa reads them)."""
    path = tmp_path / "clip.mkv"
    _write_wav(path)
    librosa.reset_counters()
    _same_outcome(lambda: librosa.load(path, sr=None), lambda: real.load(path, sr=None))
    assert any("without soundfile" in r for _, r in librosa.coverage().fallbacks)


def test_load_of_ogg_vorbis_is_librosas_to_the_bit(tmp_path: Path) -> None:
    """The native Vorbis decoder is not libvorbis to the tolerance of
    librosa's own tests: Ogg files go to librosa."""
    sf = pytest.importorskip("soundfile")
    path = tmp_path / "clip.ogg"
    t = np.arange(8000) / 8000
    sf.write(path, 0.5 * np.sin(2 * np.pi * 440 * t), 8000, format="OGG", subtype="VORBIS")
    librosa.reset_counters()
    for offset in (0.0, 0.25):
        got, sr = librosa.load(path, sr=None, offset=offset)
        want, want_sr = real.load(path, sr=None, offset=offset)
        np.testing.assert_array_equal(got, want)
        assert sr == want_sr
    assert any("Ogg Vorbis" in r for _, r in librosa.coverage().fallbacks)


def test_load_of_matroska_is_librosas(shared_dir: Path) -> None:
    """librosa's own Matroska fixture: decoded by audioread with a warning
    on 0.11, refused on 1.0, the same through the drop-in."""
    path = shared_dir / "librosa-suite" / "data" / "test2_8000.mkv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    for load in (librosa.load, real.load):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                load(path, sr=None)
            except Exception as exc:  # recorded, compared below
                seen.append(exc)  # type: ignore[arg-type]
        if load is librosa.load:
            ours = [type(w) if isinstance(w, Exception) else w.category for w in seen]
        else:
            theirs = [type(w) if isinstance(w, Exception) else w.category for w in seen]
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs, strict=True):
        assert issubclass(a, b)


# -- values librosa accepts, and those it refuses ----------------------------


def test_numpy_scalars_as_flags_and_counts() -> None:
    """MATLAB fixtures give librosa numpy integers for flags and counts."""
    kw = {"sr": np.float64(22050), "n_fft": np.int64(2048), "n_mels": np.uint8(40),
          "htk": np.uint8(0), "fmin": np.float64(0), "fmax": np.float64(8000)}  # fmt: skip
    _same_outcome(lambda: librosa.filters.mel(**kw), lambda: real.filters.mel(**kw))
    kw["htk"] = np.uint8(1)
    _same_outcome(lambda: librosa.filters.mel(**kw), lambda: real.filters.mel(**kw))


@pytest.mark.parametrize(
    "kwargs",
    [{"n_fft": 2048.0}, {"n_fft": "2048"}, {"n_mels": 0}, {"htk": np.array([0, 1])},
     {"htk": "yes"}, {"n_mels": 40.0}, {"fmax": np.array([8000.0])}, {"sr": "22050"}],
)  # fmt: skip
def test_mel_values_are_taken_or_refused_as_librosa_does(kwargs: dict[str, Any]) -> None:
    call = {"sr": 22050, "n_fft": 2048, **kwargs}
    _same_outcome(lambda: librosa.filters.mel(**call), lambda: real.filters.mel(**call))


@pytest.mark.parametrize("mono", [np.array([[0]]), np.array([[1]]), np.int8(0), 1, None])
def test_load_mono_by_truth_value(tmp_path: Path, mono: Any) -> None:
    path = tmp_path / "clip.wav"
    _write_wav(path)
    _same_outcome(
        lambda: librosa.load(path, sr=None, mono=mono),
        lambda: real.load(path, sr=None, mono=mono),
        atol=1e-6,
    )


def test_ambiguous_flag_is_librosas_error(tmp_path: Path) -> None:
    path = tmp_path / "clip.wav"
    _write_wav(path)
    with pytest.raises(ValueError):
        real.load(path, mono=np.array([0, 1]))
    with pytest.raises(ValueError):
        librosa.load(path, mono=np.array([0, 1]))


@pytest.mark.parametrize(
    "kwargs",
    [{"n_mels": np.int32(20)}, {"htk": np.bool_(True)}, {"fmax": np.float32(4000)},
     {"bogus": 1}, {"center": np.uint8(0)}],
)  # fmt: skip
def test_melspectrogram_keywords_as_librosa(rng: np.random.Generator, kwargs: dict) -> None:
    y = rng.standard_normal(8000).astype(np.float32)
    _same_outcome(
        lambda: librosa.feature.melspectrogram(y=y, sr=8000, **kwargs),
        lambda: real.feature.melspectrogram(y=y, sr=8000, **kwargs),
        atol=1e-3,
    )
