"""Fuzzing the decoders: mutated WAV/FLAC/Ogg/MP3/M4A/Opus/WebM/AIFF files must decode or
raise an ``agl_fast`` error, in a child process that exits normally within
20 s and 4 GB of address space (see ``docs/robustness.md``).

A fixed set runs here (every targeted header value and truncation, plus
``RANDOM_CASES`` random cases from each base seed in ``FUZZ_SEEDS``), so the
run is deterministic; ``python scripts/fuzz_decode.py --minutes 60 --out DIR`` runs
the same machinery for as long as asked.
"""

from __future__ import annotations

import json
import struct
import wave
from pathlib import Path

import pytest

import agl_fast
from fuzz import (
    SEEK_SEED_SECONDS,
    Case,
    SeedSet,
    make_seeds,
    make_seek_seeds,
    random_case,
    run_cases,
    seek_case,
    targeted_cases,
)
from fuzz.__main__ import FORMATS
from fuzz.formats import FIELDS, ogg_spans

FUZZ_SEEDS = (1, 2, 3)
RANDOM_CASES = 100  # per base seed and format
SEEK_CASES = 12  # per base seed and seeking format


@pytest.fixture(scope="module")
def seedset(tmp_path_factory: pytest.TempPathFactory) -> SeedSet:
    return make_seeds(tmp_path_factory.mktemp("fuzz-seeds"))


def _seeds_of(seedset: SeedSet, fmt: str) -> list:  # type: ignore[type-arg]
    if fmt in seedset.missing:
        pytest.skip(f"no {fmt} seed files: {seedset.missing[fmt]}")
    seeds = [s for s in seedset.seeds if s.fmt == fmt]
    assert seeds, f"no {fmt} seeds and no reason given"
    return seeds


@pytest.mark.parametrize("fmt", FORMATS)
def test_seeds_decode(seedset: SeedSet, fmt: str) -> None:
    """The unmutated seeds are valid files (a fuzzer of broken seeds tests
    nothing beyond the first header check)."""
    for s in _seeds_of(seedset, fmt):
        y, sr = agl_fast.load(s.path, sr=None)
        assert sr > 0 and y.shape[-1] > 1000, s.name


def _case(cases: list[Case], case_id: str) -> Case:
    found = [c for c in cases if c.case_id == case_id]
    assert found, f"no case {case_id}"
    return found[0]


def test_mutations_land_where_aimed(seedset: SeedSet) -> None:
    """Field rewrites change the field a reference reader sees."""
    wavs = list(targeted_cases([seedset.by_name("wav_pcm16_stereo")]))
    c = _case(wavs, "wav_pcm16_stereo:fmt.sample_rate=2147483647")
    p = seedset.by_name("wav_pcm16_stereo").path.with_name("rate.wav")
    p.write_bytes(c.data)
    with wave.open(str(p)) as w:
        assert w.getframerate() == 2**31 - 1
        assert w.getnchannels() == 2
    c = _case(wavs, "wav_pcm16_stereo:fmt.channels=65535")
    p.write_bytes(c.data)
    with wave.open(str(p)) as w:
        assert w.getnchannels() == 65535

    if "m4a" not in seedset.missing:
        m4a = list(targeted_cases([seedset.by_name("m4a_aac_stereo")]))
        for table, at in [(b"stsz", 8), (b"stsc", 4), (b"stts", 4), (b"stco", 4)]:
            c = _case(m4a, f"m4a_aac_stereo:{table.decode()}.entry_count=4294967295")
            box = c.data.find(table) - 4
            assert struct.unpack_from(">I", c.data, box + 8 + at)[0] == 2**32 - 1

    if "ogg" not in seedset.missing:
        ogg = list(targeted_cases([seedset.by_name("ogg_vorbis_stereo")]))
        c = _case(ogg, "ogg_vorbis_stereo:vorbis.sample_rate=4294967295")
        body = c.data.find(b"\x01vorbis")
        assert struct.unpack_from("<I", c.data, body + 12)[0] == 2**32 - 1
        # The page CRC was recomputed, so the page still checks.
        page = bytearray(c.data[: ogg_spans(c.data)[0].end])
        stored = struct.unpack_from("<I", page, 22)[0]
        page[22:26] = b"\0\0\0\0"
        assert stored == _ogg_crc_reference(bytes(page))
        # The reference itself: CRC-32/CKSUM's check value, uninverted, and
        # the CRC libogg wrote on the seed's own first page.
        assert _ogg_crc_reference(b"123456789") == 0x765E7680 ^ 0xFFFFFFFF
        seed = seedset.by_name("ogg_vorbis_stereo").data()
        page = bytearray(seed[: ogg_spans(seed)[0].end])
        stored = struct.unpack_from("<I", page, 22)[0]
        page[22:26] = b"\0\0\0\0"
        assert stored == _ogg_crc_reference(bytes(page))


