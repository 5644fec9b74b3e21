//! Checks of container headers before a decoder sees them.
//!
//! Decoders size buffers from counts they read (a sample table's entry
//! count, a chunk's length). A hostile or damaged file can claim billions
//! of entries in a few bytes, and an allocation of that size aborts the
//! process. These walks read the same fields first and refuse a count that
//! the bytes after it cannot hold, so the decoder only ever sees counts
//! bounded by the file's length:
//!
//! * RIFF/WAVE: the `fmt ` fields are range-checked; a RIFF or `data` size
//!   of 0, `0xFFFFFFFF` or past the end of the file (what a recorder that
//!   died or a streaming writer leaves) is replaced by what the file holds,
//!   as ffmpeg reads such files.
//! * ISO BMFF (MP4/M4A): every box must lie inside its parent, and the
//!   sample tables (`stco`, `co64`, `stsz`, `stsc`, `stts`, `ctts`, `stss`,
//!   `elst`) must hold the entries they count. The walk also reads the
//!   sound track's edit list, whose media time is the encoder delay
//!   (priming) that ffmpeg trims. Each sample's size must fit in the file.
//! * FLAC: metadata blocks must lie inside the file, and the lengths inside
//!   PICTURE and VORBIS_COMMENT blocks inside their block.

use std::io::{Read, Seek, SeekFrom};

use crate::resample::MAX_SAMPLE_RATE;

/// Most channels a WAV header may declare.
pub const MAX_CHANNELS: u16 = 64;

/// Largest box (other than media data) read into memory for the walk.
const MAX_META_BOX: u64 = 256 << 20;

/// Deepest box nesting walked.
const MAX_DEPTH: usize = 12;

/// A byte range of the input to replace before decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patch {
    pub at: u64,
    pub bytes: [u8; 4],
}

/// Apply patches to a whole file held in memory.
pub fn apply(data: &mut [u8], patches: &[Patch]) {
    for p in patches {
        let at = p.at as usize;
        if at + 4 <= data.len() {
            data[at..at + 4].copy_from_slice(&p.bytes);
        }
    }
}

fn u16le(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32le(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u32be(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64be(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_be_bytes(a)
    })
}

/// The container a probe would settle on, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Wav(usize),
    Flac(usize),
    Mp4(usize),
    Ogg(usize),
}

