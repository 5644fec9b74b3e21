use super::*;
use crate::parallel::never;
use crate::testutil::Lcg;

fn decay(t60: f64, sr: f64, secs: f64, noise_db: Option<f64>) -> Vec<f32> {
    let mut g = Lcg(12345);
    let n = (secs * sr) as usize;
    let k = 3.0 * std::f64::consts::LN_10 / t60;
    (0..n)
        .map(|i| {
            let (u, v) = (g.unit(), g.unit());
            let x = u * (-k * i as f64 / sr).exp();
            let nz = noise_db.map(|d| v * 10f64.powf(d / 20.0)).unwrap_or(0.0);
            (x + nz) as f32
        })
        .collect()
}

#[test]
fn exponential_decay_gives_its_t60() {
    let sr = 16000.0;
    for (method, noise) in [
        (NoiseMethod::None, None),
        (NoiseMethod::Lundeby, Some(-60.0)),
        (NoiseMethod::LundebyChu, Some(-40.0)),
        (NoiseMethod::Chu, Some(-60.0)),
    ] {
        let h = decay(0.5, sr, 1.5, noise);
        let r = room_params_curve(&h, sr, method, 2.5);
        let t = if noise == Some(-40.0) {
            r.values[1]
        } else {
            r.values[2]
        };
        assert!((t - 0.5).abs() < 0.01, "{method:?} {noise:?}: {t}");
    }
}

#[test]
fn bad_curves_have_statuses() {
    let z = vec![0.0f32; 100];
    let r = room_params_curve(&z, 16000.0, NoiseMethod::Lundeby, 2.5);
    assert!(r.status.iter().all(|&s| s == Status::NoOnset));
    let r = room_params_curve(&[1.0, 0.5], 16000.0, NoiseMethod::Lundeby, 2.5);
    assert!(r.status.iter().all(|&s| s == Status::TooShort));
    let h = decay(0.5, 16000.0, 0.05, None);
    let r = room_params_curve(&h, 16000.0, NoiseMethod::None, 2.5);
    assert_eq!(r.status[2], Status::InsufficientRange);
    assert!(r.values[2].is_nan());
}

#[test]
fn fast_ln_is_accurate() {
    for k in -3000..3000 {
        let x = 1.013f64.powi(k) * 0.77;
        assert!((fast_ln(x) - x.ln()).abs() < 1e-12, "{x}");
    }
}

/// `db_sums` against a logarithm per sample, over lengths around the
/// lane and flush sizes and decays deep enough to span many exponents.
#[test]
fn db_sums_match_per_sample_logs() {
    let mut g = Lcg(99);
    let n = 3000;
    let d: Vec<f64> = (0..n)
        .map(|i| (1.5 + g.unit()) * (-(i as f64) / 150.0).exp())
        .collect();
    let inv = 1.0 / d[0];
    let to_db = 10.0 / std::f64::consts::LN_10;
    for (a, b) in [
        (0, 1),
        (3, 18),
        (0, 16),
        (5, 517),
        (0, 512),
        (7, 1100),
        (0, n),
        (1, n),
    ] {
        let (mut r0, mut r1) = (0.0, 0.0);
        for (k, &v) in d.iter().enumerate().take(b).skip(a) {
            let y = to_db * (v * inv).ln();
            r0 += y;
            r1 += k as f64 * y;
        }
        let (s0, s1) = db_sums(&d, a, b, inv);
        assert!(
            (s0 - r0).abs() <= 1e-12 * r0.abs().max(1.0),
            "{a}..{b}: {s0} {r0}"
        );
        assert!(
            (s1 - r1).abs() <= 1e-12 * r1.abs().max(1.0),
            "{a}..{b}: {s1} {r1}"
        );
    }
}

