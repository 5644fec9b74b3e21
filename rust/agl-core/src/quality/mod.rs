//! Acoustic quality metrics of a clip (AGL1K's four filters) and their
//! frame-wise forms.
//!
//! Clip-level metrics, one row per clip ([`QualityMetrics`]):
//!
//! * `rms`: `sqrt(mean(x^2))` over the whole clip.
//! * `flatness`: geometric over arithmetic mean of the Welch power spectral
//!   density. Estimator: periodic Hann segments of `welch_nperseg` samples
//!   (shortened to the clip length when the clip is shorter), 50% overlap,
//!   each segment's mean removed (scipy's `detrend='constant'`), one-sided
//!   density scaling (`1 / (sr * sum(w^2))`, interior bins doubled), segments
//!   averaged by their mean; values are floored at `amin` before the means.
//!   This is `scipy.signal.welch(x, sr, nperseg=n)` followed by the ratio.
//! * `clipping_ratio`: the paper's `#{n : |x[n]| = max|x|} / N`; `0` for a
//!   clip whose peak is zero (no peak, nothing clipped).
//! * `full_scale_ratio`: `#{n : |x[n]| >= threshold} / N`, samples at or
//!   above full scale (threshold default 0.999).
//! * `complexity`: the paper's `AC = sum_f sum_t |E[f,t+1] - E[f,t]| /
//!   sum_t E[f,t]` with the band-energy matrix `E` the power spectrogram
//!   (`|STFT|^2`, one band per frequency bin).
//! * `aci`: the acoustic complexity index of Pieretti et al. as scikit-maad
//!   computes it, the same sum on the amplitude spectrogram `|STFT|`.
//!
//! In both complexity sums a band whose energy is zero over the whole clip
//! contributes 0 (scikit-maad gives NaN there).

use crate::batch::{map_items, run_framewise, FrameOutput, Layout, RunOpts};
use crate::error::{check_finite, AglError, Result};
use crate::fastmath::vectorized_wide;
use crate::parallel::Cancel;
use crate::spectral::lanes::LANES;
use crate::spectral::{
    reflect_index, run_blockwise, FftScratch, LaneStft, PadMode, Source, SpectralBatch, StftParams,
    StftPlan,
};
use num_complex::Complex32;

mod welch;
use welch::WelchPass;
pub use welch::{welch_psd, WelchScratch};

/// Clip-level quality metrics (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualityMetrics {
    pub rms: f64,
    pub flatness: f64,
    pub clipping_ratio: f64,
    pub full_scale_ratio: f64,
    pub complexity: f64,
    pub aci: f64,
}

/// Parameters of [`quality_batch`].
#[derive(Debug, Clone, PartialEq)]
pub struct QualityParams {
    pub sr: f64,
    /// Welch segment length for the clip-level flatness.
    pub welch_nperseg: usize,
    /// Floor applied to PSD values before the flatness means.
    pub amin: f64,
    /// Threshold of the full-scale clipping variant.
    pub full_scale_threshold: f32,
    /// STFT of the complexity metrics (`center=false`, periodic Hann).
    pub n_fft: usize,
    pub hop_length: usize,
}

impl QualityParams {
    pub fn new(sr: f64) -> Self {
        QualityParams {
            sr,
            welch_nperseg: 1024,
            amin: 1e-10,
            full_scale_threshold: CLIP_LEVEL,
            n_fft: QUALITY_N_FFT,
            hop_length: 256,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if !(self.sr.is_finite() && self.sr > 0.0) {
            return Err(AglError::param(
                "sr",
                self.sr,
                "must be a positive sample rate in Hz",
            ));
        }
        if self.welch_nperseg < 2 {
            return Err(AglError::param(
                "welch_nperseg",
                self.welch_nperseg,
                "must be >= 2",
            ));
        }
        if !(self.amin.is_finite() && self.amin > 0.0) {
            return Err(AglError::param("amin", self.amin, "must be > 0"));
        }
        if !(self.full_scale_threshold.is_finite() && self.full_scale_threshold > 0.0) {
            return Err(AglError::param(
                "full_scale_threshold",
                self.full_scale_threshold,
                "must be > 0",
            ));
        }
        if self.n_fft < 2 || self.hop_length == 0 {
            return Err(AglError::InvalidParameter {
                name: "n_fft",
                value: self.n_fft.to_string(),
                reason: format!(
                    "must be >= 2 with hop_length >= 1 (hop_length={})",
                    self.hop_length
                ),
            });
        }
        Ok(())
    }
}

/// Root mean square of a clip (f64 accumulation); 0 for an empty clip.
pub fn clip_rms(x: &[f32]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / x.len() as f64).sqrt()
}

