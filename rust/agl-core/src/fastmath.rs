//! Branch-free, vectorisable elementary functions for the hot loops.
//!
//! `ln_f32` uses the identity `ln m = 2 atanh((m - 1) / (m + 1))` with the
//! mantissa reduced to `[sqrt(1/2), sqrt(2))`, so `|s| < 0.1716` and the odd
//! series through `s^9` has a truncation error below `4e-10`; rounding in f32
//! arithmetic keeps the result within a few ulp of `f32::ln`. Inputs that are
//! not positive normal numbers fall back to the standard library.

const SQRT2: f32 = std::f32::consts::SQRT_2;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
const LOG10_E: f32 = std::f32::consts::LOG10_E;

/// Natural logarithm of a positive normal `x` (see module docs).
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    let bits = x.to_bits();
    let e0 = ((bits >> 23) & 0xff) as i32 - 127;
    let m0 = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m0 > SQRT2;
    let m = if big { m0 * 0.5 } else { m0 };
    let e = (if big { e0 + 1 } else { e0 }) as f32;
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let poly = 2.0 + s2 * (2.0 / 3.0 + s2 * (0.4 + s2 * (2.0 / 7.0 + s2 * (2.0 / 9.0))));
    (s * poly + e * LN2_LO) + e * LN2_HI
}

/// `ln` over a slice in place; exact fallback for non-normal or non-positive
/// values.
#[inline(always)]
pub fn ln_inplace(x: &mut [f32]) {
    let mut odd = false;
    for v in x.iter() {
        odd |= !(*v >= f32::MIN_POSITIVE && *v <= f32::MAX);
    }
    if odd {
        x.iter_mut().for_each(|v| *v = v.ln());
    } else {
        x.iter_mut().for_each(|v| *v = ln_f32(*v));
    }
}

/// Environment variable that, set to `off` (or `0`, `false`, `scalar`,
/// `none`) before the first kernel runs, forces the portable scalar code
/// paths in place of the AVX2/AVX-512 ones, and plans the cached complex
/// FFTs with RustFFT's scalar planner. Transforms planned through `realfft`
/// (odd lengths, f64, FFT convolution) keep RustFFT's own detection.
pub const SIMD_ENV: &str = "AGL_FAST_SIMD";

/// Whether SIMD code paths may run (see [`SIMD_ENV`]; read once).
pub fn simd_enabled() -> bool {
    use std::sync::OnceLock;
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let v = std::env::var(SIMD_ENV).unwrap_or_default();
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "scalar" | "none"
        )
    })
}

/// Whether this CPU runs AVX2 and FMA and SIMD is enabled (detected once).
#[cfg(target_arch = "x86_64")]
pub fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        simd_enabled() && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    })
}

/// Whether AVX-512F may run too (implies [`has_avx2_fma`]).
#[cfg(target_arch = "x86_64")]
pub fn has_avx512f() -> bool {
    has_avx2_fma() && is_x86_feature_detected!("avx512f")
}

/// Run `f` compiled for AVX2+FMA when the CPU has them (the closure is
/// inlined into a `target_feature` function, so its loops vectorise 8 wide),
/// else as is. Mark the closure `#[inline(always)]` (and what it calls):
/// with fat LTO the inliner otherwise keeps a large closure out of line,
/// compiled without AVX2.
#[inline(always)]
pub fn vectorized<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T>(f: impl FnOnce() -> T) -> T {
            f()
        }
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Whether this CPU runs AVX-512 F and DQ (detected once).
#[cfg(target_arch = "x86_64")]
pub fn has_avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        simd_enabled()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
    })
}

/// [`vectorized`], compiled 8 doubles wide (AVX-512 F+DQ) where the CPU has
/// it: for the double-precision loops, whose division and 64-bit integer
/// steps gain most from the width. Falls back to [`vectorized`].
#[inline(always)]
pub fn vectorized_wide<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
        unsafe fn avx512<T>(f: impl FnOnce() -> T) -> T {
            f()
        }
        if has_avx512() {
            // SAFETY: the CPU supports AVX-512 F and DQ (checked above).
            return unsafe { avx512(f) };
        }
    }
    vectorized(f)
}

