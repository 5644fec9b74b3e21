//! FFT convolution of a batch of mono sources with multichannel impulse
//! responses (binaural `2 x L` or any channel count), by overlap-add.
//!
//! Output ranges follow `scipy.signal.fftconvolve`: `full` (`N + L - 1`
//! samples), `same` (`N` samples centred on the full result), `valid`
//! (`|N - L| + 1` samples where the shorter input fully overlaps), and
//! `truncate` (the first `N` samples of the full result, as BAT/OWL render
//! a source through a RIR).

use std::collections::HashMap;

use num_complex::Complex32;
use rayon::prelude::*;

use crate::error::{check_finite, try_zeroed, AglError, Result};
use crate::parallel::{install, Cancel};
use crate::spectral::plans::{irfft_plan, rfft_plan};

/// Which part of the full convolution is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvMode {
    Full,
    Same,
    Valid,
    Truncate,
}

impl ConvMode {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "full" => Ok(ConvMode::Full),
            "same" => Ok(ConvMode::Same),
            "valid" => Ok(ConvMode::Valid),
            "truncate" => Ok(ConvMode::Truncate),
            other => Err(AglError::param(
                "mode",
                other,
                "must be 'full', 'same', 'valid' or 'truncate'",
            )),
        }
    }

    /// `(start, length)` of the output inside the full result.
    pub fn range(&self, n: usize, l: usize) -> (usize, usize) {
        let full = n + l - 1;
        match self {
            ConvMode::Full => (0, full),
            ConvMode::Same => ((full - n) / 2, n),
            ConvMode::Valid => (n.min(l) - 1, n.max(l) - n.min(l) + 1),
            ConvMode::Truncate => (0, n),
        }
    }
}

/// Smallest even `2^a 3^b 5^c >= n` (`a >= 1`: sizes the real FFT handles
/// fastest).
pub fn next_fast_len(n: usize) -> usize {
    let mut best = n.max(1).next_power_of_two();
    let mut p5 = 1usize;
    while p5 < best {
        let mut p35 = p5;
        while p35 < best {
            let mut v = 2 * p35;
            while v < n {
                v *= 2;
            }
            best = best.min(v);
            p35 *= 3;
        }
        p5 *= 5;
    }
    best
}

/// FFT size for a source of `n` and an IR of `l` samples: one block when
/// the full result fits in 2^19 samples, else blocks of about `8 l`.
pub fn fft_size(n: usize, l: usize) -> usize {
    let full = n + l - 1;
    if full <= 1 << 19 {
        return next_fast_len(full).max(2);
    }
    (8 * l).max(1 << 13).next_power_of_two()
}

/// Spectrum of `h` zero-padded to `nfft`, scaled by `1 / nfft` (so the
/// inverse transform needs no scaling).
pub fn ir_spectrum(h: &[f32], nfft: usize) -> Vec<Complex32> {
    let fwd = rfft_plan(nfft);
    let mut buf = fwd.make_input_vec();
    let mut out = fwd.make_output_vec();
    buf[..h.len()].copy_from_slice(h);
    let _ = fwd.process(&mut buf, &mut out);
    let scale = 1.0 / nfft as f32;
    out.iter_mut().for_each(|c| *c *= scale);
    out
}

/// Write `outs[c][k] = (x * h_c)[start + k]` for every channel by
/// overlap-add, given the channels' spectra from [`ir_spectrum`] with the
/// same `nfft` and the IR length `l`: one forward transform per block,
/// one inverse per block and channel.
pub fn convolve_channels_into(
    x: &[f32],
    spectra: &[&[Complex32]],
    l: usize,
    nfft: usize,
    start: usize,
    outs: &mut [&mut [f32]],
) {
    let n = x.len();
    let fwd = rfft_plan(nfft);
    let inv = irfft_plan(nfft);
    let mut buf = fwd.make_input_vec();
    let mut xs = fwd.make_output_vec();
    let mut ys = fwd.make_output_vec();
    let mut scratch =
        vec![Complex32::new(0.0, 0.0); fwd.get_scratch_len().max(inv.get_scratch_len())];
    for o in outs.iter_mut() {
        o.iter_mut().for_each(|v| *v = 0.0);
    }
    let len = outs.first().map(|o| o.len()).unwrap_or(0);
    let end = start + len;
    let block = nfft - l + 1;
    let mut s = 0;
    while s < n {
        let b = block.min(n - s);
        // Full-result samples this block touches: [s, s + b + l - 1).
        let (lo, hi) = (s, s + b + l - 1);
        if hi > start && lo < end {
            buf[..b].copy_from_slice(&x[s..s + b]);
            buf[b..].iter_mut().for_each(|v| *v = 0.0);
            let _ = fwd.process_with_scratch(&mut buf, &mut xs, &mut scratch);
            let (a, z) = (lo.max(start), hi.min(end));
            for (hs, out) in spectra.iter().zip(outs.iter_mut()) {
                for ((y, xv), hv) in ys.iter_mut().zip(&xs).zip(hs.iter()) {
                    *y = xv * hv;
                }
                // The imaginary parts of DC and Nyquist are zero up to rounding.
                ys[0].im = 0.0;
                if let Some(last) = ys.last_mut() {
                    last.im = 0.0;
                }
                let _ = inv.process_with_scratch(&mut ys, &mut buf, &mut scratch);
                for (o, v) in out[a - start..z - start].iter_mut().zip(&buf[a - s..z - s]) {
                    *o += v;
                }
            }
        }
        s += b;
    }
}

