//! Audio file decoding: MP3 (gapless, from the LAME/Xing header) through
//! the minimp3-derived decoder of [`nanomp3`], and FLAC, WAV (PCM
//! 8/16/24/32-bit and float), Ogg Vorbis and AAC in MP4/M4A (and MP3 that
//! path does not take) through symphonia, to float32, with channel
//! selection or downmix and streaming resampling. Plain PCM WAV (16/24/32-bit
//! integer, 32-bit float) is read directly in blocks (module `wav`).
//!
//! Files are decoded frame by frame; each frame goes through the channel
//! mapping and the [`Resampler`] at once, so only the output is held in
//! memory, sized once from the stream length when the header gives it.
//! `offset` and `duration` read the same frames as the full decode, to the
//! sample: WAV and MP3 seek directly, the other formats as module `seek`
//! describes; `duration` and `max_duration` stop decoding early.

use std::fs::File;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use symphonia::core::errors::Error as SymError;
use symphonia::core::io::MediaSource;

use crate::error::{try_grow, AglError, Result};
use crate::parallel::{install, Cancel};
use crate::resample::{Quality, Resampler, MAX_SAMPLE_RATE};

mod aiff;
pub mod guard;
mod mkv;
mod mp3;
pub mod opus;
pub mod probe;
mod seek;
mod sym;
mod wav;

/// Where a file's encoded bytes come from.
/// Bytes of uncompressed PCM whose decoding costs about as much as one
/// input sample of a spectral kernel (a 16-bit WAV decodes at about
/// 1.8 GB/s on one core, an STFT takes about 150,000 samples per ms).
pub const PCM_BYTES_PER_WORK: usize = 16;

#[derive(Debug, Clone)]
pub enum Source {
    /// A file on disk, read as it is decoded.
    Path(PathBuf),
    /// A whole file in memory (what an object store or a distributed engine
    /// hands over). `name` names it in messages; `hint` is a format hint
    /// such as `"mp3"` or `"flac"` (the content decides when there is none).
    Bytes {
        data: Arc<[u8]>,
        name: String,
        hint: Option<String>,
    },
}

impl Source {
    /// What messages call it: the path, or the given name.
    pub fn label(&self) -> PathBuf {
        match self {
            Source::Path(p) => p.clone(),
            Source::Bytes { name, .. } => PathBuf::from(name),
        }
    }

    /// The format hint: the given one, else the path's extension.
    fn hint(&self) -> Option<String> {
        match self {
            Source::Path(p) => p.extension().and_then(|e| e.to_str()).map(str::to_owned),
            Source::Bytes { hint, .. } => hint.clone(),
        }
    }

    /// Rough decoding work in the units of a kernel's input samples: the
    /// encoded size in bytes, or a [`PCM_BYTES_PER_WORK`]th of it for
    /// uncompressed PCM (WAV, AIFF), which decodes at memory speed. A
    /// source that cannot be opened counts 0 (decoding reports it).
    pub fn decode_work(&self) -> usize {
        let mut head = [0u8; 12];
        let (len, n) = match self {
            Source::Path(p) => match open_regular(p) {
                Ok((mut f, len)) => (len as usize, f.read(&mut head).unwrap_or(0)),
                Err(_) => return 0,
            },
            Source::Bytes { data, .. } => {
                let n = data.len().min(head.len());
                head[..n].copy_from_slice(&data[..n]);
                (data.len(), n)
            }
        };
        let head = &head[..n];
        if guard::is_wav(head) || aiff::is_aiff(head) {
            len / PCM_BYTES_PER_WORK
        } else {
            len
        }
    }

    /// Encoded bytes to read: the file itself, or the buffer.
    fn open(&self) -> Result<Media> {
        match self {
            Source::Path(p) => {
                let (_, len) = open_regular(p)?;
                Ok(Media::File(p.clone(), len))
            }
            Source::Bytes { data, .. } => Ok(Media::Mem(data.clone())),
        }
    }
}

/// What a file type is called in messages ("not a regular file (FIFO)").
fn file_kind(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    if t.is_dir() {
        "directory"
    } else {
        "special file"
    }
}

