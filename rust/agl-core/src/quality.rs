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

use crate::batch::{map_items, run_blockwise, run_framewise, FrameOutput, Layout, RunOpts};
use crate::error::{check_finite, AglError, Result};
use crate::fastmath::vectorized_wide;
use crate::lanefft::{flat, LaneFft, LANES};
use crate::parallel::Cancel;
use crate::stft::{
    lane_plan, reflect_index, FftScratch, LaneStft, PadMode, Source, StereoFft, StftParams,
    StftPlan,
};
use crate::window::Window;
use num_complex::Complex32;
use std::sync::Arc;

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

/// Per-worker buffers of [`welch_psd`] for one segment length.
pub struct WelchScratch {
    window: Vec<f32>,
    wss: f64,
    pair: StereoFft,
    single: FftScratch,
    /// The frame-batched transform, for power-of-two segment lengths.
    lanes: Option<WelchLanes>,
}

/// [`LANES`] segments at a time through [`LaneFft`]: their detrended,
/// windowed samples, bin-major spectra and the power sums of each bin.
struct WelchLanes {
    fft: Arc<LaneFft>,
    frames: Vec<f32>,
    re: Vec<crate::lanefft::V>,
    im: Vec<crate::lanefft::V>,
    acc: Vec<f64>,
}

impl WelchLanes {
    fn new(fft: Arc<LaneFft>) -> Self {
        let (re, im) = fft.make_buffers();
        WelchLanes {
            frames: vec![0.0; LANES * fft.len()],
            acc: vec![0.0; fft.n_bins()],
            fft,
            re,
            im,
        }
    }
}

/// `acc[k] += sum_l re[k, l]^2 + im[k, l]^2` over the [`LANES`] lanes of
/// each bin (squares in f32, their sum in f64).
#[inline(always)]
fn add_lane_power(re: &[f32], im: &[f32], acc: &mut [f64]) {
    for ((a, r), i) in acc
        .iter_mut()
        .zip(re.chunks_exact(LANES))
        .zip(im.chunks_exact(LANES))
    {
        let mut v = [0.0f64; LANES];
        for ((v, &r), &i) in v.iter_mut().zip(r).zip(i) {
            *v = (r * r + i * i) as f64;
        }
        *a += v.iter().sum::<f64>();
    }
}

impl WelchScratch {
    pub fn new(n: usize) -> Self {
        let w: Vec<f64> = Window::Hann { periodic: true }
            .coefficients(n)
            .unwrap_or_else(|_| vec![1.0; n])
            .iter()
            .map(|&v| v as f64)
            .collect();
        WelchScratch {
            window: w.iter().map(|&v| v as f32).collect(),
            wss: w.iter().map(|v| v * v).sum(),
            pair: StereoFft::new(n),
            single: FftScratch::new(n),
            lanes: lane_plan(n).map(WelchLanes::new),
        }
    }

    /// The same scratch transforming one segment (or two) at a time.
    fn without_lanes(mut self) -> Self {
        self.lanes = None;
        self
    }
}

#[inline(always)]
fn detrend_window(out: &mut [f32], seg: &[f32], mean: f32, w: &[f32]) {
    for ((o, &v), &wv) in out.iter_mut().zip(seg).zip(w) {
        *o = (v - mean) * wv;
    }
}

#[inline(always)]
fn add_power(acc: &mut [f64], spectrum: &[Complex32]) {
    for (a, c) in acc.iter_mut().zip(spectrum) {
        *a += (c.re * c.re + c.im * c.im) as f64;
    }
}

/// Welch one-sided power spectral density (scipy's defaults for
/// `window='hann'`, `noverlap=nperseg // 2`, `detrend='constant'`,
/// `scaling='density'`); `nperseg` is shortened to the clip length.
/// Segments go two at a time through one complex FFT (see [`StereoFft`]).
#[inline(always)]
pub fn welch_psd(
    x: &[f32],
    sr: f64,
    nperseg: usize,
    scratch: &mut Option<WelchScratch>,
) -> Vec<f64> {
    let mut w = WelchPass::new(x, nperseg, scratch);
    w.advance(x.len());
    w.finish(sr)
}

