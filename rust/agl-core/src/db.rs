//! Decibel conversions with librosa's semantics, applied to one item at a
//! time (so `ref=max` and `top_db` are per item in a batch).

use crate::error::{AglError, Result};
use crate::fastmath::{db10_floor_clip_f64, db10_floor_f64, vectorized_wide};
use crate::parallel::{install, Cancel};

/// The reference of a dB conversion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DbRef {
    /// A fixed reference value (librosa's `ref=1.0` etc.).
    Value(f32),
    /// The item's maximum (librosa's `ref=np.max`).
    Max,
}

/// Validated dB parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DbParams {
    pub reference: DbRef,
    pub amin: f32,
    pub top_db: Option<f32>,
}

impl DbParams {
    pub fn new(reference: DbRef, amin: f32, top_db: Option<f32>) -> Result<Self> {
        if !(amin > 0.0 && amin.is_finite()) {
            return Err(AglError::param("amin", amin, "must be strictly positive"));
        }
        if let Some(t) = top_db {
            if t.is_nan() || t < 0.0 {
                return Err(AglError::param("top_db", t, "must be non-negative"));
            }
        }
        if let DbRef::Value(r) = reference {
            if !r.is_finite() {
                return Err(AglError::param("ref", r, "must be finite"));
            }
        }
        Ok(DbParams {
            reference,
            amin,
            top_db,
        })
    }
}

/// `power_to_db` (or `amplitude_to_db` with `amplitude`) of each row of
/// `data` (rows of `width` values) in place, rows in parallel: `ref=max`
/// and `top_db` apply per row. Stops early, with an error, when `cancel`
/// is set.
pub fn to_db_batch(
    data: &mut [f32],
    width: usize,
    p: &DbParams,
    amplitude: bool,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<()> {
    use rayon::prelude::*;
    install(n_threads, || {
        data.par_chunks_mut(width.max(1)).for_each(|row| {
            if cancel.is_cancelled() {
                return;
            }
            if amplitude {
                amplitude_to_db_inplace(row, p)
            } else {
                power_to_db_inplace(row, p)
            }
        });
    })?;
    cancel.check()
}

/// The dB parameters of the float64 path: a fixed reference (`None` is
/// the row's maximum), the floor and the dynamic range, as
/// [`to_db_f64`] takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DbParams64 {
    pub reference: Option<f64>,
    pub amin: f64,
    pub top_db: Option<f64>,
}

/// A sample type the row-wise dB conversion runs on, with its parameters
/// and its one-row kernel.
pub trait DbSample: Copy + Send + Sync {
    type Params: Sync;
    /// dB of one row of `src` into `dst` (same length).
    fn db_row(src: &[Self], dst: &mut [Self], p: &Self::Params, amplitude: bool) -> Result<()>;
}

impl DbSample for f32 {
    type Params = DbParams;
    fn db_row(src: &[f32], dst: &mut [f32], p: &DbParams, amplitude: bool) -> Result<()> {
        to_db_into(src, dst, p, amplitude)
    }
}

impl DbSample for f64 {
    type Params = DbParams64;
    fn db_row(src: &[f64], dst: &mut [f64], p: &DbParams64, amplitude: bool) -> Result<()> {
        to_db_f64(src, dst, p.reference, p.amin, p.top_db, amplitude)
    }
}

