//! The double-precision STFT (the float64 path): librosa's framing,
//! padding and window placement (those of [`crate::spectral::StftPlan`]), every
//! arithmetic step in f64, and one of four outputs per frame (a [`Sink`]):
//! the complex spectrum in complex128, the same rounded once to complex64,
//! `|X|^power` in f64, or that projected on a mel filterbank in f64. The
//! reduced outputs are formed frame by frame from the spectrum while it is
//! in cache, so no complex intermediate of the whole signal is written.
//!
//! Frames are transformed in blocks whose outputs are transposed into the
//! item's `[values, frames]` rows (librosa's layout); a block holds about
//! [`BLOCK_BYTES`] of output (64 frames of complex128 at n_fft 2048, about
//! the L2 cache).

use std::sync::Arc;

use num_complex::{Complex32, Complex64};

use crate::error::{AglError, Result};
use crate::parallel::Cancel;
use crate::spectral::{reflect_index, PadMode, StftParams};

/// Output bytes of one block of frames (see the module notes; at most 64
/// frames a block).
const BLOCK_BYTES: usize = 1 << 18;

/// A sample the float64 STFT reads: f64, or f32 widened exactly (as
/// numpy's product of float32 frames and a float64 window).
pub trait Sample: Copy + Send + Sync {
    fn wide(self) -> f64;
}

impl Sample for f64 {
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
}

impl Sample for f32 {
    #[inline(always)]
    fn wide(self) -> f64 {
        f64::from(self)
    }
}

/// What the float64 STFT writes for each frame: `width` values formed from
/// the frame's one-sided spectrum.
pub trait Sink: Sync {
    type Out: Copy + Send + Sync + Default;
    /// Values per frame, given the bins of the spectrum.
    fn width(&self, n_freqs: usize) -> usize;
    /// `out` as the spectrum itself, for a sink whose values are the
    /// spectrum (the transform then writes there, no copy).
    fn as_spectrum<'a>(&self, _out: &'a mut [Self::Out]) -> Option<&'a mut [Complex64]> {
        None
    }
    /// Whether the sink takes spectra of `n_freqs` bins.
    fn check(&self, _n_freqs: usize) -> Result<()> {
        Ok(())
    }
    /// Write the frame's `width` values from its `spectrum` (`scratch`
    /// holds `n_freqs` values for the sink's own use).
    fn emit(&self, spectrum: &[Complex64], out: &mut [Self::Out], scratch: &mut [f64]);
}

/// The complex128 spectrum, as it is.
pub struct Complex128Out;

impl Sink for Complex128Out {
    type Out = Complex64;
    fn width(&self, n_freqs: usize) -> usize {
        n_freqs
    }
    #[inline]
    fn emit(&self, spectrum: &[Complex64], out: &mut [Complex64], _: &mut [f64]) {
        out.copy_from_slice(spectrum);
    }
    fn as_spectrum<'a>(&self, out: &'a mut [Complex64]) -> Option<&'a mut [Complex64]> {
        Some(out)
    }
}

/// The double-precision spectrum rounded once to complex64 (each part to
/// the nearest f32, as numpy's `astype(np.complex64)`).
pub struct Complex64Out;

impl Sink for Complex64Out {
    type Out = Complex32;
    fn width(&self, n_freqs: usize) -> usize {
        n_freqs
    }
    #[inline]
    fn emit(&self, spectrum: &[Complex64], out: &mut [Complex32], _: &mut [f64]) {
        for (o, c) in out.iter_mut().zip(spectrum) {
            *o = Complex32::new(c.re as f32, c.im as f32);
        }
    }
}

/// `|X|^power` with numpy's operations on a complex128 spectrum:
/// `re * re + im * im`, then the exponent `power / 2` (a square root for
/// `power = 1`, a square for 4, `powf` otherwise).
#[inline(always)]
pub fn magnitude(c: Complex64, power: f64) -> f64 {
    let p = c.re * c.re + c.im * c.im;
    if power == 2.0 {
        p
    } else if power == 1.0 {
        p.sqrt()
    } else if power == 4.0 {
        p * p
    } else {
        p.powf(power / 2.0)
    }
}

