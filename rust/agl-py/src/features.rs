//! Bindings of the spectral and binaural feature kernels. Each function
//! borrows its batch, runs through the gateway and returns
//! `(data, offsets, extents, n_frames)`: a flat output buffer and the item
//! layout, which the Python layer turns into arrays or Arrow lists.

use agl_core::batch::{FrameOutput, RunOpts};
use agl_core::db::{DbParams, DbRef};
use agl_core::features::{
    bat_batch, efficientat_batch, ipd_batch, melspectrogram_batch, spectrogram_batch, BatConfig,
    EfficientAtConfig,
};
use agl_core::mel::{kaldi_mel, librosa_mel, MelBank, MelNorm};
use agl_core::stft::{stft_batch, stft_f64_batch, StftParams};
use num_complex::{Complex32, Complex64};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::args;
use crate::errors::{internal_err, param_err, to_py};
use crate::gateway;
use crate::input::{total_samples, MonoBatch, StereoBatch};

pub type Out<'py, T> = (
    Bound<'py, PyArray1<T>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
);

pub fn to_u64(v: Vec<usize>) -> Vec<u64> {
    v.into_iter().map(|x| x as u64).collect()
}

pub fn out<'py, T: numpy::Element>(py: Python<'py>, o: FrameOutput<T>) -> Out<'py, T> {
    (
        o.data.into_pyarray(py),
        to_u64(o.offsets).into_pyarray(py),
        to_u64(o.extents).into_pyarray(py),
        to_u64(o.n_frames).into_pyarray(py),
    )
}

/// Assemble STFT parameters from librosa-style arguments (see
/// [`args::StftArgs`]).
pub fn stft_params(
    n_fft: &Bound<'_, PyAny>,
    hop_length: Option<&Bound<'_, PyAny>>,
    win_length: Option<&Bound<'_, PyAny>>,
    window: &Bound<'_, PyAny>,
    center: bool,
    pad_mode: &str,
) -> PyResult<StftParams> {
    args::StftArgs {
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        pad_mode,
    }
    .params()
}

fn mel_norm(norm: Option<&Bound<'_, PyAny>>) -> PyResult<MelNorm> {
    match norm {
        None => Ok(MelNorm::None),
        Some(n) if n.is_none() => Ok(MelNorm::None),
        Some(n) => {
            if let Ok(s) = n.extract::<String>() {
                if s == "slaney" {
                    return Ok(MelNorm::Slaney);
                }
                return Err(param_err(format!(
                    "norm must be 'slaney', None or a number, got norm='{s}'"
                )));
            }
            let p: f64 = n
                .extract()
                .map_err(|_| param_err("norm must be 'slaney', None or a number"))?;
            Ok(MelNorm::Lp(p))
        }
    }
}

fn bank_from(
    sr: f64,
    n_fft: usize,
    n_mels: usize,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&Bound<'_, PyAny>>,
) -> PyResult<MelBank> {
    librosa_mel(sr, n_fft, n_mels, fmin, fmax, htk, mel_norm(norm)?).map_err(to_py)
}

fn bank_to_py<'py>(py: Python<'py>, b: MelBank) -> PyResult<Bound<'py, PyArray2<f32>>> {
    b.dense.into_pyarray(py).reshape([b.n_mels, b.n_freqs])
}

/// librosa's mel filterbank `[n_mels, 1 + n_fft/2]`.
#[pyfunction]
#[pyo3(signature = (sr, n_fft, n_mels, fmin, fmax, htk, norm))]
#[allow(clippy::too_many_arguments)]
pub fn mel_filterbank<'py>(
    py: Python<'py>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    n_mels: &Bound<'py, PyAny>,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let (n_fft, n_mels) = (args::count("n_fft", n_fft)?, args::count("n_mels", n_mels)?);
    bank_to_py(py, bank_from(sr, n_fft, n_mels, fmin, fmax, htk, norm)?)
}

