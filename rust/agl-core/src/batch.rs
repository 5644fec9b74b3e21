//! The frame engine: every frame-wise kernel (STFT, mel, IPD, presets) runs
//! through [`run_framewise`], which splits a batch into (item, frame range)
//! tasks, runs them on the thread pool with per-worker scratch, and writes
//! each frame's row into one output buffer allocated once.
//!
//! Results do not depend on the thread count: each frame is computed by the
//! same code from the same inputs wherever it runs.

use rayon::prelude::*;

use crate::error::{try_grow, AglError, Result};
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
pub(crate) fn output_buffer(n: usize) -> Result<Vec<f32>> {
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
pub(crate) fn huge_pages<T>(v: &[T]) {
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

pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
// SAFETY: the pointer is only used to write disjoint indices (see below).
unsafe impl<T: Send> Sync for SyncPtr<T> {}
unsafe impl<T: Send> Send for SyncPtr<T> {}

/// Frames per task so that there are several tasks per worker, but each is
/// long enough to amortise scheduling. Always a multiple of `multiple`
/// (even for the frame engine, the lane count for the block engine), so kernels
/// that transform frames two or sixteen at a time group the same frames
/// whatever the thread count.
pub(crate) fn chunk_frames(total_frames: usize, threads: usize, multiple: usize) -> usize {
    let c = (total_frames / (threads.max(1) * 8)).clamp(16, 256);
    c.div_ceil(multiple) * multiple
}

/// The output buffer of a batch: zeroed data, item offsets and frame axes.
pub(crate) struct Plan {
    pub(crate) data_len: usize,
    pub(crate) offsets: Vec<usize>,
    pub(crate) extents: Vec<usize>,
}

pub(crate) fn plan_output(
    n_frames: &[usize],
    layout: Layout,
    extent: Option<usize>,
) -> Result<Plan> {
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
pub(crate) fn make_tasks(n_frames: &[usize], chunk: usize) -> Vec<(usize, usize, usize)> {
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
                    unsafe { write_row(out_ref.0.add(base), layout, ext, t, row) };
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

/// Write frame `t`'s `row` into an item's block at `item` (frame axis of
/// `ext` frames), laid out as `layout` says.
///
/// # Safety
/// `item` must be valid for writes of the whole block (`layout.row_len() *
/// ext` values), `t < ext`, and no other thread may write frame `t`.
#[inline(always)]
unsafe fn write_row<T: Copy>(item: *mut T, layout: Layout, ext: usize, t: usize, row: &[T]) {
    match layout {
        Layout::ChannelsTimeWidth { channels, width } => {
            for c in 0..channels {
                let dst = item.add((c * ext + t) * width);
                std::ptr::copy_nonoverlapping(row.as_ptr().add(c * width), dst, width);
            }
        }
        Layout::WidthTime { width } => {
            for (w, v) in row.iter().enumerate().take(width) {
                *item.add(w * ext + t) = *v;
            }
        }
    }
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
