//! Pairing clips through an inverted hash index.
//!
//! Every hash of every fingerprintable clip is filed under its value
//! (a counting sort: one table of `2^HASH_BITS + 1` offsets and one posting
//! array of `(clip, frame)`, 8 bytes a hash, in clip order). Each clip then
//! probes the index, in parallel: for every hash it holds it collects, from
//! clips of a higher index, a vote for the frame offset between the two
//! anchors; a hash also matches the hashes of the same two bins one frame
//! closer or further apart, since a shift of the frame grid moves a peak by
//! a frame. A pair is a match when the most voted offset (with its two
//! neighbours, for frame jitter) holds at least `min_matches` votes and
//! `score = votes / min(hashes of a, hashes of b inside the overlap)` is at
//! least `min_score`.
//!
//! Memory is bounded by the index plus one vote list per worker. Hashes
//! whose posting list is longer than [`MAX_POSTINGS`] (a pattern common to
//! many clips), and hashes repeated more than [`MAX_REPEAT`] times in one
//! clip (a steady texture), cast no votes.

use rayon::prelude::*;

use super::{count_distinct, fingerprintable, HASH_BITS, MAX_DT};
use crate::error::{try_grow, AglError, Result};
use crate::parallel::{install, Cancel};

/// Default least score of a match.
pub const MIN_SCORE: f64 = 0.02;
/// Default least number of votes at the matched offset.
pub const MIN_MATCHES: u32 = 12;
/// Posting lists longer than this cast no votes.
pub const MAX_POSTINGS: usize = 2048;
/// A hash repeated more than this in one clip casts no votes for it.
pub const MAX_REPEAT: usize = 4;
/// The `dt` field of a hash (its low bits).
const DT_MASK: u32 = MAX_DT;
/// Offset window (in frames, either side) counted with the best offset.
const JITTER: i64 = 1;

/// One clip to pair: its hashes, their anchor frames (non-decreasing) and
/// its length in frames.
#[derive(Debug, Clone, Copy)]
pub struct PairItem<'a> {
    pub hashes: &'a [u32],
    pub times: &'a [u32],
    pub n_frames: u32,
}

/// Thresholds of [`pair`].
#[derive(Debug, Clone, Copy)]
pub struct PairOptions {
    pub min_score: f64,
    pub min_matches: u32,
}

impl Default for PairOptions {
    fn default() -> Self {
        PairOptions {
            min_score: MIN_SCORE,
            min_matches: MIN_MATCHES,
        }
    }
}

/// A matched pair `a < b`: where the shared audio starts in each clip and
/// how long it is (frames), the score and the votes behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    pub a: u32,
    pub b: u32,
    pub start_a: u32,
    pub start_b: u32,
    pub overlap: u32,
    pub score: f64,
    pub votes: u32,
}

