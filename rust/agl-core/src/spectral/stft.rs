//! Short-time Fourier transform with librosa's framing and padding.

use std::sync::Arc;

use num_complex::Complex32;

use super::blocks::run_blockwise;
use super::engine::SpectralBatch;
use super::lanes::{LaneFft, LANES};
use super::plans::rfft_plan;
use super::rfft::RealFft;
use super::{LaneStft, PairFft};
use crate::batch::{run_framewise, FrameOutput, Layout, RunOpts};
use crate::error::{check_finite, AglError, Result};
use crate::parallel::Cancel;
use crate::window::{pad_center, Window};

/// Largest FFT (and frame) length accepted: 2^24 samples, about six minutes
/// at 48 kHz, so a plan or a frame buffer never reaches gigabytes.
pub const MAX_N_FFT: usize = 1 << 24;

/// Largest magnitude exponent: `|X|^power` of any spectrum beyond it
/// overflows or flushes to zero in float32.
pub const MAX_POWER: f32 = 16.0;

/// Padding applied at both ends when `center` is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// numpy's `reflect` (mirror without repeating the edge sample).
    Reflect,
    /// Zeros (librosa's default since 0.10).
    Constant,
}

impl PadMode {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "reflect" => Ok(PadMode::Reflect),
            "constant" => Ok(PadMode::Constant),
            other => Err(AglError::param(
                "pad_mode",
                other,
                "must be 'reflect' or 'constant'",
            )),
        }
    }
}

/// The hop librosa takes when none is given: a quarter of the window
/// (`win_length // 4`; the caller checks that it is at least 1).
pub fn default_hop_length(win_length: usize) -> usize {
    win_length / 4
}

/// STFT parameters, librosa names and meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct StftParams {
    pub n_fft: usize,
    pub hop_length: usize,
    pub win_length: usize,
    pub window: Window,
    pub center: bool,
    pub pad_mode: PadMode,
}

impl StftParams {
    /// librosa defaults for a given `n_fft`: hop `n_fft / 4`, periodic Hann
    /// of length `n_fft`, centred, constant padding.
    pub fn new(n_fft: usize) -> Self {
        StftParams {
            n_fft,
            hop_length: default_hop_length(n_fft).max(1),
            win_length: n_fft,
            window: Window::Hann { periodic: true },
            center: true,
            pad_mode: PadMode::Constant,
        }
    }

    /// librosa's framing, its dependent defaults resolved and the whole
    /// checked: `win_length` `None` is `n_fft`, `hop_length` `None` is
    /// `win_length / 4` ([`default_hop_length`]), which must then be at
    /// least 1.
    pub fn resolve(
        n_fft: usize,
        hop_length: Option<usize>,
        win_length: Option<usize>,
        window: Window,
        center: bool,
        pad_mode: PadMode,
    ) -> Result<Self> {
        let win_length = win_length.unwrap_or(n_fft);
        let default_hop = default_hop_length(win_length);
        let p = StftParams {
            n_fft,
            hop_length: hop_length.unwrap_or(default_hop.max(1)),
            win_length,
            window,
            center,
            pad_mode,
        };
        p.validate()?;
        if hop_length.is_none() && default_hop == 0 {
            return Err(AglError::param(
                "hop_length",
                format!("{default_hop} (win_length // 4)"),
                "must be a positive integer",
            ));
        }
        Ok(p)
    }

    pub fn validate(&self) -> Result<()> {
        if self.n_fft == 0 {
            return Err(AglError::param("n_fft", self.n_fft, "must be > 0"));
        }
        if self.n_fft > MAX_N_FFT {
            return Err(AglError::param(
                "n_fft",
                self.n_fft,
                format!("must be <= {MAX_N_FFT}"),
            ));
        }
        if self.hop_length == 0 {
            return Err(AglError::param(
                "hop_length",
                self.hop_length,
                "must be > 0",
            ));
        }
        if self.win_length == 0 {
            return Err(AglError::param(
                "win_length",
                self.win_length,
                "must be > 0",
            ));
        }
        if self.win_length > self.n_fft {
            return Err(AglError::InvalidParameter {
                name: "n_fft",
                value: self.n_fft.to_string(),
                reason: format!("must be >= win_length (win_length={})", self.win_length),
            });
        }
        Ok(())
    }