/// Lanes of [`ClipStats`]: four AVX2 chains of f64 squares.
const STAT_LANES: usize = 16;

/// Sample statistics of a clip, fed block by block (every block but the
/// last a multiple of [`STAT_LANES`] long): the sum of squares (f64), the
/// peak magnitude, the samples at the peak and those at or above a
/// threshold. Each lane keeps its own peak and the count of samples equal
/// to it, so the count at the clip's peak needs no second pass. A NaN or an
/// infinity makes the sum of squares non-finite (squares of finite f32
/// values cannot overflow f64), which [`ClipStats::finite`] reports.
#[derive(Clone, Copy)]
struct ClipStats {
    sq: [f64; STAT_LANES],
    pk: [f32; STAT_LANES],
    at_pk: [u64; STAT_LANES],
    full: [u64; STAT_LANES],
    threshold: f32,
}

impl ClipStats {
    fn new(threshold: f32) -> Self {
        ClipStats {
            sq: [0.0; STAT_LANES],
            pk: [0.0; STAT_LANES],
            at_pk: [0; STAT_LANES],
            full: [0; STAT_LANES],
            threshold,
        }
    }

    #[inline(always)]
    fn lane(&mut self, l: usize, v: f32) {
        let a = v.abs();
        self.sq[l] += (v as f64) * (v as f64);
        self.at_pk[l] = if a > self.pk[l] {
            1
        } else {
            self.at_pk[l] + (a == self.pk[l]) as u64
        };
        self.pk[l] = self.pk[l].max(a);
        self.full[l] += (a >= self.threshold) as u64;
    }

    #[inline(always)]
    fn feed(&mut self, x: &[f32]) {
        let chunks = x.chunks_exact(STAT_LANES);
        let rest = chunks.remainder();
        for c in chunks {
            for (l, &v) in c.iter().enumerate() {
                self.lane(l, v);
            }
        }
        for &v in rest {
            self.lane(0, v);
        }
    }

    fn sum_squares(&self) -> f64 {
        self.sq.iter().sum()
    }

    fn finite(&self) -> bool {
        self.sum_squares().is_finite()
    }

    fn peak(&self) -> f32 {
        self.pk.iter().fold(0.0f32, |m, &v| m.max(v))
    }

    /// Samples whose magnitude equals the clip's peak (0 when the peak is 0:
    /// a silent clip has nothing clipped).
    fn at_peak(&self) -> u64 {
        let peak = self.peak();
        if peak <= 0.0 {
            return 0;
        }
        self.pk
            .iter()
            .zip(&self.at_pk)
            .filter(|(&p, _)| p == peak)
            .map(|(_, &c)| c)
            .sum()
    }

    fn full(&self) -> u64 {
        self.full.iter().sum()
    }
}

/// [`ClipStats`] of a whole clip, compiled for AVX2 where the CPU has it.
fn clip_stats(x: &[f32], threshold: f32) -> ClipStats {
    crate::fastmath::vectorized(
        #[inline(always)]
        || {
            let mut st = ClipStats::new(threshold);
            st.feed(x);
            st
        },
    )
}

/// Absolute level counted as clipped by [`clip_levels`] (full scale minus
/// about 0.01 dB), the curation pipeline's threshold, in double precision
/// (the value shown to Python).
pub const CLIP_LEVEL_F64: f64 = 0.999;

/// [`CLIP_LEVEL_F64`] as the kernels compare it (the nearest `f32`).
pub const CLIP_LEVEL: f32 = CLIP_LEVEL_F64 as f32;

/// Default FFT length of the complexity metrics' STFT, in samples.
pub const QUALITY_N_FFT: usize = 512;

