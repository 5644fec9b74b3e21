//! Mel filterbanks: librosa's (Slaney or HTK scale, optional Slaney
//! normalisation) and Kaldi's (as `torchaudio.compliance.kaldi.get_mel_banks`,
//! which EfficientAT uses), plus a sparse form for fast projection.

use crate::error::{AglError, Result};
use crate::spectral::lanes::{Lanes, V};
use crate::spectral::stft64::{magnitude, Sink};
use num_complex::Complex64;

/// Hz to mel: HTK (`2595 log10(1 + f/700)`) or Slaney (linear below 1 kHz,
/// logarithmic above), as `librosa.hz_to_mel`.
pub fn hz_to_mel(f: f64, htk: bool) -> f64 {
    if htk {
        return 2595.0 * (1.0 + f / 700.0).log10();
    }
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    let min_log_mel = min_log_hz / f_sp;
    let logstep = (6.4f64).ln() / 27.0;
    if f >= min_log_hz {
        min_log_mel + (f / min_log_hz).ln() / logstep
    } else {
        f / f_sp
    }
}

/// Inverse of [`hz_to_mel`].
pub fn mel_to_hz(m: f64, htk: bool) -> f64 {
    if htk {
        return 700.0 * (10f64.powf(m / 2595.0) - 1.0);
    }
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    let min_log_mel = min_log_hz / f_sp;
    let logstep = (6.4f64).ln() / 27.0;
    if m >= min_log_mel {
        min_log_hz * (logstep * (m - min_log_mel)).exp()
    } else {
        f_sp * m
    }
}

/// Filter normalisation, as librosa's `norm` argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MelNorm {
    /// No normalisation (`norm=None`).
    None,
    /// Divide each triangle by its width in Hz (`norm='slaney'`).
    Slaney,
    /// Scale each filter to unit Lp norm (`norm=p`, p > 0, or inf).
    Lp(f64),
}

/// A dense `[n_mels, n_freqs]` filterbank and its sparse rows.
#[derive(Debug, Clone)]
pub struct MelBank {
    pub n_mels: usize,
    pub n_freqs: usize,
    pub dense: Vec<f32>,
    rows: Vec<(usize, Vec<f32>)>,
}

impl MelBank {
    /// Build from a dense row-major `[n_mels, n_freqs]` matrix.
    pub fn from_dense(n_mels: usize, n_freqs: usize, dense: Vec<f32>) -> Self {
        let rows = (0..n_mels)
            .map(|m| {
                let r = &dense[m * n_freqs..(m + 1) * n_freqs];
                match (
                    r.iter().position(|&v| v != 0.0),
                    r.iter().rposition(|&v| v != 0.0),
                ) {
                    (Some(a), Some(b)) => (a, r[a..=b].to_vec()),
                    _ => (0, Vec::new()),
                }
            })
            .collect();
        MelBank {
            n_mels,
            n_freqs,
            dense,
            rows,
        }
    }

    /// `out[m] = sum_k bank[m, k] * spec[k]`, touching only non-zero weights.
    #[inline(always)]
    pub fn apply(&self, spec: &[f32], out: &mut [f32]) {
        for (o, (start, w)) in out.iter_mut().zip(&self.rows) {
            let x = &spec[*start..*start + w.len()];
            // Four partial sums let the compiler vectorise the reduction.
            let mut acc = [0.0f32; 4];
            let mut cw = w.chunks_exact(4);
            let mut cx = x.chunks_exact(4);
            for (a, b) in (&mut cw).zip(&mut cx) {
                for j in 0..4 {
                    acc[j] += a[j] * b[j];
                }
            }
            let mut s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
            for (a, b) in cw.remainder().iter().zip(cx.remainder()) {
                s += a * b;
            }
            *o = s;
        }
    }
}

impl MelBank {
    /// [`MelBank::apply`] in double precision (the weights widened to f64,
    /// exactly): `out[m] = sum_k bank[m, k] * spec[k]`, non-zero weights
    /// only, four partial sums per band.
    #[inline]
    pub fn apply_f64(&self, spec: &[f64], out: &mut [f64]) {
        for (o, (start, w)) in out.iter_mut().zip(&self.rows) {
            let x = &spec[*start..*start + w.len()];
            let mut acc = [0.0f64; 4];
            let mut cw = w.chunks_exact(4);
            let mut cx = x.chunks_exact(4);
            for (a, b) in (&mut cw).zip(&mut cx) {
                for j in 0..4 {
                    acc[j] += f64::from(a[j]) * b[j];
                }
            }
            let mut s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
            for (a, b) in cw.remainder().iter().zip(cx.remainder()) {
                s += f64::from(*a) * b;
            }
            *o = s;
        }
    }
}

