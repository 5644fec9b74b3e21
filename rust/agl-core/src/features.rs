//! Spectral and binaural features over batches: power/magnitude
//! spectrograms, mel spectrograms, log-mel, interaural phase difference
//! (IPD) features, and the `bat` and `efficientat` recipes.

use std::sync::Arc;

use num_complex::Complex32;
use rayon::prelude::*;

use crate::batch::{run_framewise, FrameOutput, Layout, RunOpts};
use crate::db::{power_to_db_inplace, DbParams};
use crate::error::{check_finite, AglError, Result};
use crate::fastmath::{db10_floor_inplace, ln_inplace, vectorized, vectorized_wide};
use crate::mel::{kaldi_mel, librosa_mel, MelBank, MelNorm};
use crate::parallel::{install, Cancel};
use crate::spectral::lanes::{flat, flat_mut, with_lanes, LaneFft, V};
use crate::spectral::{
    check_mono, run_blockwise, LaneStft, PadMode, PairFft, Source, SpectralBatch, StereoFft,
    StftParams, StftPlan,
};
use crate::window::Window;

/// A stereo item: left and right channels of equal length.
pub type Stereo<'a> = (&'a [f32], &'a [f32]);

/// `|X|^power` of every bin into `out` (1 = magnitude, 2 = power), one
/// simple loop per case so each vectorises.
#[inline(always)]
fn spec_power_into(spec: &[Complex32], power: f32, out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(spec) {
        *o = c.re * c.re + c.im * c.im;
    }
    power_from_squares(power, out);
}

/// Squared magnitudes to `|X|^power` in place.
#[inline(always)]
fn power_from_squares(power: f32, out: &mut [f32]) {
    if power == 1.0 {
        out.iter_mut().for_each(|v| *v = v.sqrt());
    } else if power != 2.0 {
        let h = 0.5 * power;
        out.iter_mut().for_each(|v| *v = v.powf(h));
    }
}

pub use crate::spectral::MAX_POWER;

/// `power` in `(0, MAX_POWER]`.
pub fn check_power(power: f32) -> Result<()> {
    if !(power > 0.0 && power <= MAX_POWER) {
        return Err(AglError::param(
            "power",
            power,
            format!("must be a positive exponent <= {MAX_POWER}"),
        ));
    }
    Ok(())
}

/// `|STFT|^power` of a batch of mono signals, items `[1 + n_fft/2, frames]`.
pub fn spectrogram_batch(
    items: &[&[f32]],
    params: &StftParams,
    power: f32,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    check_power(power)?;
    let plan = StftPlan::new(params.clone())?;
    let batch = SpectralBatch::new(params.n_fft, |finite| check_mono(items, n_threads, finite))?;
    let n_frames = frame_counts(&plan, items.iter().map(|x| x.len()))?;
    let nf = params.n_freqs();
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    batch.run(
        |fft| {
            run_blockwise(
                &n_frames,
                Layout::WidthTime { width: nf },
                run,
                || LaneStft::new(fft.clone()),
                |s, item, t0, n, vals| {
                    s.block_power(&plan, &Source::plain(items[item]), t0, n, vals)?;
                    if power != 2.0 {
                        vectorized_wide(
                            #[inline(always)]
                            || power_from_squares(power, flat_mut(vals)),
                        )
                    }
                    Ok(())
                },
            )
        },
        || {
            run_framewise(
                &n_frames,
                Layout::WidthTime { width: nf },
                run,
                || PairFft::new(params.n_fft),
                |s, item, t, row| {
                    s.frame(&plan, &Source::plain(items[item]), item, t, n_frames[item]);
                    vectorized(
                        #[inline(always)]
                        || spec_power_into(&s.spectrum[..nf], power, row),
                    );
                },
            )
        },
    )
}

fn frame_counts(plan: &StftPlan, lens: impl Iterator<Item = usize>) -> Result<Vec<usize>> {
    lens.map(|n| plan.n_frames(n)).collect()
}

fn check_bank(bank: &MelBank, params: &StftParams) -> Result<()> {
    if bank.n_freqs != params.n_freqs() {
        return Err(AglError::Shape(format!(
            "mel basis has {} frequency bins but n_fft={} gives {}",
            bank.n_freqs,
            params.n_fft,
            params.n_freqs()
        )));
    }
    Ok(())
}

