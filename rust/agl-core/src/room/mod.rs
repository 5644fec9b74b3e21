//! Room acoustics from impulse responses: Schroeder energy decay curves with
//! noise handling, decay times, energy ratios and an EDC distance.
//!
//! Every function works on one channel (a curve) at a time; batches are
//! lists of channels, so a `2 x L` binaural RIR is two curves. Work is in
//! f64.
//!
//! * Onset (ISO 3382-1): the first sample whose energy is within 20 dB of
//!   the peak energy.
//! * Noise handling ([`NoiseMethod`]):
//!   - `None`: plain backward integration `EDC[n] = sum_{k>=n} h[k]^2`.
//!   - `Lundeby`: the iterative truncation of Lundeby et al. (1995): block
//!     averages, a noise estimate from the tail, a regression of the decay
//!     and the crossing point with the noise; the EDC is integrated up to
//!     the crossing point, the energy of the regression's exponential tail
//!     beyond it is added (tail correction), and later samples are NaN.
//!   - `LundebyChu`: both: the noise energy found by Lundeby's iteration is
//!     subtracted from every sample, the curve is truncated at the crossing
//!     point and the tail correction added (ISO 3382-1's recommendation).
//!   - `Chu`: the mean noise energy (last 10% of the IR) is subtracted from
//!     every sample before integration; values that are not positive or lie
//!     less than 10 dB above the noise-to-peak level are NaN.
//! * Decay times by least squares on the dB EDC (from the onset, normalised
//!   there) between the first samples at or below the upper and lower
//!   levels: EDT 0..-10 dB (x6), T20 -5..-25 (x3), T30 -5..-35 (x2), T60
//!   -5..-65 (x1).
//! * Energy ratios from the onset, taken from the EDC (so including the
//!   Lundeby tail, noise-subtracted with Chu): C50, C80 (dB), D50
//!   (fraction), centre time Ts (s); DRR (dB) with the direct part the
//!   samples from the onset within `direct_ms` of the peak and the
//!   reverberant part every later sample.

use crate::batch::map_items;
use crate::error::{check_finite, AglError, Result};
use crate::parallel::Cancel;

/// How the noisy tail of an impulse response is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseMethod {
    None,
    Lundeby,
    Chu,
    LundebyChu,
}

impl NoiseMethod {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "none" => Ok(NoiseMethod::None),
            "lundeby" => Ok(NoiseMethod::Lundeby),
            "chu" => Ok(NoiseMethod::Chu),
            "lundeby_chu" => Ok(NoiseMethod::LundebyChu),
            other => Err(AglError::param(
                "method",
                other,
                "must be 'none', 'lundeby', 'chu' or 'lundeby_chu'",
            )),
        }
    }
}

/// Status of one output value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    InsufficientRange = 1,
    NoOnset = 2,
    TooShort = 3,
}

/// Names of the values of [`RoomParams`], in order.
pub const PARAM_NAMES: [&str; 9] = ["edt", "t20", "t30", "t60", "drr", "c50", "c80", "d50", "ts"];

/// One curve's parameters and their statuses (NaN where not `Ok`).
#[derive(Debug, Clone, PartialEq)]
pub struct RoomParams {
    pub values: [f64; 9],
    pub status: [Status; 9],
}

/// Fraction of the IR at its end used for noise estimates.
const TAIL_FRACTION: f64 = 0.1;

use crate::mel::check_sr;

fn check_curves(curves: &[&[f32]]) -> Result<()> {
    for (i, x) in curves.iter().enumerate() {
        if !all_finite(x) {
            check_finite(x, &format!("impulse response (curve {i})"))?;
        }
    }
    Ok(())
}

/// Whether every value is finite: `v * 0` is NaN for NaN and +-Inf, and the
/// eight independent lanes let the sum vectorise.
fn all_finite(x: &[f32]) -> bool {
    let mut acc = [0.0f32; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v * 0.0;
        }
    }
    let rest = it.remainder().iter().fold(0.0f32, |a, &v| a + v * 0.0);
    (acc.iter().sum::<f32>() + rest).is_finite()
}

#[inline(always)]
fn sq(v: f32) -> f64 {
    (v as f64) * (v as f64)
}

/// Index of the first largest `|h[n]|` and its energy `h[n]^2`; `None` when
/// every sample is zero.
#[inline(always)]
fn peak(h: &[f32]) -> Option<(usize, f64)> {
    peak_finite(h).0
}

