//! The lane transform against a direct DFT, against itself on every
//! backend, and its memory kernels.

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
                    (2.0 * std::f64::consts::PI * (b * 9) as f64 * j as f64 / n as f64).cos() as f32
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
            src: [plan.ones(); LANES],
            win: [plan.ones(); LANES],
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
            src: [plan.ones(); LANES],
            win: [plan.ones(); LANES],
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
        let half = crate::spectral::rfft::RealFft::new(n, crate::spectral::plans::cfft_plan);
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