impl MelBank {
    /// [`MelBank::apply`] on a block of spectra, one frame per lane:
    /// `out[m] = sum_k bank[m, k] * spec[k]` (`spec`: `n_freqs` vectors,
    /// `out`: `n_mels`). Two partial sums per band (even and odd weights).
    ///
    /// # Safety
    /// `R` must be a backend this CPU runs (see [`crate::spectral::lanes::run`]).
    #[inline(always)]
    pub unsafe fn apply_lanes<R: Lanes>(&self, spec: &[V], out: &mut [V]) {
        for (o, (start, w)) in out.iter_mut().zip(&self.rows) {
            let x = &spec[*start..*start + w.len()];
            let (mut a, mut b) = (R::splat(0.0), R::splat(0.0));
            let mut pairs = w.chunks_exact(2).zip(x.chunks_exact(2));
            for (wj, xj) in &mut pairs {
                a = a.add(R::splat(wj[0]).mul(R::ld(&xj[0])));
                b = b.add(R::splat(wj[1]).mul(R::ld(&xj[1])));
            }
            if w.len() % 2 == 1 {
                let j = w.len() - 1;
                a = a.add(R::splat(w[j]).mul(R::ld(&x[j])));
            }
            a.add(b).st(o);
        }
    }

    /// [`MelBank::apply_lanes`] on four blocks of spectra at once (one pass
    /// over the weights): `out[c * n_mels + m]` from `spec[c]`.
    ///
    /// # Safety
    /// As [`MelBank::apply_lanes`].
    #[inline(always)]
    pub unsafe fn apply_lanes4<R: Lanes>(&self, spec: [&[V]; 4], out: &mut [V]) {
        let nm = self.n_mels;
        for (m, (start, w)) in self.rows.iter().enumerate() {
            let mut acc = [R::splat(0.0); 4];
            for (j, &wj) in w.iter().enumerate() {
                let wv = R::splat(wj);
                for (a, x) in acc.iter_mut().zip(&spec) {
                    *a = a.add(wv.mul(R::ld(&x[start + j])));
                }
            }
            for (c, a) in acc.iter().enumerate() {
                a.st(&mut out[c * nm + m]);
            }
        }
    }

    /// [`MelBank::apply`] on four interleaved spectra at once (`x[k]` holds
    /// bin `k` of each): one pass over the weights with a four-lane
    /// accumulator; `out` is `[4, n_mels]` row-major.
    #[inline(always)]
    pub fn apply_quad(&self, x: &[[f32; 4]], out: &mut [f32]) {
        let nm = self.n_mels;
        for (m, (start, w)) in self.rows.iter().enumerate() {
            let mut acc = [0.0f32; 4];
            for (&wj, q) in w.iter().zip(&x[*start..*start + w.len()]) {
                for c in 0..4 {
                    acc[c] += wj * q[c];
                }
            }
            for (c, &v) in acc.iter().enumerate() {
                out[c * nm + m] = v;
            }
        }
    }
}

/// Sample rates a filterbank accepts, in Hz: below 1 Hz or above 10 MHz a
/// rate is a unit mistake, and its bin spacing overflows or vanishes.
pub const SR_RANGE: (f64, f64) = (1.0, 1e7);

/// Most mel bands a filterbank may have.
pub const MAX_N_MELS: usize = 1 << 16;

/// Most coefficients (`n_mels * (n_fft / 2 + 1)`) a dense filterbank may
/// hold (1 GiB of float32).
pub const MAX_BANK_SIZE: usize = 1 << 28;

/// A sample rate inside [`SR_RANGE`].
pub fn check_sr(sr: f64) -> Result<()> {
    if !(sr.is_finite() && sr >= SR_RANGE.0 && sr <= SR_RANGE.1) {
        return Err(AglError::param(
            "sr",
            sr,
            format!(
                "must be a sample rate in Hz between {} and {}",
                SR_RANGE.0, SR_RANGE.1
            ),
        ));
    }
    Ok(())
}