/// [`peak`] and whether every sample is finite, in one pass (`v * 0` is NaN
/// for NaN and +-Inf; see [`all_finite`]).
#[inline(always)]
fn peak_finite(h: &[f32]) -> (Option<(usize, f64)>, bool) {
    let mut lanes = [0.0f32; 8];
    let mut acc = [0.0f32; 8];
    let mut it = h.chunks_exact(8);
    for c in &mut it {
        for ((m, z), &v) in lanes.iter_mut().zip(acc.iter_mut()).zip(c) {
            let a = v.abs();
            *m = if a > *m { a } else { *m };
            *z += v * 0.0;
        }
    }
    let rest = it.remainder();
    let top = rest
        .iter()
        .fold(lanes.iter().fold(0.0f32, |a, &b| a.max(b)), |a, &v| {
            a.max(v.abs())
        });
    let finite =
        (acc.iter().sum::<f32>() + rest.iter().fold(0.0f32, |a, &v| a + v * 0.0)).is_finite();
    if !finite || top <= 0.0 {
        return (None, finite);
    }
    let i = h.iter().position(|&v| v.abs() == top);
    (i.map(|i| (i, sq(top))), finite)
}

/// ISO 3382-1 onset: the first sample within 20 dB of the peak energy `pe`.
#[inline(always)]
fn onset(h: &[f32], pe: f64) -> usize {
    h.iter().position(|&v| sq(v) >= pe * 0.01).unwrap_or(0)
}

/// Schroeder sums `s[i] = sum_{k >= i} h[k]^2` in f64, with `s[n] = 0` (so
/// `s` holds `n + 1` values and any block energy is a difference).
///
/// The sum runs as four interleaved chains over four segments (the adds of
/// one chain wait on each other, the chains do not), then each segment gets
/// the sum of everything after it. Rounding is monotone, so the result is
/// non-increasing exactly as a serial sum is.
#[inline(always)]
fn suffix_energy(h: &[f32], s: &mut Vec<f64>) {
    suffix_scan::<false>(h, s);
}

/// [`suffix_energy`] that also finds what [`peak_finite`] finds, in the
/// same pass (so the impulse response is read from memory once).
#[inline(always)]
fn suffix_energy_peak(h: &[f32], s: &mut Vec<f64>) -> (Option<(usize, f64)>, bool) {
    let (top, zero) = suffix_scan::<true>(h, s);
    if !zero.is_finite() {
        return (None, false);
    }
    if top <= 0.0 {
        return (None, true);
    }
    let i = h.iter().position(|&v| v.abs() == top);
    (i.map(|i| (i, sq(top))), true)
}

/// The Schroeder sums of [`suffix_energy`]; with `TRACK`, also the largest
/// `|h[n]|` (NaN ignored) and `sum h[n] * 0` (not finite when a sample is
/// not), else `(0, 0)`.
#[inline(always)]
fn suffix_scan<const TRACK: bool>(h: &[f32], s: &mut Vec<f64>) -> (f32, f32) {
    const K: usize = 4;
    let n = h.len();
    // Growing writes zeros once; every value is overwritten below.
    s.resize(n + 1, 0.0);
    s[n] = 0.0;
    let q = n / K;
    let (mut top, mut zero) = ([0.0f32; K], [0.0f32; K]);
    let mut track = |l: usize, v: f32| {
        if TRACK {
            let a = v.abs();
            top[l] = if a > top[l] { a } else { top[l] };
            zero[l] += v * 0.0;
        }
    };
    let mut acc = 0.0;
    for i in (K * q..n).rev() {
        track(0, h[i]);
        acc += sq(h[i]);
        s[i] = acc;
    }
    if q > 0 {
        let (h0, rest) = h.split_at(q);
        let (h1, rest) = rest.split_at(q);
        let (h2, rest) = rest.split_at(q);
        let h3 = &rest[..q];
        let (s0, rest) = s.split_at_mut(q);
        let (s1, rest) = rest.split_at_mut(q);
        let (s2, rest) = rest.split_at_mut(q);
        let s3 = &mut rest[..q];
        let mut a = [0.0f64; K];
        for t in (0..q).rev() {
            track(0, h0[t]);
            track(1, h1[t]);
            track(2, h2[t]);
            track(3, h3[t]);
            a[0] += sq(h0[t]);
            a[1] += sq(h1[t]);
            a[2] += sq(h2[t]);
            a[3] += sq(h3[t]);
            s0[t] = a[0];
            s1[t] = a[1];
            s2[t] = a[2];
            s3[t] = a[3];
        }
        for k in (0..K).rev() {
            let off = s[(k + 1) * q];
            if off != 0.0 {
                s[k * q..(k + 1) * q].iter_mut().for_each(|v| *v += off);
            }
        }
    }
    (
        top.iter().fold(0.0f32, |m, &v| m.max(v)),
        zero.iter().sum::<f32>(),
    )
}

