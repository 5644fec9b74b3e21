//! The inverse geodesic problem on an ellipsoid of revolution, after
//! Karney (2013), "Algorithms for geodesics", sections 3-5. Only the
//! distance is computed; azimuths are internal.
//!
//! Notation follows the paper: beta reduced latitude, alpha azimuth,
//! sigma arc length on the auxiliary sphere, omega longitude on it, eps the
//! expansion parameter, n the third flattening. Angles are kept as
//! (sine, cosine) pairs wherever possible to keep full accuracy near the
//! poles and for nearly antipodal points.
//!
//! Tuned for the distance alone: (sine, cosine) pairs are normalised with a
//! plain square root (they are bounded, so `hypot`'s scaling is not
//! needed); the final length takes only the C1 series; the starting azimuth
//! uses the longitude on the auxiliary sphere corrected to first order in
//! f, so one Newton step usually brings the longitude error under 1e-10 rad;
//! and the last step is replaced by its first-order effect on the distance
//! when the second-order remainder is below 1e-11 m. About two evaluations
//! of the longitude per pair instead of four; `karney_ref.rs` keeps the
//! plain transcription the tests compare against.

use crate::error::{AglError, Result};

const ORDER: usize = 6;
const TOL0: f64 = f64::EPSILON;
const MAXIT1: usize = 20;
const MAXIT2: usize = MAXIT1 + f64::MANTISSA_DIGITS as usize + 10;

fn tiny() -> f64 {
    f64::MIN_POSITIVE.sqrt()
}
fn tol1() -> f64 {
    200.0 * TOL0
}
fn tol2() -> f64 {
    TOL0.sqrt()
}
fn tolb() -> f64 {
    TOL0
}
fn xthresh() -> f64 {
    1000.0 * tol2()
}

/// Horner evaluation of `p[0] x^m + ... + p[m]`.
#[inline]
fn poly(p: &[f64], x: f64) -> f64 {
    p.iter().fold(0.0, |y, &c| y * x + c)
}

/// `sqrt(x^2 + y^2)` without `hypot`'s scaling: every pair here is a sine
/// and cosine (or bounded multiples of them, at least `tiny` in size), so
/// the squares neither overflow nor vanish.
#[inline(always)]
fn hyp(x: f64, y: f64) -> f64 {
    (x * x + y * y).sqrt()
}

/// Normalise a (sine, cosine) pair.
#[inline(always)]
fn norm(s: f64, c: f64) -> (f64, f64) {
    let r = hyp(s, c);
    (s / r, c / r)
}

/// Round tiny angles to zero so that values near 0 are exact in degrees.
#[inline]
fn ang_round(x: f64) -> f64 {
    const Z: f64 = 1.0 / 16.0;
    let mut y = x.abs();
    let w = Z - y;
    if w > 0.0 {
        y = Z - w;
    }
    y.copysign(x)
}

/// IEEE remainder of `x` by 360 in [-180, 180].
#[inline]
fn rem360(x: f64) -> f64 {
    if x.abs() <= 180.0 {
        return x;
    }
    let r = x % 360.0;
    if r > 180.0 {
        r - 360.0
    } else if r < -180.0 {
        r + 360.0
    } else {
        r
    }
}

/// Sine and cosine of a small angle `d` (radians): Taylor polynomials to
/// within an ulp for |d| <= 1/32, else the library's `sin_cos`.
#[inline(always)]
fn sincos_small(d: f64) -> (f64, f64) {
    if d.abs() > 1.0 / 32.0 {
        return d.sin_cos();
    }
    let d2 = d * d;
    // Next terms d^9 / 9! and d^10 / 10!: below 1e-19 of the result.
    let s = d + d * d2 * (-1.0 / 6.0 + d2 * (1.0 / 120.0 + d2 * (-1.0 / 5040.0)));
    let c = 1.0 + d2 * (-0.5 + d2 * (1.0 / 24.0 + d2 * (-1.0 / 720.0 + d2 * (1.0 / 40320.0))));
    (s, c)
}

/// Error-free sum: `u + v = s + t` exactly.
#[inline]
fn two_sum(u: f64, v: f64) -> (f64, f64) {
    let s = u + v;
    let up = s - v;
    let vpp = s - up;
    let t = -((up - u) + (vpp - v));
    (s, t)
}

