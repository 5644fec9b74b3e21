"""Landmark fingerprints and pairing: hostile input, the byte format, and
duplicates of the real recordings found again after each transformation."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agl_fast import fingerprint as fpm
from agl_fast.exceptions import (
    FingerprintFormatError,
    NonFiniteError,
    ParameterError,
    ShapeError,
)
from conftest import REAL_MP3

SR = 16000


def texture(seconds: float, seed: int, sr: int = SR) -> np.ndarray:
    """Noise through a few slowly wandering resonances: a field texture."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / sr)
    bumps = sum(np.exp(-(((f - c) / 80.0) ** 2)) * 6 for c in rng.uniform(200, 3000, 8))
    y = np.fft.irfft(spec * (1 + bumps), n)
    # Syllable-like bursts so the texture has onsets.
    env = np.repeat(rng.uniform(0.2, 1.0, n // 1600 + 1), 1600)[:n]
    return (y * env / np.abs(y).max() * 0.5).astype(np.float32)


def tone(seconds: float, hz: float, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def clicks(seconds: float, period_s: float, sr: int = SR) -> np.ndarray:
    y = np.zeros(int(seconds * sr), np.float32)
    y[:: int(period_s * sr)] = 0.9
    return y


# --- hostile input -------------------------------------------------------------


def test_silence_tone_and_clicks_fingerprint_without_error() -> None:
    for y in (np.zeros(SR * 10, np.float32), tone(10, 440), clicks(10, 0.5)):
        fp = fpm.fingerprint(y, SR)
        assert fp.hashes.dtype == np.uint32 and fp.times.dtype == np.uint32
        assert fp.duration_s == pytest.approx(10.0)
        assert fp.hashes.size == fp.times.size
    # Silence and a steady tone have no peaks: not fingerprintable.
    assert fpm.fingerprint(np.zeros(SR * 10, np.float32), SR).hashes.size == 0
    for hz, sr in ((440, SR), (1000, SR), (440, 44100), (97.5, 8000)):
        fp = fpm.fingerprint(tone(10, hz, sr), sr)
        assert not fp.fingerprintable, (hz, sr, fp.distinct)


def test_tones_and_click_trains_never_match_across_files() -> None:
    clips = [tone(30, 440), tone(30, 440, 44100)[::1], tone(30, 1000), clicks(30, 0.5)]
    clips += [clicks(30, 0.5) * 0.5, np.zeros(SR * 30, np.float32)]
    srs = [SR, 44100, SR, SR, SR, SR]
    fps = fpm.fingerprint_many(clips, srs)
    assert len(fpm.pair(fps, min_score=0.0)) == 0


def test_non_finite_and_empty_input_give_typed_errors() -> None:
    y = texture(5, 1)
    for bad in (np.nan, np.inf, -np.inf):
        z = y.copy()
        z[123] = bad
        with pytest.raises(NonFiniteError, match="sample 123"):
            fpm.fingerprint(z, SR)
    with pytest.raises(ShapeError, match="empty"):
        fpm.fingerprint(np.zeros(0, np.float32), SR)
    with pytest.raises(ShapeError, match="empty"):
        fpm.fingerprint(np.zeros((2, 0), np.float32), SR)
    with pytest.raises(ShapeError, match="shape"):
        fpm.fingerprint(np.zeros((1, 2, 100), np.float32), SR)
    with pytest.raises(ShapeError, match="2 clips but 1 rates"):
        fpm.fingerprint_many([y, y], [SR])


@pytest.mark.parametrize("sr", [0, -5, 2**40, 10**9, 1.5])
def test_bad_rates_are_parameter_errors(sr: object) -> None:
    with pytest.raises(ParameterError, match="sr"):
        fpm.fingerprint(texture(1, 1), sr)  # type: ignore[arg-type]


def test_pair_rejects_bad_arguments() -> None:
    fps = fpm.fingerprint_many([texture(5, 1)], [SR])
    with pytest.raises(ParameterError, match="min_score"):
        fpm.pair(fps, min_score=1.5)
    with pytest.raises(ParameterError, match="Fingerprint"):
        fpm.pair([b"x"])  # type: ignore[list-item]
    assert len(fpm.pair([])) == 0


# --- byte format ---------------------------------------------------------------


def test_bytes_round_trip() -> None:
    fp = fpm.fingerprint(np.stack([texture(12, 3), texture(12, 4)]), SR)
    assert fp.fingerprintable
    back = fpm.Fingerprint.from_bytes(fp.to_bytes())
    np.testing.assert_array_equal(back.hashes, fp.hashes)
    np.testing.assert_array_equal(back.times, fp.times)
    assert (back.hop_s, back.duration_s, back.distinct, back.n_frames) == (
        fp.hop_s,
        fp.duration_s,
        fp.distinct,
        fp.n_frames,
    )
    assert len(fp.to_bytes()) == 36 + 8 * fp.hashes.size


def test_hostile_bytes_are_format_errors() -> None:
    good = fpm.fingerprint(texture(8, 5), SR).to_bytes()
    n = (len(good) - 36) // 8
    cases = {
        "shorter than": good[:10],
        "magic": b"XXXX" + good[4:],
        "version": good[:4] + struct.pack("<H", 9) + good[6:],
        # the 64 ms analysis of version 1 does not match this one's hashes
        r"version 1 \(flags 0\) is not supported": good[:4] + struct.pack("<H", 1) + good[6:],
        "bytes were given": good[:-1],
    }
    # A header claiming 2^32 - 1 hashes on a short buffer: refused before
    # any allocation.
    cases["4294967295 hashes"] = good[:32] + struct.pack("<I", 2**32 - 1) + good[36:]
    big = bytearray(good)
    big[36:40] = struct.pack("<I", 2**31)
    cases["hash above"] = bytes(big)
    swapped = bytearray(good)
    t0 = 36 + 4 * n
    swapped[t0 : t0 + 4] = struct.pack("<I", 10**6)
    cases["non-decreasing"] = bytes(swapped)
    lie = bytearray(good)
    lie[28:32] = struct.pack("<I", 1)
    cases["distinct"] = bytes(lie)
    nan = bytearray(good)
    nan[16:24] = struct.pack("<d", float("nan"))
    cases["duration"] = bytes(nan)
    for match, b in cases.items():
        with pytest.raises(FingerprintFormatError, match=match):
            fpm.Fingerprint.from_bytes(b)
    with pytest.raises(FingerprintFormatError, match="bytes"):
        fpm.Fingerprint.from_bytes("text")  # type: ignore[arg-type]


# --- pairing -------------------------------------------------------------------


def test_trims_pair_at_their_offset_and_thread_count_does_not_matter() -> None:
    src = texture(40, 11)
    parts = [src, src[5 * SR : 25 * SR], src[20 * SR : 40 * SR], texture(40, 12)]
    fps = fpm.fingerprint_many(parts, [SR] * 4)
    m = fpm.pair(fps)
    got = {(int(a), int(b)) for a, b in zip(m.a, m.b, strict=True)}
    # Parts 1 and 2 overlap by 5 s: a pair too.
    assert got == {(0, 1), (0, 2), (1, 2)}
    i = list(zip(m.a.tolist(), m.b.tolist(), strict=True)).index((0, 1))
    assert m.start_a_s[i] == pytest.approx(5.0, abs=0.07)
    assert m.start_b_s[i] == 0.0
    assert m.overlap_s[i] == pytest.approx(20.0, abs=0.1)
    assert np.all((m.score > 0) & (m.score <= 1))
    one = fpm.pair(fps, n_threads=1)
    for name in ("a", "b", "start_a_s", "start_b_s", "overlap_s", "score", "votes"):
        np.testing.assert_array_equal(getattr(one, name), getattr(m, name))


def _ffmpeg(y: np.ndarray, sr: int, codec: list[str], ext: str, tmp: Path) -> np.ndarray:
    """Encode with ffmpeg and decode back to float32 mono at ``sr``."""
    src, enc = tmp / "src.wav", tmp / f"enc.{ext}"
    sf = pytest.importorskip("soundfile")
    sf.write(src, y, sr, subtype="FLOAT")
    run = ["ffmpeg", "-v", "error", "-y"]
    subprocess.run([*run, "-i", src, *codec, enc], check=True)
    raw = subprocess.run(
        [*run, "-i", enc, "-f", "f32le", "-ac", "1", "-ar", str(sr), "-"],
        check=True,
        capture_output=True,
    ).stdout
    return np.frombuffer(raw, np.float32).copy()


@pytest.mark.skipif(len(REAL_MP3) < 1, reason="needs the real recordings in ../shared/agl1k")
def test_real_recording_survives_each_transformation(tmp_path: Path) -> None:
    from agl_fast import audio

    y, sr = audio.load(REAL_MP3[0], sr=None, mono=False, duration=60.0)
    y = np.asarray(y, np.float32)
    clip = y[:, 10 * sr : 40 * sr]
    mono = clip.mean(axis=0)
    rng = np.random.default_rng(7)
    noise = rng.standard_normal(mono.size).astype(np.float32)
    noise *= np.sqrt(np.mean(mono**2) / np.mean(noise**2)) * 10 ** (-20 / 20)
    copies = {
        "stereo original": (clip, sr),
        "gain -6 dB": (mono * 10 ** (-6 / 20), sr),
        "gain +6 dB": (mono * 10 ** (6 / 20), sr),
        "trim 12.3 s": (mono[int(12.3 * sr) :], sr),
        "noise 20 dB": (mono + noise, sr),
        "resample 16 kHz": (audio.resample(mono, orig_sr=sr, target_sr=16000), 16000),
    }
    if shutil.which("ffmpeg"):
        copies["mp3 128k"] = (_ffmpeg(mono, sr, ["-b:a", "128k"], "mp3", tmp_path), sr)
        copies["opus 64k"] = (
            _ffmpeg(
                mono,
                48000 if sr == 48000 else sr,
                ["-c:a", "libopus", "-b:a", "64k"],
                "opus",
                tmp_path,
            ),
            sr,
        )
    other = y[:, 45 * sr : 60 * sr]  # the same recording, no shared audio
    names = list(copies)
    fps = fpm.fingerprint_many(
        [c[0] for c in copies.values()] + [other], [c[1] for c in copies.values()] + [sr]
    )
    m = fpm.pair(fps)
    with_src = {int(b) for a, b in zip(m.a, m.b, strict=True) if a == 0}
    missed = [names[i] for i in range(1, len(names)) if i not in with_src]
    assert not missed, f"not paired with the original: {missed}"
    assert len(names) not in set(m.a.tolist()) | set(m.b.tolist()), "hard negative paired"


@pytest.mark.skipif(len(REAL_MP3) < 2, reason="needs the real recordings in ../shared/agl1k")
@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")
def test_evaluation_script_small_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evaluation of docs/fingerprint.md at CI size: real clips and two
    synthetic sources, each transformed; fpcalc's column when installed."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "fingerprint_eval.py"
    spec = importlib.util.spec_from_file_location("fingerprint_eval", path)
    assert spec is not None and spec.loader is not None
    fe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fingerprint_eval", fe)
    spec.loader.exec_module(fe)
    out = tmp_path / "figures.json"
    args = ["--clips", "30", "--dup-sources", "1", "--real-sources", "2"]
    fe.main([*args, "--fpcalc-negatives", "20", "--json", str(out)])
    table = capsys.readouterr().out
    assert "recall" in table and "fpcalc" in table
    if shutil.which("fpcalc") is None:
        assert "not installed" in table
    ours = __import__("json").loads(out.read_text())["agl_fast"]
    assert ours["false_group_sources"] == 0, table
    # every copy, trims included (cut anywhere, not on the frame grid)
    assert min(ours["recall_by_transform"].values()) == 1.0, table


# --- sharded pairing -------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_fps() -> tuple[list[fpm.Fingerprint], set[tuple[int, int]]]:
    """24 textures and six planted copies (trimmed, scaled) spread over
    the corpus, so that they cross shard boundaries."""
    ys = [texture(12, seed) for seed in range(24)]
    planted = {(0, 24), (5, 25), (11, 26), (12, 27), (3, 28), (20, 29)}
    for src, _ in sorted(planted, key=lambda p: p[1]):
        ys.append(ys[src][int(1.37 * SR) : int(11.1 * SR)] * np.float32(0.5))
    return fpm.fingerprint_many(ys, [SR] * len(ys)), planted


@pytest.mark.parametrize("shards", [1, 2, 3, 7, 30])
def test_sharded_pairing_equals_one_index(
    corpus_fps: tuple[list[fpm.Fingerprint], set[tuple[int, int]]], shards: int
) -> None:
    fps, planted = corpus_fps
    whole = fpm.pair(fps)
    assert set(zip(whole.a.tolist(), whole.b.tolist(), strict=True)) == planted
    got = fpm.pair_sharded(fps, shards)
    for f in fpm.Matches.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(got, f), getattr(whole, f), err_msg=f)


def test_hash_counts_sum_over_shards(
    corpus_fps: tuple[list[fpm.Fingerprint], set[tuple[int, int]]],
) -> None:
    fps, _ = corpus_fps
    total = fpm.hash_counts(fps)
    assert total.shape == (1 << fpm.HASH_BITS,) and total.dtype == np.uint32
    assert int(total.sum()) == sum(f.hashes.size for f in fps)
    parts = [fpm.hash_counts(fps[lo:hi]) for lo, hi in fpm.shard_bounds(len(fps), 4)]
    np.testing.assert_array_equal(sum(parts), total)
    with pytest.raises(ShapeError, match="counts must be uint32"):
        fpm.pair(fps, counts=total[1:])
    with pytest.raises(ParameterError, match="others"):
        fpm.pair(fps, others=[fps[0], "x"])  # type: ignore[list-item]


def test_shard_bounds_and_blocks() -> None:
    assert fpm.shard_bounds(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert fpm.shard_bounds(2, 5) == [(0, 1), (1, 2)]
    assert fpm.shard_bounds(0, 2) == [(0, 0)]
    assert fpm.blocks(3) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    with pytest.raises(ParameterError):
        fpm.shard_bounds(10, 0)