/// Mel spectrogram `bank @ |STFT|^power`, items `[n_mels, frames]`; with
/// `db` set, converted per item by `power_to_db` (librosa's log-mel).
pub fn melspectrogram_batch(
    items: &[&[f32]],
    params: &StftParams,
    power: f32,
    bank: &MelBank,
    db: Option<&DbParams>,
    run: RunOpts<'_>,
) -> Result<FrameOutput<f32>> {
    let n_threads = run.n_threads;
    check_power(power)?;
    check_bank(bank, params)?;
    let plan = StftPlan::new(params.clone())?;
    let batch = SpectralBatch::new(params.n_fft, |finite| check_mono(items, n_threads, finite))?;
    let n_frames = frame_counts(&plan, items.iter().map(|x| x.len()))?;
    let nf = params.n_freqs();
    let mut out = batch.run(
        |fft| {
            run_blockwise(
                &n_frames,
                Layout::WidthTime { width: bank.n_mels },
                run,
                || (LaneStft::new(fft.clone()), vec![V::ZERO; nf]),
                |(s, pw), item, t0, n, vals| {
                    s.block_power(&plan, &Source::plain(items[item]), t0, n, pw)?;
                    with_lanes!(R => unsafe {
                        if power != 2.0 {
                            power_from_squares(power, flat_mut(pw));
                        }
                        bank.apply_lanes::<R>(pw, vals);
                    });
                    Ok(())
                },
            )
        },
        || {
            run_framewise(
                &n_frames,
                Layout::WidthTime { width: bank.n_mels },
                run,
                || (PairFft::new(params.n_fft), vec![0f32; nf]),
                |(s, mag), item, t, row| {
                    s.frame(&plan, &Source::plain(items[item]), item, t, n_frames[item]);
                    vectorized(
                        #[inline(always)]
                        || {
                            spec_power_into(&s.spectrum[..nf], power, mag);
                            bank.apply(mag, row);
                        },
                    )
                },
            )
        },
    )?;
    if let Some(db) = db {
        apply_db_per_item(&mut out, &n_frames, bank.n_mels, db, n_threads)?;
    }
    Ok(out)
}

/// Apply `power_to_db` to the valid frames of each `[width, extent]` item.
fn apply_db_per_item(
    out: &mut FrameOutput<f32>,
    n_frames: &[usize],
    width: usize,
    db: &DbParams,
    n_threads: Option<usize>,
) -> Result<()> {
    let mut slices: Vec<&mut [f32]> = Vec::with_capacity(n_frames.len());
    let mut rest: &mut [f32] = &mut out.data;
    for i in 0..n_frames.len() {
        let len = out.offsets[i + 1] - out.offsets[i];
        let (a, b) = rest.split_at_mut(len);
        slices.push(a);
        rest = b;
    }
    let extents = &out.extents;
    install(n_threads, || {
        slices.into_par_iter().enumerate().for_each(|(i, item)| {
            let (nf, ext) = (n_frames[i], extents[i]);
            if nf == ext {
                power_to_db_inplace(item, db);
            } else {
                // Padded item: compact the valid frames, convert, scatter back.
                let mut valid: Vec<f32> = (0..width)
                    .flat_map(|w| item[w * ext..w * ext + nf].iter().copied())
                    .collect();
                power_to_db_inplace(&mut valid, db);
                for w in 0..width {
                    item[w * ext..w * ext + nf].copy_from_slice(&valid[w * nf..(w + 1) * nf]);
                }
            }
        })
    })
}