/// Sum in f64 with four independent lanes (no chain of dependent adds, so
/// it vectorises and runs at add throughput rather than latency).
#[inline(always)]
pub fn sum_f64<T: Copy + Into<f64>>(x: &[T]) -> f64 {
    let mut s = [0.0f64; 4];
    let mut it = x.chunks_exact(4);
    for c in &mut it {
        for l in 0..4 {
            s[l] += c[l].into();
        }
    }
    let rest: f64 = it.remainder().iter().map(|&v| v.into()).sum();
    s.iter().sum::<f64>() + rest
}

/// Largest of `init` and the values of `x` (with `f(v)` applied to each),
/// over sixteen independent lanes so the reduction vectorises; NaN values
/// are skipped (`v > m` is false for them).
#[inline(always)]
pub fn max_f32(x: &[f32], init: f32, f: impl Fn(f32) -> f32) -> f32 {
    // Lane l holds the largest f(v) of the values at positions = l mod 16.
    let mut acc = [init; 16];
    let mut it = x.chunks_exact(16);
    for c in &mut it {
        for l in 0..16 {
            let v = f(c[l]);
            acc[l] = if v > acc[l] { v } else { acc[l] };
        }
    }
    for (l, &v) in it.remainder().iter().enumerate() {
        let v = f(v);
        acc[l] = if v > acc[l] { v } else { acc[l] };
    }
    acc.iter().fold(init, |m, &v| if v > m { v } else { m })
}

/// `10 * log10(max(x, floor))` in place; `floor` must be positive.
#[inline(always)]
pub fn db10_floor_inplace(x: &mut [f32], floor: f32) {
    let scale = 10.0 * LOG10_E;
    if floor >= f32::MIN_POSITIVE {
        let mut bad = false;
        for v in x.iter() {
            bad |= !(*v <= f32::MAX);
        }
        if !bad {
            x.iter_mut().for_each(|v| *v = scale * ln_f32(v.max(floor)));
            return;
        }
    }
    x.iter_mut().for_each(|v| *v = 10.0 * v.max(floor).log10());
}

/// `dst = 10 * log10(max(p, floor)) - offset` with `p = |x|` (or `x * x`
/// with `square`) for every `x` of `src`: the values `db10_floor_inplace`
/// followed by the subtraction gives, in one pass, with the largest result.
/// `None` when some `p` is NaN or infinite (or `floor` is below the
/// smallest normal number): the caller then takes the exact path. `src` and
/// `dst` have one length.
#[inline(always)]
pub fn db10_floor_sub(
    src: &[f32],
    dst: &mut [f32],
    floor: f32,
    offset: f32,
    square: bool,
) -> Option<f32> {
    if !(floor >= f32::MIN_POSITIVE) {
        return None;
    }
    let scale = 10.0 * LOG10_E;
    let mut acc = [f32::NEG_INFINITY; 16];
    let mut bad = [false; 16];
    let mut one = |x: f32, l: usize, out: &mut f32| {
        let p = if square { x * x } else { x.abs() };
        bad[l] |= !(p <= f32::MAX);
        let v = scale * ln_f32(p.max(floor)) - offset;
        *out = v;
        acc[l] = if v > acc[l] { v } else { acc[l] };
    };
    let mut s = src.chunks_exact(16);
    let mut d = dst.chunks_exact_mut(16);
    for (a, b) in (&mut s).zip(&mut d) {
        for l in 0..16 {
            one(a[l], l, &mut b[l]);
        }
    }
    for (l, (&x, out)) in s
        .remainder()
        .iter()
        .zip(d.into_remainder().iter_mut())
        .enumerate()
    {
        one(x, l, out);
    }
    if bad.iter().any(|&b| b) {
        return None;
    }
    Some(
        acc.iter()
            .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m }),
    )
}

