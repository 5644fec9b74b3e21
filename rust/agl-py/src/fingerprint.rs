//! Bindings of the landmark fingerprint and the inverted-index pairing.
//! Clips arrive as C-contiguous float32 `[channels, samples]` arrays (the
//! Python layer converts and downmix happens in the core); fingerprints as
//! uint32 arrays.

use agl_core::fingerprint::{
    fingerprint_batch, hash_counts as core_hash_counts, pair_with, Clip, PairItem, PairOptions,
};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{param_err, shape_err};
use crate::gateway;

type Fp<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    usize,
    u32,
);
type Pairs<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u32>>,
);

/// Fingerprints of clips `ys[i]` (`[channels, samples]` float32) at rates
/// `srs[i]` Hz: `(hashes, anchor frames, distinct hashes, frames)` per clip.
#[pyfunction]
#[pyo3(signature = (ys, srs, n_threads=None))]
pub fn fingerprint_many<'py>(
    py: Python<'py>,
    ys: Vec<PyReadonlyArray2<'py, f32>>,
    srs: PyReadonlyArray1<'py, i64>,
    n_threads: Option<usize>,
) -> PyResult<Vec<Fp<'py>>> {
    let srs = srs.as_slice()?;
    if srs.len() != ys.len() {
        return Err(shape_err(format!(
            "{} clips but {} rates",
            ys.len(),
            srs.len()
        )));
    }
    let mut clips = Vec::with_capacity(ys.len());
    let mut work = 0usize;
    for (y, &sr) in ys.iter().zip(srs) {
        let sr = u32::try_from(sr)
            .map_err(|_| param_err(format!("sr must be between 1 and 2^32 - 1 Hz, got sr={sr}")))?;
        let data = y.as_slice()?;
        let n = y.shape()[1];
        let channels: Vec<&[f32]> = if n == 0 {
            vec![&[][..]; y.shape()[0]]
        } else {
            data.chunks_exact(n).collect()
        };
        work += data.len();
        clips.push(Clip { channels, sr });
    }
    let out = gateway::run(py, work, |c| fingerprint_batch(&clips, n_threads, c))?;
    Ok(out
        .into_iter()
        .map(|f| {
            let (h, t) = (f.hashes.into_pyarray(py), f.times.into_pyarray(py));
            (h, t, f.distinct, f.n_frames)
        })
        .collect())
}

/// Fingerprints given as parallel lists of hash and time arrays and a
/// frame count per clip, borrowed as pairing items.
fn items<'a>(
    hashes: &'a [PyReadonlyArray1<'_, u32>],
    times: &'a [PyReadonlyArray1<'_, u32>],
    frames: &[u32],
) -> PyResult<(Vec<PairItem<'a>>, usize)> {
    if hashes.len() != times.len() || hashes.len() != frames.len() {
        return Err(shape_err(format!(
            "{} hash arrays, {} time arrays and {} frame counts (want equal)",
            hashes.len(),
            times.len(),
            frames.len()
        )));
    }
    let mut items = Vec::with_capacity(hashes.len());
    let mut work = 0usize;
    for ((h, t), &n) in hashes.iter().zip(times).zip(frames) {
        let (h, t) = (h.as_slice()?, t.as_slice()?);
        work += h.len();
        items.push(PairItem {
            hashes: h,
            times: t,
            n_frames: n,
        });
    }
    Ok((items, work))
}

/// Postings of every hash (`2^HASH_BITS` uint32 counts) over the
/// fingerprintable clips among `(hashes[i], times[i])`.
#[pyfunction]
#[pyo3(signature = (hashes, times, n_threads=None))]
pub fn hash_counts<'py>(
    py: Python<'py>,
    hashes: Vec<PyReadonlyArray1<'py, u32>>,
    times: Vec<PyReadonlyArray1<'py, u32>>,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let frames = vec![0u32; hashes.len()];
    let (items, work) = items(&hashes, &times, &frames)?;
    let c = gateway::run(py, work, |_| core_hash_counts(&items, n_threads))?;
    Ok(c.into_pyarray(py))
}

/// The clips of one side of a pairing: hash arrays, time arrays, frames.
type Side<'py> = (
    Vec<PyReadonlyArray1<'py, u32>>,
    Vec<PyReadonlyArray1<'py, u32>>,
    PyReadonlyArray1<'py, u32>,
);

/// Every matching pair among the fingerprints of `clips`, `(hashes[i],
/// times[i])` of `n_frames[i]` frames, or, with `others`, between them and
/// the clips of `others`: `(a, b, start_a, start_b, overlap, score, votes)`
/// with starts and overlap in frames. `counts` are the corpus's hash counts
/// ([`hash_counts`] summed over its shards).
#[pyfunction]
#[pyo3(signature = (clips, min_score, min_matches, n_threads=None, others=None, counts=None))]
pub fn pair<'py>(
    py: Python<'py>,
    clips: Side<'py>,
    min_score: f64,
    min_matches: u32,
    n_threads: Option<usize>,
    others: Option<Side<'py>>,
    counts: Option<PyReadonlyArray1<'py, u32>>,
) -> PyResult<Pairs<'py>> {
    let (hashes, times, n_frames) = &clips;
    let (queries, mut work) = items(hashes, times, n_frames.as_slice()?)?;
    let other = match &others {
        Some((h, t, n)) => {
            let (it, w) = items(h, t, n.as_slice()?)?;
            work += w;
            Some(it)
        }
        None => None,
    };
    let counts = match &counts {
        Some(c) => Some(c.as_slice()?),
        None => None,
    };
    let opts = PairOptions {
        min_score,
        min_matches,
    };
    let m = gateway::run(py, work, |c| {
        pair_with(&queries, other.as_deref(), counts, opts, n_threads, c)
    })?;
    let col = |f: &dyn Fn(&agl_core::fingerprint::Match) -> u32| -> Vec<u32> {
        m.iter().map(f).collect()
    };
    let a: Vec<i64> = m.iter().map(|x| x.a as i64).collect();
    let b: Vec<i64> = m.iter().map(|x| x.b as i64).collect();
    let score: Vec<f64> = m.iter().map(|x| x.score).collect();
    Ok((
        a.into_pyarray(py),
        b.into_pyarray(py),
        col(&|x| x.start_a).into_pyarray(py),
        col(&|x| x.start_b).into_pyarray(py),
        col(&|x| x.overlap).into_pyarray(py),
        score.into_pyarray(py),
        col(&|x| x.votes).into_pyarray(py),
    ))
}
