//! Geo metrics: great-circle (haversine) and ellipsoidal (geodesic)
//! distances over batches of coordinate pairs, and the summary statistics of
//! a distance column (GeoScore, threshold accuracies, quantiles).
//!
//! Coordinates are float64 degrees. Longitudes are wrapped to [-180, 180).
//! A latitude outside [-90, 90] or a non-finite coordinate gives a NaN
//! distance and is counted in [`Distances::n_invalid`]; callers decide
//! whether that is an error.
//!
//! The ellipsoidal distance solves the inverse geodesic problem with
//! Karney's algorithm (C. F. F. Karney, "Algorithms for geodesics",
//! J. Geodesy 87, 43-55, 2013): series in the third flattening to sixth
//! order, an astroid-based starting guess for nearly antipodal points and
//! Newton iterations on the azimuth guarded by bisection. It is accurate to
//! a few nanometres on the Earth and converges for every pair, antipodal and
//! polar ones included.

use rayon::prelude::*;

use crate::error::{AglError, Result};
use crate::parallel::{install, Cancel};

mod karney;
#[cfg(test)]
mod karney_ref;

pub use karney::Ellipsoid;

/// Mean Earth radius (IUGG R1 = (2a + b) / 3 of WGS-84) in kilometres.
pub const MEAN_EARTH_RADIUS_KM: f64 = 6371.0088;
/// GeoScore scale in kilometres: `5000 * exp(-d / 1492.7)`.
pub const GEOSCORE_SCALE_KM: f64 = 1492.7;
/// GeoScore of a perfect answer.
pub const GEOSCORE_MAX: f64 = 5000.0;

/// Pairs per parallel task; fixed so that results never depend on the
/// number of threads.
const CHUNK: usize = 1 << 14;

/// A distance column and its bad-input count.
#[derive(Debug, Clone, PartialEq)]
pub struct Distances {
    /// One distance per pair (NaN where the pair was invalid).
    pub km: Vec<f64>,
    /// Pairs with a non-finite coordinate or a latitude outside [-90, 90].
    pub n_invalid: usize,
    /// Index of the first invalid pair, if any.
    pub first_invalid: Option<usize>,
}

/// Wrap a longitude in degrees to [-180, 180).
#[inline]
pub fn wrap_lon(lon: f64) -> f64 {
    let r = lon % 360.0;
    if r >= 180.0 {
        r - 360.0
    } else if r < -180.0 {
        r + 360.0
    } else {
        r
    }
}

#[inline]
fn valid(lat: f64, lon: f64) -> bool {
    lat.is_finite() && lon.is_finite() && (-90.0..=90.0).contains(&lat)
}

/// Haversine distance between two points on a sphere of `radius` km.
#[inline]
pub fn haversine(lat1: f64, lon1: f64, lat2: f64, lon2: f64, radius: f64) -> f64 {
    if !valid(lat1, lon1) || !valid(lat2, lon2) {
        return f64::NAN;
    }
    // With a = dphi / 2, m = (phi1 + phi2) / 2 and l = dlambda / 2, the
    // haversine h = sin^2 a + cos phi1 cos phi2 sin^2 l and its complement
    // are sums of squares (no cancellation near the antipode):
    // h = sin^2 a cos^2 l + cos^2 m sin^2 l, 1 - h = cos^2 a cos^2 l +
    // sin^2 m sin^2 l. sin^2 l has period 180 degrees: no wrapping needed.
    let (sa, ca) = (0.5 * (lat2 - lat1).to_radians()).sin_cos();
    let (sm, cm) = (0.5 * (lat1 + lat2).to_radians()).sin_cos();
    let (sl, cl) = (0.5 * (lon2 - lon1).to_radians()).sin_cos();
    let (sl2, cl2) = (sl * sl, cl * cl);
    let h = sa * sa * cl2 + cm * cm * sl2;
    let q = ca * ca * cl2 + sm * sm * sl2;
    2.0 * radius * h.sqrt().atan2(q.sqrt())
}

