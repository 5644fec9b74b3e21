"""Batch semantics: every input container, dtype conversion, thread-count
independence, equality with one-at-a-time calls."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import agl_fast


@pytest.fixture
def ragged(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal(n).astype(np.float32) for n in (32000, 17000, 40123, 9000)]


def test_thread_count_does_not_change_results(rng: np.random.Generator) -> None:
    x = rng.standard_normal((6, 2, 48000)).astype(np.float32)
    one = agl_fast.bat(x, n_threads=1)
    for n in (2, 3, 7):
        np.testing.assert_array_equal(agl_fast.bat(x, n_threads=n), one)
    mono = x[:, 0]
    np.testing.assert_array_equal(
        agl_fast.efficientat(mono, n_threads=1), agl_fast.efficientat(mono, n_threads=4)
    )
    np.testing.assert_array_equal(
        agl_fast.stft(mono[0], n_threads=1), agl_fast.stft(mono[0], n_threads=3)
    )


def test_batch_equals_item_by_item(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 2, 20000)).astype(np.float32)
    batch = agl_fast.bat(x)
    for i in range(3):
        np.testing.assert_array_equal(batch[i], agl_fast.bat(x[i]))


def test_ragged_list_arrow_and_padded(ragged: list[np.ndarray]) -> None:
    as_list = agl_fast.efficientat(ragged)
    assert isinstance(as_list, list) and len(as_list) == 4
    for y, f in zip(ragged, as_list, strict=True):
        np.testing.assert_array_equal(f, agl_fast.efficientat(y))
    padded, n_frames = agl_fast.efficientat(ragged, output="padded")
    assert padded.shape == (4, 128, max(f.shape[1] for f in as_list))
    for i, f in enumerate(as_list):
        assert n_frames[i] == f.shape[1]
        np.testing.assert_array_equal(padded[i, :, : n_frames[i]], f)
        assert np.all(padded[i, :, n_frames[i] :] == 0)
    arrow_in = pa.array([y.tolist() for y in ragged], type=pa.list_(pa.float32()))
    arrow_out = agl_fast.efficientat(arrow_in)
    assert isinstance(arrow_out, pa.LargeListArray) and len(arrow_out) == 4
    for i, f in enumerate(as_list):
        np.testing.assert_array_equal(arrow_out[i].values.to_numpy().reshape(f.shape), f)
    chunked = pa.chunked_array([arrow_in[:2], arrow_in[2:]])
    np.testing.assert_array_equal(agl_fast.efficientat(chunked, output="padded")[0], padded)


def test_ragged_stereo_containers(rng: np.random.Generator) -> None:
    items = [rng.standard_normal((2, n)).astype(np.float32) for n in (16000, 23000)]
    lst = agl_fast.bat(items)
    arrow_in = pa.array(
        [[c.tolist() for c in it] for it in items], type=pa.list_(pa.list_(pa.float32()))
    )
    out = agl_fast.bat(arrow_in)
    for i, it in enumerate(items):
        single = agl_fast.bat(it)
        np.testing.assert_array_equal(lst[i], single)
        np.testing.assert_array_equal(out[i].values.to_numpy().reshape(single.shape), single)


def test_dtype_conversions(rng: np.random.Generator) -> None:
    y64 = rng.standard_normal(16000) * 0.2
    np.testing.assert_array_equal(
        agl_fast.efficientat(y64), agl_fast.efficientat(y64.astype(np.float32))
    )
    pcm = (y64 * 20000).astype(np.int16)
    np.testing.assert_array_equal(
        agl_fast.efficientat(pcm),
        agl_fast.efficientat(pcm.astype(np.float32) / np.float32(32768.0)),
    )
    # float32 input: the output is float32 and the input is not copied.
    y32 = y64.astype(np.float32)
    assert agl_fast.melspectrogram(y32, sr=16000).dtype == np.float32
    np.testing.assert_array_equal(
        agl_fast.stft(np.asfortranarray(np.stack([y32, y32]))[:, :]),
        agl_fast.stft(np.stack([y32, y32])),
    )


def test_librosa_multichannel_leading_axes(rng: np.random.Generator) -> None:
    y = rng.standard_normal((2, 3, 8000)).astype(np.float32)
    S = agl_fast.stft(y, n_fft=512)
    assert S.shape == (2, 3, 257, 1 + 8000 // 128)
    np.testing.assert_array_equal(S[1, 2], agl_fast.stft(y[1, 2], n_fft=512))


def test_env_and_global_thread_settings(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 2, 16000)).astype(np.float32)
    ref = agl_fast.bat(x, n_threads=1)
    agl_fast.set_num_threads(2)
    try:
        assert agl_fast.get_num_threads() == 2
        np.testing.assert_array_equal(agl_fast.bat(x), ref)
    finally:
        agl_fast.set_num_threads(None)
    with pytest.raises(agl_fast.exceptions.ParameterError):
        agl_fast.set_num_threads(0)
