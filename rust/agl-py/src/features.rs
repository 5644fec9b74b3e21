//! Bindings of the spectral and binaural feature kernels. Each function
//! borrows its batch, runs through the gateway and returns
//! `(data, offsets, extents, n_frames)`: a flat output buffer and the item
//! layout, which the Python layer turns into arrays or Arrow lists.

use agl_core::batch::{FrameOutput, RunOpts};
use agl_core::db::{to_db_rows, DbParams64, DbSample};
use agl_core::features::{
    bat_batch, efficientat_batch, ipd_batch, melspectrogram_batch, spectrogram_batch, BatConfig,
    EfficientAtConfig,
};
use agl_core::mel::{kaldi_mel, MelBank, MelOut};
use agl_core::spectral::stft64::{
    check_power_f64, stft_f64_sink_into, stft_f64_sink_len, Complex128Out, Complex64Out,
    Float64Framing, Layout, PowerOut, Sample, Sink,
};
use agl_core::spectral::{stft_batch, StftParams};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

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

fn bank_to_py<'py>(py: Python<'py>, b: MelBank) -> PyResult<Bound<'py, PyArray2<f32>>> {
    b.dense.into_pyarray(py).reshape([b.n_mels, b.n_freqs])
}

/// librosa's mel filterbank `[n_mels, 1 + n_fft/2]`.
#[pyfunction]
pub fn mel_filterbank<'py>(
    n_fft: &Bound<'py, PyAny>,
    mel: args::MelArgs<'py>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let bank = mel.bank(args::count("n_fft", n_fft)?)?;
    bank_to_py(n_fft.py(), bank)
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

/// Complex STFT. A mono batch (float32 samples: arrays, lists, Arrow)
/// runs on the f32 engines and returns `(data, offsets, extents,
/// n_frames)`, items `[1 + n_fft/2, frames]`. A 2-D float64 array of rows,
/// or any rows with `double`, runs the float64 path and returns `(frames,
/// data)` (see [`stft_double`]).
#[pyfunction]
#[pyo3(signature = (signals, framing, extent=None, n_threads=None, double=false, single=false, frame_major=false))]
pub fn stft<'py>(
    signals: &Bound<'py, PyAny>,
    framing: &Bound<'py, args::Framing>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
    double: bool,
    single: bool,
    frame_major: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let layout = layout_of(frame_major);
    if takes_double(signals, double, extent)? {
        return stft_double(signals, framing.get(), n_threads, single, layout);
    }
    single_only(single, frame_major)?;
    let p = framing.get().kernel()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| stft_batch(&items, p, extent, n_threads, c))?;
    out(py, o).into_bound_py_any(py)
}

/// Whether a call runs the float64 path: `double`, or rows that are a 2-D
/// float64 array. That path takes no `extent` (its rows have one length).
fn takes_double(signals: &Bound<'_, PyAny>, double: bool, extent: Option<usize>) -> PyResult<bool> {
    let double = double || signals.extract::<PyReadonlyArray2<'_, f64>>().is_ok();
    if double && extent.is_some() {
        return Err(param_err(
            "extent applies to float32 batches; the float64 path takes rows of one length",
        ));
    }
    Ok(double)
}

/// Refuse the float64 path's options on a float32 batch.
fn single_only(single: bool, frame_major: bool) -> PyResult<()> {
    if single || frame_major {
        return Err(param_err(
            "single and frame_major apply to the float64 path (float64 rows, or double=True)",
        ));
    }
    Ok(())
}

/// `|STFT|^power`. A mono float32 batch returns `(data, offsets, extents,
/// n_frames)`; a 2-D float64 array of rows runs the float64 path, projected on `mel` when given, and return `(frames, data)` (see
/// [`spectrogram_double`]).
#[pyfunction]
#[pyo3(signature = (signals, framing, power=2.0, extent=None, n_threads=None, mel=None, frame_major=false))]
pub fn spectrogram<'py>(
    signals: &Bound<'py, PyAny>,
    framing: &Bound<'py, args::Framing>,
    power: f64,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
    mel: Option<args::MelArgs<'py>>,
    frame_major: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    if takes_double(signals, false, extent)? {
        let layout = layout_of(frame_major);
        return spectrogram_double(signals, framing.get(), power, mel, n_threads, layout);
    }
    single_only(false, frame_major)?;
    if mel.is_some() {
        return Err(param_err(
            "mel applies to the float64 path; a float32 batch takes melspectrogram",
        ));
    }
    // Python floats cross as float32 exactly as a float32 argument would.
    let power = power as f32;
    args::positive("power", f64::from(power))?;
    let p = framing.get().kernel()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        spectrogram_batch(&items, p, power, extent, n_threads, c)
    })?;
    out(py, o).into_bound_py_any(py)
}

