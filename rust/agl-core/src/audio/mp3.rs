//! MP3 through `nanomp3`, a safe Rust port of minimp3 (float output): about
//! 1.3 times the speed of symphonia's decoder on 44.1 kHz stereo.
//!
//! The reader trims the encoder delay and padding given by the LAME/Xing
//! (or Lavc) tag, plus the 529-sample decoder delay, so lengths match
//! ffmpeg's; it seeks to the exact sample, decoding the frames before the
//! target that the bit reservoir needs. Corrupt frames are skipped, as in
//! ffmpeg.

use std::path::Path;

use super::{dec_err, Concealer, DecodeParams, Decoded, Media, Sink, Window};
use crate::error::Result;
use crate::parallel::Cancel;

/// Largest plausible number of frames per byte of MP3 (8 kbit/s at 8 kHz
/// gives 8): caps the length a tag may claim before the output is sized.
const MAX_FRAMES_PER_BYTE: u64 = 16;

/// Whether the MP3 path is tried first: the format hint (a file's
/// extension) says MPEG audio (`mp3`, `mpga`), or, without a hint, the
/// bytes start with an ID3 tag or an MPEG layer I-III frame sync.
pub(super) fn claims(hint: Option<&str>, head: &[u8]) -> bool {
    match hint {
        Some(e) => e.eq_ignore_ascii_case("mp3") || e.eq_ignore_ascii_case("mpga"),
        None => {
            head.starts_with(b"ID3")
                || (head.len() >= 2
                    && head[0] == 0xFF
                    && head[1] & 0xE0 == 0xE0
                    && head[1] & 0x06 != 0)
        }
    }
}

/// Decode an MP3 file; `Ok(None)` when it holds no MPEG audio frame at all,
/// or its format changes mid-stream (the caller then probes the other
/// formats).
pub(super) fn decode(
    path: &Path,
    media: &Media,
    p: &DecodeParams,
    cancel: &Cancel,
) -> Result<Option<Decoded>> {
    let file = media.reader().map_err(|e| dec_err(path, e))?;
    let file_len = Some(media.len());
    let mut reader = nanomp3::Reader::<_, f32>::new(file).map_err(|e| dec_err(path, e))?;
    let (Some(layout), source_sr) = (reader.channels(), reader.sample_rate()) else {
        return Ok(None);
    };
    if source_sr == 0 {
        return Ok(None);
    }
    let src_ch = layout.num() as usize;
    let announced = reader.total_samples();
    let total = match (announced, file_len) {
        (Some(t), Some(len)) => Some(t.min(len.saturating_mul(MAX_FRAMES_PER_BYTE))),
        (t, _) => t,
    };
    let win = Window::new(p, source_sr);
    if win.start > 0 {
        reader.seek(win.start).map_err(|e| dec_err(path, e))?;
    }
    let mut sink = Sink::new(path, p, source_sr, src_ch, win.expected(total))?;
    let mut pos = win.start;
    let mut truncated = false;
    let mut conceal = Concealer::default();
    loop {
        cancel.check()?;
        let frame = match reader.read_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            // The reader reports a frame it cannot decode as a format change.
            // At the announced length that is trailing junk or a cut-off last
            // frame: the stream is complete. Earlier, the stream really
            // changes rate or layer, which the general path handles.
            Err(nanomp3::Error::FormatChanged) if announced.is_some_and(|t| pos >= t) => break,
            Err(nanomp3::Error::FormatChanged) => return Ok(None),
            Err(e) => return Err(dec_err(path, e)),
        };
        if frame.len() % src_ch != 0 {
            return Err(dec_err(path, "the channel count changed mid-stream"));
        }
        let mut n = frame.len() / src_ch;
        let mut done = false;
        if let Some(e) = win.end {
            let room = e.saturating_sub(pos);
            if n as u64 >= room {
                n = room as usize;
                done = true;
                truncated = win.capped;
            }
        }
        sink.push_interleaved(conceal.pass(&frame[..n * src_ch]))?;
        pos += n as u64;
        if done {
            break;
        }
    }
    Ok(Some(Decoded {
        channels: sink.finish()?,
        sr: p.sr.unwrap_or(source_sr),
        source_sr,
        source_channels: src_ch,
        source_frames: announced,
        truncated,
        corrupt_frames: conceal.count,
        levels: [0.0; 4],
    }))
}
