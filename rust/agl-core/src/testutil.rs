//! Deterministic test signals shared by the unit tests.

/// A 64-bit linear congruential generator (Knuth's MMIX constants).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value, uniform in `[-1, 1)` (53 bits).
    pub fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// `n` samples uniform in `[-0.5, 0.5)` from a fixed seed.
pub fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut g = Lcg(seed);
    (0..n).map(|_| (0.5 * g.unit()) as f32).collect()
}