fn check_lengths(lat1: &[f64], lon1: &[f64], lat2: &[f64], lon2: &[f64]) -> Result<()> {
    let n = lat1.len();
    if lon1.len() != n || lat2.len() != n || lon2.len() != n {
        return Err(AglError::Shape(format!(
            "coordinate arrays must have the same length, got lat1={}, lon1={}, lat2={}, lon2={}",
            n,
            lon1.len(),
            lat2.len(),
            lon2.len()
        )));
    }
    Ok(())
}

/// Taylor coefficients of `sin x / x` in `x^2`: `(-1)^k / (2k + 1)!`.
const SIN_C: [f64; 11] = {
    let mut c = [0.0; 11];
    let (mut k, mut v) = (0, 1.0);
    while k < 11 {
        c[k] = v;
        v = -v / ((2 * k + 2) * (2 * k + 3)) as f64;
        k += 1;
    }
    c
};

/// Taylor coefficients of `asin t / t` in `t^2`:
/// `(2k)! / (4^k (k!)^2 (2k + 1))`.
const ASIN_C: [f64; 26] = {
    let mut c = [0.0; 26];
    let (mut k, mut b) = (0, 1.0);
    while k < 26 {
        c[k] = b / (2 * k + 1) as f64;
        b = b * (2 * k + 1) as f64 / (2 * k + 2) as f64;
        k += 1;
    }
    c
};

/// `pi` in three parts: `PI_A` holds the leading 26 bits (so `k * PI_A` is
/// exact for the small multiples used here), `PI_A + PI_B` is `f64::PI`,
/// and `PI_C` is `pi - f64::PI` rounded (the value `f64::PI.sin()` returns).
const PI_A: f64 = f64::from_bits(std::f64::consts::PI.to_bits() & 0xffff_ffff_f800_0000);
const PI_B: f64 = std::f64::consts::PI - PI_A;
const PI_C: f64 = 1.224_646_799_147_353_2e-16;
/// Round-to-nearest by the `2^52 + 2^51` trick (exact for `|x| < 2^51`).
const ROUND: f64 = 6_755_399_441_055_744.0;
/// Longitude differences (degrees) beyond this leave the vector kernel's
/// range reduction for the scalar path.
const FAST_DLON_MAX: f64 = 1.0e5;

