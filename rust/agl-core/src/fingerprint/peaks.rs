//! Peak picking on the whitened spectrogram and peak pairing into hashes.

use super::{FAN_OUT, FREQ_NB, LO_BIN, MAX_DF, MAX_DT, MIN_PROMINENCE, TIME_NB};

/// A spectral peak: frame and bin (absolute bin index, `LO_BIN..HI_BIN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    pub t: u32,
    pub f: u16,
}

/// Sliding maximum of `row` over `±r` (clamped at the edges) into `out`.
fn sliding_max(row: &[f32], r: usize, out: &mut [f32]) {
    let n = row.len();
    for (i, o) in out.iter_mut().enumerate() {
        let lo = i.saturating_sub(r);
        let hi = (i + r + 1).min(n);
        *o = row[lo..hi].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    }
}

/// Peaks of the whitened spectrogram `s` (`[n_t, width]`), in frame then
/// bin order: points at least [`MIN_PROMINENCE`] high that are the maximum
/// of their `±FREQ_NB` x `±TIME_NB` neighbourhood.
pub fn find(s: &[f32], n_t: usize, width: usize) -> Vec<Peak> {
    let mut fmax = vec![0.0f32; s.len()];
    for (row, out) in s.chunks_exact(width).zip(fmax.chunks_exact_mut(width)) {
        sliding_max(row, FREQ_NB, out);
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
                    f: (f + LO_BIN) as u16,
                });
            }
        }
    }
    peaks
}

/// Pack an anchor bin, a target bin and their frame distance into a hash.
pub fn hash(f1: u16, f2: u16, dt: u32) -> u32 {
    ((f1 as u32 & 0xff) << 14) | ((f2 as u32 & 0xff) << 6) | (dt & 0x3f)
}

/// Landmarks of `peaks` (frame order): each anchor with its next
/// [`FAN_OUT`] peaks within [`MAX_DT`] frames and [`MAX_DF`] bins. Returns
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
