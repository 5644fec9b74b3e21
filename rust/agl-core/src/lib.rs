//! agl-core: the batch-parallel kernels of agl-fast, in pure Rust.
//!
//! One module per feature family; every kernel validates its input and
//! returns [`AglError`] instead of panicking.

// Parameter checks are written `!(x > 0.0)` on purpose: NaN fails them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod audio;
pub mod batch;
pub mod convolve;
pub mod db;
pub mod error;
pub mod fastmath;
pub mod features;
pub mod fingerprint;
pub mod geo;
pub mod mel;
pub mod parallel;
pub mod pcen;
pub mod polyphase;
pub mod quality;
pub mod resample;
pub mod room;
pub mod spectral;
#[cfg(test)]
mod testutil;
pub mod window;

pub use error::{AglError, Result};