/// `a * b + c`, fused (one rounding) when `FMA`: the vector paths run
/// with fused multiply-adds where the CPU has them, the portable path
/// without (the two differ in the last bits; each is fixed for a machine).
#[inline(always)]
fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `sin x` for `|x| <= pi/2`: Taylor series through `x^21` (truncation
/// below `2e-18`), branch-free.
#[inline(always)]
fn sin_half_pi<const FMA: bool>(x: f64) -> f64 {
    let z = x * x;
    let mut p = SIN_C[10];
    for &c in SIN_C[..10].iter().rev() {
        p = madd::<FMA>(p, z, c);
    }
    x * p
}

/// `cos p` for `|p| <= pi/2` as `sin(pi/2 - |p|)`, the difference taken
/// against pi/2 to beyond double precision so that the result near the
/// poles keeps its relative accuracy (as the standard library's does).
#[inline(always)]
fn cos_half_pi<const FMA: bool>(p: f64) -> f64 {
    sin_half_pi::<FMA>(((0.5 * PI_A - p.abs()) + 0.5 * PI_B) + 0.5 * PI_C)
}

/// `asin s` for `0 <= s <= 1`, branch-free: the series (through `t^51`,
/// truncation below `1e-17` relative for `t <= 1/2`) on `t = s`, or on
/// `t = sqrt((1 - s) / 2)` with `asin s = pi/2 - 2 asin t` for `s > 1/2`.
#[inline(always)]
fn asin_unit<const FMA: bool>(s: f64) -> f64 {
    let big = s > 0.5;
    let t = if big { (0.5 * (1.0 - s)).sqrt() } else { s };
    let z = t * t;
    let mut p = ASIN_C[25];
    for &c in ASIN_C[..25].iter().rev() {
        p = madd::<FMA>(p, z, c);
    }
    let a = t * p;
    if big {
        ((0.5 * PI_A - 2.0 * a) + 0.5 * PI_B) + 0.5 * PI_C
    } else {
        a
    }
}

/// [`haversine`] without its input checks, branch-free so that loops over
/// it vectorise (the same formula, its sines and cosines by polynomial):
/// valid for valid coordinates with `|lon2 - lon1| <= FAST_DLON_MAX`;
/// within `1e-12` relative of [`haversine`] (the tests below check it).
/// `two_r` is twice the radius.
#[inline(always)]
fn haversine_lanes<const FMA: bool>(lat1: f64, lon1: f64, lat2: f64, lon2: f64, two_r: f64) -> f64 {
    let a = 0.5 * (lat2 - lat1).to_radians();
    let m = 0.5 * (lat1 + lat2).to_radians();
    // sin^2 and cos^2 have period pi: reduce by the nearest multiple of pi.
    let x = 0.5 * (lon2 - lon1).to_radians();
    let k = (x * std::f64::consts::FRAC_1_PI + ROUND) - ROUND;
    let l = ((x - k * PI_A) - k * PI_B) - k * PI_C;
    let (sa, ca) = (sin_half_pi::<FMA>(a), cos_half_pi::<FMA>(a));
    let (sm, cm) = (sin_half_pi::<FMA>(m), cos_half_pi::<FMA>(m));
    let (sl, cl) = (sin_half_pi::<FMA>(l), cos_half_pi::<FMA>(l));
    let (sl2, cl2) = (sl * sl, cl * cl);
    let h = sa * sa * cl2 + cm * cm * sl2;
    let q = ca * ca * cl2 + sm * sm * sl2;
    // The central angle atan2(sqrt h, sqrt q) through asin of the smaller
    // (at most 1/sqrt 2 before rounding).
    let small = h <= q;
    let t = asin_unit::<FMA>((if small { h } else { q }).sqrt());
    let theta = if small {
        t
    } else {
        ((0.5 * PI_A - t) + 0.5 * PI_B) + 0.5 * PI_C
    };
    two_r * theta
}

/// Whether [`haversine_batch`] runs the kernel with fused multiply-adds
/// (vectorised for AVX2+FMA or AVX-512; see `fastmath::vectorized_wide`).
fn fused_kernel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::fastmath::has_avx2_fma()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the pair takes [`haversine_lanes`] (no NaN comparisons pass).
#[inline(always)]
fn lanes_ok(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> bool {
    lat1.abs() <= 90.0
        && lat2.abs() <= 90.0
        && lon1.abs() < f64::INFINITY
        && lon2.abs() < f64::INFINITY
        && (lon2 - lon1).abs() <= FAST_DLON_MAX
}

type Cols<'a> = (&'a [f64], &'a [f64], &'a [f64], &'a [f64]);

/// Apply `f` to every fixed-size chunk of the pairs (in parallel, the
/// chunking independent of the thread count), then count the invalid ones
/// of the chunks where `f` returns true (false: the chunk has none).
fn pairwise(
    lat1: &[f64],
    lon1: &[f64],
    lat2: &[f64],
    lon2: &[f64],
    n_threads: Option<usize>,
    cancel: &Cancel,
    f: impl Fn(Cols<'_>, &mut [f64]) -> bool + Sync,
) -> Result<Distances> {
    check_lengths(lat1, lon1, lat2, lon2)?;
    let n = lat1.len();
    let mut km = vec![0.0f64; n];
    // Each chunk reports its invalid count and first invalid index.
    let per_chunk: Vec<(usize, Option<usize>)> = install(n_threads, || {
        km.par_chunks_mut(CHUNK)
            .enumerate()
            .map(|(c, out)| {
                cancel.check()?;
                let s = c * CHUNK;
                let e = s + out.len();
                let cols = (&lat1[s..e], &lon1[s..e], &lat2[s..e], &lon2[s..e]);
                let maybe_bad = f(cols, out);
                let (mut bad, mut first) = (0usize, None);
                for i in (s..e).filter(|_| maybe_bad) {
                    if !valid(lat1[i], lon1[i]) || !valid(lat2[i], lon2[i]) {
                        bad += 1;
                        first.get_or_insert(i);
                    }
                }
                Ok((bad, first))
            })
            .collect::<Result<Vec<_>>>()
    })??;
    let n_invalid = per_chunk.iter().map(|c| c.0).sum();
    let first_invalid = per_chunk.iter().find_map(|c| c.1);
    Ok(Distances {
        km,
        n_invalid,
        first_invalid,
    })
}

/// [`haversine_lanes`] over every pair; whether all were in its range.
#[inline(always)]
fn kernel_loop<const FMA: bool>((a, b, c, d): Cols<'_>, out: &mut [f64], two_r: f64) -> bool {
    let n = out.len();
    let (a, b, c, d) = (&a[..n], &b[..n], &c[..n], &d[..n]);
    let mut ok = true;
    for i in 0..n {
        out[i] = haversine_lanes::<FMA>(a[i], b[i], c[i], d[i], two_r);
        ok &= lanes_ok(a[i], b[i], c[i], d[i]);
    }
    ok
}

/// Haversine distances of one chunk: the vector kernel over every pair,
/// then the scalar [`haversine`] (NaN for invalid input) for the pairs the
/// kernel does not cover. False when every pair took the kernel (so none
/// is invalid).
fn haversine_chunk((a, b, c, d): Cols<'_>, out: &mut [f64], radius: f64) -> bool {
    let two_r = 2.0 * radius;
    let n = out.len();
    let (a, b, c, d) = (&a[..n], &b[..n], &c[..n], &d[..n]);
    let all_ok = if fused_kernel() {
        crate::fastmath::vectorized_wide(
            #[inline(always)]
            || kernel_loop::<true>((a, b, c, d), out, two_r),
        )
    } else {
        kernel_loop::<false>((a, b, c, d), out, two_r)
    };
    if !all_ok {
        for i in 0..n {
            if !lanes_ok(a[i], b[i], c[i], d[i]) {
                out[i] = haversine(a[i], b[i], c[i], d[i], radius);
            }
        }
    }
    !all_ok
}

/// Haversine distances in km of a batch of pairs (degrees).
pub fn haversine_batch(
    lat1: &[f64],
    lon1: &[f64],
    lat2: &[f64],
    lon2: &[f64],
    radius: f64,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Distances> {
    if !(radius.is_finite() && radius > 0.0) {
        return Err(AglError::param("radius", radius, "must be finite and > 0"));
    }
    pairwise(lat1, lon1, lat2, lon2, n_threads, cancel, |cols, out| {
        haversine_chunk(cols, out, radius)
    })
}

/// Geodesic distances in km on `ellipsoid` of a batch of pairs (degrees).
pub fn geodesic_batch(
    lat1: &[f64],
    lon1: &[f64],
    lat2: &[f64],
    lon2: &[f64],
    ellipsoid: &Ellipsoid,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Distances> {
    pairwise(
        lat1,
        lon1,
        lat2,
        lon2,
        n_threads,
        cancel,
        |(a, b, c, d), out| {
            for (i, o) in out.iter_mut().enumerate() {
                *o = if valid(a[i], b[i]) && valid(c[i], d[i]) {
                    ellipsoid.distance(a[i], b[i], c[i], d[i]) / 1000.0
                } else {
                    f64::NAN
                };
            }
            true
        },
    )
}

/// GeoScore `max_score * exp(-d / scale)` of every distance (NaN stays NaN).
pub fn geoscore(d: &[f64], scale: f64, max_score: f64) -> Result<Vec<f64>> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(AglError::param("scale", scale, "must be finite and > 0"));
    }
    Ok(d.iter().map(|&x| max_score * (-x / scale).exp()).collect())
}

/// Summary of a distance column; NaN distances are left out of every figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub n_valid: usize,
    pub mean_km: f64,
    pub geoscore: f64,
    /// Share of valid distances strictly below each threshold.
    pub accuracy: Vec<f64>,
    /// Linear-interpolation quantiles (numpy's default method).
    pub quantiles: Vec<f64>,
}

#[derive(Default, Clone)]
struct Partial {
    n_valid: usize,
    sum: f64,
    score: f64,
    hits: Vec<usize>,
}

/// Mean, GeoScore, threshold accuracies and quantiles of `d` (km).
pub fn summarize(
    d: &[f64],
    thresholds: &[f64],
    quantiles: &[f64],
    scale: f64,
    max_score: f64,
    n_threads: Option<usize>,
) -> Result<Summary> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(AglError::param("scale", scale, "must be finite and > 0"));
    }
    if let Some(q) = quantiles.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(AglError::param("quantiles", q, "must lie in [0, 1]"));
    }
    let nt = thresholds.len();
    let (parts, mut finite) = install(n_threads, || {
        let parts: Vec<Partial> = d
            .par_chunks(CHUNK)
            .map(|c| {
                let mut p = Partial {
                    hits: vec![0; nt],
                    ..Default::default()
                };
                for &x in c.iter().filter(|x| !x.is_nan()) {
                    p.n_valid += 1;
                    p.sum += x;
                    p.score += max_score * (-x / scale).exp();
                    for (h, &t) in p.hits.iter_mut().zip(thresholds) {
                        *h += usize::from(x < t);
                    }
                }
                p
            })
            .collect();
        let finite: Vec<f64> = if quantiles.is_empty() {
            Vec::new()
        } else {
            d.par_iter().copied().filter(|x| !x.is_nan()).collect()
        };
        (parts, finite)
    })?;
    // Partials are combined in chunk order: identical for any thread count.
    let mut tot = Partial {
        hits: vec![0; nt],
        ..Default::default()
    };
    for p in &parts {
        tot.n_valid += p.n_valid;
        tot.sum += p.sum;
        tot.score += p.score;
        for (a, b) in tot.hits.iter_mut().zip(&p.hits) {
            *a += b;
        }
    }
    let nv = tot.n_valid as f64;
    let div = |x: f64| if tot.n_valid == 0 { f64::NAN } else { x / nv };
    let qs = quantiles
        .iter()
        .map(|&q| quantile_select(&mut finite, q))
        .collect();
    Ok(Summary {
        n: d.len(),
        n_valid: tot.n_valid,
        mean_km: div(tot.sum),
        geoscore: div(tot.score),
        accuracy: tot.hits.iter().map(|&h| div(h as f64)).collect(),
        quantiles: qs,
    })
}