/// Find the first container marker in `head`, as symphonia's probe scans
/// for one (it searches the first megabyte byte by byte, skipping ID3v2
/// tags): RIFF/WAVE, `fLaC`, an `ftyp` box or an Ogg page. An MPEG frame
/// sync met first ends the search (that reader sizes nothing from the header
/// fields checked here).
pub fn locate(head: &[u8]) -> Option<Found> {
    let mut i = 0usize;
    while i + 4 <= head.len() {
        let w = &head[i..i + 4];
        if w == b"ID3\x03" || w == b"ID3\x04" || w == b"ID3\x02" {
            let n = head.get(i + 6..i + 10).map_or(0, |b| {
                b.iter()
                    .fold(0usize, |a, &x| (a << 7) | (x & 0x7F) as usize)
            });
            i += 10 + n;
            continue;
        }
        match w {
            b"RIFF" if head.get(i + 8..i + 12) == Some(b"WAVE") => return Some(Found::Wav(i)),
            b"fLaC" => return Some(Found::Flac(i)),
            b"ftyp" if i >= 4 => return Some(Found::Mp4(i - 4)),
            b"OggS" => return Some(Found::Ogg(i)),
            _ if w[0] == 0xFF && w[1] & 0xE0 == 0xE0 => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Whether `head` starts a RIFF/WAVE file.
pub fn is_wav(head: &[u8]) -> bool {
    head.len() >= 12 && &head[0..4] == b"RIFF" && &head[8..12] == b"WAVE"
}

/// Whether `head` starts a native FLAC stream.
pub fn is_flac(head: &[u8]) -> bool {
    head.starts_with(b"fLaC")
}

fn u32le_at(b: &[u8], at: usize) -> Option<u64> {
    u32le(b, at).map(u64::from)
}

/// Walk the metadata blocks of a FLAC file of `len` bytes: every block must
/// lie inside the file, and the lengths inside PICTURE and VORBIS_COMMENT
/// blocks (which a decoder allocates before reading) inside their block.
pub fn flac<R: Read + Seek>(r: &mut R, start: u64, len: u64) -> Result<(), String> {
    let mut pos = start + 4;
    loop {
        if pos + 4 > len {
            return Ok(());
        }
        r.seek(SeekFrom::Start(pos)).map_err(|e| e.to_string())?;
        let mut h = [0u8; 4];
        r.read_exact(&mut h).map_err(|e| e.to_string())?;
        let (last, kind) = (h[0] & 0x80 != 0, h[0] & 0x7F);
        let size = u64::from(h[1]) << 16 | u64::from(h[2]) << 8 | u64::from(h[3]);
        let body_at = pos + 4;
        if body_at + size > len {
            return Err(format!(
                "FLAC metadata block {kind} at byte {pos} claims {size} bytes, past the end \
                 of the {len}-byte file"
            ));
        }
        if kind == 4 || kind == 6 {
            let mut body = vec![0u8; size as usize];
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            flac_block(kind, &body).map_err(|e| format!("{e} (block at byte {pos})"))?;
        }
        if last {
            return Ok(());
        }
        pos = body_at + size;
    }
}

/// Check the lengths inside a FLAC PICTURE (`kind` 6) or VORBIS_COMMENT
/// (`kind` 4) block body against the body's size.
fn flac_block(kind: u8, body: &[u8]) -> Result<(), String> {
    let size = body.len() as u64;
    let bad = |what: &str, n: u64| {
        let name = if kind == 4 {
            "VORBIS_COMMENT"
        } else {
            "PICTURE"
        };
        format!("FLAC {name} block gives a {what} of {n} bytes, more than its {size} bytes")
    };
    if kind == 6 {
        // Type, MIME length + MIME, description length + text, four
        // dimensions, data length + data (big-endian).
        let mut at = 4usize;
        for what in ["MIME type length", "description length"] {
            let n = u64::from(u32be(body, at).unwrap_or(u32::MAX));
            if at as u64 + 4 + n > size {
                return Err(bad(what, n));
            }
            at += 4 + n as usize;
        }
        at += 16;
        let n = u64::from(u32be(body, at).unwrap_or(u32::MAX));
        if at as u64 + 4 + n > size {
            return Err(bad("picture data length", n));
        }
        Ok(())
    } else if kind == 4 {
        comments(body).map_err(|(what, n)| bad(what, n))
    } else {
        Ok(())
    }
}

/// Check a Vorbis comment structure (vendor length + text, count, then
/// length + text per comment, little-endian): every length inside `body`.
fn comments(body: &[u8]) -> Result<(), (&'static str, u64)> {
    let size = body.len() as u64;
    let vendor = u32le_at(body, 0).unwrap_or(0);
    if 4 + vendor > size {
        return Err(("vendor string length", vendor));
    }
    let mut at = 4 + vendor as usize;
    let count = u32le_at(body, at).unwrap_or(0);
    at += 4;
    for _ in 0..count {
        let Some(n) = u32le_at(body, at) else {
            break;
        };
        if at as u64 + 4 + n > size {
            return Err(("comment length", n));
        }
        at += 4 + n as usize;
    }
    Ok(())
}

/// The Ogg page checksum (CRC-32, polynomial 0x04C11DB7, not reflected).
fn ogg_crc(parts: &[&[u8]]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, v) in t.iter_mut().enumerate() {
            let mut c = (i as u32) << 24;
            for _ in 0..8 {
                c = if c & 0x8000_0000 != 0 {
                    (c << 1) ^ 0x04C1_1DB7
                } else {
                    c << 1
                };
            }
            *v = c;
        }
        t
    });
    let mut crc = 0u32;
    for p in parts {
        for &b in *p {
            crc = (crc << 8) ^ t[((crc >> 24) as u8 ^ b) as usize];
        }
    }
    crc
}

/// Bytes of an Ogg file read for its header packets.
const OGG_SCAN: u64 = 16 << 20;

