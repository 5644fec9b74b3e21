//! The planned frame-batched real FFT ([`LaneFft`]) and its real-input
//! split.

use super::passes::*;
use super::{with_lanes, Frames, Lanes, LANES, V};

/// Lengths the lane transform takes: powers of two from 8 to 2^16.
pub fn supports(n: usize) -> bool {
    n.is_power_of_two() && (8..=1 << 16).contains(&n)
}

/// A planned frame-batched real FFT of `n` samples (see the module notes).
#[derive(Debug, Clone)]
pub struct LaneFft {
    n: usize,
    m: usize,
    /// Bit reversal of `0..m` (`log2 m` bits).
    rev: Vec<u32>,
    /// Per stage of span `s = 8, 16, .., m`: `W_s^k = exp(-2 pi i k / s)`
    /// for `k < s / 2`, stages concatenated (re, im).
    tw: Vec<(f32, f32)>,
    /// `W_n^k` for `k = 0 ..= m / 2` (the real-input split).
    post: Vec<(f32, f32)>,
    /// `n` ones: the window of frames passed as they are.
    ones: Vec<f32>,
    /// Radix-8 passes (see [`RADIX8_MIN`]).
    radix8: bool,
}

/// Smallest half-length `m` that runs radix-8 passes. Below it a block
/// (`m` values of 16 complex lanes, 128 m bytes) stays in a 48 KiB L1 cache
/// and radix-4 passes, with fewer live registers, are faster; from it on
/// the block spills to L2 and fewer passes over it win (measured: n = 1024
/// 11% faster with radix-8, n = 512 20% slower).
const RADIX8_MIN: usize = 512;

fn unit(k: usize, s: usize) -> (f32, f32) {
    let a = -2.0 * std::f64::consts::PI * k as f64 / s as f64;
    (a.cos() as f32, a.sin() as f32)
}

impl LaneFft {
    /// Plan a transform of `n` real samples; `None` unless [`supports`]`(n)`.
    pub fn new(n: usize) -> Option<Self> {
        if !supports(n) {
            return None;
        }
        let m = n / 2;
        let bits = m.trailing_zeros();
        let rev = (0..m as u32)
            .map(|j| j.reverse_bits() >> (32 - bits))
            .collect();
        // Twiddles of the passes of `stages`, in their order: with the
        // sub-transforms of size `e` done, a radix-8 pass (span 8e) while
        // three or more stages remain (large transforms only), else radix-4
        // (span 4e) or radix-2 (span 2e). The first pass (e = 1) is radix-8
        // for large transforms, else the multiply-free radix-4 pass.
        let radix8 = m >= RADIX8_MIN;
        let mut tw = Vec::new();
        let mut e = 1;
        if !radix8 {
            e = 4;
        }
        while e < m {
            let left = (m / e).trailing_zeros();
            if radix8 && left >= 3 {
                for k in 0..e {
                    tw.extend((1..8).map(|r| unit(r * k, 8 * e)));
                }
                e *= 8;
            } else if left == 2 {
                for k in 0..e {
                    tw.extend([unit(k, 4 * e), unit(2 * k, 4 * e), unit(3 * k, 4 * e)]);
                }
                e *= 4;
            } else {
                tw.extend((0..e).map(|k| unit(k, 2 * e)));
                e *= 2;
            }
        }
        let post = (0..=m / 2).map(|k| unit(k, n)).collect();
        Some(LaneFft {
            n,
            m,
            rev,
            tw,
            post,
            ones: vec![1.0; n],
            radix8,
        })
    }

    /// Input length `n`.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Never empty (plans have `n >= 8`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `n` ones (the window of a frame that is already windowed).
    pub fn ones(&self) -> &[f32] {
        &self.ones
    }

    /// Bins of the one-sided spectrum, `n / 2 + 1`.
    pub fn n_bins(&self) -> usize {
        self.m + 1
    }

    /// Scratch for [`LaneFft::forward`]: real and imaginary parts of
    /// `n / 2 + 1` bins.
    pub fn make_buffers(&self) -> (Vec<V>, Vec<V>) {
        (vec![V::ZERO; self.m + 1], vec![V::ZERO; self.m + 1])
    }