/// Mean energy per sample of `[from, n)` from the Schroeder sums `s`
/// (`from` clamped to the last sample).
fn tail_noise(s: &[f64], from: usize) -> f64 {
    let n = s.len() - 1;
    if n == 0 {
        return 0.0;
    }
    let from = from.min(n - 1);
    s[from] / (n - from) as f64
}

fn db(v: f64) -> f64 {
    10.0 * v.log10()
}

/// Natural logarithm of a positive normal `x` without a libm call (branch
/// free, so loops over it vectorise): `x = 2^e m` with `m` in
/// `[sqrt(1/2), sqrt(2))`, `ln m = 2 atanh((m - 1) / (m + 1))` by its series
/// to the 13th power; absolute error below 1e-12.
#[inline(always)]
pub fn fast_ln(x: f64) -> f64 {
    const MANT: u64 = 0x000f_ffff_ffff_ffff;
    // 2^52 + k as a double holds the integer k < 2^52 exactly, so the biased
    // exponent becomes a float without an integer conversion (which AVX2
    // lacks for 64-bit lanes).
    const MAGIC: f64 = 4_503_599_627_370_496.0;
    let bits = x.to_bits();
    let biased = f64::from_bits(MAGIC.to_bits() | ((bits >> 52) & 0x7ff)) - MAGIC;
    let m = f64::from_bits((bits & MANT) | (1023 << 52));
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = biased - if big { 1022.0 } else { 1023.0 };
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let p = 1.0
        + z * (1.0 / 3.0
            + z * (1.0 / 5.0
                + z * (1.0 / 7.0 + z * (1.0 / 9.0 + z * (1.0 / 11.0 + z * (1.0 / 13.0))))));
    e * std::f64::consts::LN_2 + 2.0 * s * p
}

/// Block averages over windows of `w` samples from the Schroeder sums `s`:
/// (centre, level dB).
fn blocks(s: &[f64], w: usize) -> Vec<(f64, f64)> {
    let n = s.len() - 1;
    (0..n)
        .step_by(w)
        .enumerate()
        .map(|(i, a)| {
            let b = (a + w).min(n);
            let m = (s[a] - s[b]) / (b - a) as f64;
            (
                (i * w) as f64 + ((b - a) as f64 - 1.0) / 2.0,
                db(m.max(1e-300)),
            )
        })
        .collect()
}

/// Least squares `y = a + b x`; `None` with fewer than 2 points.
fn linfit(pts: impl Iterator<Item = (f64, f64)>) -> Option<(f64, f64)> {
    let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (x, y) in pts {
        n += 1.0;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    let d = n * sxx - sx * sx;
    if n < 2.0 || d <= 0.0 {
        return None;
    }
    let b = (n * sxy - sx * sy) / d;
    Some(((sy - b * sx) / n, b))
}

/// Lundeby's iteration on the Schroeder sums `s` of a curve (see
/// [`suffix_energy`]; `n + 1` values): the crossing sample, the tail energy
/// beyond it (sum units) and the noise energy per sample.
pub fn lundeby(s: &[f64], sr: f64) -> Option<(usize, f64, f64)> {
    let n = s.len().checked_sub(1)?;
    if n < 16 {
        return None;
    }
    let w0 = ((0.03 * sr) as usize).clamp(1, (n / 10).max(1));
    let bl = blocks(s, w0);
    let mut noise = tail_noise(s, ((1.0 - TAIL_FRACTION) * n as f64) as usize);
    if noise <= 0.0 {
        return None;
    }
    let peak = bl
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i)?;
    let nd = db(noise);
    let stop = bl[peak..]
        .iter()
        .position(|&(_, l)| l <= nd + 10.0)
        .map(|p| p + peak)
        .unwrap_or(bl.len());
    let (mut a, mut b) = linfit(bl[peak..stop].iter().cloned())?;
    if b >= 0.0 {
        return None;
    }
    let mut cross = (nd - a) / b;
    for _ in 0..5 {
        let per_10db = -10.0 / b;
        let w = ((per_10db / 5.0) as usize).clamp(1, (n / 4).max(1));
        let bl = blocks(s, w);
        let noise_from = (cross + per_10db).max(0.0) as usize;
        let noise_from = noise_from.min(((1.0 - TAIL_FRACTION) * n as f64) as usize);
        noise = tail_noise(s, noise_from);
        if noise <= 0.0 {
            return None;
        }
        let nd = db(noise);
        let peak = bl
            .iter()
            .enumerate()
            .max_by(|x, y| x.1 .1.total_cmp(&y.1 .1))
            .map(|(i, _)| i)?;
        let hi = bl[peak..]
            .iter()
            .position(|&(_, l)| l <= nd + 25.0)
            .map(|p| p + peak)
            .unwrap_or(peak);
        let lo = bl[hi..]
            .iter()
            .position(|&(_, l)| l <= nd + 5.0)
            .map(|p| p + hi)
            .unwrap_or(bl.len());
        let fit = if lo > hi + 1 {
            linfit(bl[hi..lo].iter().cloned())
        } else {
            linfit(bl[peak..lo.max(peak + 2).min(bl.len())].iter().cloned())
        };
        let Some((na, nb)) = fit else { break };
        if nb >= 0.0 {
            break;
        }
        let new_cross = (nd - na) / nb;
        let moved = (new_cross - cross).abs();
        a = na;
        b = nb;
        cross = new_cross;
        if moved < w as f64 {
            break;
        }
    }
    let _ = a;
    let c = cross.clamp(1.0, n as f64) as usize;
    // Tail beyond the crossing: the regression's exponential, whose level
    // at the crossing is the noise level, integrated to infinity.
    let tail = noise / (-b * std::f64::consts::LN_10 / 10.0);
    Some((c, tail, noise))
}