/// [`welch_psd`] as a pass that can stop and resume: [`WelchPass::advance`]
/// takes the segments that end by a given sample, so a caller walking the
/// clip block by block reads each block once while it is in cache.
struct WelchPass<'a> {
    x: &'a [f32],
    s: &'a mut WelchScratch,
    n: usize,
    step: usize,
    n_seg: usize,
    /// Next segment to take.
    k: usize,
    /// The last hop block's sum, reused by the next segment.
    hop_sum: Option<(usize, f64)>,
    acc: Vec<f64>,
}

impl<'a> WelchPass<'a> {
    #[inline(always)]
    fn new(x: &'a [f32], nperseg: usize, scratch: &'a mut Option<WelchScratch>) -> Self {
        let n = nperseg.min(x.len()).max(1);
        if scratch.as_ref().is_some_and(|s| s.window.len() != n) {
            *scratch = None;
        }
        let s = scratch.get_or_insert_with(|| WelchScratch::new(n));
        if let Some(l) = s.lanes.as_mut() {
            l.acc.fill(0.0);
        }
        let step = (n - n / 2).max(1);
        let n_seg = if x.len() >= n {
            (x.len() - n) / step + 1
        } else {
            0
        };
        WelchPass {
            x,
            s,
            n,
            step,
            n_seg,
            k: 0,
            hop_sum: None,
            acc: vec![0.0f64; n / 2 + 1],
        }
    }

    /// Sum of hop block `j` (samples `j * step ..`), each computed once.
    #[inline(always)]
    fn hop(&mut self, j: usize) -> f64 {
        if let Some((at, v)) = self.hop_sum {
            if at == j {
                return v;
            }
        }
        let v = crate::fastmath::sum_f64(&self.x[j * self.step..(j + 1) * self.step]);
        self.hop_sum = Some((j, v));
        v
    }

    /// Mean of segment `k`: with an even segment length a segment is two
    /// hop blocks.
    #[inline(always)]
    fn mean(&mut self, k: usize) -> f32 {
        let sum = if self.n == 2 * self.step {
            let a = self.hop(k);
            a + self.hop(k + 1)
        } else {
            crate::fastmath::sum_f64(&self.x[k * self.step..k * self.step + self.n])
        };
        (sum / self.n as f64) as f32
    }

    /// Take every remaining segment that ends at or before sample `until`.
    #[inline(always)]
    fn advance(&mut self, until: usize) {
        if self.s.lanes.is_some() {
            self.advance_lanes(until);
            return;
        }
        let (n, step) = (self.n, self.step);
        while self.k < self.n_seg {
            let k = self.k;
            if k + 1 < self.n_seg {
                if (k + 1) * step + n > until {
                    return;
                }
                let (ma, mb) = (self.mean(k), self.mean(k + 1));
                let x = self.x;
                let (a, b) = self.s.pair.inputs();
                detrend_window(a, &x[k * step..k * step + n], ma, &self.s.window);
                detrend_window(
                    b,
                    &x[(k + 1) * step..(k + 1) * step + n],
                    mb,
                    &self.s.window,
                );
                self.s.pair.transform();
                add_power(&mut self.acc, &self.s.pair.left);
                add_power(&mut self.acc, &self.s.pair.right);
                self.k += 2;
            } else {
                if k * step + n > until {
                    return;
                }
                let m = self.mean(k);
                let x = self.x;
                detrend_window(
                    &mut self.s.single.frame,
                    &x[k * step..k * step + n],
                    m,
                    &self.s.window,
                );
                self.s.single.transform();
                add_power(&mut self.acc, &self.s.single.spectrum);
                self.k += 1;
            }
        }
    }