/// numpy's default ("linear") quantile of `v` by selection, O(n).
fn quantile_select(v: &mut [f64], q: f64) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let frac = pos - lo as f64;
    let (_, a, rest) = v.select_nth_unstable_by(lo, f64::total_cmp);
    let a = *a;
    if frac == 0.0 || rest.is_empty() {
        return a;
    }
    let b = rest.iter().copied().fold(f64::INFINITY, f64::min);
    a + frac * (b - a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;

    #[test]
    fn haversine_quarter_meridian() {
        let d = haversine(0.0, 0.0, 90.0, 0.0, 1.0);
        assert!((d - std::f64::consts::FRAC_PI_2).abs() < 1e-15);
        let d = haversine(0.0, 170.0, 0.0, -170.0, 1.0);
        assert!((d - 20f64.to_radians()).abs() < 1e-15);
    }

    #[test]
    fn antipodes_give_half_the_circumference() {
        let half = std::f64::consts::PI * MEAN_EARTH_RADIUS_KM;
        for (lat, lon) in [(0.0, 0.0), (37.3, -122.0), (-89.9, 179.0), (90.0, 45.0)] {
            let c = [lat, lon, -lat, lon + 180.0];
            let d = haversine(c[0], c[1], c[2], c[3], MEAN_EARTH_RADIUS_KM);
            assert!((d - half).abs() <= 1e-12 * half, "{c:?}: {d}");
            let r = haversine_batch(
                &[c[0]],
                &[c[1]],
                &[c[2]],
                &[c[3]],
                MEAN_EARTH_RADIUS_KM,
                None,
                never(),
            );
            assert!((r.unwrap().km[0] - half).abs() <= 1e-12 * half, "{c:?}");
        }
    }

    #[test]
    fn invalid_inputs_are_nan_and_counted() {
        let r = haversine_batch(
            &[95.0, 0.0, f64::NAN],
            &[0.0, 0.0, 0.0],
            &[0.0, 0.0, 0.0],
            &[0.0, 400.0, 0.0],
            MEAN_EARTH_RADIUS_KM,
            Some(2),
            never(),
        )
        .unwrap();
        assert!(r.km[0].is_nan() && r.km[2].is_nan());
        assert!((r.km[1] - haversine(0.0, 0.0, 0.0, 40.0, MEAN_EARTH_RADIUS_KM)).abs() < 1e-9);
        assert_eq!((r.n_invalid, r.first_invalid), (2, Some(0)));
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let e = haversine_batch(&[0.0], &[0.0], &[], &[], 1.0, None, never());
        assert!(matches!(e, Err(AglError::Shape(_))));
    }

    #[test]
    fn summary_matches_definitions() {
        let d = [0.5, 5.0, f64::NAN, 50.0, 2000.0];
        let s = summarize(&d, &[1.0, 100.0], &[0.0, 0.5, 1.0], 1492.7, 5000.0, Some(3)).unwrap();
        assert_eq!(s.n_valid, 4);
        assert!((s.mean_km - 2055.5 / 4.0).abs() < 1e-12);
        assert_eq!(s.accuracy, vec![0.25, 0.75]);
        assert_eq!(s.quantiles, vec![0.5, 27.5, 2000.0]);
        let want: f64 = [0.5, 5.0, 50.0, 2000.0]
            .iter()
            .map(|x: &f64| 5000.0 * (-x / 1492.7).exp())
            .sum::<f64>()
            / 4.0;
        assert!((s.geoscore - want).abs() < 1e-9);
    }

    /// SplitMix64 stream of uniforms in [0, 1).
    fn uniforms(seed: u64) -> impl FnMut() -> f64 {
        let mut x = seed;
        move || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Within 1e-12 relative of the scalar result, identical for any thread
    /// count, and bit for bit the kernel's result where the kernel runs.
    fn assert_close_to_scalar(p: &[[f64; 4]]) {
        let cols: Vec<Vec<f64>> = (0..4).map(|j| p.iter().map(|q| q[j]).collect()).collect();
        let r = MEAN_EARTH_RADIUS_KM;
        let one = haversine_batch(&cols[0], &cols[1], &cols[2], &cols[3], r, Some(1), never());
        let many = haversine_batch(&cols[0], &cols[1], &cols[2], &cols[3], r, Some(3), never());
        let one = one.unwrap();
        let many = many.unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&one.km),
            bits(&many.km),
            "thread count changed a result"
        );
        for (q, &got) in p.iter().zip(&one.km) {
            let want = haversine(q[0], q[1], q[2], q[3], r);
            let ok = got == want
                || (got.is_nan() && want.is_nan())
                || (got - want).abs() <= 1e-12 * want.abs();
            assert!(ok, "{q:?}: {got} vs scalar {want}");
            if lanes_ok(q[0], q[1], q[2], q[3]) {
                // The vector loop and a plain call of the kernel agree bit for bit.
                let lane = if fused_kernel() {
                    haversine_lanes::<true>(q[0], q[1], q[2], q[3], 2.0 * r)
                } else {
                    haversine_lanes::<false>(q[0], q[1], q[2], q[3], 2.0 * r)
                };
                assert_eq!(got.to_bits(), lane.to_bits(), "{q:?}");
            }
        }
    }

    #[test]
    fn constants_of_the_vector_kernel() {
        assert_eq!(PI_A + PI_B, std::f64::consts::PI);
        assert_eq!(std::f64::consts::PI.sin(), PI_C);
        assert_eq!(
            0.5 * (PI_B + PI_C) + 0.5 * PI_A,
            std::f64::consts::FRAC_PI_2
        );
        let rel = |a: f64, b: f64| if a == b { 0.0 } else { ((a - b) / b).abs() };
        let mut worst = [0f64; 3];
        for i in 0..=100_000 {
            let x = (i as f64 / 100_000.0) * std::f64::consts::FRAC_PI_2;
            worst[0] = worst[0].max(rel(sin_half_pi::<false>(x), x.sin()));
            worst[0] = worst[0].max(rel(sin_half_pi::<true>(x), x.sin()));
            worst[1] = worst[1].max(rel(cos_half_pi::<false>(x), x.cos()));
            worst[1] = worst[1].max(rel(cos_half_pi::<true>(x), x.cos()));
            let s = i as f64 / 100_000.0;
            worst[2] = worst[2].max(rel(asin_unit::<false>(s), s.asin()));
            worst[2] = worst[2].max(rel(asin_unit::<true>(s), s.asin()));
        }
        assert!(
            worst.iter().all(|&w| w < 1e-15),
            "sin, cos, asin: {worst:?}"
        );
    }

    #[test]
    fn vector_kernel_matches_scalar_on_random_pairs() {
        let mut u = uniforms(7);
        let mut p: Vec<[f64; 4]> = (0..100_000)
            .map(|_| {
                let lat1 = (2.0 * u() - 1.0).asin().to_degrees();
                let lat2 = (2.0 * u() - 1.0).asin().to_degrees();
                [lat1, 360.0 * u() - 180.0, lat2, 360.0 * u() - 180.0]
            })
            .collect();
        // Short distances: a few metres to a few km.
        p.extend((0..20_000).map(|_| {
            let (lat, lon) = (180.0 * u() - 90.0, 360.0 * u() - 180.0);
            let e = 10f64.powf(-6.0 * u() - 1.0);
            [
                lat,
                lon,
                (lat + e * (u() - 0.5)).clamp(-90.0, 90.0),
                lon + e * (u() - 0.5),
            ]
        }));
        // Nearly antipodal pairs.
        p.extend((0..20_000).map(|_| {
            let (lat, lon) = (180.0 * u() - 90.0, 360.0 * u() - 180.0);
            let e = 10f64.powf(-6.0 * u() - 1.0);
            [
                lat,
                lon,
                -lat + e * (u() - 0.5),
                lon + 180.0 + e * (u() - 0.5),
            ]
        }));
        assert_close_to_scalar(&p);
    }

    #[test]
    fn vector_kernel_matches_scalar_on_edge_pairs() {
        let mut p = vec![
            [0.0, 0.0, 0.0, 180.0],
            [0.0, 0.0, 0.0, -180.0],
            [45.0, 10.0, -45.0, -170.0],
            [90.0, 0.0, -90.0, 0.0],
            [90.0, 0.0, 90.0, 123.0],
            [-90.0, 17.0, -90.0, -163.0],
            [90.0, 0.0, 89.999_999_9, 180.0],
            [89.999_999_9, 0.0, 89.999_999_9, 180.0],
            [12.5, 33.3, 12.5, 33.3],
            [0.0, -180.0, 0.0, 180.0],
            [10.0, 179.999_999, 10.0, -179.999_999],
            [-33.9, 180.0, -33.9, -180.0],
            [0.0, 0.0, 0.0, 0.0],
            [-0.0, -0.0, 0.0, 0.0],
            [1e-300, 0.0, 0.0, 1e-300],
            [48.85, 2.35, 40.71, 2.35 + 720.0],
            [48.85, 2.35 - 3600.0, 40.71, 2.35 + 3600.0],
            [48.85, 2.35, 40.71, 1e7],
            [48.85, 1e300, 40.71, -1e300],
            [95.0, 0.0, 0.0, 0.0],
            [0.0, f64::NAN, 0.0, 0.0],
            [0.0, 0.0, 0.0, f64::INFINITY],
        ];
        for lat in [-90.0, -60.0, 0.0, 30.0, 90.0] {
            for lon in [-180.0, -179.5, 0.0, 179.5, 180.0] {
                p.push([lat, lon, -lat, lon + 180.0]);
                p.push([lat, lon, -lat, lon - 180.0]);
                p.push([lat, lon, lat, -lon]);
            }
        }
        assert_close_to_scalar(&p);
        // Longitudes taken by the scalar path count as valid.
        let c: Vec<Vec<f64>> = (0..4).map(|j| p.iter().map(|q| q[j]).collect()).collect();
        let r = haversine_batch(&c[0], &c[1], &c[2], &c[3], 1.0, None, never()).unwrap();
        assert_eq!((r.n_invalid, r.first_invalid), (3, Some(19)));
    }

    #[test]
    fn wrap() {
        assert_eq!(wrap_lon(190.0), -170.0);
        assert_eq!(wrap_lon(-190.0), 170.0);
        assert_eq!(wrap_lon(180.0), -180.0);
        assert_eq!(wrap_lon(540.0), -180.0);
    }
}