    /// One-sided spectra of up to [`LANES`] frames.
    ///
    /// `frames[l]` holds frame `l` (`n` samples each); lanes past
    /// `frames.len()` transform zeros. On return `re[k].0[l] + i im[k].0[l]`
    /// is bin `k` of frame `l`, `k = 0 ..= n / 2` (`re` and `im` need
    /// `n / 2 + 1` entries).
    pub fn forward(&self, frames: &[&[f32]], re: &mut [V], im: &mut [V]) {
        let used = frames.len().min(LANES);
        let mut f = Frames {
            src: [&self.ones; LANES],
            win: [&self.ones; LANES],
            windowed: false,
        };
        f.src[..used].copy_from_slice(&frames[..used]);
        self.forward_windowed(&f, used, re, im)
    }

    /// [`LaneFft::forward`] of `frames.src[l] * frames.win[l]`, `l < used`
    /// (windowing fused into the load; every slice has `n` samples).
    pub fn forward_windowed(&self, frames: &Frames<'_>, used: usize, re: &mut [V], im: &mut [V]) {
        with_lanes!(R => self.forward_with::<R>(frames, used, re, im))
    }

    /// The load and the complex stages of [`LaneFft::forward_windowed`],
    /// without the split: `re[..m]`, `im[..m]` hold the half-length
    /// transform `Z`, for [`LaneFft::split_pair`].
    pub fn transform(&self, frames: &Frames<'_>, used: usize, re: &mut [V], im: &mut [V]) {
        with_lanes!(R => self.transform_with::<R>(frames, used, re, im))
    }