/// `|X|^power` per bin (see [`magnitude`]).
pub struct PowerOut {
    pub power: f64,
}

/// `power` in `(0, MAX_POWER]` (see [`super::MAX_POWER`]).
pub fn check_power_f64(power: f64) -> Result<()> {
    let max = f64::from(super::MAX_POWER);
    if !(power > 0.0 && power <= max) {
        return Err(AglError::param(
            "power",
            power,
            format!("must be a positive exponent <= {max}"),
        ));
    }
    Ok(())
}

impl Sink for PowerOut {
    type Out = f64;
    fn width(&self, n_freqs: usize) -> usize {
        n_freqs
    }
    #[inline]
    fn emit(&self, spectrum: &[Complex64], out: &mut [f64], _: &mut [f64]) {
        for (o, &c) in out.iter_mut().zip(spectrum) {
            *o = magnitude(c, self.power);
        }
    }
}

/// Double-precision STFT of `rows` signals of equal length. `window` holds
/// `win_length` coefficients. Returns the frame count and the spectra as
/// `[rows, 1 + n_fft/2, frames]`, row-major (librosa's layout).
pub fn stft_f64_batch(
    rows: &[&[f64]],
    params: &StftParams,
    window: &[f64],
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<(usize, Vec<Complex64>)> {
    let total = stft_f64_len(rows, params)?;
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| AglError::Shape(format!("cannot allocate the STFT output ({total} bins)")))?;
    out.resize(total, Complex64::new(0.0, 0.0));
    let n_frames = stft_f64_into(rows, params, window, n_threads, cancel, &mut out)?;
    Ok((n_frames, out))
}

/// Bins [`stft_f64_into`] writes for `rows` (all of one length):
/// `rows * (1 + n_fft/2) * frames`.
pub fn stft_f64_len(rows: &[&[f64]], params: &StftParams) -> Result<usize> {
    stft_f64_sink_len(rows, params, params.n_freqs())
}

/// Values a sink of `width` values per frame receives for `rows`:
/// `rows * width * frames`.
pub fn stft_f64_sink_len<X>(rows: &[&[X]], params: &StftParams, width: usize) -> Result<usize> {
    params.validate()?;
    let len = rows.first().map_or(0, |r| r.len());
    let n_frames = params.n_frames(len)?;
    rows.len()
        .checked_mul(width)
        .and_then(|v| v.checked_mul(n_frames))
        .ok_or_else(|| AglError::Shape("STFT output size overflows".to_string()))
}

/// [`stft_f64_batch`] into `out` ([`stft_f64_len`] bins, each written once:
/// the buffer need not be initialised to any value); returns the frame
/// count.
pub fn stft_f64_into(
    rows: &[&[f64]],
    params: &StftParams,
    window: &[f64],
    n_threads: Option<usize>,
    cancel: &Cancel,
    out: &mut [Complex64],
) -> Result<usize> {
    stft_f64_sink_into(
        rows,
        Float64Framing::new(params, window, Layout::Values),
        &Complex128Out,
        n_threads,
        cancel,
        out,
    )
}

/// Checks shared by every float64 STFT: window length, equal row lengths,
/// finite samples.
fn check_input<X: Sample>(rows: &[&[X]], params: &StftParams, window: &[f64]) -> Result<usize> {
    params.validate()?;
    if window.len() != params.win_length {
        return Err(AglError::Shape(format!(
            "window array must have length win_length={}, got {}",
            params.win_length,
            window.len()
        )));
    }
    let len = rows.first().map_or(0, |r| r.len());
    if rows.iter().any(|r| r.len() != len) {
        return Err(AglError::Shape(
            "every signal of a float64 batch must have the same length".to_string(),
        ));
    }
    for r in rows {
        if let Some(index) = r.iter().position(|v| !v.wide().is_finite()) {
            return Err(AglError::NonFinite {
                what: "audio buffer".to_string(),
                index,
            });
        }
    }
    Ok(len)
}

