"""Just enough parsing of WAV, FLAC, Ogg, MP3, MP4, AIFF and WebM to aim mutations.

Each format yields :class:`Field` values (a header field the decoder sizes
or interprets something from, with the values worth trying), the offsets of
its structures (chunks, blocks, pages, frames, boxes: where truncations and
shuffles are aimed) and a ``fix`` that repairs checksums after a field
rewrite, so a mutation reaches the code behind the checksum. The parsers
are lenient: on a file they cannot walk they return what they found so far.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

U32_EDGES = (0, 1, 2**31 - 1, 2**32 - 1)
RATE_EDGES = (0, 1, 2, 2**31 - 1, 2**32 - 1)


@dataclass(frozen=True)
class Field:
    """A header field: ``set(buf, value)`` rewrites it in place."""

    label: str
    set: Callable[[bytearray, int], None]
    values: tuple[int, ...]
    bits: int  # width, for random values


@dataclass(frozen=True)
class Span:
    """A structure (chunk, block, page, frame, box) at ``[start, end)``."""

    kind: str
    start: int
    end: int
    header: int  # bytes of its own header
    depth: int = 0


def _put(fmt: str, off: int) -> Callable[[bytearray, int], None]:
    size = struct.calcsize(fmt)
    mask = (1 << (8 * size)) - 1
    fmt = fmt[0] + fmt[1:].upper()  # negative values go in as two's complement

    def put(buf: bytearray, v: int) -> None:
        if off + size <= len(buf):
            struct.pack_into(fmt, buf, off, v & mask)

    return put


def _u32(fmt: str, buf: bytes, off: int) -> int:
    return int(struct.unpack_from(fmt, buf, off)[0]) if off + 4 <= len(buf) else 0


def _field(label: str, fmt: str, off: int, values: tuple[int, ...]) -> Field:
    return Field(label, _put(fmt, off), values, 8 * struct.calcsize(fmt))


# --------------------------------------------------------------------- WAV


def wav_spans(b: bytes) -> list[Span]:
    out = [Span("riff", 0, min(12, len(b)), 12)]
    pos = 12
    while pos + 8 <= len(b):
        size = _u32("<I", b, pos + 4)
        end = min(len(b), pos + 8 + size + (size & 1))
        out.append(Span(b[pos : pos + 4].decode("latin-1"), pos, end, 8, 1))
        if end <= pos:
            break
        pos = end
    return out


def wav_fields(b: bytes) -> list[Field]:
    fs = [_field("riff.size", "<I", 4, (0, 4, len(b) - 9, 2**31 - 1, 2**32 - 1))]
    for sp in wav_spans(b)[1:]:
        o = sp.start + 8
        fs.append(_field(f"{sp.kind}.chunk_size", "<I", sp.start + 4, U32_EDGES))
        if sp.kind == "fmt ":
            fs += [
                _field("fmt.format_tag", "<H", o, (0, 2, 3, 0x55, 0xFFFE, 0xFFFF)),
                _field("fmt.channels", "<H", o + 2, (0, 3, 255, 65535)),
                _field("fmt.sample_rate", "<I", o + 4, RATE_EDGES),
                _field("fmt.byte_rate", "<I", o + 8, (0, 2**32 - 1)),
                _field("fmt.block_align", "<H", o + 12, (0, 1, 3, 65535)),
                _field("fmt.bits", "<H", o + 14, (0, 1, 7, 12, 33, 64, 65535)),
            ]
            if sp.end - o >= 40:  # WAVE_FORMAT_EXTENSIBLE
                fs += [
                    _field("fmt.ext_size", "<H", o + 16, (0, 65535)),
                    _field("fmt.valid_bits", "<H", o + 18, (0, 64, 65535)),
                    _field("fmt.channel_mask", "<I", o + 20, (0, 2**32 - 1)),
                    _field("fmt.subformat", "<H", o + 24, (0, 3, 0xFFFF)),
                ]
        elif sp.kind == "data":
            fs.append(_field("data.size", "<I", sp.start + 4, (0, 1, len(b), 2**31 - 1)))
        elif sp.kind == "fact":
            fs.append(_field("fact.frames", "<I", o, U32_EDGES))
    return fs


# -------------------------------------------------------------------- FLAC


def _set_bits(buf: bytearray, byte_off: int, bit_off: int, width: int, v: int) -> None:
    """Write ``v`` into ``width`` bits starting ``bit_off`` bits (MSB first)
    after ``byte_off``."""
    n = (bit_off + width + 7) // 8
    if byte_off + n > len(buf):
        return
    word = int.from_bytes(buf[byte_off : byte_off + n], "big")
    shift = 8 * n - bit_off - width
    mask = ((1 << width) - 1) << shift
    word = (word & ~mask) | ((v << shift) & mask)
    buf[byte_off : byte_off + n] = word.to_bytes(n, "big")


def _bits(label: str, byte_off: int, bit_off: int, width: int, values: tuple[int, ...]) -> Field:
    def put(buf: bytearray, v: int) -> None:
        _set_bits(buf, byte_off, bit_off, width, v)

    return Field(label, put, values, width)


def flac_spans(b: bytes) -> list[Span]:
    out: list[Span] = []
    pos = 4
    while pos + 4 <= len(b):
        hdr = b[pos]
        size = int.from_bytes(b[pos + 1 : pos + 4], "big")
        end = min(len(b), pos + 4 + size)
        out.append(Span(f"block{hdr & 0x7F}", pos, end, 4))
        pos = end
        if hdr & 0x80:
            break
    for off in flac_frames(b, pos):
        out.append(Span("frame", off, off, 0, 1))
    return out


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _flac_header_len(b: bytes, off: int) -> int | None:
    """Length of the frame header at ``off`` up to (not including) its CRC-8."""
    if off + 5 > len(b):
        return None
    n = 4
    lead = b[off + 4]
    extra = 0
    while extra < 7 and lead & (0x80 >> extra):
        extra += 1
    n += 1 + max(0, extra - 1)
    bs, rate = b[off + 2] >> 4, b[off + 2] & 0xF
    n += {6: 1, 7: 2}.get(bs, 0) + {12: 1, 13: 2, 14: 2}.get(rate, 0)
    return n if off + n < len(b) else None


def flac_frames(b: bytes, start: int) -> list[int]:
    """Offsets of frame headers whose CRC-8 checks, from ``start``."""
    out = []
    i = b.find(b"\xff", start)
    while 0 <= i < len(b) - 6:
        if b[i + 1] & 0xFE == 0xF8:
            n = _flac_header_len(b, i)
            if n is not None and _crc8(b[i : i + n]) == b[i + n]:
                out.append(i)
        i = b.find(b"\xff", i + 1)
    return out


def flac_fix(buf: bytearray, frame_offsets: list[int]) -> None:
    """Recompute the CRC-8 of the frame headers at ``frame_offsets``."""
    for off in frame_offsets:
        n = _flac_header_len(buf, off)
        if n is not None:
            buf[off + n] = _crc8(buf[off : off + n])


def flac_fields(b: bytes) -> list[Field]:
    fs: list[Field] = []
    if len(b) >= 42 and b[4] & 0x7F == 0:
        si = 8
        fs += [
            _field("streaminfo.length", ">I", 4, (0x00000000, 0x00000021, 0x00FFFFFF)),
            _field("streaminfo.min_block", ">H", si, (0, 1, 16, 65535)),
            _field("streaminfo.max_block", ">H", si + 2, (0, 1, 15, 65535)),
            _bits("streaminfo.min_frame", si + 4, 0, 24, (0, 2**24 - 1)),
            _bits("streaminfo.max_frame", si + 7, 0, 24, (0, 2**24 - 1)),
            _bits("streaminfo.sample_rate", si + 10, 0, 20, (0, 1, 2, 2**20 - 1)),
            _bits("streaminfo.channels_minus_1", si + 10, 20, 3, tuple(range(8))),
            _bits("streaminfo.bits_minus_1", si + 10, 23, 5, (0, 2, 3, 31)),
            _bits("streaminfo.total_samples", si + 10, 28, 36, (0, 1, 2**32, 2**36 - 1)),
            _bits("streaminfo.is_last", 4, 0, 1, (0, 1)),
        ]
    frames = [s.start for s in flac_spans(b) if s.kind == "frame"][:2]
    for k, off in enumerate(frames):
        p = f"frame{k}"
        fs += [
            _bits(f"{p}.block_size_code", off + 2, 0, 4, (0, 1, 6, 7, 15)),
            _bits(f"{p}.rate_code", off + 2, 4, 4, (0, 1, 12, 13, 14, 15)),
            _bits(f"{p}.channel_assignment", off + 3, 0, 4, (0, 1, 7, 8, 10, 11, 15)),
            _bits(f"{p}.sample_size_code", off + 3, 4, 3, (0, 1, 3, 6, 7)),
        ]
    return fs


# --------------------------------------------------------------------- Ogg

_OGG_TABLE = []
for _i in range(256):
    _r = _i << 24
    for _ in range(8):
        _r = ((_r << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if _r & 0x80000000 else (_r << 1) & 0xFFFFFFFF
    _OGG_TABLE.append(_r)


def _ogg_crc(data: bytes | bytearray) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _OGG_TABLE[((crc >> 24) ^ byte) & 0xFF]
    return crc


def ogg_spans(b: bytes) -> list[Span]:
    out = []
    pos = b.find(b"OggS")
    while 0 <= pos and pos + 27 <= len(b):
        nseg = b[pos + 26]
        body = sum(b[pos + 27 : pos + 27 + nseg])
        end = min(len(b), pos + 27 + nseg + body)
        out.append(Span("page", pos, end, 27 + nseg))
        nxt = b.find(b"OggS", max(end, pos + 1))
        pos = nxt
    return out


def ogg_fix(buf: bytearray) -> None:
    """Recompute every page's CRC (a page is a span between capture patterns)."""
    for sp in ogg_spans(bytes(buf)):
        page = bytearray(buf[sp.start : sp.end])
        if len(page) < 27:
            continue
        page[22:26] = b"\0\0\0\0"
        struct.pack_into("<I", buf, sp.start + 22, _ogg_crc(page))


