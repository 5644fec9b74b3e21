//! The block engine: [`run_blockwise`] runs a lane kernel (up to
//! [`LANES`] frames of one item at once) over a batch, on the tasks, thread
//! pool and output plan of [`crate::batch`], and writes each block's values
//! with the memory kernels of [`super::lanes`].

use rayon::prelude::*;

use super::lanes::{
    flat, flat_mut, gather_row, stream_copy, stream_fence, transpose_out, BlockRow, LANES, V,
};
use crate::batch::{
    chunk_frames, huge_pages, make_tasks, output_buffer, plan_output, FrameOutput, Layout, Plan,
    RunOpts, SyncPtr,
};
use crate::error::Result;
use crate::parallel::install;

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

/// Run a block kernel over a batch: like [`crate::batch::run_framewise`], but the kernel
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
    // A wide frequency-major output computes one block past each task's
    // frames (see `row_run`).
    let whole_lines = matches!(layout, Layout::WidthTime { width } if width >= WHOLE_LINE_ROWS);
    let out = SyncPtr(data.as_mut_ptr());
    let out_ref = &out;
    let offsets_ref = &offsets;
    let extents_ref = &extents;
    let result: Result<()> = install(n_threads, || {
        tasks.par_iter().try_for_each_init(
            || (init(), vec![V::ZERO; row_len], Vec::<V>::new()),
            |(scratch, vals, stage), &(item, t0, t1)| -> Result<()> {
                cancel.check()?;
                let at = out_ref.0.wrapping_add(offsets_ref[item]);
                let task =
                    BlockTask::new(at, extents_ref[item], n_frames[item], (t0, t1), whole_lines);
                let compute =
                    |b0: usize, n: usize, vals: &mut [V]| block(scratch, item, b0, n, vals);
                // SAFETY: as in `crate::batch::run_framewise`: the task's frames belong to
                // it alone and lie inside item's block of `data`.
                unsafe {
                    match layout {
                        Layout::WidthTime { width } => {
                            task.width_time(width, row_len, whole_lines, stage, compute)?
                        }
                        Layout::ChannelsTimeWidth { channels, width } => {
                            task.channels_time_width((channels, width), vals, stage, compute)?
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
    // SAFETY: the blocks lie within the capacity of `data`.
    unsafe { zero_padding(out.0, n_frames, (&offsets, &extents), layout) };
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

/// Write zeros past each item's last frame (the padded frame axis).
///
/// # Safety
/// `out` must be valid for writes of every item's block
/// (`offsets[i] .. offsets[i] + row_len * extents[i]`).
unsafe fn zero_padding(
    out: *mut f32,
    n_frames: &[usize],
    (offsets, extents): (&[usize], &[usize]),
    layout: Layout,
) {
    for (item, (&nf, &ext)) in n_frames.iter().zip(extents).enumerate() {
        let base = offsets[item];
        let (rows, width) = match layout {
            Layout::WidthTime { width } => (width, 1),
            Layout::ChannelsTimeWidth { channels, width } => (channels, width),
        };
        for r in 0..rows {
            let (lo, hi) = (base + (r * ext + nf) * width, base + (r + 1) * ext * width);
            std::ptr::write_bytes(out.add(lo), 0, hi - lo);
        }
    }
}

/// One task of [`run_blockwise`]: frames `t0 .. t1` of an item, computed
/// through `t_end` (one block past `t1` for a wide frequency-major output,
/// see `row_run`).
struct BlockTask {
    /// The item's block of the output.
    item: *mut f32,
    /// The item's (padded) frame axis.
    ext: usize,
    /// The item's frames.
    nf: usize,
    t0: usize,
    t1: usize,
    t_end: usize,
}

impl BlockTask {
    /// Frames `t0 .. t1` of an item of `nf` frames whose block starts at
    /// `item`, computed one block further with `whole_lines`.
    #[inline(always)]
    fn new(
        item: *mut f32,
        ext: usize,
        nf: usize,
        (t0, t1): (usize, usize),
        whole_lines: bool,
    ) -> Self {
        let t_end = if whole_lines {
            t1.saturating_add(LANES).min(nf)
        } else {
            t1
        };
        BlockTask {
            item,
            ext,
            nf,
            t0,
            t1,
            t_end,
        }
    }

    /// A frequency-major item (`[width, ext]`): the task's blocks one after
    /// another in `stage`, each as the kernel leaves it (row w of block k in
    /// vector `k * row_len + w`), so the kernel writes there directly; each
    /// row is then gathered across the blocks and written out as one
    /// contiguous run of long sequential stores (`gather_row`).
    ///
    /// # Safety
    /// The task's frames belong to it alone, and `self.item` is valid for
    /// the item's block.
    #[inline(always)]
    unsafe fn width_time(
        &self,
        width: usize,
        row_len: usize,
        whole_lines: bool,
        stage: &mut Vec<V>,
        mut compute: impl FnMut(usize, usize, &mut [V]) -> Result<()>,
    ) -> Result<()> {
        let BlockTask {
            ext,
            nf,
            t0,
            t1,
            t_end,
            ..
        } = *self;
        stage.resize((t_end - t0).div_ceil(LANES) * row_len, V::ZERO);
        for (vals, b0) in stage
            .chunks_exact_mut(row_len)
            .zip((t0..t_end).step_by(LANES))
        {
            compute(b0, (t_end - b0).min(LANES), vals)?;
        }
        for w in 0..width {
            let start = self.item.wrapping_add(w * ext);
            let run = if whole_lines {
                row_run(start, t0, nf)..row_run(start, t1, nf)
            } else {
                t0..t1
            };
            // The runs of one row partition its frames 0 .. nf among the
            // item's tasks (`row_run`), so these frames belong to this task
            // alone, lie inside item's block, and were computed (t0 <=
            // run.start, run.end <= t_end).
            let row = BlockRow {
                blocks: stage,
                stride: row_len,
                row: w,
                first: run.start - t0,
            };
            gather_row(start.add(run.start), &row, run.len());
        }
        Ok(())
    }

    /// A channel-major item (`[channels, ext, width]`): one channel of a
    /// block of frames at a time, frame-major, staged as vectors so that it
    /// starts on a cache line.
    ///
    /// # Safety
    /// As [`BlockTask::width_time`].
    #[inline(always)]
    unsafe fn channels_time_width(
        &self,
        (channels, width): (usize, usize),
        vals: &mut [V],
        stage: &mut Vec<V>,
        mut compute: impl FnMut(usize, usize, &mut [V]) -> Result<()>,
    ) -> Result<()> {
        let (ext, t0, t_end) = (self.ext, self.t0, self.t_end);
        stage.resize(width, V::ZERO);
        let stage = flat_mut(stage);
        for b0 in (t0..t_end).step_by(LANES) {
            let n = (t_end - b0).min(LANES);
            compute(b0, n, vals)?;
            let raw: &[V] = vals;
            let vals = flat(vals);
            if n == LANES && width.is_multiple_of(16) {
                // Sixteen whole frames: 16 x 16 transposes into `stage` (in
                // L1), then one streaming copy per channel, as the block's
                // frames of a channel are one contiguous run of the output:
                // the output's cache lines are written without being read
                // first.
                for c in 0..channels {
                    for w0 in (0..width).step_by(16) {
                        let src = &raw[c * width + w0..c * width + w0 + 16];
                        transpose_out(src, stage.as_mut_ptr().add(w0), width);
                    }
                    let dst = self.item.add((c * ext + b0) * width);
                    stream_copy(dst, &stage[..LANES * width]);
                }
                continue;
            }
            for c in 0..channels {
                for i in 0..n {
                    let dst = self.item.add((c * ext + b0 + i) * width);
                    let src = &vals[c * width * LANES + i..];
                    for w in 0..width {
                        *dst.add(w) = src[w * LANES];
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{run_framewise, with_output_allocator};
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