/// `[peak |x|, RMS, share of samples with |x| >= threshold, share of
/// samples whose |x| equals the peak]` over all `parts` of a clip (its
/// channels) in one pass; zeros for an empty clip; `None` when a sample is
/// NaN or infinite. The first three equal [`levels_batch`]'s for the parts
/// laid end to end (up to the order of the f64 sum of squares). For one part
/// the RMS, the share at the peak and the share at or above `threshold` are
/// bit for bit the `rms`, `clipping_ratio` and `full_scale_ratio` (at
/// `full_scale_threshold = threshold`) of [`quality_batch`], which can take
/// them as [`KnownStats`] instead of measuring them again.
pub fn clip_levels(parts: &[&[f32]], threshold: f32) -> Option<[f64; 4]> {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    let st = crate::fastmath::vectorized(
        #[inline(always)]
        || {
            let mut st = ClipStats::new(threshold);
            for p in parts {
                st.feed(p);
            }
            st
        },
    );
    if !st.finite() {
        return None;
    }
    if n == 0 {
        return Some([0.0; 4]);
    }
    let nf = n as f64;
    Some([
        st.peak() as f64,
        (st.sum_squares() / nf).sqrt(),
        st.full() as f64 / nf,
        st.at_peak() as f64 / nf,
    ])
}

/// The paper's clipping ratio and the full-scale variant.
pub fn clipping_ratios(x: &[f32], threshold: f32) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let st = clip_stats(x, threshold);
    let n = x.len() as f64;
    (st.at_peak() as f64 / n, st.full() as f64 / n)
}

/// Geometric over arithmetic mean of `max(p, amin)`.
///
/// The geometric mean is taken from a running product whose binary exponent
/// is moved into an integer at every step (exact, and one logarithm per
/// call instead of one per value).
pub fn flatness_of(p: impl Iterator<Item = f64>, amin: f64) -> f64 {
    let (mut mant, mut exp, mut sum, mut n) = (1.0f64, 0i64, 0.0f64, 0usize);
    for v in p {
        flat_step(v, amin, &mut mant, &mut exp, &mut sum);
        n += 1;
    }
    flat_finish(mant, exp, sum, n)
}

/// One value of [`flatness_of`]: floored, added to the sum and multiplied
/// into the running product, whose binary exponent moves into `exp`.
#[inline(always)]
fn flat_step(v: f64, amin: f64, mant: &mut f64, exp: &mut i64, sum: &mut f64) {
    const EXP_MASK: u64 = 0x7ff << 52;
    const ONE_EXP: u64 = 1023 << 52;
    let v = if v.is_finite() { v.max(amin) } else { amin }.max(f64::MIN_POSITIVE);
    *sum += v;
    let bits = (*mant * v).to_bits();
    *exp += ((bits & EXP_MASK) >> 52) as i64 - 1023;
    *mant = f64::from_bits((bits & !EXP_MASK) | ONE_EXP);
}

/// [`flatness_of`] from its running product, sum and count.
fn flat_finish(mant: f64, exp: i64, sum: f64, n: usize) -> f64 {
    if n == 0 || sum <= 0.0 {
        return 1.0;
    }
    let log_mean = (exp as f64 * std::f64::consts::LN_2 + mant.ln()) / n as f64;
    log_mean.exp() / (sum / n as f64)
}

/// [`flatness_of`] of each of the [`LANES`] frames of a block (bin-major
/// spectra, `|X|^2` through `mags`), all lanes advanced together bin by
/// bin: the same operations per lane as [`flatness_of`], so the same value.
#[inline(always)]
fn lane_flatness(
    re: &[crate::spectral::lanes::V],
    im: &[crate::spectral::lanes::V],
    amin: f64,
    mags: impl Fn(f32) -> f64,
) -> [f64; LANES] {
    let (mut mant, mut exp, mut sum) = ([1.0f64; LANES], [0i64; LANES], [0.0f64; LANES]);
    for (r, i) in re.iter().zip(im) {
        for l in 0..LANES {
            let v = mags(r.0[l] * r.0[l] + i.0[l] * i.0[l]);
            flat_step(v, amin, &mut mant[l], &mut exp[l], &mut sum[l]);
        }
    }
    std::array::from_fn(|l| flat_finish(mant[l], exp[l], sum[l], re.len()))
}

