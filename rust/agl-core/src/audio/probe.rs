//! A file's length from its header, without decoding the stream: what
//! `get_duration(path=...)` needs. The answer is given only where the
//! header states the length exactly and libsndfile (what librosa reads a
//! path with) states the same: WAV and FLAC (their sample counts), Ogg
//! Vorbis (the last page's granule position) and MP3 with a Xing/Info tag
//! that records the frame count (less the LAME/Lavc encoder delay and
//! padding). Otherwise the length is `None` and the caller decodes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use symphonia::core::codecs::{CODEC_TYPE_FLAC, CODEC_TYPE_NULL, CODEC_TYPE_VORBIS};
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use super::{check_header_rate, dec_err, guard, mp3, probe_reason, Media, Source, HEAD, PROBE};
use crate::error::Result;

/// What a header says about a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sample rate in Hz.
    pub sr: u32,
    /// Channels.
    pub channels: usize,
    /// Frames (samples per channel), when the header states them exactly;
    /// `None` when only decoding tells.
    pub frames: Option<u64>,
}

/// Read the header of `src`. Malformed headers are [`crate::AglError::Decode`]
/// errors (decoder panics included); a format this probe does not answer for
/// gives a [`Header`] with `frames: None` (and `sr: 0`, `channels: 0` when
/// not even those were read).
pub fn probe_source(src: &Source) -> Result<Header> {
    let label = src.label();
    match catch_unwind(AssertUnwindSafe(|| probe_inner(src, &label))) {
        Ok(r) => r,
        Err(_) => Err(dec_err(&label, "the decoder failed on malformed data")),
    }
}

const UNKNOWN: Header = Header {
    sr: 0,
    channels: 0,
    frames: None,
};

fn probe_inner(src: &Source, path: &Path) -> Result<Header> {
    let media = src.open()?;
    if media.len() == 0 {
        return Err(dec_err(path, "empty file (0 bytes)"));
    }
    let mut head = media.head(HEAD).map_err(|e| dec_err(path, e))?;
    let mut found = guard::locate(&head);
    if found.is_none() && media.len() > HEAD as u64 {
        head = media.head(PROBE).map_err(|e| dec_err(path, e))?;
        found = guard::locate(&head);
    }
    let hint = src.hint();
    match found {
        Some(guard::Found::Wav(at)) => {
            let (patches, _) =
                guard::wav(&head[at..], media.len() - at as u64).map_err(|e| dec_err(path, e))?;
            if !patches.is_empty() {
                // Sizes that disagree with the file: what a reader makes of
                // them differs between readers; decoding tells.
                return Ok(UNKNOWN);
            }
            symphonia_header(path, &media, hint.as_deref(), |_| true)
        }
        Some(guard::Found::Flac(at)) => {
            let mut r = media.reader().map_err(|e| dec_err(path, e))?;
            guard::flac(&mut r, at as u64, media.len()).map_err(|e| dec_err(path, e))?;
            symphonia_header(path, &media, hint.as_deref(), |c| c == CODEC_TYPE_FLAC)
        }
        Some(guard::Found::Ogg(at)) => {
            let mut r = media.reader().map_err(|e| dec_err(path, e))?;
            guard::ogg(&mut r, at as u64, media.len()).map_err(|e| dec_err(path, e))?;
            symphonia_header(path, &media, hint.as_deref(), |c| c == CODEC_TYPE_VORBIS)
        }
        Some(guard::Found::Mp4(_)) => Ok(UNKNOWN),
        None if mp3::claims(hint.as_deref(), &head) => mp3_header(path, &media),
        None => Ok(UNKNOWN),
    }
}

/// The first audio track's parameters, through symphonia's format reader
/// (headers only, no packet decoded). The frame count is kept only for the
/// codecs `exact` accepts.
fn symphonia_header(
    path: &Path,
    media: &Media,
    ext: Option<&str>,
    exact: impl Fn(symphonia::core::codecs::CodecType) -> bool,
) -> Result<Header> {
    let reader = media.reader().map_err(|e| dec_err(path, e))?;
    let mss = MediaSourceStream::new(reader, Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = ext {
        hint.with_extension(ext);
    }
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            mss,
            &FormatOptions {
                enable_gapless: true,
                ..Default::default()
            },
            &MetadataOptions::default(),
        )
        .map_err(|e| dec_err(path, probe_reason(&e, media)))?;
    let Some(track) = probed
        .format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
    else {
        return Err(dec_err(path, "no audio track"));
    };
    let cp = &track.codec_params;
    let sr = cp
        .sample_rate
        .filter(|&r| r > 0)
        .ok_or_else(|| dec_err(path, "the stream has no sample rate"))?;
    check_header_rate(path, sr)?;
    let channels = cp.channels.map_or(0, |c| c.count());
    let frames = cp.n_frames.filter(|_| exact(cp.codec) && channels > 0);
    Ok(Header {
        sr,
        channels,
        frames,
    })
}

/// An MP3 stream's length from its Xing/Info tag (reading the first frames
/// only), less the encoder delay and padding its LAME/Lavc extension
/// records; `None` without a tag that counts the frames.
fn mp3_header(path: &Path, media: &Media) -> Result<Header> {
    let file = media.reader().map_err(|e| dec_err(path, e))?;
    let opts = nanomp3::Options::default().skip_scan(true);
    let reader =
        nanomp3::Reader::<_, f32>::with_options(file, opts).map_err(|e| dec_err(path, e))?;
    let (Some(layout), sr) = (reader.channels(), reader.sample_rate()) else {
        return Ok(UNKNOWN);
    };
    if sr == 0 {
        return Ok(UNKNOWN);
    }
    check_header_rate(path, sr)?;
    let frames = if reader.has_vbr_tag() {
        reader.total_samples()
    } else {
        None
    };
    Ok(Header {
        sr,
        channels: layout.num() as usize,
        frames,
    })
}