/// The fused peak and finiteness pass against a scalar reference, with
/// bad values in the eight-wide body and in the remainder.
#[test]
fn peak_finite_matches_scalar_reference() {
    let reference = |h: &[f32]| {
        let finite = h.iter().all(|v| v.is_finite());
        let top = h.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        let at = h.iter().position(|&v| v.abs() == top);
        let found = if finite && top > 0.0 {
            at.map(|i| (i, sq(top)))
        } else {
            None
        };
        (found, finite)
    };
    for n in [0, 1, 7, 8, 9, 63, 100] {
        let mut h = crate::testutil::noise(n, n as u64 + 1);
        assert_eq!(peak_finite(&h), reference(&h), "n={n}");
        if n > 0 {
            // A tie: the first of two equal largest magnitudes wins.
            let top = h.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
            h[n - 1] = -top;
            assert_eq!(peak_finite(&h), reference(&h), "n={n} tie");
        }
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for at in [0, n / 2, n.saturating_sub(1)] {
                if at < n {
                    let mut g = h.clone();
                    g[at] = bad;
                    assert_eq!(peak_finite(&g), (None, false), "n={n} at={at} {bad}");
                }
            }
        }
    }
    assert_eq!(peak_finite(&[0.0; 20]), (None, true));
}

/// The fused scan against [`peak_finite`] and serial backward sums.
#[test]
fn suffix_energy_peak_matches_separate_passes() {
    for n in [0, 1, 3, 4, 5, 17, 1000, 1003] {
        let mut h = crate::testutil::noise(n, 7 + n as u64);
        let mut s = Vec::new();
        assert_eq!(suffix_energy_peak(&h, &mut s), peak_finite(&h), "n={n}");
        let mut acc = 0.0;
        for i in (0..n).rev() {
            acc += sq(h[i]);
            assert!((s[i] - acc).abs() <= 1e-13 * acc, "n={n} i={i}");
        }
        assert_eq!(s[n], 0.0);
        assert!(s.windows(2).all(|w| w[0] >= w[1]), "n={n}: not monotone");
        for bad in [f32::NAN, f32::INFINITY] {
            if n > 0 {
                let keep = h[n / 2];
                h[n / 2] = bad;
                assert_eq!(suffix_energy_peak(&h, &mut s), (None, false), "n={n}");
                h[n / 2] = keep;
            }
        }
    }
}

#[test]
fn batch_names_the_first_curve_that_is_not_finite() {
    let good = decay(0.3, 16000.0, 0.5, None);
    let mut nan = good.clone();
    nan[9] = f32::NAN;
    let mut inf = good.clone();
    inf[4000] = f32::INFINITY;
    let curves: Vec<&[f32]> = vec![&good, &inf, &good, &nan];
    for threads in [1, 2] {
        let e = room_params_batch(
            &curves,
            16000.0,
            NoiseMethod::LundebyChu,
            2.5,
            Some(threads),
            never(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("curve 1") && e.contains("4000"), "{e}");
    }
    let ok = room_params_batch(
        &[&good],
        16000.0,
        NoiseMethod::LundebyChu,
        2.5,
        Some(1),
        never(),
    );
    assert_eq!(
        ok.unwrap()[0],
        room_params_curve(&good, 16000.0, NoiseMethod::LundebyChu, 2.5)
    );
}

#[test]
fn sub_ramp_and_sum_lanes_match_scalar_loops() {
    for n in [0, 1, 15, 16, 17, 100, 1001] {
        let x: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 * 0.25).collect();
        let mut y = x.clone();
        sub_ramp(&mut y, 0.01, n as f64 + 3.0, 0.5);
        for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
            assert_eq!(
                b,
                (a - 0.01 * (n as f64 + 3.0 - i as f64)) + 0.5,
                "n={n} i={i}"
            );
        }
        // Every partial sum of quarters is exact, so the order is moot.
        assert_eq!(sum_lanes(&x), x.iter().sum::<f64>(), "n={n}");
    }
}

#[test]
fn schroeder_sums_backwards() {
    let h = [1.0f32, 2.0, 3.0];
    let opts = EdcOptions {
        method: NoiseMethod::None,
        normalize: false,
        db: false,
    };
    let c = edc_batch(&[&h], 1.0, opts, Some(1), never()).unwrap();
    assert_eq!(c[0], vec![14.0, 13.0, 9.0]);
}