/// `lon2 - lon1` reduced to [-180, 180] with its rounding error.
fn ang_diff(x: f64, y: f64) -> (f64, f64) {
    let (d, t) = two_sum(rem360(-x), rem360(y));
    let (mut d, t) = two_sum(rem360(d), t);
    if d == 0.0 || d.abs() == 180.0 {
        d = d.copysign(if t == 0.0 { y - x } else { -t });
    }
    (d, t)
}

/// `x` rounded to the nearest integer, ties to even, for |x| < 2^51
/// (the classic add-and-subtract of 1.5 * 2^52, one SSE2 add each way).
#[inline(always)]
fn round_even(x: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0;
    (x + MAGIC) - MAGIC
}

/// Sine and cosine of an angle in degrees, exact at multiples of 90.
#[inline]
fn sincosd(x: f64) -> (f64, f64) {
    // |x| < 360 (every call here: latitudes and |lon12| <= 180) needs no
    // remainder.
    let mut r = if x.abs() < 360.0 { x } else { x % 360.0 };
    let q = if r.is_nan() {
        0
    } else {
        round_even(r / 90.0) as i64
    };
    r -= 90.0 * q as f64;
    let (s, c) = r.to_radians().sin_cos();
    let (s, c) = match q.rem_euclid(4) {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    };
    (if s == 0.0 { s.copysign(x) } else { s }, c + 0.0)
}

/// `S(x2) - S(x1)` for the series `S(x) = sum_l c[l] sin(2 l x)`,
/// `l = 1..N-1`, both Clenshaw recurrences run side by side (two
/// independent chains, so they overlap in the pipeline).
#[inline(always)]
fn sin_series_diff<const N: usize>(
    (s1, c1): (f64, f64),
    (s2, c2): (f64, f64),
    c: &[f64; N],
) -> f64 {
    let ar1 = 2.0 * (c1 - s1) * (c1 + s1);
    let ar2 = 2.0 * (c2 - s2) * (c2 + s2);
    let (mut y01, mut y11) = (0.0, 0.0);
    let (mut y02, mut y12) = (0.0, 0.0);
    for &ck in c[1..].iter().rev() {
        let y1 = ar1 * y01 - y11 + ck;
        let y2 = ar2 * y02 - y12 + ck;
        y11 = y01;
        y01 = y1;
        y12 = y02;
        y02 = y2;
    }
    2.0 * s2 * c2 * y02 - 2.0 * s1 * c1 * y01
}

/// `A1 - 1` (eq. 17).
fn a1m1(eps: f64) -> f64 {
    let t = poly(&[1.0, 4.0, 64.0, 0.0], eps * eps) / 256.0;
    (t + eps) / (1.0 - eps)
}

/// `A2 - 1` (eq. 42).
fn a2m1(eps: f64) -> f64 {
    let t = poly(&[-11.0, -28.0, -192.0, 0.0], eps * eps) / 256.0;
    (t - eps) / (1.0 + eps)
}

/// Coefficients `C1[l]` (eq. 18); index 0 unused.
fn c1(eps: f64) -> [f64; ORDER + 1] {
    let e2 = eps * eps;
    let e = [eps, e2, e2 * eps, e2 * e2, e2 * e2 * eps, e2 * e2 * e2];
    [
        0.0,
        e[0] * poly(&[-1.0, 6.0, -16.0], e2) / 32.0,
        e[1] * poly(&[-9.0, 64.0, -128.0], e2) / 2048.0,
        e[2] * poly(&[9.0, -16.0], e2) / 768.0,
        e[3] * poly(&[3.0, -5.0], e2) / 512.0,
        e[4] * -7.0 / 1280.0,
        e[5] * -7.0 / 2048.0,
    ]
}

/// Coefficients `C2[l]` (eq. 43); index 0 unused.
fn c2(eps: f64) -> [f64; ORDER + 1] {
    let e2 = eps * eps;
    let e = [eps, e2, e2 * eps, e2 * e2, e2 * e2 * eps, e2 * e2 * e2];
    [
        0.0,
        e[0] * poly(&[1.0, 2.0, 16.0], e2) / 32.0,
        e[1] * poly(&[35.0, 64.0, 384.0], e2) / 2048.0,
        e[2] * poly(&[15.0, 80.0], e2) / 768.0,
        e[3] * poly(&[7.0, 35.0], e2) / 512.0,
        e[4] * 63.0 / 1280.0,
        e[5] * 77.0 / 2048.0,
    ]
}

