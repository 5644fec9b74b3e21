//! Forward real FFT of even length `n` through one complex FFT of `n / 2`.
//!
//! The real frame `x` is read as `n / 2` complex values `z[j] = x[2j] + i
//! x[2j+1]`; after `Z = FFT(z)` the one-sided spectrum follows from the
//! conjugate symmetry of the even and odd parts. With `M = n / 2`,
//! `W = exp(-2 pi i / n)`, `E = (Z[k] + conj Z[M-k]) / 2`,
//! `O = (Z[k] - conj Z[M-k]) / 2` and `T = i W^k O`:
//!
//! ```text
//! X[k]     = E - T
//! X[M - k] = conj(E + T)          (k = 1 .. M/2)
//! X[0]     = Re Z[0] + Im Z[0],   X[M] = Re Z[0] - Im Z[0]
//! ```
//!
//! The post-processing step runs four bins (and their mirrors) per AVX2
//! vector where the CPU has it. Odd lengths go to `realfft`.

use std::sync::Arc;

use num_complex::Complex32;
use realfft::{RealFftPlanner, RealToComplex};

use crate::error::{AglError, Result};

/// A planned forward real FFT (see the module notes).
pub struct RealFft {
    n: usize,
    kind: Kind,
}

enum Kind {
    Half {
        cplx: Arc<dyn rustfft::Fft<f32>>,
        /// `W^k`, `k = 0 ..= M/2` plus padding for whole vector loads.
        twiddles: Vec<Complex32>,
    },
    Odd(Arc<dyn RealToComplex<f32>>),
}

impl RealFft {
    /// Plan a transform of `n` real samples (`n >= 1`); `half(m)` gives the
    /// complex FFT of `m = n / 2` values an even length runs on (the shared
    /// plan of [`super::plans::cfft_plan`]).
    pub fn new(n: usize, half: impl FnOnce(usize) -> Arc<dyn rustfft::Fft<f32>>) -> Self {
        let n = n.max(1);
        if n % 2 == 1 {
            let plan = RealFftPlanner::<f32>::new().plan_fft_forward(n);
            return RealFft {
                n,
                kind: Kind::Odd(plan),
            };
        }
        let m = n / 2;
        let twiddles = (0..m / 2 + 5)
            .map(|k| {
                let a = -2.0 * std::f64::consts::PI * k as f64 / n as f64;
                Complex32::new(a.cos() as f32, a.sin() as f32)
            })
            .collect();
        RealFft {
            n,
            kind: Kind::Half {
                cplx: half(m),
                twiddles,
            },
        }
    }

    /// Input length `n`.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the input length is zero (never: plans have `n >= 1`).
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn make_input_vec(&self) -> Vec<f32> {
        vec![0.0; self.n]
    }

    pub fn make_output_vec(&self) -> Vec<Complex32> {
        vec![Complex32::new(0.0, 0.0); self.n / 2 + 1]
    }

    /// Scratch length [`RealFft::process_with_scratch`] needs.
    pub fn get_scratch_len(&self) -> usize {
        match &self.kind {
            Kind::Half { cplx, .. } => cplx.get_inplace_scratch_len(),
            Kind::Odd(p) => p.get_scratch_len(),
        }
    }

    pub fn make_scratch_vec(&self) -> Vec<Complex32> {
        vec![Complex32::new(0.0, 0.0); self.get_scratch_len()]
    }

    /// [`RealFft::process_with_scratch`] with a scratch buffer of its own.
    pub fn process(&self, input: &mut [f32], output: &mut [Complex32]) -> Result<()> {
        self.process_with_scratch(input, output, &mut self.make_scratch_vec())
    }

    /// Transform `input` (`n` samples, overwritten) into `output`
    /// (`n / 2 + 1` bins), using `scratch` (at least
    /// [`RealFft::make_scratch_vec`]'s length).
    pub fn process_with_scratch(
        &self,
        input: &mut [f32],
        output: &mut [Complex32],
        scratch: &mut [Complex32],
    ) -> Result<()> {
        let n = self.n;
        if input.len() != n || output.len() != n / 2 + 1 {
            return Err(AglError::Shape(format!(
                "real FFT of length {n}: input {} and output {} (want {n} and {})",
                input.len(),
                output.len(),
                n / 2 + 1
            )));
        }
        match &self.kind {
            Kind::Odd(p) => p
                .process_with_scratch(input, output, scratch)
                .map_err(|e| AglError::Shape(e.to_string())),
            Kind::Half { cplx, twiddles } => {
                if scratch.len() < cplx.get_inplace_scratch_len() {
                    return Err(AglError::Shape("real FFT scratch too short".to_string()));
                }
                let z = as_complex(input);
                cplx.process_with_scratch(z, scratch);
                post_process(z, output, twiddles);
                Ok(())
            }
        }
    }
}

