//! Seeded randomness. Every stream is a ChaCha8 generator seeded from a 64-bit value
//! derived (by SplitMix64 mixing) from the population seed and a stream identity, so a
//! stream's output depends only on what it is for, never on thread scheduling.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Stream identities (the first part mixed into a derived seed).
pub const STREAM_WORLD: u64 = 1;
pub const STREAM_EPISODE: u64 = 2;
pub const STREAM_RUN: u64 = 3;
pub const STREAM_TASK: u64 = 4;

/// SplitMix64's finaliser applied to `a` combined with `b`: a cheap, well-spread hash of
/// two words (Steele, Lea and Flood 2014). Used only to derive seeds, not as a generator.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9E37_79B9_7F4A_7C15).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Folds several words into one seed.
pub fn derive(parts: &[u64]) -> u64 {
    parts.iter().fold(0x005E_ED0F_E915_0DE5, |acc, &p| mix(acc, p))
}

/// A seeded generator with the few distributions the generator needs.
pub struct Prng(ChaCha8Rng);

impl Prng {
    pub fn new(parts: &[u64]) -> Prng {
        Prng(ChaCha8Rng::seed_from_u64(derive(parts)))
    }

    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.f() < p
    }

    /// Uniform integer in `lo..=hi`.
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            self.0.random_range(lo..=hi)
        }
    }

    /// Uniform index in `0..n` (`n` > 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.int(0, n as u64 - 1) as usize
    }

    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }

    /// Log-uniform in [lo, hi): many small values, a long tail of large ones.
    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.f()).exp()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f(); // (0, 1]
        let u2 = self.f();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `k` distinct indices of `0..n`, in increasing order.
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + self.index(n - i);
            all.swap(i, j);
        }
        let mut out = all[..k].to_vec();
        out.sort_unstable();
        out
    }

    pub fn hex(&mut self, digits: usize) -> String {
        (0..digits).map(|_| char::from_digit(self.int(0, 15) as u32, 16).unwrap()).collect()
    }
}

pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Rounds to `places` decimals, so numbers in the output read like recorded values.
pub fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}