def ogg_fields(b: bytes) -> list[Field]:
    fs: list[Field] = []
    pages = ogg_spans(b)
    picks = {0: "page0", 1: "page1", len(pages) - 1: "last_page"}
    for k, name in picks.items():
        if not 0 <= k < len(pages):
            continue
        o = pages[k].start
        fs += [
            _field(f"{name}.version", "<B", o + 4, (1, 255)),
            _field(f"{name}.header_type", "<B", o + 5, (0, 1, 2, 4, 255)),
            _field(f"{name}.granule", "<q", o + 6, (-1, 0, 2**40, 2**63 - 1)),
            _field(f"{name}.serial", "<I", o + 14, (0, 2**32 - 1)),
            _field(f"{name}.sequence", "<I", o + 18, (7, 2**32 - 1)),
            _field(f"{name}.segments", "<B", o + 26, (0, 1, 255)),
            _field(f"{name}.lacing0", "<B", o + 27, (0, 1, 255)),
        ]
    if pages:
        body = pages[0].start + pages[0].header
        if b[body : body + 7] == b"\x01vorbis":
            fs += [
                _field("vorbis.version", "<I", body + 7, (1, 2**32 - 1)),
                _field("vorbis.channels", "<B", body + 11, (0, 3, 8, 255)),
                _field("vorbis.sample_rate", "<I", body + 12, RATE_EDGES),
                _field("vorbis.bitrate_nominal", "<i", body + 20, (-1, 2**31 - 1)),
                # Block size exponents (low nibble: short, high: long), 6..13.
                _field("vorbis.blocksizes", "<B", body + 28, (0x00, 0xFF, 0xD6, 0x5B, 0xEE, 0x66)),
                _field("vorbis.framing", "<B", body + 29, (0,)),
            ]
    if len(pages) > 1:
        body = pages[1].start + pages[1].header
        if b[body : body + 7] == b"\x03vorbis":
            vlen = _u32("<I", b, body + 7)
            fs += [
                _field("vorbis_comment.vendor_length", "<I", body + 7, (2**31 - 1, 2**32 - 1)),
                _field("vorbis_comment.count", "<I", body + 11 + vlen, (2**31 - 1, 2**32 - 1)),
            ]
    return fs


