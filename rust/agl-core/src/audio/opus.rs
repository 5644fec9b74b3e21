//! Opus decoding for the symphonia pipeline.
//!
//! symphonia's Ogg and Matroska demuxers hand out Opus packets but ship no
//! Opus decoder; [`OpusDec`] fills that gap with the reference decoder,
//! libopus (BSD-3-Clause), compiled from source into the extension by the
//! `opusic-sys` crate (a static C build; CMake at build time, nothing at
//! run time). Output is always 48 kHz, as the Opus specification
//! (RFC 7845 §5.1) requires of a decoder that does not resample.
//!
//! Every count read from the `OpusHead` header (channels, stream counts,
//! the channel mapping) is checked against [`MAX_CHANNELS`] before it sizes
//! anything, and one packet never decodes to more than [`MAX_PACKET_FRAMES`]
//! frames per channel: libopus is handed an output buffer of exactly that
//! size and refuses a packet that would overrun it.

use std::sync::OnceLock;

use opusic_sys as ffi;
use symphonia::core::audio::{
    AsAudioBufferRef, AudioBuffer, AudioBufferRef, Channels, Signal, SignalSpec,
};
use symphonia::core::codecs::{
    CodecDescriptor, CodecParameters, CodecRegistry, Decoder, DecoderOptions, FinalizeResult,
    CODEC_TYPE_OPUS,
};
use symphonia::core::errors::{decode_error, unsupported_error, Result};
use symphonia::core::formats::Packet;

/// Output sample rate of every Opus stream (Hz).
pub const OPUS_RATE: u32 = 48_000;

/// Most output channels accepted (mapping families 0 and 1 cover 1-8).
pub const MAX_CHANNELS: usize = 8;

/// Most frames one packet can hold per channel: 120 ms at 48 kHz
/// (RFC 6716 §3.2.5).
pub const MAX_PACKET_FRAMES: usize = 5_760;

/// Vorbis channel order (Opus mapping family 1, RFC 7845 §5.1.1.2) to the
/// WAVE order symphonia and ffmpeg use: `WAVE_ORDER[n - 1][i]` is the
/// Vorbis-order index of output channel `i` for `n` channels.
const WAVE_ORDER: [&[usize]; MAX_CHANNELS] = [
    &[0],
    &[0, 1],
    &[0, 2, 1],
    &[0, 1, 2, 3],
    &[0, 2, 1, 3, 4],
    &[0, 2, 1, 5, 3, 4],
    &[0, 2, 1, 6, 5, 3, 4],
    &[0, 2, 1, 7, 5, 6, 3, 4],
];

/// The fields of an `OpusHead` identification header this decoder uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusHead {
    /// Output channels, 1..=[`MAX_CHANNELS`].
    pub channels: usize,
    /// Frames at 48 kHz to drop from the start of the stream.
    pub pre_skip: u16,
    /// Output gain, Q7.8 dB.
    pub gain_q8: i16,
    /// Elementary streams in each packet.
    pub streams: usize,
    /// Of those, streams that carry two channels.
    pub coupled: usize,
    /// Output channel to (coupled-first) decoded channel, 255 = silent.
    pub mapping: Vec<u8>,
}

/// Parse and bound an `OpusHead` (RFC 7845 §5.1).
///
/// # Errors
/// A short or malformed header, an unsupported mapping family, or counts
/// outside the bounds above.
pub fn parse_head(b: &[u8]) -> std::result::Result<OpusHead, String> {
    if b.len() < 19 || &b[..8] != b"OpusHead" {
        return Err("missing or short OpusHead header".into());
    }
    if b[8] >> 4 != 0 {
        return Err(format!("unsupported OpusHead version {}", b[8]));
    }
    let channels = b[9] as usize;
    if channels == 0 || channels > MAX_CHANNELS {
        return Err(format!(
            "OpusHead declares {channels} channels (1 to {MAX_CHANNELS} supported)"
        ));
    }
    let pre_skip = u16::from_le_bytes([b[10], b[11]]);
    let gain_q8 = i16::from_le_bytes([b[16], b[17]]);
    let family = b[18];
    let (streams, coupled, mapping) = match family {
        0 => {
            if channels > 2 {
                return Err(format!("mapping family 0 with {channels} channels"));
            }
            (1, channels - 1, (0..channels as u8).collect::<Vec<_>>())
        }
        1 => {
            if b.len() < 21 + channels {
                return Err("short OpusHead channel mapping table".into());
            }
            let (s, c) = (b[19] as usize, b[20] as usize);
            if s == 0 || c > s || s + c > 255 {
                return Err(format!("bad stream counts ({s} streams, {c} coupled)"));
            }
            let map = b[21..21 + channels].to_vec();
            if let Some(&m) = map.iter().find(|&&m| m != 255 && m as usize >= s + c) {
                return Err(format!("channel mapping index {m} out of range"));
            }
            (s, c, map)
        }
        f => return Err(format!("unsupported Opus channel mapping family {f}")),
    };
    Ok(OpusHead {
        channels,
        pre_skip,
        gain_q8,
        streams,
        coupled,
        mapping,
    })
}

