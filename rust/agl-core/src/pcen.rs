//! Per-channel energy normalisation (librosa's `pcen`) in one pass per row:
//! the first-order smoother `M[t] = b S[t] + (1 - b) M[t-1]`, computed as
//! scipy's `lfilter([b], [1, b - 1], S, zi=zi)` does (transposed direct form
//! II, the same operations in the same order, so `M` and the final state are
//! bit-identical), then `(eps + M)^-gain` and, for `power = 0.5`,
//! `sqrt(bias) x / (sqrt(1 + x) + 1)` with `x = S (eps + M)^-gain / bias`
//! (`bias^0.5 expm1(0.5 log1p(x))` without the cancellation).
//!
//! The logarithm and exponential are the branch-free [`ln_f64`] and
//! [`exp_f64`] (within a few ulp of the standard library's), so the map
//! vectorises; a row holding a value outside their range (zero, negative,
//! infinite or NaN smoothed energy, an exponent beyond +-700) is redone
//! with the standard library's functions.

use crate::error::{AglError, Result};
use crate::fastmath::{ln_f64, vectorized_wide};
use crate::parallel::Cancel;

/// Rows smoothed together: their recursions are independent, so the CPU
/// overlaps them (one row alone waits on each add and multiply).
const GROUP: usize = 4;

/// The parameters of [`pcen`], as librosa names them (`b` already derived
/// from the time constant where the caller gave none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcenParams {
    pub b: f64,
    pub gain: f64,
    pub eps: f64,
    pub bias: f64,
    pub mode: PcenOutput,
}

/// What [`pcen`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcenOutput {
    /// `(eps + M)^-gain`: the caller finishes other powers and biases.
    Smooth,
    /// librosa's result for `power = 0.5` and `bias > 0`.
    Sqrt,
}

const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// `e^x` for `|x| <= 700`, branch-free: `x = k ln 2 + r` with `|r| <= ln2/2`
/// (`k` rounded to nearest by the 1.5 * 2^52 trick), `e^r` by its Taylor
/// series through `r^13` (truncation below `5e-18` relative), and `2^k`
/// built in the exponent bits. Outside that range the result is not `e^x`:
/// callers check the range.
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let k = (x * std::f64::consts::LOG2_E + SHIFT) - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    for d in [
        479_001_600.0,
        39_916_800.0,
        3_628_800.0,
        362_880.0,
        40_320.0,
        5_040.0,
        720.0,
        120.0,
        24.0,
        6.0,
        2.0,
        1.0,
        1.0,
    ] {
        p = p * r + 1.0 / d;
    }
    // k + 1023 in the low bits of a double of exponent 52, moved up into
    // the exponent field.
    let biased = (k + (1023.0 + 4_503_599_627_370_496.0)).to_bits() & 0x7ff;
    p * f64::from_bits(biased << 52)
}

/// The smoother over `rows` (`GROUP` rows or fewer, each `width` long) from
/// the states `z`, written to `out`; `z` ends holding the final states.
#[inline(always)]
fn smooth_rows(x: &[f64], out: &mut [f64], width: usize, z: &mut [f64], b: f64) {
    let a1 = b - 1.0;
    let n = z.len();
    if n == GROUP {
        let mut s = [z[0], z[1], z[2], z[3]];
        for t in 0..width {
            for (r, sr) in s.iter_mut().enumerate() {
                let xv = x[r * width + t];
                let y = *sr + b * xv;
                out[r * width + t] = y;
                *sr = xv * 0.0 - y * a1;
            }
        }
        z.copy_from_slice(&s);
    } else {
        for (r, sr) in z.iter_mut().enumerate() {
            for t in 0..width {
                let xv = x[r * width + t];
                let y = *sr + b * xv;
                out[r * width + t] = y;
                *sr = xv * 0.0 - y * a1;
            }
        }
    }
}

/// The map after the smoother for one row: `m` (smoothed) becomes the
/// output. Returns whether a value fell outside the fast functions' range.
#[inline(always)]
fn map_row(s: &[f64], m: &mut [f64], p: &PcenParams) -> bool {
    let mode = p.mode;
    let (gain, eps, bias, root_bias) = (p.gain, p.eps, p.bias, p.bias.sqrt());
    let mut bad = false;
    for (v, &sv) in m.iter_mut().zip(s) {
        let q = *v + eps;
        let arg = ln_f64(q) * -gain;
        bad |= !((f64::MIN_POSITIVE..f64::INFINITY).contains(&q) && arg.abs() <= 700.0);
        let smooth = exp_f64(arg);
        *v = match mode {
            PcenOutput::Smooth => smooth,
            PcenOutput::Sqrt => {
                let x = smooth * sv / bias;
                let root = (x + 1.0).sqrt() + 1.0;
                x / root * root_bias
            }
        };
    }
    bad
}

