use super::*;
use crate::parallel::never;
use crate::testutil::noise;

#[test]
fn white_noise_is_flat_and_a_tone_is_not() {
    let x = noise(32000, 1);
    let tone: Vec<f32> = (0..32000)
        .map(|i| (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 16000.0).sin() as f32 * 0.5)
        .collect();
    let p = QualityParams::new(16000.0);
    let m = quality_batch(&[&x, &tone], &p, Some(1), never()).unwrap();
    assert!(m[0].flatness > 0.8, "{}", m[0].flatness);
    assert!(m[1].flatness < 0.01, "{}", m[1].flatness);
    assert!((m[1].rms - 0.5 / 2f64.sqrt()).abs() < 1e-4);
}

#[test]
fn levels_of_a_known_clip() {
    let x = [0.5f32, -1.0, 0.25, 0.0];
    let l = levels_batch(&[&x, &[]], 0.999, Some(1), never()).unwrap();
    let rms = ((0.25 + 1.0 + 0.0625) / 4.0f64).sqrt();
    assert_eq!(l[0], [1.0, rms, 0.25]);
    assert_eq!(l[1], [0.0; 3]);
    assert!(levels_batch(&[&[f32::NAN]], 0.999, Some(1), never()).is_err());
}

#[test]
fn clipped_sine_ratio() {
    let x: Vec<f32> = (0..1000)
        .map(|i| ((i as f32 * 0.1).sin() * 2.0).clamp(-1.0, 1.0))
        .collect();
    let expect = x.iter().filter(|v| v.abs() == 1.0).count() as f64 / 1000.0;
    let (cr, fs) = clipping_ratios(&x, 0.999);
    assert_eq!(cr, expect);
    assert!(fs >= cr && fs > 0.3);
}

#[test]
fn degenerate_clips_are_defined() {
    let z = vec![0.0f32; 100];
    let one = [0.3f32];
    let p = QualityParams::new(16000.0);
    let m = quality_batch(&[&z, &one, &[]], &p, Some(2), never()).unwrap();
    for r in &m {
        assert!(r.rms.is_finite() && r.flatness.is_finite() && r.complexity.is_finite());
    }
    assert_eq!(m[0].clipping_ratio, 0.0);
    assert_eq!(m[1].clipping_ratio, 1.0);
}

#[test]
fn constant_clip_has_zero_complexity() {
    // Identical frames give identical spectra, so no frame-to-frame
    // change: 0 exactly, as librosa + scikit-maad give.
    let x = vec![0.7f32; 40000];
    let m = quality_batch(&[&x], &QualityParams::new(16000.0), Some(1), never()).unwrap();
    assert_eq!((m[0].complexity, m[0].aci), (0.0, 0.0));
}

#[test]
fn one_pass_statistics_match_their_definitions() {
    // Ties at the peak in several lanes, a peak reached late in one lane
    // after an earlier lower plateau, a tail shorter than the lanes,
    // and lengths around the block size.
    for len in [1, 15, 17, 1000, BLOCK - 3, BLOCK, 2 * BLOCK + 5] {
        let mut x: Vec<f32> = noise(len, 7).iter().map(|v| v * 0.5).collect();
        for (i, v) in x.iter_mut().enumerate() {
            if i % 37 == 5 {
                *v = 0.75;
            }
            if i % 101 == 50 {
                *v = -0.9;
            }
        }
        let peak = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let at = x.iter().filter(|v| v.abs() == peak).count() as u64;
        let full = x.iter().filter(|v| v.abs() >= 0.7).count() as u64;
        let sq: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
        let st = clip_stats(&x, 0.7);
        assert_eq!(
            (st.peak(), st.at_peak(), st.full()),
            (peak, at, full),
            "{len}"
        );
        assert!((st.sum_squares() - sq).abs() <= 1e-12 * sq, "{len}");
        // Fed in blocks as the clip pass does: the same statistics.
        let mut blocks = ClipStats::new(0.7);
        for b in x.chunks(BLOCK) {
            blocks.feed(b);
        }
        assert_eq!(blocks.sum_squares(), st.sum_squares());
        assert_eq!((blocks.at_peak(), blocks.full()), (at, full));
    }
}