/// `power_to_db` (or `amplitude_to_db` with `amplitude`) of each row of
/// `src` (rows of `width` values) into the same row of `dst`, rows in
/// parallel, in the precision of the samples: `ref=max` and `top_db` apply
/// per row. Stops early, with an error, when `cancel` is set.
pub fn to_db_rows<T: DbSample>(
    src: &[T],
    dst: &mut [T],
    width: usize,
    p: &T::Params,
    amplitude: bool,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<()> {
    use rayon::prelude::*;
    if src.len() != dst.len() {
        return Err(AglError::Shape(format!(
            "output holds {} values for {} inputs",
            dst.len(),
            src.len()
        )));
    }
    let width = width.max(1);
    install(n_threads, || {
        dst.par_chunks_mut(width)
            .zip(src.par_chunks(width))
            .try_for_each(|(row, s)| {
                cancel.check()?;
                T::db_row(s, row, p, amplitude)
            })
    })?
}

/// `power_to_db` in double precision from `src` into `dst` (same length;
/// the float64 path, and float32 input whose squared reference would
/// overflow): librosa's `10 log10(max(amin, |x|)) - 10 log10(max(amin,
/// |ref|))`, clipped at `max - top_db`. `reference` `None` is the maximum of
/// `|x|`. With `amplitude`, `x`, `ref` and `amin` are amplitudes (squared
/// first). One vectorised pass (two with `top_db`); NaN in `src` is an
/// error naming its index (librosa would hide it at the floor).
pub fn to_db_f64(
    src: &[f64],
    dst: &mut [f64],
    reference: Option<f64>,
    amin: f64,
    top_db: Option<f64>,
    amplitude: bool,
) -> Result<()> {
    if !(amin > 0.0 && amin.is_finite()) {
        return Err(AglError::param("amin", amin, "must be strictly positive"));
    }
    if let Some(t) = top_db {
        if t.is_nan() || t < 0.0 {
            return Err(AglError::param("top_db", t, "must be non-negative"));
        }
    }
    if let Some(r) = reference {
        if !r.is_finite() {
            return Err(AglError::param("ref", r, "must be finite"));
        }
    }
    if src.len() != dst.len() {
        return Err(AglError::Shape(format!(
            "output holds {} values for {} inputs",
            dst.len(),
            src.len()
        )));
    }
    let ref_value = match reference {
        Some(r) => r.abs(),
        // librosa takes `np.max` of the magnitude: |x| for amplitudes, x
        // itself (negative powers included) for powers.
        None if amplitude => src.iter().fold(0.0f64, |a, &v| a.max(v.abs())),
        None => src.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v)),
    };
    // For amplitudes, 10 log10(max(amin, ref)^2) without squaring `ref`,
    // which can overflow where its logarithm does not.
    let (ref_db, amin) = if amplitude {
        (20.0 * ref_value.max(amin).log10(), amin * amin)
    } else {
        (10.0 * ref_value.max(amin).log10(), amin)
    };
    // With `top_db`, one pass writes the clipped values (the maximum comes
    // from a read-only scan of `src` first).
    let max_db = vectorized_wide(
        #[inline(always)]
        || match top_db {
            Some(t) => db10_floor_clip_f64(src, dst, amin, ref_db, amplitude, t),
            None => db10_floor_f64(src, dst, amin, ref_db, amplitude),
        },
    );
    if max_db.is_none() {
        let index = src.iter().position(|v| v.is_nan()).unwrap_or(0);
        return Err(AglError::NonFinite {
            what: "S".to_string(),
            index,
        });
    }
    Ok(())
}

/// `power_to_db` (or `amplitude_to_db` with `amplitude`) of `src` into
/// `dst` (one item, same length): the values [`power_to_db_inplace`] /
/// [`amplitude_to_db_inplace`] give on a copy, bit for bit, in one
/// vectorised pass (two with `top_db`, three with `ref=max`) and no copy.
/// NaN in `src` is an error naming its index.
pub fn to_db_into(src: &[f32], dst: &mut [f32], p: &DbParams, amplitude: bool) -> Result<()> {
    if src.len() != dst.len() {
        return Err(AglError::Shape(format!(
            "output holds {} values for {} inputs",
            dst.len(),
            src.len()
        )));
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(src: &[f32], dst: &mut [f32], p: &DbParams, amplitude: bool) -> bool {
            to_db_into_impl(src, dst, p, amplitude)
        }
        if crate::fastmath::has_avx2_fma() {
            // Sixteen lanes where the CPU has AVX-512 (the same operations
            // per lane, so the same bits), eight with AVX2.
            let fused = if crate::fastmath::has_avx512() {
                crate::fastmath::vectorized_wide(
                    #[inline(always)]
                    || to_db_into_impl(src, dst, p, amplitude),
                )
            } else {
                // SAFETY: the CPU supports AVX2 and FMA (checked above).
                unsafe { avx2(src, dst, p, amplitude) }
            };
            if fused {
                return Ok(());
            }
            return to_db_exact(src, dst, p, amplitude);
        }
    }
    if to_db_into_impl(src, dst, p, amplitude) {
        return Ok(());
    }
    to_db_exact(src, dst, p, amplitude)
}

/// The path for inputs the fused pass leaves: NaN (an error), infinities,
/// overflowing squares and subnormal floors, through the in-place kernels.
fn to_db_exact(src: &[f32], dst: &mut [f32], p: &DbParams, amplitude: bool) -> Result<()> {
    if let Some(index) = src.iter().position(|v| v.is_nan()) {
        return Err(AglError::NonFinite {
            what: "S".to_string(),
            index,
        });
    }
    dst.copy_from_slice(src);
    if amplitude {
        amplitude_to_db_inplace(dst, p)
    } else {
        power_to_db_inplace(dst, p)
    }
    Ok(())
}