/// Open `path` for reading only when it is a regular file (after links),
/// with its length. The open does not block on a FIFO (`O_NONBLOCK`), and
/// the type is checked on the opened handle, so a path swapped for a
/// device or a FIFO between a check and the open is still refused. A
/// missing file is [`AglError::NotFound`]; anything else that is not a
/// regular file is a decode error naming its kind.
fn open_regular(path: &Path) -> Result<(File, u64)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let f = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AglError::NotFound {
                path: path.display().to_string(),
            })
        }
        Err(e) => {
            // Opening a directory for reading succeeds on some systems and
            // fails (EISDIR) on others: name the kind either way.
            if let Ok(m) = std::fs::metadata(path) {
                if !m.is_file() {
                    let kind = file_kind(m.file_type());
                    return Err(dec_err(path, format!("not a regular file ({kind})")));
                }
            }
            return Err(dec_err(path, e));
        }
    };
    let m = f.metadata().map_err(|e| dec_err(path, e))?;
    if !m.is_file() {
        let kind = file_kind(m.file_type());
        return Err(dec_err(path, format!("not a regular file ({kind})")));
    }
    #[cfg(unix)]
    {
        // Reads of a regular file block as usual; clear the flag again.
        use std::os::unix::io::AsRawFd;
        let fd = f.as_raw_fd();
        // SAFETY: `fd` is the open descriptor `f` owns for this whole block;
        // F_GETFL/F_SETFL only read and set its status flags.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok((f, m.len()))
}

/// Opened encoded bytes; each decoder attempt gets its own reader.
#[derive(Clone)]
enum Media {
    File(PathBuf, u64),
    Mem(Arc<[u8]>),
}

impl Media {
    fn len(&self) -> u64 {
        match self {
            Media::File(_, n) => *n,
            Media::Mem(d) => d.len() as u64,
        }
    }

    fn reader(&self) -> std::io::Result<Box<dyn MediaSource>> {
        Ok(match self {
            Media::File(p, _) => Box::new(reopen(p)?),
            Media::Mem(d) => Box::new(std::io::Cursor::new(d.clone())),
        })
    }

    /// The first `n` bytes (fewer when the input is shorter).
    fn head(&self, n: usize) -> std::io::Result<Vec<u8>> {
        match self {
            Media::Mem(d) => Ok(d[..n.min(d.len())].to_vec()),
            Media::File(p, _) => {
                let mut buf = Vec::with_capacity(n);
                reopen(p)?.take(n as u64).read_to_end(&mut buf)?;
                Ok(buf)
            }
        }
    }

    /// All the bytes in memory, with `patches` applied.
    fn patched(&self, patches: &[guard::Patch]) -> std::io::Result<Media> {
        let mut data = match self {
            Media::Mem(d) => d.to_vec(),
            Media::File(p, n) => {
                let mut buf = Vec::new();
                buf.try_reserve_exact(*n as usize)
                    .map_err(|_| std::io::Error::other("cannot allocate the file in memory"))?;
                reopen(p)?.take(*n).read_to_end(&mut buf)?;
                buf
            }
        };
        guard::apply(&mut data, patches);
        Ok(Media::Mem(data.into()))
    }
}