/// Per bin: magnitudes of left and right, and cos/sin of
/// `phase(right) - phase(left)` from the normalised cross-spectrum
/// `R conj(L) / (|R| |L|)`. A bin that is exactly zero has phase 0 (as
/// `atan2(0, 0)` gives), i.e. the unit phasor `1 + 0i`. The main loop is
/// branch-free so it vectorises; bins so small that their squared magnitude
/// underflows f32 are redone exactly in f64 afterwards.
#[inline(always)]
fn binaural_bins(l: &[Complex32], r: &[Complex32], out: &mut [[f32; 4]]) {
    let n = l.len();
    let (l, r, out) = (&l[..n], &r[..n], &mut out[..n]);
    let mut tiny = false;
    for ((&a, &b), o) in l.iter().zip(r).zip(out.iter_mut()) {
        let (v, t) = binaural_one(a, b);
        *o = v;
        tiny |= t;
    }
    if tiny {
        for ((&a, &b), o) in l.iter().zip(r).zip(out.iter_mut()) {
            *o = binaural_exact(a, b);
        }
    }
}

/// [`binaural_bins`] on blocks of spectra, one frame per lane: the flat
/// real and imaginary parts of left and right in, |L|, |R|, cos IPD and
/// sin IPD out (all the same length).
#[inline(always)]
fn binaural_lanes(lr: &[f32], li: &[f32], rr: &[f32], ri: &[f32], out: [&mut [f32]; 4]) {
    let n = lr.len();
    let (lr, li, rr, ri) = (&lr[..n], &li[..n], &rr[..n], &ri[..n]);
    let [ml, mr, cs, sn] = out;
    let (ml, mr, cs, sn) = (&mut ml[..n], &mut mr[..n], &mut cs[..n], &mut sn[..n]);
    let mut tiny = false;
    for i in 0..n {
        let (v, t) = binaural_one(Complex32::new(lr[i], li[i]), Complex32::new(rr[i], ri[i]));
        (ml[i], mr[i], cs[i], sn[i]) = (v[0], v[1], v[2], v[3]);
        tiny |= t;
    }
    if tiny {
        for i in 0..n {
            let v = binaural_exact(Complex32::new(lr[i], li[i]), Complex32::new(rr[i], ri[i]));
            (ml[i], mr[i], cs[i], sn[i]) = (v[0], v[1], v[2], v[3]);
        }
    }
}

/// One bin of [`binaural_bins`], branch-free; the flag is set when a
/// non-zero bin's squared magnitude underflows, or either squared magnitude
/// overflows (redo it with [`binaural_exact`]).
///
/// `e^{i(phi_r - phi_l)} = b conj(a) / (|a| |b|)`, with one division per
/// bin; a zero side stands for the unit phasor `1 + 0i`.
#[inline(always)]
fn binaural_one(a: Complex32, b: Complex32) -> ([f32; 4], bool) {
    let pl = a.re * a.re + a.im * a.im;
    let pr = b.re * b.re + b.im * b.im;
    let ml = pl.sqrt();
    let mr = pr.sqrt();
    let okl = pl >= f32::MIN_POSITIVE;
    let okr = pr >= f32::MIN_POSITIVE;
    // Both at least sqrt(MIN_POSITIVE) and at most sqrt(MAX): their product
    // is a normal, finite number.
    let big = !(pl <= f32::MAX) | !(pr <= f32::MAX);
    let tiny =
        (!okl & ((a.re != 0.0) | (a.im != 0.0))) | (!okr & ((b.re != 0.0) | (b.im != 0.0))) | big;
    let (lc, ls, nl) = if okl {
        (a.re, a.im, ml)
    } else {
        (1.0, 0.0, 1.0)
    };
    let (rc, rs, nr) = if okr {
        (b.re, b.im, mr)
    } else {
        (1.0, 0.0, 1.0)
    };
    let inv = 1.0 / (nl * nr);
    (
        [ml, mr, (rc * lc + rs * ls) * inv, (rs * lc - rc * ls) * inv],
        tiny,
    )
}

/// One bin of [`binaural_bins`] in double precision (bins whose squared
/// magnitude underflows or overflows f32).
fn binaural_exact(a: Complex32, b: Complex32) -> [f32; 4] {
    let unit = |c: Complex32| -> (f64, f64) {
        let (re, im) = (c.re as f64, c.im as f64);
        let m = (re * re + im * im).sqrt();
        if m > 0.0 {
            (re / m, im / m)
        } else {
            (1.0, 0.0)
        }
    };
    let (lc, ls) = unit(a);
    let (rc, rs) = unit(b);
    [
        a.norm(),
        b.norm(),
        (rc * lc + rs * ls) as f32,
        (rs * lc - rc * ls) as f32,
    ]
}