/// Mel spectrogram of a mono batch, in dB per item when `db` is given
/// (`db_ref` `None` = per-item max).
#[pyfunction]
#[pyo3(signature = (signals, framing, mel, power=2.0, db=None, extent=None, n_threads=None))]
pub fn melspectrogram<'py>(
    signals: &Bound<'py, PyAny>,
    framing: &Bound<'py, args::Framing>,
    mel: args::MelArgs<'py>,
    power: f32,
    db: Option<args::DbArgs>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    args::positive("power", f64::from(power))?;
    let p = framing.get().kernel()?;
    let bank = mel.bank(p.n_fft)?;
    let db = db.map(|d| d.params()).transpose()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        let run = RunOpts {
            extent,
            n_threads,
            cancel: c,
        };
        melspectrogram_batch(&items, p, power, &bank, db.as_ref(), run)
    })?;
    Ok(out(py, o))
}

/// Mel-projected IPD cos/sin of a stereo batch; items `[2, n_mels, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, framing, mel, extent=None, n_threads=None))]
pub fn ipd<'py>(
    signals: &Bound<'py, PyAny>,
    framing: &Bound<'py, args::Framing>,
    mel: args::MelArgs<'py>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let p = framing.get().kernel()?;
    let bank = mel.bank(p.n_fft)?;
    let batch = StereoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = 2 * total_samples(&items, |x| x.0.len());
    let o = gateway::run(py, work, |c| {
        ipd_batch(&items, p, &bank, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

/// The `bat` recipe's parameters, as `agl_fast.presets` hands them over
/// (a mapping with these keys).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct BatArgs<'py> {
    sr: f64,
    n_fft: Bound<'py, PyAny>,
    hop_length: Bound<'py, PyAny>,
    n_mels: Bound<'py, PyAny>,
    fmin: f64,
    fmax: f64,
    amin: f32,
    loudness_dbfs: Option<f32>,
}

impl BatArgs<'_> {
    fn config(&self) -> PyResult<BatConfig> {
        if let Some(l) = self.loudness_dbfs {
            args::finite("loudness_dbfs", f64::from(l))?;
        }
        let mut cfg = BatConfig {
            sr: self.sr,
            n_mels: args::count("n_mels", &self.n_mels)?,
            fmin: self.fmin,
            fmax: self.fmax,
            amin: self.amin,
            loudness_dbfs: self.loudness_dbfs,
            ..BatConfig::default()
        };
        let n_fft = args::count("n_fft", &self.n_fft)?;
        cfg.stft.n_fft = n_fft;
        cfg.stft.win_length = n_fft;
        cfg.stft.hop_length = args::count("hop_length", &self.hop_length)?;
        cfg.stft.validate().map_err(to_py)?;
        if self.amin.is_nan() || self.amin <= 0.0 {
            return Err(param_err(format!(
                "amin must be > 0, got amin={}",
                self.amin
            )));
        }
        Ok(cfg)
    }
}

/// The `bat` recipe over a stereo batch; items `[4, frames, n_mels]`.
#[pyfunction]
#[pyo3(signature = (signals, recipe, extent=None, n_threads=None))]
pub fn bat<'py>(
    signals: &Bound<'py, PyAny>,
    recipe: BatArgs<'py>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let cfg = recipe.config()?;
    let batch = StereoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = 2 * total_samples(&items, |x| x.0.len());
    let o = gateway::run(py, work, |c| bat_batch(&items, &cfg, extent, n_threads, c))?;
    Ok(out(py, o))
}

/// The `efficientat` recipe's parameters, as `agl_fast.presets` hands them
/// over (a mapping with these keys).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct EfficientAtArgs<'py> {
    sr: f64,
    n_fft: Bound<'py, PyAny>,
    win_length: Bound<'py, PyAny>,
    hop_length: Bound<'py, PyAny>,
    n_mels: Bound<'py, PyAny>,
    fmin: f64,
    fmax: f64,
    preemphasis: f32,
}

impl EfficientAtArgs<'_> {
    fn config(&self) -> PyResult<EfficientAtConfig> {
        let mut cfg = EfficientAtConfig {
            sr: self.sr,
            n_mels: args::count("n_mels", &self.n_mels)?,
            fmin: self.fmin,
            fmax: self.fmax,
            preemphasis: self.preemphasis,
            ..EfficientAtConfig::default()
        };
        cfg.stft.n_fft = args::count("n_fft", &self.n_fft)?;
        cfg.stft.win_length = args::count("win_length", &self.win_length)?;
        cfg.stft.hop_length = args::count("hop_length", &self.hop_length)?;
        cfg.stft.validate().map_err(to_py)?;
        Ok(cfg)
    }
}