    /// [`WelchPass::advance`] through the frame-batched transform:
    /// [`LANES`] segments per block (blocks start at multiples of [`LANES`],
    /// the last one may be shorter), each segment's power added to its
    /// bin's sum. Kept out of line: the clip pass it is called from is
    /// compiled for AVX2 and does not want this body inlined into it.
    #[inline(never)]
    fn advance_lanes(&mut self, until: usize) {
        let (n, step) = (self.n, self.step);
        while self.k < self.n_seg {
            let k0 = self.k;
            let cnt = (self.n_seg - k0).min(LANES);
            if (k0 + cnt - 1) * step + n > until {
                return;
            }
            let mut means = [0.0f32; LANES];
            for (i, m) in means.iter_mut().enumerate().take(cnt) {
                *m = self.mean(k0 + i);
            }
            let x = self.x;
            let s = &mut *self.s;
            let Some(l) = s.lanes.as_mut() else {
                return;
            };
            let window = &s.window;
            let frames = &mut l.frames;
            vectorized_wide(
                #[inline(always)]
                || {
                    for (i, buf) in frames.chunks_exact_mut(n).take(cnt).enumerate() {
                        let at = (k0 + i) * step;
                        detrend_window(buf, &x[at..at + n], means[i], window);
                    }
                },
            );
            let mut frames: [&[f32]; LANES] = [&[]; LANES];
            for (f, buf) in frames.iter_mut().zip(l.frames.chunks_exact(n)) {
                *f = buf;
            }
            l.fft.forward(&frames[..cnt], &mut l.re, &mut l.im);
            // Lanes past `cnt` transform zeros: they add exact zeros.
            let (re, im, acc) = (flat(&l.re), flat(&l.im), &mut l.acc);
            vectorized_wide(
                #[inline(always)]
                || add_lane_power(re, im, acc),
            );
            self.k += cnt;
        }
    }