    /// [`LaneFft::forward_windowed`] reduced to the power spectrum:
    /// `power[k]` gets `|X[k]|^2` (`n / 2 + 1` vectors), computed as the
    /// bins are formed; `re` and `im` are scratch. The same values, bit for
    /// bit, as squaring the output of `forward_windowed`.
    pub fn forward_power(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
        power: &mut [V],
    ) {
        let m = self.m;
        assert!(power.len() > m, "power holds n / 2 + 1 bins");
        let used = used.min(LANES);
        self.check_buffers(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; indices are < m + 1, and the
        // frames and windows hold 2 m samples (checked).
        with_lanes!(R => unsafe {
            R::load(frames, used, &self.rev, &mut re[..m], &mut im[..m]);
            match self.stages_before_last::<R>(&mut re[..m], &mut im[..m]) {
                Some((e, tw)) => self.last_pass_power::<R>(&re[..m], &im[..m], e, tw, &mut power[..=m]),
                None => self.split_power::<R>(&mut re[..m], &mut im[..m], &mut power[..=m]),
            }
        })
    }

    #[inline(always)]
    pub(crate) fn forward_with<R: Lanes>(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
    ) {
        let m = self.m;
        self.transform_with::<R>(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; indices are < m + 1.
        unsafe { self.split::<R>(&mut re[..=m], &mut im[..=m]) }
    }

    /// The load and the complex stages (everything but the split).
    #[inline(always)]
    fn transform_with<R: Lanes>(
        &self,
        frames: &Frames<'_>,
        used: usize,
        re: &mut [V],
        im: &mut [V],
    ) {
        let m = self.m;
        let used = used.min(LANES);
        self.check_buffers(frames, used, re, im);
        // SAFETY: `run` chose R for this CPU; every index below is < m + 1
        // and every frame and window slice holds 2 m samples (checked).
        unsafe {
            R::load(frames, used, &self.rev, &mut re[..m], &mut im[..m]);
            self.stages::<R>(&mut re[..m], &mut im[..m]);
        }
    }

    /// The sizes the unchecked indexing of a transform relies on: `n / 2
    /// + 1` bins of scratch, `n` samples in every frame and window used.
    #[inline(always)]
    fn check_buffers(&self, frames: &Frames<'_>, used: usize, re: &[V], im: &[V]) {
        let m = self.m;
        assert!(
            re.len() > m && im.len() > m,
            "lane buffers hold n / 2 + 1 bins"
        );
        assert!(
            frames.src[..used]
                .iter()
                .chain(&frames.win[..used])
                .all(|f| f.len() >= 2 * m),
            "frames and windows hold n samples"
        );
    }

    /// All decimation-in-time stages on bit-reversed input, in place
    /// (`re`, `im`: `m` entries).
    #[inline(always)]
    unsafe fn stages<R: Lanes>(&self, re: &mut [V], im: &mut [V]) {
        if let Some((e, tw)) = self.stages_before_last::<R>(re, im) {
            radix8_stage::<R>(re, im, e, tw);
        }
    }

    /// The stages of [`LaneFft::stages`], except a last one that is a
    /// radix-8 pass over the whole block (span `m`): that one is left to the
    /// caller, which gets its `e = m / 8` and twiddles (see
    /// [`LaneFft::last_pass_power`]). `None` when every stage ran.
    #[inline(always)]
    unsafe fn stages_before_last<R: Lanes>(
        &self,
        re: &mut [V],
        im: &mut [V],
    ) -> Option<(usize, &[(f32, f32)])> {
        let m = self.m;
        let mut e = 1;
        let mut off = 0;
        if !self.radix8 {
            radix4_first::<R>(re, im);
            e = 4;
        } else if m >= 512 {
            // The first two radix-8 passes (spans 8 and 64) stay inside runs
            // of 64 values: both run on one run (8 KiB) while it is in L1,
            // instead of each sweeping the whole block.
            let (tw1, tw8) = (&self.tw[..7], &self.tw[7..7 + 56]);
            for (r, i) in re.chunks_exact_mut(64).zip(im.chunks_exact_mut(64)) {
                radix8_stage::<R>(r, i, 1, tw1);
                radix8_stage::<R>(r, i, 8, tw8);
            }
            (e, off) = (64, 63);
        }
        while e < m {
            let left = (m / e).trailing_zeros();
            if self.radix8 && left >= 3 {
                let tw = &self.tw[off..off + 7 * e];
                if 8 * e == m {
                    return Some((e, tw));
                }
                radix8_stage::<R>(re, im, e, tw);
                off += 7 * e;
                e *= 8;
            } else if left == 2 {
                radix4_stage::<R>(re, im, 2 * e, &self.tw[off..off + 3 * e]);
                off += 3 * e;
                e *= 4;
            } else {
                single_stage::<R>(re, im, 2 * e, &self.tw[off..off + e]);
                off += e;
                e *= 2;
            }
        }
        None
    }

    /// The last radix-8 pass (span `m`, `e = m / 8`) fused with the split to
    /// `|X[k]|^2` ([`LaneFft::split_power`]): butterflies `k` and `e - k`
    /// produce between them both partners `Z[p]`, `Z[m - p]` of each of
    /// their outputs (`p = k + q e` pairs with `m - p = (e - k) + (7 - q)
    /// e`), so the pass's output is split and squared as it is formed, not
    /// written back and read again. The same operations as the two steps
    /// apart, so the same bits.
    #[inline(always)]
    unsafe fn last_pass_power<R: Lanes>(
        &self,
        re: &[V],
        im: &[V],
        e: usize,
        tw: &[(f32, f32)],
        out: &mut [V],
    ) {
        let m = self.m;
        // Butterfly 0 pairs with itself: outputs q and 8 - q; output 0 is
        // Z[0] (bins 0 and m).
        let a = radix8_values::<R, false>(re, im, 0, e, &[]);
        let (x0, xm) = split_edge_values::<R>(a[0]);
        power::<R>(x0).st(&mut out[0]);
        power::<R>(xm).st(&mut out[m]);
        for q in 1..=4 {
            self.pair_power::<R>(q * e, a[q], a[8 - q], out);
        }
        for k in 1..=e / 2 {
            let w = &tw[7 * k..7 * k + 7];
            let a = radix8_values::<R, true>(re, im, k, e, w);
            if 2 * k == e {
                // Pairs with itself: outputs q and 7 - q.
                for q in 0..4 {
                    self.pair_power::<R>(k + q * e, a[q], a[7 - q], out);
                }
            } else {
                let j = e - k;
                let b = radix8_values::<R, true>(re, im, j, e, &tw[7 * j..7 * j + 7]);
                for q in 0..8 {
                    let p = k + q * e;
                    if 2 * p < m {
                        self.pair_power::<R>(p, a[q], b[7 - q], out);
                    } else {
                        self.pair_power::<R>(m - p, b[7 - q], a[q], out);
                    }
                }
            }
        }
    }

    /// `|X[p]|^2` and `|X[m - p]|^2` (`1 <= p <= m / 2`; the middle bin
    /// once) from `Z[p]`, `Z[m - p]`, into `out`.
    #[inline(always)]
    unsafe fn pair_power<R: Lanes>(&self, p: usize, zp: [R; 2], zq: [R; 2], out: &mut [V]) {
        let (xp, xq) = self.split_values::<R>(zp, zq, p);
        power::<R>(xp).st(&mut out[p]);
        if 2 * p != self.m {
            power::<R>(xq).st(&mut out[self.m - p]);
        }
    }

    /// [`LaneFft::split`] straight to `|X[k]|^2` (`out`: `m + 1` entries),
    /// with the operations of squaring the split's output.
    #[inline(always)]
    unsafe fn split_power<R: Lanes>(&self, re: &mut [V], im: &mut [V], out: &mut [V]) {
        self.split_with::<R>(re, im, |_, _, k, xr, xi| {
            power::<R>([xr, xi]).st(&mut out[k])
        })
    }

    /// The real-input split (see [`crate::spectral::rfft`]), in place: `Z[0..m]` to
    /// `X[0..=m]` (`re`, `im`: `m + 1` entries).
    #[inline(always)]
    unsafe fn split<R: Lanes>(&self, re: &mut [V], im: &mut [V]) {
        self.split_with::<R>(re, im, |re, im, k, xr, xi| {
            xr.st(&mut re[k]);
            xi.st(&mut im[k]);
        })
    }

    /// The split's arithmetic: `emit(re, im, k, Re X[k], Im X[k])` for every
    /// bin `k = 0 ..= m`, each pair `k`, `m - k` emitted after both of its
    /// inputs `Z[k]`, `Z[m - k]` are read (so `emit` may store in place).
    #[inline(always)]
    unsafe fn split_with<R: Lanes>(
        &self,
        re: &mut [V],
        im: &mut [V],
        mut emit: impl FnMut(&mut [V], &mut [V], usize, R, R),
    ) {
        let m = self.m;
        let ([x0r, x0i], [xmr, xmi]) = split_edge::<R>(re, im);
        emit(re, im, 0, x0r, x0i);
        emit(re, im, m, xmr, xmi);
        for k in 1..=m / 2 {
            let j = m - k;
            let ([xkr, xki], [xjr, xji]) = self.split_bin::<R>(re, im, k);
            emit(re, im, k, xkr, xki);
            if j != k {
                emit(re, im, j, xjr, xji);
            }
        }
    }

    /// One step of the split (`1 <= k <= m / 2`): `X[k]` and `X[m - k]`
    /// (real and imaginary parts) from `Z[k]` and `Z[m - k]`.
    #[inline(always)]
    unsafe fn split_bin<R: Lanes>(&self, re: &[V], im: &[V], k: usize) -> ([R; 2], [R; 2]) {
        let j = self.m - k;
        self.split_values::<R>(
            [R::ld(&re[k]), R::ld(&im[k])],
            [R::ld(&re[j]), R::ld(&im[j])],
            k,
        )
    }

    /// [`LaneFft::split_bin`] on the values `Z[k]`, `Z[m - k]`.
    #[inline(always)]
    unsafe fn split_values<R: Lanes>(
        &self,
        [zkr, zki]: [R; 2],
        [zjr, zji]: [R; 2],
        k: usize,
    ) -> ([R; 2], [R; 2]) {
        let half = R::splat(0.5);
        let zero = R::splat(0.0);
        // E = (Z[k] + conj Z[j]) / 2, O = (Z[k] - conj Z[j]) / 2.
        let er = half.mul(zkr.add(zjr));
        let ei = half.mul(zki.sub(zji));
        let or = half.mul(zkr.sub(zjr));
        let oi = half.mul(zki.add(zji));
        // T = i W^k O.
        let (wr, wi) = self.post[k];
        let (pr, pi) = cmul(or, oi, wr, wi);
        let (tr, ti) = (zero.sub(pi), pr);
        // X[k] = E - T, X[j] = conj(E + T).
        ([er.sub(tr), ei.sub(ti)], [er.add(tr), zero.sub(ei.add(ti))])
    }

    /// The split of two transforms at once (the left and right ears of
    /// [`LaneFft::transform`]), neither written back: `consume(k0, x)`
    /// receives runs of consecutive bins `k0 .. k0 + len` (`len <=`
    /// [`SPLIT_RUN`]) as `x = [Re XL, Im XL, Re XR, Im XR]`, `len` vectors
    /// each, small enough to stay in L1 while they are consumed. The runs
    /// cover every bin `0 ..= m` once. The values are those of
    /// [`LaneFft::forward`], bit for bit.
    pub fn split_pair(
        &self,
        left: (&[V], &[V]),
        right: (&[V], &[V]),
        consume: impl FnMut(usize, [&[V]; 4]),
    ) {
        let m = self.m;
        assert!(
            [left.0, left.1, right.0, right.1]
                .iter()
                .all(|b| b.len() >= m),
            "split_pair reads m values of each buffer"
        );
        // SAFETY: `run` chose R for this CPU; indices are < m (checked).
        with_lanes!(R => unsafe { self.split_pair_with::<R>(left, right, consume) })
    }

    #[inline(always)]
    unsafe fn split_pair_with<R: Lanes>(
        &self,
        (lre, lim): (&[V], &[V]),
        (rre, rim): (&[V], &[V]),
        mut consume: impl FnMut(usize, [&[V]; 4]),
    ) {
        let m = self.m;
        // Bins k (ascending, `lo`) and m - k (descending, filled from the
        // end of `hi` so that each run is in ascending bin order).
        let mut lo = [[V::ZERO; SPLIT_RUN]; 4];
        let mut hi = [[V::ZERO; SPLIT_RUN]; 4];
        let put = |buf: &mut [[V; SPLIT_RUN]; 4], p: usize, l: [R; 2], r: [R; 2]| {
            l[0].st(&mut buf[0][p]);
            l[1].st(&mut buf[1][p]);
            r[0].st(&mut buf[2][p]);
            r[1].st(&mut buf[3][p]);
        };
        #[inline(always)]
        fn runs(buf: &[[V; SPLIT_RUN]; 4], a: usize, b: usize) -> [&[V]; 4] {
            [&buf[0][a..b], &buf[1][a..b], &buf[2][a..b], &buf[3][a..b]]
        }
        let (l0, lm) = split_edge::<R>(lre, lim);
        let (r0, rm) = split_edge::<R>(rre, rim);
        put(&mut lo, 0, l0, r0);
        put(&mut hi, 0, lm, rm);
        consume(0, runs(&lo, 0, 1));
        consume(m, runs(&hi, 0, 1));
        let last = m / 2;
        let mut k0 = 1;
        while k0 <= last {
            let len = (last + 1 - k0).min(SPLIT_RUN);
            for i in 0..len {
                let k = k0 + i;
                let (lk, lj) = self.split_bin::<R>(lre, lim, k);
                let (rk, rj) = self.split_bin::<R>(rre, rim, k);
                put(&mut lo, i, lk, rk);
                put(&mut hi, SPLIT_RUN - 1 - i, lj, rj);
            }
            consume(k0, runs(&lo, 0, len));
            // Bins m - k0 - len + 1 ..= m - k0, without the middle bin
            // (m - k = k at k = m / 2), which the ascending run holds.
            let top = m - k0;
            let bottom = (m + 1 - k0 - len).max(last + 1);
            if top >= bottom {
                let n = top + 1 - bottom;
                consume(bottom, runs(&hi, SPLIT_RUN - n, SPLIT_RUN));
            }
            k0 += len;
        }
    }
}

/// Bins per run of [`LaneFft::split_pair`]: four runs of both ears,
/// 16 KiB, fit in L1 beside what the split reads.
pub const SPLIT_RUN: usize = 16;

/// `re^2 + im^2`, as the split's power is formed everywhere.
#[inline(always)]
unsafe fn power<R: Lanes>([re, im]: [R; 2]) -> R {
    re.mul(re).add(im.mul(im))
}

/// The split's bins 0 and m (both real): `Z[0]`'s parts summed and
/// subtracted.
#[inline(always)]
unsafe fn split_edge<R: Lanes>(re: &[V], im: &[V]) -> ([R; 2], [R; 2]) {
    split_edge_values::<R>([R::ld(&re[0]), R::ld(&im[0])])
}

/// [`split_edge`] on the value `Z[0]`.
#[inline(always)]
unsafe fn split_edge_values<R: Lanes>([z0r, z0i]: [R; 2]) -> ([R; 2], [R; 2]) {
    let zero = R::splat(0.0);
    ([z0r.add(z0i), zero], [z0r.sub(z0i), zero])
}
