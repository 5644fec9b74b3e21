//! Every format the dedicated readers do not take, through symphonia's
//! demuxers and decoders (plus [`super::opus::OpusDec`]): FLAC, Ogg
//! (Vorbis, Opus, FLAC), MP4/M4A (AAC), Matroska/WebM, AIFF, WAV that needed
//! repair, and MP3 the fast path does not take.
//!
//! An `offset` seeks as [`super::seek`] describes, so the window is the
//! same frames as the full decode's whatever the format.

use std::path::Path;

use symphonia::core::audio::{AudioBufferRef, SampleBuffer};
use symphonia::core::codecs::{CodecParameters, Decoder, DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::{FormatOptions, FormatReader, Packet, SeekMode, SeekTo};
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use super::seek::SeekRule;
use super::{
    check_header_rate, dec_err, opus, probe_reason, sym_reason, Channels, Concealer, DecodeParams,
    Decoded, Media, Sink, Window,
};
use crate::error::Result;
use crate::parallel::Cancel;

/// An opened stream: its demuxer, the decoder of its audio track, and what
/// the header says about it.
struct Stream {
    format: Box<dyn FormatReader>,
    decoder: Box<dyn Decoder>,
    track: u32,
    cp: CodecParameters,
    sr: u32,
    /// Lossless codecs give exactly what the file holds; lossy ones can turn
    /// damaged data into huge values (see [`super::CORRUPT_LEVEL`]).
    lossy: bool,
}

impl Stream {
    fn open(path: &Path, media: &Media, ext: Option<&str>) -> Result<Self> {
        let reader = media.reader().map_err(|e| dec_err(path, e))?;
        let mss = MediaSourceStream::new(reader, Default::default());
        let mut hint = Hint::new();
        if let Some(ext) = ext {
            hint.with_extension(ext);
        }
        let fmt_opts = FormatOptions {
            enable_gapless: true,
            ..Default::default()
        };
        let probed = symphonia::default::get_probe()
            .format(&hint, mss, &fmt_opts, &MetadataOptions::default())
            .map_err(|e| dec_err(path, probe_reason(&e, media)))?;
        let format = probed.format;
        let track = format
            .tracks()
            .iter()
            .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
            .ok_or_else(|| dec_err(path, "no audio track"))?
            .clone();
        let cp = track.codec_params;
        let sr = cp
            .sample_rate
            .filter(|&r| r > 0)
            .ok_or_else(|| dec_err(path, "the stream has no sample rate"))?;
        check_header_rate(path, sr)?;
        let decoder = opus::codecs()
            .make(&cp, &DecoderOptions::default())
            .map_err(|e| dec_err(path, sym_reason(&e)))?;
        let lossy = !super::seek::lossless(cp.codec);
        Ok(Stream {
            format,
            decoder,
            track: track.id,
            cp,
            sr,
            lossy,
        })
    }

    /// Seek to `ts` (the track's stamps) and reset the decoder; `false`
    /// when the demuxer cannot seek there.
    fn seek(&mut self, ts: u64) -> bool {
        let to = SeekTo::TimeStamp {
            ts,
            track_id: self.track,
        };
        let ok = self.format.seek(SeekMode::Accurate, to).is_ok();
        self.decoder.reset();
        ok
    }
}

/// What the container says to cut beyond what symphonia cuts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Trims {
    /// The MP4 edit list's start (media time, timescale): the encoder delay,
    /// trimmed as ffmpeg does.
    pub priming: Option<(u64, u32)>,
    /// Matroska's `DiscardPadding` of the last block, in nanoseconds: the
    /// frames past the end of the stream, cut from that block.
    pub end_padding_ns: Option<u64>,
}