/// The `efficientat` recipe over a mono batch; items `[n_mels, frames]`.
#[pyfunction]
#[pyo3(signature = (signals, recipe, extent=None, n_threads=None))]
pub fn efficientat<'py>(
    signals: &Bound<'py, PyAny>,
    recipe: EfficientAtArgs<'py>,
    extent: Option<usize>,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Out<'py, f32>> {
    let py = signals.py();
    let n_threads = args::threads(n_threads)?;
    let cfg = recipe.config()?;
    let batch = MonoBatch::extract(signals)?;
    let items = batch.slices()?;
    let work = total_samples(&items, |x| x.len());
    let o = gateway::run(py, work, |c| {
        efficientat_batch(&items, &cfg, extent, n_threads, c)
    })?;
    Ok(out(py, o))
}

/// `power_to_db` (or `amplitude_to_db`) applied to each row of `x`
/// `[items, values]` independently, in the precision of `x` (float32 or
/// float64, C-contiguous); returns a new array of that dtype.
#[pyfunction]
#[pyo3(signature = (x, db_ref=Some(1.0), amin=1e-10, top_db=Some(80.0), amplitude=false, n_threads=None))]
pub fn to_db<'py>(
    x: &Bound<'py, PyAny>,
    db_ref: Option<f64>,
    amin: f64,
    top_db: Option<f64>,
    amplitude: bool,
    n_threads: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let n_threads = args::threads(n_threads)?;
    if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f32>>() {
        // Python floats cross as float32 exactly as a float32 argument would.
        let p = args::DbArgs {
            db_ref: db_ref.map(|r| r as f32),
            amin: amin as f32,
            top_db: top_db.map(|t| t as f32),
        }
        .params()?;
        return Ok(db_rows(a, &p, amplitude, n_threads)?.into_any());
    }
    let a = x
        .extract::<PyReadonlyArray2<'py, f64>>()
        .map_err(|_| param_err("S must be a 2-D float32 or float64 array"))?;
    let p = DbParams64 {
        reference: db_ref,
        amin,
        top_db,
    };
    Ok(db_rows(a, &p, amplitude, n_threads)?.into_any())
}

/// [`to_db`] on an array of one sample type.
fn db_rows<'py, T: DbSample + numpy::Element>(
    x: PyReadonlyArray2<'py, T>,
    p: &T::Params,
    amplitude: bool,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let py = x.py();
    let shape = [x.shape()[0], x.shape()[1]];
    let src = x
        .as_slice()
        .map_err(|_| param_err("S must be a C-contiguous array"))?;
    // The output comes from numpy's allocator (huge pages for large arrays,
    // where fresh small pages would cost a fault each) and is written once
    // by the kernel, every element.
    // SAFETY: the array is new and C-contiguous; it is fully written before
    // it is returned (on an error it is dropped unread).
    let out = unsafe { PyArray2::<T>::new(py, shape, false) };
    let dst = unsafe { out.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    gateway::run(py, src.len(), |c| {
        to_db_rows(src, dst, shape[1], p, amplitude, n_threads, c)
    })?;
    Ok(out)
}

/// The float64 STFT of `rows` `[items, n]` (float64, or float32 widened
/// sample by sample) through `sink`, into a new numpy array: `(frames,
/// data)`, `data` `[items * width * frames]` in librosa's `[items, width,
/// frames]` order, or `[items, frames, width]` with [`Layout::Frames`].
fn run_f64<'py, S>(
    rows: &Bound<'py, PyAny>,
    framing: &args::Framing,
    n_threads: Option<usize>,
    layout: Layout,
    sink: impl FnOnce(&StftParams) -> PyResult<S>,
) -> PyResult<(usize, Bound<'py, PyArray1<S::Out>>)>
where
    S: Sink,
    S::Out: numpy::Element,
{
    if let Ok(a) = rows.extract::<PyReadonlyArray2<'py, f64>>() {
        return run_rows(a, framing, n_threads, layout, sink);
    }
    let a = rows
        .extract::<PyReadonlyArray2<'py, f32>>()
        .map_err(|_| param_err("rows must be a 2-D float64 or float32 array"))?;
    run_rows(a, framing, n_threads, layout, sink)
}

