//! The butterfly passes of the lane transform: the multiply-free first
//! radix-4 pass, radix-8, radix-4 and radix-2 stages.

use super::{Lanes, V};

/// `(ar + i ai) * (wr + i wi)` with a broadcast twiddle.
#[inline(always)]
pub(super) unsafe fn cmul<R: Lanes>(ar: R, ai: R, wr: f32, wi: f32) -> (R, R) {
    let (wr, wi) = (R::splat(wr), R::splat(wi));
    (ar.mul_sub(wr, ai.mul(wi)), ar.mul_add(wi, ai.mul(wr)))
}

/// The first two radix-2 stages (spans 2 and 4: twiddles 1 and -i only)
/// as one multiply-free radix-4 pass.
#[inline(always)]
pub(super) unsafe fn radix4_first<R: Lanes>(re: &mut [V], im: &mut [V]) {
    let m = re.len();
    // Spans 2 and 4: twiddles 1 and -i only.
    for g in (0..m).step_by(4) {
        let a0r = R::ld(&re[g]);
        let a0i = R::ld(&im[g]);
        let a1r = R::ld(&re[g + 1]);
        let a1i = R::ld(&im[g + 1]);
        let a2r = R::ld(&re[g + 2]);
        let a2i = R::ld(&im[g + 2]);
        let a3r = R::ld(&re[g + 3]);
        let a3i = R::ld(&im[g + 3]);
        let (b0r, b0i) = (a0r.add(a1r), a0i.add(a1i));
        let (b1r, b1i) = (a0r.sub(a1r), a0i.sub(a1i));
        let (b2r, b2i) = (a2r.add(a3r), a2i.add(a3i));
        let (b3r, b3i) = (a2r.sub(a3r), a2i.sub(a3i));
        // -i * b3 = b3i - i b3r
        b0r.add(b2r).st(&mut re[g]);
        b0i.add(b2i).st(&mut im[g]);
        b0r.sub(b2r).st(&mut re[g + 2]);
        b0i.sub(b2i).st(&mut im[g + 2]);
        b1r.add(b3i).st(&mut re[g + 1]);
        b1i.sub(b3r).st(&mut im[g + 1]);
        b1r.sub(b3i).st(&mut re[g + 3]);
        b1i.add(b3r).st(&mut im[g + 3]);
    }
}

/// Three radix-2 stages as one radix-8 pass of span `8e` over
/// sub-transforms of size `e`: for each `k < e` the eight values a span
/// `e` apart (block `j` holding the sub-transform of residue `rev3(j)`) are
/// loaded once, seven of them multiplied by `W^(r k)` (`W = exp(-2 pi i /
/// 8e)`, `tw[7k + r - 1]`), combined by an 8-point DFT and stored once in
/// natural order. At `k = 0` every twiddle is 1 and no product is formed
/// (the whole first pass, where `e = 1`, is multiply-free).
#[inline(always)]
pub(super) unsafe fn radix8_stage<R: Lanes>(
    re: &mut [V],
    im: &mut [V],
    e: usize,
    tw: &[(f32, f32)],
) {
    for g in (0..re.len()).step_by(8 * e) {
        radix8_butterfly::<R, false>(re, im, g, e, &[]);
        for (k, w) in tw.chunks_exact(7).enumerate().take(e).skip(1) {
            radix8_butterfly::<R, true>(re, im, g + k, e, w);
        }
    }
}

/// One butterfly of [`radix8_stage`]: the eight values at `at + q e`,
/// multiplied by the twiddles `w` when `TWIDDLED` (else by 1), transformed
/// and stored in place.
#[inline(always)]
pub(super) unsafe fn radix8_butterfly<R: Lanes, const TWIDDLED: bool>(
    re: &mut [V],
    im: &mut [V],
    at: usize,
    e: usize,
    w: &[(f32, f32)],
) {
    let x = radix8_values::<R, TWIDDLED>(re, im, at, e, w);
    for (q, [xr, xi]) in x.into_iter().enumerate() {
        xr.st(&mut re[at + q * e]);
        xi.st(&mut im[at + q * e]);
    }
}

