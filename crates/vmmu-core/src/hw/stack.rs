//! Mattson stack distances per set: the miss count of an LRU array for every associativity at
//! once, from one pass over its lookups (Mattson, Gecsei, Slutz and Traiger, "Evaluation
//! techniques for storage hierarchies", IBM Systems Journal 9(2), 1970; per set for
//! set-associative arrays, Hill and Smith, IEEE Trans. Computers 38(12), 1989, §3).
//!
//! LRU has the inclusion property: after any sequence of lookups, each set of a `w`-way array
//! holds exactly the `w` most recently used distinct keys of that set. A lookup therefore hits
//! in a `w`-way array exactly when its key's *stack distance* — the number of distinct keys of
//! its set used since its own last use — is below `w`. Recording the histogram of distances up
//! to a largest associativity gives the misses of every smaller one: an array of `sets` sets
//! and `w` ways misses `lookups − Σ_{d<w} hist[d]` times.
//!
//! Where it applies: the set count is fixed (the capacities compared are `sets × w`), each
//! lookup that misses is followed by a fill of the same key, nothing removes an entry but LRU
//! eviction (or a flush of the whole array, which empties every size alike), and the sequence
//! of lookups does not depend on the array's size — an L2 TLB's lookups are the L1 misses,
//! which its own hits do not change. It does not apply where one entry is invalidated (an
//! INVLPG: the smaller arrays have already evicted what the stack still ranks below it, so
//! inclusion breaks) or where the array's hits change its own later lookups (a page-walk cache
//! whose hits skip the upper-level lookups of a walk); there only separate runs are exact.

/// Stack-distance histograms of one set-associative LRU array, for every associativity up to
/// `max_ways` at a fixed set count.
#[derive(Clone, Debug)]
pub struct StackDistance {
    sets: usize,
    max_ways: usize,
    /// Per set, its keys most recently used first, at most `max_ways` of them.
    stacks: Vec<Vec<u64>>,
    /// `hist[d]`: lookups whose key had stack distance `d`.
    hist: Vec<u64>,
    lookups: u64,
}

impl StackDistance {
    /// Histograms for an array of `sets` sets and up to `max_ways` ways (both at least 1).
    pub fn new(sets: usize, max_ways: usize) -> Self {
        let sets = sets.max(1);
        let max_ways = max_ways.max(1);
        StackDistance {
            sets,
            max_ways,
            stacks: vec![Vec::new(); sets],
            hist: vec![0; max_ways],
            lookups: 0,
        }
    }

    /// The set count.
    pub fn sets(&self) -> usize {
        self.sets
    }

    /// The largest associativity answered.
    pub fn max_ways(&self) -> usize {
        self.max_ways
    }

    /// Lookups recorded.
    pub fn lookups(&self) -> u64 {
        self.lookups
    }

    /// A lookup of `key` in `set` (then a fill of it where it misses, as an LRU array does).
    pub fn lookup(&mut self, set: usize, key: u64) {
        self.lookups += 1;
        let stack = &mut self.stacks[set % self.sets];
        match stack.iter().position(|&k| k == key) {
            Some(d) => {
                self.hist[d] += 1;
                stack[..=d].rotate_right(1);
            }
            None => {
                if stack.len() == self.max_ways {
                    stack.pop();
                }
                stack.insert(0, key);
            }
        }
    }

    /// Misses of the same lookups in an LRU array of this set count and `ways` ways, or
    /// `None` when `ways` is 0 or above [`max_ways`](Self::max_ways).
    pub fn misses(&self, ways: usize) -> Option<u64> {
        if ways == 0 || ways > self.max_ways {
            return None;
        }
        Some(self.lookups - self.hist[..ways].iter().sum::<u64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::lru::SetAssoc;
    use proptest::prelude::*;

    /// Misses of `keys` in a real LRU array of `sets` × `ways`.
    fn separate_run(keys: &[u64], sets: usize, ways: usize) -> u64 {
        let mut a = SetAssoc::<()>::new(sets * ways, ways, ());
        let mut misses = 0;
        for &k in keys {
            let set = a.set_of(k);
            match a.find(set, k, |_| true) {
                Some(w) => {
                    a.touch(set, w);
                }
                None => {
                    misses += 1;
                    a.insert(set, k, ());
                }
            }
        }
        misses
    }

    fn one_pass(keys: &[u64], sets: usize, max_ways: usize) -> StackDistance {
        let mut s = StackDistance::new(sets, max_ways);
        for &k in keys {
            s.lookup(k as usize % sets, k);
        }
        s
    }

    #[test]
    fn a_cyclic_sweep_of_n_keys_misses_everywhere_below_n_ways_and_only_cold_from_n() {
        // The textbook LRU pathology: 5 keys in a loop thrash 4 ways, fit in 5.
        let keys: Vec<u64> = (0..50).map(|i| 1 + i % 5).collect();
        let s = one_pass(&keys, 1, 8);
        assert_eq!(s.misses(4), Some(50));
        assert_eq!(s.misses(5), Some(5));
        assert_eq!(s.misses(8), Some(5));
        assert_eq!(s.misses(0), None);
        assert_eq!(s.misses(9), None);
    }

    proptest! {
        #[test]
        fn one_pass_equals_a_separate_run_for_every_associativity(
            keys in proptest::collection::vec(1u64..200, 0..400),
            sets in prop::sample::select(vec![1usize, 2, 4, 8]),
        ) {
            let s = one_pass(&keys, sets, 16);
            for ways in 1..=16 {
                prop_assert_eq!(s.misses(ways), Some(separate_run(&keys, sets, ways)), "{} ways", ways);
            }
        }
    }
}
