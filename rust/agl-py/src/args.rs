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

/// Padding modes numpy applies to the signal before a centred transform
/// (the core pads with `constant` and `reflect` itself).
pub const NUMPY_PAD_MODES: [&str; 4] = ["edge", "linear_ramp", "symmetric", "empty"];

/// A flag: `True`/`False` or a numpy bool, never a truth-tested value.
fn flag(name: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if is_bool(v) {
        return v.is_truthy();
    }
    Err(param_err(format!(
        "{name} must be True or False, got {name}={}",
        show(v)
    )))
}

/// A `repr` for messages, cut after 80 characters.
fn show(v: &Bound<'_, PyAny>) -> String {
    let r = repr(v);
    match r.char_indices().nth(80) {
        Some((cut, _)) => format!("{}... ({} characters)", &r[..cut], r.chars().count()),
        None => r,
    }
}

/// The framing of a short-time transform, built once from the Python
/// values (`agl_fast.dsp.StftParams` is its public face, which resolves
/// librosa's keywords) and checked once, by the core's
/// [`StftParams::resolve`]. The kernels borrow it as it is.
#[pyclass(frozen, subclass, module = "agl_fast._native")]
pub struct Framing {
    params: StftParams,
    /// The window as given (a name, a tuple, a function or an array).
    window: Py<PyAny>,
    /// A computed window's coefficients in double precision.
    coefficients: Option<Vec<f64>>,
    /// The padding mode as given.
    pad_mode: String,
    /// Whether numpy pads the signal (`center` and a mode of
    /// [`NUMPY_PAD_MODES`]): the kernels refuse the framing until
    /// [`Framing::padded`] stands for it.
    outside: bool,
}

impl Framing {
    /// The core parameters a kernel runs with: refused while a numpy
    /// mode is still to be applied to the signal (see `padded`), with the
    /// core's message naming the modes it applies itself.
    pub fn kernel(&self) -> PyResult<&StftParams> {
        if self.outside {
            PadMode::from_name(&self.pad_mode).map_err(to_py)?;
        }
        Ok(&self.params)
    }

    /// The window of the float64 transform: the computed coefficients, or
    /// the named window in double precision.
    pub fn window_f64(&self) -> PyResult<Vec<f64>> {
        match &self.coefficients {
            Some(w) => Ok(w.clone()),
            None => (self.params.window)
                .coefficients_f64(self.params.win_length)
                .map_err(to_py),
        }
    }
}

/// `pad_mode`: the mode the core applies, and whether numpy applies it.
fn pad_mode(v: &Bound<'_, PyAny>) -> PyResult<(String, PadMode, bool)> {
    let Ok(name) = v.extract::<String>() else {
        return Err(param_err(format!(
            "pad_mode must be a string, got pad_mode={}",
            show(v)
        )));
    };
    if let Ok(mode) = PadMode::from_name(&name) {
        return Ok((name, mode, false));
    }
    if NUMPY_PAD_MODES.contains(&name.as_str()) {
        return Ok((name, PadMode::Constant, true));
    }
    Err(param_err(format!(
        "pad_mode={} is not supported for the STFT; use one of constant, reflect, {}",
        show(v),
        NUMPY_PAD_MODES.join(", ")
    )))
}

/// `coefficients(win_length)`: a 1-D float64 array of `win_length`
/// values, kept as they are for the float64 transform and rounded once for
/// the float32 one.
fn computed_window(f: &Bound<'_, PyAny>, length: usize) -> PyResult<(Window, Vec<f64>)> {
    let arr: PyReadonlyArray1<f64> = f
        .call1((length,))?
        .extract()
        .map_err(|_| param_err("window coefficients must be a 1-D float64 array"))?;
    let w = arr.as_array().to_vec();
    if w.len() != length {
        return Err(param_err(format!(
            "window size mismatch: {} != {length}",
            w.len()
        )));
    }
    let single: Vec<f32> = w.iter().map(|&x| x as f32).collect();
    if !single.iter().all(|x| x.is_finite()) {
        return Err(param_err("window has coefficients beyond float32's range"));
    }
    Ok((Window::Custom(single), w))
}

#[pymethods]
impl Framing {
    /// `window` is a window name the core computes, or, with
    /// `coefficients`, anything: `coefficients(win_length)` then gives its
    /// float64 values once the lengths are checked.
    #[new]
    #[pyo3(signature = (n_fft, hop_length, win_length, window, center, pad_mode, coefficients=None))]
    fn new(
        n_fft: &Bound<'_, PyAny>,
        hop_length: &Bound<'_, PyAny>,
        win_length: &Bound<'_, PyAny>,
        window: &Bound<'_, PyAny>,
        center: &Bound<'_, PyAny>,
        pad_mode: &Bound<'_, PyAny>,
        coefficients: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let n = count("n_fft", n_fft)?;
        let hop = opt_count("hop_length", Some(hop_length))?;
        let win = opt_count("win_length", Some(win_length))?;
        let centred = flag("center", center)?;
        let (mode_name, mode, numpy_mode) = self::pad_mode(pad_mode)?;
        let named = match coefficients {
            None => self::window(window)?,
            Some(_) => Window::Rectangular,
        };
        let mut params = StftParams::resolve(n, hop, win, named, centred, mode).map_err(to_py)?;
        let computed = match coefficients {
            None => None,
            Some(f) => {
                let (w, w64) = computed_window(f, params.win_length)?;
                params.window = w;
                Some(w64)
            }
        };
        Ok(Framing {
            params,
            window: window.clone().unbind(),
            coefficients: computed,
            pad_mode: mode_name,
            outside: centred && numpy_mode,
        })
    }

    /// The framing of the signal once numpy has padded it: not centred,
    /// nothing more to pad.
    fn padded(&self, py: Python<'_>) -> Self {
        let mut params = self.params.clone();
        params.center = false;
        params.pad_mode = PadMode::Constant;
        Framing {
            params,
            window: self.window.clone_ref(py),
            coefficients: self.coefficients.clone(),
            pad_mode: "constant".to_string(),
            outside: false,
        }
    }

    /// The numpy mode to pad the signal with before the transform, if any.
    #[getter]
    fn outside_pad(&self) -> Option<&str> {
        self.outside.then_some(self.pad_mode.as_str())
    }

    /// Frames of a signal of `n_samples` samples (librosa's count).
    fn n_frames(&self, n_samples: &Bound<'_, PyAny>) -> PyResult<usize> {
        let len = count("n_samples", n_samples)?;
        self.params.n_frames(len).map_err(to_py)
    }

    #[getter]
    fn n_fft(&self) -> usize {
        self.params.n_fft
    }

    #[getter]
    fn hop_length(&self) -> usize {
        self.params.hop_length
    }

    #[getter]
    fn win_length(&self) -> usize {
        self.params.win_length
    }

    #[getter]
    fn window(&self, py: Python<'_>) -> Py<PyAny> {
        self.window.clone_ref(py)
    }

    #[getter]
    fn center(&self) -> bool {
        self.params.center
    }

    #[getter]
    fn pad_mode(&self) -> &str {
        &self.pad_mode
    }

    #[classattr]
    #[pyo3(name = "NATIVE_PAD_MODES")]
    fn native_pad_modes() -> (&'static str, &'static str) {
        ("constant", "reflect")
    }

    #[classattr]
    #[pyo3(name = "NUMPY_PAD_MODES")]
    fn numpy_pad_modes() -> [&'static str; 4] {
        NUMPY_PAD_MODES
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