/// Walk the pages of an Ogg file (from `start`, resyncing on the capture
/// pattern and skipping pages whose checksum fails, as the demuxer does),
/// put the first packets of each logical stream back together, and check
/// the lengths inside their comment headers (Vorbis `\x03vorbis`, Opus
/// `OpusTags`, and FLAC-in-Ogg VORBIS_COMMENT / PICTURE blocks) against the
/// packet: the demuxer allocates them before reading.
pub fn ogg<R: Read + Seek>(r: &mut R, start: u64, len: u64) -> Result<(), String> {
    let n = (len.saturating_sub(start)).min(OGG_SCAN) as usize;
    let mut buf = vec![0u8; n];
    r.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
    let got = read_up_to(r, &mut buf).map_err(|e| e.to_string())?;
    let b = &buf[..got];
    // Per stream serial: the unfinished packet, the packets seen, FLAC?
    let mut streams: std::collections::HashMap<u32, (Vec<u8>, usize, bool)> = Default::default();
    let mut pos = 0usize;
    while pos + 27 <= b.len() {
        if &b[pos..pos + 4] != b"OggS" {
            pos += 1;
            continue;
        }
        let nseg = b[pos + 26] as usize;
        let body_at = pos + 27 + nseg;
        let Some(lacing) = b.get(pos + 27..body_at) else {
            break;
        };
        let body_len: usize = lacing.iter().map(|&v| v as usize).sum();
        let Some(body) = b.get(body_at..body_at + body_len) else {
            break;
        };
        let mut head = b[pos..pos + 27].to_vec();
        head[22..26].fill(0);
        let want = u32::from_le_bytes([b[pos + 22], b[pos + 23], b[pos + 24], b[pos + 25]]);
        if ogg_crc(&[&head, lacing, body]) != want {
            pos += 1;
            continue;
        }
        let continued = b[pos + 5] & 1 != 0;
        let serial = u32::from_le_bytes([b[pos + 14], b[pos + 15], b[pos + 16], b[pos + 17]]);
        let st = streams.entry(serial).or_default();
        if !continued {
            st.0.clear();
        }
        let mut at = 0usize;
        for &seg in lacing {
            st.0.extend_from_slice(&body[at..at + seg as usize]);
            at += seg as usize;
            if seg < 255 {
                let packet = std::mem::take(&mut st.0);
                if st.1 == 0 && packet.starts_with(b"\x7fFLAC") {
                    st.2 = true;
                }
                check_ogg_packet(&packet, st.1, st.2)?;
                st.1 += 1;
            }
        }
        pos = body_at + body_len;
        // Header packets come first: once every stream is past them, stop.
        if streams.values().all(|s| s.1 >= 8) {
            break;
        }
    }
    Ok(())
}

/// Check packet number `index` of a logical stream (`flac`: an Ogg FLAC
/// stream, whose header packets after the first are metadata blocks).
fn check_ogg_packet(p: &[u8], index: usize, flac: bool) -> Result<(), String> {
    let comment_at = if p.starts_with(b"\x03vorbis") {
        Some(7)
    } else if p.starts_with(b"OpusTags") {
        Some(8)
    } else {
        None
    };
    if let Some(at) = comment_at {
        return comments(&p[at..]).map_err(|(what, n)| {
            format!(
                "an Ogg comment header gives a {what} of {n} bytes, more than its {} bytes",
                p.len() - at
            )
        });
    }
    if flac && index > 0 && p.len() >= 4 {
        return flac_block(p[0] & 0x7F, &p[4..]).map_err(|e| format!("Ogg FLAC: {e}"));
    }
    Ok(())
}

/// Whether `head` starts an ISO BMFF file (an `ftyp` box first).
pub fn is_mp4(head: &[u8]) -> bool {
    head.len() >= 8 && &head[4..8] == b"ftyp"
}