/// Kaldi mel banks `[n_mels, 1 + n_fft/2]` (last column zero).
#[pyfunction]
#[pyo3(signature = (sr, n_fft, n_mels, fmin, fmax))]
pub fn kaldi_mel_filterbank<'py>(
    py: Python<'py>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    n_mels: &Bound<'py, PyAny>,
    fmin: f64,
    fmax: f64,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let (n_fft, n_mels) = (args::count("n_fft", n_fft)?, args::count("n_mels", n_mels)?);
    bank_to_py(py, kaldi_mel(sr, n_fft, n_mels, fmin, fmax).map_err(to_py)?)
}

/// Complex STFT of a mono batch; items `[1 + n_fft/2, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, n_fft, hop_length, win_length, window, center, pad_mode, extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn stft<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    n_fft: &Bound<'py, PyAny>,
    hop_length: Option<&Bound<'py, PyAny>>,
    win_length: Option<&Bound<'py, PyAny>>,
    window: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, Complex32>> {
    let n_threads = args::threads(n_threads)?;
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| stft_batch(&items, &p, extent, n_threads, c))?;
    Ok(out(py, o))
}

/// `|STFT|^power` of a mono batch.
#[pyfunction]
#[pyo3(signature = (signals, n_fft, hop_length, win_length, window, center, pad_mode, power=2.0, extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn spectrogram<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    n_fft: &Bound<'py, PyAny>,
    hop_length: Option<&Bound<'py, PyAny>>,
    win_length: Option<&Bound<'py, PyAny>>,
    window: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    power: f32,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let n_threads = args::threads(n_threads)?;
    args::positive("power", f64::from(power))?;
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        spectrogram_batch(&items, &p, power, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

fn db_params(db_ref: Option<f32>, amin: f32, top_db: Option<f32>) -> PyResult<DbParams> {
    let r = match db_ref {
        None => DbRef::Max,
        Some(v) => DbRef::Value(v),
    };
    DbParams::new(r, amin, top_db).map_err(to_py)
}

/// Mel spectrogram of a mono batch (optionally in dB per item).
///
/// `mel_basis` overrides the bank built from `sr, n_mels, fmin, fmax, htk,
/// norm`. `to_db` converts with `ref` (`None` = per-item max), `amin`,
/// `top_db`.
#[pyfunction]
#[pyo3(signature = (signals, sr, n_fft, hop_length, win_length, window, center, pad_mode, power=2.0,
    n_mels=None, fmin=0.0, fmax=None, htk=false, norm=None, mel_basis=None,
    to_db=false, db_ref=Some(1.0), amin=1e-10, top_db=Some(80.0), extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn melspectrogram<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    hop_length: Option<&Bound<'py, PyAny>>,
    win_length: Option<&Bound<'py, PyAny>>,
    window: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    power: f32,
    n_mels: Option<&Bound<'py, PyAny>>,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&Bound<'py, PyAny>>,
    mel_basis: Option<PyReadonlyArray2<'py, f32>>,
    to_db: bool,
    db_ref: Option<f32>,
    amin: f32,
    top_db: Option<f32>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let n_threads = args::threads(n_threads)?;
    args::positive("sr", sr)?;
    args::positive("power", f64::from(power))?;
    args::finite("fmin", fmin)?;
    let n_mels = args::opt_count("n_mels", n_mels)?.unwrap_or(128);
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let bank = match mel_basis {
        Some(m) => {
            let s = m.shape();
            MelBank::from_dense(s[0], s[1], m.as_array().iter().copied().collect())
        }
        None => bank_from(sr, p.n_fft, n_mels, fmin, fmax, htk, norm)?,
    };
    let db = if to_db {
        Some(db_params(db_ref, amin, top_db)?)
    } else {
        None
    };
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        let run = RunOpts {
            extent,
            n_threads,
            cancel: c,
        };
        melspectrogram_batch(&items, &p, power, &bank, db.as_ref(), run)
    })?;
    Ok(out(py, o))
}