/// Open a file [`Source::open`] has already checked once more, through the
/// same regular-file check, for one more reader.
fn reopen(p: &Path) -> std::io::Result<File> {
    open_regular(p)
        .map(|(f, _)| f)
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Lossy decoders can turn a damaged frame into samples far beyond full
/// scale (1e8 and more). A frame whose peak passes this level (24 dB above
/// full scale; a real encode of full-scale audio overshoots by a few dB at
/// most) is replaced by silence of the same length and counted in
/// [`Decoded::corrupt_frames`].
pub const CORRUPT_LEVEL: f32 = 16.0;

/// Lossy frames replaced by silence (see [`CORRUPT_LEVEL`]), with the
/// buffer the silence is taken from.
#[derive(Default)]
struct Concealer {
    count: u64,
    silence: Vec<f32>,
}

impl Concealer {
    /// `frame`, or silence of its length when it is damaged.
    fn pass<'a>(&'a mut self, frame: &'a [f32]) -> &'a [f32] {
        if !damaged(frame) {
            return frame;
        }
        self.count += 1;
        self.silence.clear();
        self.silence.resize(frame.len(), 0.0);
        &self.silence
    }
}

/// Whether a decoded lossy frame is damaged (see [`CORRUPT_LEVEL`]): a
/// sample beyond it, or not finite.
#[inline]
fn damaged(x: &[f32]) -> bool {
    // One pass: the peak of |x| (max skips NaN) and a sum of `v * 0`, which
    // is NaN exactly when a sample is NaN or infinite.
    #[inline(always)]
    fn scan(x: &[f32]) -> (f32, f32) {
        let (mut m, mut z) = ([0f32; 16], [0f32; 16]);
        let mut chunks = x.chunks_exact(16);
        for c in &mut chunks {
            for j in 0..16 {
                m[j] = m[j].max(c[j].abs());
                z[j] += c[j] * 0.0;
            }
        }
        let r = chunks.remainder();
        let peak = r.iter().fold(0f32, |a, v| a.max(v.abs()));
        let zero: f32 = r.iter().map(|v| v * 0.0).sum();
        (
            m.iter().fold(peak, |a, &b| a.max(b)),
            z.iter().sum::<f32>() + zero,
        )
    }
    let (peak, zero) = crate::fastmath::vectorized(
        #[inline(always)]
        || scan(x),
    );
    !(peak <= CORRUPT_LEVEL) || zero != 0.0
}

/// What to do with the channels of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// Keep every channel.
    Keep,
    /// Average all channels into one.
    Mono,
    /// Keep only this channel (0-based).
    Select(usize),
}

/// Decoding options shared by a batch.
#[derive(Debug, Clone)]
pub struct DecodeParams {
    /// Target sample rate in Hz; `None` keeps the file's rate.
    pub sr: Option<u32>,
    pub channels: Channels,
    /// Start, in seconds from the beginning.
    pub offset: f64,
    /// Length to read in seconds (`None`: to the end).
    pub duration: Option<f64>,
    /// Hard cap on the decoded length in seconds; longer files are cut and
    /// flagged `truncated`.
    pub max_duration: Option<f64>,
    pub quality: Quality,
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams {
            sr: Some(32000),
            channels: Channels::Keep,
            offset: 0.0,
            duration: None,
            max_duration: None,
            quality: Quality::High,
        }
    }
}

impl DecodeParams {
    /// Check every field; messages name the parameter and its value.
    pub fn validate(&self) -> Result<()> {
        if let Some(sr) = self.sr {
            if sr == 0 || sr > MAX_SAMPLE_RATE {
                return Err(AglError::param(
                    "sr",
                    sr,
                    format!("must be a rate between 1 and {MAX_SAMPLE_RATE} Hz"),
                ));
            }
        }
        if !(self.offset.is_finite() && self.offset >= 0.0) {
            return Err(AglError::param(
                "offset",
                self.offset,
                "must be >= 0 seconds",
            ));
        }
        for (name, v) in [
            ("duration", self.duration),
            ("max_duration", self.max_duration),
        ] {
            if let Some(d) = v {
                if !(d.is_finite() && d >= 0.0) {
                    return Err(AglError::param(name, d, "must be >= 0 seconds or None"));
                }
            }
        }
        Ok(())
    }
}

/// One decoded file: planar channels at `sr`.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// `channels[c]` holds channel `c`.
    pub channels: Vec<Vec<f32>>,
    /// Output sample rate in Hz.
    pub sr: u32,
    /// The file's own rate and channel count.
    pub source_sr: u32,
    pub source_channels: usize,
    /// Frames in the whole file at its own rate, when the header or stream
    /// declares them (WAV data size, FLAC STREAMINFO, an MP3 Xing/Info or
    /// VBRI frame count, the container's track length): compared with what
    /// decoded, it tells a file cut short.
    pub source_frames: Option<u64>,
    /// The read stopped at `max_duration`.
    pub truncated: bool,
    /// Frames of a lossy stream replaced by silence because they decoded
    /// to samples beyond [`CORRUPT_LEVEL`] (damaged data).
    pub corrupt_frames: u64,
    /// `[peak |x|, RMS, share of samples at or above
    /// [`crate::quality::CLIP_LEVEL`], share of samples at the peak]` of the
    /// output, all channels, taken in the pass that checks the output is
    /// finite (see [`crate::quality::clip_levels`]).
    pub levels: [f64; 4],
}

