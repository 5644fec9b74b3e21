//! The frame engine: every frame-wise kernel (STFT, mel, IPD, presets) runs
//! through [`run_framewise`], which splits a batch into (item, frame range)
//! tasks, runs them on the thread pool with per-worker scratch, and writes
//! each frame's row into one output buffer allocated once.
//!
//! Results do not depend on the thread count: each frame is computed by the
//! same code from the same inputs wherever it runs.

use rayon::prelude::*;

use crate::error::{try_grow, AglError, Result};
use crate::lanefft::{
    flat, flat_mut, gather_row, stream_copy, stream_fence, transpose_out, BlockRow, LANES, V,
};
use crate::parallel::{install, Cancel};

/// Where a frame's row goes inside one item's output block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Item output `[channels, frames, width]`; a row is `channels * width`
    /// values, channel-major.
    ChannelsTimeWidth { channels: usize, width: usize },
    /// Item output `[width, frames]` (librosa's frequency-major layout).
    WidthTime { width: usize },
}

impl Layout {
    /// Values one frame contributes.
    pub fn row_len(&self) -> usize {
        match *self {
            Layout::ChannelsTimeWidth { channels, width } => channels * width,
            Layout::WidthTime { width } => width,
        }
    }
    /// Values of one item whose frame axis has `extent` entries.
    pub fn item_len(&self, extent: usize) -> usize {
        self.row_len() * extent
    }
}

/// Output of [`run_framewise`]: `data[offsets[i]..offsets[i + 1]]` is item
/// `i`, laid out per [`Layout`] with a frame axis of `extents[i]` entries.
#[derive(Debug, Clone)]
pub struct FrameOutput<T> {
    pub data: Vec<T>,
    pub offsets: Vec<usize>,
    pub extents: Vec<usize>,
    /// Valid frames of each item (`<= extents[i]`).
    pub n_frames: Vec<usize>,
}

/// Output element types whose all-zero bit pattern is the value zero, so an
/// output buffer can come from zeroed pages (untouched padding costs nothing
/// and no time is spent filling gigabytes before the work starts).
pub trait Zeroed: Copy + Send + Sync {
    fn zeroed_vec(n: usize) -> Vec<Self>;
}

impl Zeroed for f32 {
    fn zeroed_vec(n: usize) -> Vec<Self> {
        let v = vec![0.0; n];
        huge_pages(&v);
        v
    }
}

/// A source of output buffers: `alloc(n)` returns an empty vector with room
/// for at least `n` values.
type OutputAlloc = dyn Fn(usize) -> Vec<f32>;

thread_local! {
    static OUTPUT_ALLOC: std::cell::Cell<Option<*const OutputAlloc>> =
        const { std::cell::Cell::new(None) };
}

/// Run `f` with `alloc` providing the output buffers of the block engine
/// ([`run_blockwise`]) started on this thread, e.g. to take them from
/// another thread's allocator arena.
pub fn with_output_allocator<R>(alloc: &dyn Fn(usize) -> Vec<f32>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<*const OutputAlloc>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OUTPUT_ALLOC.with(|c| c.set(self.0));
        }
    }
    // SAFETY: only the lifetime is erased; the pointer is read by
    // `output_buffer` on this thread while `f` runs, and `Restore` removes
    // it (even on unwinding) before `alloc` goes out of scope.
    let erased: &'static OutputAlloc = unsafe { std::mem::transmute(alloc) };
    let _restore = Restore(OUTPUT_ALLOC.with(|c| c.replace(Some(erased as *const OutputAlloc))));
    f()
}

/// What the output buffers are called in a refused allocation's error.
const OUTPUT_WHAT: &str = "the feature output";

/// An empty output buffer with room for `n` values (see
/// [`with_output_allocator`]), or [`crate::AglError::Memory`] when the
/// allocation is refused.
fn output_buffer(n: usize) -> Result<Vec<f32>> {
    let mut v = match OUTPUT_ALLOC.with(|c| c.get()) {
        // SAFETY: set by `with_output_allocator`, which keeps the target
        // alive while the pointer is installed.
        Some(p) => unsafe { (*p)(n) },
        None => Vec::new(),
    };
    v.clear();
    try_grow(&mut v, n, OUTPUT_WHAT)?;
    Ok(v)
}