/// An even-length real buffer as interleaved complex values.
fn as_complex(x: &mut [f32]) -> &mut [Complex32] {
    let m = x.len() / 2;
    // SAFETY: `Complex32` is `#[repr(C)]` with two `f32` fields (size 8,
    // alignment 4, the alignment of `f32`), so `m` of them occupy exactly
    // the first `2 m` floats of `x`, which the returned borrow holds
    // exclusively for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<Complex32>(), m) }
}

/// The one-sided spectrum `x` (`M + 1` bins) from `z = FFT(packed frame)`.
fn post_process(z: &[Complex32], x: &mut [Complex32], tw: &[Complex32]) {
    let m = z.len();
    let z0 = z[0];
    x[0] = Complex32::new(z0.re + z0.im, 0.0);
    x[m] = Complex32::new(z0.re - z0.im, 0.0);
    let mut k = 1;
    #[cfg(target_arch = "x86_64")]
    if crate::fastmath::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        k = unsafe { post_avx2(z, x, tw) };
    }
    while 2 * k <= m {
        let (e, t) = parts(z[k], z[m - k], tw[k]);
        x[k] = e - t;
        x[m - k] = (e + t).conj();
        k += 1;
    }
}

/// `E` and `T` of bin `k` (module notes) from `Z[k]`, `Z[M-k]` and `W^k`.
#[inline(always)]
fn parts(a: Complex32, b: Complex32, w: Complex32) -> (Complex32, Complex32) {
    let b = b.conj();
    let e = (a + b) * 0.5;
    let o = (a - b) * 0.5;
    let wo = w * o;
    (e, Complex32::new(-wo.im, wo.re))
}

