//! Random draws for the generators: bounded integers, Zipf ranks, and a seeded permutation.
//!
//! All draws come from one `Xoshiro256PlusPlus` per generator (a few cycles per 64-bit word),
//! so a specification and its seed fix the stream bit for bit.
//!
//! - Bounded integers use the multiply-high reduction (Lemire, "Fast random integer generation
//!   in an interval", 2019) without the rejection step: the bias is below 2^-64 × n, far below
//!   anything a simulation can see, and it keeps a draw branch-free.
//! - Zipf ranks come from a table of quantiles of the law (built once from its partial sums):
//!   one draw and one table read per rank, for any number of elements.
//! - [`Scatter`] is a bijection on `[0, n)` (an invertible integer mix on the next power of two,
//!   with cycle walking) that spreads ranks over a footprint without a table, so a terabyte
//!   footprint costs no memory.

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A uniform integer in `[0, n)` (`n` > 0).
#[inline(always)]
pub(crate) fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    ((rng.next_u64() as u128 * n as u128) >> 64) as u64
}

/// Zipf-distributed ranks in `1..=n` with exponent `alpha` ≥ 0: P(k) ∝ k^-alpha, sampled
/// from a table of [`Zipf::QUANTILES`] quantiles (64 KiB).
///
/// A draw picks a quantile (each holds 1/QUANTILES of the probability mass), then a rank
/// uniformly inside it: no transcendental function per draw, a few nanoseconds. It is exact
/// to 1/QUANTILES of mass per quantile; within a quantile ranks are taken as equally likely.
/// Where one rank holds several quantiles (the head) that is exact; for alpha near 1 a
/// quantile spans ranks whose probabilities differ by well under 1%; only the far tail of a
/// steep law (alpha ≥ 2), a few quantiles' worth of mass, is spread flatter than the law.
#[derive(Clone, Debug)]
pub(crate) struct Zipf {
    /// `bounds[j]` is the first rank of quantile j; `bounds[QUANTILES]` = n + 1.
    bounds: Vec<u64>,
}

impl Zipf {
    /// Quantiles of the table.
    pub const QUANTILES: usize = 8192;
    const SHIFT: u32 = 64 - 13;

    /// A sampler over `n` ≥ 1 elements.
    pub fn new(n: u64, alpha: f64) -> Zipf {
        let partial = PartialSums::new(n, alpha);
        let total = partial.sum(n);
        let mut bounds = Vec::with_capacity(Self::QUANTILES + 1);
        let mut lo = 1u64;
        for j in 0..Self::QUANTILES {
            // The rank where the CDF first exceeds j/Q: the first rank of quantile j.
            let target = total * j as f64 / Self::QUANTILES as f64;
            let mut hi = n;
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if partial.sum(mid) > target {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            bounds.push(lo.max(bounds.last().copied().unwrap_or(1)));
        }
        bounds.push(n + 1);
        Zipf { bounds }
    }

    /// One rank in `1..=n`.
    #[inline]
    pub fn sample(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let r = rng.next_u64();
        let j = (r >> Self::SHIFT) as usize;
        let (lo, hi) = (self.bounds[j], self.bounds[j + 1]);
        if hi <= lo + 1 {
            return lo;
        }
        // The low 51 bits are independent of the quantile's 13: a uniform offset.
        lo + (((r << 13) as u128 * (hi - lo) as u128) >> 64) as u64
    }
}

/// Generalized harmonic partial sums S(k) = Σ_{i ≤ k} i^-alpha: exact for the first
/// `EXACT` ranks, then the midpoint integral (error far below a quantile's mass).
struct PartialSums {
    alpha: f64,
    exact: Vec<f64>,
}

impl PartialSums {
    const EXACT: u64 = 4096;

    fn new(n: u64, alpha: f64) -> PartialSums {
        let m = n.min(Self::EXACT);
        let mut exact = Vec::with_capacity(m as usize + 1);
        let mut s = 0.0;
        exact.push(0.0);
        for i in 1..=m {
            s += (i as f64).powf(-alpha);
            exact.push(s);
        }
        PartialSums { alpha, exact }
    }

    /// ∫ x^-alpha dx from 1 to x.
    fn integral(&self, x: f64) -> f64 {
        if (self.alpha - 1.0).abs() < 1e-12 {
            x.ln()
        } else {
            (x.powf(1.0 - self.alpha) - 1.0) / (1.0 - self.alpha)
        }
    }

    fn sum(&self, k: u64) -> f64 {
        let m = self.exact.len() as u64 - 1;
        if k <= m {
            return self.exact[k as usize];
        }
        self.exact[m as usize] + self.integral(k as f64 + 0.5) - self.integral(m as f64 + 0.5)
    }
}

/// A seeded bijection on `[0, n)`: an invertible mix (xor-shifts and odd multiplications)
/// on the next power of two, with cycle walking back into `[0, n)`.
#[derive(Clone, Debug)]
pub(crate) struct Scatter {
    n: u64,
    mask: u64,
    shift: u32,
    keys: [u64; 3],
}

impl Scatter {
    /// A permutation of `[0, n)` (`n` ≥ 1) chosen by `rng`.
    pub fn new(n: u64, rng: &mut Xoshiro256PlusPlus) -> Scatter {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(2);
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        Scatter {
            n,
            mask,
            shift: bits.div_ceil(2),
            keys: [rng.next_u64(), rng.next_u64() | 1, rng.next_u64() | 1],
        }
    }

    /// The image of `x` < n.
    #[inline]
    pub fn apply(&self, mut x: u64) -> u64 {
        // Each step is a bijection on [0, 2^bits): xor with a key, x ^= x >> s, multiplication
        // by an odd number modulo 2^bits. Re-applying the mix to an image outside [0, n) walks
        // x's cycle, which returns into [0, n): a bijection on [0, n).
        loop {
            x = (x ^ self.keys[0]) & self.mask;
            x ^= x >> self.shift;
            x = x.wrapping_mul(self.keys[1]) & self.mask;
            x ^= x >> self.shift;
            x = x.wrapping_mul(self.keys[2]) & self.mask;
            x ^= x >> self.shift;
            if x < self.n {
                return x;
            }
        }
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
    fn zipf_quantiles_match_the_law_in_a_long_tail() {
        // alpha = 1 over 10^6 ranks: P(rank ≤ k) = H_k / H_n.
        let n = 1_000_000u64;
        let h = |k: u64| (1..=k).map(|i| 1.0 / i as f64).sum::<f64>();
        let hn = h(n);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let z = Zipf::new(n, 1.0);
        let draws = 400_000;
        let mut le = [0u32; 3];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            for (i, bound) in [10u64, 1000, 100_000].iter().enumerate() {
                if k <= *bound {
                    le[i] += 1;
                }
            }
        }
        for (i, bound) in [10u64, 1000, 100_000].iter().enumerate() {
            let want = h(*bound) / hn;
            let got = le[i] as f64 / draws as f64;
            assert!(
                (got - want).abs() < 0.004,
                "P(k ≤ {bound}): {got} vs {want}"
            );
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
