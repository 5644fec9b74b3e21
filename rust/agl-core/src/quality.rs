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

use crate::batch::{map_items, run_framewise, FrameOutput, Layout};
use crate::error::{check_finite, AglError, Result};
use crate::parallel::Cancel;
use crate::stft::{reflect_index, FftScratch, PadMode, Source, StereoFft, StftParams, StftPlan};
use crate::window::Window;
use num_complex::Complex32;

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
            full_scale_threshold: 0.999,
            n_fft: 512,
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

/// Sum of squares (f64), peak magnitude and the count at or above
/// `threshold`, in one pass with four lanes.
#[inline(always)]
fn clip_stats(x: &[f32], threshold: f32) -> (f64, f32, usize) {
    let mut sq = [0.0f64; 4];
    let mut pk = [0.0f32; 4];
    let mut cnt = [0usize; 4];
    let chunks = x.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..4 {
            let v = c[l];
            sq[l] += (v as f64) * (v as f64);
            pk[l] = pk[l].max(v.abs());
            cnt[l] += (v.abs() >= threshold) as usize;
        }
    }
    for &v in rest {
        sq[0] += (v as f64) * (v as f64);
        pk[0] = pk[0].max(v.abs());
        cnt[0] += (v.abs() >= threshold) as usize;
    }
    (
        sq.iter().sum(),
        pk.iter().fold(0.0f32, |m, &v| m.max(v)),
        cnt.iter().sum(),
    )
}

/// The paper's clipping ratio and the full-scale variant.
pub fn clipping_ratios(x: &[f32], threshold: f32) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let (_, peak, full) = clip_stats(x, threshold);
    let n = x.len() as f64;
    let at_peak = if peak > 0.0 {
        x.iter().filter(|v| v.abs() == peak).count() as f64 / n
    } else {
        0.0
    };
    (at_peak, full as f64 / n)
}

/// Per-worker buffers of [`welch_psd`] for one segment length.
pub struct WelchScratch {
    window: Vec<f32>,
    wss: f64,
    pair: StereoFft,
    single: FftScratch,
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
        }
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
    let n = nperseg.min(x.len()).max(1);
    let s = match scratch {
        Some(s) if s.window.len() == n => s,
        _ => scratch.insert(WelchScratch::new(n)),
    };
    let step = (n - n / 2).max(1);
    let n_seg = if x.len() >= n {
        (x.len() - n) / step + 1
    } else {
        0
    };
    let nf = n / 2 + 1;
    let mut acc = vec![0.0f64; nf];
    // With an even segment length each segment is two hop blocks: their
    // sums give every segment mean.
    let blocks: Vec<f64> = if n == 2 * step {
        x[..(n_seg + 1) * step]
            .chunks_exact(step)
            .map(crate::fastmath::sum_f64)
            .collect()
    } else {
        Vec::new()
    };
    let mean = |k: usize| -> f32 {
        let sum = if blocks.is_empty() {
            crate::fastmath::sum_f64(&x[k * step..k * step + n])
        } else {
            blocks[k] + blocks[k + 1]
        };
        (sum / n as f64) as f32
    };
    let seg = |k: usize| &x[k * step..k * step + n];
    let mut k = 0;
    while k < n_seg {
        if k + 1 < n_seg {
            let (a, b) = s.pair.inputs();
            detrend_window(a, seg(k), mean(k), &s.window);
            detrend_window(b, seg(k + 1), mean(k + 1), &s.window);
            s.pair.transform();
            add_power(&mut acc, &s.pair.left);
            add_power(&mut acc, &s.pair.right);
            k += 2;
        } else {
            detrend_window(&mut s.single.frame, seg(k), mean(k), &s.window);
            s.single.transform();
            add_power(&mut acc, &s.single.spectrum);
            k += 1;
        }
    }
    let scale = if s.wss > 0.0 && n_seg > 0 {
        1.0 / (sr * s.wss * n_seg as f64)
    } else {
        0.0
    };
    let last = if n.is_multiple_of(2) { nf - 1 } else { nf };
    for (k, a) in acc.iter_mut().enumerate() {
        *a *= scale;
        if k >= 1 && k < last {
            *a *= 2.0;
        }
    }
    acc
}

