//! Frames one at a time, two to a complex FFT: the two channels of a stereo
//! frame ([`StereoFft`]) or two consecutive mono frames ([`PairFft`]).

use std::sync::Arc;

use num_complex::Complex32;

use super::plans::cfft_plan;
use super::stft::{FftScratch, Source, StftPlan};

/// Two-channel frame transform. When the two windowed frames have energies
/// within 60 dB of each other, both spectra come from one complex FFT of
/// `left + i right` (split by conjugate symmetry), which costs about as much
/// as one real FFT; the quieter channel's error then stays below about
/// `1e-4` of its own level. Otherwise (a silent or far quieter channel) each
/// channel gets its own real FFT, so a silent channel stays exactly zero.
pub struct StereoFft {
    real: FftScratch,
    fl: Vec<f32>,
    fr: Vec<f32>,
    z: Vec<Complex32>,
    work: Vec<Complex32>,
    cplx: Arc<dyn rustfft::Fft<f32>>,
    /// One-sided spectrum of the left channel after [`StereoFft::frame`].
    pub left: Vec<Complex32>,
    /// One-sided spectrum of the right channel.
    pub right: Vec<Complex32>,
}

/// Largest energy ratio between the channels for the packed transform.
const PACKED_MAX_RATIO: f32 = 1e6;

impl StereoFft {
    pub fn new(n_fft: usize) -> Self {
        let cplx = cfft_plan(n_fft);
        let nf = n_fft / 2 + 1;
        StereoFft {
            real: FftScratch::new(n_fft),
            fl: vec![0.0; n_fft],
            fr: vec![0.0; n_fft],
            z: vec![Complex32::new(0.0, 0.0); n_fft],
            work: vec![Complex32::new(0.0, 0.0); cplx.get_inplace_scratch_len()],
            cplx,
            left: vec![Complex32::new(0.0, 0.0); nf],
            right: vec![Complex32::new(0.0, 0.0); nf],
        }
    }

    /// Spectra of frame `t` of both channels into `self.left`, `self.right`.
    pub fn frame(&mut self, plan: &StftPlan, l: &Source<'_>, r: &Source<'_>, t: usize) {
        self.frames(plan, l, t, r, t)
    }

    /// Spectra of frame `tl` of `l` and frame `tr` of `r`.
    pub fn frames(
        &mut self,
        plan: &StftPlan,
        l: &Source<'_>,
        tl: usize,
        r: &Source<'_>,
        tr: usize,
    ) {
        plan.window_frame(l, tl, &mut self.fl);
        plan.window_frame(r, tr, &mut self.fr);
        self.transform();
    }

    /// The two frame buffers (`n_fft` samples each) that
    /// [`StereoFft::transform`] reads.
    pub fn inputs(&mut self) -> (&mut [f32], &mut [f32]) {
        (&mut self.fl, &mut self.fr)
    }

    /// Spectra of the frames in the two input buffers into `self.left` and
    /// `self.right` (packed into one complex FFT when their energies allow).
    pub fn transform(&mut self) {
        crate::fastmath::vectorized(
            #[inline(always)]
            || self.transform_impl(),
        )
    }

    #[inline(always)]
    fn transform_impl(&mut self) {
        let n = self.fl.len();
        let nf = n / 2 + 1;
        let (el, er) = (energy(&self.fl), energy(&self.fr));
        let packed = el > 0.0
            && er > 0.0
            && el.is_finite()
            && er.is_finite()
            && el <= er * PACKED_MAX_RATIO
            && er <= el * PACKED_MAX_RATIO;
        if !packed {
            for (buf, out) in [(&self.fl, &mut self.left), (&self.fr, &mut self.right)] {
                self.real.frame.copy_from_slice(buf);
                self.real.transform();
                out.copy_from_slice(&self.real.spectrum[..nf]);
            }
            return;
        }
        for ((z, &a), &b) in self.z.iter_mut().zip(&self.fl).zip(&self.fr) {
            *z = Complex32::new(a, b);
        }
        self.cplx.process_with_scratch(&mut self.z, &mut self.work);
        // L[k] = (Z[k] + conj Z[N-k]) / 2, R[k] = (Z[k] - conj Z[N-k]) / 2i.
        let z = &self.z;
        let split = |zk: Complex32, zn: Complex32| {
            (
                Complex32::new(0.5 * (zk.re + zn.re), 0.5 * (zk.im - zn.im)),
                Complex32::new(0.5 * (zk.im + zn.im), 0.5 * (zn.re - zk.re)),
            )
        };
        (self.left[0], self.right[0]) = split(z[0], z[0]);
        let (left, right) = (&mut self.left[1..nf], &mut self.right[1..nf]);
        // Bins k = 1..nf pair with N - k = N-1 down to N+1-nf.
        let pairs = z[1..nf].iter().zip(z[n + 1 - nf..n].iter().rev());
        for ((lo, ro), (&zk, &zn)) in left.iter_mut().zip(right.iter_mut()).zip(pairs) {
            (*lo, *ro) = split(zk, zn);
        }
    }
}

/// Mono frames two at a time: frames `t` and `t + 1` of a signal share one
/// complex FFT (see [`StereoFft`]); the second spectrum is kept for the next
/// call. Frames must be requested in increasing order within an item for the
/// saving to apply; any other order is still correct.
pub struct PairFft {
    pair: StereoFft,
    single: FftScratch,
    next: Option<(usize, usize)>,
    /// The spectrum of the frame asked for last.
    pub spectrum: Vec<Complex32>,
}

impl PairFft {
    pub fn new(n_fft: usize) -> Self {
        PairFft {
            pair: StereoFft::new(n_fft),
            single: FftScratch::new(n_fft),
            next: None,
            spectrum: vec![Complex32::new(0.0, 0.0); n_fft / 2 + 1],
        }
    }

    /// One-sided spectrum of frame `t` of `src` (item `item`, which has
    /// `n_frames` frames) into `self.spectrum`.
    pub fn frame(
        &mut self,
        plan: &StftPlan,
        src: &Source<'_>,
        item: usize,
        t: usize,
        n_frames: usize,
    ) {
        let nf = self.spectrum.len();
        if self.next == Some((item, t)) {
            self.spectrum.copy_from_slice(&self.pair.right);
            self.next = None;
        } else if t + 1 < n_frames {
            self.pair.frames(plan, src, t, src, t + 1);
            self.spectrum.copy_from_slice(&self.pair.left);
            self.next = Some((item, t + 1));
        } else {
            plan.transform_frame(src, t, &mut self.single);
            self.spectrum.copy_from_slice(&self.single.spectrum[..nf]);
            self.next = None;
        }
    }
}

/// Sum of squares with eight independent partial sums (vectorises).
#[inline]
fn energy(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for j in 0..8 {
            acc[j] += c[j] * c[j];
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    acc.iter().sum::<f32>() + tail
}
