//! Pairing clips through an inverted hash index.
//!
//! Every hash of every fingerprintable clip is filed under its value
//! (a counting sort: one table of `2^HASH_BITS + 1` offsets and one posting
//! array of `(clip, frame)`, 8 bytes a hash, in clip order). Each clip then
//! probes the index, in parallel: for every hash it holds it collects, from
//! clips of a higher index, a vote for the frame offset between the two
//! anchors; a hash also matches the hashes of the same two bands one frame
//! closer or further apart, since a shift of the frame grid moves a peak by
//! a frame. A pair is a match when the most voted offset (with its two
//! neighbours, for frame jitter) holds at least `min_matches` votes and
//! `score = votes / min(hashes of a, hashes of b inside the overlap)` is at
//! least `min_score`.
//!
//! Votes are counted per clip in a dense array first; only clips that
//! gather `min_matches` votes in all have their offsets collected and
//! sorted. Memory is bounded by the index plus, per worker, one count per
//! clip (4 bytes) and the candidates' votes. Hashes
//! whose posting list is longer than [`MAX_POSTINGS`] (a pattern common to
//! many clips), and hashes repeated more than [`MAX_REPEAT`] times in one
//! clip (a steady texture), cast no votes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
struct Index<'c> {
    start: Vec<u32>,
    post: Vec<u64>,
    /// Postings of each hash over the whole corpus, when the index holds
    /// one shard of it ([`hash_counts`] summed over the shards); otherwise
    /// the index's own list lengths decide.
    counts: Option<&'c [u32]>,
    /// Whether the index holds the query clips themselves: a clip then
    /// votes only on the clips after it.
    same: bool,
}

impl Index<'_> {
    /// The postings of `h` that clip `q` votes on, or `None` for a hash
    /// held more than [`MAX_POSTINGS`] times in the corpus.
    fn list(&self, h: u32, q: usize) -> Option<&[u64]> {
        let list = &self.post[self.start[h as usize] as usize..self.start[h as usize + 1] as usize];
        let total = match self.counts {
            Some(c) => c[h as usize] as usize,
            None => list.len(),
        };
        if total > MAX_POSTINGS {
            return None;
        }
        if self.same {
            let above = list.partition_point(|&e| (e >> 32) as usize <= q);
            Some(&list[above..])
        } else {
            Some(list)
        }
    }
}

fn build<'c>(
    items: &[PairItem<'_>],
    ok: &[bool],
    counts: Option<&'c [u32]>,
    same: bool,
) -> Result<Index<'c>> {
    let n_h = 1usize << HASH_BITS;
    let pairable = || items.iter().zip(ok).filter(|(_, &k)| k).map(|(it, _)| it);
    // Checked before counting, so that no count can overflow.
    let total: u64 = pairable().map(|it| it.hashes.len() as u64).sum();
    if total >= u32::MAX as u64 {
        return Err(AglError::Memory {
            what: "fingerprint index (more than 2^32 hashes)".into(),
            bytes: total * 8,
        });
    }
    let mut start = vec![0u32; n_h + 1];
    for it in pairable() {
        for &h in it.hashes {
            start[h as usize + 1] += 1;
        }
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
    Ok(Index {
        start,
        post,
        counts,
        same,
    })
}

/// Per-worker buffers of the probe.
struct Scratch {
    /// The query's `(hash, frame)` pairs, sorted.
    query: Vec<(u32, u32)>,
    /// Votes cast for each clip by the current query (index: clip); zero
    /// again after each query.
    counts: Vec<u32>,
    /// Clips whose count is not zero.
    touched: Vec<u32>,
    /// `(clip, offset)` votes for the candidate clips.
    votes: Vec<u64>,
}

impl Scratch {
    fn new(n_items: usize) -> Result<Self> {
        let mut counts = Vec::new();
        try_grow(&mut counts, n_items, "fingerprint vote counts")?;
        counts.resize(n_items, 0);
        Ok(Scratch {
            query: Vec::new(),
            counts,
            touched: Vec::new(),
            votes: Vec::new(),
        })
    }
}

/// Scratch lent to one rayon split and given back to `pool` when the split
/// ends. Rayon makes a split's state anew for every split, and the counts
/// are 4 bytes a clip: lent from a pool, there are no more of them than
/// splits running at once (one per worker).
struct Lent<'p> {
    s: Option<Scratch>,
    pool: &'p Mutex<Vec<Scratch>>,
}

