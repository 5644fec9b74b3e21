//! Kernels that only `agl_fast.compat.librosa` calls: PCEN (librosa's
//! `pcen`) and polyphase resampling (its `resample(res_type="polyphase")`).

use agl_core::parallel::Cancel;
use agl_core::pcen::{PcenOutput, PcenParams};
use agl_core::polyphase::{Polyphase, Real};
use numpy::{
    Element, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{internal_err, param_err, to_py};
use crate::gateway;

/// PCEN options (librosa's names); `sqrt` asks for the finished output of
/// `power=0.5` (else the smoothing gain `(eps + M)^-gain`).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PcenArgs {
    pub b: f64,
    pub gain: f64,
    pub eps: f64,
    pub bias: f64,
    pub sqrt: bool,
}

/// What `pcen` returns: the output and the final smoother states.
type Pcen<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

/// A new C-contiguous array of `shape`, to be written whole by a kernel.
fn fresh<'py, T: Element, D: numpy::ndarray::Dimension>(
    py: Python<'py>,
    shape: D,
) -> Bound<'py, numpy::PyArray<T, D>> {
    // SAFETY: callers write every element before the array is returned (on
    // an error it is dropped unread).
    unsafe { numpy::PyArray::<T, D>::new(py, shape, false) }
}

/// PCEN of every row of `s` `[rows, frames]` along the frames, from the
/// smoother states `zi` (one per row): `(out, zf)`, `zf` the final states.
#[pyfunction]
pub fn pcen<'py>(
    py: Python<'py>,
    s: PyReadonlyArray2<'py, f64>,
    zi: PyReadonlyArray1<'py, f64>,
    options: PcenArgs,
) -> PyResult<Pcen<'py>> {
    let (rows, width) = (s.shape()[0], s.shape()[1]);
    let src = s
        .as_slice()
        .map_err(|_| param_err("S must be a C-contiguous float64 array"))?;
    let zi = zi
        .as_slice()
        .map_err(|_| param_err("zi must be a contiguous float64 array"))?;
    if zi.len() != rows {
        return Err(param_err(format!(
            "zi holds {} states for {rows} rows",
            zi.len()
        )));
    }
    let p = PcenParams {
        b: options.b,
        gain: options.gain,
        eps: options.eps,
        bias: options.bias,
        mode: if options.sqrt {
            PcenOutput::Sqrt
        } else {
            PcenOutput::Smooth
        },
    };
    let out = fresh::<f64, _>(py, numpy::ndarray::Ix2(rows, width));
    let zf = fresh::<f64, _>(py, numpy::ndarray::Ix1(rows));
    let dst = unsafe { out.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    let zdst = unsafe { zf.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    gateway::run(py, src.len(), |c: &Cancel| {
        agl_core::pcen::pcen(src, width, zi, &p, dst, zdst, c)
    })?;
    Ok((out, zf))
}

fn poly<'py, T: Real + Element>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, T>,
    h: PyReadonlyArray1<'py, T>,
    rates: (usize, usize),
    offset: usize,
    n_out: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let rows = x.shape()[0];
    let width = x.shape()[1].max(1);
    let src = x
        .as_slice()
        .map_err(|_| param_err("x must be a C-contiguous array"))?;
    let h = h
        .as_slice()
        .map_err(|_| param_err("h must be a contiguous array"))?;
    let bank = Polyphase::new(h, rates.0, rates.1).map_err(to_py)?;
    let out = fresh::<T, _>(py, numpy::ndarray::Ix2(rows, n_out));
    let dst = unsafe { out.as_slice_mut() }
        .map_err(|_| internal_err("internal error: a new array is not contiguous"))?;
    let work = rows * n_out * h.len() / rates.0.max(1);
    gateway::run(py, work, |c: &Cancel| {
        for (row, o) in src.chunks(width).zip(dst.chunks_mut(n_out.max(1))) {
            bank.run(row, offset, o, c)?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// Polyphase resampling of every row of `x` `[rows, n]` with the filter
/// `h` at `up`/`down`, in the precision of `x` (float32 or float64; `h` of
/// the same dtype): outputs `offset .. offset + n_out` of
/// `upfirdn(h, row, up, down)`.
#[pyfunction]
pub fn resample_poly<'py>(
    x: &Bound<'py, PyAny>,
    h: &Bound<'py, PyAny>,
    up: usize,
    down: usize,
    offset: usize,
    n_out: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    if let Ok(x32) = x.extract::<PyReadonlyArray2<'py, f32>>() {
        let h: PyReadonlyArray1<'py, f32> = h
            .extract()
            .map_err(|_| param_err("h must be a 1-D array of the dtype of x (float32)"))?;
        return Ok(poly(py, x32, h, (up, down), offset, n_out)?.into_any());
    }
    let x64: PyReadonlyArray2<'py, f64> = x
        .extract()
        .map_err(|_| param_err("x must be a 2-D float32 or float64 array"))?;
    let h: PyReadonlyArray1<'py, f64> = h
        .extract()
        .map_err(|_| param_err("h must be a 1-D array of the dtype of x (float64)"))?;
    Ok(poly(py, x64, h, (up, down), offset, n_out)?.into_any())
}
