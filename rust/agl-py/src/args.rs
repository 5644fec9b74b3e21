//! The one place where Python values become Rust parameters.
//!
//! Counts arrive as any Python object and are read as signed integers, so a
//! negative, fractional, boolean or out-of-range value becomes a
//! `ParameterError` naming the parameter ("n_fft must be a positive
//! integer, got -1") instead of an `OverflowError` or `TypeError` from the
//! argument conversion. Ranges beyond sign and type (ceilings that keep a
//! plan from reaching gigabytes) are checked once, in the core.

use agl_core::db::{DbParams, DbRef};
use agl_core::mel::{librosa_mel, MelBank, MelNorm};
use agl_core::spectral::{PadMode, StftParams};
use agl_core::window::Window;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat};

use crate::errors::{param_err, to_py};

fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".to_string())
}

fn is_bool(v: &Bound<'_, PyAny>) -> bool {
    v.is_instance_of::<PyBool>()
        || v.get_type()
            .name()
            .map(|n| n.to_string().starts_with("bool"))
            .unwrap_or(false)
}

/// An integer parameter `>= min`, as `usize`.
fn integer(name: &str, v: &Bound<'_, PyAny>, min: i64, what: &str) -> PyResult<usize> {
    let bad = || param_err(format!("{name} must be {what}, got {}", repr(v)));
    if is_bool(v) || v.is_instance_of::<PyFloat>() {
        return Err(bad());
    }
    let i: i64 = v.extract().map_err(|_| bad())?;
    if i < min {
        return Err(bad());
    }
    usize::try_from(i).map_err(|_| bad())
}

/// A count (`> 0`).
pub fn count(name: &str, v: &Bound<'_, PyAny>) -> PyResult<usize> {
    integer(name, v, 1, "a positive integer")
}

/// `count` for Python code that needs a count without a native call
/// (`n_frames`): the same rule and message.
#[pyfunction]
pub fn check_count(name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    count(name, value)
}

/// An optional count: `None` stays `None`.
pub fn opt_count(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    match v {
        None => Ok(None),
        Some(x) if x.is_none() => Ok(None),
        Some(x) => count(name, x).map(Some),
    }
}

/// `n_threads`: `None` (the default pool) or a positive count; the core
/// checks the ceiling.
pub fn threads(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    opt_count("n_threads", v)
}

/// A finite float.
pub fn finite(name: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(param_err(format!("{name} must be finite, got {v}")))
    }
}

/// A finite float `> 0`.
pub fn positive(name: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(param_err(format!(
            "{name} must be a positive number, got {v}"
        )))
    }
}

/// A window: a name the core knows or a 1-D float32 array.
pub fn window(window: &Bound<'_, PyAny>) -> PyResult<Window> {
    if let Ok(name) = window.extract::<String>() {
        return Window::from_name(&name).map_err(to_py);
    }
    let arr: PyReadonlyArray1<f32> = window
        .extract()
        .map_err(|_| param_err("window must be a name or a 1-D float32 array"))?;
    Ok(Window::Custom(arr.as_array().to_vec()))
}

/// The framing of a short-time transform as `agl_fast.dsp.StftParams`
/// hands it over: an object with its attributes, the defaults that depend
/// on other parameters (`win_length`, `hop_length`) already resolved there
/// by the one rule (`default_hop_length`).
#[derive(FromPyObject)]
pub struct Framing<'py> {
    pub n_fft: Bound<'py, PyAny>,
    pub hop_length: Bound<'py, PyAny>,
    pub win_length: Bound<'py, PyAny>,
    pub window: Bound<'py, PyAny>,
    pub center: bool,
    pub pad_mode: String,
}

impl Framing<'_> {
    /// Validated core parameters with the framing's own window (a name or
    /// float32 coefficients).
    pub fn params(&self) -> PyResult<StftParams> {
        self.params_with(window(&self.window)?)
    }

    /// Validated core parameters with `window` in place of the framing's.
    pub fn params_with(&self, window: Window) -> PyResult<StftParams> {
        let p = StftParams {
            n_fft: count("n_fft", &self.n_fft)?,
            hop_length: count("hop_length", &self.hop_length)?,
            win_length: count("win_length", &self.win_length)?,
            window,
            center: self.center,
            pad_mode: PadMode::from_name(&self.pad_mode).map_err(to_py)?,
        };
        p.validate().map_err(to_py)?;
        Ok(p)
    }
}

/// The hop librosa takes when none is given: `win_length // 4` (the core's
/// rule, which `agl_fast.dsp.StftParams` applies).
#[pyfunction]
pub fn default_hop_length(win_length: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(agl_core::spectral::default_hop_length(count(
        "win_length",
        win_length,
    )?))
}

/// A mel filterbank's parameters as `agl_fast.dsp.MelParams` hands them
/// over (an object with these attributes).
#[derive(FromPyObject)]
pub struct MelArgs<'py> {
    pub sr: f64,
    pub n_mels: Bound<'py, PyAny>,
    pub fmin: f64,
    pub fmax: Option<f64>,
    pub htk: bool,
    pub norm: Option<Bound<'py, PyAny>>,
}

impl MelArgs<'_> {
    /// The librosa (Slaney or HTK) bank for an `n_fft`-point transform.
    pub fn bank(&self, n_fft: usize) -> PyResult<MelBank> {
        positive("sr", self.sr)?;
        finite("fmin", self.fmin)?;
        let n_mels = count("n_mels", &self.n_mels)?;
        let norm = mel_norm(self.norm.as_ref())?;
        librosa_mel(self.sr, n_fft, n_mels, self.fmin, self.fmax, self.htk, norm).map_err(to_py)
    }
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

/// Decibel conversion options (`power_to_db`'s): `db_ref` `None` is the
/// per-item maximum.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct DbArgs {
    pub db_ref: Option<f32>,
    pub amin: f32,
    pub top_db: Option<f32>,
}

impl DbArgs {
    pub fn params(&self) -> PyResult<DbParams> {
        let r = match self.db_ref {
            None => DbRef::Max,
            Some(v) => DbRef::Value(v),
        };
        DbParams::new(r, self.amin, self.top_db).map_err(to_py)
    }
}