/// An owned libopus multistream decoder.
///
/// The C state is reached only through `&mut self`, so the wrapper is as
/// thread-safe as any other owned buffer.
struct MsDecoder(std::ptr::NonNull<ffi::OpusMSDecoder>);

// SAFETY: libopus decoder state holds no thread-local or shared data; it is
// owned by this value and only used through `&mut self` (or dropped once).
unsafe impl Send for MsDecoder {}
// SAFETY: no method takes `&self`, so a shared reference reaches nothing.
unsafe impl Sync for MsDecoder {}

impl MsDecoder {
    fn new(head: &OpusHead) -> Result<Self> {
        // parse_head bounds these: channels 1..=8, streams 1..=255, coupled
        // <= streams, one mapping byte per channel.
        let (Ok(ch), Ok(streams), Ok(coupled)) = (
            i32::try_from(head.channels),
            i32::try_from(head.streams),
            i32::try_from(head.coupled),
        ) else {
            return unsupported_error("Opus stream counts out of range");
        };
        if head.mapping.len() != head.channels {
            return decode_error("Opus channel mapping length differs from the channel count");
        }
        let mut err = 0i32;
        // SAFETY: `mapping` holds `channels` bytes (checked above) and
        // outlives the call, which copies it; `err` is a valid out pointer.
        let st = unsafe {
            ffi::opus_multistream_decoder_create(
                OPUS_RATE as i32,
                ch,
                streams,
                coupled,
                head.mapping.as_ptr(),
                &mut err,
            )
        };
        match std::ptr::NonNull::new(st) {
            Some(p) if err == ffi::OPUS_OK => Ok(MsDecoder(p)),
            Some(p) => {
                // SAFETY: `p` came from opus_multistream_decoder_create.
                unsafe { ffi::opus_multistream_decoder_destroy(p.as_ptr()) };
                unsupported_error("Opus decoder setup")
            }
            None => unsupported_error("Opus decoder setup"),
        }
    }

    /// Decode one packet into `pcm` (interleaved, `channels` per frame);
    /// an empty packet conceals `plc_frames` frames of loss.
    /// Returns the frames decoded per channel.
    fn decode(
        &mut self,
        data: &[u8],
        pcm: &mut [f32],
        ch: usize,
        plc_frames: usize,
    ) -> Result<usize> {
        let frames = if data.is_empty() {
            plc_frames
        } else {
            MAX_PACKET_FRAMES
        };
        let Ok(len) = i32::try_from(data.len()) else {
            return decode_error("Opus packet larger than 2 GiB");
        };
        if frames == 0 {
            return Ok(0);
        }
        if pcm.len() < frames * ch {
            return decode_error("Opus output buffer too small");
        }
        let ptr = if data.is_empty() {
            std::ptr::null()
        } else {
            data.as_ptr()
        };
        // SAFETY: `ptr` is null (loss) or points at `len` readable bytes;
        // `pcm` holds at least `frames * ch` floats (checked above), the
        // most libopus writes for a frame size of `frames`.
        let n = unsafe {
            ffi::opus_multistream_decode_float(
                self.0.as_ptr(),
                ptr,
                len,
                pcm.as_mut_ptr(),
                frames as i32,
                0,
            )
        };
        match usize::try_from(n) {
            Ok(n) if n <= frames => Ok(n),
            Ok(_) => decode_error("Opus packet longer than 120 ms"),
            Err(_) => decode_error("invalid Opus packet"),
        }
    }