/// Decode `media` through symphonia.
pub(super) fn decode(
    path: &Path,
    media: &Media,
    ext: Option<&str>,
    trims: Trims,
    p: &DecodeParams,
    cancel: &Cancel,
) -> Result<Decoded> {
    let mut s = Stream::open(path, media, ext)?;
    let sr = s.sr as u128;
    // The encoder delay, in frames at the source rate, is skipped like the
    // start of an offset.
    let skip = trims.priming.map_or(0, |(m, ts)| {
        (m as u128 * sr / ts.max(1) as u128).min(u32::MAX as u128) as u64
    });
    let pad = trims.end_padding_ns.map_or(0, |ns| {
        ((ns as u128 * sr + 500_000_000) / 1_000_000_000).min(u32::MAX as u128) as u64
    });
    let mut win = Window::new(p, s.sr);
    win.start += skip;
    win.end = win.end.map(|e| e.saturating_add(skip));
    let rule = SeekRule::new(&s.cp, s.sr).filter(|_| p.offset > 0.0);
    if let Some((rule, ts)) = rule.and_then(|r| Some((r, r.target(win.start)?))) {
        if s.seek(ts) {
            if let Some(d) = read(path, &mut s, Some(&rule), (win, pad), p, cancel)? {
                return Ok(with_skip(d, skip));
            }
        }
        // The seek failed or landed after the target: decode from the start.
        s = Stream::open(path, media, ext)?;
    }
    let d = read(path, &mut s, None, (win, pad), p, cancel)?
        .ok_or_else(|| dec_err(path, "a decode from the start asked to restart"))?;
    Ok(with_skip(d, skip))
}

fn with_skip(mut d: Decoded, skip: u64) -> Decoded {
    d.source_frames = d.source_frames.map(|n| n.saturating_sub(skip));
    d
}

/// Where decoded frames land on the decoded timeline, and what is kept.
struct Cursor {
    /// Timeline frame of the next decoded frame; `None` after a seek, until
    /// the first packet that decodes to frames places it.
    pos: Option<u64>,
    win: Window,
    done: bool,
    truncated: bool,
}

impl Cursor {
    /// Frames `[lo, hi)` of a packet of `n` frames at `pos` inside the
    /// window (empty when none is), moving past the packet.
    fn take(&mut self, n: usize) -> (usize, usize) {
        let pos = self.pos.unwrap_or(0);
        self.pos = Some(pos + n as u64);
        let lo = self.win.start.saturating_sub(pos).min(n as u64) as usize;
        let mut hi = n;
        if let Some(e) = self.win.end {
            let room = e.saturating_sub(pos.max(self.win.start));
            if (hi - lo) as u64 >= room {
                hi = lo + room as usize;
                self.done = true;
                self.truncated = self.win.capped;
            }
        }
        (lo, hi.max(lo))
    }
}

/// The next packet of the stream's track; `None` at its end.
fn next_packet(path: &Path, s: &mut Stream) -> Result<Option<Packet>> {
    loop {
        match s.format.next_packet() {
            Ok(pk) if pk.track_id() == s.track => return Ok(Some(pk)),
            Ok(_) => continue,
            Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(None)
            }
            Err(SymError::ResetRequired) => return Ok(None),
            Err(e) => return Err(dec_err(path, e)),
        }
    }
}

/// Decoded frames on their way to the sink.
struct Output {
    /// The stream's rate, and whether its codec is lossy.
    sr: u32,
    lossy: bool,
    sink: Option<Sink>,
    src_ch: usize,
    sbuf: Option<SampleBuffer<f32>>,
    conceal: Concealer,
}

impl Output {
    /// Push frames `[lo, hi)` of `buf` (`ch` channels); the first call sizes
    /// the sink for `expect` frames.
    fn push(
        &mut self,
        path: &Path,
        p: &DecodeParams,
        buf: AudioBufferRef<'_>,
        (lo, hi, expect): (usize, usize, Option<u64>),
    ) -> Result<()> {
        let spec = *buf.spec();
        let (ch, frames) = (spec.channels.count(), buf.frames());
        if self.src_ch == 0 {
            self.src_ch = ch;
            self.sink = Some(Sink::new(path, p, self.sr, ch, expect)?);
        } else if ch != self.src_ch {
            let was = self.src_ch;
            return Err(dec_err(
                path,
                format!("channel count changed from {was} to {ch}"),
            ));
        }
        let need = frames as u64 * ch as u64;
        if self
            .sbuf
            .as_ref()
            .is_none_or(|b| (b.capacity() as u64) < need)
        {
            self.sbuf = Some(SampleBuffer::new(frames as u64, spec));
        }
        let sb = self.sbuf.as_mut().expect("set above");
        sb.copy_planar_ref(buf);
        let data = if self.lossy {
            self.conceal.pass(sb.samples())
        } else {
            sb.samples()
        };
        match self.sink.as_mut() {
            Some(sk) if hi > lo => sk.push_planar(data, frames, lo, hi),
            _ => Ok(()),
        }
    }

