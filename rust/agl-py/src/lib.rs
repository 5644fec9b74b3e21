//! `agl_fast._native`: the PyO3 binding of agl-core. Registration only; one
//! file per feature family, errors mapped in `errors`, the GIL released in
//! `gateway`.

use pyo3::prelude::*;

mod errors;
mod features;
mod gateway;
mod input;
mod quality;
mod room;

/// Threads used when a call passes none (`AGL_FAST_NUM_THREADS` or the CPU
/// count).
#[pyfunction]
fn default_threads() -> usize {
    agl_core::parallel::default_threads()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(features::mel_filterbank, m)?)?;
    m.add_function(wrap_pyfunction!(features::kaldi_mel_filterbank, m)?)?;
    m.add_function(wrap_pyfunction!(features::stft, m)?)?;
    m.add_function(wrap_pyfunction!(features::spectrogram, m)?)?;
    m.add_function(wrap_pyfunction!(features::melspectrogram, m)?)?;
    m.add_function(wrap_pyfunction!(features::ipd, m)?)?;
    m.add_function(wrap_pyfunction!(features::bat, m)?)?;
    m.add_function(wrap_pyfunction!(features::efficientat, m)?)?;
    m.add_function(wrap_pyfunction!(features::to_db, m)?)?;
    m.add_function(wrap_pyfunction!(quality::quality_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(quality::rms, m)?)?;
    m.add_function(wrap_pyfunction!(quality::spectral_flatness, m)?)?;
    m.add_function(wrap_pyfunction!(quality::acoustic_complexity, m)?)?;
    m.add_function(wrap_pyfunction!(room::edc, m)?)?;
    m.add_function(wrap_pyfunction!(room::room_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(room::edc_distance, m)?)?;
    m.add_function(wrap_pyfunction!(room::fftconvolve, m)?)?;
    Ok(())
}