/// Validate a batch of stereo items: channels of one length, not empty,
/// and (when `finite`) free of NaN and infinity. A batch bound for the lane
/// engine leaves finiteness to it (see [`crate::spectral::SpectralBatch`]).
fn check_stereo(items: &[Stereo<'_>], n_threads: Option<usize>, finite: bool) -> Result<()> {
    crate::batch::check_items(items, n_threads, |i, (l, r)| {
        if l.len() != r.len() {
            return Err(AglError::Shape(format!(
                "item {i}: left and right channels differ in length ({} vs {})",
                l.len(),
                r.len()
            )));
        }
        if l.is_empty() {
            return Err(AglError::Shape(format!(
                "item {i} of the batch is empty (0 samples)"
            )));
        }
        if !finite {
            return Ok(());
        }
        check_finite(l, &format!("audio buffer (item {i}, channel 0)"))?;
        check_finite(r, &format!("audio buffer (item {i}, channel 1)"))
    })
}

/// Binaural scratch: FFT buffers and per-bin arrays.
struct BinScratch {
    fft: StereoFft,
    /// Per bin: |L|, |R|, cos IPD, sin IPD (interleaved for the projection).
    bins: Vec<[f32; 4]>,
}

impl BinScratch {
    fn new(n_fft: usize) -> Self {
        let nf = n_fft / 2 + 1;
        BinScratch {
            fft: StereoFft::new(n_fft),
            bins: vec![[0.0; 4]; nf],
        }
    }

    /// Transform frame `t` of both channels and fill the four bin arrays
    /// (|L|, |R|, cos IPD, sin IPD).
    fn frame(&mut self, plan: &StftPlan, l: &Source<'_>, r: &Source<'_>, t: usize) {
        self.fft.frame(plan, l, r, t);
        binaural_bins(&self.fft.left, &self.fft.right, &mut self.bins);
    }
}

/// Binaural scratch of the block engine: both channels' block spectra and
/// the four per-bin arrays of [`binaural_lanes`] (|L|, |R|, cos IPD,
/// sin IPD), `n_fft / 2 + 1` vectors each.
struct LaneBins {
    l: LaneStft,
    r: LaneStft,
    bins: [Vec<V>; 4],
}

impl LaneBins {
    fn new(fft: &Arc<LaneFft>) -> Self {
        let nf = fft.n_bins();
        LaneBins {
            l: LaneStft::new(fft.clone()),
            r: LaneStft::new(fft.clone()),
            bins: [(); 4].map(|_| vec![V::ZERO; nf]),
        }
    }

    /// Frames `t0 .. t0 + n` of both channels into the four bin arrays.
    fn block(
        &mut self,
        plan: &StftPlan,
        l: &Source<'_>,
        r: &Source<'_>,
        t0: usize,
        n: usize,
    ) -> Result<()> {
        self.l.transform(plan, l, t0, n)?;
        self.r.transform(plan, r, t0, n)?;
        let (sl, sr) = (&self.l, &self.r);
        let [b0, b1, b2, b3] = &mut self.bins;
        // Both ears split together, each run of bins turned into the four
        // binaural values while it is in L1: neither spectrum is stored.
        sl.fft().split_pair(
            (&sl.re, &sl.im),
            (&sr.re, &sr.im),
            #[inline(always)]
            |k0, [lr, li, rr, ri]| {
                let k1 = k0 + lr.len();
                binaural_lanes(
                    flat(lr),
                    flat(li),
                    flat(rr),
                    flat(ri),
                    [
                        flat_mut(&mut b0[k0..k1]),
                        flat_mut(&mut b1[k0..k1]),
                        flat_mut(&mut b2[k0..k1]),
                        flat_mut(&mut b3[k0..k1]),
                    ],
                )
            },
        );
        Ok(())
    }
}

/// Mel-projected IPD features of stereo items: item `[2, n_mels, frames]`
/// (cos, sin), `bank @ cos(IPD)` and `bank @ sin(IPD)` with
/// IPD = phase(right) - phase(left).
pub fn ipd_batch(
    items: &[Stereo<'_>],
    params: &StftParams,
    bank: &MelBank,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    check_bank(bank, params)?;
    let plan = StftPlan::new(params.clone())?;
    let batch = SpectralBatch::new(params.n_fft, |finite| {
        check_stereo(items, n_threads, finite)
    })?;
    let n_frames = frame_counts(&plan, items.iter().map(|x| x.0.len()))?;
    let nm = bank.n_mels;
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    batch.run(
        |fft| {
            // Blocks come out frequency-major: [cos bands, sin bands] x frames.
            run_blockwise(
                &n_frames,
                Layout::WidthTime { width: 2 * nm },
                run,
                || LaneBins::new(fft),
                |s, item, t0, n, vals| {
                    let (l, r) = items[item];
                    s.block(&plan, &Source::plain(l), &Source::plain(r), t0, n)?;
                    let (cos, sin) = vals.split_at_mut(nm);
                    with_lanes!(R => unsafe {
                        bank.apply_lanes::<R>(&s.bins[2], cos);
                        bank.apply_lanes::<R>(&s.bins[3], sin);
                    });
                    Ok(())
                },
            )
        },
        || {
            // Computed time-major as [2, frames, n_mels], then transposed per item.
            let tm = run_framewise(
                &n_frames,
                Layout::ChannelsTimeWidth {
                    channels: 2,
                    width: nm,
                },
                run,
                || (BinScratch::new(params.n_fft), vec![0f32; 4 * nm]),
                |(s, quad), item, t, row| {
                    let (l, r) = items[item];
                    s.frame(&plan, &Source::plain(l), &Source::plain(r), t);
                    bank.apply_quad(&s.bins, quad);
                    row.copy_from_slice(&quad[2 * nm..]);
                },
            )?;
            Ok(transpose_channels(tm, 2, nm))
        },
    )
}

/// `[C, T, W]` items to `[C, W, T]`.
fn transpose_channels(x: FrameOutput<f32>, channels: usize, width: usize) -> FrameOutput<f32> {
    let mut data = vec![0f32; x.data.len()];
    for (i, &ext) in x.extents.iter().enumerate() {
        let base = x.offsets[i];
        for c in 0..channels {
            let src = &x.data[base + c * ext * width..base + (c + 1) * ext * width];
            let dst = &mut data[base + c * ext * width..base + (c + 1) * ext * width];
            for t in 0..ext {
                for w in 0..width {
                    dst[w * ext + t] = src[t * width + w];
                }
            }
        }
    }
    FrameOutput {
        data,
        offsets: x.offsets,
        extents: x.extents,
        n_frames: x.n_frames,
    }
}

/// Parameters of the BAT / OWL SAGE binaural input.
#[derive(Debug, Clone)]
pub struct BatConfig {
    pub sr: f64,
    pub stft: StftParams,
    pub n_mels: usize,
    pub fmin: f64,
    pub fmax: f64,
    /// Floor inside `10 log10(max(x, floor))`.
    pub amin: f32,
    /// Scale each clip (both channels by one gain) to this RMS in dBFS.
    pub loudness_dbfs: Option<f32>,
}

/// Default FFT length of the BAT and EfficientAT front ends, in samples.
pub const PRESET_N_FFT: usize = 1024;

impl Default for BatConfig {
    fn default() -> Self {
        BatConfig {
            sr: 32000.0,
            stft: StftParams {
                n_fft: PRESET_N_FFT,
                hop_length: 320,
                win_length: 1024,
                window: Window::Hann { periodic: true },
                center: true,
                pad_mode: PadMode::Reflect,
            },
            n_mels: 128,
            fmin: 50.0,
            fmax: 14000.0,
            amin: 1e-10,
            loudness_dbfs: None,
        }
    }
}

/// Gain that brings a clip's RMS (over all channels) to `target_dbfs`;
/// 1 for a silent clip.
pub fn loudness_gain(channels: &[&[f32]], target_dbfs: f32) -> f32 {
    let (mut sum, mut n) = (0f64, 0usize);
    for c in channels {
        sum += c.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>();
        n += c.len();
    }
    if n == 0 || sum <= 0.0 {
        return 1.0;
    }
    let rms = (sum / n as f64).sqrt();
    (10f64.powf(target_dbfs as f64 / 20.0) / rms) as f32
}

/// The `bat` recipe: item `[4, frames, n_mels]` = log-mel L, log-mel R,
/// mel-projected cos IPD, mel-projected sin IPD. Log-mel is
/// `10 log10(max(bank @ |X|, amin))` of the magnitude spectrum.
pub fn bat_batch(
    items: &[Stereo<'_>],
    cfg: &BatConfig,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    let bank = librosa_mel(
        cfg.sr,
        cfg.stft.n_fft,
        cfg.n_mels,
        cfg.fmin,
        Some(cfg.fmax),
        false,
        MelNorm::Slaney,
    )?;
    let plan = StftPlan::new(cfg.stft.clone())?;
    let batch = SpectralBatch::new(cfg.stft.n_fft, |finite| {
        check_stereo(items, n_threads, finite)
    })?;
    let n_frames = frame_counts(&plan, items.iter().map(|x| x.0.len()))?;
    let gains = loudness_gains(items, cfg.loudness_dbfs);
    let nm = cfg.n_mels;
    let amin = cfg.amin;
    let layout = Layout::ChannelsTimeWidth {
        channels: 4,
        width: nm,
    };
    // Both channels of an item, scaled by its loudness gain.
    let sources = |item: usize| {
        let src = |x| Source {
            samples: x,
            preemphasis: None,
            gain: gains[item],
        };
        (src(items[item].0), src(items[item].1))
    };
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    batch.run(
        |fft| {
            run_blockwise(
                &n_frames,
                layout,
                run,
                || LaneBins::new(fft),
                |s, item, t0, n, vals| {
                    let (l, r) = sources(item);
                    s.block(&plan, &l, &r, t0, n)?;
                    let [b0, b1, b2, b3] = &s.bins;
                    with_lanes!(R => unsafe {
                        bank.apply_lanes4::<R>([b0, b1, b2, b3], vals);
                        db10_floor_inplace(flat_mut(&mut vals[..2 * nm]), amin);
                    });
                    Ok(())
                },
            )
        },
        || {
            run_framewise(
                &n_frames,
                layout,
                run,
                || BinScratch::new(cfg.stft.n_fft),
                |s, item, t, row| {
                    let (l, r) = sources(item);
                    s.fft.frame(&plan, &l, &r, t);
                    bat_post(&s.fft.left, &s.fft.right, &mut s.bins, &bank, row, amin);
                },
            )
        },
    )
}

/// Each stereo item's gain to `loudness_dbfs` (both channels measured
/// together; 1 without a target).
fn loudness_gains(items: &[Stereo<'_>], loudness_dbfs: Option<f32>) -> Vec<f32> {
    match loudness_dbfs {
        None => vec![1.0; items.len()],
        Some(db) => items
            .iter()
            .map(|(l, r)| loudness_gain(&[l, r], db))
            .collect(),
    }
}

/// Per-frame `bat` arithmetic after the FFT: binaural bins, the mel
/// projection of all four channels, dB of the two log-mel channels. Runs the
/// AVX2+FMA build of the same code when the CPU has it (chosen once).
fn bat_post(
    l: &[Complex32],
    r: &[Complex32],
    bins: &mut [[f32; 4]],
    bank: &MelBank,
    row: &mut [f32],
    amin: f32,
) {
    #[inline(always)]
    fn body(
        l: &[Complex32],
        r: &[Complex32],
        bins: &mut [[f32; 4]],
        bank: &MelBank,
        row: &mut [f32],
        amin: f32,
    ) {
        binaural_bins(l, r, bins);
        bank.apply_quad(bins, row);
        db10_floor_inplace(&mut row[..2 * bank.n_mels], amin);
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            l: &[Complex32],
            r: &[Complex32],
            bins: &mut [[f32; 4]],
            bank: &MelBank,
            row: &mut [f32],
            amin: f32,
        ) {
            body(l, r, bins, bank, row, amin)
        }
        if crate::fastmath::has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { avx2(l, r, bins, bank, row, amin) };
        }
    }
    body(l, r, bins, bank, row, amin)
}

/// Parameters of EfficientAT's eval-mode front end (`AugmentMelSTFT`).
#[derive(Debug, Clone)]
pub struct EfficientAtConfig {
    pub sr: f64,
    pub stft: StftParams,
    pub n_mels: usize,
    pub fmin: f64,
    pub fmax: f64,
    pub preemphasis: f32,
}

impl Default for EfficientAtConfig {
    fn default() -> Self {
        EfficientAtConfig {
            sr: 32000.0,
            stft: StftParams {
                n_fft: PRESET_N_FFT,
                hop_length: 320,
                win_length: 800,
                window: Window::Hann { periodic: false },
                center: true,
                pad_mode: PadMode::Reflect,
            },
            n_mels: 128,
            fmin: 0.0,
            fmax: 15000.0,
            preemphasis: 0.97,
        }
    }
}

/// The `efficientat` recipe: pre-emphasis, power STFT, Kaldi mel,
/// `(ln(mel + 1e-5) + 4.5) / 5`; item `[n_mels, frames]`.
pub fn efficientat_batch(
    items: &[&[f32]],
    cfg: &EfficientAtConfig,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<f32>> {
    if !(cfg.preemphasis.abs() <= 1.0) {
        return Err(AglError::param(
            "preemphasis",
            cfg.preemphasis,
            "must be a coefficient between -1 and 1",
        ));
    }
    let bank = kaldi_mel(cfg.sr, cfg.stft.n_fft, cfg.n_mels, cfg.fmin, cfg.fmax)?;
    let plan = StftPlan::new(cfg.stft.clone())?;
    let batch = SpectralBatch::new(cfg.stft.n_fft, |finite| {
        check_mono(items, n_threads, finite)
    })?;
    for (i, x) in items.iter().enumerate() {
        if x.len() < 2 {
            return Err(AglError::Shape(format!(
                "item {i} has {} sample(s); pre-emphasis needs at least 2",
                x.len()
            )));
        }
    }
    let n_frames = frame_counts(&plan, items.iter().map(|x| x.len() - 1))?;
    let nf = cfg.stft.n_freqs();
    let coef = cfg.preemphasis;
    let src = |item: usize| Source {
        samples: items[item],
        preemphasis: Some(coef),
        gain: 1.0,
    };
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    batch.run(
        |fft| {
            run_blockwise(
                &n_frames,
                Layout::WidthTime { width: cfg.n_mels },
                run,
                || (LaneStft::new(fft.clone()), vec![V::ZERO; nf]),
                |(s, pw), item, t0, n, vals| {
                    s.block_power(&plan, &src(item), t0, n, pw)?;
                    with_lanes!(R => unsafe {
                        bank.apply_lanes::<R>(pw, vals);
                        efficientat_scale(flat_mut(vals));
                    });
                    Ok(())
                },
            )
        },
        || {
            run_framewise(
                &n_frames,
                Layout::WidthTime { width: cfg.n_mels },
                run,
                || (PairFft::new(cfg.stft.n_fft), vec![0f32; nf]),
                |(s, pw), item, t, row| {
                    s.frame(&plan, &src(item), item, t, n_frames[item]);
                    vectorized(
                        #[inline(always)]
                        || {
                            for (o, c) in pw.iter_mut().zip(&s.spectrum[..nf]) {
                                *o = c.re * c.re + c.im * c.im;
                            }
                            bank.apply(pw, row);
                            efficientat_scale(row);
                        },
                    )
                },
            )
        },
    )
}

/// EfficientAT's log scaling of mel power in place: `(ln(x + 1e-5) + 4.5) / 5`.
#[inline(always)]
fn efficientat_scale(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v += 1e-5);
    ln_inplace(x);
    x.iter_mut().for_each(|v| *v = (*v + 4.5) / 5.0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;
    use crate::testutil::noise;

    /// The lane engine checks finiteness block by block (no separate pass
    /// over the batch); a NaN or infinity anywhere, including samples no
    /// frame reads, must still fail with the error of the up-front check:
    /// the first bad item and its first bad sample, whatever the threads.
    #[test]
    fn every_lane_feature_finds_a_bad_sample_anywhere() {
        let len = 10_007;
        for center in [true, false] {
            // With hop 2000 and no centring, frames start every 2000
            // samples and samples past 9024 are read by no frame.
            for hop in [320, 2000] {
                let mut params = StftParams::new(1024);
                params.hop_length = hop;
                params.center = center;
                for at in [0, 1, 511, 5000, 9500, len - 2, len - 1] {
                    let good = noise(len, 1);
                    let mut bad = noise(len, 2);
                    bad[at] = if at % 2 == 0 { f32::NAN } else { f32::INFINITY };
                    let mut later = noise(len, 3);
                    later[0] = f32::NAN;
                    // Alone, and before a later bad item (the error names
                    // the first).
                    for with_later in [false, true] {
                        let mut mono: Vec<&[f32]> = vec![&good, &bad];
                        let mut stereo: Vec<Stereo<'_>> = vec![(&good, &good), (&good, &bad)];
                        if with_later {
                            mono.push(&later);
                            stereo.push((&later, &good));
                        }
                        for threads in [1, 2] {
                            let case = format!(
                                "center {center} hop {hop} at {at} threads {threads} later {with_later}"
                            );
                            let bad = BadSample { at, case };
                            bad.check_mono(&mono, &params, threads);
                            bad.check_stereo(&stereo, &params, threads);
                        }
                    }
                }
            }
        }
    }

    /// A batch whose item 1 holds a bad sample at `at`.
    struct BadSample {
        at: usize,
        case: String,
    }

    impl BadSample {
        fn bank() -> MelBank {
            librosa_mel(32000.0, 1024, 64, 0.0, None, false, MelNorm::Slaney).unwrap()
        }

        /// Every mono lane feature fails naming item 1 and the sample.
        fn check_mono(&self, mono: &[&[f32]], params: &StftParams, threads: usize) {
            let t = Some(threads);
            let bank = Self::bank();
            let eat = EfficientAtConfig {
                stft: params.clone(),
                ..EfficientAtConfig::default()
            };
            let run = RunOpts {
                extent: None,
                n_threads: t,
                cancel: never(),
            };
            let flatness = crate::quality::spectral_flatness_frames;
            let runs = [
                (
                    "spectrogram",
                    spectrogram_batch(mono, params, 2.0, None, t, never()).map(|_| ()),
                ),
                (
                    "stft",
                    crate::spectral::stft_batch(mono, params, None, t, never()).map(|_| ()),
                ),
                (
                    "mel",
                    melspectrogram_batch(mono, params, 2.0, &bank, None, run).map(|_| ()),
                ),
                (
                    "efficientat",
                    efficientat_batch(mono, &eat, None, t, never()).map(|_| ()),
                ),
                (
                    "flatness",
                    flatness(mono, params, 1e-10, 2.0, None, t, never()).map(|_| ()),
                ),
            ];
            for (name, got) in runs {
                self.expect(name, got, "audio buffer (item 1)");
            }
        }

        /// Every stereo lane feature fails naming item 1, channel 1 and the
        /// sample.
        fn check_stereo(&self, stereo: &[Stereo<'_>], params: &StftParams, threads: usize) {
            let t = Some(threads);
            let bank = Self::bank();
            let bat = BatConfig {
                stft: params.clone(),
                ..BatConfig::default()
            };
            let runs = [
                ("bat", bat_batch(stereo, &bat, None, t, never()).map(|_| ())),
                (
                    "ipd",
                    ipd_batch(stereo, params, &bank, None, t, never()).map(|_| ()),
                ),
            ];
            for (name, got) in runs {
                self.expect(name, got, "audio buffer (item 1, channel 1)");
            }
        }

        fn expect(&self, name: &str, got: Result<()>, what: &str) {
            let case = &self.case;
            match got {
                Err(AglError::NonFinite { what: w, index }) => {
                    assert_eq!((w.as_str(), index), (what, self.at), "{name} {case}")
                }
                other => panic!("{name} {case}: expected NonFinite, got {other:?}"),
            }
        }
    }
}