/// Write `out[k] = (x * h)[start + k]` by overlap-add.
pub fn convolve_into(x: &[f32], h: &[f32], start: usize, out: &mut [f32]) {
    let nfft = fft_size(x.len(), h.len());
    let hs = ir_spectrum(h, nfft);
    convolve_channels_into(x, &[&hs], h.len(), nfft, start, &mut [out]);
}

/// Output of [`convolve_batch`]: item `i` is
/// `data[offsets[i]..offsets[i + 1]]`, laid out `[channels[i], lengths[i]]`.
#[derive(Debug, Clone)]
pub struct ConvOutput {
    pub data: Vec<f32>,
    pub offsets: Vec<usize>,
    pub channels: Vec<usize>,
    pub lengths: Vec<usize>,
}

/// Longest impulse response (its overlap-add transform is 8 times longer).
pub const MAX_IR: usize = 1 << 27;

/// Where each item of [`convolve_batch`] goes in the output.
struct Layout {
    offsets: Vec<usize>,
    channels: Vec<usize>,
    lengths: Vec<usize>,
}

/// Check every source and impulse response, and lay out the output: item
/// `i` takes `channels[i] * lengths[i]` values from `offsets[i]`.
fn output_layout(sources: &[&[f32]], irs: &[Vec<&[f32]>], mode: ConvMode) -> Result<Layout> {
    let mut offsets = vec![0usize];
    let mut channels = Vec::with_capacity(sources.len());
    let mut lengths = Vec::with_capacity(sources.len());
    for (i, (x, hs)) in sources.iter().zip(irs).enumerate() {
        let l = check_item(i, x, hs)?;
        let (_, len) = mode.range(x.len(), l);
        channels.push(hs.len());
        lengths.push(len);
        let last = *offsets.last().unwrap_or(&0);
        let too_big = || AglError::Memory {
            what: "the convolution's output".into(),
            bytes: u64::MAX,
        };
        let end = hs
            .len()
            .checked_mul(len)
            .and_then(|n| n.checked_add(last))
            .ok_or_else(too_big)?;
        offsets.push(end);
        if l > MAX_IR {
            return Err(AglError::param(
                "irs",
                format!("{l} samples (impulse response {i})"),
                format!("must be at most {MAX_IR} samples long"),
            ));
        }
    }
    Ok(Layout {
        offsets,
        channels,
        lengths,
    })
}

/// Check source `i` and its impulse response's channels (non-empty,
/// finite, of one length); returns that length.
fn check_item(i: usize, x: &[f32], hs: &[&[f32]]) -> Result<usize> {
    if x.is_empty() {
        return Err(AglError::Shape(format!("source {i} is empty (0 samples)")));
    }
    check_finite(x, &format!("source {i}"))?;
    if hs.is_empty() {
        return Err(AglError::Shape(format!(
            "impulse response {i} has no channel"
        )));
    }
    let l = hs[0].len();
    for (c, h) in hs.iter().enumerate() {
        if h.is_empty() || h.len() != l {
            return Err(AglError::Shape(format!(
                "impulse response {i}: every channel must have the same non-zero length, \
                 got {} and {} samples (channel {c})",
                l,
                h.len()
            )));
        }
        check_finite(h, &format!("impulse response {i} (channel {c})"))?;
    }
    Ok(l)
}

/// The IR spectra a batch needs, one per distinct (IR, FFT size): `jobs`
/// to transform, `spec_idx[i]` the job of each channel of item `i`, and
/// `nffts[i]` item `i`'s FFT size.
struct IrJobs<'a> {
    jobs: Vec<(&'a [f32], usize)>,
    spec_idx: Vec<Vec<usize>>,
    nffts: Vec<usize>,
}

