//! Rational-rate polyphase resampling with a given FIR filter: the samples
//! scipy's `resample_poly` keeps from `upfirdn(h, x, up, down)` (`x`
//! upsampled by zero insertion, filtered by `h`, every `down`-th sample
//! taken, zeros outside the signal).
//!
//! Output `k` is `sum_i x[i] h[(k + offset) down - i up]` over the indices
//! where `h` is defined. The filter is split once into its `up` phases,
//! each reversed, so that every output is one contiguous dot product of a
//! phase with a window of the (zero-padded) input. Sums run in the input's
//! own precision, as scipy's do; only their order differs.

use std::ops::{Add, Mul};

use crate::error::{try_grow, AglError, Result};
use crate::fastmath::vectorized;
use crate::parallel::Cancel;

/// The float types the resampler runs in.
pub trait Real: Copy + Default + Add<Output = Self> + Mul<Output = Self> + Send + Sync {}
impl Real for f32 {}
impl Real for f64 {}

/// Outputs computed between cancellation checks.
const CHECK_EVERY: usize = 1 << 16;

/// A filter split into its phases.
#[derive(Debug, Clone)]
pub struct Polyphase<T> {
    up: u64,
    down: u64,
    /// Taps per phase (the longest phase, rounded up to a multiple of
    /// eight; shorter phases start with zeros).
    taps: usize,
    /// `up` phases of `taps` coefficients each, reversed.
    table: Vec<T>,
}

impl<T: Real> Polyphase<T> {
    /// The phases of `h` for rates `up`/`down` (both positive, `h` not
    /// empty).
    pub fn new(h: &[T], up: usize, down: usize) -> Result<Self> {
        if up == 0 || down == 0 {
            return Err(AglError::param("up", up, "up and down must be >= 1"));
        }
        if h.is_empty() {
            return Err(AglError::param("h", 0, "the filter must not be empty"));
        }
        // Rounded up to whole vectors of eight: the extra taps are zeros,
        // and the dot products need no remainder loop.
        let taps = h.len().div_ceil(up).div_ceil(8) * 8;
        let mut table = Vec::new();
        try_grow(&mut table, up * taps, "the polyphase filter table")?;
        table.resize(up * taps, T::default());
        for (i, &c) in h.iter().enumerate() {
            let (phase, q) = (i % up, i / up);
            table[phase * taps + taps - 1 - q] = c;
        }
        Ok(Polyphase {
            up: up as u64,
            down: down as u64,
            taps,
            table,
        })
    }

    /// Resample `x` into `out`: output `k` is the filtered signal at
    /// upsampled index `(k + offset) * down`.
    pub fn run(&self, x: &[T], offset: usize, out: &mut [T], cancel: &Cancel) -> Result<()> {
        let n_out = out.len() as u64;
        if n_out == 0 {
            return Ok(());
        }
        let q = self.taps;
        let last = (n_out - 1 + offset as u64) * self.down / self.up;
        // Input index i sits at padded[i + q - 1]; the padding covers every
        // window the outputs read.
        let tail = (last + 1).saturating_sub(x.len() as u64) as usize;
        let mut padded = Vec::new();
        try_grow(&mut padded, q - 1 + x.len() + tail, "the padded input")?;
        padded.resize(q - 1, T::default());
        padded.extend_from_slice(x);
        padded.resize(q - 1 + x.len() + tail, T::default());
        for (c, chunk) in out.chunks_mut(CHECK_EVERY).enumerate() {
            cancel.check()?;
            // The phase and window start of the chunk's first output, then
            // stepped by down = step * up + rest (no division per output).
            let n = (c * CHECK_EVERY + offset) as u64 * self.down;
            let (mut phase, mut at) = ((n % self.up) as usize, (n / self.up) as usize);
            let (step, rest) = (
                (self.down / self.up) as usize,
                (self.down % self.up) as usize,
            );
            let up = self.up as usize;
            vectorized(
                #[inline(always)]
                || {
                    for o in chunk.iter_mut() {
                        let coef = &self.table[phase * q..phase * q + q];
                        *o = dot(coef, &padded[at..at + q]);
                        at += step;
                        phase += rest;
                        if phase >= up {
                            phase -= up;
                            at += 1;
                        }
                    }
                },
            );
        }
        Ok(())
    }
}

/// `sum a[i] b[i]` with eight independent partial sums (`a` and `b` of one
/// length, a multiple of eight).
#[inline(always)]
fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::default(); 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let x: &[T; 8] = x.try_into().expect("chunks of eight");
        let y: &[T; 8] = y.try_into().expect("chunks of eight");
        acc = std::array::from_fn(|j| acc[j] + x[j] * y[j]);
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: upsample by zeros, convolve, take every `down`-th.
    fn naive(h: &[f64], x: &[f64], up: usize, down: usize, offset: usize, n: usize) -> Vec<f64> {
        let mut u = vec![0.0; x.len() * up];
        for (i, &v) in x.iter().enumerate() {
            u[i * up] = v;
        }
        (0..n)
            .map(|k| {
                let t = (k + offset) * down;
                (0..h.len())
                    .filter(|&m| m <= t && t - m < u.len())
                    .map(|m| h[m] * u[t - m])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn outputs_follow_the_definition() {
        let x: Vec<f64> = (0..97)
            .map(|i| ((i * 31 % 17) as f64 - 8.0) / 8.0)
            .collect();
        for (up, down, len, offset) in [(3, 2, 31, 5), (2, 3, 30, 4), (1, 2, 21, 10), (5, 7, 71, 3)]
        {
            let h: Vec<f64> = (0..len).map(|i| 1.0 / (1.0 + i as f64)).collect();
            let n = x.len() * up / down + 3;
            let want = naive(&h, &x, up, down, offset, n);
            let p = Polyphase::new(&h, up, down).unwrap();
            let mut got = vec![0.0; n];
            p.run(&x, offset, &mut got, &Cancel::new()).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-12, "{up}/{down}: {a} {b}");
            }
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let h32: Vec<f32> = h.iter().map(|&v| v as f32).collect();
            let mut got32 = vec![0f32; n];
            Polyphase::new(&h32, up, down)
                .unwrap()
                .run(&x32, offset, &mut got32, &Cancel::new())
                .unwrap();
            for (a, b) in got32.iter().zip(&want) {
                assert!((*a as f64 - b).abs() < 1e-5, "{up}/{down}: {a} {b}");
            }
        }
        assert!(Polyphase::<f64>::new(&[1.0], 0, 1).is_err());
        assert!(Polyphase::<f64>::new(&[], 1, 1).is_err());
    }
}