/// A WGS-84-like ellipsoid with the coefficients of the `A3`/`C3` series
/// (eqs. 24-25) precomputed as polynomials in `eps`.
#[derive(Debug, Clone)]
pub struct Ellipsoid {
    a: f64,
    f: f64,
    f1: f64,
    b: f64,
    ep2: f64,
    n: f64,
    etol2: f64,
    a3x: [f64; ORDER],
    /// `C3[l]` for l = 1..5, each a polynomial in eps (highest power first)
    /// to be multiplied by `eps^l`.
    c3x: [[f64; ORDER - 1]; ORDER - 1],
}

impl Ellipsoid {
    /// WGS-84: a = 6378137 m, f = 1/298.257223563.
    pub fn wgs84() -> Self {
        Self::new(6378137.0, 1.0 / 298.257223563).expect("WGS-84 parameters are valid")
    }

    /// An oblate ellipsoid with equatorial radius `a` (m) and flattening
    /// `f` in [0, 0.1] (the series are accurate for |f| up to about 0.01).
    pub fn new(a: f64, f: f64) -> Result<Self> {
        if !(a.is_finite() && a > 0.0) {
            return Err(AglError::param("a", a, "must be finite and > 0"));
        }
        if !(0.0..=0.1).contains(&f) {
            return Err(AglError::param("f", f, "must lie in [0, 0.1]"));
        }
        let f1 = 1.0 - f;
        let e2 = f * (2.0 - f);
        let ep2 = e2 / (f1 * f1);
        let n = f / (2.0 - f);
        let etol2 = 0.1 * tol2() / ((f.abs().max(0.001) * (1.0 - f / 2.0).min(1.0)) / 2.0).sqrt();
        // A3 = sum_j a3x[j] eps^(5-j); coefficients as polynomials in n.
        let a3x = [
            -3.0 / 128.0,
            poly(&[-2.0, -3.0], n) / 64.0,
            poly(&[-1.0, -3.0, -1.0], n) / 16.0,
            poly(&[3.0, -1.0, -2.0], n) / 8.0,
            poly(&[1.0, -1.0], n) / 2.0,
            1.0,
        ];
        let mut c3x = [[0.0; ORDER - 1]; ORDER - 1];
        // C3[1] / eps: eps^4 .. eps^0 terms.
        c3x[0] = [
            3.0 / 128.0,
            poly(&[2.0, 5.0], n) / 128.0,
            poly(&[-1.0, 3.0, 3.0], n) / 64.0,
            poly(&[-1.0, 0.0, 1.0], n) / 8.0,
            poly(&[-1.0, 1.0], n) / 4.0,
        ];
        c3x[1] = [
            0.0,
            5.0 / 256.0,
            poly(&[1.0, 3.0], n) / 128.0,
            poly(&[-3.0, -2.0, 3.0], n) / 64.0,
            poly(&[1.0, -3.0, 2.0], n) / 32.0,
        ];
        c3x[2] = [
            0.0,
            0.0,
            7.0 / 512.0,
            poly(&[-10.0, 9.0], n) / 384.0,
            poly(&[5.0, -9.0, 5.0], n) / 192.0,
        ];
        c3x[3] = [0.0, 0.0, 0.0, 7.0 / 512.0, poly(&[-14.0, 7.0], n) / 512.0];
        c3x[4] = [0.0, 0.0, 0.0, 0.0, 21.0 / 2560.0];
        Ok(Self {
            a,
            f,
            f1,
            b: a * f1,
            ep2,
            n,
            etol2,
            a3x,
            c3x,
        })
    }

    fn a3(&self, eps: f64) -> f64 {
        poly(&self.a3x, eps)
    }

    fn c3(&self, eps: f64) -> [f64; ORDER] {
        let mut c = [0.0; ORDER];
        let mut mult = 1.0;
        for (cl, coeffs) in c[1..].iter_mut().zip(&self.c3x) {
            mult *= eps;
            *cl = mult * poly(coeffs, eps);
        }
        c
    }

    /// Distance on the unit-b scale, `s12 / b`, for an arc of `sig12`
    /// (eqs. 7, 15 and 17-18: only the C1 series, no reduced length).
    #[inline(always)]
    fn s12b(&self, eps: f64, sig12: f64, p1: (f64, f64), p2: (f64, f64)) -> f64 {
        let b1 = sin_series_diff(p1, p2, &c1(eps));
        (1.0 + a1m1(eps)) * (sig12 + b1)
    }

