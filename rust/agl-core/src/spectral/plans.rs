//! The one plan cache of the spectral engine: every FFT plan, of either
//! precision and of every kind (the block-of-frames transform, the
//! one-frame real transform, the complex transform behind both the real one
//! and the paired frames, the inverse of convolution, the float64 path), is
//! planned once per length and shared by all workers (RustFFT's habit:
//! plan once, `Arc` it, scratch per worker).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::lanes::LaneFft;
use super::rfft::RealFft;

/// What a cached plan computes; with its length, the key of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// [`LaneFft`], or its absence for a length it does not take.
    Lanes,
    /// [`RealFft`], forward, f32.
    Real,
    /// Complex forward, f32.
    Complex,
    /// Complex-to-real inverse, f32.
    Inverse,
    /// Real forward, f64.
    Real64,
}

/// The plans by kind and length, and the planners that made them (RustFFT's
/// planners share the sub-transforms and twiddles of the plans they make).
struct Cache {
    plans: HashMap<(Kind, usize), Box<dyn Any + Send + Sync>>,
    complex: rustfft::FftPlanner<f32>,
    scalar: rustfft::FftPlannerScalar<f32>,
    real: realfft::RealFftPlanner<f32>,
    real64: realfft::RealFftPlanner<f64>,
}

fn cache() -> MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            Mutex::new(Cache {
                plans: HashMap::new(),
                complex: rustfft::FftPlanner::new(),
                scalar: rustfft::FftPlannerScalar::new(),
                real: realfft::RealFftPlanner::new(),
                real64: realfft::RealFftPlanner::new(),
            })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The plan of `kind` for length `n`, made by `make` on first use. `make`
/// runs outside the lock (a plan may ask for the plans it is built on, or
/// take a planner); of two threads that plan one length at once, the first
/// to store wins and both return its plan.
fn cached<T>(kind: Kind, n: usize, make: impl FnOnce() -> T) -> T
where
    T: Clone + Send + Sync + 'static,
{
    let stored = |g: &Cache| {
        g.plans
            .get(&(kind, n))
            .and_then(|p| p.downcast_ref::<T>())
            .cloned()
    };
    if let Some(p) = stored(&cache()) {
        return p;
    }
    let made = make();
    let mut g = cache();
    g.plans
        .entry((kind, n))
        .or_insert_with(|| Box::new(made.clone()));
    stored(&g).unwrap_or(made)
}

/// The frame-batched real FFT of `n` samples (see [`super::lanes`]);
/// `None` for lengths it does not take.
pub fn lane_plan(n: usize) -> Option<Arc<LaneFft>> {
    cached(Kind::Lanes, n, || LaneFft::new(n).map(Arc::new))
}

/// The forward real FFT of `n` samples, f32 (see [`RealFft`]).
pub fn rfft_plan(n: usize) -> Arc<RealFft> {
    cached(Kind::Real, n, || Arc::new(RealFft::new(n, cfft_plan)))
}

/// The forward complex FFT of `n` values, f32 (RustFFT's portable plan
/// where SIMD is switched off, see [`crate::fastmath::simd_enabled`]).
pub fn cfft_plan(n: usize) -> Arc<dyn rustfft::Fft<f32>> {
    cached(Kind::Complex, n, || {
        let mut g = cache();
        if crate::fastmath::simd_enabled() {
            g.complex.plan_fft_forward(n)
        } else {
            g.scalar.plan_fft_forward(n)
        }
    })
}

/// The inverse (complex-to-real) FFT of `n` samples, f32.
pub fn irfft_plan(n: usize) -> Arc<dyn realfft::ComplexToReal<f32>> {
    cached(Kind::Inverse, n, || cache().real.plan_fft_inverse(n))
}

/// The forward real FFT of `n` samples, f64.
pub fn rfft64_plan(n: usize) -> Arc<dyn realfft::RealToComplex<f64>> {
    cached(Kind::Real64, n, || cache().real64.plan_fft_forward(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_plan_per_kind_and_length() {
        assert!(Arc::ptr_eq(&rfft_plan(96), &rfft_plan(96)));
        assert!(Arc::ptr_eq(&cfft_plan(48), &cfft_plan(48)));
        assert!(Arc::ptr_eq(&rfft64_plan(96), &rfft64_plan(96)));
        assert!(Arc::ptr_eq(&irfft_plan(96), &irfft_plan(96)));
        let lane = lane_plan(256).unwrap();
        assert!(Arc::ptr_eq(&lane, &lane_plan(256).unwrap()));
        assert!(lane_plan(100).is_none());
        // One length, two kinds: two plans.
        assert_eq!(rfft_plan(64).len(), 64);
        assert_eq!(rfft64_plan(64).len(), 64);
    }
}
