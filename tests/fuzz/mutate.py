"""Fuzz cases: seed files with header rewrites, truncations, bit flips, byte
runs and chunk shuffles.

Two generators, both deterministic:

* :func:`targeted_cases`: every listed value of every header field the
  parsers find (sizes, rates, channels, bit depths, frame and table counts),
  and a truncation at every structure boundary, one mutation per case.
* :func:`random_case`: case ``i`` of a run seeded ``base``: one to three
  random mutations of a random seed, reproducible from ``(base, i)`` alone.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .formats import FIELDS, SPANS, Span, fix_checksums, id3v2_tag
from .seeds import Seed

# Options each random case decodes with (``load``; ``load_many`` and
# ``load_arrays`` get the same with the file's own rate unless one is set).
OPTION_SETS: tuple[dict[str, Any], ...] = (
    {},
    {"mono": True},
    {"sr": 16000, "res_type": "fast"},
    {"sr": None},
    {"offset": 0.1, "duration": 0.1},
    {"max_duration": 0.05},
    {"channel": 0},
)


@dataclass(frozen=True)
class Case:
    case_id: str
    seed: str
    ext: str
    ops: tuple[str, ...]
    data: bytes
    opts: dict[str, Any] = field(default_factory=dict)


def _interesting_offsets(spans: list[Span], n: int) -> list[int]:
    offs = {1, 2, 3, 4, 8, 12, n // 2, n - 1}
    for sp in spans:
        offs.update((sp.start, sp.start + 1, sp.start + sp.header, sp.end - 1))
    return sorted(o for o in offs if 0 < o < n)


def targeted_cases(seeds: list[Seed]) -> Iterator[Case]:
    """One field value or one truncation per case, over every seed."""
    for seed in seeds:
        orig = seed.data()
        seen = {orig}
        for f in FIELDS[seed.fmt](orig):
            for v in f.values:
                buf = bytearray(orig)
                f.set(buf, v)
                fix_checksums(seed.fmt, orig, buf)
                data = bytes(buf)
                if data in seen:
                    continue
                seen.add(data)
                op = f"{f.label}={v}"
                yield Case(f"{seed.name}:{op}", seed.name, seed.ext, (op,), data)
        for extra_id, data in _format_specials(seed.fmt, orig):
            yield Case(f"{seed.name}:{extra_id}", seed.name, seed.ext, (extra_id,), data)
        for off in _interesting_offsets(SPANS[seed.fmt](orig), len(orig)):
            op = f"truncate@{off}"
            yield Case(f"{seed.name}:{op}", seed.name, seed.ext, (op,), orig[:off])


def _format_specials(fmt: str, b: bytes) -> list[tuple[str, bytes]]:
    """Whole-structure cases the field list does not express."""
    out: list[tuple[str, bytes]] = []
    if fmt == "wav":
        # What a recorder that crashed before closing the file leaves.
        buf = bytearray(b)
        struct.pack_into("<I", buf, 4, 0)
        for sp in SPANS["wav"](b):
            if sp.kind == "data":
                struct.pack_into("<I", buf, sp.start + 4, 0)
        out.append(("riff_and_data_size=0", bytes(buf)))
        spans = SPANS["wav"](b)[1:]
        if len(spans) >= 2:
            a, c = spans[0], spans[-1]
            # The data chunk before the format chunk.
            out.append(("data_before_fmt", b[:12] + b[c.start : c.end] + b[a.start : c.start]))
            out.append(("fmt_twice", b[: a.end] + b[a.start : a.end] + b[a.end :]))
        out.append(("huge_list_chunk", b[:12] + b"LIST" + struct.pack("<I", 2**32 - 9) + b[12:]))
    elif fmt == "mp3":
        for size in (0, 2**28 - 1, len(b) + 100):
            out.append((f"id3v2_size={size}", id3v2_tag(size, b"\0" * 20) + b))
        out.append(("id3v1_only", b"TAG" + b"\0" * 125))
        out.append(("trailing_id3v1", b + b"TAG" + b"x" * 125))
    elif fmt == "flac" and len(b) > 42:
        is_last = b[4] & 0x80
        head = bytearray(b[:42])
        head[4] &= 0x7F
        for kind, body in [
            ("padding_huge", bytes([1]) + (2**24 - 1).to_bytes(3, "big")),
            ("seektable_huge", bytes([3]) + (2**24 - 1).to_bytes(3, "big") + b"\xff" * 36),
            ("vorbis_comment_vendor_huge", bytes([4, 0, 0, 8]) + struct.pack("<II", 2**32 - 1, 0)),
            ("picture_mime_huge", bytes([6, 0, 0, 12]) + struct.pack(">III", 3, 2**32 - 1, 0)),
        ]:
            blk = bytearray(body)
            blk[0] |= is_last
            out.append((f"insert_{kind}", bytes(head) + bytes(blk) + b[42:]))
    return out


# ----------------------------------------------------------------- random


def _mp4_resize_ancestors(spans: list[Span], buf: bytearray, inner: Span, delta: int) -> None:
    for sp in spans:
        if sp.depth < inner.depth and sp.start <= inner.start and inner.end <= sp.end:
            if sp.header == 8:
                size = struct.unpack_from(">I", buf, sp.start)[0]
                if size:
                    struct.pack_into(">I", buf, sp.start, (size + delta) & 0xFFFFFFFF)


def _op_field(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    fields = FIELDS[fmt](bytes(buf))
    if not fields:
        return None
    f = rng.choice(fields)
    v = rng.choice(f.values) if rng.random() < 0.8 else rng.getrandbits(f.bits)
    before = bytes(buf)
    f.set(buf, v)
    if rng.random() < 0.8:
        fix_checksums(fmt, before, buf)
    return f"{f.label}={v}"


def _op_truncate(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    offs = _interesting_offsets(SPANS[fmt](bytes(buf)), len(buf))
    if not offs:
        return None
    off = rng.choice(offs) if rng.random() < 0.7 else rng.randrange(1, max(2, len(buf)))
    del buf[off:]
    return f"truncate@{off}"


def _op_bitflip(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    if not buf:
        return None
    hi = min(len(buf), 512) if rng.random() < 0.5 else len(buf)
    before = bytes(buf)
    offs = []
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(hi)
        buf[i] ^= 1 << rng.randrange(8)
        offs.append(i)
    if rng.random() < 0.5:
        fix_checksums(fmt, before, buf)
    return "bitflip@" + ",".join(map(str, offs))


def _op_byterun(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    if not buf:
        return None
    i, n = rng.randrange(len(buf)), rng.randint(1, 64)
    v = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    buf[i : i + n] = bytes([v]) * len(buf[i : i + n])
    return f"byterun@{i}x{n}={v}"


def _op_insert_delete(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    spans = SPANS[fmt](bytes(buf))
    i = rng.choice(spans).start if spans and rng.random() < 0.5 else rng.randrange(len(buf) + 1)
    if rng.random() < 0.5:
        blob = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        buf[i:i] = blob
        return f"insert@{i}+{len(blob)}"
    n = rng.randint(1, 64)
    del buf[i : i + n]
    return f"delete@{i}-{n}"


def _op_structure(rng: random.Random, fmt: str, buf: bytearray) -> str | None:
    """Duplicate, drop or swap whole chunks / blocks / pages / frames / boxes."""
    spans = [s for s in SPANS[fmt](bytes(buf)) if s.end > s.start]
    if not spans:
        return None
    sp = rng.choice(spans)
    piece = bytes(buf[sp.start : sp.end])
    how = rng.choice(("dup", "drop", "swap"))
    if how == "dup":
        buf[sp.end : sp.end] = piece
        if fmt == "m4a":
            _mp4_resize_ancestors(spans, buf, sp, len(piece))
    elif how == "drop":
        del buf[sp.start : sp.end]
        if fmt == "m4a":
            _mp4_resize_ancestors(spans, buf, sp, -len(piece))
    else:
        sibs = [s for s in spans if s.depth == sp.depth and s is not sp and s.end <= sp.start]
        if not sibs:
            return None
        other = rng.choice(sibs)  # lies before sp
        a, c = bytes(buf[other.start : other.end]), piece
        mid = bytes(buf[other.end : sp.start])
        buf[other.start : sp.end] = c + mid + a
        return f"swap:{other.kind}@{other.start}<->{sp.kind}@{sp.start}"
    return f"{how}:{sp.kind}@{sp.start}"


_OPS = (
    (_op_field, 5),
    (_op_truncate, 2),
    (_op_bitflip, 2),
    (_op_byterun, 1),
    (_op_insert_delete, 1),
    (_op_structure, 2),
)


def seek_options(rng: random.Random, seconds: float) -> dict[str, Any]:
    """A window to read from a file of about ``seconds``: a random offset
    (sometimes past the end, sometimes on a 1,024- or 960-frame step), and a
    duration or none."""
    sr = rng.choice((44100, 48000, 22050))
    if rng.random() < 0.3:
        offset = rng.randrange(0, int(seconds * sr) + 2048, rng.choice((960, 1024))) / sr
    else:
        offset = rng.uniform(0.0, seconds * 1.1)
    opts: dict[str, Any] = {"offset": offset}
    if rng.random() < 0.7:
        opts["duration"] = rng.uniform(0.0, seconds / 2)
    if rng.random() < 0.5:
        opts["sr"] = None
    return opts


def seek_case(seeds: list[Seed], base: int, i: int, seconds: float) -> Case:
    """Case ``i`` of the seeking run seeded ``base``: the mutations of
    :func:`random_case`, read through :func:`seek_options`."""
    c = random_case(seeds, base, i)
    rng = random.Random(f"agl-fuzz-seek/{base}/{i}")
    return replace(c, case_id=f"s{base}-{i}", opts=seek_options(rng, seconds))


def random_case(seeds: list[Seed], base: int, i: int) -> Case:
    """Case ``i`` of the run seeded ``base`` (depends on nothing else)."""
    rng = random.Random(f"agl-fuzz/{base}/{i}")
    seed = seeds[rng.randrange(len(seeds))]
    buf = bytearray(seed.data())
    ops: list[str] = []
    funcs, weights = zip(*_OPS, strict=True)
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.choices(funcs, weights)[0](rng, seed.fmt, buf)
        if op is not None:
            ops.append(op)
    opts = dict(rng.choice(OPTION_SETS))
    return Case(f"r{base}-{i}", seed.name, seed.ext, tuple(ops), bytes(buf), opts)
