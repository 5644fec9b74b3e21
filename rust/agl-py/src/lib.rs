//! `agl_fast._native`: the PyO3 binding of agl-core. Registration only; one
//! file per feature family, errors mapped in `errors`, the GIL released in
//! `gateway`.

// Parameter checks are written `!(x > 0.0)` on purpose: NaN fails them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use pyo3::prelude::*;

mod args;
mod audio;
mod compat;
mod errors;
mod features;
mod fingerprint;
mod gateway;
mod geo;
mod input;
mod quality;
mod room;

/// Threads used when a call passes none (`AGL_FAST_NUM_THREADS` or the CPU
/// count).
#[pyfunction]
fn default_threads() -> PyResult<usize> {
    agl_core::parallel::default_threads().map_err(errors::to_py)
}

/// Largest thread count a call accepts (4 per logical CPU, at least 16).
#[pyfunction]
fn max_threads() -> usize {
    agl_core::parallel::max_threads()
}

/// The fingerprint's analysis constants and default pairing thresholds.
fn fingerprint_consts(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use agl_core::fingerprint as fp;
    m.add("FP_ANALYSIS_SR", fp::ANALYSIS_SR)?;
    m.add("FP_HOP", fp::HOP)?;
    m.add("FP_N_FFT", fp::N_FFT)?;
    m.add("FP_HASH_BITS", fp::HASH_BITS)?;
    m.add("FP_MIN_DISTINCT", fp::MIN_DISTINCT)?;
    m.add("FP_MIN_SCORE", fp::MIN_SCORE)?;
    m.add("FP_MIN_MATCHES", fp::MIN_MATCHES)?;
    m.add("FP_MAX_POSTINGS", fp::MAX_POSTINGS)?;
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_SAMPLE_RATE", agl_core::resample::MAX_SAMPLE_RATE)?;
    m.add("MAX_RATIO", agl_core::resample::MAX_RATIO)?;
    m.add("CORRUPT_LEVEL", agl_core::audio::CORRUPT_LEVEL)?;
    m.add("SR_RANGE", agl_core::mel::SR_RANGE)?;
    m.add("MAX_POWER", agl_core::features::MAX_POWER)?;
    m.add("CLIP_LEVEL", agl_core::quality::CLIP_LEVEL_F64)?;
    m.add("QUALITY_N_FFT", agl_core::quality::QUALITY_N_FFT)?;
    m.add("PRESET_N_FFT", agl_core::features::PRESET_N_FFT)?;
    m.add_function(wrap_pyfunction!(default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(max_threads, m)?)?;
    m.add_function(wrap_pyfunction!(args::check_count, m)?)?;
    m.add_function(wrap_pyfunction!(args::default_hop_length, m)?)?;
    m.add_class::<args::Framing>()?;
    m.add_function(wrap_pyfunction!(features::mel_filterbank, m)?)?;
    m.add_function(wrap_pyfunction!(features::kaldi_mel_filterbank, m)?)?;
    m.add_function(wrap_pyfunction!(features::stft, m)?)?;
    m.add_function(wrap_pyfunction!(features::spectrogram, m)?)?;
    m.add_function(wrap_pyfunction!(features::melspectrogram, m)?)?;
    m.add_function(wrap_pyfunction!(features::ipd, m)?)?;
    m.add_function(wrap_pyfunction!(features::bat, m)?)?;
    m.add_function(wrap_pyfunction!(features::efficientat, m)?)?;
    m.add_function(wrap_pyfunction!(features::to_db, m)?)?;
    m.add_function(wrap_pyfunction!(geo::haversine, m)?)?;
    m.add_function(wrap_pyfunction!(geo::geodesic, m)?)?;
    m.add_function(wrap_pyfunction!(geo::geoscore, m)?)?;
    m.add_function(wrap_pyfunction!(geo::geo_summary, m)?)?;
    m.add_function(wrap_pyfunction!(audio::load, m)?)?;
    m.add_function(wrap_pyfunction!(audio::load_many, m)?)?;
    m.add_function(wrap_pyfunction!(audio::probe, m)?)?;
    m.add_function(wrap_pyfunction!(audio::resample_array, m)?)?;
    m.add_function(wrap_pyfunction!(quality::quality_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(quality::levels, m)?)?;
    m.add_function(wrap_pyfunction!(quality::rms, m)?)?;
    m.add_function(wrap_pyfunction!(quality::spectral_flatness, m)?)?;
    m.add_function(wrap_pyfunction!(quality::acoustic_complexity, m)?)?;
    m.add_function(wrap_pyfunction!(room::edc, m)?)?;
    m.add_function(wrap_pyfunction!(room::room_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(room::edc_distance, m)?)?;
    m.add_function(wrap_pyfunction!(room::fftconvolve, m)?)?;
    fingerprint_consts(m)?;
    m.add_function(wrap_pyfunction!(fingerprint::fingerprint_many, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint::pair, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint::hash_counts, m)?)?;
    m.add_function(wrap_pyfunction!(compat::pcen, m)?)?;
    m.add_function(wrap_pyfunction!(compat::resample_poly, m)?)?;
    Ok(())
}
