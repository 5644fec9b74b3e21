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
//! into the one-sided spectrum (see [`crate::rfft`] for the split). For
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

/// Copy `src` to `dst` (non-overlapping, `src.len()` values) with
/// non-temporal stores where the CPU has AVX-512: the destination's cache
/// lines are written without being read first, which halves the memory
/// traffic of a large output that is not read again soon. Plain copy
/// elsewhere.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` values.
#[inline]
pub unsafe fn stream_copy(dst: *mut f32, src: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fastmath::has_avx512f() {
            return x86::stream_copy(dst, src);
        }
    }
    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
}

/// Write 16 consecutive row values of 16 frames, frame-major: `src[w]`
/// (`w < 16`) holds value `w` of each frame (frame `i` in lane `i`); frame
/// `i`'s 16 values go to `dst + i * stride .. + 16`. A 16 x 16 transpose in
/// registers where the CPU has AVX-512.
///
/// # Safety
/// `dst + i * stride + w` must be valid for writes for `i, w < 16`, and
/// `src` must hold 16 vectors.
#[inline]
pub unsafe fn transpose_out(src: &[V], dst: *mut f32, stride: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fastmath::has_avx512f() {
            return x86::transpose_out(src, dst, stride);
        }
    }
    for (w, v) in src.iter().take(16).enumerate() {
        for (i, &x) in v.0.iter().enumerate() {
            *dst.add(i * stride + w) = x;
        }
    }
}

/// Row `row` of a run of blocks from frame `first` on: block `k` holds
/// frames `k * LANES ..` of every row in its `stride` vectors, row `w` in
/// vector `k * stride + w` (frame `k * LANES + i` in lane `i`).
pub struct BlockRow<'a> {
    pub blocks: &'a [V],
    pub stride: usize,
    pub row: usize,
    pub first: usize,
}

impl BlockRow<'_> {
    /// Write values `from .. to` (value `i` is frame `first + i`) to
    /// `dst + from ..`, one at a time.
    ///
    /// # Safety
    /// As for [`gather_row`].
    #[inline(always)]
    unsafe fn copy_values(&self, dst: *mut f32, from: usize, to: usize) {
        for i in from..to {
            let g = self.first + i;
            let v = self
                .blocks
                .get_unchecked((g / LANES) * self.stride + self.row);
            *dst.add(i) = v.0[g % LANES];
        }
    }
}

/// Write `n` values of a [`BlockRow`] to `dst` (value `i` is frame
/// `src.first + i`). Where the CPU has AVX-512, each whole 64-byte line of
/// `dst` is one permutation of two vectors written with a non-temporal
/// store (see [`stream_copy`]).
///
/// # Safety
/// `dst` must be valid for writes of `n` values, and the vectors of frames
/// `src.first .. src.first + n` must lie in `src.blocks`.
#[inline]
pub unsafe fn gather_row(dst: *mut f32, src: &BlockRow<'_>, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fastmath::has_avx512f() {
            return x86::gather_row(dst, src, n);
        }
    }
    src.copy_values(dst, 0, n)
}

