//! Bindings of audio decoding and resampling. `load` decodes one file and
//! raises on failure; `load_many` decodes a batch in parallel and returns
//! per-file results (a flat planar buffer plus the layout and per-file
//! errors) that the Python layer turns into an Arrow table.

use std::path::PathBuf;
use std::sync::Arc;

use agl_core::audio::probe::probe_source;
use agl_core::audio::{decode_source, decode_sources, Channels, DecodeParams, Decoded, Source};
use agl_core::resample::{resample, Quality};
use agl_core::AglError;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{param_err, to_py};
use crate::gateway;

/// Decoding options, as `agl_fast.audio` hands them over (a mapping with
/// these keys, each checked there for type).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct DecodeArgs {
    sr: Option<u32>,
    mono: bool,
    channel: Option<usize>,
    offset: f64,
    duration: Option<f64>,
    max_duration: Option<f64>,
    res_type: String,
}

impl DecodeArgs {
    fn params(&self) -> PyResult<DecodeParams> {
        let channels = match (self.mono, self.channel) {
            (true, Some(_)) => {
                return Err(param_err("pass either mono=True or channel=i, not both"))
            }
            (true, None) => Channels::Mono,
            (false, Some(i)) => Channels::Select(i),
            (false, None) => Channels::Keep,
        };
        let p = DecodeParams {
            sr: self.sr,
            channels,
            offset: self.offset,
            duration: self.duration,
            max_duration: self.max_duration,
            quality: Quality::from_name(&self.res_type).map_err(to_py)?,
        };
        p.validate().map_err(to_py)?;
        Ok(p)
    }
}

/// A path (`str` or `os.PathLike`) or a whole file as `bytes`, with an
/// optional format hint; `i` numbers in-memory files in messages.
fn source_of(obj: &Bound<'_, PyAny>, hint: Option<String>, i: usize) -> PyResult<Source> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        let data: Arc<[u8]> = Arc::from(b.as_bytes());
        return Ok(Source::Bytes {
            name: format!("<in-memory file #{i}, {} bytes>", data.len()),
            data,
            hint,
        });
    }
    let path: PathBuf = obj.extract().map_err(|_| {
        param_err(format!(
            "each source must be a path (str or os.PathLike) or bytes, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "an unknown type".to_string(), |n| n.to_string())
        ))
    })?;
    Ok(match hint {
        None => Source::Path(path),
        // A hint for a file on disk: read it whole, so the hint applies.
        Some(h) => Source::Bytes {
            data: std::fs::read(&path)
                .map_err(|e| {
                    to_py(AglError::Decode {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    })
                })?
                .into(),
            name: path.display().to_string(),
            hint: Some(h),
        },
    })
}

/// Rough work of sources, to pick the gateway mode: the encoded size
/// (one file: [`Source::decode_work`], which weighs uncompressed PCM by
/// what it costs, so a short WAV runs inline).
fn work_of(sources: &[Source]) -> usize {
    if let [one] = sources {
        return one.decode_work();
    }
    sources
        .iter()
        .map(|s| match s {
            Source::Path(p) => std::fs::metadata(p).map_or(0, |m| m.len() as usize),
            Source::Bytes { data, .. } => data.len(),
        })
        .sum()
}

/// Name of the Python exception class a core error maps to.
fn error_kind(e: &AglError) -> &'static str {
    match e {
        AglError::InvalidParameter { .. } => "ParameterError",
        AglError::Shape(_) => "ShapeError",
        AglError::NonFinite { .. } => "NonFiniteError",
        AglError::Decode { .. } => "AudioDecodeError",
        AglError::NotFound { .. } => "AudioFileNotFoundError",
        AglError::Io(_) => "AglIOError",
        AglError::Memory { .. } => "ResourceLimitError",
        _ => "AglError",
    }
}

/// `load`'s result: `(y [channels, n], sr, source_sr, source_channels,
/// truncated)`.
type Loaded<'py> = (Bound<'py, PyArray2<f32>>, u32, u32, usize, bool);