/// Turn the Schroeder sums `s` of a curve (`n + 1` values, see
/// [`suffix_energy`]) into its EDC in place (linear, not normalised; `s[n]`
/// is left as scratch) and return the end of the usable range: every value
/// before it is positive and finite, every value from it on is NaN (or, with
/// `None`, zero). `pe` is the curve's peak energy.
#[inline(always)]
fn edc_in_place(s: &mut [f64], sr: f64, method: NoiseMethod, pe: f64) -> usize {
    let n = s.len() - 1;
    let crossing = match method {
        NoiseMethod::Lundeby | NoiseMethod::LundebyChu => lundeby(s, sr),
        _ => None,
    };
    match (method, crossing) {
        (NoiseMethod::Lundeby, Some((c, tail, _))) => {
            let sc = s[c];
            s[..c].iter_mut().for_each(|v| *v = (*v - sc) + tail);
            s[c..n].iter_mut().for_each(|v| *v = f64::NAN);
            c
        }
        (NoiseMethod::LundebyChu, Some((c, tail, noise))) => {
            let sc = s[c];
            // EDC[i] = (S[i] - S[c]) - noise (c - i) + tail.
            sub_ramp(&mut s[..c], noise, c as f64, tail - sc);
            let end = first_at_or_below(&s[..c], 0.0).unwrap_or(c);
            s[end..n].iter_mut().for_each(|v| *v = f64::NAN);
            end
        }
        (NoiseMethod::None | NoiseMethod::Lundeby, _) => s[..n].partition_point(|&v| v > 0.0),
        (NoiseMethod::Chu | NoiseMethod::LundebyChu, _) => {
            let noise = tail_noise(s, ((1.0 - TAIL_FRACTION) * n as f64) as usize);
            sub_ramp(&mut s[..n], noise, n as f64, 0.0);
            let start = s[0];
            // Usable while positive and 10 dB above the noise-to-peak level.
            let floor = if pe > 0.0 { noise / pe * 10.0 } else { 0.0 };
            let end = s[..n]
                .iter()
                .position(|&v| !(v > 0.0 && start > 0.0 && v / start > floor))
                .unwrap_or(n);
            s[end..n].iter_mut().for_each(|v| *v = f64::NAN);
            end
        }
    }
}

/// `s[i] = (s[i] - noise (c - i)) + add`, sixteen lanes of float indices
/// (the integer-to-float conversion of 64-bit lanes does not vectorise; four
/// registers of lanes keep the index updates from waiting on each other).
#[inline(always)]
fn sub_ramp(s: &mut [f64], noise: f64, c: f64, add: f64) {
    const L: usize = 16;
    let mut left = [0.0f64; L];
    for (l, v) in left.iter_mut().enumerate() {
        *v = c - l as f64;
    }
    let mut it = s.chunks_exact_mut(L);
    for q in &mut it {
        for l in 0..L {
            q[l] = (q[l] - noise * left[l]) + add;
            left[l] -= L as f64;
        }
    }
    let mut r = left[0];
    for v in it.into_remainder() {
        *v = (*v - noise * r) + add;
        r -= 1.0;
    }
}

