//! Short-time Fourier transform with librosa's framing and padding.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use num_complex::Complex32;

use crate::batch::{run_blockwise, run_framewise, FrameOutput, Layout, RunOpts};
use crate::error::{all_finite, check_finite, AglError, Result};
use crate::lanefft::{Frames, LaneFft, LANES, V};
use crate::parallel::Cancel;
pub use crate::rfft::RealFft;
pub use crate::stft64::{stft_f64_batch, stft_f64_into, stft_f64_len};
use crate::window::{pad_center, Window};

/// Largest FFT (and frame) length accepted: 2^24 samples, about six minutes
/// at 48 kHz, so a plan or a frame buffer never reaches gigabytes.
pub const MAX_N_FFT: usize = 1 << 24;

/// Padding applied at both ends when `center` is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// numpy's `reflect` (mirror without repeating the edge sample).
    Reflect,
    /// Zeros (librosa's default since 0.10).
    Constant,
}

impl PadMode {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "reflect" => Ok(PadMode::Reflect),
            "constant" => Ok(PadMode::Constant),
            other => Err(AglError::param(
                "pad_mode",
                other,
                "must be 'reflect' or 'constant'",
            )),
        }
    }
}

/// The hop librosa takes when none is given: a quarter of the window
/// (`win_length // 4`; the caller checks that it is at least 1).
pub fn default_hop_length(win_length: usize) -> usize {
    win_length / 4
}

/// STFT parameters, librosa names and meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct StftParams {
    pub n_fft: usize,
    pub hop_length: usize,
    pub win_length: usize,
    pub window: Window,
    pub center: bool,
    pub pad_mode: PadMode,
}

impl StftParams {
    /// librosa defaults for a given `n_fft`: hop `n_fft / 4`, periodic Hann
    /// of length `n_fft`, centred, constant padding.
    pub fn new(n_fft: usize) -> Self {
        StftParams {
            n_fft,
            hop_length: default_hop_length(n_fft).max(1),
            win_length: n_fft,
            window: Window::Hann { periodic: true },
            center: true,
            pad_mode: PadMode::Constant,
        }
    }

    /// librosa's framing, its dependent defaults resolved and the whole
    /// checked: `win_length` `None` is `n_fft`, `hop_length` `None` is
    /// `win_length / 4` ([`default_hop_length`]), which must then be at
    /// least 1.
    pub fn resolve(
        n_fft: usize,
        hop_length: Option<usize>,
        win_length: Option<usize>,
        window: Window,
        center: bool,
        pad_mode: PadMode,
    ) -> Result<Self> {
        let win_length = win_length.unwrap_or(n_fft);
        let default_hop = default_hop_length(win_length);
        let p = StftParams {
            n_fft,
            hop_length: hop_length.unwrap_or(default_hop.max(1)),
            win_length,
            window,
            center,
            pad_mode,
        };
        p.validate()?;
        if hop_length.is_none() && default_hop == 0 {
            return Err(AglError::param(
                "hop_length",
                format!("{default_hop} (win_length // 4)"),
                "must be a positive integer",
            ));
        }
        Ok(p)
    }

    pub fn validate(&self) -> Result<()> {
        if self.n_fft == 0 {
            return Err(AglError::param("n_fft", self.n_fft, "must be > 0"));
        }
        if self.n_fft > MAX_N_FFT {
            return Err(AglError::param(
                "n_fft",
                self.n_fft,
                format!("must be <= {MAX_N_FFT}"),
            ));
        }
        if self.hop_length == 0 {
            return Err(AglError::param(
                "hop_length",
                self.hop_length,
                "must be > 0",
            ));
        }
        if self.win_length == 0 {
            return Err(AglError::param(
                "win_length",
                self.win_length,
                "must be > 0",
            ));
        }
        if self.win_length > self.n_fft {
            return Err(AglError::InvalidParameter {
                name: "n_fft",
                value: self.n_fft.to_string(),
                reason: format!("must be >= win_length (win_length={})", self.win_length),
            });
        }
        Ok(())
    }

    /// Frequency bins of the one-sided spectrum.
    pub fn n_freqs(&self) -> usize {
        self.n_fft / 2 + 1
    }

    /// Samples of padding on each side.
    pub fn pad(&self) -> usize {
        if self.center {
            self.n_fft / 2
        } else {
            0
        }
    }