/// Check a WAV header in `head` (the first bytes of a file of `len` bytes)
/// and return the size fields to rewrite, with the frames the `data` chunk
/// declares (its size over the block alignment; `None` when the size is a
/// streaming placeholder, 0 or `u32::MAX`, or no `data` chunk is in
/// `head`). Errors name the field and value.
pub fn wav(head: &[u8], len: u64) -> Result<(Vec<Patch>, Option<u64>), String> {
    let mut patches = Vec::new();
    let mut declared = None;
    let riff = u32le(head, 4).unwrap_or(0);
    let whole = len.saturating_sub(8).min(u32::MAX as u64) as u32;
    if riff == 0 || riff == u32::MAX || riff as u64 > len.saturating_sub(8) {
        patches.push(Patch {
            at: 4,
            bytes: whole.to_le_bytes(),
        });
    }
    let mut block_align = 1u64;
    let mut pos = 12usize;
    while pos + 8 <= head.len() {
        let id = &head[pos..pos + 4];
        let size = u32le(head, pos + 4).unwrap_or(0);
        let body = pos + 8;
        if id == b"fmt " {
            let (Some(tag), Some(ch), Some(sr), Some(align), Some(bits)) = (
                u16le(head, body),
                u16le(head, body + 2),
                u32le(head, body + 4),
                u16le(head, body + 12),
                u16le(head, body + 14),
            ) else {
                return Err("the fmt chunk is cut short".into());
            };
            if ch == 0 || ch > MAX_CHANNELS {
                return Err(format!(
                    "header field channels={ch} is outside 1..={MAX_CHANNELS}"
                ));
            }
            if sr == 0 || sr > MAX_SAMPLE_RATE {
                return Err(format!(
                    "header field sample_rate={sr} Hz is outside the 1..={MAX_SAMPLE_RATE} Hz \
                     agl-fast decodes"
                ));
            }
            // PCM, IEEE float and WAVE_FORMAT_EXTENSIBLE carry a sample
            // width; compressed tags (ADPCM, ...) are left to the decoder.
            if matches!(tag, 1 | 3 | 0xFFFE) && (bits == 0 || bits > 64) {
                return Err(format!(
                    "header field bits_per_sample={bits} is outside 1..=64"
                ));
            }
            if align == 0 {
                return Err("header field block_align=0 must be positive".into());
            }
            block_align = align as u64;
        }
        if id == b"data" {
            if size != 0 && size != u32::MAX {
                declared = Some(size as u64 / block_align);
            }
            let rest = len.saturating_sub(body as u64);
            if size == 0 || size == u32::MAX || size as u64 > rest {
                let fit =
                    (rest - rest % block_align).min(u32::MAX as u64 / block_align * block_align);
                patches.push(Patch {
                    at: pos as u64 + 4,
                    bytes: (fit as u32).to_le_bytes(),
                });
                // The RIFF size must then cover the repaired data chunk.
                if patches[0].at != 4 {
                    patches.insert(
                        0,
                        Patch {
                            at: 4,
                            bytes: whole.to_le_bytes(),
                        },
                    );
                }
            }
            break;
        }
        pos = body + size as usize + (size as usize & 1);
    }
    Ok((patches, declared))
}

/// What the MP4 walk learnt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mp4Info {
    /// Media time of the sound track's first edit (the encoder delay), in
    /// the track's timescale, and that timescale.
    pub priming: Option<(u64, u32)>,
    /// Length of the whole file in bytes.
    pub file_len: u64,
}

/// Every sample of a `stsz` table (or its constant size) must fit in the
/// file: a decoder allocates a packet of that size before reading it.
fn sample_sizes(body: &[u8], at: u64, file_len: u64) -> Result<(), String> {
    let constant = u32be(body, 4).unwrap_or(0);
    let too_big = |n: u32| {
        format!(
            "box 'stsz' at byte {at} gives a sample of {n} bytes, more than the \
             {file_len}-byte file"
        )
    };
    if u64::from(constant) > file_len {
        return Err(too_big(constant));
    }
    if constant == 0 {
        let count = u32be(body, 8).unwrap_or(0) as usize;
        for i in 0..count {
            let n = u32be(body, 12 + 4 * i).unwrap_or(0);
            if u64::from(n) > file_len {
                return Err(too_big(n));
            }
        }
    }
    Ok(())
}

/// Per-track facts gathered while walking a `trak`.
#[derive(Default)]
struct Track {
    sound: bool,
    timescale: Option<u32>,
    media_time: Option<u64>,
}