/// Decode one file (a path or `bytes`).
#[pyfunction]
#[pyo3(signature = (path, options, format=None))]
pub fn load<'py>(
    path: Bound<'py, PyAny>,
    options: DecodeArgs,
    format: Option<String>,
) -> PyResult<Loaded<'py>> {
    let py = path.py();
    let p = options.params()?;
    let src = source_of(&path, format, 0)?;
    let work = work_of(std::slice::from_ref(&src));
    let d = gateway::run(py, work, |c| decode_source(&src, &p, c))?;
    let (n_ch, n) = (d.channels.len(), d.frames());
    let meta = (d.sr, d.source_sr, d.source_channels, d.truncated);
    let arr = d.into_planar().into_pyarray(py).reshape([n_ch, n])?;
    Ok((arr, meta.0, meta.1, meta.2, meta.3))
}

/// A file's header (a path or `bytes`): `(sr, channels, frames)`, `frames`
/// `None` when only decoding tells the length (see
/// `agl_core::audio::probe`).
#[pyfunction]
#[pyo3(signature = (path, format=None))]
pub fn probe(
    path: Bound<'_, PyAny>,
    format: Option<String>,
) -> PyResult<(u32, usize, Option<u64>)> {
    let py = path.py();
    let src = source_of(&path, format, 0)?;
    let h = gateway::run(py, 1, |_| probe_source(&src))?;
    Ok((h.sr, h.channels, h.frames))
}

/// Per-batch result of `load_many`.
type Many<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Vec<u64>,
    Vec<u64>,
    Vec<u64>,
    Vec<bool>,
    Vec<Option<&'static str>>,
    Vec<Option<String>>,
    Bound<'py, PyArray2<f64>>,
    Vec<u64>,
    Vec<Option<u64>>,
);

/// Decode many files (paths or `bytes`, with optional per-file format
/// hints) in parallel. Returns `(data, channels, frames, sr, source_sr,
/// source_channels, truncated, error_kind, error_message, levels,
/// corrupt_frames, source_frames)` (`source_frames[i]`: the frames file
/// `i`'s header declares at its own rate, `None` when it declares none) (`levels[i]`: peak, RMS, clipped share and share at the
/// peak of file `i`'s output, zeros for a failed file):
/// with `join`, `data` holds every file's channels one after another
/// (planar) in one array; without, it is a list with one planar array per
/// file (`None` for a failed one; a mono file's array is the decoder's own
/// buffer, not a copy). Failed files have zero channels and an error.
#[pyfunction]
#[pyo3(signature = (paths, options, n_threads=None, join=true, formats=None))]
pub fn load_many<'py>(
    py: Python<'py>,
    paths: Vec<Bound<'py, PyAny>>,
    options: DecodeArgs,
    n_threads: Option<usize>,
    join: bool,
    formats: Option<Vec<Option<String>>>,
) -> PyResult<Many<'py>> {
    let p = options.params()?;
    if let Some(f) = &formats {
        if f.len() != paths.len() {
            return Err(param_err(format!(
                "formats must have one entry per source, got {} for {} sources",
                f.len(),
                paths.len()
            )));
        }
    }
    let mut sources = Vec::with_capacity(paths.len());
    for (i, obj) in paths.iter().enumerate() {
        let hint = formats.as_ref().and_then(|f| f[i].clone());
        sources.push(source_of(obj, hint, i)?);
    }
    let work = work_of(&sources);
    let res = gateway::run(py, work, |c| decode_sources(&sources, &p, n_threads, c))?;
    let total: usize = res
        .iter()
        .map(|r| r.as_ref().map_or(0, |d| d.channels.len() * d.frames()))
        .sum();
    let mut data = Vec::with_capacity(if join { total } else { 0 });
    let mut each = Vec::with_capacity(if join { 0 } else { res.len() });
    let mut cols = ManyColumns::with_capacity(res.len());
    for r in res {
        match r {
            Ok(d) => {
                cols.push_ok(&d);
                if join {
                    for c in &d.channels {
                        data.extend_from_slice(c);
                    }
                } else {
                    each.push(Some(d.into_planar().into_pyarray(py)));
                }
            }
            Err(e) => {
                cols.push_err(&e);
                each.push(None);
            }
        }
    }
    let data = if join {
        data.into_pyarray(py).into_any()
    } else {
        each.into_pyobject(py)?.into_any()
    };
    cols.into_many(py, data)
}