    /// Reduced length `m12 / b` alone (eq. 41 with the C1 and C2 series
    /// merged), the derivative Newton's method needs.
    fn reduced_length(
        &self,
        eps: f64,
        sig12: f64,
        (ssig1, csig1, dn1): (f64, f64, f64),
        (ssig2, csig2, dn2): (f64, f64, f64),
    ) -> f64 {
        let a1 = a1m1(eps);
        let a2 = a2m1(eps);
        let m0x = a1 - a2;
        let (a1, a2) = (1.0 + a1, 1.0 + a2);
        let c1a = c1(eps);
        let mut c = c2(eps);
        for (cl, c1l) in c.iter_mut().zip(&c1a) {
            *cl = a1 * c1l - a2 * *cl;
        }
        let j12 = m0x * sig12 + sin_series_diff((ssig1, csig1), (ssig2, csig2), &c);
        dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
    }

    /// Solve the astroid equation (eq. 55) for its positive root.
    fn astroid(x: f64, y: f64) -> f64 {
        let p = x * x;
        let q = y * y;
        let r = (p + q - 1.0) / 6.0;
        if q == 0.0 && r <= 0.0 {
            return 0.0;
        }
        let s = p * q / 4.0;
        let r2 = r * r;
        let r3 = r * r2;
        let disc = s * (s + 2.0 * r3);
        let mut u = r;
        if disc >= 0.0 {
            let mut t3 = s + r3;
            t3 += if t3 < 0.0 { -disc.sqrt() } else { disc.sqrt() };
            let t = t3.cbrt();
            u += t + if t != 0.0 { r2 / t } else { 0.0 };
        } else {
            let ang = (-disc).sqrt().atan2(-(s + r3));
            u += 2.0 * r * (ang / 3.0).cos();
        }
        let v = (u * u + q).sqrt();
        let uv = if u < 0.0 { q / (v - u) } else { u + v };
        let w = (uv - q) / (2.0 * v);
        uv / ((uv + w * w).sqrt() + w)
    }
}

/// One point's reduced latitude `(sin beta, cos beta, dn)`.
type Beta = (f64, f64, f64);

/// Output of [`Ellipsoid::lambda12`].
struct Lambda {
    lam12: f64,
    sig12: f64,
    ssig1: f64,
    csig1: f64,
    ssig2: f64,
    csig2: f64,
    eps: f64,
    salp0: f64,
    calp2: f64,
}