/// Walk the boxes of an MP4 file of `len` bytes read through `r`.
pub fn mp4<R: Read + Seek>(r: &mut R, start: u64, len: u64) -> Result<Mp4Info, String> {
    let mut info = Mp4Info {
        file_len: len,
        ..Default::default()
    };
    let mut pos = start;
    while pos + 8 <= len {
        r.seek(SeekFrom::Start(pos)).map_err(|e| e.to_string())?;
        let mut h = [0u8; 16];
        let got = read_up_to(r, &mut h).map_err(|e| e.to_string())?;
        let Some((kind, hdr, size)) = box_header(&h[..got], len - pos) else {
            break;
        };
        let top_data = matches!(&kind, b"mdat" | b"free" | b"skip" | b"wide");
        if pos + size > len && !top_data {
            return Err(format!(
                "box '{}' at byte {pos} claims {size} bytes, past the end of the {len}-byte file",
                name(&kind)
            ));
        }
        if !top_data && size > hdr {
            if size > MAX_META_BOX {
                return Err(format!(
                    "box '{}' at byte {pos} claims {size} bytes of metadata, above the {MAX_META_BOX} \
                     agl-fast reads",
                    name(&kind)
                ));
            }
            let mut body = vec![0u8; (size - hdr) as usize];
            r.seek(SeekFrom::Start(pos + hdr))
                .map_err(|e| e.to_string())?;
            r.read_exact(&mut body).map_err(|e| e.to_string())?;
            let mut track = Track::default();
            walk(&kind, &body, pos + hdr, 0, &mut info, &mut track)?;
        }
        if size == 0 {
            break;
        }
        pos = pos.saturating_add(size);
    }
    Ok(info)
}

fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn name(kind: &[u8; 4]) -> String {
    kind.iter()
        .map(|&c| if c.is_ascii_graphic() { c as char } else { '?' })
        .collect()
}

/// `(type, header length, box length)` of the box starting `b`, with
/// `room` bytes left in its parent (a size of 0 means "to the end").
fn box_header(b: &[u8], room: u64) -> Option<([u8; 4], u64, u64)> {
    let size32 = u32be(b, 0)?;
    let mut kind = [0u8; 4];
    kind.copy_from_slice(b.get(4..8)?);
    match size32 {
        0 => Some((kind, 8, room)),
        1 => {
            let s = u64be(b, 8)?;
            (s >= 16).then_some((kind, 16, s))
        }
        s if s >= 8 => Some((kind, 8, s as u64)),
        _ => None,
    }
}

/// Boxes that hold only other boxes (after `skip` bytes).
fn container(kind: &[u8; 4]) -> Option<usize> {
    match kind {
        b"moov" | b"trak" | b"mdia" | b"minf" | b"stbl" | b"edts" | b"dinf" | b"udta" | b"mvex"
        | b"moof" | b"traf" => Some(0),
        b"meta" => Some(4),
        _ => None,
    }
}

/// Check the body of box `kind` (its content, at file offset `at`).
fn walk(
    kind: &[u8; 4],
    body: &[u8],
    at: u64,
    depth: usize,
    info: &mut Mp4Info,
    track: &mut Track,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "boxes nest deeper than {MAX_DEPTH} levels at byte {at}"
        ));
    }
    table(kind, body, at)?;
    track_box(kind, body, track);
    let Some(skip) = container(kind) else {
        return Ok(());
    };
    let is_trak = kind == b"trak";
    let mut own = Track::default();
    let t: &mut Track = if is_trak { &mut own } else { track };
    let mut pos = skip;
    while pos + 8 <= body.len() {
        let room = (body.len() - pos) as u64;
        let Some((k, hdr, size)) = box_header(&body[pos..], room) else {
            return Err(format!(
                "a box header at byte {} is malformed",
                at + pos as u64
            ));
        };
        if size > room || size < hdr {
            return Err(format!(
                "box '{}' at byte {} claims {size} bytes, past the end of its parent '{}'",
                name(&k),
                at + pos as u64,
                name(kind)
            ));
        }
        let inner = &body[pos + hdr as usize..pos + size as usize];
        walk(&k, inner, at + pos as u64 + hdr, depth + 1, info, t)?;
        if k == *b"stsz" {
            sample_sizes(inner, at + pos as u64 + hdr, info.file_len)?;
        }
        pos += size as usize;
    }
    if is_trak && own.sound && info.priming.is_none() {
        if let (Some(m), Some(ts)) = (own.media_time, own.timescale) {
            if m > 0 && ts > 0 {
                info.priming = Some((m, ts));
            }
        }
    }
    Ok(())
}

