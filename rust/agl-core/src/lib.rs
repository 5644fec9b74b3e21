//! agl-core: the batch-parallel kernels of agl-fast, in pure Rust.
//!
//! One module per feature family; every kernel validates its input and
//! returns [`AglError`] instead of panicking.

pub mod audio;
pub mod batch;
pub mod db;
pub mod error;
pub mod features;
pub mod mel;
pub mod parallel;
pub mod resample;
pub mod stft;
pub mod window;

pub use error::{AglError, Result};
