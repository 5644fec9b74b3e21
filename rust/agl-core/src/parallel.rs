//! Thread pools and cooperative cancellation.
//!
//! One rayon pool per requested thread count is built lazily and cached. The
//! cache remembers the process id that built it: in a child created by
//! `fork()` the parent's worker threads do not exist, so the child drops its
//! view of them (without touching their state) and builds fresh pools. This is
//! what makes the library safe under `multiprocessing` and DataLoader workers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{AglError, Result};

struct PoolCache {
    pid: u32,
    pools: HashMap<usize, Arc<rayon::ThreadPool>>,
}

fn cache() -> &'static Mutex<PoolCache> {
    static CACHE: OnceLock<Mutex<PoolCache>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(PoolCache {
            pid: std::process::id(),
            pools: HashMap::new(),
        })
    })
}

/// Number of threads used when the caller passes none: `AGL_FAST_NUM_THREADS`
/// if set to a positive integer, else the number of logical CPUs.
pub fn default_threads() -> usize {
    std::env::var("AGL_FAST_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// Resolve an optional thread count: `None` or `Some(0)` mean the default.
pub fn resolve_threads(n_threads: Option<usize>) -> usize {
    match n_threads {
        None | Some(0) => default_threads(),
        Some(n) => n,
    }
}

/// The cached pool with `n_threads` workers (built on first use).
pub fn pool(n_threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    let n = n_threads.max(1);
    let mut guard = cache().lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if guard.pid != pid {
        // Forked child: the parent's workers are gone. Forget (never drop)
        // the stale pools, since dropping would signal threads that no
        // longer exist.
        let stale = std::mem::take(&mut guard.pools);
        std::mem::forget(stale);
        guard.pid = pid;
    }
    if let Some(p) = guard.pools.get(&n) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("agl-fast-{i}"))
        .build()
        .map_err(|e| AglError::Io(format!("cannot start {n} worker threads: {e}")))?;
    let p = Arc::new(p);
    guard.pools.insert(n, p.clone());
    Ok(p)
}

/// Run `f` inside the pool of `n_threads` workers (`None` = default).
pub fn install<T: Send>(n_threads: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T> {
    let p = pool(resolve_threads(n_threads))?;
    Ok(p.install(f))
}

/// A flag that long batch loops poll between items; set from another thread
/// (e.g. on Ctrl-C) to make them stop early with [`AglError::Cancelled`].
#[derive(Debug, Default)]
pub struct Cancel(AtomicBool);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    /// Ask the running job to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// `Err(Cancelled)` once cancellation has been requested.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(AglError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A cancellation flag that is never set, for callers without interruption.
pub fn never() -> &'static Cancel {
    static NEVER: Cancel = Cancel(AtomicBool::new(false));
    &NEVER
}