    fn reset(&mut self) {
        // SAFETY: the pointer is live; OPUS_RESET_STATE takes no argument.
        unsafe {
            ffi::opus_multistream_decoder_ctl(self.0.as_ptr(), ffi::OPUS_RESET_STATE);
        }
    }
}

impl Drop for MsDecoder {
    fn drop(&mut self) {
        // SAFETY: the pointer came from opus_multistream_decoder_create and
        // is destroyed exactly once, here.
        unsafe { ffi::opus_multistream_decoder_destroy(self.0.as_ptr()) };
    }
}

/// symphonia [`Decoder`] for Opus packets.
pub struct OpusDec {
    params: CodecParameters,
    dec: MsDecoder,
    head: OpusHead,
    /// Linear output gain from the header.
    gain: f32,
    /// Pre-skip frames still to drop when the demuxer does not trim.
    skip_left: usize,
    /// Frames of the last decoded packet: what a lost (empty) packet
    /// conceals, as libopus's own players do.
    last_frames: usize,
    pcm: Vec<f32>,
    buf: AudioBuffer<f32>,
}

fn layout(n: usize) -> Channels {
    Channels::from_bits_truncate((1u32 << n) - 1)
}

impl Decoder for OpusDec {
    fn try_new(params: &CodecParameters, _opts: &DecoderOptions) -> Result<Self> {
        let extra = match params.extra_data.as_deref() {
            Some(e) => e,
            None => return unsupported_error("Opus stream without an OpusHead header"),
        };
        let head = match parse_head(extra) {
            Ok(h) => h,
            Err(_) => return decode_error("invalid OpusHead header"),
        };
        let dec = MsDecoder::new(&head)?;
        // The pre-skip is dropped here; a demuxer that trims it itself
        // (gapless Ogg) marks the same frames with `trim_start`, and the
        // larger of the two is cut, so it is never cut twice.
        let skip_left = head.pre_skip as usize;
        let gain = 10f32.powf(f32::from(head.gain_q8) / (20.0 * 256.0));
        let spec = SignalSpec::new(OPUS_RATE, layout(head.channels));
        let mut params = params.clone();
        params.with_sample_rate(OPUS_RATE);
        Ok(OpusDec {
            params,
            dec,
            pcm: vec![0.0; MAX_PACKET_FRAMES * head.channels],
            buf: AudioBuffer::new(MAX_PACKET_FRAMES as u64, spec),
            gain,
            skip_left,
            last_frames: 0,
            head,
        })
    }

    fn supported_codecs() -> &'static [CodecDescriptor] {
        &[symphonia::core::support_codec!(
            CODEC_TYPE_OPUS,
            "opus",
            "Opus"
        )]
    }

    fn reset(&mut self) {
        self.dec.reset();
        self.last_frames = 0;
        // A reset follows a seek: the pre-skip belongs to the start of the
        // stream only (RFC 7845 §4.2), and the seek places the frames by
        // their timestamps, pre-skip counted.
        self.skip_left = 0;
    }

    fn codec_params(&self) -> &CodecParameters {
        &self.params
    }

    fn decode(&mut self, packet: &Packet) -> Result<AudioBufferRef<'_>> {
        self.buf.clear();
        let ch = self.head.channels;
        let n = self
            .dec
            .decode(&packet.data, &mut self.pcm, ch, self.last_frames)?;
        self.last_frames = n;
        self.buf.render_reserved(Some(n));
        let order = WAVE_ORDER[ch - 1];
        for (out, &src) in order.iter().enumerate() {
            let plane = self.buf.chan_mut(out);
            for (i, v) in plane.iter_mut().enumerate() {
                *v = self.pcm[i * ch + src] * self.gain;
            }
        }
        let drop = self.skip_left.min(n);
        self.skip_left -= drop;
        let start = drop.max(packet.trim_start() as usize);
        let end = (packet.trim_end() as usize).min(n.saturating_sub(start));
        self.buf.trim(start.min(n), end);
        Ok(self.buf.as_audio_buffer_ref())
    }

    fn finalize(&mut self) -> FinalizeResult {
        FinalizeResult::default()
    }

    fn last_decoded(&self) -> AudioBufferRef<'_> {
        self.buf.as_audio_buffer_ref()
    }
}