def _ogg_crc_reference(data: bytes) -> int:
    """Ogg's CRC-32 (polynomial 0x04C11DB7, no reflection, zero init), bit
    by bit: independent of the table-driven one the fuzzer uses."""
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def test_every_format_has_targeted_fields(seedset: SeedSet) -> None:
    """The parsers find the fields the issue names in every seed."""
    want = {
        "wav": {"fmt.sample_rate", "fmt.channels", "fmt.bits", "data.size", "riff.size"},
        "flac": {"streaminfo.sample_rate", "streaminfo.total_samples", "frame0.rate_code"},
        "ogg": {"vorbis.sample_rate", "vorbis.channels", "page0.granule"},
        "mp3": {"frame0.bitrate_index", "frame1.rate_index"},
        "m4a": {f"{t}.entry_count" for t in ("stsc", "stts", "stco", "stsz", "elst")},
        "opus": {"opushead.channels", "opushead.family", "opushead.streams", "page0.granule"},
        "webm": {"element0.size"},
        "aiff": {"comm.channels", "comm.frames", "comm.bits", "comm.rate_exp", "ssnd.size"},
    }
    for s in seedset.seeds:
        labels = {f.label for f in FIELDS[s.fmt](s.data())}
        assert want[s.fmt] <= labels, (s.name, want[s.fmt] - labels)
    vbr = [s for s in seedset.seeds if s.name == "mp3_vbr_mono"]
    for s in vbr:
        assert "xing.frames" in {f.label for f in FIELDS["mp3"](s.data())}


def test_random_cases_are_reproducible(seedset: SeedSet) -> None:
    a = [random_case(seedset.seeds, 5, i) for i in range(50)]
    b = [random_case(seedset.seeds, 5, i) for i in range(50)]
    assert a == b
    originals = {s.data() for s in seedset.seeds}
    assert sum(c.data not in originals for c in a) >= 45
    assert len({c.data for c in a}) >= 45


def test_supervisor_catches_crashes_hangs_and_untyped_errors(tmp_path: Path) -> None:
    """The harness itself: a case that aborts, one that hangs and one that
    raises a foreign exception are each reported and saved, and the cases
    after them still run."""
    kinds = [b"fine", b"ABORT", b"fine", b"HANG", b"RAISE", b"fine"]
    cases = [Case(f"self-{i}", "self", ".bin", ("none",), k) for i, k in enumerate(kinds)]
    rep = run_cases(
        cases, tmp_path / "work", tmp_path / "none", out_dir=tmp_path / "out", timeout=2.0,
        target="selftest",
    )  # fmt: skip
    assert [o.kind for o in rep.outcomes] == ["ok", "crash", "ok", "hang", "untyped", "ok"]
    assert "SIGABRT" in rep.outcomes[1].detail
    assert "ValueError" in rep.outcomes[4].detail
    saved = sorted(p.name for p in rep.saved)
    assert saved == ["self-1.bin", "self-3.bin", "self-4.bin"]
    meta = json.loads((tmp_path / "out" / "crash" / "self-1.bin.json").read_text())
    assert meta["case_id"] == "self-1" and meta["outcome"] == "crash"
    assert (tmp_path / "out" / "crash" / "self-1.bin").read_bytes() == b"ABORT"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_fuzz_decode(seedset: SeedSet, fmt: str, tmp_path: Path) -> None:
    """Every targeted case and ``RANDOM_CASES`` random cases per base seed:
    each decodes or raises an ``agl_fast`` error, and ``load_many`` /
    ``load_arrays`` keep the good file decoded beside it."""
    seeds = _seeds_of(seedset, fmt)
    cases = list(targeted_cases(seeds))
    cases += [random_case(seeds, base, i) for base in FUZZ_SEEDS for i in range(RANDOM_CASES)]
    good = seedset.by_name("wav_pcm16_stereo").path
    out = tmp_path / "failures"
    rep = run_cases(cases, tmp_path / "work", good, out_dir=out, workers=2)
    assert len(rep.outcomes) == len(cases)
    assert rep.counts["ok"] + rep.counts["typed"] > 0
    lines = [
        f"{o.kind}: {o.case.case_id} {list(o.case.ops)} {o.case.opts}: {o.detail}"
        for o in rep.failures
    ]
    assert not lines, f"{rep.summary()}; reproducers in {out}:\n" + "\n".join(lines)


@pytest.fixture(scope="module")
def seekset(tmp_path_factory: pytest.TempPathFactory) -> SeedSet:
    return make_seek_seeds(tmp_path_factory.mktemp("fuzz-seek-seeds"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["flac", "ogg", "opus", "webm", "aiff"])
def test_fuzz_seek(seekset: SeedSet, fmt: str, tmp_path: Path) -> None:
    """Mutated files read at random offsets and durations (past the
    pre-roll, on packet-sized steps, past the end): each decodes or raises
    an ``agl_fast`` error, in a child process that neither dies nor hangs."""
    seeds = _seeds_of(seekset, fmt)
    cases = [
        seek_case(seeds, base, i, SEEK_SEED_SECONDS)
        for base in FUZZ_SEEDS
        for i in range(SEEK_CASES)
    ]
    assert sum(c.opts["offset"] > 0.6 for c in cases) >= len(cases) // 4
    good = seekset.by_name("seek_flac").path
    out = tmp_path / "failures"
    rep = run_cases(cases, tmp_path / "work", good, out_dir=out, workers=2)
    assert len(rep.outcomes) == len(cases)
    assert rep.counts["ok"] > 0
    lines = [
        f"{o.kind}: {o.case.case_id} {list(o.case.ops)} {o.case.opts}: {o.detail}"
        for o in rep.failures
    ]
    assert not lines, f"{rep.summary()}; reproducers in {out}:\n" + "\n".join(lines)
