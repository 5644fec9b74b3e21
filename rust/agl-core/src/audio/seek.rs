//! Sample-exact seeking for the symphonia path.
//!
//! `offset`/`duration` read frames `[round(offset * sr), round((offset +
//! duration) * sr))` of the full decode (the concatenated decoder output,
//! after the container's and the codec's trimming). A seek must give the
//! same frames, so it
//!
//! 1. seeks to a point [`SeekRule::preroll`] frames before the target, far
//!    enough back for the decoder to warm up (Opus's pre-roll, the Vorbis
//!    block before the target, the MP3 bit reservoir) and for the demuxer
//!    to land on the packet at or before that point;
//! 2. places the first packet that decodes to frames on the full decode's
//!    timeline from its timestamp ([`SeekRule::position`]: the stamp in
//!    frames, less the Opus pre-skip, which the decoder drops only at the
//!    start of the stream), counts on from there, and cuts the window
//!    exactly;
//! 3. decodes from the start instead when that first frame is not at least
//!    [`SeekRule::warm`] frames before the target (the demuxer landed too
//!    late), so the result is exact either way.
//!
//! A stream whose stamps cannot place a frame exactly (Matroska's
//! millisecond stamps for a codec without a coarser frame grid), AAC (see
//! [`timing`]) and a codec without a rule here are never seeked: they are
//! decoded from the start and the frames before the target are dropped.

use symphonia::core::codecs::{
    CodecParameters, CodecType, CODEC_TYPE_AAC, CODEC_TYPE_FLAC, CODEC_TYPE_MP1, CODEC_TYPE_MP2,
    CODEC_TYPE_MP3, CODEC_TYPE_OPUS, CODEC_TYPE_PCM_F32BE, CODEC_TYPE_PCM_F32LE,
    CODEC_TYPE_PCM_F64BE, CODEC_TYPE_PCM_F64LE, CODEC_TYPE_PCM_S16BE, CODEC_TYPE_PCM_S16LE,
    CODEC_TYPE_PCM_S24BE, CODEC_TYPE_PCM_S24LE, CODEC_TYPE_PCM_S32BE, CODEC_TYPE_PCM_S32LE,
    CODEC_TYPE_PCM_S8, CODEC_TYPE_PCM_U8, CODEC_TYPE_VORBIS,
};

use super::opus;

/// Frames a codec needs decoded before its output matches the full decode
/// (`warm`), the longest packet it has (`packet`) and the grid its packets
/// start on (`grid`, 1 for none), at the stream's rate.
struct CodecTiming {
    warm: u64,
    packet: u64,
    grid: u64,
}

/// The timing of the codecs this module seeks in; `None` for the others.
fn timing(codec: CodecType) -> Option<CodecTiming> {
    let t = |warm, packet, grid| Some(CodecTiming { warm, packet, grid });
    match codec {
        // RFC 7845 §4.6 asks for at least 80 ms before the target, enough to
        // converge to the ear; the band energies (predicted frame to frame)
        // and the pitch post-filter take about 400 ms (19,200 frames at
        // 48 kHz) to give the very samples of a decode from the start.
        // Packets are 2.5 ms (120 frames) to 120 ms.
        CODEC_TYPE_OPUS => t(19_200, opus::MAX_PACKET_FRAMES as u64, 120),
        // A Vorbis packet decodes to the overlap of its block with the one
        // before: the first packet after a seek gives nothing, the second is
        // exact. Blocks are at most 8,192 frames (a packet, 4,096).
        CODEC_TYPE_VORBIS => t(0, 8_192, 1),
        // AAC is not seeked: its noise-substituted bands (PNS) draw from a
        // generator that runs from the start of the stream, so no pre-roll
        // gives the full decode's samples there (a seek differs by up to
        // 0.1 in those bands); it is decoded from the start.
        CODEC_TYPE_AAC => None,
        // The bit reservoir reaches back 511 bytes: up to seven frames at the
        // lowest bitrates, plus one for the overlap.
        CODEC_TYPE_MP1 | CODEC_TYPE_MP2 | CODEC_TYPE_MP3 => t(8 * 1_152, 1_152, 1),
        c if lossless(c) => t(0, 0, 1),
        _ => None,
    }
}

