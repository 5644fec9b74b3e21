//! The AVX2 and AVX-512 backends of [`super::Lanes`] and the AVX-512
//! memory kernels.

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
                for ((row, f), w) in rows.iter_mut().zip(&src.src[..used]).zip(&src.win[..used]) {
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
