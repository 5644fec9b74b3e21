//! Bindings of the geo kernels: distances over float64 coordinate columns
//! and the summary statistics of a distance column.

use agl_core::geo::{self, Distances, Ellipsoid};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::errors::{param_err, to_py};
use crate::gateway;

type DistOut<'py> = (Bound<'py, PyArray1<f64>>, usize, Option<usize>);

fn slice<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| param_err(format!("{name} must be a contiguous 1-D float64 array")))
}

fn out(py: Python<'_>, d: Distances) -> DistOut<'_> {
    (d.km.into_pyarray(py), d.n_invalid, d.first_invalid)
}

/// Haversine distances (km); returns `(km, n_invalid, first_invalid)`.
#[pyfunction]
#[pyo3(signature = (lat1, lon1, lat2, lon2, radius=geo::MEAN_EARTH_RADIUS_KM, n_threads=None))]
pub fn haversine<'py>(
    py: Python<'py>,
    lat1: PyReadonlyArray1<'py, f64>,
    lon1: PyReadonlyArray1<'py, f64>,
    lat2: PyReadonlyArray1<'py, f64>,
    lon2: PyReadonlyArray1<'py, f64>,
    radius: f64,
    n_threads: Option<usize>,
) -> PyResult<DistOut<'py>> {
    let (a, b) = (slice(&lat1, "lat1")?, slice(&lon1, "lon1")?);
    let (c, d) = (slice(&lat2, "lat2")?, slice(&lon2, "lon2")?);
    let r = gateway::run(py, a.len() * 8, |cancel| {
        geo::haversine_batch(a, b, c, d, radius, n_threads, cancel)
    })?;
    Ok(out(py, r))
}

/// Ellipsoidal geodesic distances (km); returns `(km, n_invalid, first_invalid)`.
#[pyfunction]
#[pyo3(signature = (lat1, lon1, lat2, lon2, a=6378137.0, f=1.0/298.257223563, n_threads=None))]
pub fn geodesic<'py>(
    lat1: PyReadonlyArray1<'py, f64>,
    lon1: PyReadonlyArray1<'py, f64>,
    lat2: PyReadonlyArray1<'py, f64>,
    lon2: PyReadonlyArray1<'py, f64>,
    a: f64,
    f: f64,
    n_threads: Option<usize>,
) -> PyResult<DistOut<'py>> {
    let py = lat1.py();
    let e = Ellipsoid::new(a, f).map_err(to_py)?;
    let (x1, y1) = (slice(&lat1, "lat1")?, slice(&lon1, "lon1")?);
    let (x2, y2) = (slice(&lat2, "lat2")?, slice(&lon2, "lon2")?);
    let r = gateway::run(py, x1.len() * 64, |cancel| {
        geo::geodesic_batch(x1, y1, x2, y2, &e, n_threads, cancel)
    })?;
    Ok(out(py, r))
}

/// GeoScore of every distance.
#[pyfunction]
#[pyo3(signature = (d, scale=geo::GEOSCORE_SCALE_KM, max_score=geo::GEOSCORE_MAX))]
pub fn geoscore<'py>(
    py: Python<'py>,
    d: PyReadonlyArray1<'py, f64>,
    scale: f64,
    max_score: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let x = slice(&d, "d")?;
    let v = py
        .detach(|| geo::geoscore(x, scale, max_score))
        .map_err(to_py)?;
    Ok(v.into_pyarray(py))
}

type SummaryOut<'py> = (
    usize,
    usize,
    f64,
    f64,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// `(n, n_valid, mean_km, geoscore, accuracy, quantiles)` of a distance column.
#[pyfunction]
#[pyo3(signature = (d, thresholds, quantiles, scale=geo::GEOSCORE_SCALE_KM, max_score=geo::GEOSCORE_MAX, n_threads=None))]
pub fn geo_summary<'py>(
    py: Python<'py>,
    d: PyReadonlyArray1<'py, f64>,
    thresholds: Vec<f64>,
    quantiles: Vec<f64>,
    scale: f64,
    max_score: f64,
    n_threads: Option<usize>,
) -> PyResult<SummaryOut<'py>> {
    let x = slice(&d, "d")?;
    let s = gateway::run(py, x.len(), |_| {
        geo::summarize(x, &thresholds, &quantiles, scale, max_score, n_threads)
    })?;
    Ok((
        s.n,
        s.n_valid,
        s.mean_km,
        s.geoscore,
        s.accuracy.into_pyarray(py),
        s.quantiles.into_pyarray(py),
    ))
}