/// Smallest buffer (bytes) that asks for transparent huge pages.
const HUGE_PAGE_MIN: usize = 8 << 20;

/// Ask the kernel to back the 2 MiB-aligned interior of a large buffer with
/// transparent huge pages (Linux; a hint, ignored where unsupported). A
/// freshly mapped output of hundreds of megabytes otherwise takes one page
/// fault per 4 KiB on first write, which costs about as much system time
/// as the transform itself.
fn huge_pages<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(v);
        if bytes < HUGE_PAGE_MIN {
            return;
        }
        let start = v.as_ptr() as usize;
        let lo = start.div_ceil(HUGE) * HUGE;
        let hi = (start + bytes) / HUGE * HUGE;
        if hi > lo {
            // SAFETY: [lo, hi) lies inside the allocation of `v`; MADV_HUGEPAGE
            // changes only how the range is backed, never its contents.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

impl Zeroed for num_complex::Complex32 {
    fn zeroed_vec(n: usize) -> Vec<Self> {
        // Two zeroed f32 per value: same size and alignment as Complex32
        // (a #[repr(C)] pair of f32), and zero bits are 0 + 0i.
        let mut raw = std::mem::ManuallyDrop::new(f32::zeroed_vec(2 * n));
        let (ptr, cap) = (raw.as_mut_ptr(), raw.capacity());
        // SAFETY: see above; capacity in f32 is even because 2 * n values
        // were requested from the allocator with f32 layout, and Complex32
        // has the layout of [f32; 2] with the same alignment.
        unsafe { Vec::from_raw_parts(ptr as *mut num_complex::Complex32, n, cap / 2) }
    }
}

struct SyncPtr<T>(*mut T);
// SAFETY: the pointer is only used to write disjoint indices (see below).
unsafe impl<T: Send> Sync for SyncPtr<T> {}
unsafe impl<T: Send> Send for SyncPtr<T> {}

/// Frames per task so that there are several tasks per worker, but each is
/// long enough to amortise scheduling. Always a multiple of `multiple`
/// (even for the frame engine, [`LANES`] for the block engine), so kernels
/// that transform frames two or sixteen at a time group the same frames
/// whatever the thread count.
fn chunk_frames(total_frames: usize, threads: usize, multiple: usize) -> usize {
    let c = (total_frames / (threads.max(1) * 8)).clamp(16, 256);
    c.div_ceil(multiple) * multiple
}

/// Fewest rows of a frequency-major output for which a task computes one
/// block past its frames so that it writes whole 64-byte lines only (see
/// [`row_run`]). Measured one thread, 60 s clips at n_fft 1024: the 513
/// rows of a power spectrogram take 8 % less time; for 128 mel rows, the
/// sixteenth more transforms cost more than the lines save (1-3 %).
const WHOLE_LINE_ROWS: usize = 256;

/// Where the frames of a frequency-major row (its frame 0 at `row`, `nf`
/// frames) pass from the task before task boundary `t` to the task from it:
/// the first frame from `t` on that starts a 64-byte line, clamped to `nf`
/// (`t` itself at the row's two ends). Every task writes its runs of whole
/// lines with non-temporal stores and no other task writes into them; a line
/// split between two tasks would be written with ordinary stores, each of
/// which first reads the line from memory, and measured that halves the
/// speed of the output copy. The task before `t` computes the frames up to
/// this point, at most one block past its own.
fn row_run(row: *const f32, t: usize, nf: usize) -> usize {
    if t == 0 || t >= nf {
        return t.min(nf);
    }
    let misaligned = (row as usize).wrapping_add(t * 4) % 64 / 4;
    (t + (16 - misaligned) % 16).min(nf)
}

/// The output buffer of a batch: zeroed data, item offsets and frame axes.
struct Plan {
    data_len: usize,
    offsets: Vec<usize>,
    extents: Vec<usize>,
}

fn plan_output(n_frames: &[usize], layout: Layout, extent: Option<usize>) -> Result<Plan> {
    let extents: Vec<usize> = match extent {
        Some(e) => vec![e.max(n_frames.iter().copied().max().unwrap_or(0)); n_frames.len()],
        None => n_frames.to_vec(),
    };
    let mut offsets = Vec::with_capacity(n_frames.len() + 1);
    offsets.push(0usize);
    for &e in &extents {
        let last = *offsets.last().unwrap_or(&0);
        let end = layout
            .row_len()
            .checked_mul(e)
            .and_then(|n| n.checked_add(last))
            .ok_or(AglError::Memory {
                what: OUTPUT_WHAT.into(),
                bytes: u64::MAX,
            })?;
        offsets.push(end);
    }
    Ok(Plan {
        data_len: *offsets.last().unwrap_or(&0),
        offsets,
        extents,
    })
}

/// (item, first frame, end frame) tasks of at most `chunk` frames.
fn make_tasks(n_frames: &[usize], chunk: usize) -> Vec<(usize, usize, usize)> {
    let mut tasks = Vec::new();
    for (item, &nf) in n_frames.iter().enumerate() {
        let mut t0 = 0;
        while t0 < nf {
            let t1 = (t0 + chunk).min(nf);
            tasks.push((item, t0, t1));
            t0 = t1;
        }
    }
    tasks
}

/// How a batch runs: its output extent, its worker count and its cancel
/// flag, shared by the batch drivers and the kernels built on them.
#[derive(Clone, Copy)]
pub struct RunOpts<'a> {
    /// `None` gives each item its own frame axis (ragged output); `Some(e)`
    /// pads every item's frame axis to `max(e, max n_frames)` with zeros.
    pub extent: Option<usize>,
    /// Worker threads; `None` uses the default.
    pub n_threads: Option<usize>,
    /// Checked between work units; set, the run stops with an error.
    pub cancel: &'a Cancel,
}