impl<'p> Lent<'p> {
    /// A scratch from `pool`; a new one only when the pool is empty (it is
    /// filled with one per worker before the probe).
    fn from(pool: &'p Mutex<Vec<Scratch>>, n_items: usize) -> Self {
        let s = pool.lock().ok().and_then(|mut p| p.pop());
        let s = s.or_else(|| Scratch::new(n_items).ok());
        Lent { s, pool }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let (Some(s), Ok(mut p)) = (self.s.take(), self.pool.lock()) {
            p.push(s);
        }
    }
}

/// Call `vote(clip, other frame, query frame)` for every vote the sorted
/// `query` of clip `q` casts on the indexed clips ([`Index::list`]): for
/// each of its hashes (repeated at most [`MAX_REPEAT`] times), over the
/// posting lists of the hash and its [`dt_variants`] (at most
/// [`MAX_POSTINGS`] long), against every clip holding it at most
/// [`MAX_REPEAT`] times.
fn for_each_vote(idx: &Index, q: usize, query: &[(u32, u32)], mut vote: impl FnMut(u32, u32, u32)) {
    let mut i = 0;
    while i < query.len() {
        let h = query[i].0;
        let j = i + query[i..].iter().take_while(|e| e.0 == h).count();
        if j - i <= MAX_REPEAT {
            for list in dt_variants(h).filter_map(|v| idx.list(v, q)) {
                let mut k = 0;
                while k < list.len() {
                    let c = list[k] >> 32;
                    // Runs are short (a clip rarely repeats a hash): a
                    // scan, not a search.
                    let run = list[k..].iter().take_while(|&&e| e >> 32 == c).count();
                    if run <= MAX_REPEAT {
                        for &e in &list[k..k + run] {
                            for &(_, tq) in &query[i..j] {
                                vote(c as u32, e as u32, tq);
                            }
                        }
                    }
                    k += run;
                }
            }
        }
        i = j;
    }
}

/// Votes of clip `q` against every indexed clip that gathers at least
/// `min_matches` votes in all, as `(clip, offset)` sorted. Two passes over
/// the postings: the first counts votes per clip in a dense array (no
/// sort: nearly every clip that shares a hash by chance gets one or two),
/// the second, only when some clip reached `min_matches`, collects the
/// offsets of those clips.
fn collect_votes(idx: &Index, q: usize, item: &PairItem<'_>, min_matches: u32, s: &mut Scratch) {
    s.query.clear();
    s.query
        .extend(item.hashes.iter().copied().zip(item.times.iter().copied()));
    s.query.sort_unstable();
    s.votes.clear();
    let (counts, touched) = (&mut s.counts, &mut s.touched);
    for_each_vote(idx, q, &s.query, |c, _, _| {
        let n = &mut counts[c as usize];
        if *n == 0 {
            touched.push(c);
        }
        *n += 1;
    });
    // Candidates keep a mark (`u32::MAX`), the others are cleared now.
    let mut any = false;
    for &c in touched.iter() {
        let n = &mut counts[c as usize];
        if *n >= min_matches {
            *n = u32::MAX;
            any = true;
        } else {
            *n = 0;
        }
    }
    if any {
        let (counts, votes) = (&s.counts, &mut s.votes);
        for_each_vote(idx, q, &s.query, |c, tc, tq| {
            if counts[c as usize] == u32::MAX {
                let off = (tq as i64 - tc as i64 + (1i64 << 31)) as u64 & 0xffff_ffff;
                votes.push(((c as u64) << 32) | off);
            }
        });
        for &c in s.touched.iter() {
            s.counts[c as usize] = 0;
        }
        s.votes.sort_unstable();
    }
    s.touched.clear();
}

/// `h` and the hashes of the same bands one frame further apart or closer
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