/// Geometric over arithmetic mean of `max(p, amin)`.
///
/// The geometric mean is taken from a running product whose binary exponent
/// is moved into an integer at every step (exact, and one logarithm per
/// call instead of one per value).
pub fn flatness_of(p: impl Iterator<Item = f64>, amin: f64) -> f64 {
    const EXP_MASK: u64 = 0x7ff << 52;
    const ONE_EXP: u64 = 1023 << 52;
    let mut n = 0usize;
    let mut mant = 1.0f64;
    let mut exp: i64 = 0;
    let mut sum = 0.0;
    for v in p {
        let v = if v.is_finite() { v.max(amin) } else { amin }.max(f64::MIN_POSITIVE);
        sum += v;
        n += 1;
        mant *= v;
        let bits = mant.to_bits();
        exp += ((bits & EXP_MASK) >> 52) as i64 - 1023;
        mant = f64::from_bits((bits & !EXP_MASK) | ONE_EXP);
    }
    if n == 0 || sum <= 0.0 {
        return 1.0;
    }
    let log_mean = (exp as f64 * std::f64::consts::LN_2 + mant.ln()) / n as f64;
    log_mean.exp() / (sum / n as f64)
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

/// Validate a batch for the quality kernels: finite values (empty clips are
/// allowed and give defined metrics).
fn check_items(items: &[&[f32]]) -> Result<()> {
    for (i, x) in items.iter().enumerate() {
        check_finite(x, &format!("audio buffer (item {i})"))?;
    }
    Ok(())
}

/// Per-band running sums of the complexity metrics, one array per quantity
/// (so the per-frame update vectorises): the previous power and amplitude,
/// the sums of their absolute differences and their sums.
#[derive(Default)]
struct ComplexitySums {
    prev_pw: Vec<f64>,
    diff_pw: Vec<f64>,
    sum_pw: Vec<f64>,
    prev_am: Vec<f64>,
    diff_am: Vec<f64>,
    sum_am: Vec<f64>,
}

impl ComplexitySums {
    fn reset(&mut self, nb: usize) {
        for v in [
            &mut self.prev_pw,
            &mut self.diff_pw,
            &mut self.sum_pw,
            &mut self.prev_am,
            &mut self.diff_am,
            &mut self.sum_am,
        ] {
            v.clear();
            v.resize(nb, 0.0);
        }
    }

    #[inline(always)]
    fn add(&mut self, spectrum: &[Complex32], first: bool) {
        let nb = self.prev_pw.len();
        let spec = &spectrum[..nb];
        let (ppw, dpw, spw) = (
            &mut self.prev_pw[..nb],
            &mut self.diff_pw[..nb],
            &mut self.sum_pw[..nb],
        );
        let (pam, dam, sam) = (
            &mut self.prev_am[..nb],
            &mut self.diff_am[..nb],
            &mut self.sum_am[..nb],
        );
        // With `first` the differences are against zero and discarded: one
        // loop body for both cases.
        let keep = if first { 0.0 } else { 1.0 };
        for k in 0..nb {
            let c = spec[k];
            // Power and amplitude in f32 (eight lanes), sums in f64.
            let pw32 = c.re * c.re + c.im * c.im;
            let (pw, am) = (pw32 as f64, pw32.sqrt() as f64);
            dpw[k] += keep * (pw - ppw[k]).abs();
            dam[k] += keep * (am - pam[k]).abs();
            ppw[k] = pw;
            spw[k] += pw;
            pam[k] = am;
            sam[k] += am;
        }
    }

    fn totals(&self) -> (f64, f64) {
        let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        let ac = self
            .diff_pw
            .iter()
            .zip(&self.sum_pw)
            .map(|(&n, &d)| ratio(n, d));
        let aci = self
            .diff_am
            .iter()
            .zip(&self.sum_am)
            .map(|(&n, &d)| ratio(n, d));
        (ac.sum(), aci.sum())
    }
}

/// The paper's AC (power spectrogram) and scikit-maad's ACI (amplitude
/// spectrogram) of one clip, accumulated frame by frame. Each frame gets
/// its own real FFT: both metrics sum frame-to-frame differences, and frames
/// paired into one complex FFT would carry different round-off (a constant
/// clip would no longer score 0, as librosa + scikit-maad give).
#[inline(always)]
fn streaming_complexity(
    x: &[f32],
    n_frames: usize,
    nb: usize,
    plan: &StftPlan,
    fft: &mut FftScratch,
    acc: &mut ComplexitySums,
) -> (f64, f64) {
    acc.reset(nb);
    let src = Source::plain(x);
    for t in 0..n_frames {
        plan.transform_frame(&src, t, fft);
        acc.add(&fft.spectrum, t == 0);
    }
    acc.totals()
}

/// Clip-level metrics of one clip, with per-worker FFT scratch.
fn clip_metrics(
    x: &[f32],
    p: &QualityParams,
    plan: &StftPlan,
    welch: &mut Option<WelchScratch>,
    stft: &mut FftScratch,
    acc: &mut ComplexitySums,
) -> QualityMetrics {
    // The closure must inline into the AVX2 copy for its loops to use it.
    crate::fastmath::vectorized(
        #[inline(always)]
        || clip_metrics_impl(x, p, plan, welch, stft, acc),
    )
}

#[inline(always)]
fn clip_metrics_impl(
    x: &[f32],
    p: &QualityParams,
    plan: &StftPlan,
    welch: &mut Option<WelchScratch>,
    stft: &mut FftScratch,
    acc: &mut ComplexitySums,
) -> QualityMetrics {
    let (sq, peak, full) = clip_stats(x, p.full_scale_threshold);
    let n = x.len().max(1) as f64;
    let rms = (sq / n).sqrt();
    let clipping_ratio = if peak > 0.0 {
        x.iter().filter(|v| v.abs() == peak).count() as f64 / n
    } else {
        0.0
    };
    let full_scale_ratio = full as f64 / n;
    let flatness = if x.is_empty() {
        1.0
    } else {
        flatness_of(
            welch_psd(x, p.sr, p.welch_nperseg, welch).into_iter(),
            p.amin,
        )
    };
    let (complexity, aci) = match plan.n_frames(x.len()) {
        Ok(t) if t >= 2 => streaming_complexity(x, t, p.n_fft / 2 + 1, plan, stft, acc),
        _ => (0.0, 0.0),
    };
    QualityMetrics {
        rms,
        flatness,
        clipping_ratio,
        full_scale_ratio,
        complexity,
        aci,
    }
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
    check_items(items)?;
    map_items(items.len(), n_threads, cancel, |i| {
        let x = items[i];
        if x.is_empty() {
            return Ok([0.0; 3]);
        }
        let (sq, peak, full) = crate::fastmath::vectorized(
            #[inline(always)]
            || clip_stats(x, threshold),
        );
        let n = x.len() as f64;
        Ok([peak as f64, (sq / n).sqrt(), full as f64 / n])
    })
}

/// Clip-level metrics of every clip of a batch, in parallel over clips.
pub fn quality_batch(
    items: &[&[f32]],
    p: &QualityParams,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<QualityMetrics>> {
    p.validate()?;
    check_items(items)?;
    let mut sp = StftParams::new(p.n_fft);
    sp.hop_length = p.hop_length;
    sp.center = false;
    let plan = StftPlan::new(sp)?;
    map_items(items.len(), n_threads, cancel, |i| {
        let mut welch = None;
        let mut stft = FftScratch::new(p.n_fft);
        let mut acc = ComplexitySums::default();
        Ok(clip_metrics(
            items[i], p, &plan, &mut welch, &mut stft, &mut acc,
        ))
    })
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
#[allow(clippy::too_many_arguments)]
pub fn rms_frames(
    items: &[&[f32]],
    frame_length: usize,
    hop_length: usize,
    center: bool,
    pad_mode: PadMode,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    let mut sp = StftParams::new(frame_length);
    sp.hop_length = hop_length;
    sp.center = center;
    sp.pad_mode = pad_mode;
    sp.validate()?;
    crate::stft::check_signals(items)?;
    let n_frames = items
        .iter()
        .map(|x| sp.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let pad = sp.pad() as isize;
    run_framewise(
        &n_frames,
        Layout::WidthTime { width: 1 },
        extent,
        n_threads,
        cancel,
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
    if !(power.is_finite() && power > 0.0) {
        return Err(AglError::param("power", power, "must be strictly positive"));
    }
    let plan = StftPlan::new(params.clone())?;
    crate::stft::check_signals(items)?;
    let n_frames = items
        .iter()
        .map(|x| plan.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let nf = params.n_freqs();
    let amin = amin as f64;
    run_framewise(
        &n_frames,
        Layout::WidthTime { width: 1 },
        extent,
        n_threads,
        cancel,
        || FftScratch::new(params.n_fft),
        |s, item, t, row| {
            plan.transform_frame(&Source::plain(items[item]), t, s);
            let mags = s.spectrum[..nf].iter().map(|c| {
                let m2 = c.norm_sqr() as f64;
                if power == 2.0 {
                    m2
                } else {
                    m2.powf(power as f64 / 2.0)
                }
            });
            row[0] = flatness_of(mags, amin) as f32;
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
    fn complexity_of_constant_rows_is_zero() {
        let e = vec![1.0; 3 * 5];
        assert_eq!(complexity_of(&e, 3, 5).1, 0.0);
        let e = [1.0, 3.0, 1.0, 0.0, 0.0, 0.0];
        let (per, tot) = complexity_of(&e, 2, 3);
        assert!((per[0] - 4.0 / 5.0).abs() < 1e-12 && per[1] == 0.0 && tot == per[0]);
    }
}