/// Bins `1 ..` four at a time while all four and their mirrors are
/// distinct (`k + 3 < M - k - 3`, i.e. `2 k + 6 < M`); returns the first
/// bin left to do.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn post_avx2(z: &[Complex32], x: &mut [Complex32], tw: &[Complex32]) -> usize {
    use std::arch::x86_64::*;
    let m = z.len();
    let zp = z.as_ptr().cast::<f32>();
    let xp = x.as_mut_ptr().cast::<f32>();
    let tp = tw.as_ptr().cast::<f32>();
    let half = _mm256_set1_ps(0.5);
    // Sign flips: the imaginary lanes (conjugation), the real lanes.
    let neg_im = _mm256_castsi256_ps(_mm256_set1_epi64x(i64::MIN));
    let neg_re = _mm256_castsi256_ps(_mm256_set1_epi64x(0x8000_0000));
    let mut k = 1;
    while 2 * k + 6 < m {
        // SAFETY: `k + 3 < m - k - 3 < m`, so bins `k .. k + 4` and
        // `m - k - 3 .. m - k + 1` lie in `z` (length `m`) and `x` (length
        // `m + 1`); `tw` holds `m / 2 + 5 > k + 3` twiddles.
        unsafe {
            let a = _mm256_loadu_ps(zp.add(2 * k));
            // Z[m-k-3 ..= m-k], reversed to Z[m-k], ..., Z[m-k-3], conjugated.
            let r = _mm256_loadu_ps(zp.add(2 * (m - k - 3)));
            let r = _mm256_permute2f128_ps::<0x01>(r, r);
            let r = _mm256_shuffle_ps::<0b01_00_11_10>(r, r);
            let b = _mm256_xor_ps(r, neg_im);
            let e = _mm256_mul_ps(_mm256_add_ps(a, b), half);
            let o = _mm256_mul_ps(_mm256_sub_ps(a, b), half);
            let w = _mm256_loadu_ps(tp.add(2 * k));
            let wr = _mm256_moveldup_ps(w);
            let wi = _mm256_movehdup_ps(w);
            let o_sw = _mm256_shuffle_ps::<0b10_11_00_01>(o, o);
            // W O: (wr or - wi oi, wr oi + wi or).
            let wo = _mm256_fmaddsub_ps(wr, o, _mm256_mul_ps(wi, o_sw));
            // T = i W O = (-im, re).
            let t = _mm256_xor_ps(_mm256_shuffle_ps::<0b10_11_00_01>(wo, wo), neg_re);
            _mm256_storeu_ps(xp.add(2 * k), _mm256_sub_ps(e, t));
            let mirror = _mm256_xor_ps(_mm256_add_ps(e, t), neg_im);
            let mirror = _mm256_permute2f128_ps::<0x01>(mirror, mirror);
            let mirror = _mm256_shuffle_ps::<0b01_00_11_10>(mirror, mirror);
            _mm256_storeu_ps(xp.add(2 * (m - k - 3)), mirror);
        }
        k += 4;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spectral::plans::cfft_plan;
    use crate::testutil::noise;

    /// The one-sided DFT in f64, from the definition.
    fn dft(x: &[f32]) -> Vec<(f64, f64)> {
        let n = x.len();
        (0..=n / 2)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |(re, im), (j, &v)| {
                    let a = -2.0 * std::f64::consts::PI * (k * j % n) as f64 / n as f64;
                    (re + v as f64 * a.cos(), im + v as f64 * a.sin())
                })
            })
            .collect()
    }

    #[test]
    fn matches_the_definition_for_even_and_odd_lengths() {
        for n in [
            1, 2, 3, 4, 6, 8, 10, 14, 16, 18, 30, 32, 34, 64, 100, 257, 400, 512, 1024,
        ] {
            let x = noise(n, n as u64);
            let p = RealFft::new(n, cfft_plan);
            let (mut inp, mut out, mut s) = (x.clone(), p.make_output_vec(), p.make_scratch_vec());
            p.process_with_scratch(&mut inp, &mut out, &mut s).unwrap();
            let want = dft(&x);
            let scale = want.iter().map(|(r, i)| r.hypot(*i)).fold(1e-30, f64::max);
            for (k, (got, (wr, wi))) in out.iter().zip(&want).enumerate() {
                let err = (got.re as f64 - wr).hypot(got.im as f64 - wi);
                assert!(err <= 2e-6 * scale, "n={n} k={k}: {got} vs ({wr}, {wi})");
            }
        }
    }

    #[test]
    fn matches_realfft_and_rejects_wrong_lengths() {
        for n in [2, 16, 48, 512, 2048] {
            let x = noise(n, 3);
            let mine = RealFft::new(n, cfft_plan);
            let theirs = RealFftPlanner::<f32>::new().plan_fft_forward(n);
            let (mut a, mut b) = (x.clone(), x.clone());
            let (mut oa, mut ob) = (mine.make_output_vec(), theirs.make_output_vec());
            let mut sa = mine.make_scratch_vec();
            let mut sb = theirs.make_scratch_vec();
            mine.process_with_scratch(&mut a, &mut oa, &mut sa).unwrap();
            theirs
                .process_with_scratch(&mut b, &mut ob, &mut sb)
                .unwrap();
            let scale = ob.iter().map(|c| c.norm()).fold(1e-30f32, f32::max);
            for (u, v) in oa.iter().zip(&ob) {
                assert!((u - v).norm() <= 1e-6 * scale, "n={n}: {u} vs {v}");
            }
        }
        let p = RealFft::new(8, cfft_plan);
        let mut s = p.make_scratch_vec();
        assert!(p
            .process_with_scratch(&mut [0.0; 7], &mut p.make_output_vec(), &mut s)
            .is_err());
    }

    #[test]
    fn identical_frames_give_identical_spectra() {
        // The complexity metrics rely on it: a constant clip scores 0.
        let p = RealFft::new(512, cfft_plan);
        let x = vec![0.7f32; 512];
        let mut s = p.make_scratch_vec();
        let (mut a, mut b) = (x.clone(), x);
        let (mut oa, mut ob) = (p.make_output_vec(), p.make_output_vec());
        p.process_with_scratch(&mut a, &mut oa, &mut s).unwrap();
        p.process_with_scratch(&mut b, &mut ob, &mut s).unwrap();
        assert_eq!(oa, ob);
    }
}