impl Decoded {
    /// Frames per channel.
    pub fn frames(&self) -> usize {
        self.channels.first().map_or(0, |c| c.len())
    }

    /// The channels laid end to end (`[channels, frames]`, row-major). The
    /// decoder reserves room for all of them in the first channel, so this
    /// appends the others to it rather than copying everything into a new
    /// buffer; one channel is moved as it is.
    pub fn into_planar(self) -> Vec<f32> {
        let mut it = self.channels.into_iter();
        let mut first = it.next().unwrap_or_default();
        for c in it {
            first.extend_from_slice(&c);
        }
        first
    }
}

fn dec_err(path: &Path, reason: impl std::fmt::Display) -> AglError {
    AglError::Decode {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

fn sym_reason(e: &SymError) -> String {
    match e {
        SymError::Unsupported(_) => format!("unsupported or unrecognised format ({e})"),
        other => other.to_string(),
    }
}

/// Why no container reader took the input: an unrecognised one is named
/// by its first bytes (`unrecognised format (first bytes 3f 2a ...)`); a
/// container cut inside its header says the stream ended early.
fn probe_reason(e: &SymError, media: &Media) -> String {
    match e {
        SymError::Unsupported(_) => {
            let head = media.head(8).unwrap_or_default();
            let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("unrecognised format (first bytes {})", hex.join(" "))
        }
        SymError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "stream ends early after 0 s (inside the container header)".to_string()
        }
        other => other.to_string(),
    }
}

/// Decode one file. Decoder panics on malformed data are caught and
/// reported as [`AglError::Decode`].
pub fn decode_file(path: &Path, p: &DecodeParams, cancel: &Cancel) -> Result<Decoded> {
    decode_source(&Source::Path(path.to_path_buf()), p, cancel)
}

/// Decode one file from memory (see [`Source::Bytes`]).
pub fn decode_bytes(
    data: Arc<[u8]>,
    name: &str,
    hint: Option<&str>,
    p: &DecodeParams,
    cancel: &Cancel,
) -> Result<Decoded> {
    let src = Source::Bytes {
        data,
        name: name.to_string(),
        hint: hint.map(str::to_owned),
    };
    decode_source(&src, p, cancel)
}

/// Decode one [`Source`]. Header fields that would size an allocation are
/// checked first ([`guard`]); decoder panics on malformed data are caught
/// and reported as [`AglError::Decode`].
pub fn decode_source(src: &Source, p: &DecodeParams, cancel: &Cancel) -> Result<Decoded> {
    p.validate()?;
    let label = src.label();
    match catch_unwind(AssertUnwindSafe(|| decode_inner(src, &label, p, cancel))) {
        Ok(r) => r,
        Err(_) => Err(dec_err(&label, "the decoder failed on malformed data")),
    }
}

/// Bytes read to recognise a container and check its header.
const HEAD: usize = 1 << 16;

/// How far a container marker is searched for when none is in [`HEAD`]
/// (symphonia's probe limit, plus one marker window).
const PROBE: usize = (1 << 20) + 16;

fn decode_inner(src: &Source, path: &Path, p: &DecodeParams, cancel: &Cancel) -> Result<Decoded> {
    let mut media = src.open()?;
    if media.len() == 0 {
        return Err(dec_err(path, "empty file (0 bytes)"));
    }
    let mut head = media.head(HEAD).map_err(|e| dec_err(path, e))?;
    let mut found = guard::locate(&head);
    if found.is_none() && media.len() > HEAD as u64 {
        // The probe searches the first megabyte for a marker.
        head = media.head(PROBE).map_err(|e| dec_err(path, e))?;
        found = guard::locate(&head);
    }
    let mut priming = None;
    // Frames a WAV header declares, kept before its sizes are repaired to
    // what the file holds (a cut file then decodes what it has, and the
    // declaration tells that it is cut).
    let mut wav_declared = None;
    match found {
        Some(guard::Found::Wav(at)) => {
            let (mut patches, declared) =
                guard::wav(&head[at..], media.len() - at as u64).map_err(|e| dec_err(path, e))?;
            wav_declared = declared;
            if !patches.is_empty() {
                patches.iter_mut().for_each(|p| p.at += at as u64);
                media = media.patched(&patches).map_err(|e| dec_err(path, e))?;
            } else if let Some(d) = wav::decode(path, &media, &head[at..], at as u64, p, cancel)? {
                return finish(path, d);
            }
        }
        Some(guard::Found::Flac(at)) => {
            let mut r = media.reader().map_err(|e| dec_err(path, e))?;
            guard::flac(&mut r, at as u64, media.len()).map_err(|e| dec_err(path, e))?;
        }
        Some(guard::Found::Ogg(at)) => {
            let mut r = media.reader().map_err(|e| dec_err(path, e))?;
            guard::ogg(&mut r, at as u64, media.len()).map_err(|e| dec_err(path, e))?;
        }
        Some(guard::Found::Mp4(at)) => {
            let mut r = media.reader().map_err(|e| dec_err(path, e))?;
            let info = guard::mp4(&mut r, at as u64, media.len()).map_err(|e| dec_err(path, e))?;
            priming = info.priming;
        }
        None => {}
    }
    if found.is_none() {
        aiff::check(&head).map_err(|e| dec_err(path, e))?;
    }
    let hint = src.hint();
    if mp3::claims(hint.as_deref(), &head) {
        // A file named .mp3 that holds no MPEG audio goes to the probe below,
        // which recognises other containers or reports the error.
        if let Some(d) = mp3::decode(path, &media, p, cancel)? {
            return finish(path, d);
        }
    }
    let ebml = head.starts_with(&EBML_MAGIC);
    let trims = sym::Trims {
        priming,
        // symphonia's Matroska reader does not pass on the last block's
        // DiscardPadding (the samples an Opus encoder added past the end).
        end_padding_ns: ebml
            .then(|| media.reader().ok())
            .flatten()
            .and_then(|mut r| mkv::end_padding_ns(&mut r, media.len())),
    };
    let mut d = sym::decode(path, &media, hint.as_deref(), trims, p, cancel)?;
    if wav_declared.is_some() {
        d.source_frames = wav_declared;
    }
    if ebml {
        // symphonia's Matroska reader gives the segment duration in
        // timestamp units, not frames: no declaration to compare against.
        d.source_frames = None;
    }
    finish(path, d)
}

/// The first bytes of an EBML (Matroska, WebM) file.
const EBML_MAGIC: [u8; 4] = [0x1A, 0x45, 0xDF, 0xA3];

fn finish(path: &Path, mut d: Decoded) -> Result<Decoded> {
    let parts: Vec<&[f32]> = d.channels.iter().map(|c| c.as_slice()).collect();
    match crate::quality::clip_levels(&parts, crate::quality::CLIP_LEVEL) {
        Some(levels) => d.levels = levels,
        None => {
            for c in &d.channels {
                crate::error::check_finite(c, &format!("the decoded audio of {}", path.display()))?;
            }
        }
    }
    Ok(d)
}

/// A sample rate read from a file's header, refused above
/// [`MAX_SAMPLE_RATE`] before it sizes anything.
fn check_header_rate(path: &Path, sr: u32) -> Result<()> {
    if sr == 0 || sr > MAX_SAMPLE_RATE {
        return Err(dec_err(
            path,
            format!(
                "header field sample_rate={sr} Hz is outside the 1..={MAX_SAMPLE_RATE} Hz \
                 agl-fast decodes"
            ),
        ));
    }
    Ok(())
}

/// The part of the source to read, in frames at the source rate.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: u64,
    /// One past the last frame to read.
    end: Option<u64>,
    /// `end` comes from `max_duration` (reaching it flags `truncated`).
    capped: bool,
}