/// The per-file columns of [`load_many`]'s result, filled file by file.
#[derive(Default)]
struct ManyColumns {
    chans: Vec<u64>,
    frames: Vec<u64>,
    srs: Vec<u64>,
    src_srs: Vec<u64>,
    src_chs: Vec<u64>,
    trunc: Vec<bool>,
    kinds: Vec<Option<&'static str>>,
    msgs: Vec<Option<String>>,
    levels: Vec<f64>,
    corrupt: Vec<u64>,
    declared: Vec<Option<u64>>,
}

impl ManyColumns {
    fn with_capacity(n: usize) -> Self {
        ManyColumns {
            chans: Vec::with_capacity(n),
            frames: Vec::with_capacity(n),
            corrupt: Vec::with_capacity(n),
            declared: Vec::with_capacity(n),
            levels: Vec::with_capacity(4 * n),
            ..ManyColumns::default()
        }
    }

    fn push_ok(&mut self, d: &Decoded) {
        self.chans.push(d.channels.len() as u64);
        self.frames.push(d.frames() as u64);
        self.srs.push(d.sr as u64);
        self.src_srs.push(d.source_sr as u64);
        self.src_chs.push(d.source_channels as u64);
        self.trunc.push(d.truncated);
        self.corrupt.push(d.corrupt_frames);
        self.declared.push(d.source_frames);
        self.levels.extend(d.levels);
        self.kinds.push(None);
        self.msgs.push(None);
    }

    /// A failed file: zero channels, zero levels, its error.
    fn push_err(&mut self, e: &AglError) {
        self.chans.push(0);
        self.frames.push(0);
        self.srs.push(0);
        self.src_srs.push(0);
        self.src_chs.push(0);
        self.trunc.push(false);
        self.corrupt.push(0);
        self.declared.push(None);
        self.kinds.push(Some(error_kind(e)));
        self.msgs.push(Some(e.to_string()));
        self.levels.extend([0.0; 4]);
    }

    fn into_many<'py>(self, py: Python<'py>, data: Bound<'py, PyAny>) -> PyResult<Many<'py>> {
        let n = self.chans.len();
        Ok((
            data,
            self.chans.into_pyarray(py),
            self.frames.into_pyarray(py),
            self.srs,
            self.src_srs,
            self.src_chs,
            self.trunc,
            self.kinds,
            self.msgs,
            self.levels.into_pyarray(py).reshape([n, 4])?,
            self.corrupt,
            self.declared,
        ))
    }
}

/// Resample a `[channels, n]` float32 array from `orig_sr` to `target_sr`.
#[pyfunction]
#[pyo3(signature = (y, orig_sr, target_sr, res_type="hq"))]
pub fn resample_array<'py>(
    py: Python<'py>,
    y: PyReadonlyArray2<'py, f32>,
    orig_sr: u32,
    target_sr: u32,
    res_type: &str,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let q = Quality::from_name(res_type).map_err(to_py)?;
    let view = y.as_array();
    let rows: Vec<Vec<f32>> = view.rows().into_iter().map(|r| r.to_vec()).collect();
    let work = rows.iter().map(|r| r.len()).sum();
    let out = gateway::run(py, work, |_| {
        let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        resample(&refs, orig_sr, target_sr, q)
    })?;
    let (n_ch, n) = (out.len(), out.first().map_or(0, |c| c.len()));
    out.concat().into_pyarray(py).reshape([n_ch, n])
}