    /// Frequency bins of the one-sided spectrum.
    pub fn n_freqs(&self) -> usize {
        self.n_fft / 2 + 1
    }

    /// Samples of padding on each side.
    pub fn pad(&self) -> usize {
        if self.center {
            self.n_fft / 2
        } else {
            0
        }
    }

    /// Number of frames for a signal of `len` samples (librosa's count).
    pub fn n_frames(&self, len: usize) -> Result<usize> {
        if len == 0 {
            return Err(AglError::Shape(
                "input signal is empty (0 samples)".to_string(),
            ));
        }
        let padded = len + 2 * self.pad();
        if padded < self.n_fft {
            return Err(AglError::Shape(format!(
                "n_fft={} is too large for an input signal of length={len} (center={})",
                self.n_fft, self.center
            )));
        }
        Ok(1 + (padded - self.n_fft) / self.hop_length)
    }
}
/// Index into a signal of length `n` for a (possibly negative or past-the-end)
/// position, with numpy's `reflect` rule applied repeatedly.
#[inline]
pub fn reflect_index(i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n as isize - 1);
    let mut k = i.rem_euclid(period);
    if k >= n as isize {
        k = period - k;
    }
    k as usize
}

/// A signal as seen by the framing code: the raw samples, optionally
/// pre-emphasised (`y'[n] = y[n+1] - coef * y[n]`, one sample shorter) and
/// scaled by a gain.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub samples: &'a [f32],
    pub preemphasis: Option<f32>,
    pub gain: f32,
}

impl<'a> Source<'a> {
    pub fn plain(samples: &'a [f32]) -> Self {
        Source {
            samples,
            preemphasis: None,
            gain: 1.0,
        }
    }

