//! A direct reader for plain PCM WAV files: 16-, 24- and 32-bit integer and
//! 32-bit float samples, read in blocks straight into the channel mapping
//! and the resampler of [`Sink`], without symphonia's per-sample packet
//! buffers.
//!
//! The samples are those symphonia gives: integers over 2^(bits-1), which
//! is exact in float32 for 16 and 24 bits and rounds once for 32 bits. Any
//! other layout (8-bit, 64-bit float, compressed tags, an extensible header
//! whose valid bits differ from its container, a header the guard had to
//! repair) returns `None`, and symphonia decodes the file as before.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::{dec_err, Decoded, Media, Sink, Window};
use crate::error::Result;
use crate::parallel::Cancel;

/// Frames converted per block: small enough to stay in cache.
const BLOCK_FRAMES: usize = 16384;

/// How the samples of the data chunk are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    I16,
    I24,
    I32,
    F32,
}

impl Layout {
    fn width(self) -> usize {
        match self {
            Layout::I16 => 2,
            Layout::I24 => 3,
            Layout::I32 | Layout::F32 => 4,
        }
    }
}

/// What the header of a plain PCM file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    layout: Layout,
    channels: usize,
    sr: u32,
    /// Byte offset of the first sample (from the start of the file).
    data_at: u64,
    /// Whole frames in the data chunk.
    frames: u64,
}

fn u16le(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32le(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The layout a `fmt ` chunk body describes, when this reader takes it.
fn layout_of(fmt: &[u8]) -> Option<(Layout, usize, u32)> {
    let mut tag = u16le(fmt, 0)?;
    let channels = u16le(fmt, 2)? as usize;
    let sr = u32le(fmt, 4)?;
    let align = u16le(fmt, 12)? as usize;
    let bits = u16le(fmt, 14)?;
    if tag == 0xFFFE {
        // WAVE_FORMAT_EXTENSIBLE: valid bits at 18, sub-format GUID at 24
        // (its first two bytes are the plain tag).
        if u16le(fmt, 18)? != bits {
            return None;
        }
        tag = u16le(fmt, 24)?;
    }
    let layout = match (tag, bits) {
        (1, 16) => Layout::I16,
        (1, 24) => Layout::I24,
        (1, 32) => Layout::I32,
        (3, 32) => Layout::F32,
        _ => return None,
    };
    (channels > 0 && align == channels * layout.width()).then_some((layout, channels, sr))
}

/// The header of a plain PCM file whose RIFF header starts `head` (of a
/// file of `len` bytes starting at `at`), when every chunk up to the data is
/// in `head` and the data chunk's size fits the file.
fn header(head: &[u8], at: u64, len: u64) -> Option<Header> {
    let mut fmt = None;
    let mut pos = 12usize;
    while pos + 8 <= head.len() {
        let id = &head[pos..pos + 4];
        let size = u32le(head, pos + 4)? as usize;
        let body = pos + 8;
        if id == b"fmt " {
            fmt = Some(layout_of(head.get(body..body + size)?)?);
        } else if id == b"data" {
            let (layout, channels, sr) = fmt?;
            let data_at = at + body as u64;
            if size == 0 || size as u64 > len.checked_sub(data_at)? {
                return None;
            }
            let frames = size as u64 / (channels * layout.width()) as u64;
            return Some(Header {
                layout,
                channels,
                sr,
                data_at,
                frames,
            });
        }
        pos = body.checked_add(size)?.checked_add(size & 1)?;
    }
    None
}

/// Interleaved samples of `bytes` as float32, appended to `out` (cleared).
fn convert(layout: Layout, bytes: &[u8], out: &mut Vec<f32>) {
    out.clear();
    crate::fastmath::vectorized(
        #[inline(always)]
        || match layout {
            Layout::I16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32_768.0),
            ),
            Layout::I24 => out.extend(
                bytes
                    .chunks_exact(3)
                    .map(|b| (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as f32 / 8_388_608.0),
            ),
            Layout::I32 => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32 / 2_147_483_648.0),
            ),
            Layout::F32 => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        },
    );
}

