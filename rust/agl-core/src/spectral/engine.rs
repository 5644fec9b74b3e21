//! The engine that runs a batch's transforms, chosen in one place.
//!
//! A batch of f32 signals runs on one of two engines, chosen by `n_fft`:
//! [`Engine::Lanes`], [`LANES`](super::lanes::LANES) frames per
//! transform, one per SIMD lane ([`super::LaneStft`]), for the lengths
//! [`LaneFft`] takes; else [`Engine::Pairs`], frames one at a time, two
//! mono frames (or the two channels of a stereo frame) sharing one complex
//! FFT ([`super::PairFft`], [`super::StereoFft`]). The float64 path
//! ([`super::stft64`]) is chosen by the caller's dtype, not here. A
//! feature states its work for both engines ([`SpectralBatch::run`]); it
//! never chooses.

use std::sync::Arc;

use super::lanes::LaneFft;
use super::plans::lane_plan;
use crate::error::{AglError, Result};

/// The f32 engines (see the module notes).
#[derive(Clone)]
pub enum Engine {
    /// Frame-batched transforms with this plan.
    Lanes(Arc<LaneFft>),
    /// One (or a pair of) frame(s) at a time.
    Pairs,
}

impl Engine {
    /// The engine for frames of `n_fft` samples.
    pub fn for_n_fft(n_fft: usize) -> Engine {
        lane_plan(n_fft).map_or(Engine::Pairs, Engine::Lanes)
    }
}

/// A batch bound to its engine, and the one protocol by which the batch's
/// input is checked for it. `check(finite)` validates the batch, reading
/// every sample for NaN and infinity only when `finite`:
/// - on [`Engine::Pairs`], the whole check runs up front;
/// - on [`Engine::Lanes`], only the part that does not read the samples
///   runs up front; finiteness is left to [`super::LaneStft`], which
///   checks each block's samples as they enter the cache
///   ([`super::LaneStft::block`]), and a [`AglError::NonFinite`] from the
///   run is turned into the up-front check's error.
pub struct SpectralBatch<C> {
    engine: Engine,
    check: C,
}

impl<C: Fn(bool) -> Result<()>> SpectralBatch<C> {
    /// The engine for `n_fft`, with the batch checked for it (above).
    pub fn new(n_fft: usize, check: C) -> Result<Self> {
        let engine = Engine::for_n_fft(n_fft);
        check(matches!(engine, Engine::Pairs))?;
        Ok(SpectralBatch { engine, check })
    }

    /// The engine this batch runs on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Run the batch: `lanes` on [`Engine::Lanes`] (its error on a bad
    /// sample replaced by the whole check's, so the error names the first
    /// bad item and sample whatever the thread count), else `pairs`.
    pub fn run<T>(
        &self,
        lanes: impl FnOnce(&Arc<LaneFft>) -> Result<T>,
        pairs: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        match &self.engine {
            Engine::Lanes(fft) => match lanes(fft) {
                Err(e @ AglError::NonFinite { .. }) => {
                    (self.check)(true)?;
                    Err(e)
                }
                other => other,
            },
            Engine::Pairs => pairs(),
        }
    }
}