/// The fused pass of [`to_db_into`]; `false` when the input needs the exact
/// path (see [`crate::fastmath::db10_floor_sub`]).
#[inline(always)]
fn to_db_into_impl(src: &[f32], dst: &mut [f32], p: &DbParams, amplitude: bool) -> bool {
    // The reference and floor as the in-place kernels form them: squared
    // for amplitudes, then through the same logarithm as the data.
    let (ref_value, amin) = if amplitude {
        let r = match p.reference {
            DbRef::Value(r) => r.abs(),
            DbRef::Max => src.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v.abs())),
        };
        (r * r, p.amin * p.amin)
    } else {
        let r = match p.reference {
            DbRef::Value(r) => r.abs(),
            DbRef::Max => crate::fastmath::max_f32(src, f32::NEG_INFINITY, f32::abs),
        };
        (r, p.amin)
    };
    let mut ref_db = [ref_value.abs()];
    crate::fastmath::db10_floor_inplace(&mut ref_db, amin);
    let Some(max_db) = crate::fastmath::db10_floor_sub(src, dst, amin, ref_db[0], amplitude) else {
        return false;
    };
    if let Some(top) = p.top_db {
        let floor = max_db - top;
        dst.iter_mut().for_each(|v| *v = v.max(floor));
    }
    true
}

/// `power_to_db` in place over every value of `x` (one item).
pub fn power_to_db_inplace(x: &mut [f32], p: &DbParams) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(x: &mut [f32], p: &DbParams) {
            power_to_db_impl(x, p)
        }
        if crate::fastmath::has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { avx2(x, p) };
        }
    }
    power_to_db_impl(x, p)
}

#[inline(always)]
fn power_to_db_impl(x: &mut [f32], p: &DbParams) {
    let amin = p.amin;
    let ref_value = match p.reference {
        DbRef::Value(r) => r.abs(),
        DbRef::Max => crate::fastmath::max_f32(x, f32::NEG_INFINITY, f32::abs),
    };
    // The reference goes through the same logarithm as the data, so the
    // item at the reference is exactly 0 dB.
    let mut ref_db = [ref_value];
    crate::fastmath::db10_floor_inplace(&mut ref_db, amin);
    let ref_db = ref_db[0];
    x.iter_mut().for_each(|v| *v = v.abs());
    crate::fastmath::db10_floor_inplace(x, amin);
    x.iter_mut().for_each(|v| *v -= ref_db);
    if let Some(top) = p.top_db {
        let max_db = crate::fastmath::max_f32(x, f32::NEG_INFINITY, |v| v);
        let floor = max_db - top;
        x.iter_mut().for_each(|v| *v = v.max(floor));
    }
}

/// `amplitude_to_db` in place: `power_to_db(|x|^2, ref^2, amin^2, top_db)`.
pub fn amplitude_to_db_inplace(x: &mut [f32], p: &DbParams) {
    let ref_value = match p.reference {
        DbRef::Value(r) => r.abs(),
        DbRef::Max => x.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v.abs())),
    };
    x.iter_mut().for_each(|v| *v = *v * *v);
    let q = DbParams {
        reference: DbRef::Value(ref_value * ref_value),
        amin: p.amin * p.amin,
        top_db: p.top_db,
    };
    power_to_db_inplace(x, &q);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_decibels_follow_librosa() {
        let f = |x: &mut Vec<f64>, r, amin, top, amp| {
            let src = x.clone();
            to_db_f64(&src, x, r, amin, top, amp)
        };
        let mut x = vec![100.0f64, 1.0, 1e-12, -4.0];
        f(&mut x, Some(1.0), 1e-10, None, false).unwrap();
        for (got, want) in x.iter().zip([20.0, 0.0, -100.0, -100.0]) {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
        let mut y = vec![10.0f64, 0.1, 0.0];
        f(&mut y, None, 1e-5, Some(30.0), true).unwrap();
        assert!(y[0].abs() < 1e-12 && (y[1] + 30.0).abs() < 1e-12 && (y[2] + 30.0).abs() < 1e-12);
        // A reference whose square overflows float32 is exact here.
        let mut z = vec![2f64.powi(70)];
        f(&mut z, Some(2f64.powi(70)), 1e-5, None, true).unwrap();
        assert_eq!(z, vec![0.0]);
        assert!(f(&mut z, None, 0.0, None, false).is_err());
        let mut w = vec![1.0, 2.0, f64::NAN];
        let e = f(&mut w, Some(1.0), 1e-10, None, false).unwrap_err();
        assert_eq!(
            e,
            AglError::NonFinite {
                what: "S".into(),
                index: 2
            }
        );
    }

    #[test]
    fn ten_db_per_decade_and_top_db() {
        let mut x = vec![1.0f32, 10.0, 100.0, 1e-12];
        let p = DbParams::new(DbRef::Max, 1e-10, Some(80.0)).unwrap();
        power_to_db_inplace(&mut x, &p);
        assert_eq!(x[2], 0.0);
        assert!((x[1] + 10.0).abs() < 1e-5 && (x[0] + 20.0).abs() < 1e-5);
        assert!((x[3] + 80.0).abs() < 1e-4);
    }
}
