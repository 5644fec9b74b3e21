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

fn check_sr(sr: f64) -> Result<()> {
    if !(sr.is_finite() && sr > 0.0) {
        return Err(AglError::param(
            "sr",
            sr,
            "must be a positive sample rate in Hz",
        ));
    }
    Ok(())
}

fn check_curves(curves: &[&[f32]]) -> Result<()> {
    for (i, x) in curves.iter().enumerate() {
        // Summing propagates NaN/Inf: one vectorised pass, and the message
        // is only built for a bad curve.
        if !x.iter().fold(0.0f32, |a, &v| a + v * 0.0).is_finite() {
            check_finite(x, &format!("impulse response (curve {i})"))?;
        }
    }
    Ok(())
}

#[inline(always)]
fn energy(h: &[f32]) -> Vec<f64> {
    h.iter().map(|&v| (v as f64) * (v as f64)).collect()
}

/// ISO 3382-1 onset: first sample within 20 dB of the peak energy.
#[inline(always)]
pub fn onset(e: &[f64]) -> Option<usize> {
    let peak = e.iter().cloned().fold(0.0f64, f64::max);
    if peak <= 0.0 {
        return None;
    }
    e.iter().position(|&v| v >= peak * 0.01)
}

fn tail_noise(e: &[f64], from: usize) -> f64 {
    let from = from.min(e.len().saturating_sub(1));
    let t = &e[from..];
    if t.is_empty() {
        0.0
    } else {
        t.iter().sum::<f64>() / t.len() as f64
    }
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
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & MANT) | (1023 << 52));
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = (e + big as i64) as f64;
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let p = 1.0
        + z * (1.0 / 3.0
            + z * (1.0 / 5.0
                + z * (1.0 / 7.0 + z * (1.0 / 9.0 + z * (1.0 / 11.0 + z * (1.0 / 13.0))))));
    e * std::f64::consts::LN_2 + 2.0 * s * p
}

