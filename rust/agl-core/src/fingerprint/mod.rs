//! Landmark audio fingerprints: spectral peak pairs hashed with their time
//! offset, for finding the same recording again after re-encoding,
//! resampling, gain, downmix, added noise and trims.
//!
//! A clip is downmixed, resampled to [`ANALYSIS_SR`] with the core's
//! resampler ([`Quality::Fast`]) and cut into Hann frames of [`N_FFT`]
//! samples (128 ms) every [`HOP`] samples (32 ms). The power of each pair
//! of adjacent FFT bins is summed into one *band* of [`BAND_BINS`] bins
//! (15.625 Hz), and the log band power between [`LO_BAND`] and [`HI_BAND`]
//! is whitened (each band's mean over the clip is subtracted, which removes
//! a static equaliser or codec tilt and the clip gain). A *peak* is a point
//! that is the largest of its neighbourhood of `±`[`FREQ_NB`] bands and
//! `±`[`TIME_NB`] frames and stands at least [`MIN_PROMINENCE`] above its
//! band's mean. Each peak (the anchor) is paired with the next [`FAN_OUT`]
//! peaks at most [`MAX_DT`] frames later and [`MAX_DF`] bands away; the
//! pair `(f1, f2, dt)` is packed into a [`HASH_BITS`]-bit hash stored with
//! the anchor's frame.
//!
//! The frame is four hops long: a trim that is not a whole number of hops
//! moves the frame grid by up to half a hop, an eighth of a frame, so the
//! spectra of the shifted frames stay close and the same peaks are found
//! (with a frame of two hops, noise-like textures lost most of their peaks
//! under such a shift).
//!
//! A steady tone, silence or digital zero has no band that rises above its
//! own mean, so it yields no peaks; a strictly periodic signal (a click
//! train) repeats a handful of hashes. Either way the clip has fewer than
//! [`MIN_DISTINCT`] distinct hashes and is *not fingerprintable*: pairing
//! never matches it with anything (see [`pair`]).

mod pair;
mod peaks;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::error::{AglError, Result};
use crate::parallel::Cancel;
use crate::resample::{resample, Quality};
use crate::spectral::plans::rfft_plan;
use crate::spectral::rfft::RealFft;
use crate::window::Window;

pub use pair::{
    hash_counts, pair, pair_with, Match, PairItem, PairOptions, MAX_POSTINGS, MIN_MATCHES,
    MIN_SCORE,
};

/// Analysis sample rate in Hz: every clip is resampled to it.
pub const ANALYSIS_SR: u32 = 8000;
/// Frame length in samples at [`ANALYSIS_SR`] (128 ms).
pub const N_FFT: usize = 1024;
/// Frame step in samples at [`ANALYSIS_SR`] (32 ms).
pub const HOP: usize = 256;
/// FFT bins summed into one band (15.625 Hz).
pub const BAND_BINS: usize = 2;
/// Lowest band used (62.5 Hz).
pub const LO_BAND: usize = 4;
/// One past the highest band used (3.375 kHz, inside the resampler's pass
/// band).
pub const HI_BAND: usize = 216;
/// Half-width of a peak's neighbourhood in bands.
pub const FREQ_NB: usize = 12;
/// Half-width of a peak's neighbourhood in frames.
pub const TIME_NB: usize = 8;
/// Least height of a peak above its band's mean log power (natural log of
/// power: 1.5 is 6.5 dB).
pub const MIN_PROMINENCE: f32 = 1.5;
/// Targets paired with each anchor.
pub const FAN_OUT: usize = 3;
/// Largest anchor-to-target distance in frames (2 s).
pub const MAX_DT: u32 = 63;
/// Largest anchor-to-target distance in bands.
pub const MAX_DF: usize = 64;
/// Bits of a hash: 8 for the anchor band, 8 for the target band, 6 for `dt`.
pub const HASH_BITS: u32 = 22;
/// Fewest distinct hashes a fingerprintable clip has; below it a clip is
/// never paired.
pub const MIN_DISTINCT: usize = 20;
/// Power floor (relative to a full-scale sine's peak bin, -100 dB): quieter
/// bands count as this level, so digital silence has no peaks.
const FLOOR_ABS: f32 = 1e-10;
/// Power floor relative to the clip's loudest band (-70 dB): what lies
/// further below (window leakage of a tone, codec noise) has no peaks.
const FLOOR_CLIP: f32 = 1e-7;

/// One clip's fingerprint: hashes with their anchor frames, in frame order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fingerprint {
    pub hashes: Vec<u32>,
    /// Anchor frame of each hash (frames of [`HOP`] samples).
    pub times: Vec<u32>,
    /// Number of distinct values in `hashes`.
    pub distinct: usize,
    /// Frames of the analysis (the clip's length in hops).
    pub n_frames: u32,
}

impl Fingerprint {
    /// Whether the clip has enough distinct hashes to be paired.
    pub fn fingerprintable(&self) -> bool {
        fingerprintable(self.distinct)
    }
}

/// The rule for pairing: at least [`MIN_DISTINCT`] distinct hashes.
pub fn fingerprintable(distinct: usize) -> bool {
    distinct >= MIN_DISTINCT
}