    /// Length of the (virtual) signal.
    pub fn len(&self) -> usize {
        match self.preemphasis {
            None => self.samples.len(),
            Some(_) => self.samples.len().saturating_sub(1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn at(&self, n: usize) -> f32 {
        match self.preemphasis {
            None => self.samples[n] * self.gain,
            Some(c) => (self.samples[n + 1] - c * self.samples[n]) * self.gain,
        }
    }
}

/// Reusable per-worker buffers for one FFT size.
pub struct FftScratch {
    pub frame: Vec<f32>,
    pub spectrum: Vec<Complex32>,
    pub work: Vec<Complex32>,
    plan: Arc<RealFft>,
}

impl FftScratch {
    pub fn new(n_fft: usize) -> Self {
        let plan = rfft_plan(n_fft);
        FftScratch {
            frame: plan.make_input_vec(),
            spectrum: plan.make_output_vec(),
            work: plan.make_scratch_vec(),
            plan,
        }
    }

    /// Transform `frame` in place into `spectrum` (the one-sided spectrum).
    pub fn transform(&mut self) {
        // Lengths match the plan by construction, so this cannot fail.
        let _ = self
            .plan
            .process_with_scratch(&mut self.frame, &mut self.spectrum, &mut self.work);
    }
}

/// A planned STFT: parameters, the window padded to `n_fft`, and the span
/// where the window is non-zero.
#[derive(Debug, Clone)]
pub struct StftPlan {
    pub params: StftParams,
    pub window: Vec<f32>,
    span: (usize, usize),
}

impl StftPlan {
    pub fn new(params: StftParams) -> Result<Self> {
        params.validate()?;
        let w = params.window.coefficients(params.win_length)?;
        let window = pad_center(&w, params.n_fft);
        let lo = (params.n_fft - params.win_length) / 2;
        Ok(StftPlan {
            span: (lo, lo + params.win_length),
            window,
            params,
        })
    }

    pub fn n_frames(&self, len: usize) -> Result<usize> {
        self.params.n_frames(len)
    }

    /// Window frame `t` of `src` into `s.frame` and transform it; the
    /// one-sided spectrum is left in `s.spectrum`.
    pub fn transform_frame(&self, src: &Source<'_>, t: usize, s: &mut FftScratch) {
        self.window_frame(src, t, &mut s.frame);
        // Lengths match the plan by construction, so this cannot fail.
        let _ = s
            .plan
            .process_with_scratch(&mut s.frame, &mut s.spectrum, &mut s.work);
    }

    /// Write the windowed frame `t` of `src` (padding applied) into
    /// `buf[..n_fft]`.
    #[inline(always)]
    pub fn window_frame(&self, src: &Source<'_>, t: usize, buf: &mut [f32]) {
        let n_fft = self.params.n_fft;
        let len = src.len();
        let start = (t * self.params.hop_length) as isize - self.params.pad() as isize;
        let (lo, hi) = self.span;
        let buf = &mut buf[..n_fft];
        buf[..lo].iter_mut().for_each(|v| *v = 0.0);
        buf[hi..].iter_mut().for_each(|v| *v = 0.0);
        let a = start + lo as isize;
        let b = start + hi as isize;
        if a >= 0 && (b as usize) <= len {
            let a = a as usize;
            let w = &self.window[lo..hi];
            let out = &mut buf[lo..hi];
            match src.preemphasis {
                None => {
                    let x = &src.samples[a..a + (hi - lo)];
                    let g = src.gain;
                    for ((o, &wv), &xv) in out.iter_mut().zip(w).zip(x) {
                        *o = wv * (xv * g);
                    }
                }
                Some(c) => {
                    let x = &src.samples[a..a + (hi - lo) + 1];
                    let g = src.gain;
                    for (i, (o, &wv)) in out.iter_mut().zip(w).enumerate() {
                        *o = wv * ((x[i + 1] - c * x[i]) * g);
                    }
                }
            }
        } else {
            for (i, (b, &wv)) in buf
                .iter_mut()
                .zip(&self.window)
                .enumerate()
                .take(hi)
                .skip(lo)
            {
                let pos = start + i as isize;
                let v = if pos >= 0 && (pos as usize) < len {
                    src.at(pos as usize)
                } else {
                    match self.params.pad_mode {
                        PadMode::Constant => 0.0,
                        PadMode::Reflect => src.at(reflect_index(pos, len)),
                    }
                };
                *b = wv * v;
            }
        }
    }
}

/// Validate a batch of mono signals: non-empty and finite.
pub fn check_signals(items: &[&[f32]], n_threads: Option<usize>) -> Result<()> {
    crate::batch::check_items(items, n_threads, |i, x| {
        check_length(i, x)?;
        check_finite(x, &format!("audio buffer (item {i})"))
    })
}

fn check_length(i: usize, x: &[f32]) -> Result<()> {
    if x.is_empty() {
        return Err(AglError::Shape(format!(
            "item {i} of the batch is empty (0 samples)"
        )));
    }
    Ok(())
}

/// The part of [`check_signals`] that does not read the samples (no item is
/// empty), for a batch that goes through [`LaneStft`], which checks
/// finiteness block by block (see [`SpectralBatch`]).
pub fn check_signal_lengths(items: &[&[f32]]) -> Result<()> {
    items
        .iter()
        .enumerate()
        .try_for_each(|(i, x)| check_length(i, x))
}

/// [`check_signals`], reading the samples for NaN and infinity only when
/// `finite` (else only [`check_signal_lengths`]): the `check` of a mono
/// batch for [`SpectralBatch`].
pub fn check_mono(items: &[&[f32]], n_threads: Option<usize>, finite: bool) -> Result<()> {
    if finite {
        check_signals(items, n_threads)
    } else {
        check_signal_lengths(items)
    }
}
/// Complex STFT of a batch of mono signals, each item laid out as librosa's
/// `[1 + n_fft/2, frames]`. `extent` pads every item's frame axis (see
/// [`run_framewise`]).
pub fn stft_batch(
    items: &[&[f32]],
    params: &StftParams,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<Complex32>> {
    let plan = StftPlan::new(params.clone())?;
    let batch = SpectralBatch::new(params.n_fft, |finite| check_mono(items, n_threads, finite))?;
    let n_frames = items
        .iter()
        .map(|x| plan.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let nf = params.n_freqs();
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    batch.run(
        |fft| stft_lanes(items, &plan, fft.clone(), &n_frames, run),
        || {
            run_framewise(
                &n_frames,
                Layout::WidthTime { width: nf },
                run,
                || PairFft::new(params.n_fft),
                |s, item, t, row| {
                    s.frame(&plan, &Source::plain(items[item]), item, t, n_frames[item]);
                    row.copy_from_slice(&s.spectrum[..nf]);
                },
            )
        },
    )
}

/// [`stft_batch`] on the frame-batched transform ([`LaneStft`]): the block
/// engine runs over a frame axis twice as long, each of its rows one bin's
/// `(re, im)` pairs, so the output is written interleaved, in place, as
/// complex values. Blocks of [`LANES`] frames start at multiples of
/// [`LANES`] whatever the thread count (each engine block takes half of
/// one), and every lane computes its frame alone, so the values do not
/// depend on the threads.
fn stft_lanes(
    items: &[&[f32]],
    plan: &StftPlan,
    fft: Arc<LaneFft>,
    n_frames: &[usize],
    run: RunOpts<'_>,
) -> Result<FrameOutput<Complex32>> {
    let nf = plan.params.n_freqs();
    let doubled: Vec<usize> = n_frames.iter().map(|&n| 2 * n).collect();
    let run = RunOpts {
        extent: run.extent.map(|e| e.saturating_mul(2)),
        ..run
    };
    let out = run_blockwise(
        &doubled,
        Layout::WidthTime { width: nf },
        run,
        || (LaneStft::new(fft.clone()), None::<(usize, usize)>),
        |(s, cached), item, t0, n, vals| {
            // Engine values t0 .. t0 + n are frames a .. a + n / 2.
            let (a, m) = (t0 / 2, n / 2);
            let f0 = a - a % LANES;
            if *cached != Some((item, f0)) {
                let count = (n_frames[item] - f0).min(LANES);
                s.block(plan, &Source::plain(items[item]), f0, count)?;
                *cached = Some((item, f0));
            }
            let at = a - f0;
            for ((v, re), im) in vals.iter_mut().zip(&s.re).zip(&s.im).take(nf) {
                for i in 0..m {
                    v.0[2 * i] = re.0[at + i];
                    v.0[2 * i + 1] = im.0[at + i];
                }
            }
            Ok(())
        },
    )?;
    Ok(FrameOutput {
        data: pairs_to_complex(out.data),
        offsets: out.offsets.into_iter().map(|o| o / 2).collect(),
        extents: out.extents.into_iter().map(|e| e / 2).collect(),
        n_frames: n_frames.to_vec(),
    })
}

/// `(re, im)` pairs as complex values, in the same allocation when its
/// length and capacity are even (always, from [`stft_lanes`]).
fn pairs_to_complex(v: Vec<f32>) -> Vec<Complex32> {
    if !v.len().is_multiple_of(2) || !v.capacity().is_multiple_of(2) {
        return v
            .chunks_exact(2)
            .map(|p| Complex32::new(p[0], p[1]))
            .collect();
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `Complex32` is `#[repr(C)]` `{ re: f32, im: f32 }`: the
    // alignment of `f32` and twice its size. Length and capacity are even,
    // so the allocation (capacity * 4 bytes, align 4) is exactly that of
    // capacity / 2 complex values, and every pair is initialised.
    unsafe {
        Vec::from_raw_parts(
            v.as_mut_ptr().cast::<Complex32>(),
            v.len() / 2,
            v.capacity() / 2,
        )
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;
    use crate::spectral::plans::lane_plan;

    #[test]
    fn frame_counts_match_librosa() {
        let mut p = StftParams::new(2048);
        p.hop_length = 512;
        assert_eq!(p.n_frames(22050).unwrap(), 44);
        p.center = false;
        assert_eq!(p.n_frames(22050).unwrap(), 40);
        assert!(p.n_frames(100).is_err());
    }

    #[test]
    fn resolve_takes_librosa_defaults_and_checks_them() {
        let hann = || Window::Hann { periodic: true };
        let p = StftParams::resolve(1024, None, Some(400), hann(), true, PadMode::Constant);
        let p = p.unwrap();
        assert_eq!((p.win_length, p.hop_length), (400, 100));
        let tiny = StftParams::resolve(2, None, None, hann(), true, PadMode::Constant);
        let msg = tiny.unwrap_err().to_string();
        assert_eq!(
            msg,
            "hop_length must be a positive integer, got hop_length=0 (win_length // 4)"
        );
        let wide = StftParams::resolve(512, None, Some(800), hann(), true, PadMode::Constant);
        assert!(wide
            .unwrap_err()
            .to_string()
            .starts_with("n_fft must be >= win_length"));
        let huge = StftParams::resolve(MAX_N_FFT + 1, None, None, hann(), true, PadMode::Constant);
        assert!(huge.is_err());
    }

    #[test]
    fn reflect_matches_numpy() {
        // np.pad([0,1,2,3], 5, 'reflect') -> [1,2,3,2,1,0,1,2,3,2,1,0,1,2]
        let got: Vec<usize> = (-5..9).map(|i| reflect_index(i, 4)).collect();
        assert_eq!(got, vec![1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]);
    }

    /// Frames read in place with the window fused into the load give the
    /// values of frames windowed into a buffer first, at every position
    /// (edges padded, interior read in place).
    #[test]
    fn block_frames_equal_buffered_frames() {
        let x = crate::testutil::noise(5000, 9);
        for pad_mode in [PadMode::Reflect, PadMode::Constant] {
            let mut params = StftParams::new(512);
            params.hop_length = 100;
            params.win_length = 400;
            params.pad_mode = pad_mode;
            let plan = StftPlan::new(params).unwrap();
            let fft = lane_plan(512).unwrap();
            let src = Source::plain(&x);
            let frames = plan.n_frames(x.len()).unwrap();
            let mut block = LaneStft::new(fft.clone());
            let mut buf = vec![0f32; 512];
            let (mut re, mut im) = fft.make_buffers();
            for t0 in (0..frames).step_by(LANES) {
                let n = (frames - t0).min(LANES);
                block.block(&plan, &src, t0, n).unwrap();
                for i in 0..n {
                    plan.window_frame(&src, t0 + i, &mut buf);
                    fft.forward(&[&buf], &mut re, &mut im);
                    for k in 0..fft.n_bins() {
                        assert_eq!(block.re[k].0[i], re[k].0[0], "t={} k={k}", t0 + i);
                        assert_eq!(block.im[k].0[i], im[k].0[0], "t={} k={k}", t0 + i);
                    }
                }
            }
        }
    }

    /// The frame-batched complex STFT agrees with the one-frame transform
    /// and gives the same bits whatever the thread count and extent.
    #[test]
    fn lane_stft_matches_frame_path_and_threads() {
        let x = crate::testutil::noise(30_000, 3);
        let y = crate::testutil::noise(7_777, 4);
        let mut p = StftParams::new(512);
        p.hop_length = 128;
        let plan = StftPlan::new(p.clone()).unwrap();
        let one = stft_batch(&[&x, &y], &p, None, Some(1), never()).unwrap();
        for threads in [2, 3, 5] {
            let many = stft_batch(&[&x, &y], &p, None, Some(threads), never()).unwrap();
            assert_eq!(one.data, many.data);
        }
        let nf = p.n_freqs();
        let padded = stft_batch(&[&x, &y], &p, Some(400), Some(2), never()).unwrap();
        assert_eq!(padded.extents, vec![400, 400]);
        let mut s = PairFft::new(512);
        for (item, sig) in [&x, &y].iter().enumerate() {
            let n = plan.n_frames(sig.len()).unwrap();
            assert_eq!(one.n_frames[item], n);
            let base = one.offsets[item];
            let pbase = padded.offsets[item];
            for t in 0..n {
                s.frame(&plan, &Source::plain(sig), item, t, n);
                for k in 0..nf {
                    let got = one.data[base + k * n + t];
                    assert_eq!(got, padded.data[pbase + k * 400 + t]);
                    let want = s.spectrum[k];
                    assert!(
                        (got - want).norm() <= 1e-4 * (1.0 + want.norm()),
                        "t={t} k={k}"
                    );
                }
                for k in 0..nf {
                    assert_eq!(
                        padded.data[pbase + k * 400 + n..pbase + (k + 1) * 400]
                            .iter()
                            .filter(|c| c.norm() != 0.0)
                            .count(),
                        0
                    );
                }
            }
        }
    }

    #[test]
    fn parseval_holds_for_rectangular_frames() {
        let n = 256;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 97) as f32 / 97.0 - 0.5)
            .collect();
        let mut p = StftParams::new(n);
        p.center = false;
        p.window = Window::Rectangular;
        let out = stft_batch(&[&x], &p, None, Some(1), never()).unwrap();
        let spec = &out.data;
        let mut e_f = spec[0].norm_sqr() as f64 + spec[n / 2].norm_sqr() as f64;
        for c in &spec[1..n / 2] {
            e_f += 2.0 * c.norm_sqr() as f64;
        }
        let e_t: f64 = x.iter().map(|v| (*v as f64).powi(2)).sum();
        assert!((e_f / n as f64 - e_t).abs() < 1e-4 * e_t);
    }
}