#[test]
fn levels_of_parts_equal_levels_of_the_joined_clip() {
    let (a, mut b) = (noise(1001, 4), noise(777, 5));
    b[3] = 1.0;
    b[9] = -1.0;
    let joined: Vec<f32> = a.iter().chain(&b).copied().collect();
    let parts = clip_levels(&[&a, &b], CLIP_LEVEL).unwrap();
    let whole = levels_batch(&[&joined], CLIP_LEVEL, Some(1), never()).unwrap()[0];
    assert_eq!((parts[0], parts[2]), (whole[0], whole[2]));
    assert!((parts[1] - whole[1]).abs() <= 1e-14 * whole[1]);
    assert_eq!(parts[2], 2.0 / 1778.0);
    assert_eq!(parts[3], 2.0 / 1778.0);
    assert_eq!(clip_levels(&[&[], &[]], CLIP_LEVEL), Some([0.0; 4]));
    b[100] = f32::NAN;
    assert_eq!(clip_levels(&[&a, &b], CLIP_LEVEL), None);
}

#[test]
fn the_clip_pass_equals_the_separate_kernels() {
    // Welch resumed block by block gives the whole-clip PSD to the bit.
    let x = noise(3 * BLOCK + 777, 9);
    let p = QualityParams::new(32000.0);
    let m = quality_batch(&[&x], &p, Some(1), never()).unwrap()[0];
    let psd = welch_psd(&x, p.sr, p.welch_nperseg, &mut None);
    assert_eq!(m.flatness, flatness_of(psd.into_iter(), p.amin));
    let (cr, fs) = clipping_ratios(&x, p.full_scale_threshold);
    assert_eq!((m.clipping_ratio, m.full_scale_ratio), (cr, fs));
}

#[test]
fn decoder_levels_are_the_quality_statistics_to_the_bit() {
    // One channel: the levels pass's RMS, share at the peak and share at
    // or above the threshold are the quality pass's own values, so a
    // clip measured by the decoder need not be scanned again.
    let p = QualityParams::new(32000.0);
    let mut x: Vec<f32> = noise(2 * BLOCK + 333, 11).iter().map(|v| v * 0.9).collect();
    x[17] = 1.0;
    x[BLOCK + 5] = -1.0;
    x[40] = 0.9995;
    let silent = vec![0.0f32; 3000];
    let items: Vec<&[f32]> = vec![&x, &silent, &[], &x[..700]];
    let known: Vec<KnownStats> = items
        .iter()
        .map(|c| {
            let l = clip_levels(&[c], p.full_scale_threshold).unwrap();
            [l[1], l[3], l[2]]
        })
        .collect();
    let full = quality_batch(&items, &p, Some(1), never()).unwrap();
    let reused = quality_batch_with(&items, &p, Some(&known), Some(2), never()).unwrap();
    assert_eq!(full, reused);
    assert_eq!(full[0].clipping_ratio, 2.0 / x.len() as f64);
    assert!(matches!(
        quality_batch_with(&items, &p, Some(&known[..1]), Some(1), never()),
        Err(AglError::Shape(_))
    ));
}

#[test]
fn the_first_bad_item_is_reported_whatever_the_threads() {
    let good = noise(5000, 1);
    let mut bad1 = noise(5000, 2);
    bad1[4321] = f32::NAN;
    let mut bad3 = noise(5000, 3);
    bad3[7] = f32::INFINITY;
    let items: Vec<&[f32]> = vec![&good, &bad1, &good, &bad3];
    for threads in [1, 2] {
        let p = QualityParams::new(16000.0);
        for err in [
            quality_batch(&items, &p, Some(threads), never()).map(|_| ()),
            levels_batch(&items, 0.999, Some(threads), never()).map(|_| ()),
        ] {
            match err {
                Err(AglError::NonFinite { what, index }) => {
                    assert_eq!((what.as_str(), index), ("audio buffer (item 1)", 4321))
                }
                other => panic!("expected NonFinite, got {other:?}"),
            }
        }
    }
}

/// Welch PSD from a direct f64 DFT of each detrended, windowed segment.
fn naive_welch(x: &[f32], sr: f64, n: usize) -> Vec<f64> {
    let w: Vec<f64> = (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect();
    let wss: f64 = w.iter().map(|v| v * v).sum();
    let step = n - n / 2;
    let n_seg = (x.len() - n) / step + 1;
    let mut acc = vec![0.0; n / 2 + 1];
    for k in 0..n_seg {
        let seg = &x[k * step..k * step + n];
        let mean = seg.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        for (f, a) in acc.iter_mut().enumerate() {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, &v) in seg.iter().enumerate() {
                let ph = -2.0 * std::f64::consts::PI * (f * j) as f64 / n as f64;
                let y = (v as f64 - mean) * w[j];
                re += y * ph.cos();
                im += y * ph.sin();
            }
            *a += re * re + im * im;
        }
    }
    let scale = 1.0 / (sr * wss * n_seg as f64);
    acc.iter()
        .enumerate()
        .map(|(f, a)| a * scale * if f == 0 || f == n / 2 { 1.0 } else { 2.0 })
        .collect()
}