impl Ellipsoid {
    /// Starting azimuth `(sin, cos)` for Newton's method (section 5), or a
    /// finished short-line solution `sig12 >= 0` with its `dnm`.
    // Long: Karney's `InverseStart` (section 5) as published: the short-line
    // and the antipodal starts share their intermediate terms.
    fn inverse_start(&self, p1: Beta, p2: Beta, lam12: f64, slam12: f64, clam12: f64) -> Start {
        let (sbet1, cbet1, _) = p1;
        let (sbet2, cbet2, _) = p2;
        let mut out = Start {
            sig12: -1.0,
            salp1: 0.0,
            calp1: 0.0,
            dnm: f64::NAN,
        };
        let sbet12 = sbet2 * cbet1 - cbet2 * sbet1;
        let cbet12 = cbet2 * cbet1 + sbet2 * sbet1;
        let sbet12a = sbet2 * cbet1 + cbet2 * sbet1;
        let shortline = cbet12 >= 0.0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5;
        let (mut somg12, mut comg12);
        if shortline {
            let mut sbetm2 = (sbet1 + sbet2) * (sbet1 + sbet2);
            sbetm2 /= sbetm2 + (cbet1 + cbet2) * (cbet1 + cbet2);
            out.dnm = (1.0 + self.ep2 * sbetm2).sqrt();
            let omg12 = lam12 / (self.f1 * out.dnm);
            (somg12, comg12) = omg12.sin_cos();
        } else {
            (somg12, comg12) = (slam12, clam12);
        }
        let mut salp1 = cbet2 * somg12;
        let mut calp1 = if comg12 >= 0.0 {
            sbet12 + cbet2 * sbet1 * somg12 * somg12 / (1.0 + comg12)
        } else {
            sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1.0 - comg12)
        };
        let ssig12 = hyp(salp1, calp1);
        let csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12;
        if shortline && ssig12 < self.etol2 {
            // Really short line: spherical solution with the mean dn.
            out.sig12 = ssig12.atan2(csig12);
        } else if self.n.abs() > 0.1
            || csig12 >= 0.0
            || ssig12 >= 6.0 * self.n.abs() * std::f64::consts::PI * cbet1 * cbet1
        {
            // Not nearly antipodal: the spherical guess is good enough,
            // better still with the longitude on the auxiliary sphere
            // corrected to first order in f (eq. 8 without the C3 terms:
            // omega12 = lambda12 + f A3 sin(alp0) sigma12), which leaves an
            // error of O(f eps) for Newton rather than O(f).
            if !shortline && salp1 > 0.0 {
                let (s, c) = norm(salp1, calp1);
                let salp0 = s * cbet1;
                let calp0 = hyp(c, s * sbet1);
                let k2 = calp0 * calp0 * self.ep2;
                let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
                let sig12 = ssig12.atan2(csig12);
                // omega12 = lambda12 + d, d at most f pi: by the sum rule.
                let d = self.f * self.a3(eps) * salp0 * sig12;
                let (sd, cd) = sincos_small(d);
                let (so, co) = (slam12 * cd + clam12 * sd, clam12 * cd - slam12 * sd);
                if so > 0.0 {
                    salp1 = cbet2 * so;
                    calp1 = if co >= 0.0 {
                        sbet12 + cbet2 * sbet1 * so * so / (1.0 + co)
                    } else {
                        sbet12a - cbet2 * sbet1 * so * so / (1.0 - co)
                    };
                }
            }
        } else {
            // Nearly antipodal: scale to the astroid plane (eqs. 53-56).
            let lam12x = (-slam12).atan2(-clam12);
            let k2 = sbet1 * sbet1 * self.ep2;
            let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
            let lamscale = self.f * cbet1 * self.a3(eps) * std::f64::consts::PI;
            let betscale = lamscale * cbet1;
            let x = lam12x / lamscale;
            let y = sbet12a / betscale;
            if y > -tol1() && x > -1.0 - xthresh() {
                salp1 = (-x).min(1.0);
                calp1 = -(1.0 - salp1 * salp1).sqrt();
            } else {
                let k = Self::astroid(x, y);
                let omg12a = lamscale * (-x * k / (1.0 + k));
                (somg12, comg12) = omg12a.sin_cos();
                comg12 = -comg12;
                salp1 = cbet2 * somg12;
                calp1 = sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1.0 - comg12);
            }
        }
        if salp1 > 0.0 {
            (out.salp1, out.calp1) = norm(salp1, calp1);
        } else {
            (out.salp1, out.calp1) = (1.0, 0.0);
        }
        out
    }

    /// Longitude difference `lambda12` reached from point 1 with azimuth
    /// `alp1`, minus the target (eqs. 8-11 with the C3 series).
    #[inline(always)]
    fn lambda12(
        &self,
        p1: Beta,
        p2: Beta,
        salp1: f64,
        mut calp1: f64,
        slam120: f64,
        clam120: f64,
    ) -> Lambda {
        let (sbet1, cbet1, _) = p1;
        let (sbet2, cbet2, _) = p2;
        if sbet1 == 0.0 && calp1 == 0.0 {
            calp1 = -tiny();
        }
        let salp0 = salp1 * cbet1;
        let calp0 = hyp(calp1, salp1 * sbet1);
        let somg1 = salp0 * sbet1;
        let comg1 = calp1 * cbet1;
        let (ssig1, csig1) = norm(sbet1, comg1);
        let calp2 = if cbet2 != cbet1 || sbet2.abs() != -sbet1 {
            ((calp1 * cbet1).powi(2)
                + if cbet1 < -sbet1 {
                    (cbet2 - cbet1) * (cbet1 + cbet2)
                } else {
                    (sbet1 - sbet2) * (sbet1 + sbet2)
                })
            .sqrt()
                / cbet2
        } else {
            calp1.abs()
        };
        let somg2 = salp0 * sbet2;
        let comg2 = calp2 * cbet2;
        let (ssig2, csig2) = norm(sbet2, comg2);
        let sig12 = (csig1 * ssig2 - ssig1 * csig2)
            .max(0.0)
            .atan2(csig1 * csig2 + ssig1 * ssig2);
        let somg12 = (comg1 * somg2 - somg1 * comg2).max(0.0);
        let comg12 = comg1 * comg2 + somg1 * somg2;
        let eta = (somg12 * clam120 - comg12 * slam120).atan2(comg12 * clam120 + somg12 * slam120);
        let k2 = calp0 * calp0 * self.ep2;
        let eps = k2 / (2.0 * (1.0 + (1.0 + k2).sqrt()) + k2);
        let c3a = self.c3(eps);
        let b312 = sin_series_diff((ssig1, csig1), (ssig2, csig2), &c3a);
        let domg12 = -self.f * self.a3(eps) * salp0 * (sig12 + b312);
        let lam12 = eta + domg12;
        Lambda {
            lam12,
            sig12,
            ssig1,
            csig1,
            ssig2,
            csig2,
            eps,
            salp0,
            calp2,
        }
    }

    /// The derivative of `lambda12` in `alp1` (eq. 46) at `l`, with the
    /// reduced length `m12 / b` it came from (NaN on the meridian branch).
    #[inline(always)]
    fn dlam12(&self, l: &Lambda, (sbet1, _, dn1): Beta, (_, cbet2, dn2): Beta) -> (f64, f64) {
        if l.calp2 == 0.0 {
            (-2.0 * self.f1 * dn1 / sbet1, f64::NAN)
        } else {
            let m12b = self.reduced_length(
                l.eps,
                l.sig12,
                (l.ssig1, l.csig1, dn1),
                (l.ssig2, l.csig2, dn2),
            );
            (m12b * self.f1 / (l.calp2 * cbet2), m12b)
        }
    }

    /// Geodesic distance in metres between two points (degrees). The caller
    /// guarantees finite coordinates with latitudes in [-90, 90].
    // Long: GeographicLib's inverse solution (Karney 2013, `GenInverse`) step
    // by step, so it reads against the published algorithm; its stages share
    // a dozen angles and splitting them would only pass those around.
    pub fn distance(&self, lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
        let (lon12, lon12s) = ang_diff(lon1, lon2);
        let lonsign = if lon12 >= 0.0 { 1.0 } else { -1.0 };
        let lon12 = lonsign * ang_round(lon12);
        let lon12s = ang_round((180.0 - lon12) - lonsign * lon12s);
        let lam12 = lon12.to_radians();
        let (slam12, clam12) = if lon12 > 90.0 {
            let (s, c) = sincosd(lon12s);
            (s, -c)
        } else {
            sincosd(lon12)
        };
        let mut lat1 = ang_round(lat1);
        let mut lat2 = ang_round(lat2);
        // Make |lat1| >= |lat2| and lat1 <= 0: the distance is symmetric.
        if lat1.abs() < lat2.abs() {
            std::mem::swap(&mut lat1, &mut lat2);
        }
        let latsign = if lat1 < 0.0 { 1.0 } else { -1.0 };
        lat1 *= latsign;
        lat2 *= latsign;
        let reduced = |lat: f64| {
            let (s, c) = sincosd(lat);
            let (s, c) = norm(s * self.f1, c);
            (s, c.max(tiny()))
        };
        let (sbet1, cbet1) = reduced(lat1);
        let (mut sbet2, mut cbet2) = reduced(lat2);
        if cbet1 < -sbet1 {
            if cbet2 == cbet1 {
                sbet2 = sbet1.copysign(sbet2);
            }
        } else if sbet2.abs() == -sbet1 {
            cbet2 = cbet1;
        }
        let dn1 = (1.0 + self.ep2 * sbet1 * sbet1).sqrt();
        let dn2 = (1.0 + self.ep2 * sbet2 * sbet2).sqrt();
        let p1 = (sbet1, cbet1, dn1);
        let p2 = (sbet2, cbet2, dn2);

        if lat1 == -90.0 || slam12 == 0.0 {
            // Meridional geodesic (or from a pole): closed form in sigma.
            let (calp1, salp1) = (clam12, slam12);
            let (ssig1, csig1) = (sbet1, calp1 * cbet1);
            let (ssig2, csig2) = (sbet2, cbet2);
            let sig12 = (csig1 * ssig2 - ssig1 * csig2)
                .max(0.0)
                .atan2(csig1 * csig2 + ssig1 * ssig2);
            let s12x = self.s12b(self.n, sig12, (ssig1, csig1), (ssig2, csig2));
            let m12x = self.reduced_length(self.n, sig12, (ssig1, csig1, dn1), (ssig2, csig2, dn2));
            let _ = salp1;
            if sig12 < 1.0 || m12x >= 0.0 {
                if sig12 < 3.0 * tiny() || (sig12 < TOL0 && (s12x < 0.0 || m12x < 0.0)) {
                    return 0.0;
                }
                return s12x * self.b;
            }
            // Otherwise the shortest path is not the meridian: fall through.
        }
        if sbet1 == 0.0 && (self.f <= 0.0 || lon12s >= self.f * 180.0) {
            // Both points on the equator, not nearly antipodal.
            return self.a * lam12;
        }
        let start = self.inverse_start(p1, p2, lam12, slam12, clam12);
        if start.sig12 >= 0.0 {
            return start.sig12 * self.b * start.dnm;
        }
        let (mut salp1, mut calp1) = (start.salp1, start.calp1);
        let (mut salp1a, mut calp1a) = (tiny(), 1.0);
        let (mut salp1b, mut calp1b) = (tiny(), -1.0);
        let (mut tripn, mut tripb) = (false, false);
        let mut numit = 0;
        let mut last;
        // m12 / b at the previous Newton step (NaN after a bisection).
        let mut prev_m12b = f64::NAN;
        loop {
            last = self.lambda12(p1, p2, salp1, calp1, slam12, clam12);
            let v = last.lam12;
            if numit >= MAXIT2
                || tripb
                || v.is_nan()
                || v.abs() < if tripn { 8.0 } else { 1.0 } * TOL0
            {
                break;
            }
            // Keep the bracket [alp1a, alp1b] around the root.
            if v > 0.0 && (numit > MAXIT1 || calp1 / salp1 > calp1b / salp1b) {
                (salp1b, calp1b) = (salp1, calp1);
            } else if v < 0.0 && (numit > MAXIT1 || calp1 / salp1 < calp1a / salp1a) {
                (salp1a, calp1a) = (salp1, calp1);
            }
            numit += 1;
            // Close enough to finish to first order: the geodesic at alp1
            // ends on the parallel of point 2, overshooting it by v in
            // longitude, so the true distance is shorter by the component
            // along the geodesic of that step, a cos(beta2) sin(alp2) v =
            // a sin(alp0) v (Clairaut). The neglected second-order term, at
            // most (a v)^2 / (2 |m12|), is held under 1e-11 m (with m12 of
            // the previous step, which a step this small barely changes,
            // given a factor of 2 of margin).
            let av = self.a * v;
            if av * av < 1e-11 * (prev_m12b * self.b).abs() {
                return self.finish(&last, av);
            }
            let (dlam12, m12b) = if numit < MAXIT1 {
                self.dlam12(&last, p1, p2)
            } else {
                (f64::NAN, f64::NAN)
            };
            if numit < MAXIT1 && dlam12 > 0.0 {
                if av * av < 2e-11 * (m12b * self.b).abs() {
                    return self.finish(&last, av);
                }
                prev_m12b = m12b;
                let dalp1 = -v / dlam12;
                if dalp1.abs() < std::f64::consts::PI {
                    let (sd, cd) = sincos_small(dalp1);
                    let nsalp1 = salp1 * cd + calp1 * sd;
                    if nsalp1 > 0.0 {
                        calp1 = calp1 * cd - salp1 * sd;
                        (salp1, calp1) = norm(nsalp1, calp1);
                        tripn = v.abs() <= 16.0 * TOL0;
                        continue;
                    }
                }
            }
            // Newton failed or left the bracket: bisect.
            prev_m12b = f64::NAN;
            (salp1, calp1) = norm((salp1a + salp1b) / 2.0, (calp1a + calp1b) / 2.0);
            tripn = false;
            tripb = (salp1a - salp1).abs() + (calp1a - calp1) < tolb()
                || (salp1 - salp1b).abs() + (calp1 - calp1b) < tolb();
        }
        let s12x = self.s12b(
            last.eps,
            last.sig12,
            (last.ssig1, last.csig1),
            (last.ssig2, last.csig2),
        );
        s12x * self.b
    }
}

