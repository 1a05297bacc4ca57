//! Random draws for the generators: bounded integers, Zipf ranks, and a seeded permutation.
//!
//! All draws come from one `Xoshiro256PlusPlus` per generator (a few cycles per 64-bit word),
//! so a specification and its seed fix the stream bit for bit.
//!
//! - Bounded integers use the multiply-high reduction (Lemire, "Fast random integer generation
//!   in an interval", 2019) without the rejection step: the bias is below 2^-64 × n, far below
//!   anything a simulation can see, and it keeps a draw branch-free.
//! - Zipf ranks use rejection-inversion sampling (Hörmann and Derflinger, "Rejection-inversion
//!   to generate variates from monotone discrete distributions", 1996), as in Apache Commons
//!   RNG: O(1) per draw for any number of elements, no tables.
//! - [`Scatter`] is a bijection on `[0, n)` (a 4-round Feistel network on the next even power
//!   of two, with cycle walking) that spreads ranks over a footprint without a table, so a
//!   terabyte footprint costs no memory.

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A uniform integer in `[0, n)` (`n` > 0).
#[inline(always)]
pub(crate) fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

/// A uniform real in `[0, 1)` with 53 random bits.
#[inline(always)]
pub(crate) fn unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Zipf-distributed ranks in `1..=n` with exponent `alpha` ≥ 0: P(k) ∝ k^-alpha.
#[derive(Clone, Debug)]
pub(crate) struct Zipf {
    n: f64,
    alpha: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    /// A sampler over `n` ≥ 1 elements.
    pub fn new(n: u64, alpha: f64) -> Zipf {
        let mut z = Zipf {
            n: n as f64,
            alpha,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// One rank in `1..=n`.
    #[inline]
    pub fn sample(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        loop {
            let u = self.h_integral_n + unit(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.alpha * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.alpha) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.alpha)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1+x)/x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1)/x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// A seeded bijection on `[0, n)`.
#[derive(Clone, Debug)]
pub(crate) struct Scatter {
    n: u64,
    half_bits: u32,
    half_mask: u64,
    keys: [u64; 4],
}

impl Scatter {
    /// A permutation of `[0, n)` (`n` ≥ 1) chosen by `rng`.
    pub fn new(n: u64, rng: &mut Xoshiro256PlusPlus) -> Scatter {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        Scatter {
            n,
            half_bits,
            half_mask: (1u64 << half_bits) - 1,
            keys: [
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
            ],
        }
    }

    /// The image of `x` < n.
    #[inline]
    pub fn apply(&self, mut x: u64) -> u64 {
        // Cycle walking: the Feistel network permutes [0, 4^half_bits) ⊇ [0, n); re-applying it
        // to an image outside [0, n) stays on x's cycle and so ends inside, a bijection on n.
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x;
            }
        }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mut l = x >> self.half_bits;
        let mut r = x & self.half_mask;
        for k in self.keys {
            let f = (r ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let f = (f ^ (f >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 17;
            (l, r) = (r, l ^ (f & self.half_mask));
        }
        (l << self.half_bits) | r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn scatter_is_a_permutation() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for n in [1u64, 2, 3, 5, 64, 1000, 4097] {
            let s = Scatter::new(n, &mut rng);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.apply(x);
                assert!(y < n);
                assert!(!seen[y as usize], "n={n}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn zipf_ranks_follow_the_law() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let z = Zipf::new(1000, 1.0);
        let mut counts = [0u32; 4];
        for _ in 0..200_000 {
            let k = z.sample(&mut rng);
            assert!((1..=1000).contains(&k));
            if k <= 3 {
                counts[k as usize] += 1;
            }
        }
        // P(1) : P(2) : P(3) = 1 : 1/2 : 1/3 for alpha = 1.
        let r2 = counts[1] as f64 / counts[2] as f64;
        let r3 = counts[1] as f64 / counts[3] as f64;
        assert!((r2 - 2.0).abs() < 0.1, "{r2}");
        assert!((r3 - 3.0).abs() < 0.15, "{r3}");
    }

    #[test]
    fn zipf_with_alpha_zero_is_uniform() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let z = Zipf::new(4, 0.0);
        let mut counts = [0u32; 5];
        for _ in 0..40_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        for c in &counts[1..] {
            assert!((*c as i64 - 10_000).abs() < 500, "{counts:?}");
        }
    }
}