/// The outputs `q = 0..8` (real, imaginary) of the butterfly of
/// [`radix8_butterfly`], not stored.
#[inline(always)]
pub(super) unsafe fn radix8_values<R: Lanes, const TWIDDLED: bool>(
    re: &[V],
    im: &[V],
    at: usize,
    e: usize,
    w: &[(f32, f32)],
) -> [[R; 2]; 8] {
    // Block holding residue r: rev3(r).
    const BLOCK: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];
    let h = R::splat(std::f32::consts::FRAC_1_SQRT_2);
    let src = |r: usize| at + BLOCK[r] * e;
    let mut tr = [R::splat(0.0); 8];
    let mut ti = [R::splat(0.0); 8];
    for r in 0..8 {
        let (a, b) = (R::ld(&re[src(r)]), R::ld(&im[src(r)]));
        (tr[r], ti[r]) = if TWIDDLED && r > 0 {
            cmul(a, b, w[r - 1].0, w[r - 1].1)
        } else {
            (a, b)
        };
    }
    // 8-point DFT by decimation in frequency: a = t[r] + t[r+4],
    // b = (t[r] - t[r+4]) W8^r, then 4-point DFTs of a (even
    // outputs) and b (odd outputs).
    let mut ar = [R::splat(0.0); 4];
    let mut ai = [R::splat(0.0); 4];
    let mut br = [R::splat(0.0); 4];
    let mut bi = [R::splat(0.0); 4];
    for r in 0..4 {
        ar[r] = tr[r].add(tr[r + 4]);
        ai[r] = ti[r].add(ti[r + 4]);
        br[r] = tr[r].sub(tr[r + 4]);
        bi[r] = ti[r].sub(ti[r + 4]);
    }
    // W8^1 = (1 - i)/sqrt2, W8^2 = -i, W8^3 = (-1 - i)/sqrt2.
    let (x, y) = (br[1], bi[1]);
    br[1] = h.mul(x.add(y));
    bi[1] = h.mul(y.sub(x));
    let (x, y) = (br[2], bi[2]);
    br[2] = y;
    bi[2] = R::splat(0.0).sub(x);
    let (x, y) = (br[3], bi[3]);
    br[3] = h.mul(y.sub(x));
    bi[3] = R::splat(0.0).sub(h.mul(x.add(y)));
    let mut out = [[R::splat(0.0); 2]; 8];
    for (parity, (pr, pi)) in [(ar, ai), (br, bi)].into_iter().enumerate() {
        // 4-point DFT: outputs 2p + parity.
        let (c0r, c0i) = (pr[0].add(pr[2]), pi[0].add(pi[2]));
        let (c1r, c1i) = (pr[1].add(pr[3]), pi[1].add(pi[3]));
        let (d0r, d0i) = (pr[0].sub(pr[2]), pi[0].sub(pi[2]));
        // -i (p1 - p3)
        let (d1r, d1i) = (pi[1].sub(pi[3]), pr[3].sub(pr[1]));
        out[parity] = [c0r.add(c1r), c0i.add(c1i)];
        out[2 + parity] = [d0r.add(d1r), d0i.add(d1i)];
        out[4 + parity] = [c0r.sub(c1r), c0i.sub(c1i)];
        out[6 + parity] = [d0r.sub(d1r), d0i.sub(d1i)];
    }
    out
}

/// One radix-2 stage of span `s` (twiddles `W_s^k`, `k < s / 2`).
#[inline(always)]
pub(super) unsafe fn single_stage<R: Lanes>(
    re: &mut [V],
    im: &mut [V],
    s: usize,
    tw: &[(f32, f32)],
) {
    let h = s / 2;
    for g in (0..re.len()).step_by(s) {
        for (k, &(wr, wi)) in tw.iter().enumerate() {
            let (p, q) = (g + k, g + k + h);
            let (tr, ti) = cmul(R::ld(&re[q]), R::ld(&im[q]), wr, wi);
            let (ar, ai) = (R::ld(&re[p]), R::ld(&im[p]));
            ar.add(tr).st(&mut re[p]);
            ai.add(ti).st(&mut im[p]);
            ar.sub(tr).st(&mut re[q]);
            ai.sub(ti).st(&mut im[q]);
        }
    }
}

/// Radix-2 stages of spans `s` and `2s` in one pass, as one radix-4 pass
/// of span `S = 2s`: each group of four elements `x0 .. x3` (a quarter span
/// `q = s / 2` apart) is loaded once and stored once, and takes three
/// twiddle products, `W^k x2`, `W^2k x1`, `W^3k x3` (`W = exp(-2 pi i / S)`);
/// `tw` holds `[W^k, W^2k, W^3k]` for `k < q`.
#[inline(always)]
pub(super) unsafe fn radix4_stage<R: Lanes>(
    re: &mut [V],
    im: &mut [V],
    s: usize,
    tw: &[(f32, f32)],
) {
    let q = s / 2;
    for g in (0..re.len()).step_by(2 * s) {
        for (k, w) in tw.chunks_exact(3).enumerate().take(q) {
            let (p0, p1, p2, p3) = (g + k, g + k + q, g + k + 2 * q, g + k + 3 * q);
            let (x0r, x0i) = (R::ld(&re[p0]), R::ld(&im[p0]));
            let (y1r, y1i) = cmul(R::ld(&re[p1]), R::ld(&im[p1]), w[1].0, w[1].1);
            let (y2r, y2i) = cmul(R::ld(&re[p2]), R::ld(&im[p2]), w[0].0, w[0].1);
            let (y3r, y3i) = cmul(R::ld(&re[p3]), R::ld(&im[p3]), w[2].0, w[2].1);
            let (a0r, a0i) = (x0r.add(y1r), x0i.add(y1i));
            let (a1r, a1i) = (x0r.sub(y1r), x0i.sub(y1i));
            let (b2r, b2i) = (y2r.add(y3r), y2i.add(y3i));
            let (b3r, b3i) = (y2r.sub(y3r), y2i.sub(y3i));
            a0r.add(b2r).st(&mut re[p0]);
            a0i.add(b2i).st(&mut im[p0]);
            a0r.sub(b2r).st(&mut re[p2]);
            a0i.sub(b2i).st(&mut im[p2]);
            // -i b3 = b3i - i b3r
            a1r.add(b3i).st(&mut re[p1]);
            a1i.sub(b3r).st(&mut im[p1]);
            a1r.sub(b3i).st(&mut re[p3]);
            a1i.add(b3r).st(&mut im[p3]);
        }
    }
}
