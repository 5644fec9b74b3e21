//! Welch's power spectral density of a clip: detrended, windowed segments,
//! [`LANES`] at a time through the frame-batched FFT where the segment
//! length allows, else two at a time through one complex FFT.

use std::sync::Arc;

use num_complex::Complex32;

use crate::fastmath::vectorized_wide;
use crate::spectral::lanes::{flat, LaneFft, LANES};
use crate::spectral::{plans::lane_plan, FftScratch, StereoFft};
use crate::window::Window;

/// Per-worker buffers of [`welch_psd`] for one segment length.
pub struct WelchScratch {
    pub(super) window: Vec<f32>,
    pub(super) wss: f64,
    pub(super) pair: StereoFft,
    pub(super) single: FftScratch,
    /// The frame-batched transform, for power-of-two segment lengths.
    pub(super) lanes: Option<WelchLanes>,
}

/// [`LANES`] segments at a time through [`LaneFft`]: their detrended,
/// windowed samples, bin-major spectra and the power sums of each bin.
pub(super) struct WelchLanes {
    fft: Arc<LaneFft>,
    frames: Vec<f32>,
    re: Vec<crate::spectral::lanes::V>,
    im: Vec<crate::spectral::lanes::V>,
    acc: Vec<f64>,
}

impl WelchLanes {
    pub(super) fn new(fft: Arc<LaneFft>) -> Self {
        let (re, im) = fft.make_buffers();
        WelchLanes {
            frames: vec![0.0; LANES * fft.len()],
            acc: vec![0.0; fft.n_bins()],
            fft,
            re,
            im,
        }
    }
}

/// `acc[k] += sum_l re[k, l]^2 + im[k, l]^2` over the [`LANES`] lanes of
/// each bin (squares in f32, their sum in f64).
#[inline(always)]
pub(super) fn add_lane_power(re: &[f32], im: &[f32], acc: &mut [f64]) {
    for ((a, r), i) in acc
        .iter_mut()
        .zip(re.chunks_exact(LANES))
        .zip(im.chunks_exact(LANES))
    {
        let mut v = [0.0f64; LANES];
        for ((v, &r), &i) in v.iter_mut().zip(r).zip(i) {
            *v = (r * r + i * i) as f64;
        }
        *a += v.iter().sum::<f64>();
    }
}

impl WelchScratch {
    pub fn new(n: usize) -> Self {
        let w: Vec<f64> = Window::Hann { periodic: true }
            .coefficients(n)
            .unwrap_or_else(|_| vec![1.0; n])
            .iter()
            .map(|&v| v as f64)
            .collect();
        WelchScratch {
            window: w.iter().map(|&v| v as f32).collect(),
            wss: w.iter().map(|v| v * v).sum(),
            pair: StereoFft::new(n),
            single: FftScratch::new(n),
            lanes: lane_plan(n).map(WelchLanes::new),
        }
    }

    /// The same scratch transforming one segment (or two) at a time.
    pub(super) fn without_lanes(mut self) -> Self {
        self.lanes = None;
        self
    }
}

#[inline(always)]
pub(super) fn detrend_window(out: &mut [f32], seg: &[f32], mean: f32, w: &[f32]) {
    for ((o, &v), &wv) in out.iter_mut().zip(seg).zip(w) {
        *o = (v - mean) * wv;
    }
}

#[inline(always)]
pub(super) fn add_power(acc: &mut [f64], spectrum: &[Complex32]) {
    for (a, c) in acc.iter_mut().zip(spectrum) {
        *a += (c.re * c.re + c.im * c.im) as f64;
    }
}

/// Welch one-sided power spectral density (scipy's defaults for
/// `window='hann'`, `noverlap=nperseg // 2`, `detrend='constant'`,
/// `scaling='density'`); `nperseg` is shortened to the clip length.
/// Segments go two at a time through one complex FFT (see [`StereoFft`]).
#[inline(always)]
pub fn welch_psd(
    x: &[f32],
    sr: f64,
    nperseg: usize,
    scratch: &mut Option<WelchScratch>,
) -> Vec<f64> {
    let mut w = WelchPass::new(x, nperseg, scratch);
    w.advance(x.len());
    w.finish(sr)
}

/// [`welch_psd`] as a pass that can stop and resume: [`WelchPass::advance`]
/// takes the segments that end by a given sample, so a caller walking the
/// clip block by block reads each block once while it is in cache.
pub(super) struct WelchPass<'a> {
    x: &'a [f32],
    s: &'a mut WelchScratch,
    n: usize,
    step: usize,
    n_seg: usize,
    /// Next segment to take.
    k: usize,
    /// The last hop block's sum, reused by the next segment.
    hop_sum: Option<(usize, f64)>,
    acc: Vec<f64>,
}

impl<'a> WelchPass<'a> {
    #[inline(always)]
    pub(super) fn new(x: &'a [f32], nperseg: usize, scratch: &'a mut Option<WelchScratch>) -> Self {
        let n = nperseg.min(x.len()).max(1);
        if scratch.as_ref().is_some_and(|s| s.window.len() != n) {
            *scratch = None;
        }
        let s = scratch.get_or_insert_with(|| WelchScratch::new(n));
        if let Some(l) = s.lanes.as_mut() {
            l.acc.fill(0.0);
        }
        let step = (n - n / 2).max(1);
        let n_seg = if x.len() >= n {
            (x.len() - n) / step + 1
        } else {
            0
        };
        WelchPass {
            x,
            s,
            n,
            step,
            n_seg,
            k: 0,
            hop_sum: None,
            acc: vec![0.0f64; n / 2 + 1],
        }
    }

