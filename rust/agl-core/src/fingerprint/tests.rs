use super::*;
use crate::parallel::never;
use crate::testutil::noise;

/// Noise with a moving band: a texture whose peaks wander.
fn texture(n: usize, seed: u64) -> Vec<f32> {
    let w = noise(n, seed);
    let mut y = vec![0.0f32; n];
    let (mut a, mut b) = (0.0f32, 0.0f32);
    for i in 0..n {
        // Two-pole resonator whose centre sweeps with a slow seeded wobble.
        let f = 0.05 + 0.04 * ((i as f32 * 3e-4 + seed as f32).sin());
        let r = 0.97f32;
        let c = 2.0 * r * (std::f32::consts::TAU * f).cos();
        let v = w[i] + c * a - r * r * b;
        b = a;
        a = v;
        y[i] = v * 0.05 + w[i] * 0.2;
    }
    y
}

fn fp(y: &[f32], sr: u32) -> Fingerprint {
    fingerprint(&[y], sr).unwrap()
}

#[test]
fn silence_has_no_hashes() {
    let f = fp(&vec![0.0; 80_000], 16_000);
    assert!(f.hashes.is_empty());
    assert!(!f.fingerprintable());
}

#[test]
fn steady_tone_is_not_fingerprintable() {
    let sr = 16_000;
    let y: Vec<f32> = (0..sr as usize * 10)
        .map(|i| (std::f32::consts::TAU * 440.0 * i as f32 / sr as f32).sin() * 0.5)
        .collect();
    let f = fp(&y, sr);
    assert!(
        !f.fingerprintable(),
        "tone gave {} distinct hashes",
        f.distinct
    );
}

#[test]
fn noise_texture_is_fingerprintable_and_gain_invariant() {
    let y = texture(8000 * 20, 3);
    let f = fp(&y, 8000);
    assert!(f.fingerprintable());
    assert!(f.times.windows(2).all(|w| w[0] <= w[1]));
    assert!(f.hashes.iter().all(|&h| h < 1 << HASH_BITS));
    let louder: Vec<f32> = y.iter().map(|v| v * 2.0).collect();
    assert_eq!(fp(&louder, 8000).hashes, f.hashes);
}

#[test]
fn hostile_input_gives_typed_errors() {
    let mut y = vec![0.1f32; 1000];
    y[7] = f32::NAN;
    assert!(matches!(
        fingerprint(&[&y], 8000),
        Err(AglError::NonFinite { index: 7, .. })
    ));
    assert!(matches!(fingerprint(&[&[]], 8000), Err(AglError::Shape(_))));
    assert!(matches!(fingerprint(&[], 8000), Err(AglError::Shape(_))));
    let ok = vec![0.1f32; 1000];
    assert!(matches!(
        fingerprint(&[&ok], u32::MAX),
        Err(AglError::InvalidParameter { .. })
    ));
    assert!(matches!(
        fingerprint(&[&ok], 0),
        Err(AglError::InvalidParameter { .. })
    ));
}

#[test]
fn trimmed_copy_pairs_at_its_offset() {
    let sr = 8000usize;
    let y = texture(sr * 30, 5);
    let other = texture(sr * 30, 9);
    // The copy starts 7 s (218.75 frames) into the original.
    let copy = &y[7 * sr..27 * sr];
    let fps = [fp(&y, 8000), fp(copy, 8000), fp(&other, 8000)];
    let items: Vec<PairItem> = fps
        .iter()
        .zip([y.len(), copy.len(), other.len()])
        .map(|(f, n)| PairItem {
            hashes: &f.hashes,
            times: &f.times,
            n_frames: n_frames(n) as u32,
        })
        .collect();
    let m = pair(&items, PairOptions::default(), Some(2), never()).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!((m[0].a, m[0].b), (0, 1));
    assert!((m[0].start_a as i64 - 219).abs() <= 1, "{:?}", m[0]);
    assert_eq!(m[0].start_b, 0);
    // The copy's frames sit 3/4 of a hop off the original's grid.
    assert!(m[0].votes >= 30, "{:?}", m[0]);
    let one = pair(&items, PairOptions::default(), Some(1), never()).unwrap();
    assert_eq!(one, m);
}

#[test]
fn pair_rejects_bad_fingerprints() {
    let h = [1u32, 2];
    let t = [3u32, 1];
    let bad = [PairItem {
        hashes: &h,
        times: &t,
        n_frames: 10,
    }];
    assert!(pair(&bad, PairOptions::default(), None, never()).is_err());
    let big = [1u32 << HASH_BITS];
    let t1 = [0u32];
    let bad = [PairItem {
        hashes: &big,
        times: &t1,
        n_frames: 10,
    }];
    assert!(pair(&bad, PairOptions::default(), None, never()).is_err());
}