/// Sum in f64 over sixteen lanes (four registers of independent adds).
#[inline(always)]
fn sum_lanes(x: &[f64]) -> f64 {
    const L: usize = 16;
    let mut acc = [0.0f64; L];
    let mut it = x.chunks_exact(L);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f64>() + it.remainder().iter().sum::<f64>()
}

/// A curve's EDC (`h.len()` values, NaN beyond the usable range).
#[inline(always)]
fn edc_curve(h: &[f32], sr: f64, method: NoiseMethod) -> Vec<f64> {
    let pe = peak(h).map_or(0.0, |p| p.1);
    let mut s = Vec::new();
    suffix_energy(h, &mut s);
    edc_in_place(&mut s, sr, method, pe);
    s.pop();
    s
}

thread_local! {
    /// Per-thread buffer of the Schroeder sums in [`room_params_curve`].
    static SUMS: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Options of [`edc_batch`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdcOptions {
    pub method: NoiseMethod,
    /// Divide by the first value (so the curve starts at 1, 0 dB).
    pub normalize: bool,
    /// Return `10 log10(EDC)` instead of the linear curve.
    pub db: bool,
}

/// Energy decay curves of a batch of curves (one per channel), each as long
/// as its IR; NaN beyond the usable range.
pub fn edc_batch(
    curves: &[&[f32]],
    sr: f64,
    opts: EdcOptions,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Vec<f64>>> {
    check_sr(sr)?;
    check_curves(curves)?;
    map_items(curves.len(), n_threads, cancel, |i| {
        let mut c = crate::fastmath::vectorized(
            #[inline(always)]
            || edc_curve(curves[i], sr, opts.method),
        );
        let first = c.first().copied().unwrap_or(0.0);
        if opts.normalize && first > 0.0 {
            c.iter_mut().for_each(|v| *v /= first);
        }
        if opts.db {
            c.iter_mut().for_each(|v| {
                *v = if *v > 0.0 {
                    db(*v)
                } else if v.is_nan() {
                    *v
                } else {
                    f64::NEG_INFINITY
                };
            });
        }
        Ok(c)
    })
}

/// `(sum y, sum k y)` over `k` in `[a, b)` of `y[k] = to_db * ln(d[k] * inv)`
/// (every `d[k] * inv` a positive normal number).
///
/// With `x = 2^e m`, `m` in `[1, 2)`, the exponents are summed exactly and
/// the logarithms of the mantissas come from products: sixteen lanes (lane
/// `j` takes the samples `k = j mod 16`) each keep `A = prod m` and
/// `C = prod A` over up to 32 rows, so that `sum ln m = ln A` and
/// `sum_r r ln m_r = rows ln A - ln C` (row `r`); both products stay below
/// `2^528`. Two logarithms per lane every 512 samples replace one per
/// sample, and the rounding of the products (relative `6e-14` at most) is
/// smaller than that of a logarithm per sample.
#[inline(always)]
fn db_sums(d: &[f64], a: usize, b: usize, inv: f64) -> (f64, f64) {
    const TO_DB: f64 = 10.0 / std::f64::consts::LN_10;
    const L: usize = 16;
    const T: usize = 32;
    const MANT: u64 = 0x000f_ffff_ffff_ffff;
    const ONE: u64 = 1023 << 52;
    // 2^52 + k holds the integer k exactly (see `fast_ln`).
    const MAGIC: f64 = 4_503_599_627_370_496.0;
    let x = &d[a..b];
    // Exponent sums `sum e` and `sum k e` (k from `a`), exact integers.
    let (mut e0, mut e1) = ([0.0f64; L], [0.0f64; L]);
    // Mantissa log sums per lane.
    let (mut l0, mut l1) = ([0.0f64; L], [0.0f64; L]);
    let mut kf = [0.0f64; L];
    for (j, k) in kf.iter_mut().enumerate() {
        *k = j as f64;
    }
    let mut rows = x.chunks_exact(L);
    let mut base = 0.0f64;
    loop {
        let (mut pa, mut pc) = ([1.0f64; L], [1.0f64; L]);
        let mut t = 0;
        for row in rows.by_ref().take(T) {
            for j in 0..L {
                let bits = (row[j] * inv).to_bits();
                let e = f64::from_bits(MAGIC.to_bits() | (bits >> 52)) - (MAGIC + 1023.0);
                let m = f64::from_bits((bits & MANT) | ONE);
                e0[j] += e;
                e1[j] += kf[j] * e;
                kf[j] += L as f64;
                pa[j] *= m;
                pc[j] *= pa[j];
            }
            t += 1;
        }
        if t == 0 {
            break;
        }
        let tf = t as f64;
        for j in 0..L {
            let (la, lc) = (fast_ln(pa[j]), fast_ln(pc[j]));
            l0[j] += la;
            l1[j] += (base + j as f64) * la + L as f64 * (tf * la - lc);
        }
        base += tf * L as f64;
        if t < T {
            break;
        }
    }
    let ln2 = std::f64::consts::LN_2;
    let mut t0 = ln2 * e0.iter().sum::<f64>() + l0.iter().sum::<f64>();
    let mut t1 = ln2 * e1.iter().sum::<f64>() + l1.iter().sum::<f64>();
    let done = x.len() / L * L;
    for (k, &v) in rows.remainder().iter().enumerate() {
        let y = fast_ln(v * inv);
        t0 += y;
        t1 += (done + k) as f64 * y;
    }
    (TO_DB * t0, TO_DB * (t1 + a as f64 * t0))
}

/// Index of the first value at or below `t`, sixteen values per test.
#[inline(always)]
fn first_at_or_below(d: &[f64], t: f64) -> Option<usize> {
    let mut base = 0;
    for c in d.chunks(16) {
        if c.iter().fold(false, |a, &v| a | (v <= t)) {
            return c.iter().position(|&v| v <= t).map(|p| base + p);
        }
        base += c.len();
    }
    None
}

/// Parameters of one curve.
///
/// One backward pass over the response finds the peak, checks that every
/// sample is finite and builds the Schroeder sums; those from the onset on
/// become, in place, the EDC of the chosen method. The fit ranges are the
/// first samples at or below `EDC[0] 10^(L/10)` for each level `L`, found
/// in one scan; the least-squares slopes come from sums of `y` and `k y`
/// (dB EDC `y`, sample `k`) accumulated between consecutive range ends
/// ([`db_sums`]: products of mantissas, two logarithms per lane every 512
/// samples) and only up to the deepest range. A response that is not
/// finite gives `NoOnset` here (the batch raises instead). Energy
/// sums come from the EDC itself (`E[a..b) = EDC[a] - EDC[b]`, the first
/// moment as `sum_{n>=1} EDC[n]`), so they include the tail correction and,
/// with Chu's method, are noise-subtracted.
pub fn room_params_curve(h: &[f32], sr: f64, method: NoiseMethod, direct_ms: f64) -> RoomParams {
    room_params_finite(h, sr, method, direct_ms).unwrap_or(RoomParams {
        values: [f64::NAN; 9],
        status: [Status::NoOnset; 9],
    })
}

/// [`room_params_curve`], `None` when a sample is not finite (found in the
/// pass that finds the peak).
fn room_params_finite(
    h: &[f32],
    sr: f64,
    method: NoiseMethod,
    direct_ms: f64,
) -> Option<RoomParams> {
    SUMS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => crate::fastmath::vectorized(
            #[inline(always)]
            || room_params_impl(h, sr, method, direct_ms, &mut s),
        ),
        Err(_) => crate::fastmath::vectorized(
            #[inline(always)]
            || room_params_impl(h, sr, method, direct_ms, &mut Vec::new()),
        ),
    })
}

#[inline(always)]
fn room_params_impl(
    h: &[f32],
    sr: f64,
    method: NoiseMethod,
    direct_ms: f64,
    s: &mut Vec<f64>,
) -> Option<RoomParams> {
    let values = [f64::NAN; 9];
    let status = [Status::Ok; 9];
    // The sums from the onset on are those of the whole response.
    let (found, finite) = suffix_energy_peak(h, s);
    if !finite {
        return None;
    }
    let Some((pk, pe)) = found else {
        return Some(RoomParams {
            values,
            status: [Status::NoOnset; 9],
        });
    };
    let o = onset(h, pe);
    if h.len() - o < 4 {
        return Some(RoomParams {
            values,
            status: [Status::TooShort; 9],
        });
    }
    let s = &mut s[o..];
    let end = edc_in_place(s, sr, method, pe);
    let e0 = s[0];
    if end < 2 || !(e0 > 0.0) {
        return Some(RoomParams {
            values,
            status: [Status::InsufficientRange; 9],
        });
    }
    let c = Curve {
        d: &s[..end],
        e0,
        sr,
    };
    let mut out = RoomParams { values, status };
    let ranges = c.fit_ranges(&mut out.status);
    c.decay_times(&ranges, &mut out);
    c.energy_ratios(&mut out);
    // DRR around the peak (the first largest sample of the usable range).
    let p = if pk - o < end {
        pk - o
    } else {
        let top = h[o..o + end].iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        h[o..o + end]
            .iter()
            .position(|&v| v.abs() == top)
            .unwrap_or(0)
    };
    c.drr(p, (direct_ms * 1e-3 * sr).round() as usize, &mut out);
    let RoomParams { mut values, status } = out;
    for k in 0..9 {
        if status[k] != Status::Ok {
            values[k] = f64::NAN;
        }
    }
    Some(RoomParams { values, status })
}

/// The usable EDC of a response from its onset (`d`, up to the end of the
/// range), its value at the onset and the sample rate.
struct Curve<'a> {
    d: &'a [f64],
    e0: f64,
    sr: f64,
}