impl Window {
    fn new(p: &DecodeParams, source_sr: u32) -> Self {
        let sr = source_sr as f64;
        let start = (p.offset * sr).round() as u64;
        let want = p.duration.map(|d| (d * sr).round() as u64);
        let cap = p.max_duration.map(|d| (d * sr).round() as u64);
        let (limit, capped) = match (want, cap) {
            (Some(w), Some(c)) if c < w => (Some(c), true),
            (Some(w), _) => (Some(w), false),
            (None, Some(c)) => (Some(c), true),
            (None, None) => (None, false),
        };
        Window {
            start,
            end: limit.map(|l| start.saturating_add(l)),
            capped,
        }
    }

    /// Frames the window will hold when the source has `total` frames.
    fn expected(&self, total: Option<u64>) -> Option<u64> {
        let rest = total.map(|t| t.saturating_sub(self.start));
        match (rest, self.end) {
            (Some(r), Some(e)) => Some(r.min(e - self.start)),
            (Some(r), None) => Some(r),
            (None, Some(e)) => Some(e - self.start),
            (None, None) => None,
        }
    }
}

/// Where decoded frames go: the channel mapping, then the resampler (or a
/// plain copy when the rate is kept).
struct Sink {
    channels: Channels,
    src_ch: usize,
    resampler: Option<Resampler>,
    plain: Vec<Vec<f32>>,
}