const LN2_HI_F64: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO_F64: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// Natural logarithm of a positive normal finite `x` in double precision:
/// the mantissa is reduced to `[sqrt(1/2), sqrt(2))` by integer arithmetic
/// on the bits, then `ln m = 2 atanh(s)` with `s = (m - 1) / (m + 1)`,
/// `|s| < 0.1716`, through `s^21` (truncation below `1e-18` relative).
/// Within a few ulp of `f64::ln`. Branch-free and free of the 64-bit
/// arithmetic shifts and integer-to-float conversions AVX2 lacks, so loops
/// over it vectorise.
#[inline(always)]
pub fn ln_f64(x: f64) -> f64 {
    const SQRT_HALF_BITS: u64 = 0x3fe6_a09e_667f_3bcd;
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    let bits = x.to_bits();
    let t = bits.wrapping_sub(SQRT_HALF_BITS);
    // The exponent k (t >> 52, signed) biased by 1024 to stay unsigned,
    // turned into a float through the 2^52 mantissa trick.
    let biased = (t.wrapping_add(1 << 62)) >> 52;
    let e = (f64::from_bits(0x4330_0000_0000_0000 | biased) - TWO_52) - 1024.0;
    let m = f64::from_bits(bits.wrapping_sub(t & 0xfff0_0000_0000_0000));
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // sum over k of s2^k / (2k + 3), k = 0..9, by Estrin's scheme: four
    // dependent steps instead of Horner's nine, so that neighbouring values
    // overlap in the pipeline.
    let (z2, z4) = (s2 * s2, s2 * s2 * (s2 * s2));
    let z8 = z4 * z4;
    let p0 = 1.0 / 3.0 + s2 * (1.0 / 5.0);
    let p1 = 1.0 / 7.0 + s2 * (1.0 / 9.0);
    let p2 = 1.0 / 11.0 + s2 * (1.0 / 13.0);
    let p3 = 1.0 / 15.0 + s2 * (1.0 / 17.0);
    let p4 = 1.0 / 19.0 + s2 * (1.0 / 21.0);
    let poly = ((p0 + z2 * p1) + z4 * (p2 + z2 * p3)) + z8 * p4;
    let r = 2.0 * s * s2 * poly + e * LN2_LO_F64;
    (2.0 * s + r) + e * LN2_HI_F64
}

/// The dB value of one input of [`db10_floor_f64`]: `10 * log10(max(p,
/// floor)) - offset` with `p = x` (or `x * x` with `square`); infinity and
/// NaN pass through. The same IEEE operations in a scalar call and in every
/// lane of a vectorised loop.
/// `FAST` (a normal `floor`) takes [`ln_f64`], otherwise the library's
/// `log10` (subnormal values); a loop is instantiated for each.
#[inline(always)]
fn db10_one<const FAST: bool>(x: f64, floor: f64, offset: f64, square: bool) -> f64 {
    let p = if square { x * x } else { x };
    // NaN fails `p < floor` and is kept.
    let q = if p < floor { floor } else { p };
    if FAST {
        let d = 10.0 * std::f64::consts::LOG10_E * ln_f64(q) - offset;
        if q < f64::INFINITY {
            d
        } else {
            q
        }
    } else {
        10.0 * q.log10() - offset
    }
}