/// Complexity sums of a row-major `[n_bands, n_frames]` matrix: the
/// per-band values `sum_t |E[f,t+1]-E[f,t]| / sum_t E[f,t]` (0 for a band
/// with zero energy) and their total.
pub fn complexity_of(e: &[f64], n_bands: usize, n_frames: usize) -> (Vec<f64>, f64) {
    let mut per = vec![0.0; n_bands];
    if n_frames == 0 {
        return (per, 0.0);
    }
    for (f, p) in per.iter_mut().enumerate() {
        let row = &e[f * n_frames..(f + 1) * n_frames];
        let den: f64 = row.iter().sum();
        let num: f64 = row.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
        *p = if den > 0.0 { num / den } else { 0.0 };
    }
    let total = per.iter().sum();
    (per, total)
}

/// Frames whose complexity terms are summed in f32 before they are added
/// to the f64 totals: a partial sum of at most this many terms is within
/// `64 * 2^-24` (about 4e-6) of exact, so the totals keep that relative
/// accuracy on clips of any length while the per-frame update runs eight
/// lanes wide.
const PARTIAL_FRAMES: usize = 64;

/// Per-band running sums of the complexity metrics, one array per quantity
/// (so the per-frame update vectorises): the previous power and amplitude,
/// the sums of their absolute differences and their sums, in f32 over up to
/// [`PARTIAL_FRAMES`] frames and in f64 across them.
#[derive(Default)]
struct ComplexitySums {
    prev_pw: Vec<f32>,
    prev_am: Vec<f32>,
    /// Partial sums: `|d pw|`, `pw`, `|d am|`, `am`.
    part: [Vec<f32>; 4],
    total: [Vec<f64>; 4],
    frames: usize,
}

impl ComplexitySums {
    fn reset(&mut self, nb: usize) {
        for v in [&mut self.prev_pw, &mut self.prev_am]
            .into_iter()
            .chain(&mut self.part)
        {
            v.clear();
            v.resize(nb, 0.0);
        }
        for v in &mut self.total {
            v.clear();
            v.resize(nb, 0.0);
        }
        self.frames = 0;
    }

    #[inline(always)]
    fn flush(&mut self) {
        for (t, p) in self.total.iter_mut().zip(&mut self.part) {
            for (tv, pv) in t.iter_mut().zip(p.iter_mut()) {
                *tv += *pv as f64;
                *pv = 0.0;
            }
        }
    }

    #[inline(always)]
    fn add(&mut self, spectrum: &[Complex32]) {
        let nb = self.prev_pw.len();
        let spec = &spectrum[..nb];
        let (ppw, pam) = (&mut self.prev_pw[..nb], &mut self.prev_am[..nb]);
        let [dpw, spw, dam, sam] = &mut self.part;
        let (dpw, spw, dam, sam) = (
            &mut dpw[..nb],
            &mut spw[..nb],
            &mut dam[..nb],
            &mut sam[..nb],
        );
        if self.frames == 0 {
            // The first frame: no difference yet.
            for k in 0..nb {
                let c = spec[k];
                let pw = c.re * c.re + c.im * c.im;
                let am = pw.sqrt();
                (ppw[k], pam[k]) = (pw, am);
                spw[k] += pw;
                sam[k] += am;
            }
        } else {
            for k in 0..nb {
                let c = spec[k];
                let pw = c.re * c.re + c.im * c.im;
                let am = pw.sqrt();
                dpw[k] += (pw - ppw[k]).abs();
                dam[k] += (am - pam[k]).abs();
                (ppw[k], pam[k]) = (pw, am);
                spw[k] += pw;
                sam[k] += am;
            }
        }
        self.frames += 1;
        if self.frames.is_multiple_of(PARTIAL_FRAMES) {
            self.flush();
        }
    }

    fn totals(&mut self) -> (f64, f64) {
        self.flush();
        let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        let [dpw, spw, dam, sam] = &self.total;
        let ac = dpw.iter().zip(spw).map(|(&n, &d)| ratio(n, d));
        let aci = dam.iter().zip(sam).map(|(&n, &d)| ratio(n, d));
        (ac.sum(), aci.sum())
    }
}

/// Samples per block of the one pass over a clip: the sample statistics,
/// the Welch segments and the STFT frames that end in a block are taken
/// while it is in cache (the clip itself is read from memory once).
const BLOCK: usize = 1 << 14;

