//! The block STFT: [`LANES`] frames of one signal windowed and transformed
//! at once on the frame-batched FFT ([`LaneFft`]).

use std::sync::Arc;

use super::lanes::{Frames, LaneFft, LANES, V};
use super::stft::{Source, StftPlan};
use crate::error::{all_finite, AglError, Result};

/// What [`LaneStft::run`] leaves: the one-sided spectra in `re`, `im`;
/// their power in the given vectors; or the half-length transforms before
/// the split.
enum Spectra<'a> {
    Bins,
    Power(&'a mut [V]),
    Half,
}

/// Per-worker buffers of the block STFT: up to [`LANES`] windowed frames of
/// one signal and their one-sided spectra, bin-major (`re[k].0[i]` is bin
/// `k` of frame `t0 + i`).
pub struct LaneStft {
    fft: Arc<LaneFft>,
    frames: Vec<f32>,
    pub re: Vec<V>,
    pub im: Vec<V>,
}

impl LaneStft {
    pub fn new(fft: Arc<LaneFft>) -> Self {
        let (re, im) = fft.make_buffers();
        LaneStft {
            frames: vec![0.0; LANES * fft.len()],
            fft,
            re,
            im,
        }
    }

    /// Spectra of frames `t0 .. t0 + n` of `src` (`n <= LANES`; the other
    /// lanes hold zeros). A frame that lies inside a plain signal is read
    /// where it is, the window applied as it is loaded; the others (padding,
    /// pre-emphasis, gain) are windowed into a buffer first.
    ///
    /// The samples of [`block_span`] are checked for NaN and infinity first
    /// (an [`AglError::NonFinite`] with the signal's first bad index in that
    /// span): the blocks of a signal partition it, so a batch whose
    /// finiteness was left to this engine ([`super::check_signal_lengths`]) has
    /// every sample checked once, as it enters the cache for the transform,
    /// instead of in a separate pass over memory. See [`super::SpectralBatch`].
    pub fn block(&mut self, plan: &StftPlan, src: &Source<'_>, t0: usize, n: usize) -> Result<()> {
        self.run(plan, src, t0, n, Spectra::Bins)
    }

    /// [`LaneStft::block`] reduced to `|X|^2` into `power` (`n_fft / 2 + 1`
    /// vectors; see [`LaneFft::forward_power`]); `re` and `im` are left as
    /// scratch.
    pub fn block_power(
        &mut self,
        plan: &StftPlan,
        src: &Source<'_>,
        t0: usize,
        n: usize,
        power: &mut [V],
    ) -> Result<()> {
        self.run(plan, src, t0, n, Spectra::Power(power))
    }

    /// [`LaneStft::block`] without the split: `re[..n_fft / 2]` and
    /// `im[..n_fft / 2]` hold the half-length transforms, for
    /// [`LaneFft::split_pair`] (see [`LaneStft::fft`]).
    pub fn transform(
        &mut self,
        plan: &StftPlan,
        src: &Source<'_>,
        t0: usize,
        n: usize,
    ) -> Result<()> {
        self.run(plan, src, t0, n, Spectra::Half)
    }

    /// The plan this engine runs.
    pub fn fft(&self) -> &LaneFft {
        &self.fft
    }

    fn run(
        &mut self,
        plan: &StftPlan,
        src: &Source<'_>,
        t0: usize,
        n: usize,
        spectra: Spectra<'_>,
    ) -> Result<()> {
        let span = block_span(plan, src, t0, n);
        if let Some(x) = src.samples.get(span.clone()) {
            if !all_finite(x) {
                let index = span.start + x.iter().position(|v| !v.is_finite()).unwrap_or(0);
                return Err(AglError::NonFinite {
                    what: "audio buffer".to_string(),
                    index,
                });
            }
        }
        let len = self.fft.len();
        let n = n.min(LANES);
        let plain = src.preemphasis.is_none() && src.gain == 1.0;
        let hop = plan.params.hop_length;
        let pad = plan.params.pad();
        let inside = |t: usize| {
            let start = (t * hop).checked_sub(pad)?;
            (start + len <= src.samples.len()).then_some(start)
        };
        let buf = &mut self.frames;
        crate::fastmath::vectorized_wide(
            #[inline(always)]
            || {
                for (i, b) in buf.chunks_exact_mut(len).take(n).enumerate() {
                    if !(plain && inside(t0 + i).is_some()) {
                        plan.window_frame(src, t0 + i, b);
                    }
                }
            },
        );
        let ones = self.fft.ones();
        let mut frames = Frames {
            src: [ones; LANES],
            win: [ones; LANES],
            windowed: false,
        };
        for (i, b) in self.frames.chunks_exact(len).take(n).enumerate() {
            match inside(t0 + i) {
                Some(start) if plain => {
                    frames.src[i] = &src.samples[start..start + len];
                    frames.win[i] = &plan.window;
                    frames.windowed = true;
                }
                _ => frames.src[i] = b,
            }
        }
        // Prefetch the samples of the next two blocks that this one does not
        // read (measured on 1024-sample frames at hop 320, 16 frames a
        // block: 12.3 us a block from memory, 10.7 prefetching one block
        // ahead, 10.0 two blocks ahead, 8.5-9.0 from cache).
        if n > 0 {
            let first = |t: usize| (t * hop).saturating_sub(pad).min(src.samples.len());
            let last = |t: usize| (t * hop + len).saturating_sub(pad).min(src.samples.len());
            let ahead = last(t0 + n - 1).max(first(t0 + n))..last(t0 + 3 * n - 1);
            if let Some(next) = src.samples.get(ahead) {
                crate::spectral::lanes::prefetch(next);
            }
        }
        match spectra {
            Spectra::Power(p) => self
                .fft
                .forward_power(&frames, n, &mut self.re, &mut self.im, p),
            Spectra::Bins => self
                .fft
                .forward_windowed(&frames, n, &mut self.re, &mut self.im),
            Spectra::Half => self.fft.transform(&frames, n, &mut self.re, &mut self.im),
        }
        Ok(())
    }
}

/// The samples of `src` that the block of frames `t0 .. t0 + n` checks
/// (see [`LaneStft::block`]): from where frame `t0` starts in the signal
/// (before padding) to where frame `t0 + n` would start, clamped to the
/// samples; the block holding the last frame takes the rest. Consecutive
/// blocks of one signal's frames therefore partition all of its samples,
/// whatever the padding, hop or window, and each span lies at the front of
/// what its block reads.
pub fn block_span(
    plan: &StftPlan,
    src: &Source<'_>,
    t0: usize,
    n: usize,
) -> std::ops::Range<usize> {
    let len = src.samples.len();
    let hop = plan.params.hop_length;
    let pad = plan.params.pad();
    let at = |t: usize| t.saturating_mul(hop).saturating_sub(pad).min(len);
    let last = plan
        .n_frames(src.len())
        .map_or(true, |total| t0 + n >= total);
    at(t0)..if last { len } else { at(t0 + n) }
}