/// `dst = 10 * log10(max(p, floor)) - offset` for every `p` of `src` (or
/// `p * p` with `square`), in double precision, and the maximum of the
/// results; `None` when `src` holds NaN. `floor` must be positive and
/// finite; `src` and `dst` have one length. The map, then the maximum,
/// each vectorised, on blocks that stay in L1 between the two.
#[inline(always)]
pub fn db10_floor_f64(
    src: &[f64],
    dst: &mut [f64],
    floor: f64,
    offset: f64,
    square: bool,
) -> Option<f64> {
    let mut lanes = [f64::NEG_INFINITY; 4];
    let mut nan = [false; 4];
    let mut max = f64::NEG_INFINITY;
    let mut any_nan = false;
    for (dst, src) in dst.chunks_mut(2048).zip(src.chunks(2048)) {
        if floor >= f64::MIN_POSITIVE {
            for (v, &x) in dst.iter_mut().zip(src) {
                *v = db10_one::<true>(x, floor, offset, square);
            }
        } else {
            for (v, &x) in dst.iter_mut().zip(src) {
                *v = db10_one::<false>(x, floor, offset, square);
            }
        }
        let mut it = dst.chunks_exact(4);
        for c in &mut it {
            for l in 0..4 {
                nan[l] |= c[l].is_nan();
                lanes[l] = if c[l] > lanes[l] { c[l] } else { lanes[l] };
            }
        }
        for &v in it.remainder() {
            any_nan |= v.is_nan();
            max = max.max(v);
        }
    }
    let max = lanes.iter().fold(max, |a, &b| a.max(b));
    let any_nan = any_nan || nan.iter().any(|&b| b);
    (!any_nan).then_some(max)
}