/// [`map_row`] with the standard library's logarithm and exponential, for
/// rows [`map_row`] flagged; `m` holds the smoothed row again.
fn map_row_exact(s: &[f64], m: &mut [f64], p: &PcenParams) {
    let mode = p.mode;
    for (v, &sv) in m.iter_mut().zip(s) {
        let smooth = ((*v + p.eps).ln() * -p.gain).exp();
        *v = match mode {
            PcenOutput::Smooth => smooth,
            PcenOutput::Sqrt => {
                let x = smooth * sv / p.bias;
                x / ((x + 1.0).sqrt() + 1.0) * p.bias.sqrt()
            }
        };
    }
}

/// PCEN of every row of `s` (`[rows, width]`, row-major) from the initial
/// smoother states `zi` (one per row) into `out` (same shape); `zf`
/// (one per row) receives the final states, as scipy's `lfilter` returns
/// them. `Sqrt` needs `bias > 0`.
pub fn pcen(
    s: &[f64],
    width: usize,
    zi: &[f64],
    p: &PcenParams,
    out: &mut [f64],
    zf: &mut [f64],
    cancel: &Cancel,
) -> Result<()> {
    let rows = zi.len();
    if s.len() != rows * width || out.len() != s.len() || zf.len() != rows {
        return Err(AglError::param(
            "S",
            s.len(),
            format!("must hold {rows} rows of {width} values"),
        ));
    }
    if p.mode == PcenOutput::Sqrt && (p.bias.is_nan() || p.bias <= 0.0) {
        return Err(AglError::param("bias", p.bias, "must be > 0 for power=0.5"));
    }
    zf.copy_from_slice(zi);
    if width == 0 {
        return Ok(());
    }
    let span = GROUP * width;
    let groups = s
        .chunks(span)
        .zip(out.chunks_mut(span))
        .zip(zf.chunks_mut(GROUP));
    for (g, ((x, o), z)) in groups.enumerate() {
        cancel.check()?;
        vectorized_wide(
            #[inline(always)]
            || smooth_rows(x, o, width, z, p.b),
        );
        let rows = x.chunks(width).zip(o.chunks_mut(width));
        for (r, (xr, orow)) in rows.enumerate() {
            let bad = vectorized_wide(
                #[inline(always)]
                || map_row(xr, orow, p),
            );
            if bad {
                // The map overwrote the smoothed row: smooth it again.
                let mut z0 = [zi[g * GROUP + r]];
                smooth_rows(xr, orow, width, &mut z0, p.b);
                map_row_exact(xr, orow, p);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulp() {
        let mut worst = 0f64;
        let mut x = -700.0;
        while x <= 700.0 {
            let (a, b) = (exp_f64(x), x.exp());
            worst = worst.max(((a - b) / b).abs());
            x += 0.013_7;
        }
        assert!(worst < 1e-15, "worst relative error {worst}");
        assert_eq!(exp_f64(0.0), 1.0);
    }

    fn reference(s: &[f64], width: usize, zi: &[f64], p: &PcenParams) -> (Vec<f64>, Vec<f64>) {
        let mut out = vec![0.0; s.len()];
        let mut zf = zi.to_vec();
        for (r, z) in zf.iter_mut().enumerate() {
            for t in 0..width {
                let m = *z + p.b * s[r * width + t];
                *z = (1.0 - p.b) * m;
                let smooth = (p.eps + m).powf(-p.gain);
                let x = s[r * width + t] * smooth / p.bias;
                out[r * width + t] = p.bias.sqrt() * (0.5 * x.ln_1p()).exp_m1();
            }
        }
        (out, zf)
    }

    #[test]
    fn rows_match_the_definition_and_bad_rows_are_exact() {
        let p = PcenParams {
            b: 0.06,
            gain: 0.98,
            eps: 1e-6,
            bias: 2.0,
            mode: PcenOutput::Sqrt,
        };
        let width = 37;
        let rows = 6; // one group of four and a short one
        let s: Vec<f64> = (0..rows * width)
            .map(|i| ((i * 7919) % 1000) as f64 * 3.5)
            .collect();
        let zi: Vec<f64> = (0..rows).map(|r| 0.94 * r as f64).collect();
        let (want, want_zf) = reference(&s, width, &zi, &p);
        let (mut out, mut zf) = (vec![0.0; s.len()], vec![0.0; rows]);
        pcen(&s, width, &zi, &p, &mut out, &mut zf, &Cancel::new()).unwrap();
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-13 * b.abs().max(1e-300), "{a} {b}");
        }
        for (a, b) in zf.iter().zip(&want_zf) {
            assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} {b}");
        }
        // A negative energy makes eps + M negative: NaN, as numpy gives.
        let mut bad = s.clone();
        bad[width + 3] = -1e9;
        let p = PcenParams {
            mode: PcenOutput::Smooth,
            ..p
        };
        pcen(&bad, width, &zi, &p, &mut out, &mut zf, &Cancel::new()).unwrap();
        assert!(out[width + 3].is_nan());
        assert!(out[..width].iter().all(|v| v.is_finite()));
    }
}