impl Ellipsoid {
    /// Distance in metres from the solution `l` whose longitude overshoots
    /// the target by `av / a` radians, corrected to first order.
    #[inline(always)]
    fn finish(&self, l: &Lambda, av: f64) -> f64 {
        let s12 = self.s12b(l.eps, l.sig12, (l.ssig1, l.csig1), (l.ssig2, l.csig2));
        s12 * self.b - av * l.salp0
    }
}

/// Output of [`Ellipsoid::inverse_start`].
struct Start {
    sig12: f64,
    salp1: f64,
    calp1: f64,
    dnm: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_meridian_and_equator() {
        let e = Ellipsoid::wgs84();
        // Quarter meridian of WGS-84: 10001965.729 m.
        assert!((e.distance(0.0, 0.0, 90.0, 0.0) - 10_001_965.729_312).abs() < 1e-5);
        // Along the equator: a * lambda.
        let d = e.distance(0.0, 0.0, 0.0, 90.0);
        assert!((d - 6378137.0 * std::f64::consts::FRAC_PI_2).abs() < 1e-6);
        assert_eq!(e.distance(10.0, 20.0, 10.0, 20.0), 0.0);
    }

    #[test]
    fn antipodal_equatorial_points_follow_a_meridian() {
        let e = Ellipsoid::wgs84();
        // Twice the quarter meridian: the shortest path goes over a pole.
        let d = e.distance(0.0, 0.0, 0.0, 180.0);
        assert!((d - 2.0 * 10_001_965.729_312).abs() < 1e-4);
    }

