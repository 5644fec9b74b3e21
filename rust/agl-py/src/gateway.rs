//! The gateway every heavy call goes through: the GIL is released while the
//! work runs, core errors are mapped to Python exceptions, and Ctrl-C is
//! honoured.
//!
//! The work runs on a helper thread (which itself fans out on the rayon
//! pool) while the calling thread, GIL released, waits in short slices and
//! re-takes the GIL between slices only to run Python's signal handlers. On
//! `KeyboardInterrupt` it raises the cancellation flag, which batch loops
//! poll between tasks, waits for the helper to stop, and re-raises.

use std::sync::{Condvar, Mutex};

use std::time::Duration;

use agl_core::parallel::Cancel;
use agl_core::Result as CoreResult;
use pyo3::prelude::*;

use crate::errors::{internal_err, to_py};

/// State shared by the calling thread and the helper thread. Besides the
/// completion flag it carries output-buffer requests: the helper asks for a
/// buffer of `want` values and the calling thread allocates it, so large
/// outputs come from (and are freed back to) the allocator arena of the
/// thread that owns the resulting array, which reuses them call after call;
/// a helper thread's arena would map fresh pages, zeroed by the kernel, for
/// every call.
#[derive(Default)]
struct Shared {
    done: bool,
    want: Option<usize>,
    got: Option<Vec<f32>>,
    /// The calling thread no longer serves requests (the helper allocates).
    closed: bool,
}

/// Work below this many input samples runs inline (no watcher thread).
pub const INLINE_SAMPLES: usize = 1 << 18;

/// Run `f` with the GIL released; see the module docs.
pub fn run<T, F>(py: Python<'_>, work_samples: usize, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&Cancel) -> CoreResult<T> + Send,
{
    let cancel = Cancel::new();
    if work_samples < INLINE_SAMPLES {
        // A panic is caught here as on the threaded path, so both report
        // the same typed internal error instead of a `PanicException`.
        return py
            .detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&cancel))))
            .map_err(|_| internal_err("internal error: a worker panicked"))?
            .map_err(to_py);
    }
    let state: State = (Mutex::new(Shared::default()), Condvar::new());
    std::thread::scope(|scope| {
        let cancel_ref = &cancel;
        let state_ref = &state;
        let handle = scope.spawn(move || {
            // Output buffers come from the calling thread (see `Shared`).
            let alloc = |n: usize| request_buffer(state_ref, n);
            let out = agl_core::batch::with_output_allocator(&alloc, || f(cancel_ref));
            lock(state_ref).done = true;
            state_ref.1.notify_all();
            out
        });
        let close = || {
            lock(&state).closed = true;
            state.1.notify_all();
        };
        loop {
            let (finished, want) = py.detach(|| wait_for_worker(&state));
            if let Some(n) = want {
                hand_over_buffer(&state, n);
                continue;
            }
            if finished || handle.is_finished() {
                break;
            }
            if let Err(interrupt) = py.check_signals() {
                cancel.cancel();
                close();
                let _ = py.detach(|| handle.join());
                return Err(interrupt);
            }
        }
        close();
        match handle.join() {
            Ok(r) => r.map_err(to_py),
            Err(_) => Err(internal_err("internal error: a worker panicked")),
        }
    })
}

/// [`Shared`] and the condition both threads wait on.
type State = (Mutex<Shared>, Condvar);

fn lock(state: &State) -> std::sync::MutexGuard<'_, Shared> {
    state.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The helper's side of an output allocation: ask the calling thread for a
/// buffer of `n` values and wait for it (an empty one once the calling
/// thread no longer serves requests).
fn request_buffer(state: &State, n: usize) -> Vec<f32> {
    let mut g = lock(state);
    if g.closed {
        return Vec::new();
    }
    g.want = Some(n);
    state.1.notify_all();
    loop {
        if let Some(v) = g.got.take() {
            return v;
        }
        if g.closed {
            return Vec::new();
        }
        g = state.1.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

/// Wait up to 50 ms for the helper to finish or to ask for a buffer:
/// `(done, wanted length)`.
fn wait_for_worker(state: &State) -> (bool, Option<usize>) {
    let g = lock(state);
    let (g, _) = state
        .1
        .wait_timeout_while(g, Duration::from_millis(50), |s| {
            !s.done && s.want.is_none()
        })
        .unwrap_or_else(|e| e.into_inner());
    (g.done, g.want)
}

/// The calling thread's side of an output allocation: reserve `n` values
/// and hand them to the helper. A refused allocation hands back an empty
/// buffer; the helper's own reservation then reports the error.
fn hand_over_buffer(state: &State, n: usize) {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        v = Vec::new();
    }
    let mut g = lock(state);
    g.want = None;
    g.got = Some(v);
    drop(g);
    state.1.notify_all();
}