    /// Sum of hop block `j` (samples `j * step ..`), each computed once.
    #[inline(always)]
    pub(super) fn hop(&mut self, j: usize) -> f64 {
        if let Some((at, v)) = self.hop_sum {
            if at == j {
                return v;
            }
        }
        let v = crate::fastmath::sum_f64(&self.x[j * self.step..(j + 1) * self.step]);
        self.hop_sum = Some((j, v));
        v
    }

    /// Mean of segment `k`: with an even segment length a segment is two
    /// hop blocks.
    #[inline(always)]
    pub(super) fn mean(&mut self, k: usize) -> f32 {
        let sum = if self.n == 2 * self.step {
            let a = self.hop(k);
            a + self.hop(k + 1)
        } else {
            crate::fastmath::sum_f64(&self.x[k * self.step..k * self.step + self.n])
        };
        (sum / self.n as f64) as f32
    }

    /// Take every remaining segment that ends at or before sample `until`.
    #[inline(always)]
    pub(super) fn advance(&mut self, until: usize) {
        if self.s.lanes.is_some() {
            self.advance_lanes(until);
            return;
        }
        let (n, step) = (self.n, self.step);
        while self.k < self.n_seg {
            let k = self.k;
            if k + 1 < self.n_seg {
                if (k + 1) * step + n > until {
                    return;
                }
                let (ma, mb) = (self.mean(k), self.mean(k + 1));
                let x = self.x;
                let (a, b) = self.s.pair.inputs();
                detrend_window(a, &x[k * step..k * step + n], ma, &self.s.window);
                detrend_window(
                    b,
                    &x[(k + 1) * step..(k + 1) * step + n],
                    mb,
                    &self.s.window,
                );
                self.s.pair.transform();
                add_power(&mut self.acc, &self.s.pair.left);
                add_power(&mut self.acc, &self.s.pair.right);
                self.k += 2;
            } else {
                if k * step + n > until {
                    return;
                }
                let m = self.mean(k);
                let x = self.x;
                detrend_window(
                    &mut self.s.single.frame,
                    &x[k * step..k * step + n],
                    m,
                    &self.s.window,
                );
                self.s.single.transform();
                add_power(&mut self.acc, &self.s.single.spectrum);
                self.k += 1;
            }
        }
    }

    /// [`WelchPass::advance`] through the frame-batched transform:
    /// [`LANES`] segments per block (blocks start at multiples of [`LANES`],
    /// the last one may be shorter), each segment's power added to its
    /// bin's sum. Kept out of line: the clip pass it is called from is
    /// compiled for AVX2 and does not want this body inlined into it.
    #[inline(never)]
    pub(super) fn advance_lanes(&mut self, until: usize) {
        let (n, step) = (self.n, self.step);
        while self.k < self.n_seg {
            let k0 = self.k;
            let cnt = (self.n_seg - k0).min(LANES);
            if (k0 + cnt - 1) * step + n > until {
                return;
            }
            let mut means = [0.0f32; LANES];
            for (i, m) in means.iter_mut().enumerate().take(cnt) {
                *m = self.mean(k0 + i);
            }
            let x = self.x;
            let s = &mut *self.s;
            let Some(l) = s.lanes.as_mut() else {
                return;
            };
            let window = &s.window;
            let frames = &mut l.frames;
            vectorized_wide(
                #[inline(always)]
                || {
                    for (i, buf) in frames.chunks_exact_mut(n).take(cnt).enumerate() {
                        let at = (k0 + i) * step;
                        detrend_window(buf, &x[at..at + n], means[i], window);
                    }
                },
            );
            let mut frames: [&[f32]; LANES] = [&[]; LANES];
            for (f, buf) in frames.iter_mut().zip(l.frames.chunks_exact(n)) {
                *f = buf;
            }
            l.fft.forward(&frames[..cnt], &mut l.re, &mut l.im);
            // Lanes past `cnt` transform zeros: they add exact zeros.
            let (re, im, acc) = (flat(&l.re), flat(&l.im), &mut l.acc);
            vectorized_wide(
                #[inline(always)]
                || add_lane_power(re, im, acc),
            );
            self.k += cnt;
        }
    }

    /// The density from the segments taken.
    #[inline(always)]
    pub(super) fn finish(self, sr: f64) -> Vec<f64> {
        let (n, n_seg, mut acc) = (self.n, self.k, self.acc);
        if let Some(l) = &self.s.lanes {
            acc.copy_from_slice(&l.acc);
        }
        let scale = if self.s.wss > 0.0 && n_seg > 0 {
            1.0 / (sr * self.s.wss * n_seg as f64)
        } else {
            0.0
        };
        let last = if n.is_multiple_of(2) {
            n / 2
        } else {
            n / 2 + 1
        };
        for (k, a) in acc.iter_mut().enumerate() {
            *a *= scale;
            if k >= 1 && k < last {
                *a *= 2.0;
            }
        }
        acc
    }
}