#[test]
fn lane_welch_matches_a_direct_dft() {
    // 64-sample segments: one full block of 16 segments and a partial
    // one (37 segments), lanes from the frame-batched transform.
    let x = noise(32 * 37 + 32, 21);
    let mut scratch = None;
    let psd = welch_psd(&x, 8000.0, 64, &mut scratch);
    assert!(scratch.as_ref().is_some_and(|s| s.lanes.is_some()));
    let want = naive_welch(&x, 8000.0, 64);
    let top = want.iter().fold(0f64, |m, &v| m.max(v));
    for (f, (g, w)) in psd.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 2e-6 * top, "bin {f}: {g} vs {w}");
    }
    // The one-segment-at-a-time path: the same density within round-off.
    let mut scalar = Some(WelchScratch::new(64).without_lanes());
    let old = welch_psd(&x, 8000.0, 64, &mut scalar);
    for (g, w) in psd.iter().zip(&old) {
        assert!((g - w).abs() <= 2e-6 * top);
    }
}

#[test]
fn lane_metrics_match_the_frame_by_frame_path() {
    // Lengths with a partial last block of Welch segments, one shorter
    // than a segment (a non-power-of-two Welch length: the old path),
    // one just two STFT frames long, and a clipped clip.
    let mut clipped: Vec<f32> = noise(40000, 5).iter().map(|v| v * 4.0).collect();
    clipped.iter_mut().for_each(|v| *v = v.clamp(-1.0, 1.0));
    let clips: Vec<Vec<f32>> = vec![
        noise(3 * BLOCK + 777, 1),
        noise(900, 2),
        noise(768, 3),
        noise(16 * 256 + 256, 4),
        clipped,
    ];
    let items: Vec<&[f32]> = clips.iter().map(|c| c.as_slice()).collect();
    let p = QualityParams::new(32000.0);
    let lanes = quality_batch(&items, &p, Some(1), never()).unwrap();
    let old = quality_batch_impl(&items, &p, None, false, Some(1), never()).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * a.abs().max(b.abs());
    for (i, (a, b)) in lanes.iter().zip(&old).enumerate() {
        assert_eq!(
            (a.rms, a.clipping_ratio, a.full_scale_ratio),
            (b.rms, b.clipping_ratio, b.full_scale_ratio)
        );
        assert!(close(a.flatness, b.flatness), "{i}: {a:?} vs {b:?}");
        assert!(close(a.complexity, b.complexity), "{i}: {a:?} vs {b:?}");
        assert!(close(a.aci, b.aci), "{i}: {a:?} vs {b:?}");
        assert!(a.complexity > 0.0 && a.aci > 0.0, "{i}");
    }
    // Identical whatever the thread count.
    assert_eq!(quality_batch(&items, &p, Some(2), never()).unwrap(), lanes);
}

#[test]
fn lane_flatness_frames_match_a_direct_dft() {
    let x = noise(5000, 13);
    let mut sp = StftParams::new(256);
    sp.hop_length = 100;
    let out = spectral_flatness_frames(&[&x], &sp, 1e-10, 2.0, None, Some(1), never()).unwrap();
    let plan = StftPlan::new(sp.clone()).unwrap();
    let n_frames = out.n_frames[0];
    assert_eq!(n_frames, plan.n_frames(x.len()).unwrap());
    let mut frame = vec![0.0f32; 256];
    for t in 0..n_frames {
        plan.window_frame(&Source::plain(&x), t, &mut frame);
        let power = (0..=128).map(|f| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (j, &v) in frame.iter().enumerate() {
                let ph = -2.0 * std::f64::consts::PI * (f * j) as f64 / 256.0;
                re += v as f64 * ph.cos();
                im += v as f64 * ph.sin();
            }
            re * re + im * im
        });
        let want = flatness_of(power, 1e-10);
        let got = out.data[out.offsets[0] + t] as f64;
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "frame {t}: {got} vs {want}"
        );
    }
}

#[test]
fn complexity_of_constant_rows_is_zero() {
    let e = vec![1.0; 3 * 5];
    assert_eq!(complexity_of(&e, 3, 5).1, 0.0);
    let e = [1.0, 3.0, 1.0, 0.0, 0.0, 0.0];
    let (per, tot) = complexity_of(&e, 2, 3);
    assert!((per[0] - 4.0 / 5.0).abs() < 1e-12 && per[1] == 0.0 && tot == per[0]);
}