/// Run a frame-wise kernel over a batch.
///
/// * `n_frames[i]`: frames of item `i`.
/// * `extent`: `None` gives each item its own frame axis (ragged output);
///   `Some(e)` pads every item's frame axis to `max(e, max n_frames)` with
///   zeros.
/// * `init` makes a worker's scratch; `frame(scratch, item, t, row)` fills
///   the `layout.row_len()` values of frame `t` of `item`.
pub fn run_framewise<T, S, I, F>(
    n_frames: &[usize],
    layout: Layout,
    run: RunOpts<'_>,
    init: I,
    frame: F,
) -> Result<FrameOutput<T>>
where
    T: Zeroed,
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, usize, usize, &mut [T]) + Sync + Send,
{
    let RunOpts {
        extent,
        n_threads,
        cancel,
    } = run;
    let Plan {
        data_len,
        offsets,
        extents,
    } = plan_output(n_frames, layout, extent)?;
    // Zeroed pages come lazily from the allocator, which aborts instead of
    // failing: try the size first so a refused allocation is an error.
    try_grow(&mut Vec::<T>::new(), data_len, OUTPUT_WHAT)?;
    let mut data = T::zeroed_vec(data_len);
    let fill = match data.first() {
        Some(v) => *v,
        None => {
            return Ok(FrameOutput {
                data,
                offsets,
                extents,
                n_frames: n_frames.to_vec(),
            })
        }
    };

    let threads = crate::parallel::resolve_threads(n_threads)?;
    let total_frames: usize = n_frames.iter().sum();
    let tasks = make_tasks(n_frames, chunk_frames(total_frames, threads, 2));

    let row_len = layout.row_len();
    let out = SyncPtr(data.as_mut_ptr());
    let out_ref = &out;
    let offsets_ref = &offsets;
    let extents_ref = &extents;
    let result: Result<()> = install(n_threads, || {
        tasks.par_iter().try_for_each_init(
            || (init(), Vec::<T>::with_capacity(row_len)),
            |(scratch, row), &(item, t0, t1)| -> Result<()> {
                cancel.check()?;
                row.clear();
                row.resize(row_len, fill);
                let base = offsets_ref[item];
                let ext = extents_ref[item];
                for t in t0..t1 {
                    frame(scratch, item, t, row);
                    // SAFETY: every (item, t) pair belongs to exactly one
                    // task, and the indices written below are a function of
                    // (item, t) that is injective and stays inside item's
                    // block [offsets[item], offsets[item + 1]), which lies
                    // within `data` (allocated above with `data_len` values
                    // and not touched otherwise until all tasks finish).
                    unsafe {
                        match layout {
                            Layout::ChannelsTimeWidth { channels, width } => {
                                for c in 0..channels {
                                    let dst = out_ref.0.add(base + (c * ext + t) * width);
                                    std::ptr::copy_nonoverlapping(
                                        row.as_ptr().add(c * width),
                                        dst,
                                        width,
                                    );
                                }
                            }
                            Layout::WidthTime { width } => {
                                for (w, v) in row.iter().enumerate().take(width) {
                                    *out_ref.0.add(base + w * ext + t) = *v;
                                }
                            }
                        }
                    }
                }
                Ok(())
            },
        )
    })?;
    result?;
    Ok(FrameOutput {
        data,
        offsets,
        extents,
        n_frames: n_frames.to_vec(),
    })
}