/// What box `kind` tells about its track: sound or not, the timescale,
/// where the presentation starts.
fn track_box(kind: &[u8; 4], body: &[u8], track: &mut Track) {
    match kind {
        b"hdlr" => track.sound |= body.get(8..12) == Some(b"soun"),
        b"mdhd" => {
            let v = body.first().copied().unwrap_or(0);
            track.timescale = if v == 1 {
                u32be(body, 20)
            } else {
                u32be(body, 12)
            };
        }
        b"elst" => {
            if let Some(m) = first_media_time(body) {
                track.media_time = Some(m);
            }
        }
        _ => {}
    }
}

/// The media time of an edit list's first edit that is not empty (an
/// empty edit has media time -1): where the presentation starts.
fn first_media_time(body: &[u8]) -> Option<u64> {
    let v = body.first().copied().unwrap_or(0);
    let n = u32be(body, 4).unwrap_or(0) as usize;
    let w = if v == 1 { 20 } else { 12 };
    for i in 0..n {
        let e = 8 + i * w;
        let mt = if v == 1 {
            u64be(body, e + 8).map(|m| m as i64)
        } else {
            u32be(body, e + 4).map(|m| m as i32 as i64)
        };
        match mt {
            Some(m) if m >= 0 => return Some(m as u64),
            Some(_) => continue,
            None => return None,
        }
    }
    None
}