impl Curve<'_> {
    /// The (first, last) samples of the fits of EDT, T20, T30 and T60, from
    /// the first samples at or below 0, -5, -10, -25, -35 and -65 dB; the
    /// status of a fit without a range.
    #[inline(always)]
    fn fit_ranges(&self, status: &mut [Status; 9]) -> [Option<(usize, usize)>; 4] {
        const LEVELS: [f64; 6] = [0.0, -5.0, -10.0, -25.0, -35.0, -65.0];
        let mut th = [0.0f64; 6];
        for (t, l) in th.iter_mut().zip(LEVELS) {
            *t = self.e0 * 10f64.powf(l / 10.0);
        }
        let mut at = [usize::MAX; 6];
        let mut i = 0;
        for (t, slot) in th.iter().zip(at.iter_mut()) {
            match first_at_or_below(&self.d[i..], *t) {
                Some(p) => {
                    i += p;
                    *slot = i;
                }
                None => break,
            }
        }
        // (upper, lower) level indices of EDT, T20, T30, T60.
        const FITS: [(usize, usize); 4] = [(0, 2), (1, 3), (1, 4), (1, 5)];
        let mut ranges = [None; 4];
        for (r, &(u, l)) in FITS.iter().enumerate() {
            match (at[u], at[l]) {
                (i, j) if j != usize::MAX && j >= i + 2 => ranges[r] = Some((i, j)),
                (_, j) if j != usize::MAX => status[r] = Status::TooShort,
                _ => status[r] = Status::InsufficientRange,
            }
        }
        ranges
    }

    /// Decay times by least squares over `ranges`, from the sums of y and
    /// k y up to each range end, taken in one pass.
    #[inline(always)]
    fn decay_times(&self, ranges: &[Option<(usize, usize)>; 4], out: &mut RoomParams) {
        let mut cuts: Vec<usize> = ranges
            .iter()
            .flatten()
            .flat_map(|&(i, j)| [i, j + 1])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        if cuts.is_empty() {
            return;
        }
        let inv = 1.0 / self.e0;
        let mut at_cut = vec![(0.0f64, 0.0f64); cuts.len()];
        let (mut p0, mut p1) = (0.0, 0.0);
        for c in 1..cuts.len() {
            let (a, b) = db_sums(self.d, cuts[c - 1], cuts[c], inv);
            p0 += a;
            p1 += b;
            at_cut[c] = (p0, p1);
        }
        let sums = |x: usize| at_cut[cuts.iter().position(|&c| c == x).unwrap_or(0)];
        for (r, range) in ranges.iter().enumerate() {
            if let Some((i, j)) = *range {
                let ((a0, a1), (b0, b1)) = (sums(i), sums(j + 1));
                let (sy, sky) = (b0 - a0, b1 - a1);
                let nf = (j - i + 1) as f64;
                let xm = (i + j) as f64 / 2.0;
                let sxx = nf * (nf * nf - 1.0) / 12.0;
                let b = (sky - xm * sy) / sxx;
                if b < 0.0 {
                    out.values[r] = -60.0 / (b * self.sr);
                } else {
                    out.status[r] = Status::InsufficientRange;
                }
            }
        }
    }

    /// C50, C80, D50 and the centre time from the EDC.
    #[inline(always)]
    fn energy_ratios(&self, out: &mut RoomParams) {
        let (d, e0, end) = (self.d, self.e0, self.d.len());
        for (idx, ms) in [(5usize, 50.0), (6, 80.0)] {
            let k = (ms * 1e-3 * self.sr).round() as usize;
            if k >= end {
                out.status[idx] = Status::TooShort;
            } else if e0 - d[k] > 0.0 {
                out.values[idx] = db((e0 - d[k]) / d[k]);
                if idx == 5 {
                    out.values[7] = (e0 - d[k]) / e0;
                }
            } else {
                out.status[idx] = Status::InsufficientRange;
            }
        }
        out.status[7] = out.status[5];
        out.values[8] = sum_lanes(&d[1..]) / e0 / self.sr;
    }

    /// DRR with the direct part the samples within `w` of the peak `p`.
    #[inline(always)]
    fn drr(&self, p: usize, w: usize, out: &mut RoomParams) {
        let d = self.d;
        let (a, z) = (p.saturating_sub(w), p + w + 1);
        if z >= d.len() {
            out.status[4] = Status::TooShort;
        } else if d[z] > 0.0 {
            out.values[4] = db((d[a] - d[z]) / d[z]);
        } else {
            out.status[4] = Status::InsufficientRange;
        }
    }
}