/// Block averages of `e` over windows of `w` samples: (centre, level dB).
fn blocks(e: &[f64], w: usize) -> Vec<(f64, f64)> {
    e.chunks(w)
        .enumerate()
        .map(|(i, c)| {
            let m = c.iter().sum::<f64>() / c.len() as f64;
            (
                (i * w) as f64 + (c.len() as f64 - 1.0) / 2.0,
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

/// Lundeby's iteration on the energy `e`: the crossing sample, the tail
/// energy beyond it (sum units) and the noise energy per sample.
pub fn lundeby(e: &[f64], sr: f64) -> Option<(usize, f64, f64)> {
    let n = e.len();
    if n < 16 {
        return None;
    }
    let w0 = ((0.03 * sr) as usize).clamp(1, (n / 10).max(1));
    let bl = blocks(e, w0);
    let mut noise = tail_noise(e, ((1.0 - TAIL_FRACTION) * n as f64) as usize);
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
        let bl = blocks(e, w);
        let noise_from = (cross + per_10db).max(0.0) as usize;
        let noise_from = noise_from.min(((1.0 - TAIL_FRACTION) * n as f64) as usize);
        noise = tail_noise(e, noise_from);
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

/// A curve's EDC (linear, not normalised), the end of its usable range and
/// the tail energy added beyond it.
fn edc_curve(e: &[f64], sr: f64, method: NoiseMethod) -> (Vec<f64>, usize, f64) {
    let n = e.len();
    let mut out = vec![f64::NAN; n];
    match method {
        NoiseMethod::None => {
            let mut acc = 0.0;
            for i in (0..n).rev() {
                acc += e[i];
                out[i] = acc;
            }
            (out, n, 0.0)
        }
        NoiseMethod::Lundeby => match lundeby(e, sr) {
            Some((c, tail, _)) => {
                let mut acc = tail;
                for i in (0..c).rev() {
                    acc += e[i];
                    out[i] = acc;
                }
                (out, c, tail)
            }
            None => edc_curve(e, sr, NoiseMethod::None),
        },
        NoiseMethod::LundebyChu => match lundeby(e, sr) {
            Some((c, tail, noise)) => {
                let mut acc = tail;
                let mut end = c;
                for i in (0..c).rev() {
                    acc += e[i] - noise;
                    out[i] = acc;
                }
                if let Some(k) = out[..c].iter().position(|&v| v <= 0.0) {
                    end = k;
                    out[k..].iter_mut().for_each(|v| *v = f64::NAN);
                }
                (out, end, tail)
            }
            None => edc_curve(e, sr, NoiseMethod::Chu),
        },
        NoiseMethod::Chu => {
            let noise = tail_noise(e, ((1.0 - TAIL_FRACTION) * n as f64) as usize);
            let peak = e.iter().cloned().fold(0.0f64, f64::max);
            let mut acc = 0.0;
            for i in (0..n).rev() {
                acc += e[i] - noise;
                out[i] = acc;
            }
            let start = out.first().copied().unwrap_or(0.0);
            // Usable while positive and 10 dB above the noise-to-peak level.
            let floor = if peak > 0.0 { noise / peak * 10.0 } else { 0.0 };
            let end = out
                .iter()
                .position(|&v| !(v > 0.0 && start > 0.0 && v / start > floor))
                .unwrap_or(n);
            out[end..].iter_mut().for_each(|v| *v = f64::NAN);
            (out, end, 0.0)
        }
    }
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
        let e = energy(curves[i]);
        let (mut c, _, _) = edc_curve(&e, sr, opts.method);
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

/// Least-squares slope (dB per sample) of `y[i..=j]` against the sample
/// index, centred for accuracy.
#[inline(always)]
fn slope(y: &[f64], i: usize, j: usize) -> Option<f64> {
    let n = (j - i + 1) as f64;
    let xm = (j - i) as f64 / 2.0;
    let ym = y[i..=j].iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (k, &v) in y[i..=j].iter().enumerate() {
        let dx = k as f64 - xm;
        sxy += dx * (v - ym);
        sxx += dx * dx;
    }
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Parameters of one curve.
///
/// The fit ranges are found on the linear EDC (`EDC <= EDC[0] 10^(L/10)`),
/// and logarithms are taken only up to the deepest range. Energy sums come
/// from the EDC itself (`E[a..b) = EDC[a] - EDC[b]`, the first moment as
/// `sum_{n>=1} EDC[n]`), so they include the tail correction and, with
/// Chu's method, are noise-subtracted.
pub fn room_params_curve(h: &[f32], sr: f64, method: NoiseMethod, direct_ms: f64) -> RoomParams {
    crate::fastmath::vectorized(|| room_params_impl(h, sr, method, direct_ms))
}

#[inline(always)]
fn room_params_impl(h: &[f32], sr: f64, method: NoiseMethod, direct_ms: f64) -> RoomParams {
    let mut values = [f64::NAN; 9];
    let mut status = [Status::Ok; 9];
    let e = energy(h);
    let Some(o) = onset(&e) else {
        return RoomParams {
            values,
            status: [Status::NoOnset; 9],
        };
    };
    if e.len() - o < 4 {
        return RoomParams {
            values,
            status: [Status::TooShort; 9],
        };
    }
    let (edc, end, _) = edc_curve(&e[o..], sr, method);
    let end = edc[..end]
        .iter()
        .position(|v| v.is_nan() || *v <= 0.0)
        .unwrap_or(end);
    let e0 = edc[0];
    if end < 2 || e0.is_nan() || e0 <= 0.0 {
        return RoomParams {
            values,
            status: [Status::InsufficientRange; 9],
        };
    }
    let d = &edc[..end];
    let below = |level: f64, from: usize| -> Option<usize> {
        let th = e0 * 10f64.powf(level / 10.0);
        d[from..].iter().position(|&v| v <= th).map(|p| p + from)
    };
    let fits = [(0.0, -10.0), (-5.0, -25.0), (-5.0, -35.0), (-5.0, -65.0)];
    let mut ranges = [None; 4];
    for (k, &(u, l)) in fits.iter().enumerate() {
        match below(u, 0).and_then(|i| below(l, i).map(|j| (i, j))) {
            Some((i, j)) if j >= i + 2 => ranges[k] = Some((i, j)),
            Some(_) => status[k] = Status::TooShort,
            None => status[k] = Status::InsufficientRange,
        }
    }
    let deepest = ranges.iter().flatten().map(|r| r.1).max();
    if let Some(jmax) = deepest {
        let to_db = 10.0 / std::f64::consts::LN_10;
        let inv = 1.0 / e0;
        let y: Vec<f64> = d[..=jmax]
            .iter()
            .map(|&v| to_db * fast_ln(v * inv))
            .collect();
        for (k, r) in ranges.iter().enumerate() {
            if let Some((i, j)) = *r {
                match slope(&y, i, j) {
                    Some(b) if b < 0.0 => values[k] = -60.0 / (b * sr),
                    _ => status[k] = Status::InsufficientRange,
                }
            }
        }
    }
    // Energy ratios from the EDC.
    for (idx, ms) in [(5usize, 50.0), (6, 80.0)] {
        let k = (ms * 1e-3 * sr).round() as usize;
        if k >= end {
            status[idx] = Status::TooShort;
        } else if e0 - d[k] > 0.0 {
            values[idx] = db((e0 - d[k]) / d[k]);
            if idx == 5 {
                values[7] = (e0 - d[k]) / e0;
            }
        } else {
            status[idx] = Status::InsufficientRange;
        }
    }
    status[7] = status[5];
    values[8] = d[1..].iter().sum::<f64>() / e0 / sr;
    // DRR around the peak.
    let p = e[o..o + end]
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .unwrap_or(0);
    let w = (direct_ms * 1e-3 * sr).round() as usize;
    let (a, z) = (p.saturating_sub(w), p + w + 1);
    if z >= end {
        status[4] = Status::TooShort;
    } else if d[z] > 0.0 {
        values[4] = db((d[a] - d[z]) / d[z]);
    } else {
        status[4] = Status::InsufficientRange;
    }
    for k in 0..9 {
        if status[k] != Status::Ok {
            values[k] = f64::NAN;
        }
    }
    RoomParams { values, status }
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
    check_curves(curves)?;
    map_items(curves.len(), n_threads, cancel, |i| {
        Ok(room_params_curve(curves[i], sr, method, direct_ms))
    })
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
        let (c, _, _) = edc_curve(&energy(h), sr, method);
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
mod tests {
    use super::*;
    use crate::parallel::never;

    fn decay(t60: f64, sr: f64, secs: f64, noise_db: Option<f64>) -> Vec<f32> {
        let mut s = 12345u64;
        let n = (secs * sr) as usize;
        let k = 3.0 * std::f64::consts::LN_10 / t60;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
                let x = u * (-k * i as f64 / sr).exp();
                let nz = noise_db.map(|d| v * 10f64.powf(d / 20.0)).unwrap_or(0.0);
                (x + nz) as f32
            })
            .collect()
    }

    #[test]
    fn exponential_decay_gives_its_t60() {
        let sr = 16000.0;
        for (method, noise) in [
            (NoiseMethod::None, None),
            (NoiseMethod::Lundeby, Some(-60.0)),
            (NoiseMethod::LundebyChu, Some(-40.0)),
            (NoiseMethod::Chu, Some(-60.0)),
        ] {
            let h = decay(0.5, sr, 1.5, noise);
            let r = room_params_curve(&h, sr, method, 2.5);
            let t = if noise == Some(-40.0) {
                r.values[1]
            } else {
                r.values[2]
            };
            assert!((t - 0.5).abs() < 0.01, "{method:?} {noise:?}: {t}");
        }
    }

    #[test]
    fn bad_curves_have_statuses() {
        let z = vec![0.0f32; 100];
        let r = room_params_curve(&z, 16000.0, NoiseMethod::Lundeby, 2.5);
        assert!(r.status.iter().all(|&s| s == Status::NoOnset));
        let r = room_params_curve(&[1.0, 0.5], 16000.0, NoiseMethod::Lundeby, 2.5);
        assert!(r.status.iter().all(|&s| s == Status::TooShort));
        let h = decay(0.5, 16000.0, 0.05, None);
        let r = room_params_curve(&h, 16000.0, NoiseMethod::None, 2.5);
        assert_eq!(r.status[2], Status::InsufficientRange);
        assert!(r.values[2].is_nan());
    }

    #[test]
    fn fast_ln_is_accurate() {
        for k in -3000..3000 {
            let x = 1.013f64.powi(k) * 0.77;
            assert!((fast_ln(x) - x.ln()).abs() < 1e-12, "{x}");
        }
    }

    #[test]
    fn schroeder_sums_backwards() {
        let h = [1.0f32, 2.0, 3.0];
        let opts = EdcOptions {
            method: NoiseMethod::None,
            normalize: false,
            db: false,
        };
        let c = edc_batch(&[&h], 1.0, opts, Some(1), never()).unwrap();
        assert_eq!(c[0], vec![14.0, 13.0, 9.0]);
    }
}