    /// The density from the segments taken.
    #[inline(always)]
    fn finish(self, sr: f64) -> Vec<f64> {
        let (n, n_seg, mut acc) = (self.n, self.k, self.acc);
        if let Some(l) = &self.s.lanes {
            acc.copy_from_slice(&l.acc);
        }
        let scale = if self.s.wss > 0.0 && n_seg > 0 {
            1.0 / (sr * self.s.wss * n_seg as f64)
        } else {
            0.0
        };
        let last = if n.is_multiple_of(2) {
            n / 2
        } else {
            n / 2 + 1
        };
        for (k, a) in acc.iter_mut().enumerate() {
            *a *= scale;
            if k >= 1 && k < last {
                *a *= 2.0;
            }
        }
        acc
    }
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
    re: &[crate::lanefft::V],
    im: &[crate::lanefft::V],
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
    crate::stft::check_signals(items, n_threads)?;
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
    let lanes = crate::stft::LaneCheck::new(params.n_fft, |finite| {
        crate::stft::check_mono(items, n_threads, finite)
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
    if let Some(fft) = lanes.fft() {
        let run = run_blockwise(
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
        );
        return lanes.finish(run);
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;
    use crate::testutil::noise;

    #[test]
    fn white_noise_is_flat_and_a_tone_is_not() {
        let x = noise(32000, 1);
        let tone: Vec<f32> = (0..32000)
            .map(|i| (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 16000.0).sin() as f32 * 0.5)
            .collect();
        let p = QualityParams::new(16000.0);
        let m = quality_batch(&[&x, &tone], &p, Some(1), never()).unwrap();
        assert!(m[0].flatness > 0.8, "{}", m[0].flatness);
        assert!(m[1].flatness < 0.01, "{}", m[1].flatness);
        assert!((m[1].rms - 0.5 / 2f64.sqrt()).abs() < 1e-4);
    }

    #[test]
    fn levels_of_a_known_clip() {
        let x = [0.5f32, -1.0, 0.25, 0.0];
        let l = levels_batch(&[&x, &[]], 0.999, Some(1), never()).unwrap();
        let rms = ((0.25 + 1.0 + 0.0625) / 4.0f64).sqrt();
        assert_eq!(l[0], [1.0, rms, 0.25]);
        assert_eq!(l[1], [0.0; 3]);
        assert!(levels_batch(&[&[f32::NAN]], 0.999, Some(1), never()).is_err());
    }

    #[test]
    fn clipped_sine_ratio() {
        let x: Vec<f32> = (0..1000)
            .map(|i| ((i as f32 * 0.1).sin() * 2.0).clamp(-1.0, 1.0))
            .collect();
        let expect = x.iter().filter(|v| v.abs() == 1.0).count() as f64 / 1000.0;
        let (cr, fs) = clipping_ratios(&x, 0.999);
        assert_eq!(cr, expect);
        assert!(fs >= cr && fs > 0.3);
    }

    #[test]
    fn degenerate_clips_are_defined() {
        let z = vec![0.0f32; 100];
        let one = [0.3f32];
        let p = QualityParams::new(16000.0);
        let m = quality_batch(&[&z, &one, &[]], &p, Some(2), never()).unwrap();
        for r in &m {
            assert!(r.rms.is_finite() && r.flatness.is_finite() && r.complexity.is_finite());
        }
        assert_eq!(m[0].clipping_ratio, 0.0);
        assert_eq!(m[1].clipping_ratio, 1.0);
    }

    #[test]
    fn constant_clip_has_zero_complexity() {
        // Identical frames give identical spectra, so no frame-to-frame
        // change: 0 exactly, as librosa + scikit-maad give.
        let x = vec![0.7f32; 40000];
        let m = quality_batch(&[&x], &QualityParams::new(16000.0), Some(1), never()).unwrap();
        assert_eq!((m[0].complexity, m[0].aci), (0.0, 0.0));
    }

    #[test]
    fn one_pass_statistics_match_their_definitions() {
        // Ties at the peak in several lanes, a peak reached late in one lane
        // after an earlier lower plateau, a tail shorter than the lanes,
        // and lengths around the block size.
        for len in [1, 15, 17, 1000, BLOCK - 3, BLOCK, 2 * BLOCK + 5] {
            let mut x: Vec<f32> = noise(len, 7).iter().map(|v| v * 0.5).collect();
            for (i, v) in x.iter_mut().enumerate() {
                if i % 37 == 5 {
                    *v = 0.75;
                }
                if i % 101 == 50 {
                    *v = -0.9;
                }
            }
            let peak = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let at = x.iter().filter(|v| v.abs() == peak).count() as u64;
            let full = x.iter().filter(|v| v.abs() >= 0.7).count() as u64;
            let sq: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
            let st = clip_stats(&x, 0.7);
            assert_eq!(
                (st.peak(), st.at_peak(), st.full()),
                (peak, at, full),
                "{len}"
            );
            assert!((st.sum_squares() - sq).abs() <= 1e-12 * sq, "{len}");
            // Fed in blocks as the clip pass does: the same statistics.
            let mut blocks = ClipStats::new(0.7);
            for b in x.chunks(BLOCK) {
                blocks.feed(b);
            }
            assert_eq!(blocks.sum_squares(), st.sum_squares());
            assert_eq!((blocks.at_peak(), blocks.full()), (at, full));
        }
    }

    #[test]
    fn levels_of_parts_equal_levels_of_the_joined_clip() {
        let (a, mut b) = (noise(1001, 4), noise(777, 5));
        b[3] = 1.0;
        b[9] = -1.0;
        let joined: Vec<f32> = a.iter().chain(&b).copied().collect();
        let parts = clip_levels(&[&a, &b], CLIP_LEVEL).unwrap();
        let whole = levels_batch(&[&joined], CLIP_LEVEL, Some(1), never()).unwrap()[0];
        assert_eq!((parts[0], parts[2]), (whole[0], whole[2]));
        assert!((parts[1] - whole[1]).abs() <= 1e-14 * whole[1]);
        assert_eq!(parts[2], 2.0 / 1778.0);
        assert_eq!(parts[3], 2.0 / 1778.0);
        assert_eq!(clip_levels(&[&[], &[]], CLIP_LEVEL), Some([0.0; 4]));
        b[100] = f32::NAN;
        assert_eq!(clip_levels(&[&a, &b], CLIP_LEVEL), None);
    }

    #[test]
    fn the_clip_pass_equals_the_separate_kernels() {
        // Welch resumed block by block gives the whole-clip PSD to the bit.
        let x = noise(3 * BLOCK + 777, 9);
        let p = QualityParams::new(32000.0);
        let m = quality_batch(&[&x], &p, Some(1), never()).unwrap()[0];
        let psd = welch_psd(&x, p.sr, p.welch_nperseg, &mut None);
        assert_eq!(m.flatness, flatness_of(psd.into_iter(), p.amin));
        let (cr, fs) = clipping_ratios(&x, p.full_scale_threshold);
        assert_eq!((m.clipping_ratio, m.full_scale_ratio), (cr, fs));
    }

    #[test]
    fn decoder_levels_are_the_quality_statistics_to_the_bit() {
        // One channel: the levels pass's RMS, share at the peak and share at
        // or above the threshold are the quality pass's own values, so a
        // clip measured by the decoder need not be scanned again.
        let p = QualityParams::new(32000.0);
        let mut x: Vec<f32> = noise(2 * BLOCK + 333, 11).iter().map(|v| v * 0.9).collect();
        x[17] = 1.0;
        x[BLOCK + 5] = -1.0;
        x[40] = 0.9995;
        let silent = vec![0.0f32; 3000];
        let items: Vec<&[f32]> = vec![&x, &silent, &[], &x[..700]];
        let known: Vec<KnownStats> = items
            .iter()
            .map(|c| {
                let l = clip_levels(&[c], p.full_scale_threshold).unwrap();
                [l[1], l[3], l[2]]
            })
            .collect();
        let full = quality_batch(&items, &p, Some(1), never()).unwrap();
        let reused = quality_batch_with(&items, &p, Some(&known), Some(2), never()).unwrap();
        assert_eq!(full, reused);
        assert_eq!(full[0].clipping_ratio, 2.0 / x.len() as f64);
        assert!(matches!(
            quality_batch_with(&items, &p, Some(&known[..1]), Some(1), never()),
            Err(AglError::Shape(_))
        ));
    }

    #[test]
    fn the_first_bad_item_is_reported_whatever_the_threads() {
        let good = noise(5000, 1);
        let mut bad1 = noise(5000, 2);
        bad1[4321] = f32::NAN;
        let mut bad3 = noise(5000, 3);
        bad3[7] = f32::INFINITY;
        let items: Vec<&[f32]> = vec![&good, &bad1, &good, &bad3];
        for threads in [1, 2] {
            let p = QualityParams::new(16000.0);
            for err in [
                quality_batch(&items, &p, Some(threads), never()).map(|_| ()),
                levels_batch(&items, 0.999, Some(threads), never()).map(|_| ()),
            ] {
                match err {
                    Err(AglError::NonFinite { what, index }) => {
                        assert_eq!((what.as_str(), index), ("audio buffer (item 1)", 4321))
                    }
                    other => panic!("expected NonFinite, got {other:?}"),
                }
            }
        }
    }

    /// Welch PSD from a direct f64 DFT of each detrended, windowed segment.
    fn naive_welch(x: &[f32], sr: f64, n: usize) -> Vec<f64> {
        let w: Vec<f64> = (0..n)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
            .collect();
        let wss: f64 = w.iter().map(|v| v * v).sum();
        let step = n - n / 2;
        let n_seg = (x.len() - n) / step + 1;
        let mut acc = vec![0.0; n / 2 + 1];
        for k in 0..n_seg {
            let seg = &x[k * step..k * step + n];
            let mean = seg.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            for (f, a) in acc.iter_mut().enumerate() {
                let (mut re, mut im) = (0.0, 0.0);
                for (j, &v) in seg.iter().enumerate() {
                    let ph = -2.0 * std::f64::consts::PI * (f * j) as f64 / n as f64;
                    let y = (v as f64 - mean) * w[j];
                    re += y * ph.cos();
                    im += y * ph.sin();
                }
                *a += re * re + im * im;
            }
        }
        let scale = 1.0 / (sr * wss * n_seg as f64);
        acc.iter()
            .enumerate()
            .map(|(f, a)| a * scale * if f == 0 || f == n / 2 { 1.0 } else { 2.0 })
            .collect()
    }

    #[test]
    fn lane_welch_matches_a_direct_dft() {
        // 64-sample segments: one full block of 16 segments and a partial
        // one (37 segments), lanes from the frame-batched transform.
        let x = noise(32 * 37 + 32, 21);
        let mut scratch = None;
        let psd = welch_psd(&x, 8000.0, 64, &mut scratch);
        assert!(scratch.as_ref().is_some_and(|s| s.lanes.is_some()));
        let want = naive_welch(&x, 8000.0, 64);
        let top = want.iter().fold(0f64, |m, &v| m.max(v));
        for (f, (g, w)) in psd.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 2e-6 * top, "bin {f}: {g} vs {w}");
        }
        // The one-segment-at-a-time path: the same density within round-off.
        let mut scalar = Some(WelchScratch::new(64).without_lanes());
        let old = welch_psd(&x, 8000.0, 64, &mut scalar);
        for (g, w) in psd.iter().zip(&old) {
            assert!((g - w).abs() <= 2e-6 * top);
        }
    }

    #[test]
    fn lane_metrics_match_the_frame_by_frame_path() {
        // Lengths with a partial last block of Welch segments, one shorter
        // than a segment (a non-power-of-two Welch length: the old path),
        // one just two STFT frames long, and a clipped clip.
        let mut clipped: Vec<f32> = noise(40000, 5).iter().map(|v| v * 4.0).collect();
        clipped.iter_mut().for_each(|v| *v = v.clamp(-1.0, 1.0));
        let clips: Vec<Vec<f32>> = vec![
            noise(3 * BLOCK + 777, 1),
            noise(900, 2),
            noise(768, 3),
            noise(16 * 256 + 256, 4),
            clipped,
        ];
        let items: Vec<&[f32]> = clips.iter().map(|c| c.as_slice()).collect();
        let p = QualityParams::new(32000.0);
        let lanes = quality_batch(&items, &p, Some(1), never()).unwrap();
        let old = quality_batch_impl(&items, &p, None, false, Some(1), never()).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * a.abs().max(b.abs());
        for (i, (a, b)) in lanes.iter().zip(&old).enumerate() {
            assert_eq!(
                (a.rms, a.clipping_ratio, a.full_scale_ratio),
                (b.rms, b.clipping_ratio, b.full_scale_ratio)
            );
            assert!(close(a.flatness, b.flatness), "{i}: {a:?} vs {b:?}");
            assert!(close(a.complexity, b.complexity), "{i}: {a:?} vs {b:?}");
            assert!(close(a.aci, b.aci), "{i}: {a:?} vs {b:?}");
            assert!(a.complexity > 0.0 && a.aci > 0.0, "{i}");
        }
        // Identical whatever the thread count.
        assert_eq!(quality_batch(&items, &p, Some(2), never()).unwrap(), lanes);
    }

    #[test]
    fn lane_flatness_frames_match_a_direct_dft() {
        let x = noise(5000, 13);
        let mut sp = StftParams::new(256);
        sp.hop_length = 100;
        let out = spectral_flatness_frames(&[&x], &sp, 1e-10, 2.0, None, Some(1), never()).unwrap();
        let plan = StftPlan::new(sp.clone()).unwrap();
        let n_frames = out.n_frames[0];
        assert_eq!(n_frames, plan.n_frames(x.len()).unwrap());
        let mut frame = vec![0.0f32; 256];
        for t in 0..n_frames {
            plan.window_frame(&Source::plain(&x), t, &mut frame);
            let power = (0..=128).map(|f| {
                let (mut re, mut im) = (0.0f64, 0.0f64);
                for (j, &v) in frame.iter().enumerate() {
                    let ph = -2.0 * std::f64::consts::PI * (f * j) as f64 / 256.0;
                    re += v as f64 * ph.cos();
                    im += v as f64 * ph.sin();
                }
                re * re + im * im
            });
            let want = flatness_of(power, 1e-10);
            let got = out.data[out.offsets[0] + t] as f64;
            assert!(
                (got - want).abs() <= 1e-5 * want,
                "frame {t}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn complexity_of_constant_rows_is_zero() {
        let e = vec![1.0; 3 * 5];
        assert_eq!(complexity_of(&e, 3, 5).1, 0.0);
        let e = [1.0, 3.0, 1.0, 0.0, 0.0, 0.0];
        let (per, tot) = complexity_of(&e, 2, 3);
        assert!((per[0] - 4.0 / 5.0).abs() < 1e-12 && per[1] == 0.0 && tot == per[0]);
    }
}