/// The complexity STFT of one clip, frame by frame: the paper's AC (power
/// spectrogram) and scikit-maad's ACI (amplitude spectrogram). Each frame
/// gets its own real FFT: both metrics sum frame-to-frame differences, and
/// frames paired into one complex FFT would carry different round-off (a
/// constant clip would no longer score 0, as librosa + scikit-maad give).
/// The frame-batched transform ([`LaneStft`]) is not used here: at
/// `n_fft = 512` it is only a few percent faster than one real FFT per
/// frame, and its bin-major spectra make the frame-to-frame sums walk about
/// 100 KB per block of frames instead of a few KB per frame, which cost
/// more than the transform saves.
struct ComplexityPass<'a> {
    src: Source<'a>,
    plan: &'a StftPlan,
    fft: &'a mut FftScratch,
    acc: &'a mut ComplexitySums,
    n_frames: usize,
    hop: usize,
    n_fft: usize,
    t: usize,
}

impl ComplexityPass<'_> {
    /// Take every remaining frame that ends at or before sample `until`.
    #[inline(always)]
    fn advance(&mut self, until: usize) {
        while self.t < self.n_frames && self.t * self.hop + self.n_fft <= until {
            self.plan.transform_frame(&self.src, self.t, self.fft);
            self.acc.add(&self.fft.spectrum);
            self.t += 1;
        }
    }
}

/// Sample statistics of a clip measured already (by the decoder's levels
/// pass, [`clip_levels`]): `rms`, `clipping_ratio`, `full_scale_ratio`.
/// [`quality_batch_with`] then takes them as they are and reads the clip
/// only for its spectra; the caller vouches that the clip is finite.
pub type KnownStats = [f64; 3];

/// One clip's working memory: the Welch segment buffers (none on the lane
/// path), the complexity STFT's FFT scratch and its sums.
struct ClipScratch {
    welch: Option<WelchScratch>,
    stft: FftScratch,
    acc: ComplexitySums,
}

/// Clip-level metrics of one clip, with per-worker FFT scratch; a NaN or an
/// infinity in the clip is a [`AglError::NonFinite`] naming `item` (unless
/// its statistics are `known`).
fn clip_metrics(
    x: &[f32],
    item: usize,
    p: &QualityParams,
    known: Option<&KnownStats>,
    plan: &StftPlan,
    scratch: &mut ClipScratch,
) -> Result<QualityMetrics> {
    // The closure must inline into the AVX2 copy for its loops to use it.
    let (st, m) = crate::fastmath::vectorized(
        #[inline(always)]
        || match known {
            // One copy per case, so the statistics' loop is not behind a
            // branch in the block loop.
            None => clip_metrics_impl::<false>(x, p, None, plan, scratch),
            Some(_) => clip_metrics_impl::<true>(x, p, known, plan, scratch),
        },
    );
    if !st.finite() {
        check_finite(x, &format!("audio buffer (item {item})"))?;
    }
    Ok(m)
}

#[inline(always)]
fn clip_metrics_impl<const KNOWN: bool>(
    x: &[f32],
    p: &QualityParams,
    known: Option<&KnownStats>,
    plan: &StftPlan,
    scratch: &mut ClipScratch,
) -> (ClipStats, QualityMetrics) {
    let ClipScratch { welch, stft, acc } = scratch;
    let mut st = ClipStats::new(p.full_scale_threshold);
    let mut w = WelchPass::new(x, p.welch_nperseg, welch);
    let nb = p.n_fft / 2 + 1;
    acc.reset(nb);
    let mut cx = ComplexityPass {
        src: Source::plain(x),
        plan,
        fft: stft,
        acc,
        n_frames: match plan.n_frames(x.len()) {
            Ok(t) if t >= 2 => t,
            _ => 0,
        },
        hop: p.hop_length,
        n_fft: p.n_fft,
        t: 0,
    };
    for (b, block) in x.chunks(BLOCK).enumerate() {
        let end = b * BLOCK + block.len();
        if !KNOWN {
            st.feed(block);
        }
        w.advance(end);
        cx.advance(end);
    }
    let complexity = cx.n_frames > 0;
    let n = x.len().max(1) as f64;
    let flatness = if x.is_empty() {
        1.0
    } else {
        flatness_of(w.finish(p.sr).into_iter(), p.amin)
    };
    let (complexity, aci) = if complexity { acc.totals() } else { (0.0, 0.0) };
    let [rms, clipping_ratio, full_scale_ratio] = match known {
        Some(&k) => k,
        None => [
            (st.sum_squares() / n).sqrt(),
            st.at_peak() as f64 / n,
            st.full() as f64 / n,
        ],
    };
    let m = QualityMetrics {
        rms,
        flatness,
        clipping_ratio,
        full_scale_ratio,
        complexity,
        aci,
    };
    (st, m)
}