/// Output channel `c` of interleaved frames, appended to `d`.
fn map_interleaved(map: Channels, ch: usize, data: &[f32], c: usize, d: &mut Vec<f32>) {
    match (map, ch) {
        (_, 1) => d.extend_from_slice(data),
        (Channels::Keep, _) => d.extend(data.chunks_exact(ch).map(|f| f[c])),
        (Channels::Select(i), _) => d.extend(data.chunks_exact(ch).map(|f| f[i])),
        (Channels::Mono, 2) => crate::fastmath::vectorized(
            #[inline(always)]
            || d.extend(data.chunks_exact(2).map(|f| (f[0] + f[1]) * 0.5)),
        ),
        (Channels::Mono, _) => {
            let s = 1.0 / ch as f32;
            d.extend(
                data.chunks_exact(ch)
                    .map(|f| f[1..].iter().fold(f[0], |a, b| a + b) * s),
            );
        }
    }
}

/// Output channel `c` of planar frames (`planes(k)` is source channel `k`),
/// appended to `d`.
fn map_planar<'a>(
    map: Channels,
    ch: usize,
    planes: &impl Fn(usize) -> &'a [f32],
    c: usize,
    d: &mut Vec<f32>,
) {
    match map {
        Channels::Keep => d.extend_from_slice(planes(c)),
        Channels::Select(i) => d.extend_from_slice(planes(i)),
        Channels::Mono => {
            let at = d.len();
            d.extend_from_slice(planes(0));
            for k in 1..ch {
                for (a, b) in d[at..].iter_mut().zip(planes(k)) {
                    *a += b;
                }
            }
            let s = 1.0 / ch as f32;
            d[at..].iter_mut().for_each(|a| *a *= s);
        }
    }
}

impl Sink {
    /// A sink for `src_ch` channels at `source_sr`; `expect` (frames at the
    /// source rate, when known) sizes the output once. An out-of-range
    /// `Channels::Select` is an error naming the file.
    fn new(
        path: &Path,
        p: &DecodeParams,
        source_sr: u32,
        src_ch: usize,
        expect: Option<u64>,
    ) -> Result<Self> {
        let n_out = match p.channels {
            Channels::Keep => src_ch,
            Channels::Mono => 1,
            Channels::Select(i) if i < src_ch => 1,
            Channels::Select(i) => {
                return Err(AglError::param(
                    "channel",
                    i,
                    format!("must be < the {src_ch} channel(s) of {}", path.display()),
                ))
            }
        };
        // A header can claim any length: the reservation is only a hint, and
        // a failed one leaves the vectors to grow as they go.
        // The first channel gets room for all of them, so that laying the
        // channels end to end (`Decoded::into_planar`) needs no new buffer.
        let expect = expect.map_or(0, |e| e.min(1 << 31) as usize);
        let reserve = |out: &mut [Vec<f32>], n: usize| {
            for (c, v) in out.iter_mut().enumerate() {
                v.try_reserve_exact(if c == 0 { n * n_out } else { n }).ok();
            }
        };
        let mut plain = vec![Vec::new(); n_out];
        let resampler = match p.sr.filter(|&sr| sr != source_sr) {
            Some(sr) => {
                let mut r =
                    Resampler::new(source_sr, sr, n_out, p.quality).map_err(|e| match e {
                        AglError::InvalidParameter { reason, .. } => dec_err(
                            path,
                            format!(
                                "cannot resample its {source_sr} Hz to {sr} Hz: the rate {reason}"
                            ),
                        ),
                        other => other,
                    })?;
                let n = r.out_len(expect as u64) as usize;
                reserve(&mut r.out, n);
                Some(r)
            }
            None => {
                reserve(&mut plain, expect);
                None
            }
        };
        Ok(Sink {
            channels: p.channels,
            src_ch,
            resampler,
            plain,
        })
    }

