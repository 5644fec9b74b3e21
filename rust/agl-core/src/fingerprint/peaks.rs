//! Peak picking on the whitened spectrogram and peak pairing into hashes.

use super::{FAN_OUT, FREQ_NB, LO_BAND, MAX_DF, MAX_DT, MIN_PROMINENCE, TIME_NB};

/// A spectral peak: frame and band (absolute band index,
/// `LO_BAND..HI_BAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    pub t: u32,
    pub f: u16,
}

/// Sliding maximum of `row` over `±r` (clamped at the edges) into `out`,
/// by van Herk / Gil-Werman: blocks of `2r + 1` with running maxima from
/// the left (`g`) and from the right (`h`); the window `[i - r, i + r]`
/// spans at most two blocks, so its maximum is `max(h[i - r], g[i + r])`.
/// `g` and `h` are scratch of at least `row.len() + 2r` values.
fn sliding_max(row: &[f32], r: usize, out: &mut [f32], g: &mut [f32], h: &mut [f32]) {
    let n = row.len();
    let w = 2 * r + 1;
    let m = n + 2 * r;
    // Padded row: `r` values of -inf either side.
    let at = |k: usize| -> f32 {
        if k < r || k >= r + n {
            f32::NEG_INFINITY
        } else {
            row[k - r]
        }
    };
    for k in 0..m {
        g[k] = if k % w == 0 {
            at(k)
        } else {
            g[k - 1].max(at(k))
        };
    }
    for k in (0..m).rev() {
        h[k] = if k + 1 == m || (k + 1) % w == 0 {
            at(k)
        } else {
            h[k + 1].max(at(k))
        };
    }
    // Window of output i in padded indices: [i, i + 2r].
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[i].max(g[i + 2 * r]);
    }
}

/// Peaks of the whitened spectrogram `s` (`[n_t, width]`), in frame then
/// band order: points at least [`MIN_PROMINENCE`] high that are the maximum
/// of their `±FREQ_NB` x `±TIME_NB` neighbourhood.
pub fn find(s: &[f32], n_t: usize, width: usize) -> Vec<Peak> {
    let mut fmax = vec![0.0f32; s.len()];
    let (mut g, mut h) = (
        vec![0.0f32; width + 2 * FREQ_NB],
        vec![0.0f32; width + 2 * FREQ_NB],
    );
    for (row, out) in s.chunks_exact(width).zip(fmax.chunks_exact_mut(width)) {
        sliding_max(row, FREQ_NB, out, &mut g, &mut h);
    }
    let mut peaks = Vec::new();
    for t in 0..n_t {
        let row = &s[t * width..(t + 1) * width];
        let lo = t.saturating_sub(TIME_NB);
        let hi = (t + TIME_NB + 1).min(n_t);
        for (f, &v) in row.iter().enumerate() {
            if v < MIN_PROMINENCE || v < fmax[t * width + f] {
                continue;
            }
            let top = (lo..hi).all(|u| fmax[u * width + f] <= v);
            if top {
                peaks.push(Peak {
                    t: t as u32,
                    f: (f + LO_BAND) as u16,
                });
            }
        }
    }
    peaks
}

/// Pack an anchor band, a target band and their frame distance into a hash.
pub fn hash(f1: u16, f2: u16, dt: u32) -> u32 {
    ((f1 as u32 & 0xff) << 14) | ((f2 as u32 & 0xff) << 6) | (dt & 0x3f)
}

/// Landmarks of `peaks` (frame order): each anchor with its next
/// [`FAN_OUT`] peaks within [`MAX_DT`] frames and [`MAX_DF`] bands. Returns
/// hashes and anchor frames.
pub fn landmarks(peaks: &[Peak]) -> (Vec<u32>, Vec<u32>) {
    let mut hashes = Vec::with_capacity(peaks.len() * FAN_OUT);
    let mut times = Vec::with_capacity(peaks.len() * FAN_OUT);
    for (i, a) in peaks.iter().enumerate() {
        let mut k = 0;
        for b in &peaks[i + 1..] {
            if b.t > a.t + MAX_DT {
                break;
            }
            if b.t == a.t || (b.f as i32 - a.f as i32).unsigned_abs() as usize > MAX_DF {
                continue;
            }
            hashes.push(hash(a.f, b.f, b.t - a.t));
            times.push(a.t);
            k += 1;
            if k == FAN_OUT {
                break;
            }
        }
    }
    (hashes, times)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block algorithm against the window maximum by definition.
    #[test]
    fn sliding_max_matches_naive() {
        let mut x = 12345u32;
        for n in [1usize, 2, 5, 24, 25, 26, 212] {
            let row: Vec<f32> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 8) as f32
                })
                .collect();
            for r in [0usize, 1, 3, 12] {
                let (mut g, mut h) = (vec![0.0; n + 2 * r], vec![0.0; n + 2 * r]);
                let mut out = vec![0.0; n];
                sliding_max(&row, r, &mut out, &mut g, &mut h);
                for i in 0..n {
                    let lo = i.saturating_sub(r);
                    let want = row[lo..(i + r + 1).min(n)]
                        .iter()
                        .fold(f32::MIN, |a, &b| a.max(b));
                    assert_eq!(out[i], want, "n={n} r={r} i={i}");
                }
            }
        }
    }
}