    /// Number of frames for a signal of `len` samples (librosa's count).
    pub fn n_frames(&self, len: usize) -> Result<usize> {
        if len == 0 {
            return Err(AglError::Shape(
                "input signal is empty (0 samples)".to_string(),
            ));
        }
        let padded = len + 2 * self.pad();
        if padded < self.n_fft {
            return Err(AglError::Shape(format!(
                "n_fft={} is too large for an input signal of length={len} (center={})",
                self.n_fft, self.center
            )));
        }
        Ok(1 + (padded - self.n_fft) / self.hop_length)
    }
}

/// Cached forward real FFT plans (see [`RealFft`]), shared by all workers.
pub fn rfft_plan(n: usize) -> Arc<RealFft> {
    static PLANS: OnceLock<Mutex<HashMap<usize, Arc<RealFft>>>> = OnceLock::new();
    let m = PLANS.get_or_init(Default::default);
    if let Some(p) = m.lock().unwrap_or_else(|e| e.into_inner()).get(&n) {
        return p.clone();
    }
    let p = Arc::new(RealFft::new(n));
    m.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(n, p.clone());
    p
}

/// Index into a signal of length `n` for a (possibly negative or past-the-end)
/// position, with numpy's `reflect` rule applied repeatedly.
#[inline]
pub fn reflect_index(i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n as isize - 1);
    let mut k = i.rem_euclid(period);
    if k >= n as isize {
        k = period - k;
    }
    k as usize
}

/// A signal as seen by the framing code: the raw samples, optionally
/// pre-emphasised (`y'[n] = y[n+1] - coef * y[n]`, one sample shorter) and
/// scaled by a gain.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub samples: &'a [f32],
    pub preemphasis: Option<f32>,
    pub gain: f32,
}

impl<'a> Source<'a> {
    pub fn plain(samples: &'a [f32]) -> Self {
        Source {
            samples,
            preemphasis: None,
            gain: 1.0,
        }
    }