    /// The channels; with no frames at all, empty channels laid out as the
    /// header says.
    fn finish(mut self, path: &Path, s: &Stream, p: &DecodeParams) -> Result<Vec<Vec<f32>>> {
        if let Some(sk) = self.sink.take() {
            return sk.finish();
        }
        self.src_ch = s.cp.channels.map_or(0, |c| c.count());
        if self.src_ch == 0 && s.cp.n_frames.unwrap_or(0) > 0 {
            return Err(dec_err(path, "no decodable audio packets"));
        }
        let n_out = match p.channels {
            Channels::Keep => self.src_ch.max(1),
            _ => 1,
        };
        Ok(vec![Vec::new(); n_out])
    }
}

/// Read the packets of `s` into the window `win`, cutting `pad` frames
/// from the last packet. `rule` is set after a seek: the first packet with
/// frames is placed by its stamp, and `Ok(None)` says it is not early
/// enough for an exact window (decode from the start).
fn read(
    path: &Path,
    s: &mut Stream,
    rule: Option<&SeekRule>,
    (win, pad): (Window, u64),
    p: &DecodeParams,
    cancel: &Cancel,
) -> Result<Option<Decoded>> {
    let mut out = Output {
        sr: s.sr,
        lossy: s.lossy,
        sink: None,
        src_ch: 0,
        sbuf: None,
        conceal: Concealer::default(),
    };
    let mut at = Cursor {
        pos: if rule.is_some() { None } else { Some(0) },
        win,
        done: false,
        truncated: false,
    };
    let expect = win.expected(s.cp.n_frames);
    // One packet is read ahead, so the last one is known as the last.
    let mut next = next_packet(path, s)?;
    while let (Some(packet), false) = (next.take(), at.done) {
        cancel.check()?;
        next = next_packet(path, s)?;
        let buf = match s.decoder.decode(&packet) {
            Ok(b) => b,
            // A corrupt packet is skipped, as ffmpeg does.
            Err(SymError::DecodeError(_)) => continue,
            Err(SymError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(dec_err(path, e)),
        };
        if buf.spec().channels.count() == 0 {
            return Err(dec_err(path, "the stream has no channels"));
        }
        let mut frames = buf.frames();
        if next.is_none() {
            frames = frames.saturating_sub(pad as usize);
        }
        if frames == 0 {
            continue;
        }
        if let (None, Some(r)) = (at.pos, rule) {
            match r.position(packet.ts()) {
                Some(x) if x + r.warm <= win.start => at.pos = Some(x),
                _ => return Ok(None),
            }
        }
        let (lo, hi) = at.take(frames);
        out.push(path, p, buf, (lo, hi, expect))?;
    }
    if rule.is_some() && at.pos.is_none() {
        // Nothing decoded after the seek: the window may still hold frames
        // of the packet it landed on.
        return Ok(None);
    }
    let src_ch = out.src_ch;
    let corrupt_frames = out.conceal.count;
    let channels = out.finish(path, s, p)?;
    Ok(Some(Decoded {
        channels,
        sr: p.sr.unwrap_or(s.sr),
        source_sr: s.sr,
        source_channels: if src_ch == 0 {
            s.cp.channels.map_or(0, |c| c.count())
        } else {
            src_ch
        },
        source_frames: s.cp.n_frames,
        truncated: at.truncated,
        corrupt_frames,
        levels: [0.0; 4],
    }))
}
