"""Small valid audio files the fuzzer mutates, generated at run time.

WAV, FLAC and Ogg Vorbis come from ``soundfile``; MP3 from ``lame`` (or
ffmpeg's libmp3lame) and AAC in M4A from ffmpeg. A format whose encoder is
missing is left out and named in :attr:`SeedSet.missing`.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Short clips keep every case fast; long enough for several MP3 frames,
# Ogg pages and AAC packets.
SEED_SECONDS = 0.3
# Seeds of the seeking run: long enough that an offset lands past the
# decoders' pre-roll (half a second for Opus), so the seek itself is hit.
SEEK_SEED_SECONDS = 1.5


@dataclass(frozen=True)
class Seed:
    """One valid file: ``fmt`` is the container the mutators parse."""

    name: str
    fmt: str  # "wav", "flac", "ogg", "mp3", "m4a", "opus", "webm", "aiff"
    path: Path

    @property
    def ext(self) -> str:
        return self.path.suffix

    def data(self) -> bytes:
        return self.path.read_bytes()


@dataclass
class SeedSet:
    seeds: list[Seed] = field(default_factory=list)
    # format -> why its seeds are missing
    missing: dict[str, str] = field(default_factory=dict)

    def by_name(self, name: str) -> Seed:
        for s in self.seeds:
            if s.name == name:
                return s
        raise KeyError(name)


def _signal(sr: int, channels: int, seconds: float = SEED_SECONDS) -> np.ndarray:
    """A chirp plus a little seeded noise, ``[n, channels]`` float32 in +-0.5."""
    n = int(seconds * sr)
    t = np.arange(n) / sr
    rng = np.random.default_rng(sr * 10 + channels)
    cols = []
    for c in range(channels):
        f0 = 220.0 * (c + 1)
        chirp = np.sin(2 * np.pi * (f0 * t + 0.5 * 2000.0 * t * t))
        cols.append(0.4 * chirp + 0.05 * rng.standard_normal(n))
    return np.stack(cols, axis=1).astype(np.float32)


def _run(cmd: list[str]) -> str | None:
    """Run an encoder; the error text on failure, ``None`` on success."""
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return f"{Path(cmd[0]).name} failed: {res.stderr.strip()[-300:]}"
    return None


def make_seeds(out_dir: Path) -> SeedSet:
    """Write the seed files into ``out_dir`` and describe them."""
    import soundfile as sf

    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = SeedSet()

    def add(name: str, fmt: str, path: Path) -> None:
        seeds.seeds.append(Seed(name, fmt, path))

    for name, sr, ch, fmt, subtype, ext in [
        ("wav_pcm16_stereo", 44100, 2, "WAV", "PCM_16", "wav"),
        ("wav_pcm24_mono", 22050, 1, "WAV", "PCM_24", "wav"),
        ("wav_float_stereo", 48000, 2, "WAV", "FLOAT", "wav"),
        ("wav_u8_mono", 8000, 1, "WAV", "PCM_U8", "wav"),
        ("wavex_pcm16_3ch", 16000, 3, "WAVEX", "PCM_16", "wav"),
        ("flac_16_stereo", 44100, 2, "FLAC", "PCM_16", "flac"),
        ("flac_24_mono", 48000, 1, "FLAC", "PCM_24", "flac"),
        ("ogg_vorbis_stereo", 44100, 2, "OGG", "VORBIS", "ogg"),
        ("ogg_vorbis_mono", 22050, 1, "OGG", "VORBIS", "ogg"),
    ]:
        path = out_dir / f"{name}.{ext}"
        sf.write(path, _signal(sr, ch), sr, format=fmt, subtype=subtype)
        add(name, ext, path)

    wav44 = seeds.by_name("wav_pcm16_stereo").path
    wav22 = out_dir / "src_mono_22050.wav"
    sf.write(wav22, _signal(22050, 1), 22050, subtype="PCM_16")

    lame, ffmpeg = shutil.which("lame"), shutil.which("ffmpeg")
    mp3_jobs: list[tuple[str, list[str]]] = []
    if lame:
        mp3_jobs = [
            ("mp3_cbr_stereo", [lame, "--quiet", "-b", "128", str(wav44)]),
            ("mp3_vbr_mono", [lame, "--quiet", "-V", "4", str(wav22)]),
        ]
    elif ffmpeg:
        base = [ffmpeg, "-v", "error", "-y", "-bitexact", "-i"]
        mp3_jobs = [
            ("mp3_cbr_stereo", [*base, str(wav44), "-c:a", "libmp3lame", "-b:a", "128k"]),
            ("mp3_vbr_mono", [*base, str(wav22), "-c:a", "libmp3lame", "-q:a", "4"]),
        ]
    else:
        seeds.missing["mp3"] = "neither lame nor ffmpeg is installed"
    for name, cmd in mp3_jobs:
        path = out_dir / f"{name}.mp3"
        err = _run([*cmd, str(path)])
        if err:
            seeds.missing["mp3"] = err
            break
        add(name, "mp3", path)

    if ffmpeg:
        base = [ffmpeg, "-v", "error", "-y", "-bitexact", "-i"]
        for name, src, extra in [
            ("m4a_aac_stereo", wav44, ["-b:a", "96k"]),
            ("m4a_aac_mono", wav22, ["-b:a", "48k"]),
        ]:
            path = out_dir / f"{name}.m4a"
            err = _run([*base, str(src), "-c:a", "aac", *extra, "-map_metadata", "-1", str(path)])
            if err:
                seeds.missing["m4a"] = err
                break
            add(name, "m4a", path)
    else:
        seeds.missing["m4a"] = "ffmpeg is not installed"
    _ffmpeg_seeds(seeds, out_dir, ffmpeg, wav44, wav22)
    return seeds


def _ffmpeg_seeds(
    seeds: SeedSet, out_dir: Path, ffmpeg: str | None, wav44: Path, wav22: Path
) -> None:
    """Ogg Opus, WebM (Opus, Vorbis) and AIFF/AIFF-C seeds, made by ffmpeg."""
    specs = {
        "opus": [
            ("opus_stereo", wav44, "opus", ["-c:a", "libopus", "-b:a", "64k"]),
            ("opus_mono", wav22, "opus", ["-c:a", "libopus", "-b:a", "24k"]),
        ],
        "webm": [
            ("webm_opus_stereo", wav44, "webm", ["-c:a", "libopus", "-b:a", "64k"]),
            ("webm_vorbis_mono", wav22, "webm", ["-c:a", "libvorbis", "-q:a", "2"]),
        ],
        "aiff": [
            ("aiff_s16_stereo", wav44, "aiff", ["-c:a", "pcm_s16be"]),
            ("aifc_f32_mono", wav22, "aifc", ["-c:a", "pcm_f32be", "-f", "aiff"]),
        ],
    }
    for fmt, items in specs.items():
        if not ffmpeg:
            seeds.missing[fmt] = "ffmpeg is not installed"
            continue
        for name, src, ext, args in items:
            path = out_dir / f"{name}.{ext}"
            cmd = [ffmpeg, "-v", "error", "-y", "-bitexact", "-i", str(src), "-t", "1.5"]
            err = _run([*cmd, *args, "-map_metadata", "-1", str(path)])
            if err:
                seeds.missing[fmt] = err
                break
            seeds.seeds.append(Seed(name, fmt, path))


def make_seek_seeds(out_dir: Path) -> SeedSet:
    """Longer seeds (:data:`SEEK_SEED_SECONDS`) of the formats that seek
    through a demuxer: FLAC, Ogg Vorbis (soundfile), Ogg Opus, WebM Opus
    and AIFF (ffmpeg, when installed)."""
    import soundfile as sf

    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = SeedSet()
    src = out_dir / "seek_src.wav"
    sf.write(src, _signal(44100, 2, SEEK_SEED_SECONDS), 44100, subtype="PCM_16")
    for name, fmt, subtype in [("seek_flac", "FLAC", "PCM_16"), ("seek_vorbis", "OGG", "VORBIS")]:
        path = out_dir / f"{name}.{fmt.lower()}"
        sf.write(path, _signal(44100, 2, SEEK_SEED_SECONDS), 44100, format=fmt, subtype=subtype)
        seeds.seeds.append(Seed(name, "flac" if fmt == "FLAC" else "ogg", path))
    ffmpeg = shutil.which("ffmpeg")
    for name, fmt, ext, args in [
        ("seek_opus", "opus", "opus", ["-c:a", "libopus", "-b:a", "48k"]),
        ("seek_webm_opus", "webm", "webm", ["-c:a", "libopus", "-b:a", "48k"]),
        ("seek_aiff", "aiff", "aiff", ["-c:a", "pcm_s16be"]),
    ]:
        if not ffmpeg:
            seeds.missing[fmt] = "ffmpeg is not installed"
            continue
        path = out_dir / f"{name}.{ext}"
        err = _run([ffmpeg, "-v", "error", "-y", "-bitexact", "-i", str(src), *args, str(path)])
        if err:
            seeds.missing[fmt] = err
            continue
        seeds.seeds.append(Seed(name, fmt, path))
    return seeds