# --------------------------------------------------------------------- MP3

_MP3_BITRATES = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


def _mp3_frame_len(b: bytes, i: int) -> int | None:
    if i + 4 > len(b) or b[i] != 0xFF or b[i + 1] & 0xE0 != 0xE0:
        return None
    ver, layer = (b[i + 1] >> 3) & 3, (b[i + 1] >> 1) & 3
    bri, sri, pad = b[i + 2] >> 4, (b[i + 2] >> 2) & 3, (b[i + 2] >> 1) & 1
    if ver == 1 or layer != 1 or bri in (0, 15) or sri == 3:
        return None
    br = _MP3_BITRATES[1 if ver == 3 else 2][bri] * 1000
    sr = _MP3_RATES[ver][sri]
    return (144 if ver == 3 else 72) * br // sr + pad


def mp3_spans(b: bytes) -> list[Span]:
    out: list[Span] = []
    pos = 0
    if b[:3] == b"ID3" and len(b) >= 10:
        size = 0
        for byte in b[6:10]:
            size = (size << 7) | (byte & 0x7F)
        out.append(Span("id3v2", 0, min(len(b), 10 + size), 10))
        pos = 10 + size
    while pos < len(b):
        n = _mp3_frame_len(b, pos)
        if n is None:
            nxt = b.find(b"\xff", pos + 1)
            if nxt < 0:
                break
            pos = nxt
            continue
        out.append(Span("frame", pos, min(len(b), pos + n), 4, 1))
        pos += n
    return out


