//! Moving block values to and from memory: non-temporal copies, the
//! 16 x 16 transpose out of a block, row gathers and prefetches.

#[cfg(target_arch = "x86_64")]
use super::x86;
use super::{LANES, V};

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
    pub(super) unsafe fn copy_values(&self, dst: *mut f32, from: usize, to: usize) {
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
