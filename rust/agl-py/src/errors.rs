//! The one mapping from core errors to the Python exception tree defined in
//! `agl_fast.exceptions`.

use agl_core::AglError;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

pyo3::import_exception!(agl_fast.exceptions, ParameterError);
pyo3::import_exception!(agl_fast.exceptions, ShapeError);
pyo3::import_exception!(agl_fast.exceptions, NonFiniteError);
pyo3::import_exception!(agl_fast.exceptions, AudioDecodeError);
pyo3::import_exception!(agl_fast.exceptions, AglIOError);
pyo3::import_exception!(agl_fast.exceptions, AudioFileNotFoundError);
pyo3::import_exception!(agl_fast.exceptions, ResourceLimitError);
pyo3::import_exception!(agl_fast.exceptions, InternalError);

/// Convert a core error into the matching Python exception.
pub fn to_py(e: AglError) -> PyErr {
    let msg = e.to_string();
    match e {
        AglError::InvalidParameter { .. } => ParameterError::new_err(msg),
        AglError::Shape(_) => ShapeError::new_err(msg),
        AglError::NonFinite { .. } => NonFiniteError::new_err(msg),
        AglError::Decode { .. } => AudioDecodeError::new_err(msg),
        AglError::NotFound { .. } => AudioFileNotFoundError::new_err(msg),
        AglError::Io(_) => AglIOError::new_err(msg),
        AglError::Memory { .. } => ResourceLimitError::new_err(msg),
        AglError::Cancelled => PyKeyboardInterrupt::new_err(msg),
        _ => ParameterError::new_err(msg),
    }
}

/// A `ParameterError` with the given message (for binding-side checks).
pub fn param_err(msg: impl Into<String>) -> PyErr {
    ParameterError::new_err(msg.into())
}

/// A `ShapeError` with the given message.
pub fn shape_err(msg: impl Into<String>) -> PyErr {
    ShapeError::new_err(msg.into())
}

/// An `InternalError` (a bug, such as a panic in the core), whichever
/// gateway path caught it.
pub fn internal_err(msg: impl Into<String>) -> PyErr {
    InternalError::new_err(msg.into())
}