/// How the float64 STFT lays out each item's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[width, frames]` row-major: a value's frames side by side (the
    /// C-ordered array of librosa's shape).
    Values,
    /// `[frames, width]` row-major: a frame's values side by side. Viewed
    /// with its last two axes swapped, this is librosa's own layout (its
    /// STFT matrix is Fortran-ordered), and each frame is written where it
    /// is computed, with no transposing pass.
    Frames,
}

/// The framing of a float64 STFT: its parameters, the window
/// (`win_length` coefficients) and the layout of each item's values.
#[derive(Debug, Clone, Copy)]
pub struct Float64Framing<'a> {
    pub params: &'a StftParams,
    pub window: &'a [f64],
    pub layout: Layout,
}

impl<'a> Float64Framing<'a> {
    pub fn new(params: &'a StftParams, window: &'a [f64], layout: Layout) -> Self {
        Float64Framing {
            params,
            window,
            layout,
        }
    }
}

/// The float64 STFT of `rows` into `out` through `sink`: `[rows, width,
/// frames]` row-major ([`Layout::Values`]) or `[rows, frames, width]`
/// ([`Layout::Frames`]), every value written once (the buffer need not be
/// initialised). Returns the frame count.
pub fn stft_f64_sink_into<S: Sink, X: Sample>(
    rows: &[&[X]],
    framing: Float64Framing<'_>,
    sink: &S,
    n_threads: Option<usize>,
    cancel: &Cancel,
    out: &mut [S::Out],
) -> Result<usize> {
    use rayon::prelude::*;

    let Float64Framing {
        params,
        window,
        layout,
    } = framing;
    let len = check_input(rows, params, window)?;
    let n_fft = params.n_fft;
    let n_frames = params.n_frames(len)?;
    let n_freqs = params.n_freqs();
    sink.check(n_freqs)?;
    let width = sink.width(n_freqs);
    let total = stft_f64_sink_len(rows, params, width)?;
    if out.len() != total {
        return Err(AglError::Shape(format!(
            "the STFT output holds {} values, {total} needed",
            out.len()
        )));
    }
    let lo = (n_fft - params.win_length) / 2;
    let mut padded_window = vec![0.0f64; n_fft];
    padded_window[lo..lo + params.win_length].copy_from_slice(window);
    let items = Items {
        framer: Framer {
            params,
            window: &padded_window,
            len,
        },
        plan: super::plans::rfft64_plan(n_fft),
        sink,
        width,
        n_frames,
        block: (BLOCK_BYTES / (width.max(1) * std::mem::size_of::<S::Out>())).clamp(4, 64),
        cancel,
    };
    crate::parallel::install(n_threads, || {
        out.par_chunks_mut(width * n_frames.max(1))
            .zip(rows.par_iter())
            .for_each(|(item, x)| items.run(x, item, layout));
    })?;
    cancel.check()?;
    Ok(n_frames)
}

/// What every item of [`stft_f64_sink_into`] shares.
struct Items<'a, S: Sink> {
    framer: Framer<'a>,
    plan: Arc<dyn realfft::RealToComplex<f64>>,
    sink: &'a S,
    width: usize,
    n_frames: usize,
    /// Frames a block of the [`Layout::Values`] transpose.
    block: usize,
    cancel: &'a Cancel,
}

/// One worker's buffers for [`Items`].
struct ItemScratch {
    frame: Vec<f64>,
    spectrum: Vec<Complex64>,
    scratch: Vec<Complex64>,
    power: Vec<f64>,
}