/// Run a block kernel over a batch: like [`run_framewise`], but the kernel
/// computes up to [`LANES`] consecutive frames of one item at once.
///
/// `block(scratch, item, t0, n, values)` fills the `row_len` vectors of
/// `values`: value `w` of the row of frame `t0 + i` (`i < n`) in lane `i` of
/// `values[w]`, so a frequency-major item gets each row of `n` frames as one
/// contiguous copy. An error from `block` stops the run and is returned.
/// Blocks start at multiples of [`LANES`] within an item, whatever the
/// thread count.
pub fn run_blockwise<S, I, F>(
    n_frames: &[usize],
    layout: Layout,
    run: RunOpts<'_>,
    init: I,
    block: F,
) -> Result<FrameOutput<f32>>
where
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, usize, usize, usize, &mut [V]) -> Result<()> + Sync + Send,
{
    let RunOpts {
        extent,
        n_threads,
        cancel,
    } = run;
    let Plan {
        data_len,
        offsets,
        extents,
    } = plan_output(n_frames, layout, extent)?;
    let threads = crate::parallel::resolve_threads(n_threads)?;
    // Every value is written below (frames by the tasks, padding after
    // them), so the buffer is not zeroed first; its length is set once all
    // writes are done.
    let mut data = output_buffer(data_len)?;
    huge_pages(data.spare_capacity_mut());
    let total_frames: usize = n_frames.iter().sum();
    let tasks = make_tasks(n_frames, chunk_frames(total_frames, threads, LANES));

    let row_len = layout.row_len();
    let out = SyncPtr(data.as_mut_ptr());
    let out_ref = &out;
    let offsets_ref = &offsets;
    let extents_ref = &extents;
    let result: Result<()> = install(n_threads, || {
        tasks.par_iter().try_for_each_init(
            || (init(), vec![V::ZERO; row_len], Vec::<V>::new()),
            |(scratch, vals, stage), &(item, t0, t1)| -> Result<()> {
                cancel.check()?;
                let base = offsets_ref[item];
                let ext = extents_ref[item];
                // Frames computed: the task's own, and for a wide
                // frequency-major output one block past them (see `row_run`).
                let whole_lines =
                    matches!(layout, Layout::WidthTime { width } if width >= WHOLE_LINE_ROWS);
                let t_end = if whole_lines {
                    t1.saturating_add(LANES).min(n_frames[item])
                } else {
                    t1
                };
                let span = t_end - t0;
                match layout {
                    Layout::WidthTime { width } => {
                        // The task's blocks one after another, each as the
                        // kernel leaves it (row w of block k in vector
                        // `k * row_len + w`), so the kernel writes there
                        // directly; each row is then gathered across the
                        // blocks and written out as one contiguous run of
                        // long sequential stores (`gather_row`).
                        stage.resize(span.div_ceil(LANES) * row_len, V::ZERO);
                        for (vals, b0) in stage
                            .chunks_exact_mut(row_len)
                            .zip((t0..t_end).step_by(LANES))
                        {
                            block(scratch, item, b0, (t_end - b0).min(LANES), vals)?;
                        }
                        let nf = n_frames[item];
                        for w in 0..width {
                            let start = out_ref.0.wrapping_add(base + w * ext);
                            let run = if whole_lines {
                                row_run(start, t0, nf)..row_run(start, t1, nf)
                            } else {
                                t0..t1
                            };
                            // SAFETY: the runs of one row partition its
                            // frames 0 .. nf among the item's tasks
                            // (`row_run`), so these frames belong to this
                            // task alone, lie inside item's block, and were
                            // computed (t0 <= run.start, run.end <= t_end).
                            unsafe {
                                gather_row(
                                    start.add(run.start),
                                    &BlockRow {
                                        blocks: stage,
                                        stride: row_len,
                                        row: w,
                                        first: run.start - t0,
                                    },
                                    run.len(),
                                )
                            };
                        }
                    }
                    Layout::ChannelsTimeWidth { channels, width } => {
                        // One channel of a block of frames, frame-major, held
                        // as vectors so that it starts on a cache line.
                        stage.resize(width, V::ZERO);
                        let stage = flat_mut(stage);
                        for b0 in (t0..t_end).step_by(LANES) {
                            let n = (t_end - b0).min(LANES);
                            block(scratch, item, b0, n, vals)?;
                            let raw: &[V] = vals;
                            let vals = flat(vals);
                            // SAFETY: as in `run_framewise`: frames b0 .. b0 + n
                            // of `item` belong to this task alone, and every
                            // index written lies inside item's block of `data`.
                            unsafe {
                                if n == LANES && width.is_multiple_of(16) {
                                    // Sixteen whole frames: 16 x 16 transposes
                                    // into `stage` (in L1), then one streaming
                                    // copy per channel, as the block's frames
                                    // of a channel are one contiguous run of
                                    // the output: the output's cache lines
                                    // are written without being read first.
                                    for c in 0..channels {
                                        for w0 in (0..width).step_by(16) {
                                            let src = &raw[c * width + w0..c * width + w0 + 16];
                                            transpose_out(src, stage.as_mut_ptr().add(w0), width);
                                        }
                                        let dst = out_ref.0.add(base + (c * ext + b0) * width);
                                        stream_copy(dst, &stage[..LANES * width]);
                                    }
                                    continue;
                                }
                                for c in 0..channels {
                                    for i in 0..n {
                                        let dst = out_ref.0.add(base + (c * ext + b0 + i) * width);
                                        let src = &vals[c * width * LANES + i..];
                                        for w in 0..width {
                                            *dst.add(w) = src[w * LANES];
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                stream_fence();
                Ok(())
            },
        )
    })?;
    result?;
    // Zeros past each item's last frame (the padded frame axis).
    for (item, (&nf, &ext)) in n_frames.iter().zip(&extents).enumerate() {
        let base = offsets[item];
        let (rows, width) = match layout {
            Layout::WidthTime { width } => (width, 1),
            Layout::ChannelsTimeWidth { channels, width } => (channels, width),
        };
        for r in 0..rows {
            let (lo, hi) = (base + (r * ext + nf) * width, base + (r + 1) * ext * width);
            // SAFETY: [lo, hi) lies inside item's block, within capacity.
            unsafe { std::ptr::write_bytes(out.0.add(lo), 0, hi - lo) };
        }
    }
    // SAFETY: the tasks wrote every frame value of every item (all tasks
    // succeeded) and the loop above every padding value: all `data_len`
    // values are initialised.
    unsafe { data.set_len(data_len) };
    Ok(FrameOutput {
        data,
        offsets,
        extents,
        n_frames: n_frames.to_vec(),
    })
}

/// Check every item with `check(i, item)` on the thread pool; the error of
/// the first failing item (in item order) is returned, whatever the thread
/// count.
pub fn check_items<T: Sync, F>(items: &[T], n_threads: Option<usize>, check: F) -> Result<()>
where
    F: Fn(usize, &T) -> Result<()> + Sync + Send,
{
    let first_bad = install(n_threads, || {
        items
            .par_iter()
            .enumerate()
            .filter_map(|(i, x)| check(i, x).err().map(|e| (i, e)))
            .min_by_key(|(i, _)| *i)
    })?;
    match first_bad {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Map `f` over `0..n` in parallel, keeping order (for per-item work).
pub fn map_items<T: Send, F>(
    n: usize,
    n_threads: Option<usize>,
    cancel: &Cancel,
    f: F,
) -> Result<Vec<T>>
where
    F: Fn(usize) -> Result<T> + Sync + Send,
{
    install(n_threads, || {
        (0..n)
            .into_par_iter()
            .map(|i| {
                cancel.check()?;
                f(i)
            })
            .collect::<Result<Vec<T>>>()
    })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::never;

    fn value(item: usize, t: usize, w: usize) -> f32 {
        (item * 1_000_000 + t * 1000 + w) as f32
    }

    /// The block engine lays frames out as the frame engine does, pads with
    /// zeros, and does not depend on the thread count.
    #[test]
    fn blocks_match_frames_in_both_layouts() {
        let n_frames = [1usize, 16, 17, 40, 0, 300, 1001];
        let layouts = [
            Layout::WidthTime { width: 5 },
            // Wide enough that tasks write whole lines (`row_run`), with
            // rows starting at every offset within a line.
            Layout::WidthTime {
                width: WHOLE_LINE_ROWS + 1,
            },
            Layout::ChannelsTimeWidth {
                channels: 3,
                width: 4,
            },
            // Whole rows of 16: the transposed writes.
            Layout::ChannelsTimeWidth {
                channels: 2,
                width: 32,
            },
        ];
        for layout in layouts {
            for extent in [None, Some(310)] {
                let want: FrameOutput<f32> = run_framewise(
                    &n_frames,
                    layout,
                    RunOpts {
                        extent,
                        n_threads: Some(1),
                        cancel: never(),
                    },
                    || (),
                    |_, item, t, row| {
                        for (w, v) in row.iter_mut().enumerate() {
                            *v = value(item, t, w);
                        }
                    },
                )
                .unwrap();
                for threads in [1, 2, 3] {
                    let got = run_blockwise(
                        &n_frames,
                        layout,
                        RunOpts {
                            extent,
                            n_threads: Some(threads),
                            cancel: never(),
                        },
                        || (),
                        |_, item, t0, n, vals| {
                            for (w, v) in vals.iter_mut().enumerate() {
                                for l in 0..LANES {
                                    // Lanes past n hold garbage the engine must not copy.
                                    v.0[l] = if l < n {
                                        value(item, t0 + l, w)
                                    } else {
                                        f32::NAN
                                    };
                                }
                            }
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!(got.offsets, want.offsets);
                    assert_eq!(got.extents, want.extents);
                    assert_eq!(
                        got.data, want.data,
                        "{layout:?} {extent:?} {threads} threads"
                    );
                }
            }
        }
    }

    /// The runs of a row partition its frames whatever the row's alignment:
    /// each starts on a 64-byte line but at the row's first frame, ends at
    /// most 15 frames (less than a block) past its task boundary, and never
    /// past the row.
    #[test]
    fn row_runs_partition_a_row_into_whole_lines() {
        let buf = vec![0f32; 64];
        let line = buf.as_ptr().wrapping_add(buf.as_ptr().align_offset(64));
        for shift in 0..16 {
            let row = line.wrapping_add(shift);
            for nf in [0usize, 1, 15, 16, 17, 31, 256, 257, 1000] {
                for chunk in [16usize, 48, 256] {
                    let mut at = 0;
                    for t in (chunk..nf).step_by(chunk).chain([nf]) {
                        let end = row_run(row, t, nf);
                        assert!(end >= t && end < t + LANES && end <= nf);
                        assert!(end >= at, "runs out of order");
                        if end < nf {
                            assert_eq!(row.wrapping_add(end) as usize % 64, 0, "{shift} {nf} {t}");
                        }
                        at = end;
                    }
                    assert_eq!(at, nf);
                    assert_eq!(row_run(row, 0, nf), 0);
                }
            }
        }
    }

    #[test]
    fn output_buffers_come_from_the_installed_allocator() {
        let calls = std::cell::Cell::new(0usize);
        let alloc = |n: usize| {
            calls.set(calls.get() + 1);
            Vec::with_capacity(n)
        };
        let out = with_output_allocator(&alloc, || {
            run_blockwise(
                &[20],
                Layout::WidthTime { width: 2 },
                RunOpts {
                    extent: None,
                    n_threads: Some(1),
                    cancel: never(),
                },
                || (),
                |_, _, _, _, vals| {
                    vals.iter_mut().for_each(|v| *v = V::splat(1.0));
                    Ok(())
                },
            )
            .unwrap()
        });
        assert_eq!(calls.get(), 1);
        assert_eq!(out.data, vec![1.0; 40]);
        // Removed again once the scope ends.
        run_blockwise(
            &[3],
            Layout::WidthTime { width: 1 },
            RunOpts {
                extent: None,
                n_threads: Some(1),
                cancel: never(),
            },
            || (),
            |_, _, _, _, _| Ok(()),
        )
        .unwrap();
        assert_eq!(calls.get(), 1);
    }
}
