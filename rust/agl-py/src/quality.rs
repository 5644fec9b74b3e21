//! Bindings of the acoustic quality metrics: clip-level metrics of a batch,
//! frame-wise RMS and spectral flatness (librosa's forms), and the
//! complexity sums of a given spectrogram.

use agl_core::batch::RunOpts;
use agl_core::quality::{
    complexity_of, levels_batch, quality_batch_with, rms_frames, spectral_flatness_frames,
    KnownStats, QualityParams,
};
use agl_core::spectral::PadMode;
use agl_core::AglError;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::args;
use crate::errors::{param_err, to_py};
use crate::features::{out, Out};
use crate::gateway;
use crate::input::{total_samples, MonoBatch};

/// The clip-level metrics' parameters, as `agl_fast.quality` hands them
/// over (a mapping with these keys).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct QualityArgs<'py> {
    sr: f64,
    welch_nperseg: Bound<'py, PyAny>,
    amin: f64,
    full_scale_threshold: f32,
    n_fft: Bound<'py, PyAny>,
    hop_length: Bound<'py, PyAny>,
}

impl QualityArgs<'_> {
    fn params(&self) -> PyResult<QualityParams> {
        Ok(QualityParams {
            sr: self.sr,
            welch_nperseg: args::count("welch_nperseg", &self.welch_nperseg)?,
            amin: self.amin,
            full_scale_threshold: self.full_scale_threshold,
            n_fft: args::count("n_fft", &self.n_fft)?,
            hop_length: args::count("hop_length", &self.hop_length)?,
        })
    }
}

/// `clip_stats` `[batch, 3]` as per-clip known levels.
fn known_stats(
    clip_stats: Option<&PyReadonlyArray2<'_, f64>>,
) -> PyResult<Option<Vec<KnownStats>>> {
    let Some(a) = clip_stats else {
        return Ok(None);
    };
    let v = a.as_array();
    if v.ncols() != 3 {
        return Err(to_py(AglError::Shape(format!(
            "clip_stats must have 3 columns (rms, clipping_ratio, full_scale_ratio), got shape {:?}",
            v.shape()
        ))));
    }
    Ok(Some(
        v.rows().into_iter().map(|r| [r[0], r[1], r[2]]).collect(),
    ))
}

/// Clip-level metrics `[batch, 6]`: rms, flatness, clipping_ratio,
/// full_scale_ratio, complexity, aci. `clip_stats` (`[batch, 3]`, float64):
/// rms, clipping_ratio and full_scale_ratio measured already, taken as they
/// are (the clips are then read only for their spectra).
#[pyfunction]
#[pyo3(signature = (signals, params, n_threads=None, clip_stats=None))]
pub fn quality_metrics<'py>(
    signals: &Bound<'py, PyAny>,
    params: QualityArgs<'py>,
    n_threads: Option<&Bound<'py, PyAny>>,
    clip_stats: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let known = known_stats(clip_stats.as_ref())?;
    let p = params.params()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let m = gateway::run(py, work, |c| {
        quality_batch_with(&items, &p, known.as_deref(), n_threads, c)
    })?;
    let n = m.len();
    let flat: Vec<f64> = m
        .iter()
        .flat_map(|r| {
            [
                r.rms,
                r.flatness,
                r.clipping_ratio,
                r.full_scale_ratio,
                r.complexity,
                r.aci,
            ]
        })
        .collect();
    flat.into_pyarray(py).reshape([n, 6])
}

/// Level summary `[batch, 3]`: peak |x|, RMS, share of |x| >= threshold.
#[pyfunction]
#[pyo3(signature = (signals, threshold=agl_core::quality::CLIP_LEVEL, n_threads=None))]
pub fn levels<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    threshold: f32,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let m = gateway::run(py, work, |c| levels_batch(&items, threshold, n_threads, c))?;
    let n = m.len();
    let flat: Vec<f64> = m.into_iter().flatten().collect();
    flat.into_pyarray(py).reshape([n, 3])
}

/// Frame-wise RMS; items `[1, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, frame_length, hop_length, center, pad_mode, extent=None, n_threads=None))]
pub fn rms<'py>(
    signals: &Bound<'py, PyAny>,
    frame_length: &Bound<'py, PyAny>,
    hop_length: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let frame_length = args::count("frame_length", frame_length)?;
    let hop_length = args::count("hop_length", hop_length)?;
    let n_threads = args::threads(n_threads)?;
    if frame_length > agl_core::spectral::MAX_N_FFT {
        return Err(param_err(format!(
            "frame_length must be <= {}, got frame_length={frame_length}",
            agl_core::spectral::MAX_N_FFT
        )));
    }
    let pm = PadMode::from_name(pad_mode).map_err(to_py)?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        rms_frames(
            &items,
            frame_length,
            hop_length,
            center,
            pm,
            RunOpts {
                extent,
                n_threads,
                cancel: c,
            },
        )
    })?;
    Ok(out(py, o))
}

/// Frame-wise spectral flatness; items `[1, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, framing, amin=1e-10, power=2.0, extent=None, n_threads=None))]
pub fn spectral_flatness<'py>(
    signals: &Bound<'py, PyAny>,
    framing: &Bound<'py, args::Framing>,
    amin: f32,
    power: f32,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let p = framing.get().kernel()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        spectral_flatness_frames(&items, p, amin, power, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

/// Complexity sums of a `[n_bands, n_frames]` matrix: per band and total.
#[pyfunction]
pub fn acoustic_complexity<'py>(
    py: Python<'py>,
    s: PyReadonlyArray2<'py, f64>,
) -> PyResult<(Bound<'py, PyArray1<f64>>, f64)> {
    let shape = s.shape();
    let (nb, nt) = (shape[0], shape[1]);
    let a = s.as_array();
    if a.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return Err(param_err(
            "spectrogram values must be finite and non-negative (energies or magnitudes)",
        ));
    }
    let flat: Vec<f64> = a.iter().copied().collect();
    let (per, total) = complexity_of(&flat, nb, nt);
    Ok((per.into_pyarray(py), total))
}