/// [`IrJobs`] of a batch: a shared IR repeated over the batch is
/// transformed once.
fn ir_jobs<'a>(sources: &[&[f32]], irs: &[Vec<&'a [f32]>]) -> IrJobs<'a> {
    let mut keys: HashMap<(usize, usize, usize), usize> = HashMap::new();
    let mut jobs: Vec<(&[f32], usize)> = Vec::new();
    let mut spec_idx: Vec<Vec<usize>> = Vec::with_capacity(sources.len());
    let mut nffts = Vec::with_capacity(sources.len());
    for (x, hs) in sources.iter().zip(irs) {
        let nfft = fft_size(x.len(), hs[0].len());
        nffts.push(nfft);
        let idx = hs
            .iter()
            .map(|h| {
                let key = (h.as_ptr() as usize, h.len(), nfft);
                *keys.entry(key).or_insert_with(|| {
                    jobs.push((h, nfft));
                    jobs.len() - 1
                })
            })
            .collect();
        spec_idx.push(idx);
    }
    IrJobs {
        jobs,
        spec_idx,
        nffts,
    }
}

/// Convolve source `i` with every channel of `irs[i]`.
pub fn convolve_batch(
    sources: &[&[f32]],
    irs: &[Vec<&[f32]>],
    mode: ConvMode,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<ConvOutput> {
    if sources.len() != irs.len() {
        return Err(AglError::Shape(format!(
            "one impulse response per source required, got {} sources and {} impulse responses",
            sources.len(),
            irs.len()
        )));
    }
    let Layout {
        offsets,
        channels,
        lengths,
    } = output_layout(sources, irs, mode)?;
    let IrJobs {
        jobs,
        spec_idx,
        nffts,
    } = ir_jobs(sources, irs);
    // Everything large is sized before it is computed: the output, then the
    // spectra (a probe of their total), so a batch that cannot fit is an
    // `AglError::Memory` rather than an abort part-way.
    let mut data: Vec<f32> = try_zeroed(*offsets.last().unwrap_or(&0), "the convolution's output")?;
    let spectra_len = jobs
        .iter()
        .fold(0usize, |a, &(_, nfft)| a.saturating_add(nfft / 2 + 1));
    drop(try_zeroed::<Complex32>(
        spectra_len,
        "the impulse responses' spectra",
    )?);
    let spectra: Vec<Vec<Complex32>> = install(n_threads, || {
        jobs.par_iter()
            .map(|&(h, nfft)| ir_spectrum(h, nfft))
            .collect()
    })?;
    let mut items: Vec<&mut [f32]> = Vec::with_capacity(sources.len());
    let mut rest: &mut [f32] = &mut data;
    for i in 0..sources.len() {
        let (head, tail) = rest.split_at_mut(offsets[i + 1] - offsets[i]);
        items.push(head);
        rest = tail;
    }
    let r: Result<()> = install(n_threads, || {
        items.into_par_iter().enumerate().try_for_each(|(i, out)| {
            cancel.check()?;
            let l = irs[i][0].len();
            let (start, len) = mode.range(sources[i].len(), l);
            let specs: Vec<&[Complex32]> =
                spec_idx[i].iter().map(|&k| spectra[k].as_slice()).collect();
            let mut outs: Vec<&mut [f32]> = out.chunks_mut(len.max(1)).collect();
            convolve_channels_into(sources[i], &specs, l, nffts[i], start, &mut outs);
            Ok(())
        })
    })?;
    r?;
    Ok(ConvOutput {
        data,
        offsets,
        channels,
        lengths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(x: &[f32], h: &[f32]) -> Vec<f64> {
        let mut y = vec![0.0; x.len() + h.len() - 1];
        for (i, &a) in x.iter().enumerate() {
            for (j, &b) in h.iter().enumerate() {
                y[i + j] += a as f64 * b as f64;
            }
        }
        y
    }

    #[test]
    fn matches_direct_convolution_in_every_mode() {
        let x: Vec<f32> = (0..40000)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let h: Vec<f32> = (0..300).map(|i| (-(i as f32) / 50.0).exp()).collect();
        let full = direct(&x, &h);
        for mode in [
            ConvMode::Full,
            ConvMode::Same,
            ConvMode::Valid,
            ConvMode::Truncate,
        ] {
            let (s, len) = mode.range(x.len(), h.len());
            let mut out = vec![0.0; len];
            convolve_into(&x, &h, s, &mut out);
            let peak = full.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (k, v) in out.iter().enumerate() {
                assert!(
                    (*v as f64 - full[s + k]).abs() < 1e-5 * peak,
                    "{mode:?} {k}"
                );
            }
        }
        assert_eq!(next_fast_len(176_000), 180_000);
        assert_eq!(next_fast_len(1), 1);
        assert_eq!(next_fast_len(97), 100);
        assert_eq!(next_fast_len(4097), 4320);
        // IR longer than the source.
        let (s, len) = ConvMode::Valid.range(h.len(), x.len());
        let mut out = vec![0.0; len];
        convolve_into(&h, &x, s, &mut out);
        assert_eq!(len, x.len() - h.len() + 1);
    }
}