/// The float64 STFT's layout for a caller's `frame_major` flag.
fn layout_of(frame_major: bool) -> Layout {
    if frame_major {
        Layout::Frames
    } else {
        Layout::Values
    }
}

/// [`run_f64`] on rows of one sample type.
fn run_rows<'py, S, X>(
    rows: PyReadonlyArray2<'py, X>,
    framing: &args::Framing,
    n_threads: Option<usize>,
    layout: Layout,
    sink: impl FnOnce(&StftParams) -> PyResult<S>,
) -> PyResult<(usize, Bound<'py, PyArray1<S::Out>>)>
where
    S: Sink,
    S::Out: numpy::Element,
    X: Sample + numpy::Element,
{
    let py = rows.py();
    let (p, w) = (framing.kernel()?, framing.window_f64()?);
    let sink = sink(p)?;
    let view = rows.as_array();
    let width = view.ncols().max(1);
    // The caller's C-contiguous rows are read in place (copied only if not).
    let owned: Vec<X>;
    let flat: &[X] = match rows.as_slice() {
        Ok(s) => s,
        Err(_) => {
            owned = view.iter().copied().collect();
            &owned
        }
    };
    let slices: Vec<&[X]> = if view.ncols() == 0 {
        vec![&[][..]; view.nrows()]
    } else {
        flat.chunks(width).collect()
    };
    let work = view.len();
    let total = stft_f64_sink_len(&slices, p, sink.width(p.n_freqs())).map_err(to_py)?;
    // Written once, every value, into numpy's memory (no zero fill first).
    // SAFETY: the array is new and contiguous; `stft_f64_sink_into` writes
    // every element before it is returned (on an error it is dropped unread).
    let out = unsafe { PyArray1::<S::Out>::new(py, [total], false) };
    let dst = unsafe { out.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    let frames = gateway::run(py, work, |c| {
        let framing = Float64Framing::new(p, &w, layout);
        stft_f64_sink_into(&slices, framing, &sink, n_threads, c, dst)
    })?;
    Ok((frames, out))
}

/// Double-precision STFT of `rows` `[items, n]` (the float64 path; float32
/// rows are widened sample by sample, as librosa's float32 frames are):
/// `(frames, data)` with `data` `[items * (1 + n_fft/2) * frames]` in
/// librosa's `[items, freqs, frames]` order, or `[items, frames, freqs]`
/// with [`Layout::Frames`] (each frame written where it is computed: the
/// caller's view with the last two axes swapped is librosa's own Fortran
/// layout); complex128, or complex64 (the double-precision result rounded
/// once) with `single`. `framing.window` is a name or a 1-D float64 array
/// of `win_length` coefficients.
fn stft_double<'py>(
    rows: &Bound<'py, PyAny>,
    framing: &args::Framing,
    n_threads: Option<usize>,
    single: bool,
    layout: Layout,
) -> PyResult<Bound<'py, PyAny>> {
    let py = rows.py();
    if single {
        let (t, a) = run_f64(rows, framing, n_threads, layout, |_| Ok(Complex64Out))?;
        return (t, a).into_bound_py_any(py);
    }
    let (t, a) = run_f64(rows, framing, n_threads, layout, |_| Ok(Complex128Out))?;
    (t, a).into_bound_py_any(py)
}

/// Double-precision `|STFT|^power` of `rows` `[items, n]`, projected on
/// librosa's mel filterbank when `mel` is given: `(frames, data)` with
/// `data` `[items * width * frames]` float64 in `[items, width, frames]`
/// order, or `[items, frames, width]` with [`Layout::Frames`] (see
/// [`stft_double`]); `width` is `1 + n_fft/2`, or `n_mels`.
fn spectrogram_double<'py>(
    rows: &Bound<'py, PyAny>,
    framing: &args::Framing,
    power: f64,
    mel: Option<args::MelArgs<'py>>,
    n_threads: Option<usize>,
    layout: Layout,
) -> PyResult<Bound<'py, PyAny>> {
    let py = rows.py();
    check_power_f64(power).map_err(to_py)?;
    let Some(mel) = mel else {
        let (t, a) = run_f64(rows, framing, n_threads, layout, |_| Ok(PowerOut { power }))?;
        return (t, a).into_bound_py_any(py);
    };
    let mut bank = None;
    let bank = &mut bank;
    let (t, a) = run_f64(rows, framing, n_threads, layout, |p| {
        let b: &MelBank = bank.insert(mel.bank(p.n_fft)?);
        Ok(MelOut { power, bank: b })
    })?;
    (t, a).into_bound_py_any(py)
}