/// [`db10_floor_f64`] clipped at `top_db` below its maximum, in one pass
/// over `dst`: the largest `p` of `src` is found first (a read-only scan;
/// `None` when `src` holds NaN), its dB value is the maximum (the map
/// rises with `p`; at worst an ulp of rounding apart from the largest
/// mapped value), and each value is written as
/// `max(db, max_db - top_db)`. Returns the maximum.
#[inline(always)]
pub fn db10_floor_clip_f64(
    src: &[f64],
    dst: &mut [f64],
    floor: f64,
    offset: f64,
    square: bool,
    top_db: f64,
) -> Option<f64> {
    let mut lanes = [f64::NEG_INFINITY; 8];
    let mut nan = [false; 8];
    let mut it = src.chunks_exact(8);
    for c in &mut it {
        for l in 0..8 {
            let p = if square { c[l] * c[l] } else { c[l] };
            nan[l] |= p.is_nan();
            lanes[l] = if p > lanes[l] { p } else { lanes[l] };
        }
    }
    let mut top = lanes.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    let mut any_nan = nan.iter().any(|&b| b);
    for &x in it.remainder() {
        let p = if square { x * x } else { x };
        any_nan |= p.is_nan();
        top = top.max(p);
    }
    if any_nan {
        return None;
    }
    // `top` is already squared: the map's own square is not applied again.
    let fast = floor >= f64::MIN_POSITIVE;
    let max_db = if fast {
        db10_one::<true>(top, floor, offset, false)
    } else {
        db10_one::<false>(top, floor, offset, false)
    };
    let clip = max_db - top_db;
    if fast {
        for (v, &x) in dst.iter_mut().zip(src) {
            let d = db10_one::<true>(x, floor, offset, square);
            *v = if d < clip { clip } else { d };
        }
    } else {
        for (v, &x) in dst.iter_mut().zip(src) {
            let d = db10_one::<false>(x, floor, offset, square);
            *v = if d < clip { clip } else { d };
        }
    }
    Some(max_db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_is_accurate_across_the_normal_range() {
        let mut worst = 0f64;
        let mut x = f32::MIN_POSITIVE;
        while x < 1e30 {
            for m in [1.0f32, 1.1, 1.37, 1.414, 1.4143, 1.7, 1.999] {
                let v = x * m;
                let got = ln_f32(v) as f64;
                let want = (v as f64).ln();
                worst = worst.max((got - want).abs() / want.abs().max(1.0));
            }
            x *= 3.7;
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(ln_f32(1.0), 0.0);
    }

    #[test]
    fn db_floor_matches_log10() {
        let mut x: Vec<f32> = (0..1000).map(|i| (i as f32) * 1e-3).collect();
        let want: Vec<f32> = x.iter().map(|v| 10.0 * v.max(1e-10).log10()).collect();
        db10_floor_inplace(&mut x, 1e-10);
        for (a, b) in x.iter().zip(&want) {
            assert!((a - b).abs() < 2e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn ln_f64_is_accurate_across_the_normal_range() {
        let mut worst = 0f64;
        let mut x = f64::MIN_POSITIVE;
        while x < 1e300 {
            for m in [1.0f64, 1.1, 1.37, 1.414, 1.4143, 1.7, 1.999] {
                let v = x * m;
                let (got, want) = (ln_f64(v), v.ln());
                worst = worst.max((got - want).abs() / want.abs().max(1.0));
            }
            x *= 3.7;
        }
        assert!(worst < 4e-16, "worst relative error {worst}");
        assert_eq!(ln_f64(1.0), 0.0);
        assert!((ln_f64(std::f64::consts::E) - 1.0).abs() < 3e-16);
    }

    #[test]
    fn f64_db_clip_is_the_map_then_the_clip_in_one_pass() {
        // Powers and amplitudes over 30 decades, zeros and an infinity-free
        // tail of odd length: the one-pass clip gives the two-pass values.
        let x: Vec<f64> = (0..1003)
            .map(|i| {
                let v = 10f64.powf((i % 61) as f64 / 2.0 - 20.0) * (1.0 + (i as f64 * 0.37).sin());
                if i % 7 == 0 {
                    -v
                } else {
                    v
                }
            })
            .collect();
        for square in [false, true] {
            for (floor, top_db) in [(1e-10, 80.0), (1e-5, 0.0), (1e-310, 120.0)] {
                let mut a = vec![0.0; x.len()];
                let max = db10_floor_f64(&x, &mut a, floor, 1.5, square).unwrap();
                let clip = max - top_db;
                let mut b = vec![0.0; x.len()];
                let m = db10_floor_clip_f64(&x, &mut b, floor, 1.5, square, top_db).unwrap();
                assert_eq!(m, max);
                for (va, vb) in a.iter().zip(&b) {
                    assert_eq!(va.max(clip), *vb);
                }
            }
        }
        let mut y = vec![0.0; 3];
        assert!(
            db10_floor_clip_f64(&[1.0, f64::NAN, 2.0], &mut y, 1e-10, 0.0, true, 80.0).is_none()
        );
    }

    #[test]
    fn f64_db_floor_matches_log10_and_flags_nan() {
        let x0: Vec<f64> = (0..1000)
            .map(|i| (i as f64) * 1e-3)
            .chain([f64::INFINITY])
            .collect();
        let want: Vec<f64> = x0
            .iter()
            .map(|v| 10.0 * v.max(1e-10).log10() - 3.0)
            .collect();
        let mut x = vec![0.0; x0.len()];
        let max = db10_floor_f64(&x0, &mut x, 1e-10, 3.0, false).unwrap();
        for (a, b) in x.iter().zip(&want) {
            assert!(a == b || (a - b).abs() < 1e-12, "{a} vs {b}");
        }
        assert_eq!(max, f64::INFINITY);
        let mut y = vec![0.0; 3];
        assert!(db10_floor_f64(&[1.0, f64::NAN, 2.0], &mut y, 1e-10, 0.0, true).is_none());
        let mut z = vec![0.0; 2];
        let m = db10_floor_f64(&[2.0, 1e-200], &mut z, 1e-310, 0.0, true).unwrap();
        assert!((z[0] - 10.0 * 4f64.log10()).abs() < 1e-12 && m == z[0]);
    }
}

#[cfg(test)]
mod max_tests {
    use super::max_f32;

    #[test]
    fn lane_maximum_equals_the_sequential_one() {
        for n in [0usize, 1, 15, 16, 17, 100] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 1.5).collect();
            let want = x.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v.abs()));
            assert_eq!(max_f32(&x, f32::NEG_INFINITY, f32::abs), want, "n={n}");
            let want = x.iter().fold(-100.0f32, |a, &v| a.max(v));
            assert_eq!(max_f32(&x, -100.0, |v| v), want, "n={n}");
        }
        assert_eq!(max_f32(&[f32::NAN, 2.0, f32::NAN], 0.0, |v| v), 2.0);
    }
}