    /// Append frames given as `src_ch` interleaved samples each.
    fn push_interleaved(&mut self, data: &[f32]) -> Result<()> {
        let (map, ch) = (self.channels, self.src_ch);
        let fill = |c: usize, d: &mut Vec<f32>| map_interleaved(map, ch, data, c, d);
        self.push(data.len() / ch, fill)
    }

    /// Append frames `lo..hi` of planar data (`src_ch` planes of `frames`).
    fn push_planar(&mut self, data: &[f32], frames: usize, lo: usize, hi: usize) -> Result<()> {
        let (map, ch) = (self.channels, self.src_ch);
        let planes = |k: usize| &data[k * frames + lo..k * frames + hi];
        let fill = |c: usize, d: &mut Vec<f32>| map_planar(map, ch, &planes, c, d);
        self.push(hi - lo, fill)
    }

    /// `fill(c, dst)` appends `n` frames of output channel `c` to `dst`: the
    /// resampler's input history, or the output itself. Room is reserved
    /// first, so a refused allocation is an [`AglError::Memory`], not an
    /// abort.
    fn push(&mut self, n: usize, mut fill: impl FnMut(usize, &mut Vec<f32>)) -> Result<()> {
        match self.resampler.as_mut() {
            Some(r) => r.push_with(n, fill),
            None => {
                for (c, d) in self.plain.iter_mut().enumerate() {
                    try_grow(d, n, "the decoded audio")?;
                    fill(c, d);
                }
                Ok(())
            }
        }
    }

    fn finish(self) -> Result<Vec<Vec<f32>>> {
        match self.resampler {
            Some(r) => r.finish(),
            None => Ok(self.plain),
        }
    }
}