/// Mel-projected IPD cos/sin of a stereo batch; items `[2, n_mels, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, sr, n_fft, hop_length, win_length, window, center, pad_mode,
    n_mels=None, fmin=0.0, fmax=None, htk=false, norm=None, extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn ipd<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    hop_length: Option<&Bound<'py, PyAny>>,
    win_length: Option<&Bound<'py, PyAny>>,
    window: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    n_mels: Option<&Bound<'py, PyAny>>,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&Bound<'py, PyAny>>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let n_threads = args::threads(n_threads)?;
    let n_mels = args::opt_count("n_mels", n_mels)?.unwrap_or(128);
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let bank = bank_from(sr, p.n_fft, n_mels, fmin, fmax, htk, norm)?;
    let batch = StereoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = 2 * total_samples(&items, |x| x.0.len());
    let o = gateway::run(py, work, |c| {
        ipd_batch(&items, &p, &bank, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

/// The `bat` recipe over a stereo batch; items `[4, frames, n_mels]`.
#[pyfunction]
#[pyo3(signature = (signals, sr, n_fft, hop_length, n_mels, fmin, fmax, amin, loudness_dbfs,
    extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn bat<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    hop_length: &Bound<'py, PyAny>,
    n_mels: &Bound<'py, PyAny>,
    fmin: f64,
    fmax: f64,
    amin: f32,
    loudness_dbfs: Option<f32>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let n_threads = args::threads(n_threads)?;
    let n_fft = args::count("n_fft", n_fft)?;
    let hop_length = args::count("hop_length", hop_length)?;
    let n_mels = args::count("n_mels", n_mels)?;
    if let Some(l) = loudness_dbfs {
        args::finite("loudness_dbfs", f64::from(l))?;
    }
    let mut cfg = BatConfig {
        sr,
        n_mels,
        fmin,
        fmax,
        amin,
        loudness_dbfs,
        ..BatConfig::default()
    };
    cfg.stft.n_fft = n_fft;
    cfg.stft.win_length = n_fft;
    cfg.stft.hop_length = hop_length;
    cfg.stft.validate().map_err(to_py)?;
    if amin.is_nan() || amin <= 0.0 {
        return Err(param_err(format!("amin must be > 0, got amin={amin}")));
    }
    let batch = StereoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = 2 * total_samples(&items, |x| x.0.len());
    let o = gateway::run(py, work, |c| bat_batch(&items, &cfg, extent, n_threads, c))?;
    Ok(out(py, o))
}

/// The `efficientat` recipe over a mono batch; items `[n_mels, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, sr, n_fft, win_length, hop_length, n_mels, fmin, fmax, preemphasis,
    extent=None, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn efficientat<'py>(
    py: Python<'py>,
    signals: &Bound<'py, PyAny>,
    sr: f64,
    n_fft: &Bound<'py, PyAny>,
    win_length: &Bound<'py, PyAny>,
    hop_length: &Bound<'py, PyAny>,
    n_mels: &Bound<'py, PyAny>,
    fmin: f64,
    fmax: f64,
    preemphasis: f32,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let n_threads = args::threads(n_threads)?;
    let n_fft = args::count("n_fft", n_fft)?;
    let win_length = args::count("win_length", win_length)?;
    let hop_length = args::count("hop_length", hop_length)?;
    let n_mels = args::count("n_mels", n_mels)?;
    let mut cfg = EfficientAtConfig {
        sr,
        n_mels,
        fmin,
        fmax,
        preemphasis,
        ..EfficientAtConfig::default()
    };
    cfg.stft.n_fft = n_fft;
    cfg.stft.win_length = win_length;
    cfg.stft.hop_length = hop_length;
    cfg.stft.validate().map_err(to_py)?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        efficientat_batch(&items, &cfg, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

/// `power_to_db` (or `amplitude_to_db`) applied to each row of `x`
/// `[items, values]` independently; returns a new array.
#[pyfunction]
#[pyo3(signature = (x, db_ref=Some(1.0), amin=1e-10, top_db=Some(80.0), amplitude=false, n_threads=None))]
pub fn to_db<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    db_ref: Option<f32>,
    amin: f32,
    top_db: Option<f32>,
    amplitude: bool,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let n_threads = args::threads(n_threads)?;
    let p = db_params(db_ref, amin, top_db)?;
    let shape = [x.shape()[0], x.shape()[1]];
    let mut data: Vec<f32> = x.as_array().iter().copied().collect();
    let work = data.len();
    gateway::run(py, work, |c| {
        agl_core::db::to_db_batch(&mut data, shape[1], &p, amplitude, n_threads, c)
    })?;
    data.into_pyarray(py).reshape(shape)
}

/// Double-precision `power_to_db` / `amplitude_to_db` of each row of `x`
/// `[items, values]` (the float64 path); returns a new array.
#[pyfunction]
#[pyo3(signature = (x, db_ref=Some(1.0), amin=1e-10, top_db=Some(80.0), amplitude=false, n_threads=None))]
pub fn to_db_f64<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    db_ref: Option<f64>,
    amin: f64,
    top_db: Option<f64>,
    amplitude: bool,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let n_threads = args::threads(n_threads)?;
    let shape = [x.shape()[0], x.shape()[1]];
    let src = x
        .as_slice()
        .map_err(|_| param_err("S must be a C-contiguous float64 array"))?;
    // The output comes from numpy's allocator (huge pages for large arrays,
    // where fresh small pages would cost a fault each) and is written once
    // by the kernel, every element.
    // SAFETY: the array is new and C-contiguous; it is fully written before
    // it is returned (on an error it is dropped unread).
    let out = unsafe { PyArray2::<f64>::new(py, shape, false) };
    let dst = unsafe { out.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    let width = shape[1].max(1);
    let work = src.len();
    gateway::run(py, work, |c| {
        agl_core::parallel::install(n_threads, || {
            use rayon::prelude::*;
            dst.par_chunks_mut(width)
                .zip(src.par_chunks(width))
                .try_for_each(|(row, s)| {
                    c.check()?;
                    agl_core::db::to_db_f64(s, row, db_ref, amin, top_db, amplitude)
                })
        })?
    })?;
    Ok(out)
}

/// Double-precision STFT of `rows` `[items, n]` (the float64 path):
/// `(frames, data)` with `data` `[items * (1 + n_fft/2) * frames]` in
/// librosa's `[items, freqs, frames]` order. `window` is a name or a 1-D
/// float64 array of `win_length` coefficients.
#[pyfunction]
#[pyo3(signature = (rows, n_fft, hop_length, win_length, window, center, pad_mode, n_threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn stft_f64<'py>(
    py: Python<'py>,
    rows: PyReadonlyArray2<'py, f64>,
    n_fft: &Bound<'py, PyAny>,
    hop_length: Option<&Bound<'py, PyAny>>,
    win_length: Option<&Bound<'py, PyAny>>,
    window: &Bound<'py, PyAny>,
    center: bool,
    pad_mode: &str,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<(usize, Bound<'py, PyArray1<Complex64>>)> {
    let n_threads = args::threads(n_threads)?;
    let name_or_rect = if window.extract::<String>().is_ok() {
        window.clone()
    } else {
        "rectangular".into_pyobject(py)?.into_any()
    };
    let p = stft_params(
        n_fft,
        hop_length,
        win_length,
        &name_or_rect,
        center,
        pad_mode,
    )?;
    let w: Vec<f64> = if window.extract::<String>().is_ok() {
        p.window.coefficients_f64(p.win_length).map_err(to_py)?
    } else {
        let arr: PyReadonlyArray1<f64> = window
            .extract()
            .map_err(|_| param_err("window must be a name or a 1-D float64 array"))?;
        arr.as_array().to_vec()
    };
    let view = rows.as_array();
    let width = view.ncols().max(1);
    // The caller's C-contiguous rows are read in place (copied only if not).
    let owned: Vec<f64>;
    let flat: &[f64] = match rows.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = view.iter().copied().collect();
            &owned
        }
    };
    let slices: Vec<&[f64]> = if view.ncols() == 0 {
        vec![&[][..]; view.nrows()]
    } else {
        flat.chunks(width).collect()
    };
    let work = view.len();
    let (frames, data) = gateway::run(py, work, |c| stft_f64_batch(&slices, &p, &w, n_threads, c))?;
    Ok((frames, data.into_pyarray(py)))
}