impl<S: Sink> Items<'_, S> {
    /// The STFT of signal `x` into `item` (its `width * n_frames` values).
    fn run<X: Sample>(&self, x: &[X], item: &mut [S::Out], layout: Layout) {
        let plan = &self.plan;
        let mut s = ItemScratch {
            frame: plan.make_input_vec(),
            spectrum: plan.make_output_vec(),
            scratch: plan.make_scratch_vec(),
            power: vec![0.0f64; self.framer.params.n_freqs()],
        };
        let (width, n_frames) = (self.width, self.n_frames);
        if layout == Layout::Frames {
            for (t, col) in item.chunks_exact_mut(width).enumerate() {
                if t % 64 == 0 && self.cancel.is_cancelled() {
                    return;
                }
                self.frame(&mut s, x, t, col);
            }
            return;
        }
        let block = self.block;
        let mut cols = vec![S::Out::default(); block * width];
        let mut run = vec![S::Out::default(); block];
        let mut t0 = 0;
        while t0 < n_frames {
            if self.cancel.is_cancelled() {
                return;
            }
            let nb = block.min(n_frames - t0);
            for (b, col) in cols.chunks_exact_mut(width).take(nb).enumerate() {
                self.frame(&mut s, x, t0 + b, col);
            }
            transpose_block(&cols, width, nb, item, n_frames, t0, &mut run);
            t0 += nb;
        }
    }

    /// Frame `t` of `x` through the transform into the sink's `width`
    /// values `col`.
    #[inline]
    fn frame<X: Sample>(&self, s: &mut ItemScratch, x: &[X], t: usize, col: &mut [S::Out]) {
        self.framer.frame(x, t, &mut s.frame);
        // Lengths match the plan by construction.
        match self.sink.as_spectrum(col) {
            Some(dst) => {
                let _ = self
                    .plan
                    .process_with_scratch(&mut s.frame, dst, &mut s.scratch);
            }
            None => {
                let _ =
                    self.plan
                        .process_with_scratch(&mut s.frame, &mut s.spectrum, &mut s.scratch);
                self.sink.emit(&s.spectrum, col, &mut s.power);
            }
        }
    }
}

/// Write the `nb` frames of `cols` (`width` values each, frame-major) to
/// columns `t0..t0 + nb` of `item`'s `[width, n_frames]` rows. Each row's
/// run is gathered in `run` (in L1) and written with one streaming copy
/// ([`crate::spectral::lanes::stream_copy`]): the output's cache lines are written
/// whole, without first being read from memory.
#[inline]
fn transpose_block<T: Copy>(
    cols: &[T],
    width: usize,
    nb: usize,
    item: &mut [T],
    n_frames: usize,
    t0: usize,
    run: &mut [T],
) {
    const {
        assert!(std::mem::size_of::<T>().is_multiple_of(4) && std::mem::align_of::<T>() >= 4);
    }
    let words = std::mem::size_of::<T>() / 4;
    for k in 0..width {
        for (b, r) in run[..nb].iter_mut().enumerate() {
            *r = cols[b * width + k];
        }
        let dst = &mut item[k * n_frames + t0..k * n_frames + t0 + nb];
        // SAFETY: `T` is plain data of whole 4-byte words (checked above),
        // so its values are `words` f32-sized words each; `dst` holds `nb`
        // values, the count copied.
        unsafe {
            let src = std::slice::from_raw_parts(run.as_ptr() as *const f32, nb * words);
            crate::spectral::lanes::stream_copy(dst.as_mut_ptr() as *mut f32, src);
        }
    }
    crate::spectral::lanes::stream_fence();
}

/// Windowed frames of one signal (padding applied).
struct Framer<'a> {
    params: &'a StftParams,
    /// The window padded to `n_fft`.
    window: &'a [f64],
    len: usize,
}