/// Number of distinct values of `hashes`.
pub fn count_distinct(hashes: &[u32]) -> usize {
    let mut v = hashes.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// Frames the analysis cuts from `n` samples at [`ANALYSIS_SR`].
pub fn n_frames(n: usize) -> usize {
    if n < N_FFT {
        0
    } else {
        (n - N_FFT) / HOP + 1
    }
}

fn plan() -> &'static (Arc<RealFft>, Vec<f32>) {
    static PLAN: OnceLock<(Arc<RealFft>, Vec<f32>)> = OnceLock::new();
    PLAN.get_or_init(|| {
        let w = Window::Hann { periodic: true }
            .coefficients(N_FFT)
            .unwrap_or_else(|_| vec![1.0; N_FFT]);
        (rfft_plan(N_FFT), w)
    })
}

/// Check a clip: at least one channel, channels of equal non-zero length,
/// finite samples.
fn check_clip(channels: &[&[f32]]) -> Result<usize> {
    let n = match channels.first() {
        Some(c) => c.len(),
        None => return Err(AglError::Shape("audio has no channels".into())),
    };
    if n == 0 {
        return Err(AglError::Shape("audio buffer is empty".into()));
    }
    for (i, c) in channels.iter().enumerate() {
        if c.len() != n {
            return Err(AglError::Shape(format!(
                "channel {i} has {} samples, channel 0 has {n}",
                c.len()
            )));
        }
        if let Some(k) = c.iter().position(|v| !v.is_finite()) {
            return Err(AglError::NonFinite {
                what: format!("audio channel {i}"),
                index: k,
            });
        }
    }
    Ok(n)
}

/// Mean of the channels (the one channel itself, borrowed, when mono).
fn downmix<'a>(channels: &[&'a [f32]], n: usize) -> Cow<'a, [f32]> {
    if channels.len() == 1 {
        return Cow::Borrowed(channels[0]);
    }
    let k = 1.0 / channels.len() as f32;
    let mut out: Vec<f32> = channels[0].iter().map(|v| v * k).collect();
    for c in &channels[1..] {
        out.iter_mut().zip(c.iter()).for_each(|(o, v)| *o += v * k);
    }
    debug_assert_eq!(out.len(), n);
    Cow::Owned(out)
}

/// Whitened log band power `[frames, HI_BAND - LO_BAND]` of `x` at the
/// analysis rate: `ln(max(power, floor)) - mean over frames`.
fn whitened(x: &[f32]) -> Result<(Vec<f32>, usize)> {
    let n_t = n_frames(x.len());
    let width = HI_BAND - LO_BAND;
    let bins = LO_BAND * BAND_BINS..HI_BAND * BAND_BINS;
    let (fft, window) = plan();
    let mut frame = fft.make_input_vec();
    let mut spec = fft.make_output_vec();
    let mut scratch = fft.make_scratch_vec();
    let mut s = Vec::new();
    crate::error::try_grow(&mut s, n_t * width, "fingerprint spectrogram")?;
    let full_scale = (N_FFT as f32 / 4.0).powi(2);
    for t in 0..n_t {
        let seg = &x[t * HOP..t * HOP + N_FFT];
        frame
            .iter_mut()
            .zip(seg.iter().zip(window.iter()))
            .for_each(|(f, (v, w))| *f = v * w);
        fft.process_with_scratch(&mut frame, &mut spec, &mut scratch)?;
        s.extend(
            spec[bins.clone()]
                .chunks_exact(BAND_BINS)
                .map(|band| band.iter().map(|c| c.norm_sqr()).sum::<f32>()),
        );
    }
    let loudest = s.iter().fold(0.0f32, |a, &b| a.max(b));
    let floor = (full_scale * FLOOR_ABS).max(loudest * FLOOR_CLIP);
    s.iter_mut().for_each(|v| *v = v.max(floor));
    crate::fastmath::ln_inplace(&mut s);
    if n_t > 0 {
        let mut mean = vec![0.0f64; width];
        for row in s.chunks_exact(width) {
            mean.iter_mut().zip(row).for_each(|(m, v)| *m += *v as f64);
        }
        let mean: Vec<f32> = mean.iter().map(|m| (m / n_t as f64) as f32).collect();
        for row in s.chunks_exact_mut(width) {
            row.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
        }
    }
    Ok((s, n_t))
}

/// Fingerprint of one clip given as planar channels at `sr` Hz.
pub fn fingerprint(channels: &[&[f32]], sr: u32) -> Result<Fingerprint> {
    let n = check_clip(channels)?;
    crate::resample::check_rates(sr, ANALYSIS_SR)?;
    let mono = downmix(channels, n);
    let x = if sr == ANALYSIS_SR {
        mono
    } else {
        Cow::Owned(
            resample(&[&mono], sr, ANALYSIS_SR, Quality::Fast)?
                .pop()
                .unwrap_or_default(),
        )
    };
    let (s, n_t) = whitened(&x)?;
    let found = peaks::find(&s, n_t, HI_BAND - LO_BAND);
    let (hashes, times) = peaks::landmarks(&found);
    let distinct = count_distinct(&hashes);
    Ok(Fingerprint {
        hashes,
        times,
        distinct,
        n_frames: u32::try_from(n_t).unwrap_or(u32::MAX),
    })
}

/// One clip of a batch: planar channels and their rate.
pub struct Clip<'a> {
    pub channels: Vec<&'a [f32]>,
    pub sr: u32,
}

/// Fingerprints of a batch of clips, in parallel (item order kept); a
/// failing clip fails the batch with its error.
pub fn fingerprint_batch(
    clips: &[Clip<'_>],
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Fingerprint>> {
    crate::batch::map_items(clips.len(), n_threads, cancel, |i| {
        fingerprint(&clips[i].channels, clips[i].sr)
    })
}

#[cfg(test)]
mod tests;