def mp3_fields(b: bytes) -> list[Field]:
    fs: list[Field] = []
    frames = [s for s in mp3_spans(b) if s.kind == "frame"]
    for k, sp in enumerate(frames[:2]):
        o, p = sp.start, f"frame{k}"
        fs += [
            _bits(f"{p}.version", o + 1, 3, 2, (0, 1, 2, 3)),
            _bits(f"{p}.layer", o + 1, 5, 2, (0, 2, 3)),
            _bits(f"{p}.protection", o + 1, 7, 1, (0, 1)),
            _bits(f"{p}.bitrate_index", o + 2, 0, 4, (0, 1, 14, 15)),
            _bits(f"{p}.rate_index", o + 2, 4, 2, (0, 1, 2, 3)),
            _bits(f"{p}.padding", o + 2, 6, 1, (0, 1)),
            _bits(f"{p}.channel_mode", o + 3, 0, 2, (0, 1, 2, 3)),
            _bits(f"{p}.emphasis", o + 3, 6, 2, (2, 3)),
        ]
    if frames:
        first = b[frames[0].start : frames[0].end]
        x = max(first.find(b"Xing"), first.find(b"Info"))
        if x >= 0:
            o = frames[0].start + x
            flags = _u32(">I", b, o + 4)
            fs.append(_field("xing.flags", ">I", o + 4, (0, 0xF, 2**32 - 1)))
            q = o + 8
            if flags & 1:
                fs.append(_field("xing.frames", ">I", q, U32_EDGES))
                q += 4
            if flags & 2:
                fs.append(_field("xing.bytes", ">I", q, U32_EDGES))
                q += 4
            if flags & 4:
                fs.append(_field("xing.toc0", ">B", q, (255,)))
                q += 100
            if flags & 8:
                q += 4
            if b[q : q + 4] == b"LAME" or b[q : q + 4] == b"Lavc":
                # 12-bit encoder delay then 12-bit padding, 21 bytes in.
                fs.append(
                    _bits("lame.delay_padding", q + 21, 0, 24, (0xFFFFFF, 0xFFF000, 0x000FFF))
                )
                fs.append(_field("lame.music_length", ">I", q + 28, U32_EDGES))
    return fs


