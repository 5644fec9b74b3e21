//! The error type shared by every kernel of the core.
//!
//! Messages say what was given and what is allowed, e.g.
//! `n_fft must be >= win_length, got n_fft=512, win_length=800`.

use std::fmt;

/// Every failure a kernel can report. Kernels never panic on user input.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum AglError {
    /// A parameter is outside its allowed range.
    InvalidParameter {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// An input buffer has the wrong shape or length.
    Shape(String),
    /// An input buffer holds NaN or infinite values.
    NonFinite { what: String, index: usize },
    /// Audio data could not be decoded.
    Decode { path: String, reason: String },
    /// An input file does not exist (`path` names it).
    NotFound { path: String },
    /// An I/O failure.
    Io(String),
    /// An allocation the allocator refused, or one above a resource limit
    /// (`bytes` is what it would have taken).
    Memory { what: String, bytes: u64 },
    /// The operation was interrupted (Ctrl-C) before it finished.
    Cancelled,
}

impl AglError {
    /// Shorthand for [`AglError::InvalidParameter`].
    pub fn param(name: &'static str, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        AglError::InvalidParameter {
            name,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for AglError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AglError::InvalidParameter {
                name,
                value,
                reason,
            } => write!(f, "{name} {reason}, got {name}={value}"),
            AglError::Shape(msg) => f.write_str(msg),
            AglError::NonFinite { what, index } => write!(
                f,
                "{what} is not finite everywhere: first NaN or Inf at sample {index}"
            ),
            AglError::Decode { path, reason } => write!(f, "cannot decode {path}: {reason}"),
            AglError::NotFound { path } => write!(f, "file not found: {path}"),
            AglError::Io(msg) => f.write_str(msg),
            AglError::Memory { what, bytes } => write!(
                f,
                "cannot allocate {bytes} bytes ({:.1} GiB) for {what}",
                *bytes as f64 / (1u64 << 30) as f64
            ),
            AglError::Cancelled => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for AglError {}

/// Reserve room for `additional` more values in `v`, or fail with
/// [`AglError::Memory`] naming `what` instead of aborting the process.
pub fn try_grow<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<()> {
    v.try_reserve(additional).map_err(|_| AglError::Memory {
        what: what.to_string(),
        bytes: (v.len() as u64)
            .saturating_add(additional as u64)
            .saturating_mul(std::mem::size_of::<T>() as u64),
    })
}

/// A zero-filled vector of `n` values, or [`AglError::Memory`].
pub fn try_zeroed<T: Clone + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_grow(&mut v, n, what)?;
    v.resize(n, T::default());
    Ok(v)
}

/// Result alias used across the core.
pub type Result<T> = std::result::Result<T, AglError>;

/// Whether every value of `x` is finite (no NaN, no infinity).
#[inline]
pub fn all_finite(x: &[f32]) -> bool {
    // `v * 0` is 0 for finite v and NaN otherwise, so this sum is finite
    // exactly when every sample is: one pass that vectorises (32 lanes, four
    // independent AVX2 chains).
    #[inline(always)]
    fn zero_sum(x: &[f32]) -> f32 {
        let mut acc = [0.0f32; 32];
        let mut chunks = x.chunks_exact(32);
        for c in &mut chunks {
            for j in 0..32 {
                acc[j] += c[j] * 0.0;
            }
        }
        let tail: f32 = chunks.remainder().iter().map(|v| v * 0.0).sum();
        acc.iter().sum::<f32>() + tail
    }
    crate::fastmath::vectorized(
        #[inline(always)]
        || zero_sum(x),
    )
    .is_finite()
}

/// Fail with [`AglError::NonFinite`] if `x` holds a NaN or an infinity
/// (the index is searched only on failure).
pub fn check_finite(x: &[f32], what: &str) -> Result<()> {
    if all_finite(x) {
        return Ok(());
    }
    match x.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(index) => Err(AglError::NonFinite {
            what: what.to_string(),
            index,
        }),
    }
}