/// `n_fft` and `n_mels` small enough for a dense bank (checked before
/// anything is allocated).
fn check_counts(n_fft: usize, n_mels: usize) -> Result<()> {
    if n_fft == 0 || n_fft > crate::spectral::MAX_N_FFT {
        return Err(AglError::param(
            "n_fft",
            n_fft,
            format!("must be between 1 and {}", crate::spectral::MAX_N_FFT),
        ));
    }
    if n_mels == 0 || n_mels > MAX_N_MELS {
        return Err(AglError::param(
            "n_mels",
            n_mels,
            format!("must be between 1 and {MAX_N_MELS}"),
        ));
    }
    if n_mels.saturating_mul(n_fft / 2 + 1) > MAX_BANK_SIZE {
        return Err(AglError::param(
            "n_mels",
            n_mels,
            format!(
                "times n_fft / 2 + 1 (n_fft={n_fft}) must be <= {MAX_BANK_SIZE} filterbank coefficients"
            ),
        ));
    }
    Ok(())
}

fn check_range(sr: f64, fmin: f64, fmax: f64) -> Result<()> {
    check_sr(sr)?;
    if !(fmin.is_finite() && fmin >= 0.0) {
        return Err(AglError::param("fmin", fmin, "must be >= 0 Hz"));
    }
    if !(fmax.is_finite() && fmax > fmin) {
        return Err(AglError::InvalidParameter {
            name: "fmax",
            value: fmax.to_string(),
            reason: format!("must be finite and > fmin (fmin={fmin})"),
        });
    }
    Ok(())
}

/// librosa's `filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin,
/// fmax=fmax, htk=htk, norm=norm)`, computed in f64 and stored as f32.
pub fn librosa_mel(
    sr: f64,
    n_fft: usize,
    n_mels: usize,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: MelNorm,
) -> Result<MelBank> {
    let fmax = fmax.unwrap_or(sr / 2.0);
    check_range(sr, fmin, fmax)?;
    check_counts(n_fft, n_mels)?;
    if let MelNorm::Lp(p) = norm {
        if p.is_nan() || p <= 0.0 {
            return Err(AglError::param(
                "norm",
                p,
                "must be 'slaney', None or a p > 0",
            ));
        }
    }
    let n_freqs = n_fft / 2 + 1;
    // numpy's rfftfreq(n_fft, 1 / sr): k * (1 / (n_fft * (1 / sr))).
    let val = 1.0 / (n_fft as f64 * (1.0 / sr));
    let fftfreqs: Vec<f64> = (0..n_freqs).map(|k| k as f64 * val).collect();
    let (mlo, mhi) = (hz_to_mel(fmin, htk), hz_to_mel(fmax, htk));
    // numpy's linspace(mlo, mhi, n_mels + 2): i * step + mlo, the last
    // point exactly mhi.
    let step = (mhi - mlo) / (n_mels + 1) as f64;
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| {
            let m = if i == n_mels + 1 {
                mhi
            } else {
                i as f64 * step + mlo
            };
            mel_to_hz(m, htk)
        })
        .collect();
    // librosa's float32 weights: each triangle value rounded to f32 when it
    // is stored, then scaled in double precision and rounded again (numpy's
    // in-place product of a float32 array and float64 norms).
    let mut dense = vec![0f32; n_mels * n_freqs];
    for m in 0..n_mels {
        let (f0, f1, f2) = (mel_f[m], mel_f[m + 1], mel_f[m + 2]);
        let (d0, d1) = (f1 - f0, f2 - f1);
        let row = &mut dense[m * n_freqs..(m + 1) * n_freqs];
        for (w, &f) in row.iter_mut().zip(&fftfreqs) {
            let lower = -(f0 - f) / d0;
            let upper = (f2 - f) / d1;
            *w = lower.min(upper).max(0.0) as f32;
        }
        match norm {
            MelNorm::None => {}
            MelNorm::Slaney => {
                let enorm = 2.0 / (f2 - f0);
                row.iter_mut()
                    .for_each(|w| *w = (f64::from(*w) * enorm) as f32);
            }
            MelNorm::Lp(p) => {
                let length = if p.is_infinite() {
                    row.iter().fold(0f64, |a, &w| a.max(f64::from(w).abs()))
                } else {
                    row.iter()
                        .map(|&w| f64::from(w).abs().powf(p))
                        .sum::<f64>()
                        .powf(1.0 / p)
                };
                if length > f64::MIN_POSITIVE {
                    row.iter_mut()
                        .for_each(|w| *w = (f64::from(*w) / length) as f32);
                }
            }
        }
    }
    Ok(MelBank::from_dense(n_mels, n_freqs, dense))
}