def id3v2_tag(size: int, body: bytes) -> bytes:
    """An ID3v2.3 header claiming ``size`` bytes (syncsafe), then ``body``."""
    ss = bytes(((size >> s) & 0x7F) for s in (21, 14, 7, 0))
    return b"ID3\x03\x00\x00" + ss + body


# --------------------------------------------------------------------- MP4

_MP4_CONTAINERS = {
    b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"udta", b"dinf",
    b"mvex", b"moof", b"traf", b"ilst",
}  # fmt: skip
# Boxes with children after a fixed prefix (full-box header, sample entry).
_MP4_PREFIXED = {b"meta": 4, b"stsd": 8, b"mp4a": 28}
# Table boxes: offset of the entry count in the payload.
MP4_TABLES = {
    b"stts": 4, b"stsc": 4, b"stco": 4, b"co64": 4, b"ctts": 4, b"elst": 4,
    b"stss": 4, b"stsd": 4, b"stsz": 8, b"dref": 4,
}  # fmt: skip


def mp4_spans(b: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[Span]:
    out: list[Span] = []
    end = len(b) if end is None else end
    pos = start
    while pos + 8 <= end and depth < 12:
        size, kind = _u32(">I", b, pos), b[pos + 4 : pos + 8]
        hdr = 8
        if size == 1 and pos + 16 <= end:
            size, hdr = int.from_bytes(b[pos + 8 : pos + 16], "big"), 16
        elif size == 0:
            size = end - pos
        if size < hdr:
            break
        box_end = min(end, pos + size)
        out.append(Span(kind.decode("latin-1"), pos, box_end, hdr, depth))
        if kind in _MP4_CONTAINERS or kind in _MP4_PREFIXED:
            first = pos + hdr + _MP4_PREFIXED.get(kind, 0)
            out += mp4_spans(b, first, box_end, depth + 1)
        pos = box_end
    return out


def mp4_fields(b: bytes) -> list[Field]:
    fs: list[Field] = []
    huge = (0, 2**28, 2**31 - 1, 2**32 - 1)
    for sp in mp4_spans(b):
        kind, o = sp.kind.encode("latin-1"), sp.start + sp.header
        fs.append(
            _field(
                f"{sp.kind}.box_size", ">I", sp.start, (0, 1, 7, sp.end - sp.start + 1, 2**32 - 1)
            )
        )
        if kind in MP4_TABLES:
            c = o + MP4_TABLES[kind]
            count = _u32(">I", b, c)
            fs.append(_field(f"{sp.kind}.entry_count", ">I", c, (*huge, count + 1)))
            e = c + 4  # the first entry
            if kind == b"stsz":
                fs.append(_field("stsz.sample_size", ">I", o + 4, (1, 2**32 - 1)))
            elif kind == b"stts" or kind == b"ctts":
                fs.append(_field(f"{sp.kind}.first_count", ">I", e, (0, 2**32 - 1)))
                fs.append(_field(f"{sp.kind}.first_delta", ">I", e + 4, (0, 2**32 - 1)))
            elif kind == b"stsc":
                fs.append(_field("stsc.first_chunk", ">I", e, (0, 2**32 - 1)))
                fs.append(_field("stsc.samples_per_chunk", ">I", e + 4, (0, 2**32 - 1)))
                fs.append(_field("stsc.description_index", ">I", e + 8, (0, 2**32 - 1)))
            elif kind == b"stco":
                fs.append(_field("stco.first_offset", ">I", e, (0, len(b), 2**32 - 1)))
            elif kind == b"elst":
                fs.append(_field("elst.segment_duration", ">I", e, (0, 2**32 - 1)))
                fs.append(_field("elst.media_time", ">I", e + 4, (2**31 - 1, 2**32 - 1, 2**32 - 2)))
        elif kind in (b"mdhd", b"mvhd"):
            v1 = sp.start + sp.header < len(b) and b[o] == 1
            ts = o + (20 if v1 else 12)
            fs.append(_field(f"{sp.kind}.timescale", ">I", ts, (0, 1, 2**32 - 1)))
            fs.append(_field(f"{sp.kind}.duration", ">I", ts + 4, (0, 2**32 - 1)))
        elif kind == b"mp4a":
            fs += [
                _field("mp4a.channels", ">H", sp.start + 24, (0, 3, 255, 65535)),
                _field("mp4a.sample_size", ">H", sp.start + 26, (0, 65535)),
                _field("mp4a.sample_rate", ">I", sp.start + 32, (0, 1 << 16, 2**32 - 1)),
            ]
        elif kind == b"esds":
            asc = _esds_asc(b, o, sp.end)
            if asc is not None:
                fs += [
                    _bits("asc.object_type", asc, 0, 5, (0, 1, 5, 29, 31)),
                    _bits("asc.rate_index", asc, 5, 4, (12, 13, 15)),
                    _bits("asc.channel_config", asc, 9, 4, (0, 7, 8, 15)),
                ]
    return fs


def _esds_asc(b: bytes, start: int, end: int) -> int | None:
    """Offset of the AudioSpecificConfig (descriptor tag 5) inside an esds."""
    i = start + 4
    while i < end - 2:
        tag = b[i]
        j, length = i + 1, 0
        for _ in range(4):
            if j >= min(end, len(b)):
                return None
            length = (length << 7) | (b[j] & 0x7F)
            j += 1
            if not b[j - 1] & 0x80:
                break
        if tag == 5:
            return j if j + 2 <= end else None
        # ES (3) and DecoderConfig (4) descriptors nest; skip their fixed part.
        i = j + {3: 3, 4: 13}.get(tag, length)
    return None


# ------------------------------------------------------- Opus, AIFF, WebM


def _opushead_fields(b: bytes, prefix: str = "opushead") -> list[Field]:
    """The ``OpusHead`` counts the decoder sizes its state from."""
    o = b.find(b"OpusHead")
    if o < 0:
        return []
    return [
        _field(f"{prefix}.channels", "<B", o + 9, (0, 3, 8, 9, 255)),
        _field(f"{prefix}.pre_skip", "<H", o + 10, (0, 2**16 - 1)),
        _field(f"{prefix}.input_rate", "<I", o + 12, RATE_EDGES),
        _field(f"{prefix}.gain", "<h", o + 16, (-(2**15), 2**15 - 1)),
        _field(f"{prefix}.family", "<B", o + 18, (1, 2, 255)),
        _field(f"{prefix}.streams", "<B", o + 19, (0, 1, 255)),
        _field(f"{prefix}.coupled", "<B", o + 20, (0, 2, 255)),
    ]


def opus_fields(b: bytes) -> list[Field]:
    """Ogg page fields plus the ``OpusHead`` ones."""
    return ogg_fields(b) + _opushead_fields(b)


def aiff_spans(b: bytes) -> list[Span]:
    """``FORM`` and its chunks (big-endian sizes, even-padded)."""
    if len(b) < 12 or b[:4] != b"FORM":
        return []
    out = [Span("form", 0, len(b), 12)]
    pos = 12
    while pos + 8 <= len(b):
        size = struct.unpack_from(">I", b, pos + 4)[0]
        end = min(len(b), pos + 8 + size + (size & 1))
        out.append(Span("chunk", pos, end, 8, 1))
        pos = end
    return out


def aiff_fields(b: bytes) -> list[Field]:
    fs = [_field("form.size", ">I", 4, U32_EDGES)]
    for sp in aiff_spans(b)[1:]:
        cid, o = b[sp.start : sp.start + 4], sp.start
        if cid == b"COMM":
            fs += [
                _field("comm.size", ">I", o + 4, (0, 17, 2**32 - 1)),
                _field("comm.channels", ">H", o + 8, (0, 3, 2**15, 2**16 - 1)),
                _field("comm.frames", ">I", o + 10, U32_EDGES),
                _field("comm.bits", ">H", o + 14, (0, 1, 7, 33, 64, 2**16 - 1)),
                # 80-bit extended rate: exponent, then the top mantissa word.
                _field("comm.rate_exp", ">H", o + 16, (0, 0x3FFF, 0x401E, 0x7FFF, 0xFFFF)),
                _field("comm.rate_mant", ">I", o + 18, U32_EDGES),
            ]
        elif cid == b"SSND":
            fs += [
                _field("ssnd.size", ">I", o + 4, U32_EDGES),
                _field("ssnd.offset", ">I", o + 8, U32_EDGES),
            ]
    return fs


def _ebml_vint(b: bytes, pos: int) -> tuple[int, int] | None:
    """(value, length) of the EBML variable-size integer at ``pos``."""
    if pos >= len(b) or b[pos] == 0:
        return None
    n = 8 - b[pos].bit_length() + 1
    if pos + n > len(b):
        return None
    v = b[pos] & ((1 << (8 - n)) - 1)
    for k in range(1, n):
        v = (v << 8) | b[pos + k]
    return v, n


def _vint_put(off: int, n: int) -> Callable[[bytearray, int], None]:
    """Rewrite the ``n``-byte EBML size at ``off`` (same width, marker kept)."""

    def put(buf: bytearray, v: int) -> None:
        if off + n <= len(buf):
            v = (v & (2 ** (7 * n) - 1)) | (1 << (7 * n))
            buf[off : off + n] = v.to_bytes(n, "big")

    return put


def webm_spans(b: bytes) -> list[Span]:
    """The top-level EBML elements and the children of the Segment."""
    out: list[Span] = []
    pos, depth, limit = 0, 0, len(b)
    while pos < limit and len(out) < 256:
        idv = _ebml_vint(b, pos)
        if idv is None:
            break
        sz = _ebml_vint(b, pos + idv[1])
        if sz is None:
            break
        head = idv[1] + sz[1]
        end = min(len(b), pos + head + sz[0])
        out.append(Span("element", pos, end, head, depth))
        if b[pos : pos + 4] == b"\x18\x53\x80\x67" and depth == 0:  # Segment: descend
            pos, depth = pos + head, 1
            continue
        pos = end
    return out


def webm_fields(b: bytes) -> list[Field]:
    """Size fields of the first elements, plus the codec header inside."""
    fs: list[Field] = []
    for i, sp in enumerate(webm_spans(b)[:6]):
        idv = _ebml_vint(b, sp.start)
        if idv is None:
            continue
        n = sp.header - idv[1]
        top = 2 ** (7 * n) - 1  # all ones: "unknown size"
        fs.append(
            Field(f"element{i}.size", _vint_put(sp.start + idv[1], n), (0, 1, top - 1, top), 7 * n)
        )
    fs += _opushead_fields(b)
    o = b.find(b"\x01vorbis")
    if o >= 0:
        fs += [
            _field("vorbis.channels", "<B", o + 11, (0, 3, 8, 255)),
            _field("vorbis.sample_rate", "<I", o + 12, RATE_EDGES),
        ]
    return fs


# ---------------------------------------------------------------- dispatch

SPANS: dict[str, Callable[[bytes], list[Span]]] = {
    "wav": wav_spans,
    "flac": flac_spans,
    "ogg": ogg_spans,
    "mp3": mp3_spans,
    "m4a": mp4_spans,
    "opus": ogg_spans,
    "aiff": aiff_spans,
    "webm": webm_spans,
}
FIELDS: dict[str, Callable[[bytes], list[Field]]] = {
    "wav": wav_fields,
    "flac": flac_fields,
    "ogg": ogg_fields,
    "mp3": mp3_fields,
    "m4a": mp4_fields,
    "opus": opus_fields,
    "aiff": aiff_fields,
    "webm": webm_fields,
}


def fix_checksums(fmt: str, original: bytes, buf: bytearray) -> None:
    """Repair the checksums a format guards its headers with (Ogg page CRCs,
    FLAC frame-header CRC-8 of the frames the original had)."""
    if fmt in ("ogg", "opus"):
        ogg_fix(buf)
    elif fmt == "flac":
        flac_fix(buf, [s.start for s in flac_spans(original) if s.kind == "frame"][:2])
