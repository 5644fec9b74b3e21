//! Frame-batched real FFT: [`LANES`] frames at once, one frame per SIMD lane.
//!
//! Small FFTs (a few hundred to a few thousand points) run far below a core's
//! arithmetic peak in libraries that transform one frame at a time: their
//! butterflies shuffle data between lanes and their passes are too short to
//! hide latency. Here frame `l` of a block lives in lane `l` of every vector,
//! so every butterfly, twiddle multiply and post-processing step is the same
//! scalar program run on [`LANES`] independent frames: vertical vector
//! arithmetic with no shuffles, twiddles broadcast from a table.
//!
//! The transform of `n = 2m` real samples packs the frame as `m` complex
//! values `z[j] = x[2j] + i x[2j+1]`, loads them in bit-reversed order,
//! runs the `log2 m` decimation-in-time stages as passes that each load
//! and store every value once: radix-8 (three stages, seven twiddle
//! products and an 8-point DFT per eight values) for blocks larger than the
//! L1 cache, radix-4 (two stages, three twiddle products per four values)
//! below, a radix-2 pass for a stage left over; then it splits the result
//! into the one-sided spectrum (see [`crate::spectral::rfft`] for the split). For
//! `n = 1024` that is three passes over the block.
//!
//! Every lane runs the same sequence of IEEE operations (twiddle products
//! as one multiply and one fused multiply-add per part, in hardware on
//! AVX2 and AVX-512, correctly rounded `f32::mul_add` in the portable
//! build), so a frame's spectrum is bit-identical whichever lane, block,
//! thread or instruction set computes it.

/// Frames per block (one AVX-512 vector of `f32`, two AVX2 vectors).
pub const LANES: usize = 16;

/// One value per frame of a block.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(64))]
pub struct V(pub [f32; LANES]);

impl V {
    pub const ZERO: V = V([0.0; LANES]);

    #[inline(always)]
    pub fn splat(v: f32) -> V {
        V([v; LANES])
    }
}

/// The values of `v` as one flat slice (`LANES` per entry).
#[inline(always)]
pub fn flat(v: &[V]) -> &[f32] {
    // SAFETY: V is #[repr(C)] around [f32; LANES], so a slice of V is a
    // contiguous run of LANES * len f32 values with f32 alignment.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len() * LANES) }
}

/// [`flat`], mutable.
#[inline(always)]
pub fn flat_mut(v: &mut [V]) -> &mut [f32] {
    // SAFETY: see `flat`; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut f32, v.len() * LANES) }
}

mod fft;
mod memory;
mod passes;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use fft::{supports, LaneFft, SPLIT_RUN};
pub use memory::{gather_row, prefetch, stream_copy, stream_fence, transpose_out, BlockRow};