/// Decode many files in parallel (one task per file, `n_threads` workers).
/// Each file gets its own result: a bad file never fails the batch. Only
/// cancellation fails the whole call.
pub fn decode_many<P: AsRef<Path> + Sync>(
    paths: &[P],
    p: &DecodeParams,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Result<Decoded>>> {
    let sources: Vec<Source> = paths
        .iter()
        .map(|x| Source::Path(x.as_ref().to_path_buf()))
        .collect();
    decode_sources(&sources, p, n_threads, cancel)
}

/// [`decode_many`] over paths and in-memory files alike.
pub fn decode_sources(
    sources: &[Source],
    p: &DecodeParams,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Result<Decoded>>> {
    p.validate()?;
    let res = install(n_threads, || {
        sources
            .par_iter()
            .with_max_len(1)
            .map(|src| decode_source(src, p, cancel))
            .collect::<Vec<_>>()
    })?;
    if res.iter().any(|r| matches!(r, Err(AglError::Cancelled))) {
        return Err(AglError::Cancelled);
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A 16-bit PCM WAV with `ch` interleaved channels.
    fn write_wav(path: &Path, sr: u32, ch: u16, frames: &[i16]) {
        let data_len = (frames.len() * 2) as u32;
        let mut f = File::create(path).unwrap();
        f.write_all(b"RIFF").unwrap();
        f.write_all(&(36 + data_len).to_le_bytes()).unwrap();
        f.write_all(b"WAVEfmt ").unwrap();
        f.write_all(&16u32.to_le_bytes()).unwrap();
        f.write_all(&1u16.to_le_bytes()).unwrap();
        f.write_all(&ch.to_le_bytes()).unwrap();
        f.write_all(&sr.to_le_bytes()).unwrap();
        f.write_all(&(sr * ch as u32 * 2).to_le_bytes()).unwrap();
        f.write_all(&(ch * 2).to_le_bytes()).unwrap();
        f.write_all(&16u16.to_le_bytes()).unwrap();
        f.write_all(b"data").unwrap();
        f.write_all(&data_len.to_le_bytes()).unwrap();
        for s in frames {
            f.write_all(&s.to_le_bytes()).unwrap();
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("agl-core-audio-{}-{name}", std::process::id()))
    }

    #[test]
    fn wav_stereo_exact_and_channel_modes() {
        let path = tmp("st.wav");
        let inter: Vec<i16> = (0..2000)
            .map(|i| if i % 2 == 0 { 1000 } else { -3000 })
            .collect();
        write_wav(&path, 16000, 2, &inter);
        let mut p = DecodeParams {
            sr: None,
            ..Default::default()
        };
        let d = decode_file(&path, &p, crate::parallel::never()).unwrap();
        assert_eq!(d.channels.len(), 2);
        assert_eq!(d.frames(), 1000);
        assert_eq!(d.channels[0][5], 1000.0 / 32768.0);
        assert_eq!(d.channels[1][5], -3000.0 / 32768.0);
        p.channels = Channels::Mono;
        let m = decode_file(&path, &p, crate::parallel::never()).unwrap();
        assert_eq!(m.channels[0][7], -1000.0 / 32768.0);
        p.channels = Channels::Select(1);
        let s = decode_file(&path, &p, crate::parallel::never()).unwrap();
        assert_eq!(s.channels[0][9], -3000.0 / 32768.0);
        p.channels = Channels::Select(2);
        assert!(matches!(
            decode_file(&path, &p, crate::parallel::never()),
            Err(AglError::InvalidParameter { .. })
        ));
        p.channels = Channels::Keep;
        p.offset = 0.01;
        p.duration = Some(0.02);
        let o = decode_file(&path, &p, crate::parallel::never()).unwrap();
        assert_eq!(o.frames(), 320);
        p.sr = Some(32000);
        p.offset = 0.0;
        p.duration = None;
        let r = decode_file(&path, &p, crate::parallel::never()).unwrap();
        assert_eq!(r.frames(), 2000);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn garbage_and_missing_files_are_decode_errors() {
        let path = tmp("junk.wav");
        std::fs::write(&path, b"this is not audio at all").unwrap();
        let missing = tmp("missing.mp3");
        let res = decode_many(
            &[path.clone(), missing],
            &DecodeParams::default(),
            Some(2),
            crate::parallel::never(),
        )
        .unwrap();
        assert!(
            matches!(&res[0], Err(AglError::Decode { reason, .. })
                if reason.starts_with("unrecognised format (first bytes 74 68 69 73 20")),
            "{:?}",
            res[0]
        );
        assert!(
            matches!(&res[1], Err(AglError::NotFound { .. })),
            "{:?}",
            res[1]
        );
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn empty_files_and_special_files_are_named() {
        let empty = tmp("empty.flac");
        std::fs::write(&empty, b"").unwrap();
        let p = DecodeParams::default();
        let never = crate::parallel::never();
        let e = decode_file(&empty, &p, never).unwrap_err().to_string();
        assert!(e.ends_with("empty.flac: empty file (0 bytes)"), "{e}");
        std::fs::remove_file(&empty).ok();
        let e = decode_file(Path::new("/dev/zero"), &p, never)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("not a regular file (character device)"), "{e}");
        let dir = tmp("a_directory.mp3");
        std::fs::create_dir_all(&dir).unwrap();
        let e = decode_file(&dir, &p, never).unwrap_err().to_string();
        assert!(e.ends_with("not a regular file (directory)"), "{e}");
        std::fs::remove_dir(&dir).ok();
    }
}
