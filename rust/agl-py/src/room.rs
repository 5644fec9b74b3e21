//! Bindings of the room-acoustics kernels. Impulse responses arrive as a
//! mono batch of curves (one per channel); the Python layer restores the
//! `[batch, channels]` axes.

use agl_core::convolve::{convolve_batch, ConvMode};
use agl_core::room::{edc_batch, edc_distance_batch, room_params_batch, EdcOptions, NoiseMethod};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::errors::{shape_err, to_py};
use crate::features::to_u64;
use crate::gateway;
use crate::input::{total_samples, MonoBatch};

type Flat<'py, T> = (Bound<'py, PyArray1<T>>, Bound<'py, PyArray1<u64>>);
type Table<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<u8>>);
type Pairs<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<u8>>);
type ConvOut<'py> = (
    Bound<'py, PyArray1<f32>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
);

/// Energy decay curves: flat values and item offsets (each curve as long
/// as its IR).
#[pyfunction]
#[pyo3(signature = (curves, sr, method="lundeby_chu", normalize=true, db=false, n_threads=None))]
pub fn edc<'py>(
    py: Python<'py>,
    curves: &Bound<'py, PyAny>,
    sr: f64,
    method: &str,
    normalize: bool,
    db: bool,
    n_threads: Option<usize>,
) -> PyResult<Flat<'py, f64>> {
    let opts = EdcOptions {
        method: NoiseMethod::from_name(method).map_err(to_py)?,
        normalize,
        db,
    };
    let batch = MonoBatch::extract(curves)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let out = gateway::run(py, work, |c| edc_batch(&items, sr, opts, n_threads, c))?;
    let mut offsets = vec![0usize];
    for v in &out {
        offsets.push(offsets[offsets.len() - 1] + v.len());
    }
    let data: Vec<f64> = out.into_iter().flatten().collect();
    Ok((data.into_pyarray(py), to_u64(offsets).into_pyarray(py)))
}

/// Decay times and energy ratios `[n, 9]` with statuses `[n, 9]`.
#[pyfunction]
#[pyo3(signature = (curves, sr, method="lundeby_chu", direct_ms=2.5, n_threads=None))]
pub fn room_parameters<'py>(
    py: Python<'py>,
    curves: &Bound<'py, PyAny>,
    sr: f64,
    method: &str,
    direct_ms: f64,
    n_threads: Option<usize>,
) -> PyResult<Table<'py>> {
    let m = NoiseMethod::from_name(method).map_err(to_py)?;
    let batch = MonoBatch::extract(curves)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let out = gateway::run(py, work, |c| {
        room_params_batch(&items, sr, m, direct_ms, n_threads, c)
    })?;
    let n = out.len();
    let values: Vec<f64> = out.iter().flat_map(|r| r.values).collect();
    let status: Vec<u8> = out.iter().flat_map(|r| r.status.map(|s| s as u8)).collect();
    Ok((
        values.into_pyarray(py).reshape([n, 9])?,
        status.into_pyarray(py).reshape([n, 9])?,
    ))
}

/// EDC distance of paired curves: values and statuses.
#[pyfunction]
#[pyo3(signature = (pred, reference, sr, method="none", floor_db=-60.0, n_threads=None))]
pub fn edc_distance<'py>(
    py: Python<'py>,
    pred: &Bound<'py, PyAny>,
    reference: &Bound<'py, PyAny>,
    sr: f64,
    method: &str,
    floor_db: f64,
    n_threads: Option<usize>,
) -> PyResult<Pairs<'py>> {
    let m = NoiseMethod::from_name(method).map_err(to_py)?;
    let pb = MonoBatch::extract(pred)?;
    let rb = MonoBatch::extract(reference)?;
    let (p, r) = (pb.slices()?, rb.slices()?);
    let work = total_samples(&p, |x| x.len()) + total_samples(&r, |x| x.len());
    let out = gateway::run(py, work, |c| {
        edc_distance_batch(&p, &r, sr, m, floor_db, n_threads, c)
    })?;
    let d: Vec<f64> = out.iter().map(|x| x.0).collect();
    let s: Vec<u8> = out.iter().map(|x| x.1 as u8).collect();
    Ok((d.into_pyarray(py), s.into_pyarray(py)))
}

/// FFT convolution of sources with multichannel IRs: `irs` holds every
/// channel of every IR in order, `channels[i]` the channel count of IR `i`.
/// Returns flat data, item offsets, channel counts and output lengths.
#[pyfunction]
#[pyo3(signature = (sources, irs, channels, mode="full", n_threads=None))]
pub fn fftconvolve<'py>(
    py: Python<'py>,
    sources: &Bound<'py, PyAny>,
    irs: &Bound<'py, PyAny>,
    channels: PyReadonlyArray1<'py, u64>,
    mode: &str,
    n_threads: Option<usize>,
) -> PyResult<ConvOut<'py>> {
    let mode = ConvMode::from_name(mode).map_err(to_py)?;
    let sb = MonoBatch::extract(sources)?;
    let ib = MonoBatch::extract(irs)?;
    let (src, chans) = (sb.slices()?, ib.slices()?);
    let counts = channels.as_array();
    if counts.iter().sum::<u64>() as usize != chans.len() {
        return Err(shape_err(format!(
            "channel counts add up to {} but {} impulse-response channels were given",
            counts.iter().sum::<u64>(),
            chans.len()
        )));
    }
    let mut groups = Vec::with_capacity(counts.len());
    let mut k = 0usize;
    for &c in counts.iter() {
        groups.push(chans[k..k + c as usize].to_vec());
        k += c as usize;
    }
    let work = total_samples(&src, |x| x.len()) * chans.len().max(1) / src.len().max(1);
    let o = gateway::run(py, work, |c| {
        convolve_batch(&src, &groups, mode, n_threads, c)
    })?;
    Ok((
        o.data.into_pyarray(py),
        to_u64(o.offsets).into_pyarray(py),
        to_u64(o.channels).into_pyarray(py),
        to_u64(o.lengths).into_pyarray(py),
    ))
}