/// Synthetic fingerprints: `n` clips of 100 random hashes in frames
/// `0..600`, each also holding a 15-hash jingle at frames `0..15` (so each
/// jingle hash has `n` postings), and planted copies: clip `b` of each
/// `(a, b)` in `planted` takes the first 60 hashes of `a`, moved 40 frames.
fn corpus(n: usize, planted: &[(usize, usize)]) -> Vec<(Vec<u32>, Vec<u32>)> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut clips: Vec<Vec<(u32, u32)>> = (0..n)
        .map(|_| {
            let mut v: Vec<(u32, u32)> = (0..100)
                .map(|_| {
                    let r = next();
                    (
                        (r as u32) & ((1 << HASH_BITS) - 1),
                        ((r >> 32) % 600) as u32,
                    )
                })
                .collect();
            v.extend((0..15u32).map(|k| (0x3f_0000 + k * 64 + 5, k)));
            v
        })
        .collect();
    for &(a, b) in planted {
        let mut src = clips[a].clone();
        src.sort_by_key(|e| e.1);
        clips[b] = src
            .iter()
            .filter(|e| e.1 >= 40)
            .take(60)
            .map(|&(h, t)| (h, t - 40))
            .collect();
    }
    clips
        .into_iter()
        .map(|mut v| {
            v.sort_by_key(|e| e.1);
            v.into_iter().unzip()
        })
        .collect()
}

fn items(c: &[(Vec<u32>, Vec<u32>)]) -> Vec<PairItem<'_>> {
    c.iter()
        .map(|(h, t)| PairItem {
            hashes: h,
            times: t,
            n_frames: 600,
        })
        .collect()
}

/// The blocks of a corpus cut into three shards (each shard alone, each
/// pair of shards), with the summed per-shard hash counts, give the matches
/// of one index over the whole corpus; without the summed counts, the
/// jingle (common in the corpus, not in a shard) would vote.
#[test]
fn sharded_blocks_equal_one_index() {
    let n = 2 * MAX_POSTINGS + 300;
    let planted = [(3, 9), (1000, 1001), (40, n - 2), (n / 3 - 1, n / 3)];
    let c = corpus(n, &planted);
    let all = items(&c);
    let opts = PairOptions::default();
    let whole = pair(&all, opts, Some(2), never()).unwrap();
    let mut got: Vec<(u32, u32)> = whole.iter().map(|m| (m.a, m.b)).collect();
    got.sort_unstable();
    let mut want: Vec<(u32, u32)> = planted.iter().map(|&(a, b)| (a as u32, b as u32)).collect();
    want.sort_unstable();
    assert_eq!(got, want);

    let cuts = [0, n / 3, 2 * n / 3, n];
    let shards: Vec<&[PairItem]> = cuts.windows(2).map(|w| &all[w[0]..w[1]]).collect();
    let mut counts = vec![0u32; 1 << HASH_BITS];
    for s in &shards {
        for (t, v) in counts.iter_mut().zip(hash_counts(s, Some(1)).unwrap()) {
            *t += v;
        }
    }
    assert_eq!(counts, hash_counts(&all, Some(2)).unwrap());
    let blocks = |counts: &[u32]| {
        let mut out = Vec::new();
        for i in 0..shards.len() {
            for j in i..shards.len() {
                let others = (i != j).then(|| shards[j]);
                for mut m in
                    pair_with(shards[i], others, Some(counts), opts, Some(2), never()).unwrap()
                {
                    m.a += cuts[i] as u32;
                    m.b += cuts[j] as u32;
                    out.push(m);
                }
            }
        }
        out.sort_by_key(|m| (m.a, m.b));
        out
    };
    assert_eq!(blocks(&counts), whole);
    // A shard holds fewer than MAX_POSTINGS copies of the jingle: without
    // the corpus's counts its clips would all match through it (the 99 of
    // the first 100 that hold it; clip 9 is the planted copy of clip 3).
    let part = &shards[0][..100];
    let alone = pair_with(part, None, None, opts, Some(2), never()).unwrap();
    assert_eq!(alone.len(), 99 * 98 / 2 + 1);
    let with = pair_with(part, None, Some(&counts), opts, Some(2), never()).unwrap();
    assert_eq!(
        with.iter().map(|m| (m.a, m.b)).collect::<Vec<_>>(),
        [(3, 9)]
    );
    assert!(pair_with(&all, None, Some(&counts[1..]), opts, None, never()).is_err());
}