/// The first error of a batch in item order (parallel workers may finish in
/// any order; the error a caller sees does not depend on it).
fn first_error<T>(results: Vec<Result<T>>) -> Result<Vec<T>> {
    results.into_iter().collect()
}

/// Level summary of each item: `[peak |x|, RMS (f64 accumulation), share of
/// samples with |x| >= threshold]`, one pass per item; zeros for an empty
/// item. A multichannel clip is one item (all its samples).
pub fn levels_batch(
    items: &[&[f32]],
    threshold: f32,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<[f64; 3]>> {
    if !(threshold.is_finite() && threshold > 0.0) {
        return Err(AglError::param("threshold", threshold, "must be > 0"));
    }
    let rows = map_items(items.len(), n_threads, cancel, |i| {
        let x = items[i];
        if x.is_empty() {
            return Ok(Ok([0.0; 3]));
        }
        let st = clip_stats(x, threshold);
        if !st.finite() {
            return Ok(check_finite(x, &format!("audio buffer (item {i})")).map(|_| [0.0; 3]));
        }
        let n = x.len() as f64;
        Ok(Ok([
            st.peak() as f64,
            (st.sum_squares() / n).sqrt(),
            st.full() as f64 / n,
        ]))
    })?;
    first_error(rows)
}

/// Clip-level metrics of every clip of a batch, in parallel over clips.
pub fn quality_batch(
    items: &[&[f32]],
    p: &QualityParams,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<QualityMetrics>> {
    quality_batch_with(items, p, None, n_threads, cancel)
}

/// [`quality_batch_with`], the Welch segments through the frame-batched
/// transform when their length allows (`lanes`) or one or two at a time.
fn quality_batch_impl(
    items: &[&[f32]],
    p: &QualityParams,
    known: Option<&[KnownStats]>,
    lanes: bool,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<QualityMetrics>> {
    p.validate()?;
    if let Some(k) = known {
        if k.len() != items.len() {
            return Err(AglError::Shape(format!(
                "clip_stats has {} rows for {} clips",
                k.len(),
                items.len()
            )));
        }
    }
    let mut sp = StftParams::new(p.n_fft);
    sp.hop_length = p.hop_length;
    sp.center = false;
    let plan = StftPlan::new(sp)?;
    let rows = map_items(items.len(), n_threads, cancel, |i| {
        let mut welch = None;
        if !lanes {
            let n = p.welch_nperseg.min(items[i].len()).max(1);
            welch = Some(WelchScratch::new(n).without_lanes());
        }
        let mut scratch = ClipScratch {
            welch,
            stft: FftScratch::new(p.n_fft),
            acc: ComplexitySums::default(),
        };
        let k = known.map(|k| &k[i]);
        Ok(clip_metrics(items[i], i, p, k, &plan, &mut scratch))
    })?;
    first_error(rows)
}

/// [`quality_batch`] with the sample statistics of every clip measured
/// already (`known[i]` for `items[i]`, see [`KnownStats`]): the clips are
/// read only for their spectra.
pub fn quality_batch_with(
    items: &[&[f32]],
    p: &QualityParams,
    known: Option<&[KnownStats]>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<QualityMetrics>> {
    quality_batch_impl(items, p, known, true, n_threads, cancel)
}

/// Sum of squares with eight float32 lanes (vectorised), added in f64.
fn sum_squares(x: &[f32]) -> f64 {
    let mut lanes = [0.0f32; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += v * v;
        }
    }
    let tail: f64 = rest.iter().map(|&v| (v as f64) * (v as f64)).sum();
    lanes.iter().map(|&l| l as f64).sum::<f64>() + tail
}

/// Frame-wise RMS as `librosa.feature.rms(y=...)`: frames of `frame_length`
/// samples every `hop_length`, padded by `frame_length // 2` on both sides
/// when `center`. Items are `[1, frames]`.
pub fn rms_frames(
    items: &[&[f32]],
    frame_length: usize,
    hop_length: usize,
    center: bool,
    pad_mode: PadMode,
    run: RunOpts<'_>,
) -> Result<FrameOutput<f32>> {
    let RunOpts {
        extent,
        n_threads,
        cancel,
    } = run;
    let mut sp = StftParams::new(frame_length);
    sp.hop_length = hop_length;
    sp.center = center;
    sp.pad_mode = pad_mode;
    sp.validate()?;
    crate::spectral::check_signals(items, n_threads)?;
    let n_frames = items
        .iter()
        .map(|x| sp.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let pad = sp.pad() as isize;
    run_framewise(
        &n_frames,
        Layout::WidthTime { width: 1 },
        RunOpts {
            extent,
            n_threads,
            cancel,
        },
        || (),
        |_, item, t, row| {
            let x = items[item];
            let n = x.len();
            let start = (t * hop_length) as isize - pad;
            let mut acc = 0.0f64;
            if start >= 0 && start as usize + frame_length <= n {
                let s = start as usize;
                acc = sum_squares(&x[s..s + frame_length]);
            } else {
                for k in 0..frame_length as isize {
                    let pos = start + k;
                    let v = if pos >= 0 && (pos as usize) < n {
                        x[pos as usize]
                    } else {
                        match pad_mode {
                            PadMode::Constant => 0.0,
                            PadMode::Reflect => x[reflect_index(pos, n)],
                        }
                    };
                    acc += (v as f64) * (v as f64);
                }
            }
            row[0] = (acc / frame_length as f64).sqrt() as f32;
        },
    )
}

/// Frame-wise spectral flatness as `librosa.feature.spectral_flatness`:
/// `S = max(|STFT|^power, amin)`, then `exp(mean(log S)) / mean(S)` per
/// frame. Items are `[1, frames]`.
pub fn spectral_flatness_frames(
    items: &[&[f32]],
    params: &StftParams,
    amin: f32,
    power: f32,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    if !(amin.is_finite() && amin > 0.0) {
        return Err(AglError::param("amin", amin, "must be strictly positive"));
    }
    crate::features::check_power(power)?;
    let plan = StftPlan::new(params.clone())?;
    let batch = SpectralBatch::new(params.n_fft, |finite| {
        crate::spectral::check_mono(items, n_threads, finite)
    })?;
    let n_frames = items
        .iter()
        .map(|x| plan.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let nf = params.n_freqs();
    let amin = amin as f64;
    let mags = move |m2: f32| {
        let m2 = m2 as f64;
        if power == 2.0 {
            m2
        } else {
            m2.powf(power as f64 / 2.0)
        }
    };
    batch.run(
        |fft| {
            run_blockwise(
                &n_frames,
                Layout::WidthTime { width: 1 },
                RunOpts {
                    extent,
                    n_threads,
                    cancel,
                },
                || LaneStft::new(fft.clone()),
                |s, item, t0, n, vals| {
                    s.block(&plan, &Source::plain(items[item]), t0, n)?;
                    let (re, im) = (&s.re[..nf], &s.im[..nf]);
                    let f = vectorized_wide(
                        #[inline(always)]
                        || lane_flatness(re, im, amin, mags),
                    );
                    for (v, f) in vals[0].0.iter_mut().zip(f).take(n) {
                        *v = f as f32;
                    }
                    Ok(())
                },
            )
        },
        || {
            run_framewise(
                &n_frames,
                Layout::WidthTime { width: 1 },
                RunOpts {
                    extent,
                    n_threads,
                    cancel,
                },
                || FftScratch::new(params.n_fft),
                |s, item, t, row| {
                    plan.transform_frame(&Source::plain(items[item]), t, s);
                    let m = s.spectrum[..nf].iter().map(|c| mags(c.norm_sqr()));
                    row[0] = flatness_of(m, amin) as f32;
                },
            )
        },
    )
}

#[cfg(test)]
mod tests;
