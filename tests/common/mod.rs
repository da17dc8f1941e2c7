//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// A small xorshift generator, so each thread or run draws its own sequence.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n` (0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// A number in `[-1, 1)`.
    pub fn f32(&mut self) -> f32 {
        self.below(1 << 24) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// `n` numbers in `[-1, 1)`.
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}