/// Vector arithmetic on the [`LANES`] values of a [`V`], one backend per
/// instruction set. Every backend performs the same IEEE operation per lane.
///
/// # Safety
/// The methods of a backend may only run on a CPU with its instruction set
/// (the dispatch in [`run`] checks it once).
// Every method shares the trait's safety condition (above).
#[allow(clippy::missing_safety_doc)]
pub trait Lanes: Copy {
    unsafe fn ld(v: &V) -> Self;
    unsafe fn st(self, v: &mut V);
    unsafe fn splat(x: f32) -> Self;
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn sub(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    /// `self * b + c` with one rounding (fused multiply-add).
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self * b - c` with one rounding.
    unsafe fn mul_sub(self, b: Self, c: Self) -> Self;

    /// Bit-reversed load of the packed complex sequence of each windowed
    /// frame: `re[rev[j]]`, `im[rev[j]]` get `src[l][2j] * win[l][2j]`,
    /// `src[l][2j + 1] * win[l][2j + 1]` in lane `l` (zeros in lanes
    /// `l >= used`). `src[l]` and `win[l]` have `2 m` samples.
    #[inline(always)]
    unsafe fn load(src: &Frames<'_>, used: usize, rev: &[u32], re: &mut [V], im: &mut [V]) {
        load_portable(src, used, rev, re, im)
    }
}

/// Up to [`LANES`] frames and the window each is multiplied by.
pub struct Frames<'a> {
    pub src: [&'a [f32]; LANES],
    pub win: [&'a [f32]; LANES],
    /// Whether any window differs from ones (else the load skips the
    /// multiplications; multiplying by one is exact, so the bits agree).
    pub windowed: bool,
}

#[inline(always)]
fn load_portable(src: &Frames<'_>, used: usize, rev: &[u32], re: &mut [V], im: &mut [V]) {
    for (j, &r) in rev.iter().enumerate() {
        let r = r as usize;
        let (mut vr, mut vi) = (V::ZERO, V::ZERO);
        for (l, (f, w)) in src.src[..used].iter().zip(&src.win[..used]).enumerate() {
            if src.windowed {
                vr.0[l] = f[2 * j] * w[2 * j];
                vi.0[l] = f[2 * j + 1] * w[2 * j + 1];
            } else {
                vr.0[l] = f[2 * j];
                vi.0[l] = f[2 * j + 1];
            }
        }
        re[r] = vr;
        im[r] = vi;
    }
}

/// Plain loops: any CPU.
#[derive(Clone, Copy)]
pub struct Portable(V);

impl Lanes for Portable {
    #[inline(always)]
    unsafe fn ld(v: &V) -> Self {
        Portable(*v)
    }
    #[inline(always)]
    unsafe fn st(self, v: &mut V) {
        *v = self.0;
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Portable(V::splat(x))
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        Portable(V(std::array::from_fn(|l| self.0 .0[l] + o.0 .0[l])))
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        Portable(V(std::array::from_fn(|l| self.0 .0[l] - o.0 .0[l])))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        Portable(V(std::array::from_fn(|l| self.0 .0[l] * o.0 .0[l])))
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        Portable(V(std::array::from_fn(|l| {
            self.0 .0[l].mul_add(b.0 .0[l], c.0 .0[l])
        })))
    }
    #[inline(always)]
    unsafe fn mul_sub(self, b: Self, c: Self) -> Self {
        Portable(V(std::array::from_fn(|l| {
            self.0 .0[l].mul_add(b.0 .0[l], -c.0 .0[l])
        })))
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512};

/// Run `$body` with the type alias `$R` bound to the best [`Lanes`] backend
/// of this CPU, compiled for its instruction set (see [`run`]).
macro_rules! with_lanes {
    ($R:ident => $body:expr) => {
        $crate::spectral::lanes::run(
            #[inline(always)]
            |b| match b {
                $crate::spectral::lanes::Backend::Portable => {
                    type $R = $crate::spectral::lanes::Portable;
                    $body
                }
                #[cfg(target_arch = "x86_64")]
                $crate::spectral::lanes::Backend::Avx2 => {
                    type $R = $crate::spectral::lanes::Avx2;
                    $body
                }
                #[cfg(target_arch = "x86_64")]
                $crate::spectral::lanes::Backend::Avx512 => {
                    type $R = $crate::spectral::lanes::Avx512;
                    $body
                }
            },
        )
    };
}
pub(crate) use with_lanes;

/// The instruction sets a lane kernel can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// Run `f` with the best backend this CPU has (and [`crate::fastmath::SIMD_ENV`]
/// allows), compiled for that instruction set. Mark the closure
/// `#[inline(always)]`.
#[inline(always)]
pub fn run<T>(f: impl FnOnce(Backend) -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512<T>(f: impl FnOnce(Backend) -> T) -> T {
            f(Backend::Avx512)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T>(f: impl FnOnce(Backend) -> T) -> T {
            f(Backend::Avx2)
        }
        if crate::fastmath::has_avx512f() {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked above).
            return unsafe { avx512(f) };
        }
        if crate::fastmath::has_avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            return unsafe { avx2(f) };
        }
    }
    f(Backend::Portable)
}