/// Turn the best offset of query clip `a` and indexed clip `b` into a
/// match, if it passes.
fn judge(
    (ia, ib): (&PairItem<'_>, &PairItem<'_>),
    (a, b): (usize, usize),
    (off, votes): (i64, u32),
    opts: &PairOptions,
) -> Option<Match> {
    if votes < opts.min_matches {
        return None;
    }
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

/// Matches of query clip `q` against the indexed clips, by clip.
fn probe(
    idx: &Index,
    (queries, indexed): (&[PairItem<'_>], &[PairItem<'_>]),
    q: usize,
    opts: &PairOptions,
    s: &mut Scratch,
) -> Vec<Match> {
    collect_votes(idx, q, &queries[q], opts.min_matches, s);
    let mut out = Vec::new();
    let mut k = 0;
    let mut offs = Vec::new();
    while k < s.votes.len() {
        let c = s.votes[k] >> 32;
        let run = s.votes[k..].partition_point(|&e| e >> 32 == c);
        if run as u32 >= opts.min_matches {
            offs.clear();
            offs.extend(s.votes[k..k + run].iter().map(|&e| e & 0xffff_ffff));
            let its = (&queries[q], &indexed[c as usize]);
            if let Some(m) = judge(its, (q, c as usize), best_offset(&offs), opts) {
                out.push(m);
            }
        }
        k += run;
    }
    out
}

/// Whether each clip takes part in pairing (enough distinct hashes).
fn pairable(items: &[PairItem<'_>]) -> Vec<bool> {
    items
        .par_iter()
        .map(|it| fingerprintable(count_distinct(it.hashes)))
        .collect()
}

/// Postings of every hash (`2^HASH_BITS` counts) over the clips of
/// `items` that take part in pairing. Summed over the shards of a corpus
/// (saturating), they let [`pair_with`] drop the hashes common in the whole
/// corpus while it indexes one shard.
pub fn hash_counts(items: &[PairItem<'_>], n_threads: Option<usize>) -> Result<Vec<u32>> {
    check(items, &PairOptions::default())?;
    let ok = install(n_threads, || pairable(items))?;
    let mut counts = vec![0u32; 1 << HASH_BITS];
    for (it, _) in items.iter().zip(&ok).filter(|(_, &k)| k) {
        for &h in it.hashes {
            counts[h as usize] = counts[h as usize].saturating_add(1);
        }
    }
    Ok(counts)
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
    pair_with(items, None, None, opts, n_threads, cancel)
}

/// Pairs of one block of a sharded corpus. With `others`, every match
/// between a clip of `queries` (`a`) and a clip of `others` (`b`, indices
/// into `others`); without, the matches within `queries` (`a < b`), as
/// [`pair`]. `counts` are the corpus's [`hash_counts`] (summed over its
/// shards): a hash held more than [`MAX_POSTINGS`] times in the corpus
/// casts no votes, as it would in one index of the whole corpus; without
/// them the clips given decide. With the corpus cut into shards, the
/// blocks (each shard alone, and each pair of shards) together give
/// exactly the matches of [`pair`] on the whole corpus.
pub fn pair_with(
    queries: &[PairItem<'_>],
    others: Option<&[PairItem<'_>]>,
    counts: Option<&[u32]>,
    opts: PairOptions,
    n_threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<Match>> {
    check(queries, &opts)?;
    if let Some(o) = others {
        check(o, &opts)?;
    }
    if let Some(c) = counts {
        if c.len() != 1 << HASH_BITS {
            return Err(AglError::Shape(format!(
                "hash counts have {} entries, want 2^{HASH_BITS}",
                c.len()
            )));
        }
    }
    let indexed = others.unwrap_or(queries);
    install(n_threads, || -> Result<Vec<Match>> {
        let ok_q = pairable(queries);
        let ok_i = match others {
            Some(o) => pairable(o),
            None => ok_q.clone(),
        };
        let idx = build(indexed, &ok_i, counts, others.is_none())?;
        let pool = (0..rayon::current_num_threads())
            .map(|_| Scratch::new(indexed.len()))
            .collect::<Result<Vec<_>>>()?;
        let pool = Mutex::new(pool);
        let failed = AtomicBool::new(false);
        let per: Vec<Vec<Match>> = (0..queries.len())
            .into_par_iter()
            .map_init(
                || Lent::from(&pool, indexed.len()),
                |lent, q| {
                    if !ok_q[q] || cancel.is_cancelled() {
                        return Vec::new();
                    }
                    match lent.s.as_mut() {
                        Some(s) => probe(&idx, (queries, indexed), q, &opts, s),
                        None => {
                            failed.store(true, Ordering::Relaxed);
                            Vec::new()
                        }
                    }
                },
            )
            .collect();
        cancel.check()?;
        if failed.load(Ordering::Relaxed) {
            return Err(AglError::Memory {
                what: "fingerprint vote counts".into(),
                bytes: indexed.len() as u64 * 4,
            });
        }
        Ok(per.into_iter().flatten().collect())
    })?
}