/// Decode a plain PCM WAV file whose RIFF header is at byte `at` of
/// `media` (`head` its first bytes from `at`), or `None` when this reader
/// does not take its layout.
pub(super) fn decode(
    path: &Path,
    media: &Media,
    head: &[u8],
    at: u64,
    p: &super::DecodeParams,
    cancel: &Cancel,
) -> Result<Option<Decoded>> {
    let Some(h) = header(head, at, media.len()) else {
        return Ok(None);
    };
    super::check_header_rate(path, h.sr)?;
    let win = Window::new(p, h.sr);
    let start = win.start.min(h.frames);
    let end = win.end.map_or(h.frames, |e| e.min(h.frames)).max(start);
    let truncated = win.capped && win.end.is_some_and(|e| e <= h.frames);
    let mut sink = Sink::new(path, p, h.sr, h.channels, Some(end - start))?;
    let frame_bytes = h.channels * h.layout.width();
    let mut r = media.reader().map_err(|e| dec_err(path, e))?;
    r.seek(SeekFrom::Start(h.data_at + start * frame_bytes as u64))
        .map_err(|e| dec_err(path, e))?;
    let mut bytes = vec![0u8; BLOCK_FRAMES * frame_bytes];
    let mut samples = Vec::with_capacity(BLOCK_FRAMES * h.channels);
    let mut left = end - start;
    while left > 0 {
        cancel.check()?;
        let n = (left as usize).min(BLOCK_FRAMES);
        let buf = &mut bytes[..n * frame_bytes];
        r.read_exact(buf).map_err(|e| dec_err(path, e))?;
        convert(h.layout, buf, &mut samples);
        sink.push_interleaved(&samples)?;
        left -= n as u64;
    }
    Ok(Some(Decoded {
        channels: sink.finish()?,
        sr: p.sr.unwrap_or(h.sr),
        source_sr: h.sr,
        source_channels: h.channels,
        source_frames: Some(h.frames),
        truncated,
        corrupt_frames: 0,
        levels: [0.0; 4],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn riff(fmt: &[u8], data: &[u8]) -> Vec<u8> {
        let mut v = b"RIFF\0\0\0\0WAVE".to_vec();
        v.extend_from_slice(b"fmt ");
        v.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
        v.extend_from_slice(fmt);
        v.extend_from_slice(b"data");
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    fn fmt(tag: u16, ch: u16, sr: u32, bits: u16) -> Vec<u8> {
        let align = ch * bits / 8;
        let mut f = Vec::new();
        f.extend_from_slice(&tag.to_le_bytes());
        f.extend_from_slice(&ch.to_le_bytes());
        f.extend_from_slice(&sr.to_le_bytes());
        f.extend_from_slice(&(sr * align as u32).to_le_bytes());
        f.extend_from_slice(&align.to_le_bytes());
        f.extend_from_slice(&bits.to_le_bytes());
        f
    }

    #[test]
    fn header_takes_plain_pcm_and_leaves_the_rest() {
        let f = riff(&fmt(1, 2, 8000, 16), &[0u8; 40]);
        let h = header(&f, 0, f.len() as u64).unwrap();
        assert_eq!(
            (h.layout, h.channels, h.sr, h.frames),
            (Layout::I16, 2, 8000, 10)
        );
        assert_eq!(h.data_at, 44);
        // 8-bit, 64-bit float and ADPCM go to symphonia.
        for (tag, bits) in [(1, 8), (3, 64), (2, 4)] {
            let f = riff(&fmt(tag, 1, 8000, bits), &[0u8; 16]);
            assert!(header(&f, 0, f.len() as u64).is_none(), "{tag} {bits}");
        }
        // A data chunk larger than the file is the guard's case.
        let f = riff(&fmt(1, 1, 8000, 16), &[0u8; 8]);
        assert!(header(&f, 0, f.len() as u64 - 2).is_none());
    }

    #[test]
    fn samples_are_symphonias() {
        let mut out = Vec::new();
        convert(Layout::I16, &[0x00, 0x80, 0xFF, 0x7F, 0x01, 0x00], &mut out);
        assert_eq!(out, [-1.0, 32767.0 / 32768.0, 1.0 / 32768.0]);
        convert(Layout::I24, &[0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF], &mut out);
        assert_eq!(out, [-1.0, -1.0 / 8_388_608.0]);
        convert(Layout::I32, &[0x00, 0x00, 0x00, 0x80], &mut out);
        assert_eq!(out, [-1.0]);
        convert(Layout::F32, &0.25f32.to_le_bytes(), &mut out);
        assert_eq!(out, [0.25]);
    }
}
