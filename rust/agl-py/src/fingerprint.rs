//! Bindings of the landmark fingerprint and the inverted-index pairing.
//! Clips arrive as C-contiguous float32 `[channels, samples]` arrays (the
//! Python layer converts and downmix happens in the core); fingerprints as
//! uint32 arrays.

use agl_core::fingerprint::{fingerprint_batch, pair as core_pair, Clip, PairItem, PairOptions};
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

/// Every matching pair among fingerprints `(hashes[i], times[i])` of
/// `n_frames[i]` frames: `(a, b, start_a, start_b, overlap, score, votes)`
/// with starts and overlap in frames.
#[pyfunction]
#[pyo3(signature = (hashes, times, n_frames, min_score, min_matches, n_threads=None))]
pub fn pair<'py>(
    py: Python<'py>,
    hashes: Vec<PyReadonlyArray1<'py, u32>>,
    times: Vec<PyReadonlyArray1<'py, u32>>,
    n_frames: PyReadonlyArray1<'py, u32>,
    min_score: f64,
    min_matches: u32,
    n_threads: Option<usize>,
) -> PyResult<Pairs<'py>> {
    let frames = n_frames.as_slice()?;
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
    for ((h, t), &n) in hashes.iter().zip(&times).zip(frames) {
        let (h, t) = (h.as_slice()?, t.as_slice()?);
        work += h.len();
        items.push(PairItem {
            hashes: h,
            times: t,
            n_frames: n,
        });
    }
    let opts = PairOptions {
        min_score,
        min_matches,
    };
    let m = gateway::run(py, work, |c| core_pair(&items, opts, n_threads, c))?;
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