/// Whether a codec gives exactly the samples the file holds (FLAC, PCM).
pub(super) fn lossless(codec: CodecType) -> bool {
    matches!(
        codec,
        CODEC_TYPE_FLAC
            | CODEC_TYPE_PCM_S8
            | CODEC_TYPE_PCM_U8
            | CODEC_TYPE_PCM_S16LE
            | CODEC_TYPE_PCM_S16BE
            | CODEC_TYPE_PCM_S24LE
            | CODEC_TYPE_PCM_S24BE
            | CODEC_TYPE_PCM_S32LE
            | CODEC_TYPE_PCM_S32BE
            | CODEC_TYPE_PCM_F32LE
            | CODEC_TYPE_PCM_F32BE
            | CODEC_TYPE_PCM_F64LE
            | CODEC_TYPE_PCM_F64BE
    )
}

/// How the packets of one stream are placed on the decoded timeline after
/// a seek (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SeekRule {
    /// Frames before the target a seek goes to.
    pub preroll: u64,
    /// Frames after the first decoded one that may differ from the full
    /// decode.
    pub warm: u64,
    /// Frames of the stamp timeline before the decoded one: the Opus
    /// pre-skip, which the decoder drops at the start of the stream only.
    lead: u64,
    /// The stamp of the stream's first frame (an Ogg stream cut from a
    /// longer one starts at its granule position, not at 0).
    origin: u64,
    /// Packets start on multiples of this many frames of the stamp timeline.
    grid: u64,
    /// Frames per stamp tick, as `num / den`.
    num: u128,
    den: u128,
}

impl SeekRule {
    /// The rule for a stream at `sr` Hz; `None` when its stamps cannot
    /// place a frame exactly or its codec has no timing here (such a stream
    /// is decoded from the start).
    pub fn new(cp: &CodecParameters, sr: u32) -> Option<Self> {
        let t = timing(cp.codec)?;
        let (num, den) = match cp.time_base {
            Some(tb) if tb.numer > 0 && tb.denom > 0 => {
                (tb.numer as u128 * sr as u128, tb.denom as u128)
            }
            Some(_) => return None,
            None => (1, 1),
        };
        // A stamp is rounded to its tick: it places a frame when the tick is
        // at most one frame, or when the packets sit on a grid the rounding
        // cannot leave (Opus's 120 frames against Matroska's 48 per ms).
        let grid = if num <= den { 1 } else { t.grid };
        if num > den && num >= grid as u128 * den {
            return None;
        }
        let lead = match cp.codec {
            CODEC_TYPE_OPUS => cp
                .extra_data
                .as_deref()
                .and_then(|e| opus::parse_head(e).ok())
                .map(|h| u64::from(h.pre_skip))?,
            _ => 0,
        };
        Some(SeekRule {
            preroll: t.warm + t.packet,
            warm: t.warm,
            lead,
            origin: cp.start_ts,
            grid,
            num,
            den,
        })
    }

    /// The stamp to seek to for a window starting at frame `start` of the
    /// decoded timeline; `None` when the pre-roll reaches back to the start
    /// of the stream (decoding from the start is then as cheap, and leaves
    /// the start-of-stream trimming to the decoder).
    pub fn target(&self, start: u64) -> Option<u64> {
        let at = start.checked_sub(self.preroll)?.checked_sub(1)?;
        let frame = (at + self.lead) as u128;
        u64::try_from(frame * self.den / self.num)
            .ok()?
            .checked_add(self.origin)
    }