    #[test]
    fn symmetric() {
        let e = Ellipsoid::wgs84();
        let a = e.distance(-41.3, 174.8, 40.96, -5.5);
        let b = e.distance(40.96, -5.5, -41.3, 174.8);
        assert!((a - b).abs() < 1e-6);
    }

    #[test]
    fn rejects_bad_ellipsoid() {
        assert!(Ellipsoid::new(-1.0, 0.0).is_err());
        assert!(Ellipsoid::new(1.0, 0.5).is_err());
    }

    /// Deterministic uniforms in [0, 1) (SplitMix64).
    fn uniforms(mut state: u64) -> impl FnMut() -> f64 {
        move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Pairs of every kind the solver branches on: random global ones,
    /// nearly and exactly antipodal ones, short ones (metres to 100 km),
    /// coincident points, poles, the equator and meridians.
    fn edge_pairs() -> Vec<[f64; 4]> {
        let mut u = uniforms(7);
        let mut p = Vec::new();
        let lat = |x: f64| (2.0 * x - 1.0).asin().to_degrees();
        for _ in 0..20_000 {
            let (a, b) = (lat(u()), 360.0 * u() - 180.0);
            let (c, d) = (lat(u()), 360.0 * u() - 180.0);
            p.push([a, b, c, d]);
            // Nearly and exactly antipodal.
            let (e, f) = (0.5 * (u() - 0.5), 0.5 * (u() - 0.5));
            p.push([a, b, (-a + e).clamp(-90.0, 90.0), b + 180.0 + f]);
            p.push([a, b, -a, b + 180.0]);
            // Short: up to ~100 km, down to sub-metre.
            let s = 10f64.powf(-5.0 * u());
            p.push([
                a,
                b,
                (a + s * (u() - 0.5)).clamp(-90.0, 90.0),
                b + s * (u() - 0.5),
            ]);
            p.push([a, b, a, b]);
            // Poles, equator, meridians, equator to pole.
            p.push([90.0, b, c, d]);
            p.push([a, b, -90.0, d]);
            p.push([0.0, b, 0.0, d]);
            p.push([0.0, b, 0.0, b + 180.0 - 0.6 * u()]);
            p.push([a, b, c, b]);
            p.push([a, b, c, b + 180.0]);
            p.push([0.0, b, 90.0 * u(), d]);
        }
        p
    }

    #[test]
    fn small_angle_sine_and_cosine() {
        let mut u = uniforms(11);
        for _ in 0..100_000 {
            let d = (u() - 0.5) / 16.0 * 10f64.powf(-8.0 * u());
            let (s, c) = sincos_small(d);
            assert!((s - d.sin()).abs() <= 2.0 * f64::EPSILON * d.abs(), "{d}");
            assert!((c - d.cos()).abs() <= f64::EPSILON, "{d}");
        }
        assert_eq!(sincos_small(0.5), 0.5f64.sin_cos());
    }

    #[test]
    fn matches_the_reference_transcription() {
        let e = Ellipsoid::wgs84();
        let r = crate::geo::karney_ref::Ellipsoid::wgs84();
        let mut worst = (0.0f64, [0.0; 4]);
        for q in edge_pairs() {
            let got = e.distance(q[0], q[1], q[2], q[3]);
            let want = r.distance(q[0], q[1], q[2], q[3]);
            let err = (got - want).abs();
            if !(err <= worst.0) {
                worst = (err, q);
            }
        }
        // A few ulp of 20,000 km (3.7e-9 m each): far inside geographiclib's
        // own 15 nm.
        assert!(worst.0 < 2e-8, "worst error {} m at {:?}", worst.0, worst.1);
        eprintln!("worst error {} m at {:?}", worst.0, worst.1);
    }
}
