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
    let p1 = lat1.to_radians();
    let p2 = lat2.to_radians();
    let dp = (lat2 - lat1).to_radians();
    // sin^2(dl / 2) has period 360 degrees: no wrapping needed.
    let dl = (lon2 - lon1).to_radians();
    let sp = (0.5 * dp).sin();
    let sl = (0.5 * dl).sin();
    let h = (sp * sp + p1.cos() * p2.cos() * sl * sl).clamp(0.0, 1.0);
    2.0 * radius * h.sqrt().asin()
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

fn pairwise(
    lat1: &[f64],
    lon1: &[f64],
    lat2: &[f64],
    lon2: &[f64],
    n_threads: Option<usize>,
    cancel: &Cancel,
    f: impl Fn(f64, f64, f64, f64) -> f64 + Sync,
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
                let (mut bad, mut first) = (0usize, None);
                for (j, o) in out.iter_mut().enumerate() {
                    let i = s + j;
                    *o = f(lat1[i], lon1[i], lat2[i], lon2[i]);
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
    pairwise(lat1, lon1, lat2, lon2, n_threads, cancel, |a, b, c, d| {
        haversine(a, b, c, d, radius)
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
    pairwise(lat1, lon1, lat2, lon2, n_threads, cancel, |a, b, c, d| {
        if valid(a, b) && valid(c, d) {
            ellipsoid.distance(a, b, c, d) / 1000.0
        } else {
            f64::NAN
        }
    })
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

    #[test]
    fn wrap() {
        assert_eq!(wrap_lon(190.0), -170.0);
        assert_eq!(wrap_lon(-190.0), 170.0);
        assert_eq!(wrap_lon(180.0), -180.0);
        assert_eq!(wrap_lon(540.0), -180.0);
    }
}