    /// The frame of the decoded timeline a packet stamped `ts` starts at;
    /// `None` when the stamp falls before the decoded timeline.
    pub fn position(&self, ts: u64) -> Option<u64> {
        let ts = ts.checked_sub(self.origin)?;
        let q = (ts as u128 * self.num + self.den / 2) / self.den;
        let g = self.grid as u128;
        let snapped = (q + g / 2) / g * g;
        u64::try_from(snapped).ok()?.checked_sub(self.lead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use symphonia::core::codecs::CODEC_TYPE_NULL;
    use symphonia::core::units::TimeBase;

    fn params(codec: CodecType, tb: TimeBase) -> CodecParameters {
        let mut cp = CodecParameters::new();
        cp.for_codec(codec).with_time_base(tb);
        cp
    }

    fn opus_head(pre_skip: u16) -> Box<[u8]> {
        let mut b = b"OpusHead".to_vec();
        b.extend_from_slice(&[1, 2]);
        b.extend_from_slice(&pre_skip.to_le_bytes());
        b.extend_from_slice(&[0x80, 0xbb, 0, 0, 0, 0, 0]);
        b.into()
    }

    #[test]
    fn frame_stamps_place_frames_exactly() {
        let r = SeekRule::new(&params(CODEC_TYPE_VORBIS, TimeBase::new(1, 44_100)), 44_100);
        let r = r.unwrap();
        assert_eq!(r.position(12_345), Some(12_345));
        assert_eq!(r.target(100_000), Some(100_000 - 8_192 - 1));
        assert_eq!(r.target(8_192), None);
        // a stream that starts at stamp 1,000,000
        let mut cp = params(CODEC_TYPE_VORBIS, TimeBase::new(1, 44_100));
        cp.with_start_ts(1_000_000);
        let r = SeekRule::new(&cp, 44_100).unwrap();
        assert_eq!(r.position(1_012_345), Some(12_345));
        assert_eq!(r.position(999_999), None);
        assert_eq!(r.target(100_000), Some(1_000_000 + 100_000 - 8_192 - 1));
        // a timescale of twice the rate: half-frame ticks
        let r = SeekRule::new(&params(CODEC_TYPE_FLAC, TimeBase::new(1, 88_200)), 44_100);
        assert_eq!(r.unwrap().position(2_048), Some(1_024));
        // AAC is decoded from the start (its noise bands)
        let tb = TimeBase::new(1, 44_100);
        assert!(SeekRule::new(&params(CODEC_TYPE_AAC, tb), 44_100).is_none());
    }

    #[test]
    fn opus_stamps_count_the_pre_skip() {
        let mut cp = params(CODEC_TYPE_OPUS, TimeBase::new(1, 48_000));
        cp.with_extra_data(opus_head(312));
        let r = SeekRule::new(&cp, 48_000).unwrap();
        assert_eq!(r.position(960 + 312), Some(960));
        assert_eq!(r.position(100), None);
        assert_eq!(r.target(48_000), Some(48_000 - 19_200 - 5_760 - 1 + 312));
        assert_eq!(r.target(24_000), None);
        // without a readable OpusHead there is no rule
        cp.extra_data = None;
        assert!(SeekRule::new(&cp, 48_000).is_none());
    }

    #[test]
    fn millisecond_stamps_need_a_grid() {
        // WebM: 1 ms ticks are 48 frames, under the 120-frame Opus grid.
        let ms = TimeBase::new(1_000_000, 1_000_000_000);
        let mut cp = params(CODEC_TYPE_OPUS, ms);
        cp.with_extra_data(opus_head(312));
        let r = SeekRule::new(&cp, 48_000).unwrap();
        // 2.5 ms packets: 7 ms stamps 120 * 3 = 360 frames (7.5 ms rounded)
        assert_eq!(r.position(7), Some(360 - 312));
        assert_eq!(r.position(8), Some(360 - 312));
        // Vorbis in Matroska: 44.1 frames per tick and no grid
        assert!(SeekRule::new(&params(CODEC_TYPE_VORBIS, ms), 44_100).is_none());
        // nanosecond ticks resolve every frame
        let ns = TimeBase::new(1, 1_000_000_000);
        let r = SeekRule::new(&params(CODEC_TYPE_VORBIS, ns), 44_100).unwrap();
        assert_eq!(r.position(1_000_000_000), Some(44_100));
    }

    #[test]
    fn codecs_without_timing_are_not_seeked() {
        let tb = TimeBase::new(1, 44_100);
        assert!(SeekRule::new(&params(CODEC_TYPE_NULL, tb), 44_100).is_none());
    }
}