/// Ask the CPU to bring `data` into its L2 cache ahead of use: a hint,
/// with no effect on any value. Frames overlap, so the rows of a block
/// first touch new samples all at once; read from memory as they are
/// loaded, they stall the load step of the transform.
#[inline]
pub fn prefetch(data: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in data.chunks(16) {
        // SAFETY: a prefetch never faults and changes no state but the
        // cache; SSE is part of x86-64.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
            _mm_prefetch::<_MM_HINT_T1>(line.as_ptr() as *const i8)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Order the non-temporal stores of [`stream_copy`] before later stores
/// (call once a run of copies is done).
#[inline]
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::fastmath::has_avx512f() {
            // SAFETY: SSE is part of x86-64.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
    }
}

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
        $crate::lanefft::run(
            #[inline(always)]
            |b| match b {
                $crate::lanefft::Backend::Portable => {
                    type $R = $crate::lanefft::Portable;
                    $body
                }
                #[cfg(target_arch = "x86_64")]
                $crate::lanefft::Backend::Avx2 => {
                    type $R = $crate::lanefft::Avx2;
                    $body
                }
                #[cfg(target_arch = "x86_64")]
                $crate::lanefft::Backend::Avx512 => {
                    type $R = $crate::lanefft::Avx512;
                    $body
                }
            },
        )
    };
}
pub(crate) use with_lanes;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BlockRow, Frames, Lanes, LANES, V};
    use std::arch::x86_64::*;

    /// Two AVX registers per [`V`].
    #[derive(Clone, Copy)]
    pub struct Avx2(__m256, __m256);

    impl Lanes for Avx2 {
        #[inline(always)]
        unsafe fn ld(v: &V) -> Self {
            let p = v.0.as_ptr();
            Avx2(_mm256_load_ps(p), _mm256_load_ps(p.add(8)))
        }
        #[inline(always)]
        unsafe fn st(self, v: &mut V) {
            let p = v.0.as_mut_ptr();
            _mm256_store_ps(p, self.0);
            _mm256_store_ps(p.add(8), self.1);
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            Avx2(_mm256_set1_ps(x), _mm256_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Avx2(_mm256_add_ps(self.0, o.0), _mm256_add_ps(self.1, o.1))
        }
        #[inline(always)]
        unsafe fn sub(self, o: Self) -> Self {
            Avx2(_mm256_sub_ps(self.0, o.0), _mm256_sub_ps(self.1, o.1))
        }
        #[inline(always)]
        unsafe fn mul(self, o: Self) -> Self {
            Avx2(_mm256_mul_ps(self.0, o.0), _mm256_mul_ps(self.1, o.1))
        }
        #[inline(always)]
        unsafe fn mul_add(self, b: Self, c: Self) -> Self {
            Avx2(
                _mm256_fmadd_ps(self.0, b.0, c.0),
                _mm256_fmadd_ps(self.1, b.1, c.1),
            )
        }
        #[inline(always)]
        unsafe fn mul_sub(self, b: Self, c: Self) -> Self {
            Avx2(
                _mm256_fmsub_ps(self.0, b.0, c.0),
                _mm256_fmsub_ps(self.1, b.1, c.1),
            )
        }
    }

    /// One AVX-512 register per [`V`].
    #[derive(Clone, Copy)]
    pub struct Avx512(__m512);

    impl Lanes for Avx512 {
        #[inline(always)]
        unsafe fn ld(v: &V) -> Self {
            Avx512(_mm512_load_ps(v.0.as_ptr()))
        }
        #[inline(always)]
        unsafe fn st(self, v: &mut V) {
            _mm512_store_ps(v.0.as_mut_ptr(), self.0)
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            Avx512(_mm512_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Avx512(_mm512_add_ps(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn sub(self, o: Self) -> Self {
            Avx512(_mm512_sub_ps(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn mul(self, o: Self) -> Self {
            Avx512(_mm512_mul_ps(self.0, o.0))
        }
        #[inline(always)]
        unsafe fn mul_add(self, b: Self, c: Self) -> Self {
            Avx512(_mm512_fmadd_ps(self.0, b.0, c.0))
        }
        #[inline(always)]
        unsafe fn mul_sub(self, b: Self, c: Self) -> Self {
            Avx512(_mm512_fmsub_ps(self.0, b.0, c.0))
        }

        /// 16 x 16 in-register transposes: 16 samples of each of the 16
        /// frames in, 8 complex values of the 16 frames out.
        #[inline(always)]
        unsafe fn load(src: &Frames<'_>, used: usize, rev: &[u32], re: &mut [V], im: &mut [V]) {
            let m = rev.len();
            if !m.is_multiple_of(8) {
                return super::load_portable(src, used, rev, re, im);
            }
            let full = used == LANES && src.src.iter().chain(&src.win).all(|f| f.len() >= 2 * m);
            if full {
                // Every lane used: sixteen fixed rows, held in registers.
                let f = src.src.map(|f| f.as_ptr());
                let w = src.win.map(|w| w.as_ptr());
                return if src.windowed {
                    load_full::<true>(&f, &w, rev, re, im)
                } else {
                    load_full::<false>(&f, &w, rev, re, im)
                };
            }
            let zero = _mm512_setzero_ps();
            for c in 0..m / 8 {
                let mut rows = [zero; LANES];
                if src.windowed {
                    for ((row, f), w) in rows.iter_mut().zip(&src.src[..used]).zip(&src.win[..used])
                    {
                        *row = _mm512_mul_ps(
                            _mm512_loadu_ps(f[16 * c..16 * c + 16].as_ptr()),
                            _mm512_loadu_ps(w[16 * c..16 * c + 16].as_ptr()),
                        );
                    }
                } else {
                    for (row, f) in rows.iter_mut().zip(&src.src[..used]) {
                        *row = _mm512_loadu_ps(f[16 * c..16 * c + 16].as_ptr());
                    }
                }
                let out = transpose16(&rows);
                for (i, v) in out.iter().enumerate() {
                    let r = rev[8 * c + i / 2] as usize;
                    let dst = if i % 2 == 0 { &mut re[r] } else { &mut im[r] };
                    _mm512_store_ps(dst.0.as_mut_ptr(), *v);
                }
            }
        }
    }

    /// [`Avx512::load`] with all [`LANES`] lanes used: the same loads,
    /// products and stores. `f[l]` and `w[l]` point to `2 m` samples
    /// (`m = rev.len()`, a multiple of 8).
    #[inline(always)]
    unsafe fn load_full<const WINDOWED: bool>(
        f: &[*const f32; LANES],
        w: &[*const f32; LANES],
        rev: &[u32],
        re: &mut [V],
        im: &mut [V],
    ) {
        for c in 0..rev.len() / 8 {
            let mut rows = [_mm512_setzero_ps(); LANES];
            for (l, row) in rows.iter_mut().enumerate() {
                let x = _mm512_loadu_ps(f[l].add(16 * c));
                *row = if WINDOWED {
                    _mm512_mul_ps(x, _mm512_loadu_ps(w[l].add(16 * c)))
                } else {
                    x
                };
            }
            let out = transpose16(&rows);
            for (i, v) in out.iter().enumerate() {
                let r = rev[8 * c + i / 2] as usize;
                let dst = if i % 2 == 0 { &mut re[r] } else { &mut im[r] };
                _mm512_store_ps(dst.0.as_mut_ptr(), *v);
            }
        }
    }

    /// One vector, as a register (inlined into its AVX-512 caller).
    #[inline(always)]
    unsafe fn load_v(v: &V) -> __m512 {
        _mm512_load_ps(v.0.as_ptr())
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gather_row(dst: *mut f32, src: &BlockRow<'_>, n: usize) {
        // Values before the first 64-byte boundary of `dst`.
        let head = (((64 - (dst as usize) % 64) % 64) / 4).min(n);
        if !(dst as usize).is_multiple_of(4) || n - head < 16 {
            return src.copy_values(dst, 0, n);
        }
        src.copy_values(dst, 0, head);
        let g = src.first + head;
        let shift = (g % LANES) as i32;
        // Lanes shift .. 15 of one block, then 0 .. shift - 1 of the next
        // (an index of 16 or more picks from the second operand).
        let idx = _mm512_add_epi32(
            _mm512_set1_epi32(shift),
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        );
        let at = |k: usize| load_v(src.blocks.get_unchecked(k * src.stride + src.row));
        let mut k = g / LANES;
        let mut cur = at(k);
        let mut i = head;
        while i + 16 <= n {
            let v = if shift == 0 {
                cur
            } else {
                // Frames up to g + 15 < first + n lie in block k + 1.
                let next = at(k + 1);
                let v = _mm512_permutex2var_ps(cur, idx, next);
                cur = next;
                v
            };
            _mm512_stream_ps(dst.add(i), v);
            i += 16;
            k += 1;
            if shift == 0 && i + 16 <= n {
                cur = at(k);
            }
        }
        src.copy_values(dst, i, n);
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose_out(src: &[V], dst: *mut f32, stride: usize) {
        let mut rows = [_mm512_setzero_ps(); 16];
        for (r, v) in rows.iter_mut().zip(&src[..16]) {
            *r = _mm512_load_ps(v.0.as_ptr());
        }
        let cols = transpose16(&rows);
        for (i, c) in cols.iter().enumerate() {
            _mm512_storeu_ps(dst.add(i * stride), *c);
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn stream_copy(dst: *mut f32, src: &[f32]) {
        let n = src.len();
        // Values before the first 64-byte boundary of `dst`.
        let head = (((64 - (dst as usize) % 64) % 64) / 4).min(n);
        if !(dst as usize).is_multiple_of(4) || n - head < 16 {
            return std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n);
        }
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        let mut i = head;
        while i + 16 <= n {
            _mm512_stream_ps(dst.add(i), _mm512_loadu_ps(src.as_ptr().add(i)));
            i += 16;
        }
        std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), n - i);
    }

    /// `out[i]` lane `a` = `rows[a]` lane `i`.
    #[inline(always)]
    unsafe fn transpose16(r: &[__m512; 16]) -> [__m512; 16] {
        let pd = |x| _mm512_castps_pd(x);
        let ps = |x| _mm512_castpd_ps(x);
        let mut a = [_mm512_setzero_ps(); 8];
        let mut b = [_mm512_setzero_ps(); 8];
        for p in 0..8 {
            a[p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
            b[p] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
        }
        // In 128-bit lane q, c[e][k] holds element 4q + e of rows 4k .. 4k+3.
        let mut c = [[_mm512_setzero_ps(); 4]; 4];
        for k in 0..4 {
            c[0][k] = ps(_mm512_unpacklo_pd(pd(a[2 * k]), pd(a[2 * k + 1])));
            c[1][k] = ps(_mm512_unpackhi_pd(pd(a[2 * k]), pd(a[2 * k + 1])));
            c[2][k] = ps(_mm512_unpacklo_pd(pd(b[2 * k]), pd(b[2 * k + 1])));
            c[3][k] = ps(_mm512_unpackhi_pd(pd(b[2 * k]), pd(b[2 * k + 1])));
        }
        // A 4 x 4 transpose of 128-bit blocks per element e.
        let mut out = [_mm512_setzero_ps(); 16];
        for (e, ce) in c.iter().enumerate() {
            let d0 = _mm512_shuffle_f32x4::<0x44>(ce[0], ce[1]);
            let d1 = _mm512_shuffle_f32x4::<0xEE>(ce[0], ce[1]);
            let d2 = _mm512_shuffle_f32x4::<0x44>(ce[2], ce[3]);
            let d3 = _mm512_shuffle_f32x4::<0xEE>(ce[2], ce[3]);
            out[e] = _mm512_shuffle_f32x4::<0x88>(d0, d2);
            out[4 + e] = _mm512_shuffle_f32x4::<0xDD>(d0, d2);
            out[8 + e] = _mm512_shuffle_f32x4::<0x88>(d1, d3);
            out[12 + e] = _mm512_shuffle_f32x4::<0xDD>(d1, d3);
        }
        out
    }
}

/// `(ar + i ai) * (wr + i wi)` with a broadcast twiddle.
#[inline(always)]
unsafe fn cmul<R: Lanes>(ar: R, ai: R, wr: f32, wi: f32) -> (R, R) {
    let (wr, wi) = (R::splat(wr), R::splat(wi));
    (ar.mul_sub(wr, ai.mul(wi)), ar.mul_add(wi, ai.mul(wr)))
}

/// Lengths the lane transform takes: powers of two from 8 to 2^16.
pub fn supports(n: usize) -> bool {
    n.is_power_of_two() && (8..=1 << 16).contains(&n)
}

/// A planned frame-batched real FFT of `n` samples (see the module notes).
#[derive(Debug, Clone)]
pub struct LaneFft {
    n: usize,
    m: usize,
    /// Bit reversal of `0..m` (`log2 m` bits).
    rev: Vec<u32>,
    /// Per stage of span `s = 8, 16, .., m`: `W_s^k = exp(-2 pi i k / s)`
    /// for `k < s / 2`, stages concatenated (re, im).
    tw: Vec<(f32, f32)>,
    /// `W_n^k` for `k = 0 ..= m / 2` (the real-input split).
    post: Vec<(f32, f32)>,
    /// `n` ones: the window of frames passed as they are.
    ones: Vec<f32>,
    /// Radix-8 passes (see [`RADIX8_MIN`]).
    radix8: bool,
}

/// Smallest half-length `m` that runs radix-8 passes. Below it a block
/// (`m` values of 16 complex lanes, 128 m bytes) stays in a 48 KiB L1 cache
/// and radix-4 passes, with fewer live registers, are faster; from it on
/// the block spills to L2 and fewer passes over it win (measured: n = 1024
/// 11% faster with radix-8, n = 512 20% slower).
const RADIX8_MIN: usize = 512;

fn unit(k: usize, s: usize) -> (f32, f32) {
    let a = -2.0 * std::f64::consts::PI * k as f64 / s as f64;
    (a.cos() as f32, a.sin() as f32)
}

impl LaneFft {
    /// Plan a transform of `n` real samples; `None` unless [`supports`]`(n)`.
    pub fn new(n: usize) -> Option<Self> {
        if !supports(n) {
            return None;
        }
        let m = n / 2;
        let bits = m.trailing_zeros();
        let rev = (0..m as u32)
            .map(|j| j.reverse_bits() >> (32 - bits))
            .collect();
        // Twiddles of the passes of `stages`, in their order: with the
        // sub-transforms of size `e` done, a radix-8 pass (span 8e) while
        // three or more stages remain (large transforms only), else radix-4
        // (span 4e) or radix-2 (span 2e). The first pass (e = 1) is radix-8
        // for large transforms, else the multiply-free radix-4 pass.
        let radix8 = m >= RADIX8_MIN;
        let mut tw = Vec::new();
        let mut e = 1;
        if !radix8 {
            e = 4;
        }
        while e < m {
            let left = (m / e).trailing_zeros();
            if radix8 && left >= 3 {
                for k in 0..e {
                    tw.extend((1..8).map(|r| unit(r * k, 8 * e)));
                }
                e *= 8;
            } else if left == 2 {
                for k in 0..e {
                    tw.extend([unit(k, 4 * e), unit(2 * k, 4 * e), unit(3 * k, 4 * e)]);
                }
                e *= 4;
            } else {
                tw.extend((0..e).map(|k| unit(k, 2 * e)));
                e *= 2;
            }
        }
        let post = (0..=m / 2).map(|k| unit(k, n)).collect();
        Some(LaneFft {
            n,
            m,
            rev,
            tw,
            post,
            ones: vec![1.0; n],
            radix8,
        })
    }

    /// Input length `n`.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Never empty (plans have `n >= 8`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `n` ones (the window of a frame that is already windowed).
    pub fn ones(&self) -> &[f32] {
        &self.ones
    }

    /// Bins of the one-sided spectrum, `n / 2 + 1`.
    pub fn n_bins(&self) -> usize {
        self.m + 1
    }

    /// Scratch for [`LaneFft::forward`]: real and imaginary parts of
    /// `n / 2 + 1` bins.
    pub fn make_buffers(&self) -> (Vec<V>, Vec<V>) {
        (vec![V::ZERO; self.m + 1], vec![V::ZERO; self.m + 1])
    }

    /// One-sided spectra of up to [`LANES`] frames.
    ///
    /// `frames[l]` holds frame `l` (`n` samples each); lanes past
    /// `frames.len()` transform zeros. On return `re[k].0[l] + i im[k].0[l]`
    /// is bin `k` of frame `l`, `k = 0 ..= n / 2` (`re` and `im` need
    /// `n / 2 + 1` entries).
    pub fn forward(&self, frames: &[&[f32]], re: &mut [V], im: &mut [V]) {
        let used = frames.len().min(LANES);
        let mut f = Frames {
            src: [&self.ones; LANES],
            win: [&self.ones; LANES],
            windowed: false,
        };
        f.src[..used].copy_from_slice(&frames[..used]);
        self.forward_windowed(&f, used, re, im)
    }

    /// [`LaneFft::forward`] of `frames.src[l] * frames.win[l]`, `l < used`
    /// (windowing fused into the load; every slice has `n` samples).
    pub fn forward_windowed(&self, frames: &Frames<'_>, used: usize, re: &mut [V], im: &mut [V]) {
        with_lanes!(R => self.forward_with::<R>(frames, used, re, im))
    }

    /// The load and the complex stages of [`LaneFft::forward_windowed`],
    /// without the split: `re[..m]`, `im[..m]` hold the half-length
    /// transform `Z`, for [`LaneFft::split_pair`].
    pub fn transform(&self, frames: &Frames<'_>, used: usize, re: &mut [V], im: &mut [V]) {
        with_lanes!(R => self.transform_with::<R>(frames, used, re, im))
    }

    /// [`LaneFft::forward_windowed`] reduced to the power spectrum:
    /// `power[k]` gets `|X[k]|^2` (`n / 2 + 1` vectors), computed as the
    /// bins are formed; `re` and `im` are scratch. The same values, bit for
    /// bit, as squaring the output of `forward_windowed`.
    pub fn forward_power(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
        power: &mut [V],
    ) {
        let m = self.m;
        assert!(power.len() > m, "power holds n / 2 + 1 bins");
        let used = used.min(LANES);
        self.check_buffers(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; indices are < m + 1, and the
        // frames and windows hold 2 m samples (checked).
        with_lanes!(R => unsafe {
            R::load(frames, used, &self.rev, &mut re[..m], &mut im[..m]);
            match self.stages_before_last::<R>(&mut re[..m], &mut im[..m]) {
                Some((e, tw)) => self.last_pass_power::<R>(&re[..m], &im[..m], e, tw, &mut power[..=m]),
                None => self.split_power::<R>(&mut re[..m], &mut im[..m], &mut power[..=m]),
            }
        })
    }

    #[inline(always)]
    pub(crate) fn forward_with<R: Lanes>(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
    ) {
        let m = self.m;
        self.transform_with::<R>(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; indices are < m + 1.
        unsafe { self.split::<R>(&mut re[..=m], &mut im[..=m]) }
    }

    /// The load and the complex stages (everything but the split).
    #[inline(always)]
    fn transform_with<R: Lanes>(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
    ) {
        let m = self.m;
        let used = used.min(LANES);
        self.check_buffers(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; every index below is < m + 1
        // and every frame and window slice holds 2 m samples (checked).
        unsafe {
            R::load(frames, used, &self.rev, &mut re[..m], &mut im[..m]);
            self.stages::<R>(&mut re[..m], &mut im[..m]);
        }
    }

    /// The sizes the unchecked indexing of a transform relies on: `n / 2
    /// + 1` bins of scratch, `n` samples in every frame and window used.
    #[inline(always)]
    fn check_buffers(&self, frames: &Frames<'_>, used: usize, re: &[V], im: &[V]) {
        let m = self.m;
        assert!(
            re.len() > m && im.len() > m,
            "lane buffers hold n / 2 + 1 bins"
        );
        assert!(
            frames.src[..used]
                .iter()
                .chain(&frames.win[..used])
                .all(|f| f.len() >= 2 * m),
            "frames and windows hold n samples"
        );
    }

    /// All decimation-in-time stages on bit-reversed input, in place
    /// (`re`, `im`: `m` entries).
    #[inline(always)]
    unsafe fn stages<R: Lanes>(&self, re: &mut [V], im: &mut [V]) {
        if let Some((e, tw)) = self.stages_before_last::<R>(re, im) {
            radix8_stage::<R>(re, im, e, tw);
        }
    }

    /// The stages of [`LaneFft::stages`], except a last one that is a
    /// radix-8 pass over the whole block (span `m`): that one is left to the
    /// caller, which gets its `e = m / 8` and twiddles (see
    /// [`LaneFft::last_pass_power`]). `None` when every stage ran.
    #[inline(always)]
    unsafe fn stages_before_last<R: Lanes>(
        &self,
        re: &mut [V],
        im: &mut [V],
    ) -> Option<(usize, &[(f32, f32)])> {
        let m = self.m;
        let mut e = 1;
        let mut off = 0;
        if !self.radix8 {
            radix4_first::<R>(re, im);
            e = 4;
        } else if m >= 512 {
            // The first two radix-8 passes (spans 8 and 64) stay inside runs
            // of 64 values: both run on one run (8 KiB) while it is in L1,
            // instead of each sweeping the whole block.
            let (tw1, tw8) = (&self.tw[..7], &self.tw[7..7 + 56]);
            for (r, i) in re.chunks_exact_mut(64).zip(im.chunks_exact_mut(64)) {
                radix8_stage::<R>(r, i, 1, tw1);
                radix8_stage::<R>(r, i, 8, tw8);
            }
            (e, off) = (64, 63);
        }
        while e < m {
            let left = (m / e).trailing_zeros();
            if self.radix8 && left >= 3 {
                let tw = &self.tw[off..off + 7 * e];
                if 8 * e == m {
                    return Some((e, tw));
                }
                radix8_stage::<R>(re, im, e, tw);
                off += 7 * e;
                e *= 8;
            } else if left == 2 {
                radix4_stage::<R>(re, im, 2 * e, &self.tw[off..off + 3 * e]);
                off += 3 * e;
                e *= 4;
            } else {
                single_stage::<R>(re, im, 2 * e, &self.tw[off..off + e]);
                off += e;
                e *= 2;
            }
        }
        None
    }

    /// The last radix-8 pass (span `m`, `e = m / 8`) fused with the split to
    /// `|X[k]|^2` ([`LaneFft::split_power`]): butterflies `k` and `e - k`
    /// produce between them both partners `Z[p]`, `Z[m - p]` of each of
    /// their outputs (`p = k + q e` pairs with `m - p = (e - k) + (7 - q)
    /// e`), so the pass's output is split and squared as it is formed, not
    /// written back and read again. The same operations as the two steps
    /// apart, so the same bits.
    #[inline(always)]
    unsafe fn last_pass_power<R: Lanes>(
        &self,
        re: &[V],
        im: &[V],
        e: usize,
        tw: &[(f32, f32)],
        out: &mut [V],
    ) {
        let m = self.m;
        // Butterfly 0 pairs with itself: outputs q and 8 - q; output 0 is
        // Z[0] (bins 0 and m).
        let a = radix8_values::<R, false>(re, im, 0, e, &[]);
        let (x0, xm) = split_edge_values::<R>(a[0]);
        power::<R>(x0).st(&mut out[0]);
        power::<R>(xm).st(&mut out[m]);
        for q in 1..=4 {
            self.pair_power::<R>(q * e, a[q], a[8 - q], out);
        }
        for k in 1..=e / 2 {
            let w = &tw[7 * k..7 * k + 7];
            let a = radix8_values::<R, true>(re, im, k, e, w);
            if 2 * k == e {
                // Pairs with itself: outputs q and 7 - q.
                for q in 0..4 {
                    self.pair_power::<R>(k + q * e, a[q], a[7 - q], out);
                }
            } else {
                let j = e - k;
                let b = radix8_values::<R, true>(re, im, j, e, &tw[7 * j..7 * j + 7]);
                for q in 0..8 {
                    let p = k + q * e;
                    if 2 * p < m {
                        self.pair_power::<R>(p, a[q], b[7 - q], out);
                    } else {
                        self.pair_power::<R>(m - p, b[7 - q], a[q], out);
                    }
                }
            }
        }
    }

    /// `|X[p]|^2` and `|X[m - p]|^2` (`1 <= p <= m / 2`; the middle bin
    /// once) from `Z[p]`, `Z[m - p]`, into `out`.
    #[inline(always)]
    unsafe fn pair_power<R: Lanes>(&self, p: usize, zp: [R; 2], zq: [R; 2], out: &mut [V]) {
        let (xp, xq) = self.split_values::<R>(zp, zq, p);
        power::<R>(xp).st(&mut out[p]);
        if 2 * p != self.m {
            power::<R>(xq).st(&mut out[self.m - p]);
        }
    }

    /// [`LaneFft::split`] straight to `|X[k]|^2` (`out`: `m + 1` entries),
    /// with the operations of squaring the split's output.
    #[inline(always)]
    unsafe fn split_power<R: Lanes>(&self, re: &mut [V], im: &mut [V], out: &mut [V]) {
        self.split_with::<R>(re, im, |_, _, k, xr, xi| {
            power::<R>([xr, xi]).st(&mut out[k])
        })
    }

    /// The real-input split (see [`crate::rfft`]), in place: `Z[0..m]` to
    /// `X[0..=m]` (`re`, `im`: `m + 1` entries).
    #[inline(always)]
    unsafe fn split<R: Lanes>(&self, re: &mut [V], im: &mut [V]) {
        self.split_with::<R>(re, im, |re, im, k, xr, xi| {
            xr.st(&mut re[k]);
            xi.st(&mut im[k]);
        })
    }

    /// The split's arithmetic: `emit(re, im, k, Re X[k], Im X[k])` for every
    /// bin `k = 0 ..= m`, each pair `k`, `m - k` emitted after both of its
    /// inputs `Z[k]`, `Z[m - k]` are read (so `emit` may store in place).
    #[inline(always)]
    unsafe fn split_with<R: Lanes>(
        &self,
        re: &mut [V],
        im: &mut [V],
        mut emit: impl FnMut(&mut [V], &mut [V], usize, R, R),
    ) {
        let m = self.m;
        let ([x0r, x0i], [xmr, xmi]) = split_edge::<R>(re, im);
        emit(re, im, 0, x0r, x0i);
        emit(re, im, m, xmr, xmi);
        for k in 1..=m / 2 {
            let j = m - k;
            let ([xkr, xki], [xjr, xji]) = self.split_bin::<R>(re, im, k);
            emit(re, im, k, xkr, xki);
            if j != k {
                emit(re, im, j, xjr, xji);
            }
        }
    }

    /// One step of the split (`1 <= k <= m / 2`): `X[k]` and `X[m - k]`
    /// (real and imaginary parts) from `Z[k]` and `Z[m - k]`.
    #[inline(always)]
    unsafe fn split_bin<R: Lanes>(&self, re: &[V], im: &[V], k: usize) -> ([R; 2], [R; 2]) {
        let j = self.m - k;
        self.split_values::<R>(
            [R::ld(&re[k]), R::ld(&im[k])],
            [R::ld(&re[j]), R::ld(&im[j])],
            k,
        )
    }

    /// [`LaneFft::split_bin`] on the values `Z[k]`, `Z[m - k]`.
    #[inline(always)]
    unsafe fn split_values<R: Lanes>(
        &self,
        [zkr, zki]: [R; 2],
        [zjr, zji]: [R; 2],
        k: usize,
    ) -> ([R; 2], [R; 2]) {
        let half = R::splat(0.5);
        let zero = R::splat(0.0);
        // E = (Z[k] + conj Z[j]) / 2, O = (Z[k] - conj Z[j]) / 2.
        let er = half.mul(zkr.add(zjr));
        let ei = half.mul(zki.sub(zji));
        let or = half.mul(zkr.sub(zjr));
        let oi = half.mul(zki.add(zji));
        // T = i W^k O.
        let (wr, wi) = self.post[k];
        let (pr, pi) = cmul(or, oi, wr, wi);
        let (tr, ti) = (zero.sub(pi), pr);
        // X[k] = E - T, X[j] = conj(E + T).
        ([er.sub(tr), ei.sub(ti)], [er.add(tr), zero.sub(ei.add(ti))])
    }

    /// The split of two transforms at once (the left and right ears of
    /// [`LaneFft::transform`]), neither written back: `consume(k0, x)`
    /// receives runs of consecutive bins `k0 .. k0 + len` (`len <=`
    /// [`SPLIT_RUN`]) as `x = [Re XL, Im XL, Re XR, Im XR]`, `len` vectors
    /// each, small enough to stay in L1 while they are consumed. The runs
    /// cover every bin `0 ..= m` once. The values are those of
    /// [`LaneFft::forward`], bit for bit.
    pub fn split_pair(
        &self,
        left: (&[V], &[V]),
        right: (&[V], &[V]),
        consume: impl FnMut(usize, [&[V]; 4]),
    ) {
        let m = self.m;
        assert!(
            [left.0, left.1, right.0, right.1]
                .iter()
                .all(|b| b.len() >= m),
            "split_pair reads m values of each buffer"
        );
        // SAFETY: `run` chose R for this CPU; indices are < m (checked).
        with_lanes!(R => unsafe { self.split_pair_with::<R>(left, right, consume) })
    }

    #[inline(always)]
    unsafe fn split_pair_with<R: Lanes>(
        &self,
        (lre, lim): (&[V], &[V]),
        (rre, rim): (&[V], &[V]),
        mut consume: impl FnMut(usize, [&[V]; 4]),
    ) {
        let m = self.m;
        // Bins k (ascending, `lo`) and m - k (descending, filled from the
        // end of `hi` so that each run is in ascending bin order).
        let mut lo = [[V::ZERO; SPLIT_RUN]; 4];
        let mut hi = [[V::ZERO; SPLIT_RUN]; 4];
        let put = |buf: &mut [[V; SPLIT_RUN]; 4], p: usize, l: [R; 2], r: [R; 2]| {
            l[0].st(&mut buf[0][p]);
            l[1].st(&mut buf[1][p]);
            r[0].st(&mut buf[2][p]);
            r[1].st(&mut buf[3][p]);
        };
        #[inline(always)]
        fn runs(buf: &[[V; SPLIT_RUN]; 4], a: usize, b: usize) -> [&[V]; 4] {
            [&buf[0][a..b], &buf[1][a..b], &buf[2][a..b], &buf[3][a..b]]
        }
        let (l0, lm) = split_edge::<R>(lre, lim);
        let (r0, rm) = split_edge::<R>(rre, rim);
        put(&mut lo, 0, l0, r0);
        put(&mut hi, 0, lm, rm);
        consume(0, runs(&lo, 0, 1));
        consume(m, runs(&hi, 0, 1));
        let last = m / 2;
        let mut k0 = 1;
        while k0 <= last {
            let len = (last + 1 - k0).min(SPLIT_RUN);
            for i in 0..len {
                let k = k0 + i;
                let (lk, lj) = self.split_bin::<R>(lre, lim, k);
                let (rk, rj) = self.split_bin::<R>(rre, rim, k);
                put(&mut lo, i, lk, rk);
                put(&mut hi, SPLIT_RUN - 1 - i, lj, rj);
            }
            consume(k0, runs(&lo, 0, len));
            // Bins m - k0 - len + 1 ..= m - k0, without the middle bin
            // (m - k = k at k = m / 2), which the ascending run holds.
            let top = m - k0;
            let bottom = (m + 1 - k0 - len).max(last + 1);
            if top >= bottom {
                let n = top + 1 - bottom;
                consume(bottom, runs(&hi, SPLIT_RUN - n, SPLIT_RUN));
            }
            k0 += len;
        }
    }
}

/// Bins per run of [`LaneFft::split_pair`]: four runs of both ears,
/// 16 KiB, fit in L1 beside what the split reads.
pub const SPLIT_RUN: usize = 16;

/// `re^2 + im^2`, as the split's power is formed everywhere.
#[inline(always)]
unsafe fn power<R: Lanes>([re, im]: [R; 2]) -> R {
    re.mul(re).add(im.mul(im))
}

/// The split's bins 0 and m (both real): `Z[0]`'s parts summed and
/// subtracted.
#[inline(always)]
unsafe fn split_edge<R: Lanes>(re: &[V], im: &[V]) -> ([R; 2], [R; 2]) {
    split_edge_values::<R>([R::ld(&re[0]), R::ld(&im[0])])
}

/// [`split_edge`] on the value `Z[0]`.
#[inline(always)]
unsafe fn split_edge_values<R: Lanes>([z0r, z0i]: [R; 2]) -> ([R; 2], [R; 2]) {
    let zero = R::splat(0.0);
    ([z0r.add(z0i), zero], [z0r.sub(z0i), zero])
}

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

/// The first two radix-2 stages (spans 2 and 4: twiddles 1 and -i only)
/// as one multiply-free radix-4 pass.
#[inline(always)]
unsafe fn radix4_first<R: Lanes>(re: &mut [V], im: &mut [V]) {
    let m = re.len();
    // Spans 2 and 4: twiddles 1 and -i only.
    for g in (0..m).step_by(4) {
        let a0r = R::ld(&re[g]);
        let a0i = R::ld(&im[g]);
        let a1r = R::ld(&re[g + 1]);
        let a1i = R::ld(&im[g + 1]);
        let a2r = R::ld(&re[g + 2]);
        let a2i = R::ld(&im[g + 2]);
        let a3r = R::ld(&re[g + 3]);
        let a3i = R::ld(&im[g + 3]);
        let (b0r, b0i) = (a0r.add(a1r), a0i.add(a1i));
        let (b1r, b1i) = (a0r.sub(a1r), a0i.sub(a1i));
        let (b2r, b2i) = (a2r.add(a3r), a2i.add(a3i));
        let (b3r, b3i) = (a2r.sub(a3r), a2i.sub(a3i));
        // -i * b3 = b3i - i b3r
        b0r.add(b2r).st(&mut re[g]);
        b0i.add(b2i).st(&mut im[g]);
        b0r.sub(b2r).st(&mut re[g + 2]);
        b0i.sub(b2i).st(&mut im[g + 2]);
        b1r.add(b3i).st(&mut re[g + 1]);
        b1i.sub(b3r).st(&mut im[g + 1]);
        b1r.sub(b3i).st(&mut re[g + 3]);
        b1i.add(b3r).st(&mut im[g + 3]);
    }
}

/// Three radix-2 stages as one radix-8 pass of span `8e` over
/// sub-transforms of size `e`: for each `k < e` the eight values a span
/// `e` apart (block `j` holding the sub-transform of residue `rev3(j)`) are
/// loaded once, seven of them multiplied by `W^(r k)` (`W = exp(-2 pi i /
/// 8e)`, `tw[7k + r - 1]`), combined by an 8-point DFT and stored once in
/// natural order. At `k = 0` every twiddle is 1 and no product is formed
/// (the whole first pass, where `e = 1`, is multiply-free).
#[inline(always)]
unsafe fn radix8_stage<R: Lanes>(re: &mut [V], im: &mut [V], e: usize, tw: &[(f32, f32)]) {
    for g in (0..re.len()).step_by(8 * e) {
        radix8_butterfly::<R, false>(re, im, g, e, &[]);
        for (k, w) in tw.chunks_exact(7).enumerate().take(e).skip(1) {
            radix8_butterfly::<R, true>(re, im, g + k, e, w);
        }
    }
}

/// One butterfly of [`radix8_stage`]: the eight values at `at + q e`,
/// multiplied by the twiddles `w` when `TWIDDLED` (else by 1), transformed
/// and stored in place.
#[inline(always)]
unsafe fn radix8_butterfly<R: Lanes, const TWIDDLED: bool>(
    re: &mut [V],
    im: &mut [V],
    at: usize,
    e: usize,
    w: &[(f32, f32)],
) {
    let x = radix8_values::<R, TWIDDLED>(re, im, at, e, w);
    for (q, [xr, xi]) in x.into_iter().enumerate() {
        xr.st(&mut re[at + q * e]);
        xi.st(&mut im[at + q * e]);
    }
}

/// The outputs `q = 0..8` (real, imaginary) of the butterfly of
/// [`radix8_butterfly`], not stored.
#[inline(always)]
unsafe fn radix8_values<R: Lanes, const TWIDDLED: bool>(
    re: &[V],
    im: &[V],
    at: usize,
    e: usize,
    w: &[(f32, f32)],
) -> [[R; 2]; 8] {
    // Block holding residue r: rev3(r).
    const BLOCK: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];
    let h = R::splat(std::f32::consts::FRAC_1_SQRT_2);
    let src = |r: usize| at + BLOCK[r] * e;
    let mut tr = [R::splat(0.0); 8];
    let mut ti = [R::splat(0.0); 8];
    for r in 0..8 {
        let (a, b) = (R::ld(&re[src(r)]), R::ld(&im[src(r)]));
        (tr[r], ti[r]) = if TWIDDLED && r > 0 {
            cmul(a, b, w[r - 1].0, w[r - 1].1)
        } else {
            (a, b)
        };
    }
    // 8-point DFT by decimation in frequency: a = t[r] + t[r+4],
    // b = (t[r] - t[r+4]) W8^r, then 4-point DFTs of a (even
    // outputs) and b (odd outputs).
    let mut ar = [R::splat(0.0); 4];
    let mut ai = [R::splat(0.0); 4];
    let mut br = [R::splat(0.0); 4];
    let mut bi = [R::splat(0.0); 4];
    for r in 0..4 {
        ar[r] = tr[r].add(tr[r + 4]);
        ai[r] = ti[r].add(ti[r + 4]);
        br[r] = tr[r].sub(tr[r + 4]);
        bi[r] = ti[r].sub(ti[r + 4]);
    }
    // W8^1 = (1 - i)/sqrt2, W8^2 = -i, W8^3 = (-1 - i)/sqrt2.
    let (x, y) = (br[1], bi[1]);
    br[1] = h.mul(x.add(y));
    bi[1] = h.mul(y.sub(x));
    let (x, y) = (br[2], bi[2]);
    br[2] = y;
    bi[2] = R::splat(0.0).sub(x);
    let (x, y) = (br[3], bi[3]);
    br[3] = h.mul(y.sub(x));
    bi[3] = R::splat(0.0).sub(h.mul(x.add(y)));
    let mut out = [[R::splat(0.0); 2]; 8];
    for (parity, (pr, pi)) in [(ar, ai), (br, bi)].into_iter().enumerate() {
        // 4-point DFT: outputs 2p + parity.
        let (c0r, c0i) = (pr[0].add(pr[2]), pi[0].add(pi[2]));
        let (c1r, c1i) = (pr[1].add(pr[3]), pi[1].add(pi[3]));
        let (d0r, d0i) = (pr[0].sub(pr[2]), pi[0].sub(pi[2]));
        // -i (p1 - p3)
        let (d1r, d1i) = (pi[1].sub(pi[3]), pr[3].sub(pr[1]));
        out[parity] = [c0r.add(c1r), c0i.add(c1i)];
        out[2 + parity] = [d0r.add(d1r), d0i.add(d1i)];
        out[4 + parity] = [c0r.sub(c1r), c0i.sub(c1i)];
        out[6 + parity] = [d0r.sub(d1r), d0i.sub(d1i)];
    }
    out
}

/// One radix-2 stage of span `s` (twiddles `W_s^k`, `k < s / 2`).
#[inline(always)]
unsafe fn single_stage<R: Lanes>(re: &mut [V], im: &mut [V], s: usize, tw: &[(f32, f32)]) {
    let h = s / 2;
    for g in (0..re.len()).step_by(s) {
        for (k, &(wr, wi)) in tw.iter().enumerate() {
            let (p, q) = (g + k, g + k + h);
            let (tr, ti) = cmul(R::ld(&re[q]), R::ld(&im[q]), wr, wi);
            let (ar, ai) = (R::ld(&re[p]), R::ld(&im[p]));
            ar.add(tr).st(&mut re[p]);
            ai.add(ti).st(&mut im[p]);
            ar.sub(tr).st(&mut re[q]);
            ai.sub(ti).st(&mut im[q]);
        }
    }
}

/// Radix-2 stages of spans `s` and `2s` in one pass, as one radix-4 pass
/// of span `S = 2s`: each group of four elements `x0 .. x3` (a quarter span
/// `q = s / 2` apart) is loaded once and stored once, and takes three
/// twiddle products, `W^k x2`, `W^2k x1`, `W^3k x3` (`W = exp(-2 pi i / S)`);
/// `tw` holds `[W^k, W^2k, W^3k]` for `k < q`.
#[inline(always)]
unsafe fn radix4_stage<R: Lanes>(re: &mut [V], im: &mut [V], s: usize, tw: &[(f32, f32)]) {
    let q = s / 2;
    for g in (0..re.len()).step_by(2 * s) {
        for (k, w) in tw.chunks_exact(3).enumerate().take(q) {
            let (p0, p1, p2, p3) = (g + k, g + k + q, g + k + 2 * q, g + k + 3 * q);
            let (x0r, x0i) = (R::ld(&re[p0]), R::ld(&im[p0]));
            let (y1r, y1i) = cmul(R::ld(&re[p1]), R::ld(&im[p1]), w[1].0, w[1].1);
            let (y2r, y2i) = cmul(R::ld(&re[p2]), R::ld(&im[p2]), w[0].0, w[0].1);
            let (y3r, y3i) = cmul(R::ld(&re[p3]), R::ld(&im[p3]), w[2].0, w[2].1);
            let (a0r, a0i) = (x0r.add(y1r), x0i.add(y1i));
            let (a1r, a1i) = (x0r.sub(y1r), x0i.sub(y1i));
            let (b2r, b2i) = (y2r.add(y3r), y2i.add(y3i));
            let (b3r, b3i) = (y2r.sub(y3r), y2i.sub(y3i));
            a0r.add(b2r).st(&mut re[p0]);
            a0i.add(b2i).st(&mut im[p0]);
            a0r.sub(b2r).st(&mut re[p2]);
            a0i.sub(b2i).st(&mut im[p2]);
            // -i b3 = b3i - i b3r
            a1r.add(b3i).st(&mut re[p1]);
            a1i.sub(b3r).st(&mut im[p1]);
            a1r.sub(b3i).st(&mut re[p3]);
            a1i.add(b3r).st(&mut im[p3]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::noise;

    /// Direct DFT in f64: the one-sided spectrum of `x`.
    fn naive(x: &[f32]) -> Vec<(f64, f64)> {
        let n = x.len();
        (0..=n / 2)
            .map(|k| {
                let mut acc = (0.0, 0.0);
                for (j, &v) in x.iter().enumerate() {
                    let a = -2.0 * std::f64::consts::PI * ((k * j) % n) as f64 / n as f64;
                    acc.0 += v as f64 * a.cos();
                    acc.1 += v as f64 * a.sin();
                }
                acc
            })
            .collect()
    }

    /// `split_pair` hands over every bin of both transforms once, in runs of
    /// consecutive bins, with the values of `forward`, bit for bit.
    /// Every value of a gathered row is the frame it names, whatever the
    /// alignment of the destination and of the first frame, on this CPU's
    /// path and on the portable one.
    #[test]
    fn gather_row_reads_each_frame_of_its_row() {
        let stride = 3;
        let blocks: Vec<V> = (0..7 * stride)
            .map(|v| V(std::array::from_fn(|l| (v * 100 + l) as f32)))
            .collect();
        let want = |w: usize, g: usize| ((g / LANES * stride + w) * 100 + g % LANES) as f32;
        let mut out = vec![0f32; 200];
        let line = out.as_ptr().align_offset(64);
        for w in 0..stride {
            for first in 0..LANES + 3 {
                for n in 0..=(7 * LANES - first) {
                    for shift in 0..16 {
                        for portable in [false, true] {
                            out.fill(-1.0);
                            let dst = out[line + shift..].as_mut_ptr();
                            // SAFETY: 200 values hold line + shift + n (< 128
                            // + 16 + 16 * 7); every frame read lies in `blocks`.
                            unsafe {
                                let src = BlockRow {
                                    blocks: &blocks,
                                    stride,
                                    row: w,
                                    first,
                                };
                                if portable {
                                    src.copy_values(dst, 0, n)
                                } else {
                                    gather_row(dst, &src, n)
                                }
                            }
                            let got = &out[line + shift..];
                            for (i, &v) in got[..n].iter().enumerate() {
                                assert_eq!(v, want(w, first + i), "{w} {first} {n} {shift} {i}");
                            }
                            assert_eq!(got[n], -1.0, "wrote past the row");
                            assert!(out[..line + shift].iter().all(|&v| v == -1.0));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn split_pair_covers_every_bin_with_the_split_values() {
        for bits in 3..=12 {
            let n = 1usize << bits;
            let plan = LaneFft::new(n).unwrap();
            let data: Vec<Vec<f32>> = (0..2 * LANES).map(|l| noise(n, 90 + l as u64)).collect();
            let frames: Vec<&[f32]> = data.iter().map(|v| v.as_slice()).collect();
            let (left, right) = frames.split_at(LANES);
            let mut want = Vec::new();
            let mut half = Vec::new();
            for side in [left, right] {
                let (mut re, mut im) = plan.make_buffers();
                plan.forward(side, &mut re, &mut im);
                want.push((re, im));
                let mut f = Frames {
                    src: [plan.ones(); LANES],
                    win: [plan.ones(); LANES],
                    windowed: false,
                };
                f.src.copy_from_slice(side);
                let (mut re, mut im) = plan.make_buffers();
                plan.transform(&f, LANES, &mut re, &mut im);
                half.push((re, im));
            }
            let mut seen = vec![0usize; plan.n_bins()];
            plan.split_pair(
                (&half[0].0, &half[0].1),
                (&half[1].0, &half[1].1),
                |k0, x| {
                    assert!(x
                        .iter()
                        .all(|r| r.len() == x[0].len() && r.len() <= SPLIT_RUN));
                    for (i, k) in (k0..k0 + x[0].len()).enumerate() {
                        seen[k] += 1;
                        let expect = [&want[0].0[k], &want[0].1[k], &want[1].0[k], &want[1].1[k]];
                        for (got, exp) in x.iter().zip(expect) {
                            let (g, e) = (got[i].0.map(f32::to_bits), exp.0.map(f32::to_bits));
                            assert_eq!(g, e, "n={n} bin {k}");
                        }
                    }
                },
            );
            assert!(seen.iter().all(|&c| c == 1), "n={n}: {seen:?}");
        }
    }

    #[test]
    fn matches_the_direct_dft_for_every_length_and_lane() {
        for bits in 3..=11 {
            let n = 1usize << bits;
            let plan = LaneFft::new(n).unwrap();
            let data: Vec<Vec<f32>> = (0..LANES - 3).map(|l| noise(n, 7 + l as u64)).collect();
            let frames: Vec<&[f32]> = data.iter().map(|v| v.as_slice()).collect();
            let (mut re, mut im) = plan.make_buffers();
            plan.forward(&frames, &mut re, &mut im);
            for (l, x) in data.iter().enumerate() {
                let want = naive(x);
                let scale = (n as f64).sqrt();
                for (k, &(wr, wi)) in want.iter().enumerate() {
                    let (gr, gi) = (re[k].0[l] as f64, im[k].0[l] as f64);
                    let err = ((gr - wr).powi(2) + (gi - wi).powi(2)).sqrt();
                    assert!(
                        err < 2e-6 * scale * bits as f64,
                        "n={n} lane={l} k={k}: {err}"
                    );
                }
            }
            for l in frames.len()..LANES {
                assert!(
                    re.iter().chain(&im).all(|v| v.0[l] == 0.0),
                    "n={n}: idle lane {l}"
                );
            }
        }
    }

    #[test]
    fn a_frame_gives_the_same_bits_in_every_lane() {
        let n = 1024;
        let plan = LaneFft::new(n).unwrap();
        let x = noise(n, 3);
        let frames = vec![x.as_slice(); LANES];
        let (mut re, mut im) = plan.make_buffers();
        plan.forward(&frames, &mut re, &mut im);
        for v in re.iter().chain(&im) {
            assert!(v.0.iter().all(|&e| e.to_bits() == v.0[0].to_bits()));
        }
        // The same frame alone in a block.
        let (mut re1, mut im1) = plan.make_buffers();
        plan.forward(&frames[..1], &mut re1, &mut im1);
        for (a, b) in re.iter().zip(&re1).chain(im.iter().zip(&im1)) {
            assert_eq!(a.0[5].to_bits(), b.0[0].to_bits());
        }
    }

    #[test]
    fn pure_tones_land_in_their_bins() {
        let n = 256;
        let plan = LaneFft::new(n).unwrap();
        let data: Vec<Vec<f32>> = (0..4)
            .map(|b| {
                (0..n)
                    .map(|j| {
                        (2.0 * std::f64::consts::PI * (b * 9) as f64 * j as f64 / n as f64).cos()
                            as f32
                    })
                    .collect()
            })
            .collect();
        let frames: Vec<&[f32]> = data.iter().map(|v| v.as_slice()).collect();
        let (mut re, mut im) = plan.make_buffers();
        plan.forward(&frames, &mut re, &mut im);
        for b in 0..4 {
            let k0 = b * 9;
            let peak = if k0 == 0 { n as f32 } else { n as f32 / 2.0 };
            for k in 0..=n / 2 {
                let mag = (re[k].0[b].powi(2) + im[k].0[b].powi(2)).sqrt();
                let want = if k == k0 { peak } else { 0.0 };
                assert!((mag - want).abs() < 1e-3, "tone {k0} bin {k}: {mag}");
            }
        }
    }

    #[test]
    fn every_backend_gives_the_same_bits() {
        // 512: radix-4 passes; 1024 and 8192: radix-8, the first two passes
        // run 64 values at a time, the last one fused with the power split.
        for n in [512, 1024, 8192] {
            let plan = LaneFft::new(n).unwrap();
            let data: Vec<Vec<f32>> = (0..LANES).map(|l| noise(n, 40 + l as u64)).collect();
            let frames: Vec<&[f32]> = data.iter().map(|v| v.as_slice()).collect();
            let (mut re, mut im) = plan.make_buffers();
            plan.forward(&frames, &mut re, &mut im);
            let bits = |v: &[V]| {
                v.iter()
                    .flat_map(|x| x.0.map(f32::to_bits))
                    .collect::<Vec<_>>()
            };
            let (mut r2, mut i2) = plan.make_buffers();
            let mut f = Frames {
                src: [&plan.ones; LANES],
                win: [&plan.ones; LANES],
                windowed: false,
            };
            f.src.copy_from_slice(&frames);
            plan.forward_with::<Portable>(&f, LANES, &mut r2, &mut i2);
            assert!(
                bits(&re) == bits(&r2) && bits(&im) == bits(&i2),
                "portable {n}"
            );
            #[cfg(target_arch = "x86_64")]
            {
                if crate::fastmath::has_avx2_fma() {
                    plan.forward_with::<Avx2>(&f, LANES, &mut r2, &mut i2);
                    assert!(bits(&re) == bits(&r2) && bits(&im) == bits(&i2), "avx2 {n}");
                }
                if crate::fastmath::has_avx512f() {
                    plan.forward_with::<Avx512>(&f, LANES, &mut r2, &mut i2);
                    assert!(
                        bits(&re) == bits(&r2) && bits(&im) == bits(&i2),
                        "avx512 {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn transposed_writes_put_each_frame_in_its_row() {
        let src: Vec<V> = (0..16)
            .map(|w| V(std::array::from_fn(|i| (w * 100 + i) as f32)))
            .collect();
        let stride = 21;
        let mut dst = vec![-1.0f32; 16 * stride];
        unsafe { transpose_out(&src, dst.as_mut_ptr(), stride) };
        for i in 0..16 {
            for w in 0..stride {
                let want = if w < 16 { (w * 100 + i) as f32 } else { -1.0 };
                assert_eq!(dst[i * stride + w], want, "frame {i} value {w}");
            }
        }
    }

    #[test]
    fn power_spectra_equal_the_squared_spectra() {
        // 1024 and 8192 end in a whole-block radix-8 pass, fused with the
        // split to power; the others do not.
        for n in [8usize, 64, 1024, 2048, 8192] {
            let plan = LaneFft::new(n).unwrap();
            let data: Vec<Vec<f32>> = (0..LANES - 1).map(|l| noise(n, 70 + l as u64)).collect();
            let mut f = Frames {
                src: [&plan.ones; LANES],
                win: [&plan.ones; LANES],
                windowed: false,
            };
            for (s, d) in f.src.iter_mut().zip(&data) {
                *s = d;
            }
            let (mut re, mut im) = plan.make_buffers();
            plan.forward_windowed(&f, LANES - 1, &mut re, &mut im);
            let (mut r2, mut i2) = plan.make_buffers();
            let mut p = vec![V::ZERO; plan.n_bins()];
            plan.forward_power(&f, LANES - 1, &mut r2, &mut i2, &mut p);
            for k in 0..plan.n_bins() {
                for l in 0..LANES {
                    let (a, b) = (re[k].0[l], im[k].0[l]);
                    assert_eq!(
                        p[k].0[l].to_bits(),
                        (a * a + b * b).to_bits(),
                        "n={n} k={k} l={l}"
                    );
                }
            }
        }
    }

    #[test]
    fn streamed_copies_equal_plain_ones() {
        let src: Vec<f32> = (0..300).map(|i| i as f32 * 0.5 - 7.0).collect();
        for offset in 0..17 {
            for n in [0usize, 1, 15, 16, 17, 31, 64, 100, 283] {
                let mut dst = vec![-1.0f32; 320];
                unsafe { stream_copy(dst.as_mut_ptr().add(offset), &src[..n]) };
                stream_fence();
                assert_eq!(&dst[offset..offset + n], &src[..n], "offset {offset} n {n}");
                assert!(dst[..offset]
                    .iter()
                    .chain(&dst[offset + n..])
                    .all(|&v| v == -1.0));
            }
        }
    }

    #[test]
    fn unsupported_lengths_have_no_plan() {
        for n in [0, 1, 2, 4, 6, 12, 1000, 1 << 17] {
            assert!(LaneFft::new(n).is_none(), "{n}");
        }
    }
}

#[cfg(test)]
mod accuracy {
    use super::*;
    use crate::testutil::noise;

    /// Rounding error against the f64 DFT no larger than RustFFT's (through
    /// the half-length transform) on the same frame.
    #[test]
    fn rounding_error_matches_rustfft() {
        let n = 1024;
        let plan = LaneFft::new(n).unwrap();
        let x = noise(n, 11);
        let want = {
            (0..=n / 2)
                .map(|k| {
                    let mut acc = (0.0f64, 0.0f64);
                    for (j, &v) in x.iter().enumerate() {
                        let a = -2.0 * std::f64::consts::PI * ((k * j) % n) as f64 / n as f64;
                        acc.0 += v as f64 * a.cos();
                        acc.1 += v as f64 * a.sin();
                    }
                    acc
                })
                .collect::<Vec<_>>()
        };
        let (mut re, mut im) = plan.make_buffers();
        plan.forward(&[&x], &mut re, &mut im);
        let half = crate::rfft::RealFft::new(n);
        let mut inp = x.clone();
        let mut out = half.make_output_vec();
        half.process(&mut inp, &mut out).unwrap();
        let (mut e1, mut e2, mut m1, mut m2) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for k in 0..=n / 2 {
            let d1 = ((re[k].0[0] as f64 - want[k].0).powi(2)
                + (im[k].0[0] as f64 - want[k].1).powi(2))
            .sqrt();
            let d2 = ((out[k].re as f64 - want[k].0).powi(2)
                + (out[k].im as f64 - want[k].1).powi(2))
            .sqrt();
            e1 += d1 * d1;
            e2 += d2 * d2;
            m1 = m1.max(d1);
            m2 = m2.max(d2);
        }
        let (r1, r2) = ((e1 / 513.0).sqrt(), (e2 / 513.0).sqrt());
        assert!(
            r1 < 1.5 * r2 && m1 < 1.5 * m2,
            "rms {r1:e} vs {r2:e}, max {m1:e} vs {m2:e}"
        );
    }
}