    /// Length of the (virtual) signal.
    pub fn len(&self) -> usize {
        match self.preemphasis {
            None => self.samples.len(),
            Some(_) => self.samples.len().saturating_sub(1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn at(&self, n: usize) -> f32 {
        match self.preemphasis {
            None => self.samples[n] * self.gain,
            Some(c) => (self.samples[n + 1] - c * self.samples[n]) * self.gain,
        }
    }
}

/// Reusable per-worker buffers for one FFT size.
pub struct FftScratch {
    pub frame: Vec<f32>,
    pub spectrum: Vec<Complex32>,
    pub work: Vec<Complex32>,
    plan: Arc<RealFft>,
}

impl FftScratch {
    pub fn new(n_fft: usize) -> Self {
        let plan = rfft_plan(n_fft);
        FftScratch {
            frame: plan.make_input_vec(),
            spectrum: plan.make_output_vec(),
            work: plan.make_scratch_vec(),
            plan,
        }
    }

    /// Transform `frame` in place into `spectrum` (the one-sided spectrum).
    pub fn transform(&mut self) {
        // Lengths match the plan by construction, so this cannot fail.
        let _ = self
            .plan
            .process_with_scratch(&mut self.frame, &mut self.spectrum, &mut self.work);
    }
}

/// A planned STFT: parameters, the window padded to `n_fft`, and the span
/// where the window is non-zero.
#[derive(Debug, Clone)]
pub struct StftPlan {
    pub params: StftParams,
    pub window: Vec<f32>,
    span: (usize, usize),
}

impl StftPlan {
    pub fn new(params: StftParams) -> Result<Self> {
        params.validate()?;
        let w = params.window.coefficients(params.win_length)?;
        let window = pad_center(&w, params.n_fft);
        let lo = (params.n_fft - params.win_length) / 2;
        Ok(StftPlan {
            span: (lo, lo + params.win_length),
            window,
            params,
        })
    }

    pub fn n_frames(&self, len: usize) -> Result<usize> {
        self.params.n_frames(len)
    }

    /// Window frame `t` of `src` into `s.frame` and transform it; the
    /// one-sided spectrum is left in `s.spectrum`.
    pub fn transform_frame(&self, src: &Source<'_>, t: usize, s: &mut FftScratch) {
        self.window_frame(src, t, &mut s.frame);
        // Lengths match the plan by construction, so this cannot fail.
        let _ = s
            .plan
            .process_with_scratch(&mut s.frame, &mut s.spectrum, &mut s.work);
    }

    /// Write the windowed frame `t` of `src` (padding applied) into
    /// `buf[..n_fft]`.
    #[inline(always)]
    pub fn window_frame(&self, src: &Source<'_>, t: usize, buf: &mut [f32]) {
        let n_fft = self.params.n_fft;
        let len = src.len();
        let start = (t * self.params.hop_length) as isize - self.params.pad() as isize;
        let (lo, hi) = self.span;
        let buf = &mut buf[..n_fft];
        buf[..lo].iter_mut().for_each(|v| *v = 0.0);
        buf[hi..].iter_mut().for_each(|v| *v = 0.0);
        let a = start + lo as isize;
        let b = start + hi as isize;
        if a >= 0 && (b as usize) <= len {
            let a = a as usize;
            let w = &self.window[lo..hi];
            let out = &mut buf[lo..hi];
            match src.preemphasis {
                None => {
                    let x = &src.samples[a..a + (hi - lo)];
                    let g = src.gain;
                    for ((o, &wv), &xv) in out.iter_mut().zip(w).zip(x) {
                        *o = wv * (xv * g);
                    }
                }
                Some(c) => {
                    let x = &src.samples[a..a + (hi - lo) + 1];
                    let g = src.gain;
                    for (i, (o, &wv)) in out.iter_mut().zip(w).enumerate() {
                        *o = wv * ((x[i + 1] - c * x[i]) * g);
                    }
                }
            }
        } else {
            for (i, (b, &wv)) in buf
                .iter_mut()
                .zip(&self.window)
                .enumerate()
                .take(hi)
                .skip(lo)
            {
                let pos = start + i as isize;
                let v = if pos >= 0 && (pos as usize) < len {
                    src.at(pos as usize)
                } else {
                    match self.params.pad_mode {
                        PadMode::Constant => 0.0,
                        PadMode::Reflect => src.at(reflect_index(pos, len)),
                    }
                };
                *b = wv * v;
            }
        }
    }
}

/// Cached frame-batched real FFT plans (see [`crate::lanefft`]); `None` for
/// lengths the lane transform does not take.
pub fn lane_plan(n: usize) -> Option<Arc<LaneFft>> {
    type Cache = HashMap<usize, Option<Arc<LaneFft>>>;
    static PLANS: OnceLock<Mutex<Cache>> = OnceLock::new();
    let m = PLANS.get_or_init(Default::default);
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    g.entry(n)
        .or_insert_with(|| LaneFft::new(n).map(Arc::new))
        .clone()
}

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
    /// finiteness was left to this engine ([`check_signal_lengths`]) has
    /// every sample checked once, as it enters the cache for the transform,
    /// instead of in a separate pass over memory. See [`LaneCheck`].
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
                crate::lanefft::prefetch(next);
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

/// Cached forward complex FFT plans, shared by all workers.
pub fn cfft_plan(n: usize) -> Arc<dyn rustfft::Fft<f32>> {
    type Cache = (
        rustfft::FftPlanner<f32>,
        HashMap<usize, Arc<dyn rustfft::Fft<f32>>>,
    );
    static PLANS: OnceLock<Mutex<Cache>> = OnceLock::new();
    let m = PLANS.get_or_init(|| Mutex::new((rustfft::FftPlanner::new(), HashMap::new())));
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = g.1.get(&n) {
        return p.clone();
    }
    let p = if crate::fastmath::simd_enabled() {
        g.0.plan_fft_forward(n)
    } else {
        rustfft::FftPlannerScalar::new().plan_fft_forward(n)
    };
    g.1.insert(n, p.clone());
    p
}

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
                let _ = self.real.plan.process_with_scratch(
                    &mut self.real.frame,
                    &mut self.real.spectrum,
                    &mut self.real.work,
                );
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

/// Validate a batch of mono signals: non-empty and finite.
pub fn check_signals(items: &[&[f32]], n_threads: Option<usize>) -> Result<()> {
    crate::batch::check_items(items, n_threads, |i, x| {
        check_length(i, x)?;
        check_finite(x, &format!("audio buffer (item {i})"))
    })
}

fn check_length(i: usize, x: &[f32]) -> Result<()> {
    if x.is_empty() {
        return Err(AglError::Shape(format!(
            "item {i} of the batch is empty (0 samples)"
        )));
    }
    Ok(())
}

/// The part of [`check_signals`] that does not read the samples (no item is
/// empty), for a batch that goes through [`LaneStft`], which checks
/// finiteness block by block (see [`LaneCheck`]).
pub fn check_signal_lengths(items: &[&[f32]]) -> Result<()> {
    items
        .iter()
        .enumerate()
        .try_for_each(|(i, x)| check_length(i, x))
}

/// [`check_signals`], reading the samples for NaN and infinity only when
/// `finite` (else only [`check_signal_lengths`]): the `check` of a mono
/// batch for [`LaneCheck`].
pub fn check_mono(items: &[&[f32]], n_threads: Option<usize>, finite: bool) -> Result<()> {
    if finite {
        check_signals(items, n_threads)
    } else {
        check_signal_lengths(items)
    }
}

/// The lane plan of a batch's transform, and the one protocol by which the
/// batch's input is checked for it. `check(finite)` validates the batch,
/// reading every sample for NaN and infinity only when `finite`:
/// - without a lane plan, the whole check runs up front;
/// - with one, only the part that does not read the samples runs up front,
///   finiteness is left to [`LaneStft`], which checks each block's samples
///   as they enter the cache ([`LaneStft::block`]), and
///   [`LaneCheck::finish`] turns its error into the up-front check's.
pub struct LaneCheck<C> {
    fft: Option<Arc<LaneFft>>,
    check: C,
}

impl<C: Fn(bool) -> Result<()>> LaneCheck<C> {
    /// The lane plan for `n_fft` ([`lane_plan`]), with the batch checked for
    /// it (above).
    pub fn new(n_fft: usize, check: C) -> Result<Self> {
        let fft = lane_plan(n_fft);
        check(fft.is_none())?;
        Ok(LaneCheck { fft, check })
    }

    /// The lane plan; `None` where the lane transform does not take `n_fft`
    /// (the batch was then checked whole).
    pub fn fft(&self) -> Option<Arc<LaneFft>> {
        self.fft.clone()
    }

    /// The result of the run on the lane engine: on
    /// [`AglError::NonFinite`], the whole check runs and its error is
    /// returned, so the error names the first bad item and sample whatever
    /// the thread count, as an up-front check would.
    pub fn finish<T>(&self, run: Result<T>) -> Result<T> {
        match run {
            Err(e @ AglError::NonFinite { .. }) => {
                (self.check)(true)?;
                Err(e)
            }
            other => other,
        }
    }
}

/// Complex STFT of a batch of mono signals, each item laid out as librosa's
/// `[1 + n_fft/2, frames]`. `extent` pads every item's frame axis (see
/// [`run_framewise`]).
pub fn stft_batch(
    items: &[&[f32]],
    params: &StftParams,
    extent: Option<usize>,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<FrameOutput<Complex32>> {
    let plan = StftPlan::new(params.clone())?;
    let lanes = LaneCheck::new(params.n_fft, |finite| check_mono(items, n_threads, finite))?;
    let n_frames = items
        .iter()
        .map(|x| plan.n_frames(x.len()))
        .collect::<Result<Vec<_>>>()?;
    let nf = params.n_freqs();
    let run = RunOpts {
        extent,
        n_threads,
        cancel,
    };
    if let Some(fft) = lanes.fft() {
        return lanes.finish(stft_lanes(items, &plan, fft, &n_frames, run));
    }
    run_framewise(
        &n_frames,
        Layout::WidthTime { width: nf },
        run,
        || PairFft::new(params.n_fft),
        |s, item, t, row| {
            s.frame(&plan, &Source::plain(items[item]), item, t, n_frames[item]);
            row.copy_from_slice(&s.spectrum[..nf]);
        },
    )
}

/// [`stft_batch`] on the frame-batched transform ([`LaneStft`]): the block
/// engine runs over a frame axis twice as long, each of its rows one bin's
/// `(re, im)` pairs, so the output is written interleaved, in place, as
/// complex values. Blocks of [`LANES`] frames start at multiples of
/// [`LANES`] whatever the thread count (each engine block takes half of
/// one), and every lane computes its frame alone, so the values do not
/// depend on the threads.
fn stft_lanes(
    items: &[&[f32]],
    plan: &StftPlan,
    fft: Arc<LaneFft>,
    n_frames: &[usize],
    run: RunOpts<'_>,
) -> Result<FrameOutput<Complex32>> {
    let nf = plan.params.n_freqs();
    let doubled: Vec<usize> = n_frames.iter().map(|&n| 2 * n).collect();
    let run = RunOpts {
        extent: run.extent.map(|e| e.saturating_mul(2)),
        ..run
    };
    let out = run_blockwise(
        &doubled,
        Layout::WidthTime { width: nf },
        run,
        || (LaneStft::new(fft.clone()), None::<(usize, usize)>),
        |(s, cached), item, t0, n, vals| {
            // Engine values t0 .. t0 + n are frames a .. a + n / 2.
            let (a, m) = (t0 / 2, n / 2);
            let f0 = a - a % LANES;
            if *cached != Some((item, f0)) {
                let count = (n_frames[item] - f0).min(LANES);
                s.block(plan, &Source::plain(items[item]), f0, count)?;
                *cached = Some((item, f0));
            }
            let at = a - f0;
            for ((v, re), im) in vals.iter_mut().zip(&s.re).zip(&s.im).take(nf) {
                for i in 0..m {
                    v.0[2 * i] = re.0[at + i];
                    v.0[2 * i + 1] = im.0[at + i];
                }
            }
            Ok(())
        },
    )?;
    Ok(FrameOutput {
        data: pairs_to_complex(out.data),
        offsets: out.offsets.into_iter().map(|o| o / 2).collect(),
        extents: out.extents.into_iter().map(|e| e / 2).collect(),
        n_frames: n_frames.to_vec(),
    })
}

/// `(re, im)` pairs as complex values, in the same allocation when its
/// length and capacity are even (always, from [`stft_lanes`]).
fn pairs_to_complex(v: Vec<f32>) -> Vec<Complex32> {
    if !v.len().is_multiple_of(2) || !v.capacity().is_multiple_of(2) {
        return v
            .chunks_exact(2)
            .map(|p| Complex32::new(p[0], p[1]))
            .collect();
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `Complex32` is `#[repr(C)]` `{ re: f32, im: f32 }`: the
    // alignment of `f32` and twice its size. Length and capacity are even,
    // so the allocation (capacity * 4 bytes, align 4) is exactly that of
    // capacity / 2 complex values, and every pair is initialised.
    unsafe {
        Vec::from_raw_parts(
            v.as_mut_ptr().cast::<Complex32>(),
            v.len() / 2,
            v.capacity() / 2,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;

    #[test]
    fn frame_counts_match_librosa() {
        let mut p = StftParams::new(2048);
        p.hop_length = 512;
        assert_eq!(p.n_frames(22050).unwrap(), 44);
        p.center = false;
        assert_eq!(p.n_frames(22050).unwrap(), 40);
        assert!(p.n_frames(100).is_err());
    }

    #[test]
    fn resolve_takes_librosa_defaults_and_checks_them() {
        let hann = || Window::Hann { periodic: true };
        let p = StftParams::resolve(1024, None, Some(400), hann(), true, PadMode::Constant);
        let p = p.unwrap();
        assert_eq!((p.win_length, p.hop_length), (400, 100));
        let tiny = StftParams::resolve(2, None, None, hann(), true, PadMode::Constant);
        let msg = tiny.unwrap_err().to_string();
        assert_eq!(
            msg,
            "hop_length must be a positive integer, got hop_length=0 (win_length // 4)"
        );
        let wide = StftParams::resolve(512, None, Some(800), hann(), true, PadMode::Constant);
        assert!(wide
            .unwrap_err()
            .to_string()
            .starts_with("n_fft must be >= win_length"));
        let huge = StftParams::resolve(MAX_N_FFT + 1, None, None, hann(), true, PadMode::Constant);
        assert!(huge.is_err());
    }

    #[test]
    fn reflect_matches_numpy() {
        // np.pad([0,1,2,3], 5, 'reflect') -> [1,2,3,2,1,0,1,2,3,2,1,0,1,2]
        let got: Vec<usize> = (-5..9).map(|i| reflect_index(i, 4)).collect();
        assert_eq!(got, vec![1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]);
    }

    /// Frames read in place with the window fused into the load give the
    /// values of frames windowed into a buffer first, at every position
    /// (edges padded, interior read in place).
    #[test]
    fn block_frames_equal_buffered_frames() {
        let x = crate::testutil::noise(5000, 9);
        for pad_mode in [PadMode::Reflect, PadMode::Constant] {
            let mut params = StftParams::new(512);
            params.hop_length = 100;
            params.win_length = 400;
            params.pad_mode = pad_mode;
            let plan = StftPlan::new(params).unwrap();
            let fft = lane_plan(512).unwrap();
            let src = Source::plain(&x);
            let frames = plan.n_frames(x.len()).unwrap();
            let mut block = LaneStft::new(fft.clone());
            let mut buf = vec![0f32; 512];
            let (mut re, mut im) = fft.make_buffers();
            for t0 in (0..frames).step_by(LANES) {
                let n = (frames - t0).min(LANES);
                block.block(&plan, &src, t0, n).unwrap();
                for i in 0..n {
                    plan.window_frame(&src, t0 + i, &mut buf);
                    fft.forward(&[&buf], &mut re, &mut im);
                    for k in 0..fft.n_bins() {
                        assert_eq!(block.re[k].0[i], re[k].0[0], "t={} k={k}", t0 + i);
                        assert_eq!(block.im[k].0[i], im[k].0[0], "t={} k={k}", t0 + i);
                    }
                }
            }
        }
    }

    /// The frame-batched complex STFT agrees with the one-frame transform
    /// and gives the same bits whatever the thread count and extent.
    #[test]
    fn lane_stft_matches_frame_path_and_threads() {
        let x = crate::testutil::noise(30_000, 3);
        let y = crate::testutil::noise(7_777, 4);
        let mut p = StftParams::new(512);
        p.hop_length = 128;
        let plan = StftPlan::new(p.clone()).unwrap();
        let one = stft_batch(&[&x, &y], &p, None, Some(1), never()).unwrap();
        for threads in [2, 3, 5] {
            let many = stft_batch(&[&x, &y], &p, None, Some(threads), never()).unwrap();
            assert_eq!(one.data, many.data);
        }
        let nf = p.n_freqs();
        let padded = stft_batch(&[&x, &y], &p, Some(400), Some(2), never()).unwrap();
        assert_eq!(padded.extents, vec![400, 400]);
        let mut s = PairFft::new(512);
        for (item, sig) in [&x, &y].iter().enumerate() {
            let n = plan.n_frames(sig.len()).unwrap();
            assert_eq!(one.n_frames[item], n);
            let base = one.offsets[item];
            let pbase = padded.offsets[item];
            for t in 0..n {
                s.frame(&plan, &Source::plain(sig), item, t, n);
                for k in 0..nf {
                    let got = one.data[base + k * n + t];
                    assert_eq!(got, padded.data[pbase + k * 400 + t]);
                    let want = s.spectrum[k];
                    assert!(
                        (got - want).norm() <= 1e-4 * (1.0 + want.norm()),
                        "t={t} k={k}"
                    );
                }
                for k in 0..nf {
                    assert_eq!(
                        padded.data[pbase + k * 400 + n..pbase + (k + 1) * 400]
                            .iter()
                            .filter(|c| c.norm() != 0.0)
                            .count(),
                        0
                    );
                }
            }
        }
    }

    #[test]
    fn parseval_holds_for_rectangular_frames() {
        let n = 256;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 97) as f32 / 97.0 - 0.5)
            .collect();
        let mut p = StftParams::new(n);
        p.center = false;
        p.window = Window::Rectangular;
        let out = stft_batch(&[&x], &p, None, Some(1), never()).unwrap();
        let spec = &out.data;
        let mut e_f = spec[0].norm_sqr() as f64 + spec[n / 2].norm_sqr() as f64;
        for c in &spec[1..n / 2] {
            e_f += 2.0 * c.norm_sqr() as f64;
        }
        let e_t: f64 = x.iter().map(|v| (*v as f64).powi(2)).sum();
        assert!((e_f / n as f64 - e_t).abs() < 1e-4 * e_t);
    }
}
