//! agl-core: the batch-parallel kernels of agl-fast, in pure Rust.
//!
//! One module per feature family; every kernel validates its input and
//! returns [`AglError`] instead of panicking.

pub mod batch;
pub mod convolve;
pub mod db;
pub mod error;
pub mod features;
pub mod mel;
pub mod parallel;
pub mod quality;
pub mod room;
pub mod stft;
pub mod window;

pub use error::{AglError, Result};
