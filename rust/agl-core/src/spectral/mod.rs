//! The spectral engine: every short-time Fourier transform of the crate.
//!
//! - [`stft`]: librosa's parameters, framing and padding ([`StftParams`],
//!   [`StftPlan`], [`Source`]), the input checks and the complex STFT.
//! - [`run_blockwise`]: the block engine's batch driver.
//! - [`engine`]: which transform runs a batch ([`Engine`]), chosen in one
//!   place; features state their work for each engine
//!   ([`SpectralBatch::run`]).
//! - [`lanes`]: the frame-batched FFT, [`LANES`](lanes::LANES) frames at
//!   once, and [`LaneStft`], its block STFT.
//! - [`PairFft`], [`StereoFft`]: frames one at a time, two to a complex FFT.
//! - [`rfft`]: the one-frame real FFT through a half-length complex FFT.
//! - [`stft64`]: the float64 path.
//! - [`plans`]: the one plan cache, of every kind and both precisions.
//!
//! Dependencies point one way: `plans` builds on `lanes` and `rfft`
//! (which takes its complex plan from `plans`), the engines on `plans`,
//! and `stft` on the engines.

mod blocks;
pub mod engine;
mod lane_stft;
pub mod lanes;
mod pair;
pub mod plans;
pub mod rfft;
pub mod stft;
pub mod stft64;

pub use blocks::run_blockwise;
pub use engine::{Engine, SpectralBatch};
pub use lane_stft::{block_span, LaneStft};
pub use pair::{PairFft, StereoFft};
pub use stft::{
    check_mono, check_signal_lengths, check_signals, default_hop_length, reflect_index, stft_batch,
    FftScratch, PadMode, Source, StftParams, StftPlan, MAX_N_FFT, MAX_POWER,
};