/// [`room_params_curve`] over a batch of curves.
pub fn room_params_batch(
    curves: &[&[f32]],
    sr: f64,
    method: NoiseMethod,
    direct_ms: f64,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<RoomParams>> {
    check_sr(sr)?;
    if !(direct_ms.is_finite() && direct_ms >= 0.0) {
        return Err(AglError::param("direct_ms", direct_ms, "must be >= 0"));
    }
    // The finiteness check rides on each curve's peak pass; a curve that
    // fails it sends the batch to `check_curves` for the error naming the
    // first bad curve.
    let out = map_items(curves.len(), n_threads, cancel, |i| {
        room_params_finite(curves[i], sr, method, direct_ms).ok_or_else(|| AglError::NonFinite {
            what: format!("impulse response (curve {i})"),
            index: 0,
        })
    });
    if out.is_err() {
        check_curves(curves)?;
    }
    out
}

/// Mean absolute difference of the normalised dB EDCs of `pred` and `reference`
/// over the samples where both are finite and the reference is at or above
/// `floor_db` (over the first `min(len)` samples); NaN with
/// `InsufficientRange` when no sample qualifies.
pub fn edc_distance_pair(
    pred: &[f32],
    reference: &[f32],
    sr: f64,
    method: NoiseMethod,
    floor_db: f64,
) -> (f64, Status) {
    let curve = |h: &[f32]| -> Vec<f64> {
        let c = crate::fastmath::vectorized(
            #[inline(always)]
            || edc_curve(h, sr, method),
        );
        let first = c.first().copied().unwrap_or(0.0);
        c.iter()
            .map(|&v| {
                if v > 0.0 && first > 0.0 {
                    db(v / first)
                } else {
                    f64::NAN
                }
            })
            .collect()
    };
    let (a, b) = (curve(pred), curve(reference));
    let (mut s, mut n) = (0.0, 0usize);
    for (x, y) in a.iter().zip(&b) {
        if x.is_finite() && y.is_finite() && *y >= floor_db {
            s += (x - y).abs();
            n += 1;
        }
    }
    if n == 0 {
        (f64::NAN, Status::InsufficientRange)
    } else {
        (s / n as f64, Status::Ok)
    }
}

/// [`edc_distance_pair`] over paired batches.
pub fn edc_distance_batch(
    pred: &[&[f32]],
    reference: &[&[f32]],
    sr: f64,
    method: NoiseMethod,
    floor_db: f64,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<(f64, Status)>> {
    check_sr(sr)?;
    if pred.len() != reference.len() {
        return Err(AglError::Shape(format!(
            "pred and reference must hold the same number of curves, got {} and {}",
            pred.len(),
            reference.len()
        )));
    }
    if floor_db.is_nan() || floor_db > 0.0 {
        return Err(AglError::param("floor_db", floor_db, "must be <= 0"));
    }
    check_curves(pred)?;
    check_curves(reference)?;
    map_items(pred.len(), n_threads, cancel, |i| {
        Ok(edc_distance_pair(
            pred[i],
            reference[i],
            sr,
            method,
            floor_db,
        ))
    })
}

#[cfg(test)]
mod tests;