impl Framer<'_> {
    #[inline]
    fn frame<X: Sample>(&self, x: &[X], t: usize, frame: &mut [f64]) {
        let n_fft = self.params.n_fft;
        let start = (t * self.params.hop_length) as isize - self.params.pad() as isize;
        if start >= 0 && start as usize + n_fft <= self.len {
            // An interior frame: no padding, a plain product.
            let src = &x[start as usize..start as usize + n_fft];
            for ((f, &w), &v) in frame.iter_mut().zip(self.window).zip(src) {
                *f = w * v.wide();
            }
            return;
        }
        for (i, (f, &w)) in frame.iter_mut().zip(self.window).enumerate() {
            let pos = start + i as isize;
            let v = if pos >= 0 && (pos as usize) < self.len {
                x[pos as usize].wide()
            } else {
                match self.params.pad_mode {
                    PadMode::Constant => 0.0,
                    PadMode::Reflect => x[reflect_index(pos, self.len)].wide(),
                }
            };
            *f = w * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mel::{MelNorm, MelOut};
    use crate::parallel::never;

    fn signal(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7919) % 13) as f64 - 6.0 + (i as f64 * 0.37).sin())
            .collect()
    }

    /// Two rows of `n` samples ([`signal`] and its reverse), the parameters
    /// of an `n_fft` STFT and their float64 window.
    fn two_rows(n: usize, n_fft: usize) -> ([Vec<f64>; 2], StftParams, Vec<f64>) {
        let x = signal(n);
        let y = x.iter().rev().copied().collect();
        let p = StftParams::new(n_fft);
        let w = p.window.coefficients_f64(n_fft).unwrap();
        ([x, y], p, w)
    }

    #[test]
    fn f64_stft_matches_a_direct_dft() {
        let x: Vec<f64> = (0..100).map(|i| ((i * 7919) % 13) as f64 - 6.0).collect();
        let mut p = StftParams::new(16);
        p.hop_length = 5;
        p.pad_mode = PadMode::Reflect;
        let w = p.window.coefficients_f64(16).unwrap();
        let (nf, s) = stft_f64_batch(&[&x], &p, &w, Some(1), never()).unwrap();
        assert_eq!(nf, 1 + (100 + 16 - 16) / 5);
        for t in [0usize, 3, nf - 1] {
            for k in 0..9 {
                let mut acc = Complex64::new(0.0, 0.0);
                for (n, &wn) in w.iter().enumerate() {
                    let pos = (t * 5 + n) as isize - 8;
                    let v = x[reflect_index(pos, 100)] * wn;
                    let a = -2.0 * std::f64::consts::PI * (k * n) as f64 / 16.0;
                    acc += Complex64::new(a.cos(), a.sin()) * v;
                }
                let got = s[k * nf + t];
                assert!((got - acc).norm() < 1e-12, "t={t} k={k}: {got} vs {acc}");
            }
        }
    }

    #[test]
    fn oversized_n_fft_is_a_parameter_error() {
        let p = StftParams::new(crate::spectral::MAX_N_FFT + 2);
        assert!(matches!(
            p.validate(),
            Err(AglError::InvalidParameter { name: "n_fft", .. })
        ));
    }

    /// `sink`'s values for `rows` in librosa's layout on `threads` threads.
    fn sink_values<S: Sink, X: Sample>(
        rows: &[&[X]],
        (p, w): (&StftParams, &[f64]),
        sink: &S,
        threads: usize,
    ) -> Result<Vec<S::Out>> {
        let total = stft_f64_sink_len(rows, p, sink.width(p.n_freqs()))?;
        let mut out = vec![S::Out::default(); total];
        let framing = Float64Framing::new(p, w, Layout::Values);
        stft_f64_sink_into(rows, framing, sink, Some(threads), never(), &mut out)?;
        Ok(out)
    }

    /// The complex64 sink is the complex128 spectrum rounded once, and
    /// float32 samples are widened exactly (the bits of their f64 copy).
    #[test]
    fn complex_sinks_round_once_and_widen_exactly() {
        let ([x, y], p, w) = two_rows(9000, 256);
        let rows = [&x[..], &y[..]];
        let (_, full) = stft_f64_batch(&rows, &p, &w, Some(1), never()).unwrap();
        let c64 = sink_values(&rows, (&p, &w), &Complex64Out, 2).unwrap();
        for (a, b) in c64.iter().zip(&full) {
            assert_eq!((a.re, a.im), (b.re as f32, b.im as f32));
        }
        let narrow: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| r.iter().map(|&v| v as f32).collect())
            .collect();
        let wide: Vec<Vec<f64>> = narrow
            .iter()
            .map(|r| r.iter().map(|&v| f64::from(v)).collect())
            .collect();
        let nr = [&narrow[0][..], &narrow[1][..]];
        let wr = [&wide[0][..], &wide[1][..]];
        let a = sink_values(&nr, (&p, &w), &Complex128Out, 1).unwrap();
        let b = sink_values(&wr, (&p, &w), &Complex128Out, 1).unwrap();
        assert_eq!(a, b);
    }

    /// The power sink gives `|X|^power` of the complex128 spectrum.
    #[test]
    fn power_sink_is_the_power_of_the_spectrum() {
        let ([x, y], p, w) = two_rows(9000, 256);
        let rows = [&x[..], &y[..]];
        let (_, full) = stft_f64_batch(&rows, &p, &w, Some(1), never()).unwrap();
        for power in [1.0, 2.0, 1.5, 4.0] {
            let got = sink_values(&rows, (&p, &w), &PowerOut { power }, 2).unwrap();
            assert_eq!(got.len(), full.len());
            for (g, c) in got.iter().zip(&full) {
                let want = (c.re * c.re + c.im * c.im).powf(power / 2.0);
                assert!(
                    (g - want).abs() <= 1e-14 * want.max(1e-300),
                    "{g} vs {want}"
                );
            }
        }
    }

    /// The mel sink projects the power spectrum on the bank, and refuses a
    /// bank of another `n_fft`.
    #[test]
    fn mel_sink_projects_the_power_spectrum() {
        let ([x, y], p, w) = two_rows(9000, 256);
        let rows = [&x[..], &y[..]];
        let nb = p.n_freqs();
        let (nf, full) = stft_f64_batch(&rows, &p, &w, Some(1), never()).unwrap();
        let mel_bank = |n_fft| {
            crate::mel::librosa_mel(22050.0, n_fft, 40, 0.0, None, false, MelNorm::Slaney).unwrap()
        };
        let bank = mel_bank(256);
        let sink = MelOut {
            power: 2.0,
            bank: &bank,
        };
        let mel = sink_values(&rows, (&p, &w), &sink, 1).unwrap();
        assert_eq!(mel.len(), 2 * 40 * nf);
        for r in 0..2 {
            for t in 0..nf {
                for m in 0..40 {
                    let want: f64 = (0..nb)
                        .map(|k| {
                            let c = full[r * nb * nf + k * nf + t];
                            bank.dense[m * nb + k] as f64 * (c.re * c.re + c.im * c.im)
                        })
                        .sum();
                    let got = mel[r * 40 * nf + m * nf + t];
                    assert!((got - want).abs() <= 1e-13 * want.abs().max(1e-300));
                }
            }
        }
        let wrong = mel_bank(512);
        let sink = MelOut {
            power: 2.0,
            bank: &wrong,
        };
        assert!(sink_values(&rows, (&p, &w), &sink, 1).is_err());
    }

    /// [`Layout::Frames`] holds the values of [`Layout::Values`], each
    /// item's `[width, frames]` transposed, for every sink and thread count.
    #[test]
    fn frame_layout_is_the_transpose_of_the_value_layout() {
        let ([x, y], p, w) = two_rows(7000, 512);
        let rows = [&x[..], &y[..]];
        fn both<S: Sink>(rows: &[&[f64]], p: &StftParams, w: &[f64], sink: &S)
        where
            S::Out: PartialEq + std::fmt::Debug,
        {
            let width = sink.width(p.n_freqs());
            let total = stft_f64_sink_len(rows, p, width).unwrap();
            let mut a = vec![S::Out::default(); total];
            let nf = stft_f64_sink_into(
                rows,
                Float64Framing::new(p, w, Layout::Values),
                sink,
                Some(1),
                never(),
                &mut a,
            )
            .unwrap();
            for threads in [1, 2] {
                let mut b = vec![S::Out::default(); total];
                stft_f64_sink_into(
                    rows,
                    Float64Framing::new(p, w, Layout::Frames),
                    sink,
                    Some(threads),
                    never(),
                    &mut b,
                )
                .unwrap();
                for r in 0..rows.len() {
                    for k in 0..width {
                        for t in 0..nf {
                            let base = r * width * nf;
                            assert_eq!(a[base + k * nf + t], b[base + t * width + k]);
                        }
                    }
                }
            }
        }
        both(&rows, &p, &w, &Complex128Out);
        both(&rows, &p, &w, &Complex64Out);
        both(&rows, &p, &w, &PowerOut { power: 2.0 });
        let bank = crate::mel::librosa_mel(
            22050.0,
            512,
            32,
            0.0,
            None,
            false,
            crate::mel::MelNorm::Slaney,
        )
        .unwrap();
        both(
            &rows,
            &p,
            &w,
            &MelOut {
                power: 1.0,
                bank: &bank,
            },
        );
    }
}