fn kaldi_hz_to_mel(f: f64) -> f64 {
    1127.0 * (1.0 + f / 700.0).ln()
}

/// Kaldi's triangular mel banks (`torchaudio.compliance.kaldi.get_mel_banks`
/// with no VTLN warping) over `n_fft / 2` bins, padded with a zero column to
/// `n_fft / 2 + 1` bins as EfficientAT does. `fmax <= 0` counts from Nyquist
/// as in Kaldi.
pub fn kaldi_mel(sr: f64, n_fft: usize, n_mels: usize, fmin: f64, fmax: f64) -> Result<MelBank> {
    check_sr(sr)?;
    let nyquist = sr / 2.0;
    let fmax = if fmax <= 0.0 { fmax + nyquist } else { fmax };
    check_range(sr, fmin, fmax)?;
    if fmax > nyquist {
        return Err(AglError::InvalidParameter {
            name: "fmax",
            value: fmax.to_string(),
            reason: format!("must be <= the Nyquist frequency sr / 2 = {nyquist} Hz (sr={sr})"),
        });
    }
    check_counts(n_fft, n_mels)?;
    if n_fft < 2 {
        return Err(AglError::param("n_fft", n_fft, "must be >= 2"));
    }
    let n_bins = n_fft / 2;
    let n_freqs = n_fft / 2 + 1;
    let bin_width = sr / n_fft as f64;
    let (mlo, mhi) = (kaldi_hz_to_mel(fmin), kaldi_hz_to_mel(fmax));
    let delta = (mhi - mlo) / (n_mels + 1) as f64;
    let mut dense = vec![0f32; n_mels * n_freqs];
    for m in 0..n_mels {
        let left = mlo + m as f64 * delta;
        let center = mlo + (m + 1) as f64 * delta;
        let right = mlo + (m + 2) as f64 * delta;
        for k in 0..n_bins {
            let mel = kaldi_hz_to_mel(bin_width * k as f64);
            let up = (mel - left) / (center - left);
            let down = (right - mel) / (right - center);
            dense[m * n_freqs + k] = up.min(down).max(0.0) as f32;
        }
    }
    Ok(MelBank::from_dense(n_mels, n_freqs, dense))
}

/// The float64 STFT's sink of `|X|^power` projected on a mel filterbank (weights widened to f64, only
/// the non-zero ones touched): `n_mels` values per frame.
pub struct MelOut<'a> {
    pub power: f64,
    pub bank: &'a MelBank,
}

impl Sink for MelOut<'_> {
    type Out = f64;
    fn width(&self, _: usize) -> usize {
        self.bank.n_mels
    }
    fn check(&self, n_freqs: usize) -> Result<()> {
        if self.bank.n_freqs != n_freqs {
            return Err(AglError::Shape(format!(
                "the mel filterbank has {} frequency bins, the STFT {n_freqs}",
                self.bank.n_freqs
            )));
        }
        Ok(())
    }
    #[inline]
    fn emit(&self, spectrum: &[Complex64], out: &mut [f64], scratch: &mut [f64]) {
        for (p, &c) in scratch.iter_mut().zip(spectrum) {
            *p = magnitude(c, self.power);
        }
        self.bank.apply_f64(&scratch[..spectrum.len()], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slaney_scale_round_trips() {
        for f in [0.0, 440.0, 1000.0, 5000.0, 16000.0] {
            for htk in [false, true] {
                assert!((mel_to_hz(hz_to_mel(f, htk), htk) - f).abs() < 1e-6);
            }
        }
        assert!((hz_to_mel(1000.0, false) - 15.0).abs() < 1e-12);
    }

    #[test]
    fn sparse_apply_equals_dense() {
        let bank = librosa_mel(
            32000.0,
            1024,
            128,
            50.0,
            Some(14000.0),
            false,
            MelNorm::Slaney,
        )
        .unwrap();
        let spec: Vec<f32> = (0..513).map(|k| (k as f32 * 0.37).sin().abs()).collect();
        let mut out = vec![0f32; 128];
        bank.apply(&spec, &mut out);
        for (m, &got) in out.iter().enumerate() {
            let d: f64 = (0..513)
                .map(|k| bank.dense[m * 513 + k] as f64 * spec[k] as f64)
                .sum();
            assert!((got as f64 - d).abs() < 1e-5 * d.abs().max(1e-3));
        }
    }
}