/// symphonia's default codecs plus Opus.
pub fn codecs() -> &'static CodecRegistry {
    static REG: OnceLock<CodecRegistry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = CodecRegistry::new();
        symphonia::default::register_enabled_codecs(&mut r);
        r.register_all::<OpusDec>();
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(ch: u8, family: u8, tail: &[u8]) -> Vec<u8> {
        let mut b = b"OpusHead".to_vec();
        b.extend_from_slice(&[1, ch, 0x38, 0x01, 0x80, 0xbb, 0, 0, 0, 0, family]);
        b.extend_from_slice(tail);
        b
    }

    #[test]
    fn head_parses_and_bounds_counts() {
        let h = parse_head(&head(2, 0, &[])).unwrap();
        assert_eq!(
            (h.channels, h.pre_skip, h.streams, h.coupled),
            (2, 312, 1, 1)
        );
        assert!(parse_head(&head(0, 0, &[]))
            .unwrap_err()
            .contains("0 channels"));
        assert!(parse_head(&head(200, 1, &[]))
            .unwrap_err()
            .contains("200 channels"));
        assert!(parse_head(&head(3, 0, &[]))
            .unwrap_err()
            .contains("family 0"));
        assert!(parse_head(&head(2, 1, &[1, 2, 0, 1]))
            .unwrap_err()
            .contains("stream counts"));
        assert!(parse_head(&head(2, 1, &[1, 1, 0, 7]))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_head(&head(2, 1, &[1, 1, 0]))
            .unwrap_err()
            .contains("short"));
        assert!(parse_head(&head(2, 2, &[]))
            .unwrap_err()
            .contains("family 2"));
        assert!(parse_head(b"OpusHea").is_err());
        let h = parse_head(&head(6, 1, &[4, 2, 0, 4, 1, 2, 3, 5])).unwrap();
        assert_eq!((h.streams, h.coupled, h.mapping.len()), (4, 2, 6));
    }

    fn decoder(ch: u8) -> OpusDec {
        let mut params = CodecParameters::new();
        params
            .for_codec(CODEC_TYPE_OPUS)
            .with_extra_data(head(ch, 0, &[]).into_boxed_slice());
        OpusDec::try_new(&params, &DecoderOptions::default()).unwrap()
    }

    fn frames(dec: &mut OpusDec, data: &[u8]) -> Result<usize> {
        let packet = Packet::new_from_slice(0, 0, 0, data);
        dec.decode(&packet).map(|b| b.frames())
    }

    #[test]
    fn packets_decode_conceal_and_fail_with_errors() {
        let mut dec = decoder(2);
        // Nothing decoded yet: a lost packet conceals nothing.
        assert_eq!(frames(&mut dec, &[]).unwrap(), 0);
        // TOC 0xF8: CELT fullband 20 ms, mono, one frame of no bytes (a
        // frame libopus conceals): 960 frames, of which the 312 of the
        // pre-skip are dropped.
        assert_eq!(frames(&mut dec, &[0xF8]).unwrap(), 960 - 312);
        assert_eq!(frames(&mut dec, &[0xF8]).unwrap(), 960);
        // A lost packet conceals as much as the last packet held.
        assert_eq!(frames(&mut dec, &[]).unwrap(), 960);
        // Code 3 (several frames) without its frame-count byte.
        let err = frames(&mut dec, &[0xFB]).unwrap_err();
        assert!(err.to_string().contains("invalid Opus packet"), "{err}");
        // A 120 ms packet is the most one packet holds: 6 x 20 ms frames.
        assert_eq!(frames(&mut dec, &[0xFB, 6]).unwrap(), MAX_PACKET_FRAMES);
        // 7 x 20 ms frames are refused.
        assert!(frames(&mut dec, &[0xFB, 7]).is_err());
        dec.reset();
        assert_eq!(frames(&mut dec, &[]).unwrap(), 0);
        assert_eq!(dec.last_decoded().spec().channels.count(), 2);
    }

    #[test]
    fn wave_order_is_a_permutation() {
        for (n, o) in WAVE_ORDER.iter().enumerate() {
            let mut s = o.to_vec();
            s.sort_unstable();
            assert_eq!(s, (0..=n).collect::<Vec<_>>());
        }
    }
}