fn check(items: &[PairItem<'_>], opts: &PairOptions) -> Result<()> {
    if !(0.0..=1.0).contains(&opts.min_score) {
        return Err(AglError::param(
            "min_score",
            opts.min_score,
            "must be in [0, 1]",
        ));
    }
    if opts.min_matches == 0 {
        return Err(AglError::param("min_matches", 0, "must be >= 1"));
    }
    if items.len() > u32::MAX as usize {
        return Err(AglError::Shape(format!(
            "{} fingerprints, at most 2^32 - 1",
            items.len()
        )));
    }
    for (i, it) in items.iter().enumerate() {
        if it.hashes.len() != it.times.len() {
            return Err(AglError::Shape(format!(
                "fingerprint {i} has {} hashes but {} times",
                it.hashes.len(),
                it.times.len()
            )));
        }
        if let Some(h) = it.hashes.iter().find(|&&h| h >> HASH_BITS != 0) {
            return Err(AglError::param(
                "hashes",
                h,
                format!("must be below 2^{HASH_BITS}"),
            ));
        }
        if it.times.windows(2).any(|w| w[1] < w[0]) {
            return Err(AglError::Shape(format!(
                "fingerprint {i}: times must not decrease"
            )));
        }
    }
    Ok(())
}

/// The inverted index: `start[h]..start[h + 1]` of `post` are the
/// `(clip, frame)` entries of hash `h`, in clip order.
struct Index {
    start: Vec<u32>,
    post: Vec<u64>,
}

fn build(items: &[PairItem<'_>], ok: &[bool]) -> Result<Index> {
    let n_h = 1usize << HASH_BITS;
    let mut start = vec![0u32; n_h + 1];
    let mut total = 0u64;
    for (it, _) in items.iter().zip(ok).filter(|(_, &k)| k) {
        for &h in it.hashes {
            start[h as usize + 1] += 1;
        }
        total += it.hashes.len() as u64;
    }
    if total >= u32::MAX as u64 {
        return Err(AglError::Memory {
            what: "fingerprint index (more than 2^32 hashes)".into(),
            bytes: total * 8,
        });
    }
    for h in 0..n_h {
        start[h + 1] += start[h];
    }
    let mut post = Vec::new();
    try_grow(&mut post, total as usize, "fingerprint index")?;
    post.resize(total as usize, 0u64);
    let mut fill = start.clone();
    for (c, (it, _)) in items.iter().zip(ok).enumerate().filter(|(_, (_, &k))| k) {
        for (&h, &t) in it.hashes.iter().zip(it.times) {
            let slot = &mut fill[h as usize];
            post[*slot as usize] = ((c as u64) << 32) | t as u64;
            *slot += 1;
        }
    }
    Ok(Index { start, post })
}

/// Per-worker buffers of the probe.
#[derive(Default)]
struct Scratch {
    query: Vec<(u32, u32)>,
    votes: Vec<u64>,
}

/// Votes of clip `q` against every clip above it, sorted by (clip, offset).
fn collect_votes(idx: &Index, q: usize, item: &PairItem<'_>, s: &mut Scratch) {
    s.query.clear();
    s.query
        .extend(item.hashes.iter().copied().zip(item.times.iter().copied()));
    s.query.sort_unstable();
    s.votes.clear();
    let mut i = 0;
    while i < s.query.len() {
        let h = s.query[i].0;
        let j = i + s.query[i..].partition_point(|e| e.0 == h);
        if j - i <= MAX_REPEAT {
            for v in dt_variants(h) {
                let list =
                    &idx.post[idx.start[v as usize] as usize..idx.start[v as usize + 1] as usize];
                if list.len() <= MAX_POSTINGS {
                    let above = list.partition_point(|&e| (e >> 32) as usize <= q);
                    vote_list(&list[above..], &s.query[i..j], &mut s.votes);
                }
            }
        }
        i = j;
    }
    s.votes.sort_unstable();
}

/// `h` and the hashes of the same bins one frame further apart or closer
/// (a peak that moved by a frame when the frame grid shifted, as a trim
/// that is not a whole number of hops does).
fn dt_variants(h: u32) -> impl Iterator<Item = u32> {
    let dt = h & DT_MASK;
    let base = h & !DT_MASK;
    [
        Some(dt),
        dt.checked_sub(1).filter(|&d| d >= 1),
        Some(dt + 1).filter(|&d| d <= DT_MASK),
    ]
    .into_iter()
    .flatten()
    .map(move |d| base | d)
}

/// Votes from one posting list (clips above the query) against the
/// query's frames of the same hash.
fn vote_list(list: &[u64], query: &[(u32, u32)], votes: &mut Vec<u64>) {
    let mut k = 0;
    while k < list.len() {
        let c = list[k] >> 32;
        let run = list[k..].partition_point(|&e| e >> 32 == c);
        if run <= MAX_REPEAT {
            for &e in &list[k..k + run] {
                let tc = (e & 0xffff_ffff) as i64;
                for &(_, tq) in query {
                    let off = (tq as i64 - tc + (1i64 << 31)) as u64 & 0xffff_ffff;
                    votes.push((c << 32) | off);
                }
            }
        }
        k += run;
    }
}

/// Best offset (query frame minus other frame) of one clip's sorted votes
/// and the votes within `±JITTER` of it.
fn best_offset(offsets: &[u64]) -> (i64, u32) {
    let (mut best, mut at, mut j) = (0usize, 0i64, 0usize);
    for i in 0..offsets.len() {
        let lo = offsets[i] as i64;
        while j < offsets.len() && offsets[j] as i64 <= lo + 2 * JITTER {
            j += 1;
        }
        if j - i > best {
            best = j - i;
            at = lo + JITTER - (1i64 << 31);
        }
    }
    (at, best as u32)
}

/// Hashes of `times` (non-decreasing) within `[from, from + len)`.
fn count_in(times: &[u32], from: u32, len: u32) -> usize {
    let lo = times.partition_point(|&t| t < from);
    let hi = times.partition_point(|&t| (t as u64) < from as u64 + len as u64);
    hi - lo
}

/// Turn the best offset of clips `a < b` into a match, if it passes.
fn judge(
    items: &[PairItem<'_>],
    (a, b): (usize, usize),
    (off, votes): (i64, u32),
    opts: &PairOptions,
) -> Option<Match> {
    if votes < opts.min_matches {
        return None;
    }
    let (ia, ib) = (&items[a], &items[b]);
    let (na, nb) = (ia.n_frames as i64, ib.n_frames as i64);
    let (sa, sb) = if off >= 0 { (off, 0) } else { (0, -off) };
    let overlap = (na - sa).min(nb - sb).max(1);
    let (sa, sb, ov) = (sa.min(u32::MAX as i64) as u32, sb as u32, overlap as u32);
    let denom = count_in(ia.times, sa, ov)
        .min(count_in(ib.times, sb, ov))
        .max(1);
    let score = (votes as f64 / denom as f64).min(1.0);
    (score >= opts.min_score).then_some(Match {
        a: a as u32,
        b: b as u32,
        start_a: sa,
        start_b: sb,
        overlap: ov,
        score,
        votes,
    })
}

/// Matches of clip `q` against every clip above it, by clip.
fn probe(
    idx: &Index,
    items: &[PairItem<'_>],
    q: usize,
    opts: &PairOptions,
    s: &mut Scratch,
) -> Vec<Match> {
    collect_votes(idx, q, &items[q], s);
    let mut out = Vec::new();
    let mut k = 0;
    let mut offs = Vec::new();
    while k < s.votes.len() {
        let c = s.votes[k] >> 32;
        let run = s.votes[k..].partition_point(|&e| e >> 32 == c);
        if run as u32 >= opts.min_matches {
            offs.clear();
            offs.extend(s.votes[k..k + run].iter().map(|&e| e & 0xffff_ffff));
            if let Some(m) = judge(items, (q, c as usize), best_offset(&offs), opts) {
                out.push(m);
            }
        }
        k += run;
    }
    out
}

/// Every matching pair of `items` (sorted by `a`, then `b`). Clips that
/// are not fingerprintable take no part. The result does not depend on the
/// thread count.
pub fn pair(
    items: &[PairItem<'_>],
    opts: PairOptions,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Match>> {
    check(items, &opts)?;
    install(n_threads, || -> Result<Vec<Match>> {
        let ok: Vec<bool> = items
            .par_iter()
            .map(|it| fingerprintable(count_distinct(it.hashes)))
            .collect();
        let idx = build(items, &ok)?;
        let per: Vec<Vec<Match>> = (0..items.len())
            .into_par_iter()
            .map_init(Scratch::default, |s, q| {
                if !ok[q] || cancel.is_cancelled() {
                    return Vec::new();
                }
                probe(&idx, items, q, &opts, s)
            })
            .collect();
        cancel.check()?;
        Ok(per.into_iter().flatten().collect())
    })?
}