/// A sample table's entry count must fit in its box.
fn table(kind: &[u8; 4], body: &[u8], at: u64) -> Result<(), String> {
    let v = body.first().copied().unwrap_or(0);
    // (offset of the count, bytes per entry)
    let (count_at, entry) = match kind {
        b"stco" | b"stss" => (4, 4),
        b"co64" | b"stts" | b"ctts" => (4, 8),
        b"stsc" => (4, 12),
        b"elst" => (4, if v == 1 { 20 } else { 12 }),
        b"stsz" => {
            // A constant sample size means no table follows the count.
            if u32be(body, 4).unwrap_or(0) != 0 {
                return Ok(());
            }
            (8, 4)
        }
        _ => return Ok(()),
    };
    let Some(count) = u32be(body, count_at) else {
        return Err(format!("box '{}' at byte {at} is cut short", name(kind)));
    };
    let room = body.len().saturating_sub(count_at + 4) as u64;
    if count as u64 * entry > room {
        return Err(format!(
            "box '{}' at byte {at} counts {count} entries of {entry} bytes, but holds only \
             {room} bytes",
            name(kind)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut v = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(kind);
        v.extend_from_slice(body);
        v
    }

    fn full(count: u32, entries: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 0, 0];
        v.extend_from_slice(&count.to_be_bytes());
        v.extend_from_slice(entries);
        v
    }

    fn file(stbl_child: Vec<u8>, elst: Option<i32>) -> Vec<u8> {
        let mut hdlr = vec![0u8; 8];
        hdlr.extend_from_slice(b"soun");
        hdlr.extend_from_slice(&[0u8; 12]);
        let mut mdhd = vec![0u8; 12];
        mdhd.extend_from_slice(&44100u32.to_be_bytes());
        mdhd.extend_from_slice(&[0u8; 8]);
        let stbl = bx(b"stbl", &stbl_child);
        let minf = bx(b"minf", &stbl);
        let mut mdia_body = bx(b"mdhd", &mdhd);
        mdia_body.extend(bx(b"hdlr", &hdlr));
        mdia_body.extend(minf);
        let mut trak_body = Vec::new();
        if let Some(m) = elst {
            let mut e = vec![0u8; 4];
            e.extend_from_slice(&m.to_be_bytes());
            e.extend_from_slice(&[0, 1, 0, 0]);
            trak_body.extend(bx(b"edts", &bx(b"elst", &full(1, &e))));
        }
        trak_body.extend(bx(b"mdia", &mdia_body));
        let moov = bx(b"moov", &bx(b"trak", &trak_body));
        let mut f = bx(b"ftyp", b"M4A \0\0\0\0");
        f.extend(moov);
        f.extend(bx(b"mdat", &[0u8; 32]));
        f
    }

    #[test]
    fn sample_tables_must_hold_their_counts() {
        let ok = file(bx(b"stco", &full(2, &[0u8; 8])), Some(1024));
        let len = ok.len() as u64;
        let info = mp4(&mut Cursor::new(ok), 0, len).unwrap();
        assert_eq!(info.priming, Some((1024, 44100)));
        for kind in [b"stco", b"stsc", b"stts", b"co64", b"ctts"] {
            let bad = file(bx(kind, &full(u32::MAX, &[0u8; 8])), None);
            let len = bad.len() as u64;
            let e = mp4(&mut Cursor::new(bad), 0, len).unwrap_err();
            assert!(e.contains("4294967295 entries"), "{e}");
        }
        let mut stsz = vec![0u8; 8];
        stsz.extend_from_slice(&u32::MAX.to_be_bytes());
        let bad = file(bx(b"stsz", &stsz), None);
        let len = bad.len() as u64;
        assert!(mp4(&mut Cursor::new(bad), 0, len).is_err());
        // A constant sample size needs no table.
        let mut stsz = vec![0u8; 4];
        stsz.extend_from_slice(&1u32.to_be_bytes());
        stsz.extend_from_slice(&u32::MAX.to_be_bytes());
        let fine = file(bx(b"stsz", &stsz), Some(-1));
        let len = fine.len() as u64;
        assert_eq!(mp4(&mut Cursor::new(fine), 0, len).unwrap().priming, None);
    }

    #[test]
    fn markers_are_found_past_leading_junk() {
        let mut f = vec![0x11u8; 29];
        f.extend(file(bx(b"stts", &full(u32::MAX, &[0u8; 8])), None));
        assert_eq!(locate(&f), Some(Found::Mp4(29)));
        let len = f.len() as u64;
        assert!(mp4(&mut Cursor::new(f), 29, len).is_err());
        let mut id3 = b"ID3\x04\0\0\0\0\0\x05RIFFxfLaC".to_vec();
        id3.extend_from_slice(b"zzzz");
        assert_eq!(locate(&id3), Some(Found::Flac(15)));
        assert_eq!(locate(b"\x01\x02OggSfLaC"), Some(Found::Ogg(2)));
        assert_eq!(locate(b"\x00\xFF\xFB\x90fLaC"), None);
    }

    #[test]
    fn boxes_must_lie_inside_their_parents() {
        let mut f = file(bx(b"stco", &full(0, &[])), None);
        // Grow the moov's size field past the end of the file.
        let at = f.windows(4).position(|w| w == b"moov").unwrap() - 4;
        f[at..at + 4].copy_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
        let len = f.len() as u64;
        let e = mp4(&mut Cursor::new(f), 0, len).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
    }

    #[test]
    fn flac_block_lengths_must_fit() {
        let mut f = b"fLaC".to_vec();
        // STREAMINFO (34 bytes), then a PICTURE whose MIME length is huge.
        f.extend_from_slice(&[0, 0, 0, 34]);
        f.extend_from_slice(&[0u8; 34]);
        let mut pic = 3u32.to_be_bytes().to_vec();
        pic.extend_from_slice(&u32::MAX.to_be_bytes());
        pic.extend_from_slice(&[0u8; 24]);
        f.push(0x80 | 6);
        f.extend_from_slice(&(pic.len() as u32).to_be_bytes()[1..]);
        f.extend_from_slice(&pic);
        let len = f.len() as u64;
        let e = flac(&mut Cursor::new(f.clone()), 0, len).unwrap_err();
        assert!(e.contains("MIME type length of 4294967295"), "{e}");
        // The same with sane lengths passes.
        let at = 4 + 4 + 34 + 4 + 4;
        f[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
        assert!(flac(&mut Cursor::new(f), 0, len).is_ok());
    }

    /// One Ogg page holding `packets` (each under 255 bytes), checksummed.
    fn ogg_page(packets: &[&[u8]]) -> Vec<u8> {
        let mut p = b"OggS\0\x02".to_vec();
        p.extend_from_slice(&[0u8; 8]); // granule
        p.extend_from_slice(&7u32.to_le_bytes()); // serial
        p.extend_from_slice(&0u32.to_le_bytes()); // sequence
        p.extend_from_slice(&[0u8; 4]); // checksum
        p.push(packets.len() as u8);
        for k in packets {
            p.push(k.len() as u8);
        }
        for k in packets {
            p.extend_from_slice(k);
        }
        let crc = ogg_crc(&[&p]);
        p[22..26].copy_from_slice(&crc.to_le_bytes());
        p
    }

    #[test]
    fn ogg_comment_lengths_must_fit_their_packet() {
        let mut c = b"\x03vorbis".to_vec();
        c.extend_from_slice(&3u32.to_le_bytes());
        c.extend_from_slice(b"lib");
        c.extend_from_slice(&1u32.to_le_bytes());
        c.extend_from_slice(&5u32.to_le_bytes());
        c.extend_from_slice(b"A=bcd");
        let good = ogg_page(&[b"\x01vorbis", &c]);
        let len = good.len() as u64;
        assert!(ogg(&mut Cursor::new(good), 0, len).is_ok());
        let at = c.len() - 9;
        c[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let bad = ogg_page(&[b"\x01vorbis", &c]);
        let len = bad.len() as u64;
        let e = ogg(&mut Cursor::new(bad.clone()), 0, len).unwrap_err();
        assert!(e.contains("comment length of 4294967295"), "{e}");
        // A page whose checksum fails is skipped, as the demuxer skips it.
        let mut broken = bad;
        broken[22] ^= 1;
        assert!(ogg(&mut Cursor::new(broken), 0, len).is_ok());
    }

    fn wav_head(riff: u32, ch: u16, sr: u32, bits: u16, data: u32) -> Vec<u8> {
        let mut h = b"RIFF".to_vec();
        h.extend_from_slice(&riff.to_le_bytes());
        h.extend_from_slice(b"WAVEfmt ");
        h.extend_from_slice(&16u32.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&ch.to_le_bytes());
        h.extend_from_slice(&sr.to_le_bytes());
        h.extend_from_slice(&(sr.wrapping_mul(4)).to_le_bytes());
        h.extend_from_slice(&(ch.max(1) * 2).to_le_bytes());
        h.extend_from_slice(&bits.to_le_bytes());
        h.extend_from_slice(b"data");
        h.extend_from_slice(&data.to_le_bytes());
        h
    }

    #[test]
    fn wav_sizes_are_repaired_and_fields_checked() {
        let h = wav_head(0, 2, 44100, 16, 0);
        // 44-byte header plus 1001 bytes of samples: 250 whole frames.
        let (p, declared) = wav(&h, 44 + 1001).unwrap();
        assert_eq!(
            p,
            vec![
                Patch {
                    at: 4,
                    bytes: 1037u32.to_le_bytes()
                },
                Patch {
                    at: 40,
                    bytes: 1000u32.to_le_bytes()
                }
            ]
        );
        // a size of 0 is a streaming placeholder, not a declaration
        assert_eq!(declared, None);
        let (p, declared) = wav(&wav_head(36 + 400, 2, 44100, 16, 400), 444).unwrap();
        assert!(p.is_empty());
        assert_eq!(declared, Some(100)); // 400 bytes of 4-byte frames
                                         // a data chunk that declares more than the file holds: repaired to
                                         // what is there, the declaration kept (the file is cut short)
        let (p, declared) = wav(&wav_head(36 + 4000, 2, 44100, 16, 4000), 444).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(declared, Some(1000));
        let e = wav(&wav_head(36, 2, u32::MAX, 16, 0), 44).unwrap_err();
        assert!(e.contains("sample_rate=4294967295"), "{e}");
        assert!(wav(&wav_head(36, 0, 8000, 16, 0), 44).is_err());
        assert!(wav(&wav_head(36, 2, 8000, 0, 0), 44).is_err());
    }
}
